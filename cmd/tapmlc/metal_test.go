package main

import (
	"os"
	"path/filepath"
	goruntime "runtime"
	"strings"
	"testing"

	"github.com/tapml/tapml/artifact"
	"github.com/tapml/tapml/codegen/msl"
	"github.com/tapml/tapml/runtime"
)

// TestCompileMetal compiles stories260K for the metal target: the build
// folder lists one .metal kernel per node with static shapes (decode, and
// the prefill nodes whose shapes do not depend on the prompt length), each
// passing the MSL syntax check, and `run --target metal` says where the
// target runs, at f32 and at f16 (which metal takes: no note that it
// computes in f32).
func TestCompileMetal(t *testing.T) {
	compileMetal(t)
	if goruntime.GOOS != "darwin" {
		for _, compute := range []string{"f32", "f16"} {
			r := tapmlc(t, "run", "--target", "metal", "--steps", "3", "--compute", compute)
			if r.code == 0 || !strings.Contains(r.stderr, "the metal target runs on macOS; use compile --target metal to emit kernels") ||
				strings.Contains(r.stderr, "computing in f32") {
				t.Errorf("run --target metal --compute %s off macOS: exit %d, stderr %q", compute, r.code, r.stderr)
			}
		}
	}
}

// Under a 16 KiB buffer limit ($TAPML_MAX_BUFFER) compile splits the
// weights, the kernels of the split's nodes pass the syntax check too, and
// the build runs to the model's own text.
func TestCompileMetalSplit(t *testing.T) {
	t.Setenv(runtime.MaxBufferEnv, "16KiB")
	out := compileMetal(t)
	dir := models(t)
	args := []string{"--prompt", "Once upon a time", "--steps", "40", "--temperature", "0", "--target", "cpu"}
	want := tapmlc(t, append([]string{"run", filepath.Join(dir, "stories260K.bin"), "--tokenizer", filepath.Join(dir, "tok512.bin")}, args...)...)
	got := tapmlc(t, append([]string{"run", out}, args...)...)
	if got.code != 0 || got.stdout != want.stdout {
		t.Errorf("the split build: exit %d\ngot  %q\nwant %q\n%s", got.code, got.stdout, want.stdout, got.stderr)
	}
	// Under 8 KiB on webgpu the build's shards (read from its weights file
	// by range) are split again at run time.
	t.Setenv(runtime.MaxBufferEnv, "8KiB")
	args[len(args)-1] = "webgpu"
	got = tapmlc(t, append([]string{"run", out, "-v"}, args...)...)
	if got.code != 0 || got.stdout != want.stdout || !strings.Contains(got.stderr, "; split ") {
		t.Errorf("the split build on webgpu under 8 KiB: exit %d\ngot  %q\nwant %q\n%s", got.code, got.stdout, want.stdout, got.stderr)
	}
}

// compileMetal compiles stories260K for metal and checks the build's
// kernels; it returns the build folder.
func compileMetal(t *testing.T) string {
	t.Helper()
	dir := models(t)
	out := filepath.Join(t.TempDir(), "build")
	r := tapmlc(t, "compile", filepath.Join(dir, "stories260K.bin"), "--tokenizer", filepath.Join(dir, "tok512.bin"), "--target", "metal", "-o", out)
	if r.code != 0 {
		t.Fatalf("compile: exit %d: %s", r.code, r.stderr)
	}
	if split := strings.Contains(r.stderr, "split 16 weights over 16384 bytes"); split != (os.Getenv(runtime.MaxBufferEnv) != "") {
		t.Errorf("compile with $%s=%q: stderr %q", runtime.MaxBufferEnv, os.Getenv(runtime.MaxBufferEnv), r.stderr)
	}
	man, err := artifact.ReadManifest(out)
	if err != nil {
		t.Fatal(err)
	}
	if man.Target != "metal" || len(man.Kernels) == 0 {
		t.Fatalf("manifest: target %q, %d kernels", man.Target, len(man.Kernels))
	}
	ks, err := artifact.LoadKernels(out, man)
	if err != nil {
		t.Fatal(err)
	}
	funcs := map[string]int{}
	var srcs []msl.Source
	for i, k := range ks {
		mk := man.Kernels[i]
		if k.Kernel.Language != msl.Language || k.Kernel.Entry != msl.Entry || !strings.HasSuffix(mk.File, ".metal") {
			t.Errorf("kernel %s: language %q entry %q", mk.File, k.Kernel.Language, k.Kernel.Entry)
		}
		funcs[k.Func]++
		srcs = append(srcs, msl.Source{Name: mk.File, Src: k.Kernel.Source})
	}
	if funcs["decode"] == 0 {
		t.Errorf("no decode kernels: %v", funcs)
	}
	errs, err := msl.CheckAll(srcs)
	if err != nil {
		t.Fatal(err)
	}
	for i, e := range errs {
		if e != nil {
			t.Errorf("%s: %v", srcs[i].Name, e)
		}
	}
	t.Logf("%d kernels (%v) pass the syntax check", len(srcs), funcs)
	return out
}
