package cpu

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/tapml/tapml/ir"
	"github.com/tapml/tapml/tensor"
)

func TestEvaluate(t *testing.T) {
	d := New()
	defer d.Close()
	x := tensor.FromFloat32([]int{2, 3}, []float32{1, 2, 3, 4, 5, 6})
	sum, err := d.Evaluate(&ir.Node{ID: 1, Op: ir.OpAdd}, []*tensor.Tensor{x, x}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]float32{2, 4, 6, 8, 10, 12}, sum[0].Float32s()); diff != "" {
		t.Errorf("add (-want +got):\n%s", diff)
	}

	// A reshape's result is the caller's: changing it leaves the input be.
	r, err := d.Evaluate(&ir.Node{ID: 2, Op: ir.OpReshape, Attrs: ir.Attrs{"shape": ir.ShapeAttr(ir.S(3, 2))}},
		[]*tensor.Tensor{x}, []ir.Type{ir.T(ir.F32, ir.S(3, 2))})
	if err != nil {
		t.Fatal(err)
	}
	r[0].Float32s()[0] = 99
	if x.Float32s()[0] != 1 {
		t.Error("the reshaped result shares the input's data")
	}

	// kv_write updates its cache in place: Evaluate updates a copy.
	cache := tensor.New(ir.F32, []int{4, 1, 2})
	row := tensor.FromFloat32([]int{1, 1, 2}, []float32{7, 8})
	got, err := d.Evaluate(&ir.Node{ID: 3, Op: ir.OpKVWrite}, []*tensor.Tensor{cache, row, tensor.ScalarInt32(2)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]float32{0, 0, 0, 0, 7, 8, 0, 0}, got[0].Float32s()); diff != "" {
		t.Errorf("kv_write (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(make([]float32, 8), cache.Float32s()); diff != "" {
		t.Errorf("the cache input changed (-want +got):\n%s", diff)
	}

	for _, bad := range []struct {
		name string
		n    *ir.Node
		in   []*tensor.Tensor
		out  []ir.Type
	}{
		{"nil node", nil, nil, nil},
		{"wrong output type", &ir.Node{ID: 4, Op: ir.OpNeg}, []*tensor.Tensor{x}, []ir.Type{ir.T(ir.F32, ir.S(6))}},
		{"wrong output count", &ir.Node{ID: 5, Op: ir.OpNeg}, []*tensor.Tensor{x}, []ir.Type{x.Type(), x.Type()}},
		{"nil input", &ir.Node{ID: 6, Op: ir.OpNeg}, []*tensor.Tensor{nil}, nil},
	} {
		if _, err := d.Evaluate(bad.n, bad.in, bad.out); err == nil {
			t.Errorf("%s: no error", bad.name)
		}
	}
}
