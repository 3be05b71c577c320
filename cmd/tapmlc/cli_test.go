package main

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/tapml/tapml/frontend/hf"
	"github.com/tapml/tapml/internal/testenv"
)

// These tests run the real binary, as a user does.

var binary_ string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "tapmlc-cli")
	if err != nil {
		panic(err)
	}
	binary_ = filepath.Join(dir, "tapmlc")
	build := exec.Command("go", "build", "-o", binary_, ".")
	build.Stderr = os.Stderr
	if err := build.Run(); err != nil {
		panic("building tapmlc: " + err.Error())
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// models is the folder of shared test models.
func models(t *testing.T) string {
	t.Helper()
	return testenv.Models(t)
}

type result struct {
	stdout, stderr string
	code           int
}

func tapmlc(t *testing.T, args ...string) result {
	t.Helper()
	cmd := exec.Command(binary_, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return result{out.String(), errb.String(), code}
}

func golden(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("../../frontend/llama2c/testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// The CPU reference prints exactly what llama2.c's run.c prints.
func TestRunStories260KMatchesRunC(t *testing.T) {
	dir := models(t)
	model, tok := filepath.Join(dir, "stories260K.bin"), filepath.Join(dir, "tok512.bin")
	for _, tc := range []struct{ prompt, golden string }{
		{"", "stories260K_greedy.golden"},
		{"Once upon a time", "stories260K_once_upon_a_time.golden"},
	} {
		for _, target := range []string{"cpu", "webgpu", "vulkan", "llvm"} {
			r := tapmlc(t, "run", model, "--tokenizer", tok, "--steps", "256", "--temperature", "0", "--prompt", tc.prompt, "--target", target)
			if r.code != 0 {
				t.Fatalf("%s %q: exit %d: %s", target, tc.prompt, r.code, r.stderr)
			}
			if want := golden(t, tc.golden); r.stdout != want {
				t.Errorf("%s prompt %q:\ngot  %q\nwant %q", target, tc.prompt, r.stdout, want)
			}
		}
	}
	if !strings.HasPrefix(golden(t, "stories260K_greedy.golden"), "Once upon a time, there was a little girl named Lily.") {
		t.Error("golden does not begin as run.c's story does")
	}
}

func TestRunGGUFAndBuiltin(t *testing.T) {
	dir := models(t)
	r := tapmlc(t, "run", filepath.Join(dir, "llama-2-tiny-random.gguf"), "--steps", "16", "--temperature", "0")
	if r.code != 0 || len(strings.TrimSpace(r.stdout)) == 0 {
		t.Fatalf("gguf: exit %d, stdout %q, stderr %s", r.code, r.stdout, r.stderr)
	}
	again := tapmlc(t, "run", filepath.Join(dir, "llama-2-tiny-random.gguf"), "--steps", "16", "--temperature", "0")
	if again.stdout != r.stdout {
		t.Errorf("greedy runs differ: %q vs %q", r.stdout, again.stdout)
	}
	b := tapmlc(t, "run", "--steps", "32", "--temperature", "0")
	if b.code != 0 || len(b.stdout) < 2 {
		t.Fatalf("builtin: exit %d, stdout %q, stderr %s", b.code, b.stdout, b.stderr)
	}
}

// A Hugging Face folder generates as transformers' generate does: the
// tokenizer's own BOS, and a stop at the first of generation_config.json's
// EOS ids (the llama fixture's list [1, 81], which its greedy continuation
// meets at token stops_after). The stop token itself prints nothing.
func TestRunHFStopsAtEOS(t *testing.T) {
	dir := "../../frontend/hf/testdata/models/llama"
	var ref struct {
		Prompt     string
		PromptIDs  []int `json:"prompt_ids"`
		Tokens     []int
		StopsAfter int `json:"stops_after"`
	}
	data, err := os.ReadFile(filepath.Join(dir, "reference.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &ref); err != nil || ref.StopsAfter < 1 || ref.StopsAfter >= len(ref.Tokens) {
		t.Fatalf("reference.json: stops_after %d of %d tokens (%v)", ref.StopsAfter, len(ref.Tokens), err)
	}
	_, tok, err := hf.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := tok.Decode(ref.PromptIDs) + tok.Decode(ref.Tokens[:ref.StopsAfter-1]) + "\n"
	r := tapmlc(t, "run", dir, "--prompt", ref.Prompt, "--temperature", "0", "--steps", "100")
	if r.code != 0 || r.stdout != want {
		t.Fatalf("exit %d, stdout %q, want %q (the prompt and %d tokens); stderr %s", r.code, r.stdout, want, ref.StopsAfter-1, r.stderr)
	}
}

// import writes IR text that runs to the same output as the model itself.
func TestImportRoundTrip(t *testing.T) {
	dir := models(t)
	tir := filepath.Join(t.TempDir(), "stories.tir")
	if r := tapmlc(t, "import", filepath.Join(dir, "stories260K.bin"), "-o", tir); r.code != 0 {
		t.Fatalf("import: %s", r.stderr)
	}
	text, err := os.ReadFile(tir)
	if err != nil || !bytes.HasPrefix(text, []byte("module ")) {
		t.Fatalf("import wrote %q (%v)", text[:min(len(text), 40)], err)
	}
	r := tapmlc(t, "run", tir, "--tokenizer", filepath.Join(dir, "tok512.bin"), "--steps", "256", "--temperature", "0")
	if r.code != 0 {
		t.Fatalf("run tir: %s", r.stderr)
	}
	if want := golden(t, "stories260K_greedy.golden"); r.stdout != want {
		t.Errorf("run of the imported text differs:\n%q", r.stdout)
	}
}

// Files the CLI writes atomically get the usual mode (0644), not the
// private one of the temporary file they start as.
func TestWrittenFileMode(t *testing.T) {
	tir := filepath.Join(t.TempDir(), "tiny.tir")
	if r := tapmlc(t, "import", "-o", tir); r.code != 0 {
		t.Fatalf("import: %s", r.stderr)
	}
	st, err := os.Stat(tir)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o644 {
		t.Errorf("import -o wrote %s with mode %v, want 0644", tir, st.Mode().Perm())
	}
}

// Bad inputs: one clear error naming the file and the problem, exit 1, no panic.
func TestBadInputs(t *testing.T) {
	dir := models(t)
	tmp := t.TempDir()
	write := func(name string, data []byte) string {
		p := filepath.Join(tmp, name)
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	ckpt, err := os.ReadFile(filepath.Join(dir, "stories260K.bin"))
	if err != nil {
		t.Fatal(err)
	}
	truncated := write("truncated.bin", ckpt[:1000])
	corrupt := append([]byte{}, ckpt...)
	binary.LittleEndian.PutUint32(corrupt[12:], 7) // n_heads 7 does not divide dim 64
	corruptPath := write("corrupt.bin", corrupt)
	ggufIQ2 := write("iq2.gguf", ggufWithTensorType(t, filepath.Join(dir, "llama-2-tiny-random.gguf"), "token_embd.weight", 16))
	syntax := write("syntax.tir", []byte("module \"x\" {\n  func @f(%a: f32[2]) -> (%b) {\n    %b = add(%a, %a : f32[2] #1\n    return %b\n  }\n}\n"))
	typeErr := write("type.tir", []byte("module \"x\" {\n  func @f(%a: f32[2]) -> (%b) {\n    %b = add(%a, %a) : f32[3] #1\n    return %b\n  }\n}\n"))
	unknown := write("unknown.dat", []byte("hello, not a model"))

	for _, tc := range []struct {
		name string
		args []string
		want []string // substrings of stderr
	}{
		{"truncated checkpoint", []string{"run", truncated, "--tokenizer", filepath.Join(dir, "tok512.bin")}, []string{truncated, "truncated", "file has 1000"}},
		{"corrupt checkpoint", []string{"run", corruptPath, "--tokenizer", filepath.Join(dir, "tok512.bin")}, []string{corruptPath, "n_heads"}},
		{"gguf unsupported tensor type", []string{"run", ggufIQ2}, []string{ggufIQ2, "token_embd.weight", "IQ2_XXS", "not support"}},
		{"tokenizer mismatch", []string{"run", filepath.Join(dir, "llama-2-tiny-random.gguf"), "--tokenizer", filepath.Join(dir, "tok512.bin")}, []string{"tok512.bin", "512", "32000"}},
		{"ir syntax error", []string{"run", syntax}, []string{syntax + ":3:21:", "expected ','"}},
		{"ir type error", []string{"run", typeErr}, []string{typeErr + ":3:", "f32[3]", "f32[2]"}},
		{"not a model", []string{"run", unknown}, []string{unknown, "not a model format"}},
		{"missing file", []string{"run", filepath.Join(tmp, "nope.bin")}, []string{"nope.bin", "no such file"}},
		{"unknown target", []string{"run", "--target", "nope"}, []string{`unknown target "nope"`}},
		{"import without -o", []string{"import"}, []string{"-o"}},
	} {
		r := tapmlc(t, tc.args...)
		userError(t, tc.name, r, tc.want...)
	}
}

// userError checks a command's failure on bad user input: exit 1, one
// error line on stderr naming every want, no panic, nothing on stdout.
func userError(t *testing.T, name string, r result, want ...string) {
	t.Helper()
	if r.code != 1 {
		t.Errorf("%s: exit %d, want 1 (stderr %q)", name, r.code, r.stderr)
	}
	if strings.Contains(r.stderr, "panic") || strings.Contains(r.stderr, "goroutine ") {
		t.Errorf("%s: panicked: %s", name, r.stderr)
	}
	if lines := strings.Count(strings.TrimSpace(r.stderr), "\n") + 1; lines != 1 {
		t.Errorf("%s: want one error line, got %d: %q", name, lines, r.stderr)
	}
	for _, w := range want {
		if !strings.Contains(r.stderr, w) {
			t.Errorf("%s: stderr %q lacks %q", name, r.stderr, w)
		}
	}
	if r.stdout != "" {
		t.Errorf("%s: wrote to stdout: %q", name, r.stdout)
	}
}

// ggufWithTensorType copies a GGUF file, changing the ggml type of one tensor.
func ggufWithTensorType(t *testing.T, path, tensor string, typ uint32) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	name := binary.LittleEndian.AppendUint64(nil, uint64(len(tensor)))
	name = append(name, tensor...)
	i := bytes.Index(data, name)
	if i < 0 {
		t.Fatalf("%s has no tensor %s", path, tensor)
	}
	p := i + len(name)
	ndims := int(binary.LittleEndian.Uint32(data[p:]))
	p += 4 + 8*ndims
	binary.LittleEndian.PutUint32(data[p:], typ)
	return data
}

// compile writes a build folder that runs to the same text; --probe builds
// run to the same text too, and a failed compile leaves nothing behind.
func TestCompileAndRunBuild(t *testing.T) {
	dir := models(t)
	tmp := t.TempDir()
	model, tok := filepath.Join(dir, "stories260K.bin"), filepath.Join(dir, "tok512.bin")
	want := golden(t, "stories260K_greedy.golden")
	for _, tc := range []struct {
		name  string
		extra []string
	}{{"plain", nil}, {"probed", []string{"--probe"}}} {
		out := filepath.Join(tmp, tc.name)
		args := append([]string{"compile", model, "--tokenizer", tok, "--target", "webgpu", "-o", out, "--stats"}, tc.extra...)
		r := tapmlc(t, args...)
		if r.code != 0 {
			t.Fatalf("compile %s: %s", tc.name, r.stderr)
		}
		if !strings.Contains(r.stderr, "fused_elementwise") {
			t.Errorf("compile --stats printed no op counts: %s", r.stderr)
		}
		for _, target := range []string{"cpu", "webgpu"} {
			run := tapmlc(t, "run", out, "--steps", "256", "--temperature", "0", "--target", target)
			if run.code != 0 || run.stdout != want {
				t.Errorf("run %s build on %s: exit %d, %q, %s", tc.name, target, run.code, run.stdout, run.stderr)
			}
		}
	}
	bad := filepath.Join(tmp, "bad.yaml")
	if err := os.WriteFile(bad, []byte("passes:\n  - shape_inference\n  - no_such_pass\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(tmp, "failed")
	r := tapmlc(t, "compile", model, "--pipeline", bad, "-o", out)
	if r.code != 1 || !strings.Contains(r.stderr, "bad.yaml:3") {
		t.Errorf("bad pipeline: exit %d, stderr %q; want an error at bad.yaml:3", r.code, r.stderr)
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("a failed compile left %s behind", out)
	}
}

// carve records a bundle from a real run; test replays it on each target.
func TestCarveAndTest(t *testing.T) {
	dir := models(t)
	bundle := filepath.Join(t.TempDir(), "tests")
	r := tapmlc(t, "carve", filepath.Join(dir, "stories260K.bin"), "--tokenizer", filepath.Join(dir, "tok512.bin"),
		"--prompt", "Once upon a time", "--steps", "24", "-o", bundle)
	if r.code != 0 || !strings.Contains(r.stdout, "unique cases kept") {
		t.Fatalf("carve: exit %d, stdout %q, stderr %s", r.code, r.stdout, r.stderr)
	}
	for _, target := range []string{"cpu", "webgpu", "vulkan", "llvm"} {
		if r := tapmlc(t, "test", bundle, "--target", target); r.code != 0 {
			t.Errorf("test on %s: exit %d\n%s\n%s", target, r.code, r.stdout, r.stderr)
		}
	}
	// Where Metal cannot run, --target metal syntax-checks every case's kernel.
	if r := tapmlc(t, "test", bundle, "--target", "metal"); r.code != 0 || !strings.Contains(r.stdout, "pass the syntax check") {
		t.Errorf("test on metal: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	if r := tapmlc(t, "test", bundle, "--target", "cpu", "--run", "no-such-case"); r.code != 2 {
		t.Errorf("a --run that selects nothing: exit %d, want 2", r.code)
	}
	// Zero tolerance for matmul on the GPU: its cases must now fail.
	strict := filepath.Join(t.TempDir(), "strict.yaml")
	if err := os.WriteFile(strict, []byte("overrides:\n  - op: matmul\n    atol: 0\n    rtol: 0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r = tapmlc(t, "test", bundle, "--target", "webgpu", "--tolerances", strict)
	if r.code != 1 || !strings.Contains(r.stdout, "matmul") {
		t.Errorf("zero matmul tolerance on webgpu: exit %d, want 1 with matmul failures\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// `tapmlc ops` lists every op with its kind and targets; -v adds the
// registry's facts and semantics.
func TestOps(t *testing.T) {
	plain, verbose := tapmlc(t, "ops"), tapmlc(t, "ops", "-v")
	if plain.code != 0 || verbose.code != 0 {
		t.Fatalf("exit %d, %d: %s%s", plain.code, verbose.code, plain.stderr, verbose.stderr)
	}
	row := func(out, op string) []string {
		for _, line := range strings.Split(out, "\n") {
			if f := strings.Fields(line); len(f) > 0 && f[0] == op {
				return f
			}
		}
		t.Fatalf("no row %s in:\n%s", op, out)
		return nil
	}
	if got := strings.Join(row(plain.stdout, "OP"), " "); got != "OP KIND CPU WEBGPU VULKAN METAL LLVM" {
		t.Errorf("header %q", got)
	}
	if got := strings.Join(row(plain.stdout, "kv_write"), " "); got != "kv_write data yes yes yes yes yes" {
		t.Errorf("kv_write row %q", got)
	}
	for _, want := range []string{"EFFECTS", "IN PLACE", "ROUTED BY", "COMPUTE", "NUMERICS", "TRANSCENDENTALS", "SUM LENGTH", "COST", "STORED INPUT", "SEMANTICS",
		"with transpose_b and f32 a: input 1 (b) in f16, bf16, q4_0"} {
		if !strings.Contains(verbose.stdout, want) {
			t.Errorf("ops -v has no column %s", want)
		}
	}
	if got := strings.Join(row(verbose.stdout, "kv_write")[7:13], " "); got != "side effects input 0 - stored" {
		t.Errorf("kv_write's facts: %q", got)
	}
	if got := strings.Join(row(verbose.stdout, "matmul")[7:13], " "); got != "pure - - f32 sum 0" {
		t.Errorf("matmul's facts: %q", got)
	}
	if got := strings.Join(row(verbose.stdout, "expert_matmul")[7:13], " "); got != "pure - input 2 f32 sum" {
		t.Errorf("expert_matmul's facts: %q", got)
	}
}

// run reports its speed on stderr after the text, as llama.cpp does: the
// prompt (BOS, ' ', 'a', 'b': 4 tokens of the built-in byte tokenizer) and
// the decode steps (the rest of the 10 positions, fewer if an end token
// comes), and the time spent compiling kernels: none on the CPU reference,
// which makes none, some on vulkan, whose first calls make them.
func TestRunReportsSpeed(t *testing.T) {
	speed := regexp.MustCompile(`tapmlc: prompt: 4 tokens in [0-9.]+ ms, [0-9.]+ tokens/s \([0-9.]+ ms of it compiling kernels\)
tapmlc: decode: ([1-6]) tokens in [0-9.]+ ms, [0-9.]+ tokens/s \([0-9.]+ ms of it compiling kernels\)
tapmlc: decode without compiling kernels: [0-9.]+ tokens/s
tapmlc: kernels compiled in ([0-9.]+) ms
`)
	for _, target := range []string{"cpu", "vulkan"} {
		r := tapmlc(t, "run", "--prompt", "ab", "--steps", "10", "--temperature", "0", "--target", target)
		if r.code != 0 {
			t.Fatalf("%s: exit %d: %s", target, r.code, r.stderr)
		}
		m := speed.FindStringSubmatch(r.stderr)
		if m == nil {
			t.Fatalf("%s: stderr has no speed report:\n%s", target, r.stderr)
		}
		if compiled := m[2] != "0.0"; compiled != (target == "vulkan") {
			t.Errorf("%s: kernels compiled in %s ms", target, m[2])
		}
	}
}
