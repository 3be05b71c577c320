package artifact

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/tapml/tapml/codegen"
	"github.com/tapml/tapml/frontend/arch"
	"github.com/tapml/tapml/frontend/arch/llama"
	"github.com/tapml/tapml/ir"
	"github.com/tapml/tapml/runtime"
	"github.com/tapml/tapml/runtime/cpu"
	"github.com/tapml/tapml/runtime/llm"
)

func tiny(t testing.TB) *ir.Module {
	t.Helper()
	m, err := arch.Build("tiny", llama.Tiny, llama.RandomWeights(llama.Tiny, 3))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func cpuOpts(out string) CompileOptions {
	return CompileOptions{Target: "cpu", Supports: cpu.Supports, Out: out, Source: "builtin"}
}

// logits runs prefill of a short prompt and three decode steps.
func logits(t *testing.T, m *ir.Module, onProbe func()) [][]float32 {
	t.Helper()
	exec := runtime.NewExecutor(m, cpu.New())
	defer exec.Close()
	if onProbe != nil {
		exec.OnProbe = func(*ir.Node, *runtime.Buffer) error { onProbe(); return nil }
	}
	s, err := llm.NewSession(exec)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var out [][]float32
	for _, toks := range [][]int{{1, 72, 101, 108}, {108}, {111}, {32}} {
		l, err := s.Forward(toks)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, append([]float32(nil), l...))
	}
	return out
}

func TestRoundTrip(t *testing.T) {
	m := tiny(t)
	want := logits(t, m, nil)
	dir := filepath.Join(t.TempDir(), "build")
	rep, man, err := Compile(m, cpuOpts(dir))
	if err != nil {
		t.Fatal(err)
	}
	if rep.Steps[len(rep.Steps)-1].NodesAfter >= rep.Steps[0].NodesBefore {
		t.Error("the pipeline did not shrink the module")
	}
	lm, lman, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(man, lman); diff != "" {
		t.Errorf("loaded manifest differs (-written +loaded):\n%s", diff)
	}
	var paths []string
	for _, f := range lman.Files {
		paths = append(paths, f.Path)
	}
	if diff := cmp.Diff([]string{ModelFile, WeightsFile}, paths); diff != "" {
		t.Errorf("files (-want +got):\n%s", diff)
	}
	if lman.Format != FormatVersion || lman.Target != "cpu" || lman.Probed || len(lman.Pipeline) != 12 || lman.Model.Name != "tiny" {
		t.Errorf("manifest: %+v", lman)
	}
	if lm.Meta["target"] != "cpu" || countOp(lm, ir.OpFusedElementwise) != 2 || countOp(lm, ir.OpRMSNormSwiGLU) != 2 {
		t.Errorf("loaded module is not the lowered one:\n%.400s", ir.Text(lm))
	}
	// Same CPU outputs as the original model (the default pipeline is exact
	// on the CPU reference).
	got := logits(t, lm, nil)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("logits of the loaded build differ from the model's:\n%.2000s", diff)
	}
}

func countOp(m *ir.Module, op ir.Op) int {
	n := 0
	for _, f := range m.Funcs {
		for _, nd := range f.Nodes {
			if nd.Op == op {
				n++
			}
		}
	}
	return n
}

func TestProbedBuild(t *testing.T) {
	m := tiny(t)
	root := t.TempDir()
	plainDir, probedDir := filepath.Join(root, "plain"), filepath.Join(root, "probed")
	if _, _, err := Compile(m, cpuOpts(plainDir)); err != nil {
		t.Fatal(err)
	}
	o := cpuOpts(probedDir)
	o.Probe = true
	if _, _, err := Compile(m, o); err != nil {
		t.Fatal(err)
	}
	text, _ := os.ReadFile(filepath.Join(probedDir, ModelFile))
	if !bytes.Contains(text, []byte(`probe(`)) || !bytes.Contains(text, []byte(`{tag = "n`)) {
		t.Fatal("model.tir of a probed build shows no probes")
	}
	plain, _, err := Load(plainDir)
	if err != nil {
		t.Fatal(err)
	}
	probed, man, err := Load(probedDir)
	if err != nil {
		t.Fatal(err)
	}
	if !man.Probed || man.Pipeline[len(man.Pipeline)-2].Name != "probe" {
		t.Errorf("manifest does not record the probe pass: %+v", man.Pipeline)
	}
	calls := 0
	a, b := logits(t, plain, nil), logits(t, probed, func() { calls++ })
	if diff := cmp.Diff(a, b); diff != "" {
		t.Errorf("probed build's logits differ:\n%.2000s", diff)
	}
	if calls == 0 {
		t.Error("no probe fired")
	}
}

func TestModelProvenance(t *testing.T) {
	root := t.TempDir()
	src := filepath.Join(root, "model.bin")
	os.WriteFile(src, []byte("pretend model"), 0o644)
	o := cpuOpts(filepath.Join(root, "build"))
	o.Source = src
	_, man, err := Compile(tiny(t), o)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte("pretend model"))
	if man.Model.Source != src || man.Model.SHA256 != hex.EncodeToString(sum[:]) {
		t.Errorf("model provenance %+v", man.Model)
	}
	o.Source = filepath.Join(root, "missing.bin")
	o.Out = filepath.Join(root, "build2")
	if _, _, err := Compile(tiny(t), o); err == nil {
		t.Error("compile of a missing source file succeeded")
	}
	if _, err := os.Stat(o.Out); !errors.Is(err, os.ErrNotExist) {
		t.Error("a failed compile left a folder")
	}
}

func compileGood(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "build")
	if _, _, err := Compile(tiny(t), cpuOpts(dir)); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestCorruption(t *testing.T) {
	tests := []struct {
		name  string
		spoil func(dir string)
		want  string // a substring of the error
	}{
		{"flipped weight byte", func(dir string) {
			p := filepath.Join(dir, WeightsFile)
			b, _ := os.ReadFile(p)
			b[len(b)-1] ^= 1
			os.WriteFile(p, b, 0o644)
		}, WeightsFile + ": corrupt: checksum sha256:"},
		{"truncated model", func(dir string) {
			p := filepath.Join(dir, ModelFile)
			b, _ := os.ReadFile(p)
			os.WriteFile(p, b[:len(b)/2], 0o644)
		}, ModelFile + ": corrupt: "},
		{"missing weights", func(dir string) { os.Remove(filepath.Join(dir, WeightsFile)) },
			WeightsFile + ": missing (listed in manifest.yaml)"},
		{"missing manifest", func(dir string) { os.Remove(filepath.Join(dir, ManifestFile)) },
			"not a tapml build folder: manifest.yaml is missing"},
		{"newer format", func(dir string) { editManifest(dir, "format: 1", "format: 2") },
			"build format version 2 is newer than this tapmlc reads (1); rebuild the folder with this tapmlc or upgrade tapmlc"},
		{"garbled manifest", func(dir string) { editManifest(dir, "files:", "files: [") }, "corrupt manifest"},
		{"unknown field", func(dir string) { editManifest(dir, "target: cpu", "target: cpu\ncolour: blue") }, "corrupt manifest"},
		{"escaping path", func(dir string) { editManifest(dir, "path: model.tir", "path: ../model.tir") }, `corrupt manifest: bad file path "../model.tir"`},
		{"no format", func(dir string) { editManifest(dir, "format: 1", "") }, "corrupt manifest: no format version"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := compileGood(t)
			tc.spoil(dir)
			_, _, err := Load(dir)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v\nwant an error containing %q", err, tc.want)
			}
		})
	}
}

func editManifest(dir, old, new string) {
	p := filepath.Join(dir, ManifestFile)
	b, _ := os.ReadFile(p)
	os.WriteFile(p, bytes.Replace(b, []byte(old), []byte(new), 1), 0o644)
}

type failingSource struct{}

func (failingSource) Bytes() ([]byte, error) { return nil, errors.New("disk on fire") }

func TestAtomicWrite(t *testing.T) {
	dir := compileGood(t)
	before, _ := os.ReadFile(filepath.Join(dir, ManifestFile))
	parent := filepath.Dir(dir)

	// A compile that fails in the pipeline leaves the good build alone.
	o := cpuOpts(dir)
	o.Supports = func(op ir.Op) bool { return op != ir.OpRope }
	if _, _, err := Compile(tiny(t), o); err == nil || !strings.Contains(err.Error(), "no kernel for 1 op(s)") {
		t.Fatalf("got %v", err)
	}
	// So does one that fails while writing (a weight cannot be read).
	m := tiny(t)
	m.Weights[0].Source = failingSource{}
	if _, _, err := Compile(m, cpuOpts(dir)); err == nil || !strings.Contains(err.Error(), "disk on fire") {
		t.Fatalf("got %v", err)
	}
	after, _ := os.ReadFile(filepath.Join(dir, ManifestFile))
	if !bytes.Equal(before, after) {
		t.Error("a failed compile changed the existing build")
	}
	if _, _, err := Load(dir); err != nil {
		t.Errorf("the existing build no longer loads: %v", err)
	}
	entries, _ := os.ReadDir(parent)
	if len(entries) != 1 {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Errorf("leftovers beside the build: %v", names)
	}

	// A successful compile replaces the build.
	o = cpuOpts(dir)
	o.Probe = true
	if _, _, err := Compile(tiny(t), o); err != nil {
		t.Fatal(err)
	}
	if _, man, err := Load(dir); err != nil || !man.Probed {
		t.Errorf("replaced build: probed=%v err=%v", man != nil && man.Probed, err)
	}
	if entries, _ := os.ReadDir(parent); len(entries) != 1 {
		t.Errorf("leftovers after replacing: %d entries", len(entries))
	}

	// A failed first compile leaves no folder at all.
	fresh := filepath.Join(parent, "fresh")
	if _, _, err := Compile(m, cpuOpts(fresh)); err == nil {
		t.Fatal("compile with an unreadable weight succeeded")
	}
	if _, err := os.Stat(fresh); !errors.Is(err, os.ErrNotExist) {
		t.Error("a failed compile left a folder")
	}
}

func TestRefusesToClobber(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("mine"), 0o644)
	_, _, err := Compile(tiny(t), cpuOpts(dir))
	if err == nil || !strings.Contains(err.Error(), "refusing to replace") {
		t.Errorf("got %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "notes.txt")); string(b) != "mine" {
		t.Error("the folder was touched")
	}
	// An empty folder is fine.
	empty := t.TempDir()
	if _, _, err := Compile(tiny(t), cpuOpts(empty)); err != nil {
		t.Error(err)
	}
}

// fakeEmitter makes one small kernel per static node, to test the hook.
func fakeEmitter() *StaticEmitter {
	return &StaticEmitter{Ext: "txt", Generate: func(n *ir.Node, in, out []ir.Type) (*codegen.Kernel, error) {
		k := &codegen.Kernel{Language: "fake", Op: n.Op, NodeID: n.ID, Entry: "main",
			Source: []byte("// " + ir.NodeText(n) + "\n"), WorkgroupSize: [3]int{64, 1, 1}, Grid: [3]int{1, 1, 1}}
		for i, t := range in {
			k.Bindings = append(k.Bindings, codegen.Binding{Index: i, Name: "in", Access: codegen.Read, Type: t, Input: i, Output: -1})
		}
		for i, t := range out {
			k.Bindings = append(k.Bindings, codegen.Binding{Index: len(in) + i, Name: "out", Access: codegen.Write, Type: t, Input: -1, Output: i})
		}
		return k, nil
	}}
}

func TestKernelHook(t *testing.T) {
	m := tiny(t)
	dir := filepath.Join(t.TempDir(), "build")
	o := cpuOpts(dir)
	o.Kernels = fakeEmitter()
	_, man, err := Compile(m, o)
	if err != nil {
		t.Fatal(err)
	}
	// Every node of decode has static shapes; prefill's depend on the
	// prompt length, except after the last-token slice.
	kernels := map[string]map[int]bool{"decode": {}, "prefill": {}}
	for _, k := range man.Kernels {
		kernels[k.Func][k.Node] = true
	}
	lm := mustLoad(t, dir)
	for _, n := range lm.Func("decode").Nodes {
		if !kernels["decode"][n.ID] {
			t.Errorf("no kernel for decode node %s", n)
		}
	}
	for _, n := range lm.Func("prefill").Nodes {
		static := n.Output().Type.Shape.IsStatic()
		for _, in := range n.Inputs {
			static = static && in.Type.Shape.IsStatic()
		}
		if kernels["prefill"][n.ID] != static {
			t.Errorf("prefill node %s: kernel %v, static shapes %v", n, kernels["prefill"][n.ID], static)
		}
	}
	_, lman, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	ks, err := LoadKernels(dir, lman)
	if err != nil {
		t.Fatal(err)
	}
	emitted, err := fakeEmitter().Emit(mustLoad(t, dir))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(emitted, ks); diff != "" {
		t.Errorf("kernels read back differ (-emitted +loaded):\n%s", diff)
	}
	if _, err := os.Stat(filepath.Join(dir, man.Kernels[0].File)); err != nil {
		t.Error(err)
	}
}

func mustLoad(t *testing.T, dir string) *ir.Module {
	m, _, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	return m
}
