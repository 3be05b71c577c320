package carve

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/tapml/tapml/ir"
	"github.com/tapml/tapml/tensor"
)

// Metrics compare a target's output with the reference output.
type Metrics struct {
	// MaxAbs is the largest |got - want|; MaxRel the largest
	// |got - want| / |want| over elements whose reference is not zero.
	// A non-finite mismatch (NaN for a number, a wrong infinity) makes
	// both +Inf.
	MaxAbs float64
	MaxRel float64
	// ULP is the largest distance in units in the last place of the dtype
	// (the number of representable values between got and want) for float
	// outputs; HasULP is false for integer outputs.
	ULP    float64
	HasULP bool
	// Cosine is the cosine similarity of got and want as vectors over
	// their finite elements (1 when both are zero, 0 when only one is).
	Cosine float64
	// Ratio is the largest error relative to what the tolerance allows
	// (|got - want| / (atol + rtol·|want|)); the case fails when it is
	// above 1. Mismatches counts the elements that fail, Worst is the
	// index of the first element with the largest ratio.
	Ratio      float64
	Mismatches int
	Worst      int
	Elements   int
}

// Compare computes the metrics of got against want under tol. Integer
// and boolean outputs are compared exactly whatever tol says. It fails
// when the two tensors differ in dtype or shape.
func Compare(got, want *tensor.Tensor, tol Tolerance) (Metrics, error) {
	if got.DType != want.DType || !sameShape(got.Shape, want.Shape) {
		return Metrics{}, fmt.Errorf("output is %s, want %s", got, want)
	}
	n := want.NumElements()
	m := Metrics{Elements: n, HasULP: want.DType.IsFloat(), Worst: -1}
	if !want.DType.IsFloat() {
		tol = Tolerance{}
	}
	if err := tol.Check(); err != nil {
		return Metrics{}, err
	}
	var dot, nw, ng float64
	for i := 0; i < n; i++ {
		w, g := want.Float64At(i), got.Float64At(i)
		var d, ratio float64
		fail := false
		switch {
		case math.IsNaN(w) || math.IsInf(w, 0) || math.IsNaN(g) || math.IsInf(g, 0):
			if !(w == g || (math.IsNaN(w) && math.IsNaN(g))) {
				d, ratio, fail = math.Inf(1), math.Inf(1), true
				m.MaxRel = math.Inf(1)
			}
		default:
			d = math.Abs(g - w)
			if w != 0 {
				m.MaxRel = math.Max(m.MaxRel, d/math.Abs(w))
			}
			allowed := tol.ATol + tol.RTol*math.Abs(w)
			fail = !(d <= allowed) // a NaN (an overflowing bound times 0) fails
			switch {
			case allowed > 0:
				ratio = d / allowed
			case d > 0:
				ratio = math.Inf(1)
			}
			dot += w * g
			nw += w * w
			ng += g * g
		}
		m.MaxAbs = math.Max(m.MaxAbs, d)
		if fail {
			m.Mismatches++
		}
		if ratio > m.Ratio {
			m.Ratio, m.Worst = ratio, i
		}
		if m.HasULP {
			m.ULP = math.Max(m.ULP, ulpDistance(want, got, i))
		}
	}
	switch {
	case nw == 0 && ng == 0:
		m.Cosine = 1
	case nw == 0 || ng == 0:
		m.Cosine = 0
	case dot == nw && dot == ng:
		m.Cosine = 1 // identical vectors (the formula may round to 1±ulp)
	default:
		m.Cosine = math.Max(-1, math.Min(1, dot/(math.Sqrt(nw)*math.Sqrt(ng))))
	}
	return m, nil
}

// Pass reports whether every element is within tolerance.
func (m Metrics) Pass() bool { return m.Mismatches == 0 }

// merge combines the metrics of several outputs: the worst of each.
func (m Metrics) merge(o Metrics) Metrics {
	if o.Ratio > m.Ratio {
		m.Worst = o.Worst
	}
	m.MaxAbs = math.Max(m.MaxAbs, o.MaxAbs)
	m.MaxRel = math.Max(m.MaxRel, o.MaxRel)
	m.ULP = math.Max(m.ULP, o.ULP)
	m.HasULP = m.HasULP || o.HasULP
	m.Cosine = math.Min(m.Cosine, o.Cosine)
	m.Ratio = math.Max(m.Ratio, o.Ratio)
	m.Mismatches += o.Mismatches
	m.Elements += o.Elements
	return m
}

func sameShape(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// ulpDistance is the number of representable values of the tensors' float
// dtype between element i of a and of b (0 when equal, including two NaNs
// and +0/-0; +Inf when exactly one is NaN).
func ulpDistance(a, b *tensor.Tensor, i int) float64 {
	var x, y int64
	switch a.DType {
	case ir.F32:
		fx := math.Float32frombits(binary.LittleEndian.Uint32(a.Data[4*i:]))
		fy := math.Float32frombits(binary.LittleEndian.Uint32(b.Data[4*i:]))
		if fx != fx || fy != fy {
			if fx != fx && fy != fy {
				return 0
			}
			return math.Inf(1)
		}
		x = ordered(uint64(math.Float32bits(fx)), 32)
		y = ordered(uint64(math.Float32bits(fy)), 32)
	case ir.F16, ir.BF16:
		va, vb := a.Float64At(i), b.Float64At(i)
		if va != va || vb != vb {
			if va != va && vb != vb {
				return 0
			}
			return math.Inf(1)
		}
		x = ordered(uint64(binary.LittleEndian.Uint16(a.Data[2*i:])), 16)
		y = ordered(uint64(binary.LittleEndian.Uint16(b.Data[2*i:])), 16)
	default:
		return 0
	}
	d := x - y
	if d < 0 {
		d = -d
	}
	return float64(d)
}

// ordered maps the bits of an IEEE float of the given width to an integer
// that grows with the float's value, with +0 and -0 both 0.
func ordered(bits uint64, width uint) int64 {
	sign := uint64(1) << (width - 1)
	if bits&sign != 0 {
		return -int64(bits &^ sign)
	}
	return int64(bits)
}
