package passes

import (
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/tapml/tapml/ir"
	"github.com/tapml/tapml/tensor"
)

var update = flag.Bool("update", false, "rewrite the expected outputs under testdata/")

// TestGolden runs each pass on the IR text files under testdata/<pass>/.
// A case is <name>.tir; its expected output is <name>.out.tir (the module
// after the pass) or <name>.err (the error). Header comments of the input
// set the pass's options and, for legalize, the supported ops:
//
//	// options: {max_inputs: 3}
//	// supports: add, mul
//
// Run with -update to rewrite the expected files.
func TestGolden(t *testing.T) {
	for _, pass := range All() {
		files, _ := filepath.Glob(filepath.Join("testdata", pass.Name, "*.tir"))
		var inputs []string
		for _, f := range files {
			if !strings.HasSuffix(f, ".out.tir") {
				inputs = append(inputs, f)
			}
		}
		if len(inputs) == 0 {
			t.Errorf("pass %s has no golden tests under testdata/%s/", pass.Name, pass.Name)
			continue
		}
		for _, in := range inputs {
			name := strings.TrimSuffix(filepath.Base(in), ".tir")
			t.Run(pass.Name+"/"+name, func(t *testing.T) {
				runGolden(t, pass, in)
			})
		}
	}
}

func runGolden(t *testing.T, pass *Pass, path string) {
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	opts := Options{}
	for _, line := range strings.Split(string(src), "\n") {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "//") {
			continue
		}
		line = strings.TrimSpace(strings.TrimPrefix(line, "//"))
		switch {
		case strings.HasPrefix(line, "options:"):
			y := "passes:\n  - " + pass.Name + ": " + strings.TrimSpace(strings.TrimPrefix(line, "options:")) + "\n"
			p, err := parseUnchecked(path, []byte(y))
			if err != nil {
				t.Fatalf("options header: %v", err)
			}
			opts = p.Steps[0].Options
		case strings.HasPrefix(line, "supports:"):
			var ops []string
			for _, s := range strings.Split(strings.TrimPrefix(line, "supports:"), ",") {
				if s = strings.TrimSpace(s); s != "" {
					ops = append(ops, s)
				}
			}
			opts["supports"] = func(op ir.Op) bool { return slices.Contains(ops, op.String()) }
			opts["target"] = "testgpu"
		}
	}
	m, err := ir.Parse(path, string(src))
	if err != nil {
		t.Fatal(err)
	}
	attachRamps(m)
	base := strings.TrimSuffix(path, ".tir")
	runErr := runPass(pass, m, withDefaults(pass, opts))
	if runErr == nil {
		if err := ir.Verify(m); err != nil {
			t.Fatalf("module does not verify after %s: %v\n%s", pass.Name, err, ir.Text(m))
		}
		// The output must parse back to the same module.
		if m2, err := ir.Parse("out", ir.Text(m)); err != nil {
			t.Fatalf("output does not parse: %v\n%s", err, ir.Text(m))
		} else if ir.Text(m2) != ir.Text(m) {
			t.Fatalf("output does not round trip")
		}
	}
	var got, want, wantFile string
	if runErr != nil {
		got, wantFile = runErr.Error()+"\n", base+".err"
	} else {
		got, wantFile = ir.Text(m), base+".out.tir"
	}
	if *update {
		os.Remove(base + ".err")
		os.Remove(base + ".out.tir")
		if err := os.WriteFile(wantFile, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	b, err := os.ReadFile(wantFile)
	if err != nil {
		if runErr != nil {
			t.Fatalf("pass failed: %v", runErr)
		}
		t.Fatalf("no expected output %s (run with -update): %v", wantFile, err)
	}
	want = string(b)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("%s: output differs (-want +got):\n%s", path, diff)
	}
}

// attachRamps gives every weight without data the elements 0, 1, 2, ...
// (as f32) so that passes that read weights can run on parsed modules.
func attachRamps(m *ir.Module) {
	for _, w := range m.Weights {
		if w.Source != nil {
			continue
		}
		n := int(w.Type.Shape.NumElements())
		t := tensor.New(w.Type.DType, w.Type.Shape.Sizes())
		for i := 0; i < n; i++ {
			t.SetFloat64At(i, float64(i))
		}
		w.Source = ir.BytesSource(t.Data)
	}
}
