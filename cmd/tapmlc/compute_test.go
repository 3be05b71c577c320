package main

import (
	"os"
	"path/filepath"
	goruntime "runtime"
	"strings"
	"sync"
	"testing"
)

// --compute f16 end to end on the vulkan target (lavapipe here):
// stories260K prints the reference's story, cases carved under f16 pass
// on vulkan (f16) and on webgpu (which says it computes in f32), their f16
// MSL kernels pass the syntax check, and migrate ends identical within its
// thresholds.
func TestComputeF16(t *testing.T) {
	dir := models(t)
	model, tok := filepath.Join(dir, "stories260K.bin"), filepath.Join(dir, "tok512.bin")
	gen := []string{"--tokenizer", tok, "--prompt", "Once upon a time", "--steps", "48", "--temperature", "0"}
	emulated := tapmlc(t, append([]string{"run", model, "--target", "cpu", "--compute", "f16"}, gen...)...)
	onVulkan := tapmlc(t, append([]string{"run", model, "--target", "vulkan", "--compute", "f16"}, gen...)...)
	if emulated.code != 0 || onVulkan.code != 0 {
		t.Fatalf("run: exit %d / %d: %s %s", emulated.code, onVulkan.code, emulated.stderr, onVulkan.stderr)
	}
	if !strings.HasPrefix(onVulkan.stdout, "Once upon a time, there was a little girl named Lily.") || onVulkan.stdout != emulated.stdout {
		t.Errorf("vulkan f16 printed %q, the reference emulating f16 %q", onVulkan.stdout, emulated.stdout)
	}

	bundle := carvedF16Bundle(t)
	manifest, err := os.ReadFile(filepath.Join(bundle, "manifest.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(manifest), "\n    compute: f16\n") || !strings.Contains(string(manifest), "f16 compute: + one f16 ulp") {
		t.Error("the carved cases do not record compute f16 and the f16 tolerance")
	}
	if r := tapmlc(t, "test", bundle, "--target", "vulkan"); r.code != 0 {
		t.Errorf("test on vulkan: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := tapmlc(t, "test", bundle, "--target", "webgpu"); r.code != 0 || !strings.Contains(r.stderr, "computing in f32") {
		t.Errorf("test on webgpu: exit %d, want 0 and a note that it computes in f32\n%s", r.code, r.stderr)
	}
	// Off macOS metal syntax-checks the kernels it would run: at f16.
	if goruntime.GOOS != "darwin" {
		r := tapmlc(t, "test", bundle, "--target", "metal")
		if r.code != 0 || !strings.Contains(r.stdout, "Metal kernels (compute f16) of") || strings.Contains(r.stderr, "computing in f32") {
			t.Errorf("test on metal: exit %d, want 0 and the f16 kernels checked\n%s%s", r.code, r.stdout, r.stderr)
		}
	}
	r := tapmlc(t, append([]string{"migrate", model, "--target", "vulkan", "--compute", "f16"}, gen[:6]...)...)
	if r.code != 0 || !strings.Contains(r.stdout, "result: identical") {
		t.Errorf("migrate --compute f16: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := tapmlc(t, "run", "--compute", "f8"); r.code != 1 || !strings.Contains(r.stderr, `"f8": want f32 or f16`) {
		t.Errorf("--compute f8: exit %d: %s", r.code, r.stderr)
	}
}

var (
	f16BundleOnce sync.Once
	f16BundlePath string
	f16BundleErr  string
)

// carvedF16Bundle carves stories260K under --compute f16 once per test
// binary (48 steps).
func carvedF16Bundle(t *testing.T) string {
	t.Helper()
	dir := models(t)
	f16BundleOnce.Do(func() {
		tmp, err := os.MkdirTemp("", "tapml-f16-bundle")
		if err != nil {
			f16BundleErr = err.Error()
			return
		}
		f16BundlePath = filepath.Join(tmp, "f16")
		r := tapmlc(t, "carve", filepath.Join(dir, "stories260K.bin"), "--compute", "f16", "--tokenizer", filepath.Join(dir, "tok512.bin"),
			"--prompt", "Once upon a time", "--steps", "48", "-o", f16BundlePath)
		if r.code != 0 {
			f16BundleErr = r.stderr
		}
	})
	if f16BundleErr != "" {
		t.Fatalf("carve --compute f16: %s", f16BundleErr)
	}
	return f16BundlePath
}
