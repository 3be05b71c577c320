package llvm_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/tapml/tapml/codegen/fault"
	cg "github.com/tapml/tapml/codegen/llvm"
	"github.com/tapml/tapml/ir"
	"github.com/tapml/tapml/runtime"
	"github.com/tapml/tapml/runtime/cpu"
	"github.com/tapml/tapml/runtime/llvm"
	"github.com/tapml/tapml/tensor"
)

// TestRuntimeErrors: the errors the IR defines at run time come back from
// the kernels as errors (not crashes), like the reference's.
func TestRuntimeErrors(t *testing.T) {
	dev := newDevice(t, llvm.Options{})
	r := rng(5)
	cases := []opCase{
		{name: "gather id too big", op: ir.OpGather, in: []*tensor.Tensor{randF32(r, -1, 1, 4, 3), tensor.FromInt32([]int{2}, []int32{1, 4})}},
		{name: "gather id negative", op: ir.OpGather, in: []*tensor.Tensor{randF32(r, -1, 1, 4, 3), tensor.FromInt32([]int{1}, []int32{-1})}},
		{name: "kv_write past the end", op: ir.OpKVWrite, in: []*tensor.Tensor{randF32(r, -1, 1, 8, 1, 2), randF32(r, -1, 1, 3, 1, 2), tensor.ScalarInt32(6)}},
		{name: "kv_write negative pos", op: ir.OpKVWrite, in: []*tensor.Tensor{randF32(r, -1, 1, 8, 1, 2), randF32(r, -1, 1, 1, 1, 2), tensor.ScalarInt32(-1)}},
		{name: "attention past the end", op: ir.OpAttention, attrs: ir.Attrs{"scale": ir.FloatAttr(1)},
			in: []*tensor.Tensor{randF32(r, -1, 1, 2, 2, 4), randF32(r, -1, 1, 5, 2, 4), randF32(r, -1, 1, 5, 2, 4), tensor.ScalarInt32(4)}},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			n := nodeOf(100+i, c)
			outs := outTypes(t, n)
			if _, err := runOn(cpu.New(), n, c.in, outs); err == nil {
				t.Fatalf("cpu accepts the case; it is not an error")
			}
			cache := c.in[0].Clone()
			_, err := runOn(dev, n, c.in, outs)
			var ke *runtime.KernelError
			if !errors.As(err, &ke) || ke.Node != n {
				t.Fatalf("got %v, want a KernelError naming the node", err)
			}
			t.Logf("%v", err)
			if c.op == ir.OpKVWrite && string(cache.Data) != string(c.in[0].Data) {
				t.Errorf("the cache changed")
			}
		})
	}
}

// TestClangErrorNamesNode: when clang rejects a module, the error is a
// KernelError naming the op and node whose kernel is at fault, with
// clang's message.
func TestClangErrorNamesNode(t *testing.T) {
	dev := newDevice(t, llvm.Options{CacheDir: t.TempDir()})
	r := rng(6)
	good := nodeOf(1, opCase{op: ir.OpExp, in: []*tensor.Tensor{randF32(r, -1, 1, 3)}})
	bad := nodeOf(2, opCase{op: ir.OpAdd, in: []*tensor.Tensor{randF32(r, -1, 1, 3), randF32(r, -1, 1, 3)}})
	f := &ir.Function{Name: "f", Nodes: []*ir.Node{good, bad}, Params: append(append([]*ir.Value{}, good.Inputs...), bad.Inputs...)}
	llvm.BreakNode(dev, bad.ID)
	err := dev.Prepare(nil, f, f.Nodes)
	var ke *runtime.KernelError
	if !errors.As(err, &ke) {
		t.Fatalf("got %v, want a KernelError", err)
	}
	if ke.Node != bad || !strings.Contains(err.Error(), "op add") || !strings.Contains(err.Error(), "tapml_undefined") {
		t.Errorf("error %q does not name node %s and clang's complaint", err, bad)
	}
	t.Logf("%v", err)
}

// TestKernelCache: a second device on the same cache loads the compiled
// module instead of compiling it again.
func TestKernelCache(t *testing.T) {
	dir := t.TempDir()
	r := rng(7)
	c := opCase{op: ir.OpSoftmax, attrs: ir.Attrs{"axis": ir.IntAttr(-1)}, in: []*tensor.Tensor{randF32(r, -1, 1, 2, 9)}}
	n := nodeOf(1, c)
	f := &ir.Function{Name: "f", Nodes: []*ir.Node{n}, Params: n.Inputs}
	var first []*tensor.Tensor
	for i := 0; i < 2; i++ {
		dev := newDevice(t, llvm.Options{CacheDir: dir})
		if err := dev.Prepare(nil, f, f.Nodes); err != nil {
			t.Fatal(err)
		}
		out, err := runOn(dev, n, c.in, outTypes(t, n))
		if err != nil {
			t.Fatal(err)
		}
		s := dev.Stats()
		if i == 0 {
			first = out
			if s.Compiles != 1 || s.CacheHits != 0 {
				t.Errorf("first device: %+v, want one compile", s)
			}
		} else {
			if s.Compiles != 0 || s.CacheHits != 1 {
				t.Errorf("second device: %+v, want one cache hit and no compile", s)
			}
			if string(out[0].Data) != string(first[0].Data) {
				t.Errorf("the cached kernel computes something else")
			}
		}
	}
}

// TestLazyBatch: a function with a symbolic dim is compiled at its first
// launch, all its nodes in one module, once per binding of the symbol.
func TestLazyBatch(t *testing.T) {
	m := ir.NewModule("m")
	b := ir.NewFunction(m, "f")
	x := b.Param("x", ir.T(ir.F32, ir.Shape{ir.Sym("seq"), ir.D(4)}))
	y := b.Unary(ir.OpExp, x)
	z := b.Reshape(b.Add(y, x), ir.Shape{ir.D(2), ir.Sym("seq"), ir.D(2)})
	b.Return(b.Unary(ir.OpNeg, z))
	if err := b.Err(); err != nil {
		t.Fatal(err)
	}
	dev := newDevice(t, llvm.Options{CopyReshape: true})
	ex := runtime.NewExecutor(m, dev)
	if err := ex.Prepare("f"); err != nil {
		t.Fatal(err)
	}
	if s := dev.Stats(); s.Modules != 0 {
		t.Fatalf("Prepare built %d modules; nothing is static", s.Modules)
	}
	ref := runtime.NewExecutor(m, cpu.New())
	for _, seq := range []int{3, 5, 3} {
		r := rng(uint64(seq))
		in := randF32(r, -1, 1, seq, 4)
		want := call(t, ref, in)
		got := call(t, ex, in)
		if err := compare(got, want, libm, opCase{}); err != nil {
			t.Errorf("seq %d: %v", seq, err)
		}
	}
	if s := dev.Stats(); s.Modules != 2 || s.KernelsMade != 8 {
		t.Errorf("stats %+v, want 2 modules of 4 kernels (seq 3 and 5)", s)
	}
}

func call(t *testing.T, ex *runtime.Executor, in *tensor.Tensor) *tensor.Tensor {
	t.Helper()
	b, err := ex.Upload("", in.Clone())
	if err != nil {
		t.Fatal(err)
	}
	res, err := ex.Call("f", b)
	if err != nil {
		t.Fatal(err)
	}
	out, err := runtime.Download(res[0])
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestFaults: each fault changes the result of the ops it applies to; an
// unknown fault, or one that does not apply to the op, is an error.
func TestFaults(t *testing.T) {
	r := rng(8)
	type fc struct {
		fault string
		c     opCase
	}
	big := randF32(r, -1, 1, 2, 8)
	for i := range big.Float32s() {
		big.Float32s()[i] *= 1e5
	}
	cases := []fc{
		{fault.WrongIndex, opCase{op: ir.OpMatmul, attrs: ir.Attrs{"transpose_b": ir.BoolAttr(true)}, in: []*tensor.Tensor{randF32(r, -1, 1, 2, 8), randF32(r, -1, 1, 5, 8)}}},
		{fault.WrongIndex, opCase{op: ir.OpAdd, in: []*tensor.Tensor{randF32(r, -1, 1, 7), randF32(r, -1, 1, 7)}}},
		{fault.WrongIndex, opCase{op: ir.OpGather, in: []*tensor.Tensor{randF32(r, -1, 1, 4, 3), tensor.FromInt32([]int{2}, []int32{1, 3})}}},
		{fault.WrongIndex, opCase{op: ir.OpKVWrite, in: []*tensor.Tensor{randF32(r, -1, 1, 8, 1, 2), randF32(r, -1, 1, 2, 1, 2), tensor.ScalarInt32(6)}}},
		{fault.WrongIndex, opCase{op: ir.OpAttention, attrs: ir.Attrs{"scale": ir.FloatAttr(1)},
			in: []*tensor.Tensor{randF32(r, -1, 1, 1, 2, 4), randF32(r, -1, 1, 5, 2, 4), randF32(r, -1, 1, 5, 2, 4), tensor.ScalarInt32(3)}}},
		{fault.WrongConstant, opCase{op: ir.OpRMSNorm, attrs: ir.Attrs{"eps": ir.FloatAttr(1e-5)}, in: []*tensor.Tensor{randF32(r, -1, 1, 2, 8), randF32(r, -1, 1, 8)}}},
		{fault.WrongConstant, opCase{op: ir.OpRope, attrs: ir.Attrs{"theta": ir.FloatAttr(10000)}, in: []*tensor.Tensor{randF32(r, -1, 1, 1, 2, 8), tensor.ScalarInt32(3)}}},
		{fault.WrongConstant, opCase{op: ir.OpFusedElementwise, attrs: ir.Attrs{"expr": ir.StringAttr("mul($0, 3)")}, in: []*tensor.Tensor{randF32(r, -1, 1, 5)}}},
		{fault.F16Overflow, opCase{op: ir.OpMatmul, attrs: ir.Attrs{"transpose_b": ir.BoolAttr(true)}, in: []*tensor.Tensor{big, randF32(r, 1, 2, 3, 8)}}},
		{fault.F16Overflow, opCase{op: ir.OpMul, in: []*tensor.Tensor{big, big}}},
		{fault.F16Overflow, opCase{op: ir.OpMatmul, in: []*tensor.Tensor{big, randF32(r, 1, 2, 8, 3)}}},
		{fault.WrongIndex, opCase{op: ir.OpMatmul, in: []*tensor.Tensor{randF32(r, -1, 1, 5, 8), randF32(r, -1, 1, 8, 20)}}},
	}
	for i, c := range cases {
		t.Run(c.fault+"/"+c.c.op.String(), func(t *testing.T) {
			n := nodeOf(200+i, c.c)
			outs := outTypes(t, n)
			clean := newDevice(t, llvm.Options{})
			faulty := newDevice(t, llvm.Options{Faults: map[int]string{n.ID: c.fault}})
			want, err := runOn(clean, n, c.c.in, outs)
			if err != nil {
				t.Fatal(err)
			}
			got, err := runOn(faulty, n, c.c.in, outs)
			if err != nil {
				t.Fatal(err)
			}
			if string(got[0].Data) == string(want[0].Data) {
				t.Errorf("the fault changes nothing")
			}
		})
	}
	n := nodeOf(1, opCase{op: ir.OpReshape, attrs: ir.Attrs{"shape": ir.ShapeAttr(ir.S(2, 2))}, in: []*tensor.Tensor{randF32(r, -1, 1, 4)}})
	in := []ir.Type{ir.T(ir.F32, ir.S(4))}
	if _, err := cg.Generate(n, in, nil, cg.Options{Fault: fault.WrongConstant}); err == nil {
		t.Errorf("wrong_constant on reshape: no error")
	}
	if _, err := cg.Generate(n, in, nil, cg.Options{Fault: "nonsense"}); err == nil {
		t.Errorf("an unknown fault: no error")
	}
	if _, err := cg.Generate(n, in, nil, cg.Options{Fault: fault.WrongIndex}); err != nil {
		t.Errorf("wrong_index on reshape: %v", err)
	}
}

// TestSplitDeterministic: splitting a launch over goroutines gives the same
// bits as one call.
func TestSplitDeterministic(t *testing.T) {
	r := rng(9)
	c := opCase{op: ir.OpMatmul, attrs: ir.Attrs{"transpose_b": ir.BoolAttr(true)}, in: []*tensor.Tensor{randF32(r, -1, 1, 3, 300), randF32(r, -1, 1, 999, 300)}}
	n := nodeOf(1, c)
	outs := outTypes(t, n)
	var first []byte
	for _, w := range []int{1, 2, 3, 7} {
		dev := newDevice(t, llvm.Options{Workers: w})
		got, err := runOn(dev, n, c.in, outs)
		if err != nil {
			t.Fatal(err)
		}
		if first == nil {
			first = got[0].Data
		} else if string(got[0].Data) != string(first) {
			t.Errorf("%d workers give other bits than 1", w)
		}
	}
}

// TestQueueTwoShapes: without Prepare, two calls of a function with
// different shapes before a download queue the same nodes twice; the
// flush compiles them in two modules and runs everything in order.
func TestQueueTwoShapes(t *testing.T) {
	m := ir.NewModule("m")
	b := ir.NewFunction(m, "f")
	x := b.Param("x", ir.T(ir.F32, ir.Shape{ir.Sym("seq"), ir.D(4)}))
	b.Return(b.Unary(ir.OpNeg, b.Unary(ir.OpExp, x)))
	if err := b.Err(); err != nil {
		t.Fatal(err)
	}
	dev := newDevice(t, llvm.Options{})
	ex := runtime.NewExecutor(m, dev)
	ref := runtime.NewExecutor(m, cpu.New())
	var ins []*tensor.Tensor
	var outs []*runtime.Buffer
	for _, seq := range []int{3, 5} {
		in := randF32(rng(uint64(seq)), -1, 1, seq, 4)
		buf, err := ex.Upload("", in.Clone())
		if err != nil {
			t.Fatal(err)
		}
		res, err := ex.Call("f", buf)
		if err != nil {
			t.Fatal(err)
		}
		ins, outs = append(ins, in), append(outs, res[0])
	}
	for i, o := range outs {
		got, err := runtime.Download(o)
		if err != nil {
			t.Fatal(err)
		}
		if err := compare(got, call(t, ref, ins[i]), libm, opCase{}); err != nil {
			t.Errorf("call %d: %v", i, err)
		}
	}
	if s := dev.Stats(); s.Modules != 2 || s.KernelsMade != 4 {
		t.Errorf("stats %+v, want 2 modules of 2 kernels", s)
	}
}
