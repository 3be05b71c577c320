package cpu

import (
	"errors"
	"strings"
	"testing"

	"github.com/tapml/tapml/internal/testenv/storedtest"
	"github.com/tapml/tapml/ir"
	"github.com/tapml/tapml/runtime"
	"github.com/tapml/tapml/tensor"
)

// sample is one valid call of an op.
type sample struct {
	attrs ir.Attrs
	in    []*tensor.Tensor
}

func samples() map[ir.Op]sample {
	r := newRand(30)
	x := randF32(r, 2, 3)
	pos := tensor.ScalarInt32(1)
	s := map[ir.Op]sample{
		ir.OpConstant:         {ir.Attrs{"shape": ir.ShapeAttr(ir.S(2)), "value": ir.FloatsAttr(1)}, nil},
		ir.OpCast:             {ir.Attrs{"to": ir.DTypeAttr(ir.I32)}, []*tensor.Tensor{x}},
		ir.OpGather:           {nil, []*tensor.Tensor{x, tensor.FromInt32([]int{2}, []int32{1, 0})}},
		ir.OpDequantize:       {nil, []*tensor.Tensor{storedtest.Tensor(r, ir.Q8_0, 2, 32)}},
		ir.OpMatmul:           {nil, []*tensor.Tensor{x, randF32(r, 3, 4)}},
		ir.OpRMSNorm:          {nil, []*tensor.Tensor{x, randF32(r, 3)}},
		ir.OpRMSNormMatmul:    {nil, []*tensor.Tensor{x, randF32(r, 3), randF32(r, 5, 3)}},
		ir.OpRMSNormSwiGLU:    {nil, []*tensor.Tensor{x, randF32(r, 3), randF32(r, 5, 3), randF32(r, 5, 3)}},
		ir.OpRMSNormQKV:       {nil, []*tensor.Tensor{x, randF32(r, 3), randF32(r, 5, 3), randF32(r, 2, 3), randF32(r, 2, 3)}},
		ir.OpLayerNorm:        {nil, []*tensor.Tensor{x, randF32(r, 3), randF32(r, 3)}},
		ir.OpSoftmax:          {nil, []*tensor.Tensor{x}},
		ir.OpArgmax:           {nil, []*tensor.Tensor{x}},
		ir.OpRope:             {nil, []*tensor.Tensor{randF32(r, 2, 2, 4), pos}},
		ir.OpKVWrite:          {nil, []*tensor.Tensor{randF32(r, 5, 1, 4), randF32(r, 2, 1, 4), pos}},
		ir.OpRopeKVWrite:      {nil, []*tensor.Tensor{randF32(r, 5, 1, 4), randF32(r, 5, 1, 4), randF32(r, 2, 2, 4), randF32(r, 2, 1, 4), randF32(r, 2, 1, 4), pos}},
		ir.OpAttention:        {ir.Attrs{"scale": ir.FloatAttr(0.5)}, []*tensor.Tensor{randF32(r, 2, 2, 4), randF32(r, 5, 1, 4), randF32(r, 5, 1, 4), pos}},
		ir.OpReshape:          {ir.Attrs{"shape": ir.ShapeAttr(ir.S(3, 2))}, []*tensor.Tensor{x}},
		ir.OpTranspose:        {ir.Attrs{"perm": ir.IntsAttr(1, 0)}, []*tensor.Tensor{x}},
		ir.OpSlice:            {ir.Attrs{"axis": ir.IntAttr(1), "start": ir.IntAttr(1), "end": ir.IntAttr(3)}, []*tensor.Tensor{x}},
		ir.OpConcat:           {ir.Attrs{"axis": ir.IntAttr(0)}, []*tensor.Tensor{x, x}},
		ir.OpProbe:            {nil, []*tensor.Tensor{x}},
		ir.OpTransfer:         {ir.Attrs{"from": ir.StringAttr("source"), "to": ir.StringAttr("target")}, []*tensor.Tensor{x}},
		ir.OpFusedElementwise: {ir.Attrs{"expr": ir.StringAttr("add($0, 1)")}, []*tensor.Tensor{x}},
		ir.OpCompare:          {ir.Attrs{"cmp": ir.StringAttr("lt")}, []*tensor.Tensor{x, randF32(r, 3)}},
		ir.OpWhere:            {nil, []*tensor.Tensor{tensor.FromInt32([]int{2, 1}, []int32{0, 7}), x, randF32(r, 3)}},
	}
	for _, op := range ir.UnaryOps {
		s[op] = sample{nil, []*tensor.Tensor{x}}
	}
	for _, op := range ir.BinaryOps {
		s[op] = sample{nil, []*tensor.Tensor{x, randF32(r, 3)}}
	}
	for op, c := range nnSamples(r) {
		s[op] = c
	}
	return s
}

// Every registered op has a kernel that runs. An op added to the registry
// without a CPU kernel fails here.
func TestEveryOpImplemented(t *testing.T) {
	d := New()
	s := samples()
	for _, def := range ir.Ops() {
		if !Supports(def.Op) {
			t.Errorf("op %s has no CPU kernel", def.Name)
			continue
		}
		c, ok := s[def.Op]
		if !ok {
			t.Errorf("op %s has no sample call in this test; add one", def.Name)
			continue
		}
		launchN(t, d, def.Op, c.attrs, c.in...) // checks the output types against inference
	}
}

// Bad inputs give errors, never panics.
func TestErrors(t *testing.T) {
	d := New()
	r := newRand(31)
	x := randF32(r, 2, 3)
	pos := tensor.ScalarInt32(0)
	bad := []struct {
		name  string
		op    ir.Op
		attrs ir.Attrs
		in    []*tensor.Tensor
		msg   string
	}{
		{"matmul inner dims", ir.OpMatmul, nil, []*tensor.Tensor{x, randF32(r, 4, 2)}, "inner dims"},
		{"matmul rank", ir.OpMatmul, nil, []*tensor.Tensor{randF32(r, 3), x}, "rank"},
		{"matmul batch", ir.OpMatmul, nil, []*tensor.Tensor{randF32(r, 2, 2, 3), randF32(r, 3, 3, 2)}, "batch"},
		{"matmul ints", ir.OpMatmul, nil, []*tensor.Tensor{x.Convert(ir.I32), x.Convert(ir.I32)}, "f32"},
		{"exp on bool", ir.OpExp, nil, []*tensor.Tensor{x.Convert(ir.Bool)}, "not supported"},
		{"add dtypes", ir.OpAdd, nil, []*tensor.Tensor{x, x.Convert(ir.I32)}, "dtypes differ"},
		{"add shapes", ir.OpAdd, nil, []*tensor.Tensor{x, randF32(r, 4)}, "broadcast"},
		{"gather float ids", ir.OpGather, nil, []*tensor.Tensor{x, x}, "ids"},
		{"gather axis", ir.OpGather, ir.Attrs{"axis": ir.IntAttr(2)}, []*tensor.Tensor{x, tensor.FromInt32([]int{1}, []int32{0})}, "axis"},
		{"rope rank", ir.OpRope, nil, []*tensor.Tensor{x, pos}, "[S, H, Dh]"},
		{"rope pos", ir.OpRope, nil, []*tensor.Tensor{randF32(r, 1, 1, 4), tensor.FromInt32([]int{1}, []int32{0})}, "pos"},
		{"rope dims", ir.OpRope, ir.Attrs{"dims": ir.IntAttr(3)}, []*tensor.Tensor{randF32(r, 1, 1, 4), pos}, "dims"},
		{"rope style", ir.OpRope, ir.Attrs{"style": ir.StringAttr("neox")}, []*tensor.Tensor{randF32(r, 1, 1, 4), pos}, "style"},
		{"kv_write shape", ir.OpKVWrite, nil, []*tensor.Tensor{randF32(r, 4, 2, 3), randF32(r, 1, 1, 3), pos}, "like the cache"},
		{"attention heads", ir.OpAttention, ir.Attrs{"scale": ir.FloatAttr(1)}, []*tensor.Tensor{randF32(r, 1, 3, 4), randF32(r, 4, 2, 4), randF32(r, 4, 2, 4), pos}, "multiple"},
		{"attention k v", ir.OpAttention, ir.Attrs{"scale": ir.FloatAttr(1)}, []*tensor.Tensor{randF32(r, 1, 2, 4), randF32(r, 4, 2, 4), randF32(r, 3, 2, 4), pos}, "want q"},
		{"rms_norm weight", ir.OpRMSNorm, nil, []*tensor.Tensor{x, randF32(r, 2)}, "last dim"},
		{"softmax axis", ir.OpSoftmax, ir.Attrs{"axis": ir.IntAttr(-3)}, []*tensor.Tensor{x}, "axis"},
		{"transpose perm", ir.OpTranspose, ir.Attrs{"perm": ir.IntsAttr(0, 0)}, []*tensor.Tensor{x}, "permutation"},
		{"slice step", ir.OpSlice, ir.Attrs{"axis": ir.IntAttr(0), "start": ir.IntAttr(0), "end": ir.IntAttr(1), "step": ir.IntAttr(0)}, []*tensor.Tensor{x}, "step"},
		{"concat dims", ir.OpConcat, ir.Attrs{"axis": ir.IntAttr(0)}, []*tensor.Tensor{x, randF32(r, 2, 4)}, "differs"},
		{"fused expr", ir.OpFusedElementwise, ir.Attrs{"expr": ir.StringAttr("foo($0)")}, []*tensor.Tensor{x}, "not an elementwise op"},
		{"fused inputs", ir.OpFusedElementwise, ir.Attrs{"expr": ir.StringAttr("add($0, $2)")}, []*tensor.Tensor{x, x}, "reads 3 inputs"},
		{"constant count", ir.OpConstant, ir.Attrs{"shape": ir.ShapeAttr(ir.S(3)), "value": ir.FloatsAttr(1, 2)}, nil, "needs 1 or 3"},
		{"cast invalid", ir.OpCast, ir.Attrs{"to": ir.DTypeAttr(ir.Invalid)}, []*tensor.Tensor{x}, "invalid"},
		{"too few inputs", ir.OpAdd, nil, []*tensor.Tensor{x}, "inputs"},
		{"missing attribute", ir.OpReshape, nil, []*tensor.Tensor{x}, "missing required attribute"},
		{"unknown op", ir.OpNone, nil, []*tensor.Tensor{x}, "unknown op"},
		{"bad tensor", ir.OpNeg, nil, []*tensor.Tensor{{DType: ir.F32, Shape: []int{4}, Data: make([]byte, 4)}}, "bytes"},
	}
	for _, c := range bad {
		err := launchRaw(d, c.op, c.attrs, c.in...)
		if err == nil {
			t.Errorf("%s: no error", c.name)
		} else if !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%s: error %q does not mention %q", c.name, err, c.msg)
		}
	}
	// Buffers that are not the device's.
	if _, err := d.Launch(&ir.Node{Op: ir.OpNeg}, bufs(d, []*tensor.Tensor{x})[:0:0], nil); err == nil {
		t.Error("neg without inputs: no error")
	}
	b := bufs(d, []*tensor.Tensor{x})
	b[0].Handle = "not a tensor"
	if _, err := d.Launch(&ir.Node{Op: ir.OpNeg}, b, nil); err == nil || !strings.Contains(err.Error(), "not a CPU buffer") {
		t.Errorf("foreign buffer: error %v", err)
	}
}

func TestPrepare(t *testing.T) {
	d := New()
	good := &ir.Node{ID: 3, Op: ir.OpFusedElementwise, Attrs: ir.Attrs{"expr": ir.StringAttr("mul(silu($0), $1)")}}
	bad := &ir.Node{ID: 4, Op: ir.OpFusedElementwise, Attrs: ir.Attrs{"expr": ir.StringAttr("mul(silu($0)")}}
	if err := d.Prepare(nil, nil, []*ir.Node{good}); err != nil {
		t.Fatal(err)
	}
	if d.exprs["mul(silu($0), $1)"] == nil {
		t.Error("Prepare did not compile the expression")
	}
	err := d.Prepare(nil, nil, []*ir.Node{good, bad})
	var ke *runtime.KernelError
	if !errors.As(err, &ke) || ke.Node != bad {
		t.Errorf("Prepare of a bad expression: error %v, want a KernelError naming node #4", err)
	}
	if err := d.Prepare(nil, nil, []*ir.Node{{Op: ir.OpNone}}); err == nil {
		t.Error("Prepare of an unknown op: no error")
	}
}

// Errors name the node, once, through the executor too.
func TestErrorNamesNode(t *testing.T) {
	d := New()
	n := &ir.Node{ID: 9, Op: ir.OpGather, Attrs: ir.Attrs{"axis": ir.IntAttr(0)}, Prov: "tok_embeddings"}
	_, err := d.Launch(n, bufs(d, []*tensor.Tensor{randF32(newRand(1), 4, 2), tensor.FromInt32([]int{1}, []int32{4})}), nil)
	var ke *runtime.KernelError
	if !errors.As(err, &ke) || ke.Node != n {
		t.Fatalf("error %v is not a KernelError naming the node", err)
	}
	if want := "cpu: node #9 gather (tok_embeddings): id 4 (element 0 of ids) is out of range [0, 4)"; err.Error() != want {
		t.Errorf("error %q, want %q", err, want)
	}
}
