package carve

import (
	"math"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/tapml/tapml/ir"
	"github.com/tapml/tapml/tensor"
)

func TestCompare(t *testing.T) {
	f := func(v ...float32) *tensor.Tensor { return tensor.FromFloat32([]int{len(v)}, v) }
	next := math.Nextafter32
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	tests := []struct {
		name      string
		got, want *tensor.Tensor
		tol       Tolerance
		m         Metrics
	}{
		{"identical", f(1, -2, 0), f(1, -2, 0), Tolerance{}, Metrics{Cosine: 1, HasULP: true, Elements: 3, Worst: -1}},
		{"one ulp, exact tolerance", f(next(1, 2), 2), f(1, 2), Tolerance{},
			Metrics{MaxAbs: 0x1p-23, MaxRel: 0x1p-23, ULP: 1, HasULP: true, Cosine: 1, Ratio: math.Inf(1), Mismatches: 1, Elements: 2, Worst: 0}},
		{"within rtol", f(1.001, 2), f(1, 2), Tolerance{RTol: 0.01},
			Metrics{MaxAbs: 0.001, MaxRel: 0.001, ULP: 8389, HasULP: true, Cosine: 0.99999992, Ratio: 0.1, Elements: 2, Worst: 0}},
		{"outside atol", f(0, 0.5), f(0, 0), Tolerance{ATol: 0.25},
			Metrics{MaxAbs: 0.5, ULP: 1056964608, HasULP: true, Cosine: 0, Ratio: 2, Mismatches: 1, Elements: 2, Worst: 1}},
		{"nan matches nan", f(nan, 1), f(nan, 1), Tolerance{}, Metrics{HasULP: true, Cosine: 1, Elements: 2, Worst: -1}},
		{"nan for a number", f(nan, 1), f(3, 1), Tolerance{ATol: 1},
			Metrics{MaxAbs: math.Inf(1), MaxRel: math.Inf(1), ULP: math.Inf(1), HasULP: true, Cosine: 1, Ratio: math.Inf(1), Mismatches: 1, Elements: 2, Worst: 0}},
		{"wrong infinity", f(-inf), f(inf), Tolerance{ATol: 1},
			Metrics{MaxAbs: math.Inf(1), MaxRel: math.Inf(1), ULP: 4278190080, HasULP: true, Cosine: 1, Ratio: math.Inf(1), Mismatches: 1, Elements: 1, Worst: 0}},
		{"opposite", f(-1, -1), f(1, 1), Tolerance{ATol: 10},
			Metrics{MaxAbs: 2, MaxRel: 2, ULP: 2130706432, HasULP: true, Cosine: -1, Ratio: 0.2, Elements: 2, Worst: 0}},
		{"ints are exact whatever the tolerance", tensor.FromInt32([]int{2}, []int32{1, 3}), tensor.FromInt32([]int{2}, []int32{1, 2}), Tolerance{ATol: 5},
			Metrics{MaxAbs: 1, MaxRel: 0.5, Cosine: 0.9899494936611665, Ratio: math.Inf(1), Mismatches: 1, Elements: 2, Worst: 1}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m, err := Compare(tc.got, tc.want, tc.tol)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.m, m, cmpopts.EquateApprox(1e-4, 1e-9)); diff != "" {
				t.Errorf("metrics (-want +got):\n%s", diff)
			}
			if m.Pass() != (tc.m.Mismatches == 0) {
				t.Errorf("Pass %v", m.Pass())
			}
		})
	}
	// A tolerance that is not a number fails the comparison instead of
	// passing every element.
	for _, tol := range []Tolerance{{ATol: math.NaN()}, {RTol: math.NaN()}, {ATol: -1}, {RTol: math.Inf(1)}} {
		if _, err := Compare(f(1.2e4), f(1), tol); err == nil || !strings.Contains(err.Error(), "is not a finite number >= 0") {
			t.Errorf("tolerance %+v: %v", tol, err)
		}
	}
	if _, err := Compare(f(1), f(1, 2), Tolerance{}); err == nil {
		t.Error("Compare of different shapes")
	}
	if _, err := Compare(tensor.FromInt32([]int{1}, []int32{1}), f(1), Tolerance{}); err == nil {
		t.Error("Compare of different dtypes")
	}
}

func TestULPHalf(t *testing.T) {
	for _, dt := range []ir.DType{ir.F16, ir.BF16} {
		a := tensor.New(dt, []int{3})
		b := tensor.New(dt, []int{3})
		for i, v := range []float64{1, -2, 0} {
			a.SetFloat64At(i, v)
			b.SetFloat64At(i, v)
		}
		b.Data[0]++ // the next value after 1
		b.SetFloat64At(2, math.Copysign(0, -1))
		m, err := Compare(b, a, Tolerance{})
		if err != nil {
			t.Fatal(err)
		}
		if m.ULP != 1 || m.MaxAbs != Eps(dt) || m.Mismatches != 1 {
			t.Errorf("%s: %+v", dt, m)
		}
	}
}
