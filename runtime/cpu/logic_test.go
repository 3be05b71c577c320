package cpu

import (
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/tapml/tapml/ir"
	"github.com/tapml/tapml/tensor"
)

// compare follows IEEE 754 (NaN compares false, but ne) with numpy
// broadcasting; where selects by any nonzero condition.
func TestCompareWhere(t *testing.T) {
	d := New()
	nan := float32(math.NaN())
	a := tensor.FromFloat32([]int{2, 3}, []float32{1, 2, nan, -0.0, 5, 6})
	b := tensor.FromFloat32([]int{3}, []float32{2, 2, nan})
	for cmpName, want := range map[string][]int32{
		"eq": {0, 1, 0, 0, 0, 0},
		"ne": {1, 0, 1, 1, 1, 1},
		"lt": {1, 0, 0, 1, 0, 0},
		"le": {1, 1, 0, 1, 0, 0},
		"gt": {0, 0, 0, 0, 1, 0},
		"ge": {0, 1, 0, 0, 1, 0},
	} {
		got := launch(t, d, ir.OpCompare, ir.Attrs{"cmp": ir.StringAttr(cmpName)}, a, b)
		if diff := cmp.Diff(want, got.Int32s()); diff != "" {
			t.Errorf("%s (-want +got):\n%s", cmpName, diff)
		}
	}
	cond := tensor.FromInt32([]int{2, 1}, []int32{0, -3})
	got := launch(t, d, ir.OpWhere, nil, cond, a, b)
	want := []float32{2, 2, nan, -0.0, 5, 6}
	for i, v := range got.Float32s() {
		if math.Float32bits(v) != math.Float32bits(want[i]) {
			t.Errorf("where element %d: %v, want %v (bit for bit)", i, v, want[i])
		}
	}
	ints := launch(t, d, ir.OpWhere, nil, tensor.FromInt32([]int{3}, []int32{1, 0, 1}), tensor.FromInt32([]int{3}, []int32{7, 8, 9}), tensor.FromInt32(nil, []int32{-1}))
	if diff := cmp.Diff([]int32{7, -1, 9}, ints.Int32s()); diff != "" {
		t.Errorf("where on i32 (-want +got):\n%s", diff)
	}
}
