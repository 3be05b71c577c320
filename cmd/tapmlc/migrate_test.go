package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tapml/tapml/runtime"
)

// With no fault, stories260K migrates fully to webgpu with identical
// tokens: exit 0, and the reports say so.
func TestMigrateStories260KIdentical(t *testing.T) {
	dir := models(t)
	out := t.TempDir()
	js, html := filepath.Join(out, "m.json"), filepath.Join(out, "m.html")
	r := tapmlc(t, "migrate", filepath.Join(dir, "stories260K.bin"), "--tokenizer", filepath.Join(dir, "tok512.bin"),
		"--target", "webgpu", "--prompt", "Once upon a time", "--steps", "12", "--json", js, "--html", html)
	if r.code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	if !strings.Contains(r.stdout, "result: identical: with all 151 candidate nodes on webgpu") {
		t.Errorf("stdout:\n%s", r.stdout)
	}
	var j struct {
		Identical bool   `json:"identical"`
		Strategy  string `json:"strategy"`
		Points    []any  `json:"points"`
	}
	data, err := os.ReadFile(js)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &j); err != nil {
		t.Fatal(err)
	}
	if !j.Identical || j.Strategy != "incremental" || len(j.Points) != 13 {
		t.Errorf("JSON: identical %v, strategy %s, %d points (want true, incremental, 13 op steps: no add left after fuse_residual; rms_norm_matmul, rms_norm_swiglu, rms_norm_qkv and rope_kv_write after fuse_norm, fuse_swiglu, fuse_qkv and fuse_rope_kv)", j.Identical, j.Strategy, len(j.Points))
	}
	h, err := os.ReadFile(html)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(h), "<svg") || !strings.Contains(string(h), "identical") {
		t.Error("HTML report lacks the plots or the verdict")
	}
}

// Under a 16 KiB buffer limit the weights are split before the migration
// places nodes (391 candidates where the unsplit model has 151), and the
// split model still migrates with identical tokens.
func TestMigrateSplitWeights(t *testing.T) {
	t.Setenv(runtime.MaxBufferEnv, "16KiB")
	dir := models(t)
	r := tapmlc(t, "migrate", filepath.Join(dir, "stories260K.bin"), "--tokenizer", filepath.Join(dir, "tok512.bin"),
		"--target", "webgpu", "--prompt", "Once upon a time", "--steps", "6")
	if r.code != 0 || !strings.Contains(r.stdout, "result: identical: with all 391 candidate nodes on webgpu") {
		t.Errorf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
}

// A fault injected into every matmul kernel: bisect names the first
// matmul node (exit 1) and writes a regression bundle that 'tapmlc test'
// replays. On vulkan the faulted kernels are the same WGSL kernels,
// translated to SPIR-V.
func TestMigrateInjectBisect(t *testing.T) {
	dir := models(t)
	for _, tgt := range []string{"webgpu", "vulkan"} {
		reg := filepath.Join(t.TempDir(), "reg")
		r := tapmlc(t, "migrate", filepath.Join(dir, "stories260K.bin"), "--tokenizer", filepath.Join(dir, "tok512.bin"),
			"--target", tgt, "--prompt", "Once upon a time", "--steps", "10", "--strategy", "bisect",
			"--inject", "op=matmul,fault=wrong_index", "--regression", reg)
		if r.code != 1 {
			t.Fatalf("%s: exit %d, want 1\nstdout:\n%s\nstderr:\n%s", tgt, r.code, r.stdout, r.stderr)
		}
		for _, want := range []string{"culprit: node 3 matmul  prov layers.0.attention.wq  @prefill", "kernel bug", "regression bundle: " + reg} {
			if !strings.Contains(r.stdout, want) {
				t.Errorf("%s: stdout lacks %q:\n%s", tgt, want, r.stdout)
			}
		}
		if r := tapmlc(t, "test", reg, "--target", "cpu"); r.code != 0 {
			t.Errorf("%s: tapmlc test of the regression bundle: exit %d\n%s%s", tgt, r.code, r.stdout, r.stderr)
		}
	}
}

// Failures of the command itself exit 2.
func TestMigrateBadInputs(t *testing.T) {
	dir := models(t)
	model := filepath.Join(dir, "stories260K.bin")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--strategy", "sideways", "--target", "cpu"}, "--strategy"},
		{[]string{"--target", "cpu", "--inject", "op=matmul,fault=wrong_index"}, "only on the webgpu, vulkan, remote: and llvm targets"},
		{[]string{"--target", "cpu", "--inject", "op=matmul"}, "no fault="},
		// Remote devices take faults (runtime/target.Injectable): the
		// command gets as far as connecting.
		{[]string{"--target", "remote:ws://127.0.0.1:1", "--inject", "op=matmul,fault=wrong_index"}, "cannot connect"},
		{[]string{"--no-such-flag"}, "unknown flag"},
		{[]string{"a", "b", "--target", "cpu"}, "at most one MODEL"},
		{[]string{filepath.Join(dir, "missing.bin"), "--target", "cpu"}, "missing.bin"},
		{[]string{model, "--target", "cpu"}, "tokenizer"},
		{[]string{"--target", "nowhere"}, "unknown target"},
		{[]string{"--target", "cpu", "--max-kl", "-1"}, "--max-kl -1: must be a finite number >= 0"},
		{[]string{"--target", "cpu", "--max-logit-err", "NaN"}, "--max-logit-err NaN: must be"},
		{[]string{"--target", "cpu", "--steps", "-3"}, "--steps -3: must be"},
	} {
		r := tapmlc(t, append([]string{"migrate"}, tc.args...)...)
		if r.code != 2 || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("migrate %v: exit %d, stderr %q; want 2 and %q", tc.args, r.code, r.stderr, tc.want)
		}
	}
}

// The built-in model migrates to the CPU target trivially.
func TestMigrateBuiltinCPU(t *testing.T) {
	r := tapmlc(t, "migrate", "--target", "cpu", "--prompt", "hi", "--steps", "6", "--strategy", "bisect")
	if r.code != 0 || !strings.Contains(r.stdout, "result: identical") {
		t.Errorf("exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// A bundle carved on the CPU replays on a device whose buffers are smaller
// than the model's weights: each case's weights are split for it as the
// model's are (the embedding and classifier of stories260K, 32 KiB each,
// and the FFN matrices are over 16 KiB), and every case passes.
func TestTestSplitWeights(t *testing.T) {
	dir := models(t)
	bundle := filepath.Join(t.TempDir(), "tests")
	r := tapmlc(t, "carve", filepath.Join(dir, "stories260K.bin"), "--tokenizer", filepath.Join(dir, "tok512.bin"),
		"--prompt", "Once upon a time", "--steps", "6", "-o", bundle)
	if r.code != 0 {
		t.Fatalf("carve: exit %d\n%s", r.code, r.stderr)
	}
	t.Setenv(runtime.MaxBufferEnv, "16KiB")
	for _, tgt := range []string{"webgpu", "vulkan"} {
		if r := tapmlc(t, "test", bundle, "--target", tgt); r.code != 0 || !strings.Contains(r.stdout, " 0 failed") {
			t.Errorf("%s: exit %d\n%s%s", tgt, r.code, r.stdout, r.stderr)
		}
	}
}
