package cpu

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/tapml/tapml/internal/testenv/storedtest"
	"github.com/tapml/tapml/ir"
	"github.com/tapml/tapml/runtime"
	"github.com/tapml/tapml/tensor"
)

// The CPU reference reads a stored weight as its exact f32 decoding: a
// matmul over a weight in a storage dtype and a gather from a table in
// one give bit for bit what they give on the decoded f32 tensor.
func TestStoredInputsReadDecoded(t *testing.T) {
	d := New()
	r := newRand(40)
	for _, dt := range ir.StorageDTypes {
		k := 256
		w := storedtest.Tensor(r, dt, 3, k)
		wide := w.Convert(ir.F32)
		x := randF32(r, 2, k)
		tb := ir.Attrs{"transpose_b": ir.BoolAttr(true)}
		got, want := launch(t, d, ir.OpMatmul, tb, x, w), launch(t, d, ir.OpMatmul, tb, x, wide)
		if d := cmp.Diff(want.Data, got.Data); d != "" {
			t.Errorf("matmul over %s: differs from the decoded weight's (-want +got):\n%s", dt, d)
		}
		if got := launch(t, d, ir.OpDequantize, nil, w); !cmp.Equal(got.Data, wide.Data) {
			t.Errorf("dequantize %s: differs from tensor.Convert", dt)
		}
		ids := tensor.FromInt32([]int{4}, []int32{2, 0, 2, 1})
		got, want = launch(t, d, ir.OpGather, nil, w, ids), launch(t, d, ir.OpGather, nil, wide, ids)
		if d := cmp.Diff(want.Data, got.Data); d != "" {
			t.Errorf("gather from %s: differs from the decoded table's (-want +got):\n%s", dt, d)
		}
	}
}

// A weight is decoded once per buffer, not per call, and its decoding is
// dropped with the buffer.
func TestWeightDecodedOnce(t *testing.T) {
	d := New()
	r := newRand(41)
	w := storedtest.Tensor(r, ir.Q4_0, 4, 64)
	b, err := d.UploadWeight("w", w)
	if err != nil {
		t.Fatal(err)
	}
	xb, _ := d.Upload(randF32(r, 1, 64))
	n, outs := node(t, ir.OpMatmul, ir.Attrs{"transpose_b": ir.BoolAttr(true)}, tensor.New(ir.F32, []int{1, 64}), w)
	for range 2 {
		if _, err := d.Launch(n, []*runtime.Buffer{xb, b}, outs); err != nil {
			t.Fatal(err)
		}
	}
	first := d.weights[w]
	if first == nil || first.DType != ir.F32 {
		t.Fatalf("the weight's decoding is %v, want an f32 tensor", first)
	}
	if _, err := d.Launch(n, []*runtime.Buffer{xb, b}, outs); err != nil || d.weights[w] != first {
		t.Errorf("a third call decoded the weight again (%v)", err)
	}
	d.Free(b)
	if _, ok := d.weights[w]; ok {
		t.Error("Free kept the weight's decoding")
	}
}
