package llvm_test

import (
	"bytes"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"slices"
	"strings"
	"testing"

	"github.com/tapml/tapml/codegen"
	"github.com/tapml/tapml/codegen/fault"
	"github.com/tapml/tapml/codegen/llvm"
	"github.com/tapml/tapml/codegen/wgsl"
	"github.com/tapml/tapml/internal/testenv"
	"github.com/tapml/tapml/ir"
)

type sample struct {
	op    ir.Op
	attrs ir.Attrs
	in    []ir.Type
}

func f32(s ...int64) ir.Type { return ir.T(ir.F32, ir.S(s...)) }
func i32(s ...int64) ir.Type { return ir.T(ir.I32, ir.S(s...)) }

var pos = ir.T(ir.I32, nil)

// samples has one node of every op (and a few variants); the kernel tests
// against the CPU reference live in runtime/llvm.
func samples() []sample {
	var ss []sample
	for _, op := range ir.UnaryOps {
		ss = append(ss, sample{op: op, in: []ir.Type{f32(3, 5)}})
	}
	for _, op := range ir.BinaryOps {
		ss = append(ss, sample{op: op, in: []ir.Type{f32(3, 1, 5), f32(4, 1)}})
	}
	tb := ir.Attrs{"transpose_b": ir.BoolAttr(true)}
	ss = append(ss,
		sample{op: ir.OpAdd, in: []ir.Type{ir.T(ir.I64, ir.S(3)), ir.T(ir.I64, ir.S(3))}},
		sample{op: ir.OpExp, in: []ir.Type{ir.T(ir.BF16, ir.S(3))}},
		sample{op: ir.OpFusedElementwise, attrs: ir.Attrs{"expr": ir.StringAttr("mul(silu($0), add($1, 1.5))")}, in: []ir.Type{f32(2, 8), f32(8)}},
		sample{op: ir.OpCast, attrs: ir.Attrs{"to": ir.DTypeAttr(ir.F16)}, in: []ir.Type{f32(6)}},
		sample{op: ir.OpConstant, attrs: ir.Attrs{"shape": ir.ShapeAttr(ir.S(2)), "value": ir.FloatsAttr(1, 2)}},
		sample{op: ir.OpGather, in: []ir.Type{f32(10, 4), ir.T(ir.I32, ir.S(3))}},
		sample{op: ir.OpGather, in: []ir.Type{ir.T(ir.Q4_K, ir.S(10, 256)), ir.T(ir.I32, ir.S(3))}},
		sample{op: ir.OpDequantize, in: []ir.Type{ir.T(ir.Q6_K, ir.S(2, 256))}},
		sample{op: ir.OpDequantize, in: []ir.Type{ir.T(ir.F16, ir.S(5))}},
		sample{op: ir.OpMatmul, attrs: tb, in: []ir.Type{f32(3, 32), ir.T(ir.Q4_0, ir.S(10, 32))}},
		sample{op: ir.OpMatmul, attrs: tb, in: []ir.Type{f32(3, 16), f32(10, 16)}},
		sample{op: ir.OpMatmul, in: []ir.Type{f32(2, 5, 16), f32(16, 21)}},
		sample{op: ir.OpMatmul, in: []ir.Type{ir.T(ir.F16, ir.S(2, 4)), ir.T(ir.F16, ir.S(4, 3))}},
		sample{op: ir.OpRMSNorm, in: []ir.Type{f32(2, 8), f32(8)}},
		sample{op: ir.OpRMSNormMatmul, in: []ir.Type{f32(2, 8), f32(8), f32(5, 8)}},
		sample{op: ir.OpRMSNormSwiGLU, in: []ir.Type{f32(2, 8), f32(8), f32(5, 8), f32(5, 8)}},
		sample{op: ir.OpRMSNormQKV, in: []ir.Type{f32(2, 8), f32(8), f32(5, 8), f32(3, 8), f32(3, 8)}},
		sample{op: ir.OpLayerNorm, in: []ir.Type{f32(2, 8), f32(8), f32(8)}},
		sample{op: ir.OpSoftmax, in: []ir.Type{f32(2, 8)}},
		sample{op: ir.OpArgmax, in: []ir.Type{f32(2, 8)}},
		sample{op: ir.OpRope, in: []ir.Type{f32(2, 3, 8), pos}},
		sample{op: ir.OpKVWrite, in: []ir.Type{f32(16, 2, 4), f32(1, 2, 4), pos}},
		sample{op: ir.OpRopeKVWrite, in: []ir.Type{f32(16, 2, 8), f32(16, 2, 8), f32(1, 4, 8), f32(1, 2, 8), f32(1, 2, 8), pos}},
		sample{op: ir.OpAttention, attrs: ir.Attrs{"scale": ir.FloatAttr(0.5)}, in: []ir.Type{f32(1, 4, 4), f32(16, 2, 4), f32(16, 2, 4), pos}},
		sample{op: ir.OpReshape, attrs: ir.Attrs{"shape": ir.ShapeAttr(ir.S(4, 2))}, in: []ir.Type{f32(8)}},
		sample{op: ir.OpProbe, in: []ir.Type{f32(3)}},
		sample{op: ir.OpTransfer, attrs: ir.Attrs{"from": ir.StringAttr("source"), "to": ir.StringAttr("target")}, in: []ir.Type{f32(3)}},
		sample{op: ir.OpTranspose, attrs: ir.Attrs{"perm": ir.IntsAttr(1, 0)}, in: []ir.Type{f32(3, 4)}},
		sample{op: ir.OpSlice, attrs: ir.Attrs{"axis": ir.IntAttr(0), "start": ir.IntAttr(1), "end": ir.IntAttr(3)}, in: []ir.Type{f32(4, 2)}},
		sample{op: ir.OpConcat, attrs: ir.Attrs{"axis": ir.IntAttr(0)}, in: []ir.Type{f32(1, 2), f32(3, 2)}},
		sample{op: ir.OpIota, attrs: ir.Attrs{"shape": ir.ShapeAttr(ir.S(2, 5)), "axis": ir.IntAttr(1)}, in: []ir.Type{pos}},
		sample{op: ir.OpReduceSum, attrs: ir.Attrs{"axes": ir.IntsAttr(1)}, in: []ir.Type{f32(2, 3, 4)}},
		sample{op: ir.OpReduceMean, attrs: ir.Attrs{"axes": ir.IntsAttr(-1, -2)}, in: []ir.Type{f32(2, 3, 4)}},
		sample{op: ir.OpReduceMax, attrs: ir.Attrs{"axes": ir.IntsAttr(0, 2), "keepdims": ir.BoolAttr(false)}, in: []ir.Type{f32(2, 3, 4)}},
		sample{op: ir.OpPool2D, attrs: ir.Attrs{"kernel": ir.IntsAttr(2, 2), "strides": ir.IntsAttr(2, 2)}, in: []ir.Type{f32(1, 2, 5, 5)}},
		sample{op: ir.OpPool2D, attrs: ir.Attrs{"mode": ir.StringAttr("avg"), "kernel": ir.IntsAttr(3, 3), "pads": ir.IntsAttr(1, 1, 1, 1)}, in: []ir.Type{f32(1, 2, 5, 5)}},
		sample{op: ir.OpConv2D, attrs: ir.Attrs{"pads": ir.IntsAttr(1, 1, 1, 1), "strides": ir.IntsAttr(2, 1)}, in: []ir.Type{f32(1, 4, 6, 7), f32(3, 4, 3, 3), f32(3)}},
		sample{op: ir.OpConvTranspose2D, attrs: ir.Attrs{"strides": ir.IntsAttr(2, 2), "groups": ir.IntAttr(2)}, in: []ir.Type{f32(1, 4, 3, 3), f32(4, 1, 3, 3)}},
		sample{op: ir.OpResize, attrs: ir.Attrs{"size": ir.IntsAttr(6, 8), "mode": ir.StringAttr("linear")}, in: []ir.Type{f32(1, 2, 3, 4)}},
		sample{op: ir.OpResize, attrs: ir.Attrs{"size": ir.IntsAttr(5, 2)}, in: []ir.Type{f32(1, 2, 3, 4)}},
		sample{op: ir.OpCompare, attrs: ir.Attrs{"cmp": ir.StringAttr("le")}, in: []ir.Type{f32(2, 3), f32(3)}},
		sample{op: ir.OpCompare, attrs: ir.Attrs{"cmp": ir.StringAttr("ne")}, in: []ir.Type{i32(4), i32()}},
		sample{op: ir.OpWhere, in: []ir.Type{i32(2, 1), f32(2, 3), f32(3)}},
		sample{op: ir.OpTopK, attrs: ir.Attrs{"k": ir.IntAttr(2)}, in: []ir.Type{f32(3, 8)}},
		sample{op: ir.OpExpertMatmul, in: []ir.Type{f32(2, 16), f32(4, 8, 16), ir.T(ir.I32, ir.S(2, 2))}},
		sample{op: ir.OpTokenShift, in: []ir.Type{f32(3, 8), f32(1, 8)}},
		sample{op: ir.OpCausalConv1D, in: []ir.Type{f32(3, 8), f32(2, 8), f32(8, 4)}},
		sample{op: ir.OpWKV, in: []ir.Type{f32(3, 8), f32(2, 8), f32(2, 8), f32(8), f32(8)}},
		sample{op: ir.OpSelectiveScan, in: []ir.Type{f32(8, 4), f32(2, 8), f32(2, 8), f32(8, 4), f32(2, 4), f32(2, 4)}},
	)
	return ss
}

func node(id int, s sample) *ir.Node {
	n := &ir.Node{ID: id, Op: s.op, Attrs: s.attrs}
	if n.Attrs == nil {
		n.Attrs = ir.Attrs{}
	}
	for i, t := range s.in {
		n.Inputs = append(n.Inputs, &ir.Value{Name: fmt.Sprint("x", i), Type: t})
	}
	return n
}

// TestEveryOpHasKernel fails when an op of the registry has no LLVM
// kernel or no sample here.
func TestEveryOpHasKernel(t *testing.T) {
	sampled := map[ir.Op]bool{}
	for _, s := range samples() {
		sampled[s.op] = true
	}
	for _, d := range ir.Ops() {
		if !llvm.Supports(d.Op) {
			t.Errorf("op %s has no LLVM kernel", d.Name)
		}
		if !sampled[d.Op] {
			t.Errorf("op %s has no sample in this test", d.Name)
		}
	}
	if llvm.Supports(ir.OpNone) {
		t.Errorf("Supports(OpNone)")
	}
}

// TestKernelModel checks each kernel's description: language, entry,
// bindings in ascending order (inputs, then outputs; kv_write's cache one
// ReadWrite binding), a grid of items, and a module with the host's target.
func TestKernelModel(t *testing.T) {
	triple, _ := llvm.HostTarget()
	for i, s := range samples() {
		n := node(i+1, s)
		k, err := llvm.Generate(n, s.in, nil, llvm.Options{})
		if err != nil {
			t.Errorf("%s: %v", s.op, err)
			continue
		}
		if k.Language != "llvm" || k.Op != s.op || k.NodeID != n.ID || k.Entry != llvm.EntryName(n) {
			t.Errorf("%s: kernel %s/%s/%d/%s", s.op, k.Language, k.Op, k.NodeID, k.Entry)
		}
		src := string(k.Source)
		if !strings.Contains(src, "define i32 @"+k.Entry+"(i8** nocapture readonly %bufs, i64 %lo, i64 %hi)") {
			t.Errorf("%s: no entry with the ABI signature in\n%s", s.op, src)
		}
		if triple != "" && !strings.Contains(src, `target triple = "`+triple+`"`) || !strings.Contains(src, "target datalayout") {
			t.Errorf("%s: module lacks the target triple or data layout", s.op)
		}
		want := []codegen.Binding{}
		out, _, _ := ir.InferTypes(s.op, s.in, n.Attrs)
		// input i and output i updated in place: one ReadWrite binding each
		first := ir.LookupOp(s.op).InPlace.Count()
		names := map[ir.Op][]string{ir.OpKVWrite: {"cache"}, ir.OpRopeKVWrite: {"k_cache", "v_cache"}}[s.op]
		for i := range first {
			name := "state"
			if i < len(names) {
				name = names[i]
			}
			want = append(want, codegen.Binding{Index: i, Name: name, Access: codegen.ReadWrite, Type: s.in[i], Input: i, Output: i})
		}
		for j := first; j < len(s.in); j++ {
			want = append(want, codegen.Binding{Index: len(want), Name: fmt.Sprint("in", j), Access: codegen.Read, Type: s.in[j], Input: j, Output: -1})
		}
		for j := first; j < len(out); j++ {
			want = append(want, codegen.Binding{Index: len(want), Name: fmt.Sprint("out", j), Access: codegen.Write, Type: out[j], Input: -1, Output: j})
		}
		if fmt.Sprint(k.Bindings) != fmt.Sprint(want) {
			t.Errorf("%s: bindings %v, want %v", s.op, k.Bindings, want)
		}
		if k.Grid[0] <= 0 || k.Grid[1] != 1 || k.Grid[2] != 1 {
			t.Errorf("%s: grid %v", s.op, k.Grid)
		}
	}
}

// TestGenerateErrors: symbolic shapes, wrong output types and unsupported
// dtypes are errors, not panics.
func TestGenerateErrors(t *testing.T) {
	n := node(1, sample{op: ir.OpExp, in: []ir.Type{f32(3)}})
	cases := []struct {
		name    string
		n       *ir.Node
		in, out []ir.Type
		opts    llvm.Options
	}{
		{"symbolic", n, []ir.Type{ir.T(ir.F32, ir.Shape{ir.Sym("seq")})}, nil, llvm.Options{}},
		{"wrong output", n, []ir.Type{f32(3)}, []ir.Type{f32(4)}, llvm.Options{}},
		{"input count", n, []ir.Type{f32(3), f32(3)}, nil, llvm.Options{}},
		{"int exp", n, []ir.Type{ir.T(ir.I32, ir.S(3))}, nil, llvm.Options{}},
		{"unknown fault", n, []ir.Type{f32(3)}, nil, llvm.Options{Fault: "bogus"}},
		{"fault does not apply", n, []ir.Type{f32(3)}, nil, llvm.Options{Fault: fault.WrongConstant}},
		{"unknown op", &ir.Node{ID: 2, Op: ir.OpNone}, nil, nil, llvm.Options{}},
		{"nil node", nil, nil, nil, llvm.Options{}},
	}
	for _, c := range cases {
		if _, err := llvm.Generate(c.n, c.in, c.out, c.opts); err == nil {
			t.Errorf("%s: no error", c.name)
		} else {
			t.Logf("%s: %v", c.name, err)
		}
	}
	// the same node twice in one module
	m := llvm.NewModule(llvm.Options{})
	if _, err := m.Add(n, []ir.Type{f32(3)}, nil, llvm.Options{}); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Add(n, []ir.Type{f32(3)}, nil, llvm.Options{}); err == nil {
		t.Errorf("a node added twice: no error")
	}
	if m.Len() != 1 {
		t.Errorf("module has %d kernels, want 1", m.Len())
	}
}

// TestFaultsApply: every fault either applies to an op's kernel (and
// changes its code) or is an error; the ops it applies to among the
// samples are exactly those codegen/fault lists for codegen/llvm.
func TestFaultsApply(t *testing.T) {
	applied := map[string]map[ir.Op]bool{}
	for i, s := range samples() {
		n := node(i+1, s)
		clean, err := llvm.Generate(n, s.in, nil, llvm.Options{})
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range fault.Names() {
			k, err := llvm.Generate(n, s.in, nil, llvm.Options{Fault: f})
			if err != nil {
				continue
			}
			if bytes.Equal(k.Source, clean.Source) {
				t.Errorf("%s with fault %s: the kernel is unchanged", s.op, f)
			}
			if applied[f] == nil {
				applied[f] = map[ir.Op]bool{}
			}
			applied[f][s.op] = true
		}
	}
	for _, f := range fault.Table {
		got := slices.Sorted(maps.Keys(applied[f.Name]))
		if want := f.Reaches(fault.LLVM, wgsl.HasConstant); !slices.Equal(got, want) {
			t.Errorf("%s applies to %v, the table says %v", f.Name, got, want)
		}
	}
}

// clang returns clang-14, which scripts/setup.sh installs.
func clang(t *testing.T) string {
	t.Helper()
	return testenv.Tool(t, "clang-14")
}

// TestModuleCompiles builds every sample's kernel (and every applicable
// fault) into one module and has clang check it.
func TestModuleCompiles(t *testing.T) {
	cc := clang(t)
	m := llvm.NewModule(llvm.Options{})
	id := 0
	for _, s := range samples() {
		for _, f := range append([]string{""}, fault.Of(fault.LLVM)...) {
			id++
			if _, err := m.Add(node(id, s), s.in, nil, llvm.Options{Fault: f}); err != nil && f == "" {
				t.Fatal(err)
			}
		}
	}
	dir := t.TempDir()
	ll := filepath.Join(dir, "k.ll")
	if err := os.WriteFile(ll, m.Source(), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(cc, "-O0", "-c", ll, "-o", filepath.Join(dir, "k.o")).CombinedOutput(); err != nil {
		t.Fatalf("clang rejects the module of %d kernels: %v\n%s", m.Len(), err, out)
	}
}

// TestMatmulVectorises: with the module's target set, LLVM turns the
// matmul kernels' loops into AVX2 FMAs (amd64 only).
func TestMatmulVectorises(t *testing.T) {
	if goruntime.GOARCH != "amd64" {
		t.Skip("checks x86 assembly") // platform-specific: AVX2 exists on amd64 only
	}
	cc := clang(t)
	for _, s := range []sample{
		{op: ir.OpMatmul, attrs: ir.Attrs{"transpose_b": ir.BoolAttr(true)}, in: []ir.Type{f32(1, 288), f32(512, 288)}},
		{op: ir.OpMatmul, in: []ir.Type{f32(8, 64), f32(64, 64)}},
	} {
		k, err := llvm.Generate(node(1, s), s.in, nil, llvm.Options{})
		if err != nil {
			t.Fatal(err)
		}
		dir := t.TempDir()
		ll := filepath.Join(dir, "k.ll")
		if err := os.WriteFile(ll, k.Source, 0o644); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command(cc, "-O3", "-march=haswell", "-S", ll, "-o", "-").CombinedOutput()
		if err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		if !regexpFMA(string(out)) {
			t.Errorf("%v: no vector FMA on ymm registers in the assembly", s.in)
		}
	}
}

func regexpFMA(asm string) bool {
	for _, line := range strings.Split(asm, "\n") {
		if strings.Contains(line, "vfmadd") && strings.Contains(line, "ymm") {
			return true
		}
	}
	return false
}
