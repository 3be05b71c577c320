package msl

import (
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/tapml/tapml/codegen"
	"github.com/tapml/tapml/ir"
)

var update = flag.Bool("update", false, "rewrite the golden kernels in testdata/")

type genCase struct {
	name  string
	op    string
	attrs ir.Attrs
	in    []ir.Type
}

func f32(s ...int64) ir.Type { return ir.T(ir.F32, ir.S(s...)) }
func i32(s ...int64) ir.Type { return ir.T(ir.I32, ir.S(s...)) }

// genCases has at least one case per op of the registry, one per kernel
// variant (GEMV with and without transpose, float4 or not, tiled matmul)
// and more shapes of every op (broadcasts, axes, i32 tensors, empty and
// scalar tensors) for the syntax check.
func genCases() []genCase {
	var cs []genCase
	for _, op := range ir.UnaryOps {
		cs = append(cs, genCase{op, op, nil, []ir.Type{f32(7, 33)}})
	}
	for _, op := range ir.BinaryOps {
		cs = append(cs, genCase{op, op, nil, []ir.Type{f32(5, 1, 7), f32(3, 7)}})
	}
	for _, op := range []string{"neg", "abs", "relu"} {
		cs = append(cs, genCase{op + "_i32", op, nil, []ir.Type{i32(4, 3)}})
	}
	for _, op := range []string{"add", "sub", "mul", "div", "maximum", "minimum"} {
		cs = append(cs, genCase{op + "_i32", op, nil, []ir.Type{i32(4, 3), i32(3)}})
	}
	pos := i32()
	tr := ir.Attrs{"transpose_b": ir.BoolAttr(true)}
	return append(append(cs,
		genCase{"exp_scalar", "exp", nil, []ir.Type{f32()}},
		genCase{"add_empty", "add", nil, []ir.Type{f32(0, 3), f32(3)}},
		genCase{"mul_scalar_bcast", "mul", nil, []ir.Type{f32(2, 3, 4), f32()}},
		genCase{"fused", "fused_elementwise", ir.Attrs{"expr": ir.StringAttr("mul(silu($0), add($1, 2.5))")}, []ir.Type{f32(3, 172), f32(172)}},
		genCase{"fused_all", "fused_elementwise", ir.Attrs{"expr": ir.StringAttr(
			"add(pow(gelu($0), -1.5), minimum(maximum(tanh($1), rsqrt(abs($2))), div(sigmoid(neg($0)), sub(exp(log(sqrt($1))), relu($2)))))")},
			[]ir.Type{f32(2, 1, 5), f32(3, 5), f32(2, 3, 1)}},
		genCase{"fused_consts", "fused_elementwise", ir.Attrs{"expr": ir.StringAttr("add(mul($0, inf), add(nan, -0))")}, []ir.Type{f32(4)}},
		genCase{"constant", "constant", ir.Attrs{"shape": ir.ShapeAttr(ir.S(2, 2)), "value": ir.FloatsAttr(1, 2, 3, 4)}, nil},
		genCase{"constant_splat", "constant", ir.Attrs{"shape": ir.ShapeAttr(ir.S(3)), "value": ir.FloatsAttr(-2.5)}, nil},
		genCase{"constant_i32", "constant", ir.Attrs{"dtype": ir.DTypeAttr(ir.I32), "shape": ir.ShapeAttr(ir.S(3)), "value": ir.FloatsAttr(-2147483648, 0, 7)}, nil},
		genCase{"cast", "cast", ir.Attrs{"to": ir.DTypeAttr(ir.I32)}, []ir.Type{f32(10)}},
		genCase{"cast_to_f32", "cast", ir.Attrs{"to": ir.DTypeAttr(ir.F32)}, []ir.Type{i32(10)}},
		genCase{"cast_same", "cast", ir.Attrs{"to": ir.DTypeAttr(ir.F32)}, []ir.Type{f32(10)}},
		genCase{"gather", "gather", nil, []ir.Type{f32(32000, 288), i32(1)}},
		genCase{"gather_axis1_i32", "gather", ir.Attrs{"axis": ir.IntAttr(1)}, []ir.Type{i32(3, 9, 4), i32(2, 5)}},
		genCase{"gemv_t", "matmul", tr, []ir.Type{f32(1, 288), f32(32000, 288)}},
		genCase{"gemv_t_scalar", "matmul", tr, []ir.Type{f32(1, 37), f32(20, 37)}},
		genCase{"gemv_t_batch", "matmul", tr, []ir.Type{f32(3, 1, 1, 64), f32(2, 10, 64)}},
		genCase{"gemv_n", "matmul", nil, []ir.Type{f32(1, 37), f32(37, 20)}},
		genCase{"gemv_n_scalar", "matmul", nil, []ir.Type{f32(1, 37), f32(37, 21)}},
		genCase{"tiled", "matmul", tr, []ir.Type{f32(2, 67, 45), f32(33, 45)}},
		genCase{"tiled_small_m", "matmul", nil, []ir.Type{f32(5, 64), f32(64, 172)}},
		genCase{"tiled_batch", "matmul", nil, []ir.Type{f32(2, 1, 40, 8), f32(3, 8, 17)}},
		genCase{"rms_norm", "rms_norm", nil, []ir.Type{f32(5, 288), f32(288)}},
		genCase{"rms_norm_small", "rms_norm", nil, []ir.Type{f32(3), f32(3)}},
		genCase{"layer_norm", "layer_norm", nil, []ir.Type{f32(5, 288), f32(288), f32(288)}},
		genCase{"softmax", "softmax", ir.Attrs{"axis": ir.IntAttr(1)}, []ir.Type{f32(6, 5, 7)}},
		genCase{"softmax_last", "softmax", nil, []ir.Type{f32(2, 1000)}},
		genCase{"argmax", "argmax", nil, []ir.Type{f32(1, 32000)}},
		genCase{"argmax_i32_axis0", "argmax", ir.Attrs{"axis": ir.IntAttr(0)}, []ir.Type{i32(5, 3)}},
		genCase{"rope", "rope", nil, []ir.Type{f32(9, 6, 48), pos}},
		genCase{"rope_half_partial", "rope", ir.Attrs{"style": ir.StringAttr("half"), "dims": ir.IntAttr(16), "theta": ir.FloatAttr(500000)}, []ir.Type{f32(1, 4, 64), pos}},
		genCase{"kv_write", "kv_write", nil, []ir.Type{f32(512, 4, 8), f32(1, 4, 8), pos}},
		genCase{"kv_write_prefill", "kv_write", nil, []ir.Type{f32(64, 2, 16), f32(7, 2, 16), pos}},
		genCase{"attention", "attention", ir.Attrs{"scale": ir.FloatAttr(0.125)}, []ir.Type{f32(1, 8, 64), f32(512, 4, 64), f32(512, 4, 64), pos}},
		genCase{"attention_prefill", "attention", ir.Attrs{"scale": ir.FloatAttr(0.25), "causal": ir.BoolAttr(false)}, []ir.Type{f32(5, 2, 300), f32(4000, 1, 300), f32(4000, 1, 300), pos}},
		genCase{"reshape", "reshape", ir.Attrs{"shape": ir.ShapeAttr(ir.S(4, -1))}, []ir.Type{f32(2, 3, 10)}},
		genCase{"transpose", "transpose", ir.Attrs{"perm": ir.IntsAttr(2, 0, 1)}, []ir.Type{f32(3, 5, 7)}},
		genCase{"transpose_unit", "transpose", ir.Attrs{"perm": ir.IntsAttr(1, 0)}, []ir.Type{i32(1, 7)}},
		genCase{"slice", "slice", ir.Attrs{"axis": ir.IntAttr(0), "start": ir.IntAttr(-1), "end": ir.IntAttr(math.MaxInt32)}, []ir.Type{f32(7, 288)}},
		genCase{"slice_step", "slice", ir.Attrs{"axis": ir.IntAttr(1), "start": ir.IntAttr(1), "end": ir.IntAttr(9), "step": ir.IntAttr(3)}, []ir.Type{f32(2, 10, 3)}},
		genCase{"concat", "concat", ir.Attrs{"axis": ir.IntAttr(0)}, []ir.Type{f32(2, 5), f32(3, 5)}},
		genCase{"concat3", "concat", ir.Attrs{"axis": ir.IntAttr(-1)}, []ir.Type{i32(2, 1), i32(2, 0), i32(2, 4)}},
		genCase{"probe", "probe", nil, []ir.Type{f32(3)}},
		genCase{"transfer", "transfer", ir.Attrs{"from": ir.StringAttr("source"), "to": ir.StringAttr("target")}, []ir.Type{f32(3)}},
	), nnGenCases()...)
}

func (c genCase) inputs() []ir.Type { return c.in }

func (c genCase) node(t testing.TB) *ir.Node {
	t.Helper()
	_, na, err := ir.InferTypes(c.op, c.inputs(), c.attrs)
	if err != nil {
		t.Fatalf("%s: %v", c.name, err)
	}
	return &ir.Node{ID: 7, Op: c.op, Attrs: na}
}

func (c genCase) generate(t testing.TB, opts Options) (*codegen.Kernel, error) {
	t.Helper()
	return Generate(c.node(t), c.inputs(), nil, opts)
}

func TestEveryOpHasGenerator(t *testing.T) {
	covered := map[string]bool{}
	for _, c := range genCases() {
		covered[c.op] = true
	}
	for _, d := range ir.Ops() {
		if !Supports(d.Name) {
			t.Errorf("op %s has no MSL kernel", d.Name)
		}
		if !covered[d.Name] {
			t.Errorf("op %s has no generator test case", d.Name)
		}
	}
}

var smallLimits = Limits{MaxThreadsPerThreadgroup: 64, MaxThreadgroupMemory: 8192, MaxThreadgroupsPerDimension: 7, MaxBuffers: 8}

// TestKernels generates every case under the default limits and under
// small ones, and checks the kernel's shape: bindings in ascending order
// (inputs, then outputs) declared as [[buffer(i)]] in that order, the
// threadgroup and grid within the limits.
func TestKernels(t *testing.T) {
	for _, lim := range []Limits{{}, smallLimits} {
		l := lim.withDefaults()
		for _, c := range genCases() {
			k, err := c.generate(t, Options{Limits: lim})
			if err != nil {
				if lim == smallLimits && strings.Contains(err.Error(), "grid") {
					continue // a grid that cannot fold (matmul batch/tiles) is reported, not emitted
				}
				t.Errorf("%s: %v", c.name, err)
				continue
			}
			checkKernel(t, c, k, l)
		}
	}
}

func checkKernel(t *testing.T, c genCase, k *codegen.Kernel, l Limits) {
	t.Helper()
	src := string(k.Source)
	in := c.inputs()
	wg := k.WorkgroupSize
	if wg[0]*wg[1]*wg[2] > l.MaxThreadsPerThreadgroup || wg[0] < 1 || wg[1] != 1 || wg[2] != 1 {
		t.Errorf("%s: threadgroup %v exceeds %d threads", c.name, wg, l.MaxThreadsPerThreadgroup)
	}
	for i, g := range k.Grid {
		if g > l.MaxThreadgroupsPerDimension {
			t.Errorf("%s: grid %v exceeds %d in dim %d", c.name, k.Grid, l.MaxThreadgroupsPerDimension, i)
		}
	}
	if k.Language != Language || k.Entry != Entry || k.Op != c.op || k.NodeID != 7 {
		t.Errorf("%s: kernel header %q %q %q %d", c.name, k.Language, k.Entry, k.Op, k.NodeID)
	}
	if !strings.Contains(src, "kernel void "+Entry+"(") || !strings.Contains(src, "#include <metal_stdlib>") {
		t.Errorf("%s: source lacks the include or the kernel entry", c.name)
	}
	lastIn, seenOut, at := -1, false, 0
	for i, b := range k.Bindings {
		if b.Index != i {
			t.Errorf("%s: binding %d has index %d", c.name, i, b.Index)
		}
		m := regexp.MustCompile(fmt.Sprintf(`device (const )?\w+\* %s \[\[buffer\(%d\)\]\]`, b.Name, i)).FindStringSubmatchIndex(src)
		if m == nil || m[0] < at {
			t.Errorf("%s: source does not declare buffer %d (%s) after the previous one", c.name, i, b.Name)
			continue
		}
		at = m[0]
		if isConst := m[2] >= 0; isConst != (b.Access == codegen.Read) {
			t.Errorf("%s: binding %d is %s but declared const=%v", c.name, i, b.Access, isConst)
		}
		switch {
		case b.Input >= 0:
			if seenOut || b.Input != lastIn+1 {
				t.Errorf("%s: binding %d carries input %d out of order", c.name, i, b.Input)
			}
			lastIn = b.Input
			if !b.Type.Equal(in[b.Input]) {
				t.Errorf("%s: binding %d type %s, input is %s", c.name, i, b.Type, in[b.Input])
			}
			if (b.Output >= 0) != (b.Access == codegen.ReadWrite) || (b.Output < 0 && b.Access != codegen.Read) {
				t.Errorf("%s: binding %d access %s for input %d output %d", c.name, i, b.Access, b.Input, b.Output)
			}
		default:
			seenOut = true
			if b.Access != codegen.Write || b.Output < 0 {
				t.Errorf("%s: binding %d access %s output %d", c.name, i, b.Access, b.Output)
			}
		}
	}
	if lastIn != len(in)-1 {
		t.Errorf("%s: bindings carry %d inputs, the node has %d", c.name, lastIn+1, len(in))
	}
	if strings.Contains(src, "threadgroup_barrier") != strings.Contains(src, "  threadgroup ") {
		t.Errorf("%s: barriers without threadgroup memory or the reverse", c.name)
	}
}

// TestGridFolds checks that an elementwise kernel too big for one grid
// dimension folds into several that together cover every element.
func TestGridFolds(t *testing.T) {
	c := genCase{"exp", "exp", nil, []ir.Type{f32(1000, 33)}}
	k, err := c.generate(t, Options{Limits: Limits{MaxThreadgroupsPerDimension: 10}})
	if err != nil {
		t.Fatal(err)
	}
	g := k.Grid
	if g[0] > 10 || g[1] > 10 || g[2] > 10 || g[0]*g[1]*g[2]*k.WorkgroupSize[0] < 33000 {
		t.Errorf("grid %v × threadgroup %v does not cover 33000 elements within 10 per dim", g, k.WorkgroupSize)
	}
	if !strings.Contains(string(k.Source), "wid.z") {
		t.Error("folded kernel does not use wid.z")
	}
}

// TestFaults checks which faults apply to which ops: an applicable fault
// changes the source, an inapplicable one is an error.
func TestFaults(t *testing.T) {
	applies := map[string][]string{
		FaultWrongIndex:     {"neg", "add", "fused", "constant", "cast", "gather", "gemv_t", "gemv_n", "tiled", "rms_norm", "layer_norm", "softmax", "argmax", "rope", "kv_write", "attention", "reshape", "transpose", "slice", "concat", "probe", "transfer"},
		FaultWrongConstant:  {"gelu", "fused", "constant", "rms_norm", "layer_norm", "rope", "attention"},
		FaultMissingBarrier: {"gemv_t", "tiled", "tiled_small_m", "rms_norm", "layer_norm", "softmax", "argmax", "attention"},
		FaultF16Overflow:    {"exp", "add", "fused", "gemv_t", "gemv_n", "tiled", "rms_norm", "layer_norm", "softmax", "rope", "attention"},
	}
	never := map[string][]string{
		FaultWrongIndex:     {"constant_splat"},
		FaultWrongConstant:  {"add", "transpose", "gather", "softmax", "tiled"},
		FaultMissingBarrier: {"add", "exp", "gemv_n", "rope", "kv_write", "gather", "transpose"},
		FaultF16Overflow:    {"gather", "transpose", "kv_write", "argmax", "cast", "concat", "add_i32"},
	}
	byName := map[string]genCase{}
	for _, c := range genCases() {
		byName[c.name] = c
	}
	for fault, names := range applies {
		for _, name := range names {
			c, ok := byName[name]
			if !ok {
				t.Fatalf("no case %s", name)
			}
			base, err := c.generate(t, Options{})
			if err != nil {
				t.Fatal(err)
			}
			k, err := c.generate(t, Options{Fault: fault})
			if err != nil {
				t.Errorf("%s on %s: %v", fault, name, err)
				continue
			}
			if string(k.Source) == string(base.Source) {
				t.Errorf("%s on %s: source unchanged", fault, name)
			}
		}
	}
	for fault, names := range never {
		for _, name := range names {
			c, ok := byName[name]
			if !ok {
				t.Fatalf("no case %s", name)
			}
			_, err := c.generate(t, Options{Fault: fault})
			if err == nil {
				t.Errorf("%s on %s: no error, want one", fault, name)
			}
		}
	}
	c := byName["add"]
	if _, err := c.generate(t, Options{Fault: "cosmic_ray"}); err == nil {
		t.Error("unknown fault accepted")
	}
}

// TestErrors checks that Generate reports bad requests instead of emitting
// kernels.
func TestErrors(t *testing.T) {
	n := &ir.Node{ID: 1, Op: "add", Attrs: ir.Attrs{}}
	if _, err := Generate(n, []ir.Type{ir.T(ir.F16, ir.S(3)), ir.T(ir.F16, ir.S(3))}, nil, Options{}); err == nil {
		t.Error("f16 accepted")
	}
	if _, err := Generate(n, []ir.Type{ir.T(ir.F32, ir.Shape{ir.Sym("seq")}), f32(1)}, nil, Options{}); err == nil {
		t.Error("symbolic shape accepted")
	}
	if _, err := Generate(n, []ir.Type{f32(3), f32(3)}, []ir.Type{f32(4)}, Options{}); err == nil {
		t.Error("wrong output type accepted")
	}
	if _, err := Generate(&ir.Node{ID: 2, Op: "no_such_op"}, nil, nil, Options{}); err == nil {
		t.Error("unknown op accepted")
	}
	if _, err := Generate(nil, nil, nil, Options{}); err == nil {
		t.Error("nil node accepted")
	}
	fused := &ir.Node{ID: 4, Op: "fused_elementwise", Attrs: ir.Attrs{"expr": ir.StringAttr("add($0, $0)")}}
	if _, err := Generate(fused, []ir.Type{i32(3)}, nil, Options{}); err == nil {
		t.Error("i32 fused_elementwise accepted")
	}
	if _, err := Generate(n, []ir.Type{i32(3), i32(3)}, nil, Options{}); err != nil {
		t.Errorf("i32 add: %v", err)
	}
	exp := &ir.Node{ID: 5, Op: "exp"}
	if _, err := Generate(exp, []ir.Type{i32(3)}, nil, Options{}); err == nil || !strings.Contains(err.Error(), "no i32 kernel") {
		t.Errorf("i32 exp: got %v, want a no-i32-kernel error", err)
	}
	cat := &ir.Node{ID: 3, Op: "concat", Attrs: ir.Attrs{"axis": ir.IntAttr(0)}}
	many := make([]ir.Type, 32)
	for i := range many {
		many[i] = f32(2)
	}
	if _, err := Generate(cat, many, nil, Options{}); err == nil || !strings.Contains(err.Error(), "buffers") {
		t.Errorf("concat of 32 inputs: got %v, want a buffer limit error", err)
	}
	att := genCase{"attention", "attention", ir.Attrs{"scale": ir.FloatAttr(0.125)}, []ir.Type{f32(1, 8, 4096), f32(16, 4, 4096), f32(16, 4, 4096), i32()}}
	if _, err := att.generate(t, Options{Limits: Limits{MaxThreadgroupMemory: 16384}}); err == nil {
		t.Error("attention whose head dim fills threadgroup memory accepted")
	}
}

// TestGolden compares a few kernels with the files in testdata/ (go test
// -update rewrites them), so that changes to generated code show in diffs.
func TestGolden(t *testing.T) {
	for _, name := range []string{"add", "rms_norm", "gemv_t", "tiled", "attention", "rope"} {
		for _, c := range genCases() {
			if c.name != name {
				continue
			}
			k, err := c.generate(t, Options{})
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join("testdata", name+".metal")
			if *update {
				if err := os.MkdirAll("testdata", 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, k.Source, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run go test -update)", err)
			}
			if string(want) != string(k.Source) {
				t.Errorf("%s differs from %s (run go test -update and review the diff)", name, path)
			}
		}
	}
}
