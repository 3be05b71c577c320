package cpu

import (
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/tapml/tapml/ir"
	"github.com/tapml/tapml/runtime"
	"github.com/tapml/tapml/tensor"
)

// TestRound16 checks the f16 emulation: uploads and op outputs are
// rounded to f16 (beyond 65504 to infinity), the caller's tensor is left
// as it was, and the op computes in f32 between the roundings.
func TestRound16(t *testing.T) {
	d := NewWith(Options{Round16: true})
	a := tensor.FromFloat32([]int{3}, []float32{1 + 0x1p-12, 40000, 1})
	b := tensor.FromFloat32([]int{3}, []float32{0x1p-11, 40000, 0x1p-11 + 0x1p-13})
	orig := append([]float32{}, a.Float32s()...)
	var bufs []*runtime.Buffer
	for _, x := range []*tensor.Tensor{a, b} {
		buf, err := d.Upload(x)
		if err != nil {
			t.Fatal(err)
		}
		bufs = append(bufs, buf)
	}
	n := &ir.Node{ID: 1, Op: ir.OpAdd}
	res, err := d.Launch(n, bufs, nil)
	if err != nil {
		t.Fatal(err)
	}
	got, err := d.Download(res[0])
	if err != nil {
		t.Fatal(err)
	}
	// 1 + 2^-11 rounds to 1 (a tie, to even); 80000 overflows; 1 +
	// (2^-11 + 2^-13, which f16 holds) is 1 + 1.25·2^-11, nearer 1 + 2^-10.
	want := []float32{1, float32(math.Inf(1)), 1 + 0x1p-10}
	if diff := cmp.Diff(want, got.Float32s()); diff != "" {
		t.Errorf("add under f16 emulation (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(orig, a.Float32s()); diff != "" {
		t.Errorf("the uploaded tensor changed (-before +after):\n%s", diff)
	}
}
