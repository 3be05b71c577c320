package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// --compute f16 end to end on the vulkan target (lavapipe here):
// stories260K prints the reference's story, cases carved under f16 pass
// on vulkan (f16) and on webgpu (which says it computes in f32), and
// migrate ends identical within its thresholds.
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

	bundle := filepath.Join(t.TempDir(), "f16")
	if r := tapmlc(t, append([]string{"carve", model, "--compute", "f16", "-o", bundle}, gen[:6]...)...); r.code != 0 {
		t.Fatalf("carve --compute f16: exit %d: %s", r.code, r.stderr)
	}
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
	r := tapmlc(t, append([]string{"migrate", model, "--target", "vulkan", "--compute", "f16"}, gen[:6]...)...)
	if r.code != 0 || !strings.Contains(r.stdout, "result: identical") {
		t.Errorf("migrate --compute f16: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := tapmlc(t, "run", "--compute", "f8"); r.code != 1 || !strings.Contains(r.stderr, `"f8": want f32 or f16`) {
		t.Errorf("--compute f8: exit %d: %s", r.code, r.stderr)
	}
}
