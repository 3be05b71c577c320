package cpu

import (
	"math"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/tapml/tapml/ir"
	"github.com/tapml/tapml/tensor"
)

func TestTopK(t *testing.T) {
	nan := float32(math.NaN())
	negZero := float32(math.Copysign(0, -1))
	for _, tc := range []struct {
		name    string
		x       []float32
		shape   []int
		k, axis int64
		vals    []float32
		indices []int32
	}{
		{"distinct", []float32{0.1, 0.7, 0.2, 0.5}, []int{4}, 2, -1, []float32{0.7, 0.5}, []int32{1, 3}},
		{"ties lower index first", []float32{0.25, 0.25, 0.25, 0.25}, []int{4}, 3, -1, []float32{0.25, 0.25, 0.25}, []int32{0, 1, 2}},
		{"tie at the boundary", []float32{3, 1, 3, 3, 1, 2}, []int{6}, 2, -1, []float32{3, 3}, []int32{0, 2}},
		{"zeros are equal", []float32{0, negZero, 0}, []int{3}, 2, -1, []float32{0, negZero}, []int32{0, 1}},
		{"NaN above all", []float32{1, nan, 2, nan}, []int{4}, 3, -1, []float32{nan, nan, 2}, []int32{1, 3, 2}},
		{"infinities", []float32{float32(math.Inf(-1)), -1, float32(math.Inf(1))}, []int{3}, 3, -1,
			[]float32{float32(math.Inf(1)), -1, float32(math.Inf(-1))}, []int32{2, 1, 0}},
		{"rows", []float32{1, 4, 2, 9, 8, 7}, []int{2, 3}, 1, -1, []float32{4, 9}, []int32{1, 0}},
		{"axis 0", []float32{1, 4, 2, 9, 8, 7}, []int{2, 3}, 1, 0, []float32{9, 8, 7}, []int32{1, 1, 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			x := tensor.FromFloat32(tc.shape, tc.x)
			got := launchN(t, New(), ir.OpTopK, ir.Attrs{"k": ir.IntAttr(tc.k), "axis": ir.IntAttr(tc.axis)}, x)
			if diff := cmp.Diff(tc.indices, got[1].Int32s()); diff != "" {
				t.Errorf("indices (-want +got):\n%s", diff)
			}
			for i, v := range got[0].Float32s() {
				if math.Float32bits(v) != math.Float32bits(tc.vals[i]) && !(v != v && tc.vals[i] != tc.vals[i]) {
					t.Errorf("value %d = %v, want %v", i, v, tc.vals[i])
				}
			}
		})
	}
}

// TestTopKAgainstTorch compares topk with what torch.topk (torch 2.11,
// CPU) returned for rows with ties, recorded on the GPU machine. torch has
// no tie rule (the order of equal values is libstdc++'s nth_element's or
// partial_sort's), so the values must agree exactly, and the indices
// wherever no tie straddles the k-th place; inside the top k, ties may
// come in another order.
func TestTopKAgainstTorch(t *testing.T) {
	for _, tc := range []struct {
		x     []float32
		k     int
		torch []int32
	}{
		{[]float32{1, 2, 2, 1}, 2, []int32{1, 2}},
		{[]float32{1, 2, 2, 1}, 3, []int32{1, 2, 0}},
		{[]float32{0.25, 0.25, 0.25, 0.25}, 2, []int32{2, 3}},
		{[]float32{3, 1, 3, 3, 1, 2}, 3, []int32{2, 3, 0}},
		{[]float32{0, 2, 0, 1}, 2, []int32{1, 3}},
		{[]float32{1, 0, 1, 1, 2, 0}, 2, []int32{4, 2}},
		{[]float32{2, 0, 1, 2, 0, 1, 2, 0}, 2, []int32{3, 6}},
		{[]float32{2, 1, 0, 0}, 4, []int32{0, 1, 3, 2}},
		{[]float32{0, 1, 0, 0, 0, 2}, 6, []int32{5, 1, 4, 0, 2, 3}},
	} {
		x := tensor.FromFloat32([]int{len(tc.x)}, tc.x)
		got := launchN(t, New(), ir.OpTopK, ir.Attrs{"k": ir.IntAttr(int64(tc.k))}, x)
		vals, idx := got[0].Float32s(), got[1].Int32s()
		for j, i := range tc.torch {
			if vals[j] != tc.x[i] {
				t.Errorf("%v k=%d: value %d is %v, torch %v", tc.x, tc.k, j, vals[j], tc.x[i])
			}
		}
		kth, straddles := tc.x[tc.torch[tc.k-1]], false
		for i, v := range tc.x {
			if v == kth && !slices.Contains(tc.torch, int32(i)) {
				straddles = true
			}
		}
		a, b := slices.Clone(idx), slices.Clone(tc.torch)
		slices.Sort(a)
		slices.Sort(b)
		if !straddles && !slices.Equal(a, b) {
			t.Errorf("%v k=%d: indices %v, torch %v (a tie straddles the k-th place: %v)", tc.x, tc.k, idx, tc.torch, straddles)
		}
	}
}

func TestExpertMatmul(t *testing.T) {
	r := newRand(40)
	const s, k, e, n, kk = 3, 2, 4, 5, 7
	w := randF32(r, e, n, kk)
	ids := tensor.FromInt32([]int{s, k}, []int32{3, 0, 1, 3, 2, 2})
	for _, perPair := range []bool{false, true} {
		x := randF32(r, s, kk)
		if perPair {
			x = randF32(r, s, k, kk)
		}
		got := launch(t, New(), ir.OpExpertMatmul, nil, x, w, ids)
		want := make([]float64, s*k*n)
		for p := range s * k {
			row := p / k
			if perPair {
				row = p
			}
			ex := int(ids.Int32s()[p])
			for o := range n {
				for m := range kk {
					want[p*n+o] += float64(x.Float32s()[row*kk+m]) * float64(w.Float32s()[(ex*n+o)*kk+m])
				}
			}
		}
		approx(t, "expert_matmul", want, f64s(got), 1e-6, 1e-6)
	}
	bad := tensor.FromInt32([]int{1, 1}, []int32{4})
	if err := launchRaw(New(), ir.OpExpertMatmul, nil, randF32(r, 1, kk), w, bad); err == nil {
		t.Error("an expert id out of range is no error")
	}
}
