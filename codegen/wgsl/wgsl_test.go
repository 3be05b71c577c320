package wgsl

import (
	"flag"
	"math"
	"os"
	"path/filepath"
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

// genCases has at least one case per op of the registry, and one per
// kernel variant (GEMV with and without transpose, tiled matmul).
func genCases() []genCase {
	var cs []genCase
	for _, op := range ir.UnaryOps {
		cs = append(cs, genCase{op, op, nil, []ir.Type{f32(7, 33)}})
	}
	for _, op := range ir.BinaryOps {
		cs = append(cs, genCase{op, op, nil, []ir.Type{f32(5, 1, 7), f32(3, 7)}})
	}
	cs = append(cs, nnGenCases()...) // nn_test.go
	pos := i32()
	return append(cs,
		genCase{"fused", "fused_elementwise", ir.Attrs{"expr": ir.StringAttr("mul(silu($0), add($1, 2.5))")}, []ir.Type{f32(3, 172), f32(172)}},
		genCase{"constant", "constant", ir.Attrs{"shape": ir.ShapeAttr(ir.S(2, 2)), "value": ir.FloatsAttr(1, 2, 3, 4)}, nil},
		genCase{"cast", "cast", ir.Attrs{"to": ir.DTypeAttr(ir.I32)}, []ir.Type{f32(10)}},
		genCase{"gather", "gather", nil, []ir.Type{f32(32000, 288), i32(1)}},
		genCase{"gemv_t", "matmul", ir.Attrs{"transpose_b": ir.BoolAttr(true)}, []ir.Type{f32(1, 288), f32(32000, 288)}},
		genCase{"gemv_n", "matmul", nil, []ir.Type{f32(1, 37), f32(37, 20)}},
		genCase{"tiled", "matmul", ir.Attrs{"transpose_b": ir.BoolAttr(true)}, []ir.Type{f32(2, 67, 45), f32(33, 45)}},
		genCase{"tiled_small_m", "matmul", nil, []ir.Type{f32(5, 64), f32(64, 172)}},
		genCase{"rms_norm", "rms_norm", nil, []ir.Type{f32(5, 288), f32(288)}},
		genCase{"layer_norm", "layer_norm", nil, []ir.Type{f32(5, 288), f32(288), f32(288)}},
		genCase{"softmax", "softmax", ir.Attrs{"axis": ir.IntAttr(1)}, []ir.Type{f32(6, 5, 7)}},
		genCase{"argmax", "argmax", nil, []ir.Type{f32(1, 32000)}},
		genCase{"rope", "rope", nil, []ir.Type{f32(9, 6, 48), pos}},
		genCase{"kv_write", "kv_write", nil, []ir.Type{f32(512, 4, 8), f32(1, 4, 8), pos}},
		genCase{"attention", "attention", ir.Attrs{"scale": ir.FloatAttr(0.125)}, []ir.Type{f32(1, 8, 64), f32(512, 4, 64), f32(512, 4, 64), pos}},
		genCase{"reshape", "reshape", ir.Attrs{"shape": ir.ShapeAttr(ir.S(4, -1))}, []ir.Type{f32(2, 3, 10)}},
		genCase{"transpose", "transpose", ir.Attrs{"perm": ir.IntsAttr(2, 0, 1)}, []ir.Type{f32(3, 5, 7)}},
		genCase{"slice", "slice", ir.Attrs{"axis": ir.IntAttr(0), "start": ir.IntAttr(-1), "end": ir.IntAttr(math.MaxInt32)}, []ir.Type{f32(7, 288)}},
		genCase{"concat", "concat", ir.Attrs{"axis": ir.IntAttr(0)}, []ir.Type{f32(2, 5), f32(3, 5)}},
		genCase{"probe", "probe", nil, []ir.Type{f32(3)}},
		genCase{"transfer", "transfer", ir.Attrs{"from": ir.StringAttr("source"), "to": ir.StringAttr("target")}, []ir.Type{f32(3)}},
	)
}

func (c genCase) node(t *testing.T) *ir.Node {
	t.Helper()
	_, na, err := ir.InferTypes(c.op, c.in, c.attrs)
	if err != nil {
		t.Fatalf("%s: %v", c.name, err)
	}
	return &ir.Node{ID: 7, Op: c.op, Attrs: na}
}

func TestEveryOpHasGenerator(t *testing.T) {
	covered := map[string]bool{}
	for _, c := range genCases() {
		covered[c.op] = true
	}
	for _, d := range ir.Ops() {
		if !Supports(d.Name) {
			t.Errorf("op %s has no WGSL generator", d.Name)
		}
		if !covered[d.Name] {
			t.Errorf("op %s has no generator test case", d.Name)
		}
	}
}

// TestKernelsRespectLimits generates every case under the default limits
// and under small ones, and checks the kernel's shape: bindings in
// ascending order (inputs, then outputs), workgroup and grid within the
// limits, only the WGSL subset the wgpu v0.19 naga accepts.
func TestKernelsRespectLimits(t *testing.T) {
	small := Limits{MaxInvocationsPerWorkgroup: 64, MaxWorkgroupSizeX: 64, MaxWorkgroupSizeY: 64, MaxWorkgroupSizeZ: 64,
		MaxWorkgroupStorageSize: 8192, MaxWorkgroupsPerDimension: 7, MaxStorageBuffersPerShaderStage: 8}
	for _, lim := range []Limits{{}, small} {
		l := lim.withDefaults()
		for _, c := range genCases() {
			k, err := Generate(c.node(t), c.in, nil, Options{Limits: lim})
			if err != nil {
				if lim == small && strings.Contains(err.Error(), "grid") {
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
	for _, bad := range []string{"enable ", "override ", "diagnostic", "requires "} {
		if strings.Contains(src, bad) {
			t.Errorf("%s: source uses %q, which this naga rejects", c.name, bad)
		}
	}
	wg := k.WorkgroupSize
	if wg[0]*wg[1]*wg[2] > l.MaxInvocationsPerWorkgroup || wg[0] > l.MaxWorkgroupSizeX || wg[1] > l.MaxWorkgroupSizeY || wg[2] > l.MaxWorkgroupSizeZ {
		t.Errorf("%s: workgroup %v exceeds %+v", c.name, wg, l)
	}
	for i, g := range k.Grid {
		if g > l.MaxWorkgroupsPerDimension {
			t.Errorf("%s: grid %v exceeds %d in dim %d", c.name, k.Grid, l.MaxWorkgroupsPerDimension, i)
		}
	}
	if k.Language != "wgsl" || k.Entry != Entry || k.Op != c.op || k.NodeID != 7 {
		t.Errorf("%s: kernel header %q %q %q %d", c.name, k.Language, k.Entry, k.Op, k.NodeID)
	}
	lastIn, seenOut := -1, false
	for i, b := range k.Bindings {
		if b.Index != i {
			t.Errorf("%s: binding %d has index %d", c.name, i, b.Index)
		}
		if !strings.Contains(src, "@group(0) @binding("+itoa(i)+")") {
			t.Errorf("%s: source does not declare binding %d", c.name, i)
		}
		switch {
		case b.Input >= 0:
			if seenOut || b.Input != lastIn+1 {
				t.Errorf("%s: binding %d carries input %d out of order", c.name, i, b.Input)
			}
			lastIn = b.Input
			if !b.Type.Equal(c.in[b.Input]) {
				t.Errorf("%s: binding %d type %s, input is %s", c.name, i, b.Type, c.in[b.Input])
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
	if lastIn != len(c.in)-1 {
		t.Errorf("%s: bindings carry %d inputs, the node has %d", c.name, lastIn+1, len(c.in))
	}
}

func itoa(i int) string {
	if i < 10 {
		return string(rune('0' + i))
	}
	return itoa(i/10) + string(rune('0'+i%10))
}

// TestGridFolds checks that an elementwise kernel too big for one grid
// dimension folds into two that together cover every element.
func TestGridFolds(t *testing.T) {
	c := genCase{"exp", "exp", nil, []ir.Type{f32(1000, 33)}}
	k, err := Generate(c.node(t), c.in, nil, Options{Limits: Limits{MaxWorkgroupsPerDimension: 10}})
	if err != nil {
		t.Fatal(err)
	}
	g := k.Grid
	if g[0] > 10 || g[1] > 10 || g[2] > 10 || g[0]*g[1]*g[2]*k.WorkgroupSize[0] < 33000 {
		t.Errorf("grid %v × workgroup %v does not cover 33000 elements within 10 per dim", g, k.WorkgroupSize)
	}
	if !strings.Contains(string(k.Source), "wid.z") {
		t.Error("folded kernel does not use wid.y")
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
		FaultWrongConstant:  {"add", "transpose", "gather", "softmax", "tiled"},
		FaultMissingBarrier: {"add", "exp", "gemv_n", "rope", "kv_write", "gather", "transpose"},
		FaultF16Overflow:    {"gather", "transpose", "kv_write", "argmax", "cast", "concat"},
	}
	byName := map[string]genCase{}
	for _, c := range genCases() {
		byName[c.name] = c
	}
	for fault, names := range applies {
		for _, name := range names {
			c := byName[name]
			base, err := Generate(c.node(t), c.in, nil, Options{})
			if err != nil {
				t.Fatal(err)
			}
			k, err := Generate(c.node(t), c.in, nil, Options{Fault: fault})
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
			c := byName[name]
			_, err := Generate(c.node(t), c.in, nil, Options{Fault: fault})
			if err == nil || !strings.Contains(err.Error(), "does not apply") {
				t.Errorf("%s on %s: got %v, want a does-not-apply error", fault, name, err)
			}
		}
	}
	c := byName["add"]
	if _, err := Generate(c.node(t), c.in, nil, Options{Fault: "cosmic_ray"}); err == nil {
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
	cat := &ir.Node{ID: 3, Op: "concat", Attrs: ir.Attrs{"axis": ir.IntAttr(0)}}
	many := make([]ir.Type, 9)
	for i := range many {
		many[i] = f32(2)
	}
	if _, err := Generate(cat, many, nil, Options{}); err == nil || !strings.Contains(err.Error(), "storage buffers") {
		t.Errorf("concat of 9 inputs: got %v, want a storage-buffer limit error", err)
	}
}

// TestGolden compares a few kernels with the files in testdata/ (go test
// -update rewrites them), so that changes to generated code show in diffs.
func TestGolden(t *testing.T) {
	for _, name := range []string{"add", "rms_norm", "gemv_t", "tiled", "attention"} {
		for _, c := range genCases() {
			if c.name != name {
				continue
			}
			k, err := Generate(c.node(t), c.in, nil, Options{})
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join("testdata", name+".wgsl")
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
