package passes

import (
	"bytes"
	"errors"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/tapml/tapml/frontend/arch"
	"github.com/tapml/tapml/frontend/arch/llama"
	"github.com/tapml/tapml/ir"
)

func TestPipelineErrors(t *testing.T) {
	tests := []struct {
		name, yaml string
		line       int
		msg        string // the whole message after "p.yaml:LINE: "
	}{
		{"unknown pass", "passes:\n  - shape_inference\n  - fusoin\n", 3,
			`unknown pass "fusoin" (did you mean "fusion"?); passes: shape_inference, canonicalize, constant_folding, quantize, split_weights, dce, fusion, fuse_residual, fuse_norm, fuse_swiglu, fuse_qkv, fuse_rope_kv, probe, partition, legalize`},
		{"unknown option", "passes:\n  - shape_inference\n  - fusion:\n      max_input: 3\n", 4,
			`pass fusion has no option "max_input" (did you mean "max_inputs"?); its options: max_inputs, max_depth, allow_broadcast`},
		{"option of a pass without options", "passes:\n  - dce:\n      weights: false\n      aggressive: true\n", 4,
			`pass dce has no option "aggressive"; its options: weights`},
		{"string for int", "passes:\n  - shape_inference\n  - fusion:\n      max_inputs: many\n", 4,
			`pass fusion: option "max_inputs" must be an int, got the string "many"`},
		{"int for bool", "passes:\n  - shape_inference\n  - fusion: {allow_broadcast: 1}\n", 3,
			`pass fusion: option "allow_broadcast" must be a bool (true or false), got the int 1`},
		{"bad list element", "passes:\n  - shape_inference\n  - probe:\n      ops:\n        - matmul\n        - 3\n", 6,
			`pass probe: option "ops": expected a list of strings, but an element is the int 3`},
		{"unknown op in filter", "passes:\n  - shape_inference\n  - probe:\n      ops: [matmul, matmull]\n", 4,
			`pass probe: option "ops": unknown op "matmull"`},
		{"out of range", "passes:\n  - shape_inference\n  - fusion: {max_inputs: 0}\n", 3,
			`pass fusion: option "max_inputs": must be at least 1`},
		{"enum", "passes:\n  - shape_inference\n  - partition:\n      policy: half\n", 4,
			`pass partition: option "policy" must be one of all_source, all_target, nodes, ops, layers, first_k, got "half"`},
		{"bad ranges", "passes:\n  - shape_inference\n  - partition: {policy: layers, layers: \"3-1\"}\n", 3,
			`pass partition: option "layers": bad layer range "3-1" in "3-1" (want N-M with N <= M)`},
		{"function option from YAML", "passes:\n  - shape_inference\n  - legalize:\n      supports: all\n", 4,
			`option "supports" of pass legalize is set by the program (func(op ir.Op) bool: whether the target has a kernel for op (the compile command sets it; YAML cannot)), not by YAML`},
		{"option twice", "passes:\n  - dce:\n      weights: false\n      weights: true\n", 4,
			`YAML syntax: mapping key "weights" already defined at [3:7]`},
		{"legalize before shape inference", "passes:\n  # check first\n  - legalize\n  - shape_inference\n", 3,
			`pass legalize requires "shapes" (every node's output types were re-inferred from its inputs (shape_inference)), which no earlier pass provides; put shape_inference before it`},
		{"partition before shape inference", "passes:\n  - dce\n  - partition\n  - shape_inference\n", 3,
			`pass partition requires "shapes" (every node's output types were re-inferred from its inputs (shape_inference)), which no earlier pass provides; put shape_inference before it`},
		{"fusion after legalize", "passes:\n  - shape_inference\n  - legalize\n  - fusion\n", 4,
			`pass fusion may invalidate "legalized" (every op has a kernel on the target (legalize)), established by legalize at line 3; move legalize after it or run it again at the end`},
		{"top-level key", "pipeline:\n  - dce\n", 1,
			`unknown key "pipeline" at the top of the pipeline (expected 'passes')`},
		{"passes not a list", "passes: dce\n", 1, `'passes' must be a list, got a string`},
		{"item not a name", "passes:\n  - [dce]\n", 2, `a pass is a name or a mapping from a name to options, got a list`},
		{"two keys in an item", "passes:\n  - dce: {}\n    fusion: {}\n", 2,
			`a pass with options is a mapping with one key, the pass name (found 2 keys)`},
		{"options not a mapping", "passes:\n  - dce: [weights]\n", 2, `the options of pass dce must be a mapping, got a list`},
		{"empty", "# nothing\n", 1, `empty pipeline: expected a mapping with a 'passes' list`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("p.yaml", []byte(tc.yaml))
			if err == nil {
				t.Fatalf("no error for:\n%s", tc.yaml)
			}
			var pe *Error
			if !errors.As(err, &pe) {
				t.Fatalf("error %v is a %T, not *passes.Error", err, err)
			}
			want := &Error{File: "p.yaml", Line: tc.line, Msg: tc.msg}
			if diff := cmp.Diff(want, pe); diff != "" {
				t.Errorf("error differs (-want +got):\n%s\ngot: %v", diff, err)
			}
		})
	}
}

func TestPipelineSyntaxError(t *testing.T) {
	_, err := Parse("p.yaml", []byte("passes:\n  - dce\n  - fusion: {max_inputs: 3\n"))
	var pe *Error
	if !errors.As(err, &pe) {
		t.Fatalf("got %v (%T), want *passes.Error", err, err)
	}
	if pe.File != "p.yaml" || pe.Line != 3 || !strings.HasPrefix(pe.Msg, "YAML syntax: ") {
		t.Errorf("got %q, want p.yaml:3: YAML syntax: ...", err)
	}
}

// Hostile pipelines: deep nesting and huge names are refused quickly, with
// short messages; a FIFO or device is refused by name, not read.
func TestPipelineHostile(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "p.yaml")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, yaml, want string
	}{
		{"deep flow", "passes: " + strings.Repeat("[", 100000), "p.yaml:1: nested more than 64 levels deep"},
		{"deep dashes", "passes:\n" + strings.Repeat("- ", 5000) + "dce\n", "p.yaml:2: nested more than 64 levels deep"},
		{"huge name", "passes:\n  - " + strings.Repeat("x", 10<<20) + "\n", "p.yaml: 10485773 bytes, more than the 1048576"},
		{"long name", "passes:\n  - " + strings.Repeat("x", 100<<10) + "\n", `unknown pass "xxxxxxxx`},
	} {
		start := time.Now()
		_, err := Parse("p.yaml", []byte(tc.yaml))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %.200v, want %q", tc.name, err, tc.want)
		} else if len(err.Error()) > 1000 {
			t.Errorf("%s: a message of %d bytes", tc.name, len(err.Error()))
		}
		if el := time.Since(start); el > 2*time.Second {
			t.Errorf("%s: took %s", tc.name, el)
		}
	}
	for _, path := range []string{fifo, "/dev/zero"} {
		if _, err := Load(path); err == nil || !strings.Contains(err.Error(), "not a regular file") {
			t.Errorf("%s: %v", path, err)
		}
	}
}

func TestPipelineAccepts(t *testing.T) {
	for _, y := range []string{
		// probe after fusion is fine; so is reordering and repeating passes.
		"passes:\n  - shape_inference\n  - fusion\n  - probe\n  - legalize\n",
		"passes:\n  - dce\n  - shape_inference\n  - probe: {ops: [matmul], prov: 'layers\\.0\\.'}\n  - fusion: {max_inputs: 3, allow_broadcast: true}\n  - dce\n",
		"passes:\n  - shape_inference\n  - partition: {policy: first_k, k: 10}\n  - legalize\n  - probe\n",
		"passes:\n  - shape_inference\n  - legalize\n  - fusion\n  - legalize\n",
		"passes: []\n",
		"passes:\n",
		"passes:\n  - shape_inference\n  - partition:\n      policy: nodes\n      nodes: [1, 2, 3]\n",
	} {
		if _, err := Parse("p.yaml", []byte(y)); err != nil {
			t.Errorf("%v\nfor:\n%s", err, y)
		}
	}
}

func TestDefaultPipeline(t *testing.T) {
	p, err := Default()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, st := range p.Steps {
		names = append(names, st.Pass.Name)
	}
	want := []string{"shape_inference", "canonicalize", "constant_folding", "dce", "fuse_residual", "fuse_norm", "fusion", "fuse_swiglu", "fuse_qkv", "fuse_rope_kv", "dce", "legalize"}
	if diff := cmp.Diff(want, names); diff != "" {
		t.Errorf("default pipeline (-want +got):\n%s", diff)
	}
	// Documented line by line: every pass item follows a comment.
	lines := strings.Split(string(DefaultYAML()), "\n")
	for i, l := range lines {
		if strings.HasPrefix(strings.TrimSpace(l), "- ") {
			prev := ""
			if i > 0 {
				prev = strings.TrimSpace(lines[i-1])
			}
			if !strings.HasPrefix(prev, "#") {
				t.Errorf("%s:%d: pass item %q has no comment above it", DefaultFile, i+1, strings.TrimSpace(l))
			}
		}
	}
}

func TestAppendAndSet(t *testing.T) {
	p, err := Default()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Append("probe", Options{"ops": []string{"matmul"}}, "legalize"); err != nil {
		t.Fatal(err)
	}
	if got := p.Steps[len(p.Steps)-2].Pass.Name; got != "probe" {
		t.Errorf("probe inserted before %s, want before legalize", got)
	}
	if err := p.Append("fusion", nil, ""); err == nil || !strings.Contains(err.Error(), "may invalidate \"legalized\"") {
		t.Errorf("appending fusion after legalize: got %v", err)
	}
	if err := p.Append("probe", Options{"ops": []string{"nope"}}, ""); err == nil {
		t.Error("bad option accepted")
	}
	if err := p.Set("legalize", "supports", func(ir.Op) bool { return true }); err != nil {
		t.Fatal(err)
	}
	if err := p.Set("partition", "policy", "all_target"); err == nil {
		t.Error("Set of a pass the pipeline does not run succeeded")
	}
	sum := p.Summary()
	if sum[len(sum)-1].Options["supports"] != "<set by program>" {
		t.Errorf("summary of legalize: %+v", sum[len(sum)-1])
	}
}

func tinyModule(t testing.TB) *ir.Module {
	t.Helper()
	m, err := arch.Build("tiny", llama.Tiny, llama.RandomWeights(llama.Tiny, 1))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func defaultFor(t testing.TB, supports func(ir.Op) bool) *Pipeline {
	t.Helper()
	p, err := Default()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Set("legalize", "supports", supports); err != nil {
		t.Fatal(err)
	}
	return p
}

func all(ir.Op) bool { return true }

// TestFusionTiny pins the node counts of llama.Tiny (2 layers) through the
// default pipeline: fuse_residual folds both residual adds into their
// matmuls and fusion merges silu·gate in each layer of both functions;
// fuse_norm folds decode's norms into their products and fuse_swiglu
// decode's gate, up and silu·mul into one node, fuse_qkv its q, k and v,
// fuse_rope_kv its two ropes and two kv_writes.
func TestFusionTiny(t *testing.T) {
	m := tinyModule(t)
	before := NodeCount(m)
	rep, err := defaultFor(t, all).Run(m, RunConfig{})
	if err != nil {
		t.Fatal(err)
	}
	after := NodeCount(m)
	// 96 nodes: per function 2 layers × 22 + gather, final norm, slice,
	// output. canonicalize drops decode's slice of its only row (-1);
	// fuse_residual takes 2 adds and fusion merges silu into the gate
	// multiply in 2 layers × 2 functions; fuse_norm takes decode's 2 norms
	// a layer and its final norm (-5); fuse_swiglu takes decode's gate
	// and up into silu·mul in 2 layers (-4), fuse_qkv decode's q, k and v
	// into one node in 2 layers (-4), fuse_rope_kv decode's ropes and
	// kv_writes into one node in 2 layers (-6).
	if before != 96 || after != 64 {
		t.Errorf("llama.Tiny nodes: %d -> %d, want 96 -> 64", before, after)
	}
	for _, w := range []struct {
		op   ir.Op
		n    int
		what string
	}{
		{ir.OpRopeKVWrite, 2, "decode's ropes and kv_writes in 2 layers"},
		{ir.OpRope, 4, "prefill's q and k in 2 layers"},
		{ir.OpRMSNormMatmul, 1, "the classifier"},
		{ir.OpRMSNormQKV, 2, "decode's q, k and v in 2 layers"},
		{ir.OpRMSNormSwiGLU, 2, "decode's feed-forward in 2 layers"},
		{ir.OpAdd, 0, "every residual add folded"},
		{ir.OpFusedElementwise, 2, "prefill's silu·mul"},
	} {
		if got := rep.OpsAfter[w.op]; got != w.n {
			t.Errorf("%d %s nodes, want %d (%s)", got, w.op, w.n, w.what)
		}
	}
	var b bytes.Buffer
	if err := rep.WriteTimes(&b); err != nil {
		t.Fatal(err)
	}
	if err := rep.WriteStats(&b); err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s", b.String())
	for _, want := range []string{"fusion", "nodes before", "fused_elementwise", "total"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("tables lack %q", want)
		}
	}
}

func TestPrintAfter(t *testing.T) {
	m := tinyModule(t)
	var b bytes.Buffer
	if _, err := defaultFor(t, all).Run(m, RunConfig{PrintAfter: "fusion", PrintTo: &b}); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	if !strings.HasPrefix(out, "// after pass fusion (passes/default.yaml:") || strings.Count(out, "// after pass") != 1 {
		t.Errorf("print-after fusion printed:\n%.300s", out)
	}
	if !strings.Contains(out, "fused_elementwise(") {
		t.Error("printed IR lacks the fused nodes")
	}
	b.Reset()
	m = tinyModule(t)
	if _, err := defaultFor(t, all).Run(m, RunConfig{PrintAfter: "all", PrintTo: &b}); err != nil {
		t.Fatal(err)
	}
	if got := strings.Count(b.String(), "// after pass"); got != 12 {
		t.Errorf("print-after all printed %d modules, want 12", got)
	}
	if _, err := defaultFor(t, all).Run(tinyModule(t), RunConfig{PrintAfter: "fuse"}); err == nil {
		t.Error("print-after of an unknown pass accepted")
	}
}

func TestRunErrorsNameThePass(t *testing.T) {
	m := tinyModule(t)
	_, err := defaultFor(t, func(op ir.Op) bool { return op != ir.OpRope && op != ir.OpAttention }).Run(m, RunConfig{})
	if err == nil {
		t.Fatal("legalize accepted a target without rope")
	}
	want := "passes/default.yaml:45: pass legalize: the target has no kernel for 2 op(s) used by 8 node(s):\n" +
		"  attention: 4 node(s), e.g. #13 attention %12 (layers.0.attention) in func @prefill\n" +
		"  rope: 4 node(s), e.g. #9 rope %8 (layers.0.attention.rope_q) in func @prefill"
	if err.Error() != want {
		t.Errorf("got\n%v\nwant\n%v", err, want)
	}
	// Without a kernel table legalize says what is missing.
	p, _ := Default()
	if _, err := p.Run(tinyModule(t), RunConfig{}); err == nil || !strings.Contains(err.Error(), "option supports") {
		t.Errorf("legalize without supports: %v", err)
	}
}

// A pass that breaks the module is caught by the verifier between passes.
func TestVerifyBetweenPasses(t *testing.T) {
	broken := &Pass{Name: "broken", Run: func(m *ir.Module, _ Options) error {
		f := m.Funcs[0]
		f.Nodes = f.Nodes[1:] // drop the first node: its output is now undefined
		return nil
	}}
	p := &Pipeline{File: "x.yaml", Steps: []*Step{{Pass: broken, Options: Options{}, Line: 2}}}
	_, err := p.Run(tinyModule(t), RunConfig{})
	if err == nil || !strings.HasPrefix(err.Error(), "x.yaml:2: the module does not verify after pass broken") {
		t.Errorf("got %v", err)
	}
	panicky := &Pass{Name: "panicky", Run: func(*ir.Module, Options) error { panic("boom") }}
	p.Steps[0].Pass = panicky
	if _, err := p.Run(tinyModule(t), RunConfig{}); err == nil || !strings.Contains(err.Error(), "panic (a bug in the pass): boom") {
		t.Errorf("got %v", err)
	}
}

// shape_inference fixes wrong declared types, which the verifier rejects.
func TestShapeInferenceFixesTypes(t *testing.T) {
	m := tinyModule(t)
	f := m.Func("decode")
	f.Nodes[0].Output().Type = ir.T(ir.F32, ir.S(7))
	if ir.Verify(m) == nil {
		t.Fatal("broken module verifies")
	}
	p, err := Parse("p.yaml", []byte("passes:\n  - shape_inference\n"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Run(m, RunConfig{}); err != nil {
		t.Fatal(err)
	}
	if got := f.Nodes[0].Output().Type.String(); got != "f32[1, 64]" {
		t.Errorf("type after shape_inference: %s", got)
	}
}
