package hf

import (
	"path/filepath"
	"slices"
	"testing"

	"github.com/tapml/tapml/carve"
	"github.com/tapml/tapml/frontend/tokenizer/bpe"
	"github.com/tapml/tapml/internal/testenv/targettest"
	"github.com/tapml/tapml/ir"
	"github.com/tapml/tapml/migrate"
)

// TestTransformersFixturesMethod applies the method to the architectures:
// it carves each fixture's run on the CPU reference, replays every case on
// every local GPU and native target, and migrates the model to webgpu,
// which must end identical. Replaying every fixture would take minutes on
// CI's CPU drivers, so it takes the fewest fixtures (in name order, each
// adding an op the earlier ones lack) that together use every op and
// attribute set the built fixtures use: each op's kernels are exercised
// with the values a real model of that architecture gives them.
func TestTransformersFixturesMethod(t *testing.T) {
	type fixture struct {
		dir   string
		model *ir.Module
		tok   *bpe.Tokenizer
		ops   []string
	}
	var all []fixture
	for _, dir := range fixtureDirs(t) {
		if !fixturesBuilt[filepath.Base(dir)] {
			continue
		}
		m, tok, err := Load(dir)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, fixture{dir: dir, model: m, tok: tok, ops: opVariants(m)})
	}
	covered := map[string]bool{}
	for _, f := range all {
		if !slices.ContainsFunc(f.ops, func(o string) bool { return !covered[o] }) {
			continue
		}
		for _, o := range f.ops {
			covered[o] = true
		}
		ref := readFixtureRef(t, f.dir)
		t.Run(filepath.Base(f.dir), func(t *testing.T) {
			prompt := ref.Prompt
			rec, err := carve.Carve(f.model, f.tok, carve.Options{Prompt: prompt, Steps: len(ref.PromptIDs) + 4})
			if err != nil {
				t.Fatal(err)
			}
			dir := filepath.Join(t.TempDir(), "tests")
			if _, err := rec.Write(dir); err != nil {
				t.Fatal(err)
			}
			b, err := carve.Open(dir)
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			for _, target := range targettest.Local[1:] {
				rep, err := b.Test(targettest.Device(t, target), carve.TestOptions{Target: target})
				if err != nil {
					t.Fatal(err)
				}
				for _, r := range rep.Results {
					if !r.Passed() {
						t.Errorf("%s: case %s (%s): %s %s", target, r.Case.ID, r.Case.Op, r.Status(), r.Err)
					}
				}
				t.Logf("%s: %s", target, rep.Summary())
			}
			d, err := migrate.New(f.model, f.tok, targettest.Device(t, "webgpu"), migrate.Options{
				Prompt: prompt, Steps: len(ref.PromptIDs) + 4, Target: "webgpu"})
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			rep, err := d.Run(migrate.Incremental)
			if err != nil {
				t.Fatal(err)
			}
			if rep.Outcome != migrate.OutcomeIdentical {
				t.Errorf("migrate to webgpu: %s", rep.Verdict())
			}
		})
	}
}

// opVariants lists a module's ops with the attributes that choose a kernel
// variant (integers, booleans and strings, not float constants),
// deduplicated.
func opVariants(m *ir.Module) []string {
	seen := map[string]bool{}
	var out []string
	for _, f := range m.Funcs {
		for _, n := range f.Nodes {
			key := n.Op.String()
			for _, k := range n.Attrs.Keys() {
				if a := n.Attrs[k]; a.Kind == ir.AttrInt || a.Kind == ir.AttrBool || a.Kind == ir.AttrString {
					key += " " + k + "=" + a.String()
				}
			}
			if !seen[key] {
				seen[key] = true
				out = append(out, key)
			}
		}
	}
	return out
}
