package cpu

import (
	"errors"
	"strings"
	"testing"

	"github.com/tapml/tapml/ir"
	"github.com/tapml/tapml/runtime"
	"github.com/tapml/tapml/tensor"
)

// sample is one valid call of an op.
type sample struct {
	attrs ir.Attrs
	in    []*tensor.Tensor
}

func samples() map[string]sample {
	r := newRand(30)
	x := randF32(r, 2, 3)
	pos := tensor.ScalarInt32(1)
	s := map[string]sample{
		"constant":          {ir.Attrs{"shape": ir.ShapeAttr(ir.S(2)), "value": ir.FloatsAttr(1)}, nil},
		"cast":              {ir.Attrs{"to": ir.DTypeAttr(ir.I32)}, []*tensor.Tensor{x}},
		"gather":            {nil, []*tensor.Tensor{x, tensor.FromInt32([]int{2}, []int32{1, 0})}},
		"matmul":            {nil, []*tensor.Tensor{x, randF32(r, 3, 4)}},
		"rms_norm":          {nil, []*tensor.Tensor{x, randF32(r, 3)}},
		"layer_norm":        {nil, []*tensor.Tensor{x, randF32(r, 3), randF32(r, 3)}},
		"softmax":           {nil, []*tensor.Tensor{x}},
		"argmax":            {nil, []*tensor.Tensor{x}},
		"rope":              {nil, []*tensor.Tensor{randF32(r, 2, 2, 4), pos}},
		"kv_write":          {nil, []*tensor.Tensor{randF32(r, 5, 1, 4), randF32(r, 2, 1, 4), pos}},
		"attention":         {ir.Attrs{"scale": ir.FloatAttr(0.5)}, []*tensor.Tensor{randF32(r, 2, 2, 4), randF32(r, 5, 1, 4), randF32(r, 5, 1, 4), pos}},
		"reshape":           {ir.Attrs{"shape": ir.ShapeAttr(ir.S(3, 2))}, []*tensor.Tensor{x}},
		"transpose":         {ir.Attrs{"perm": ir.IntsAttr(1, 0)}, []*tensor.Tensor{x}},
		"slice":             {ir.Attrs{"axis": ir.IntAttr(1), "start": ir.IntAttr(1), "end": ir.IntAttr(3)}, []*tensor.Tensor{x}},
		"concat":            {ir.Attrs{"axis": ir.IntAttr(0)}, []*tensor.Tensor{x, x}},
		"probe":             {nil, []*tensor.Tensor{x}},
		"transfer":          {ir.Attrs{"from": ir.StringAttr("source"), "to": ir.StringAttr("target")}, []*tensor.Tensor{x}},
		"fused_elementwise": {ir.Attrs{"expr": ir.StringAttr("add($0, 1)")}, []*tensor.Tensor{x}},
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
		if !Supports(def.Name) {
			t.Errorf("op %s has no CPU kernel", def.Name)
			continue
		}
		c, ok := s[def.Name]
		if !ok {
			t.Errorf("op %s has no sample call in this test; add one", def.Name)
			continue
		}
		launch(t, d, def.Name, c.attrs, c.in...) // checks the output type against inference
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
		op    string
		attrs ir.Attrs
		in    []*tensor.Tensor
		msg   string
	}{
		{"matmul inner dims", "matmul", nil, []*tensor.Tensor{x, randF32(r, 4, 2)}, "inner dims"},
		{"matmul rank", "matmul", nil, []*tensor.Tensor{randF32(r, 3), x}, "rank"},
		{"matmul batch", "matmul", nil, []*tensor.Tensor{randF32(r, 2, 2, 3), randF32(r, 3, 3, 2)}, "batch"},
		{"matmul ints", "matmul", nil, []*tensor.Tensor{x.Convert(ir.I32), x.Convert(ir.I32)}, "f32"},
		{"exp on bool", "exp", nil, []*tensor.Tensor{x.Convert(ir.Bool)}, "not supported"},
		{"add dtypes", "add", nil, []*tensor.Tensor{x, x.Convert(ir.I32)}, "dtypes differ"},
		{"add shapes", "add", nil, []*tensor.Tensor{x, randF32(r, 4)}, "broadcast"},
		{"gather float ids", "gather", nil, []*tensor.Tensor{x, x}, "ids"},
		{"gather axis", "gather", ir.Attrs{"axis": ir.IntAttr(2)}, []*tensor.Tensor{x, tensor.FromInt32([]int{1}, []int32{0})}, "axis"},
		{"rope rank", "rope", nil, []*tensor.Tensor{x, pos}, "[S, H, Dh]"},
		{"rope pos", "rope", nil, []*tensor.Tensor{randF32(r, 1, 1, 4), tensor.FromInt32([]int{1}, []int32{0})}, "pos"},
		{"rope dims", "rope", ir.Attrs{"dims": ir.IntAttr(3)}, []*tensor.Tensor{randF32(r, 1, 1, 4), pos}, "dims"},
		{"rope style", "rope", ir.Attrs{"style": ir.StringAttr("neox")}, []*tensor.Tensor{randF32(r, 1, 1, 4), pos}, "style"},
		{"kv_write shape", "kv_write", nil, []*tensor.Tensor{randF32(r, 4, 2, 3), randF32(r, 1, 1, 3), pos}, "like the cache"},
		{"attention heads", "attention", ir.Attrs{"scale": ir.FloatAttr(1)}, []*tensor.Tensor{randF32(r, 1, 3, 4), randF32(r, 4, 2, 4), randF32(r, 4, 2, 4), pos}, "multiple"},
		{"attention k v", "attention", ir.Attrs{"scale": ir.FloatAttr(1)}, []*tensor.Tensor{randF32(r, 1, 2, 4), randF32(r, 4, 2, 4), randF32(r, 3, 2, 4), pos}, "want q"},
		{"rms_norm weight", "rms_norm", nil, []*tensor.Tensor{x, randF32(r, 2)}, "last dim"},
		{"softmax axis", "softmax", ir.Attrs{"axis": ir.IntAttr(-3)}, []*tensor.Tensor{x}, "axis"},
		{"transpose perm", "transpose", ir.Attrs{"perm": ir.IntsAttr(0, 0)}, []*tensor.Tensor{x}, "permutation"},
		{"slice step", "slice", ir.Attrs{"axis": ir.IntAttr(0), "start": ir.IntAttr(0), "end": ir.IntAttr(1), "step": ir.IntAttr(0)}, []*tensor.Tensor{x}, "step"},
		{"concat dims", "concat", ir.Attrs{"axis": ir.IntAttr(0)}, []*tensor.Tensor{x, randF32(r, 2, 4)}, "differs"},
		{"fused expr", "fused_elementwise", ir.Attrs{"expr": ir.StringAttr("foo($0)")}, []*tensor.Tensor{x}, "not an elementwise op"},
		{"fused inputs", "fused_elementwise", ir.Attrs{"expr": ir.StringAttr("add($0, $2)")}, []*tensor.Tensor{x, x}, "reads 3 inputs"},
		{"constant count", "constant", ir.Attrs{"shape": ir.ShapeAttr(ir.S(3)), "value": ir.FloatsAttr(1, 2)}, nil, "needs 1 or 3"},
		{"cast invalid", "cast", ir.Attrs{"to": ir.DTypeAttr(ir.Invalid)}, []*tensor.Tensor{x}, "invalid"},
		{"too few inputs", "add", nil, []*tensor.Tensor{x}, "inputs"},
		{"missing attribute", "reshape", nil, []*tensor.Tensor{x}, "missing required attribute"},
		{"unknown op", "nope", nil, []*tensor.Tensor{x}, "unknown op"},
		{"bad tensor", "neg", nil, []*tensor.Tensor{{DType: ir.F32, Shape: []int{4}, Data: make([]byte, 4)}}, "bytes"},
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
	if _, err := d.Launch(&ir.Node{Op: "neg"}, bufs(d, []*tensor.Tensor{x})[:0:0], nil); err == nil {
		t.Error("neg without inputs: no error")
	}
	b := bufs(d, []*tensor.Tensor{x})
	b[0].Handle = "not a tensor"
	if _, err := d.Launch(&ir.Node{Op: "neg"}, b, nil); err == nil || !strings.Contains(err.Error(), "not a CPU buffer") {
		t.Errorf("foreign buffer: error %v", err)
	}
}

func TestPrepare(t *testing.T) {
	d := New()
	good := &ir.Node{ID: 3, Op: "fused_elementwise", Attrs: ir.Attrs{"expr": ir.StringAttr("mul(silu($0), $1)")}}
	bad := &ir.Node{ID: 4, Op: "fused_elementwise", Attrs: ir.Attrs{"expr": ir.StringAttr("mul(silu($0)")}}
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
	if err := d.Prepare(nil, nil, []*ir.Node{{Op: "nope"}}); err == nil {
		t.Error("Prepare of an unknown op: no error")
	}
}

// Errors name the node, once, through the executor too.
func TestErrorNamesNode(t *testing.T) {
	d := New()
	n := &ir.Node{ID: 9, Op: "gather", Attrs: ir.Attrs{"axis": ir.IntAttr(0)}, Prov: "tok_embeddings"}
	_, err := d.Launch(n, bufs(d, []*tensor.Tensor{randF32(newRand(1), 4, 2), tensor.FromInt32([]int{1}, []int32{4})}), nil)
	var ke *runtime.KernelError
	if !errors.As(err, &ke) || ke.Node != n {
		t.Fatalf("error %v is not a KernelError naming the node", err)
	}
	if want := "cpu: node #9 gather (tok_embeddings): id 4 (element 0 of ids) is out of range [0, 4)"; err.Error() != want {
		t.Errorf("error %q, want %q", err, want)
	}
}
