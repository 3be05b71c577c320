package migrate

import (
	"fmt"
	"math"
	"strings"

	"github.com/tapml/tapml/ir"
	"github.com/tapml/tapml/tensor"
)

// F16Max is the largest finite f16 value: a value beyond it overflows to
// infinity when stored, or accumulated, in f16.
const F16Max = 65504

// Range measures whether a suspect's values stayed within f16's range,
// over its calls: the reference's inputs and outputs, the sums its kernel
// accumulates where they can be derived from the inputs (attention's
// scores), and the non-finite outputs of the diverging run. It names the
// value that left the range when one did (an f16 overflow), so that the
// report says which it was.
type Range struct {
	InputMax  float64 // largest |x| of its inputs, reference run
	OutputMax float64 // largest |x| of its outputs, reference run
	// ScoreMax is attention's largest |q·k| (the dot product before the
	// scale, which the kernel accumulates; 0 for other ops).
	ScoreMax float64
	// TargetMax is the largest finite |x| of its outputs in the diverging
	// run; TargetNonFinite counts its NaN and infinite outputs, of
	// TargetElems.
	TargetMax       float64
	TargetNonFinite int
	TargetElems     int
}

// add takes one call's values: the reference's (want) and the diverging
// run's (got).
func (r *Range) add(op string, want, got callValues) {
	for _, t := range want.in {
		r.InputMax = math.Max(r.InputMax, maxAbs(t))
	}
	for _, t := range want.out {
		r.OutputMax = math.Max(r.OutputMax, maxAbs(t))
	}
	if op == ir.OpAttention.String() && len(want.in) >= 2 {
		r.ScoreMax = math.Max(r.ScoreMax, maxScore(want.in[0], want.in[1]))
	}
	for _, t := range got.out {
		if t.DType != ir.F32 {
			continue
		}
		for _, v := range t.Float32s() {
			a := math.Abs(float64(v))
			if math.IsNaN(a) || math.IsInf(a, 0) {
				r.TargetNonFinite++
			} else {
				r.TargetMax = math.Max(r.TargetMax, a)
			}
		}
		r.TargetElems += t.NumElements()
	}
}

// Left reports whether a value left f16's range.
func (r Range) Left() bool {
	return r.TargetNonFinite > 0 || max(r.InputMax, r.OutputMax, r.ScoreMax) > F16Max
}

// String describes the range: which value left f16's range, if one did.
func (r Range) String() string {
	var out []string
	note := func(what string, v float64) {
		verdict := "within"
		if v > F16Max {
			verdict = "LEFT"
		}
		out = append(out, fmt.Sprintf("%s max |x| %s (%s f16's %d)", what, fmtNum(v), verdict, F16Max))
	}
	note("reference inputs", r.InputMax)
	if r.ScoreMax > 0 {
		note("attention scores q·k (accumulated before the scale)", r.ScoreMax)
	}
	note("reference outputs", r.OutputMax)
	out = append(out, fmt.Sprintf("target outputs: %d of %d NaN or infinite, finite max |x| %s", r.TargetNonFinite, r.TargetElems, fmtNum(r.TargetMax)))
	return strings.Join(out, "; ")
}

// maxAbs is the largest |x| of a float tensor (infinite when one is; 0 for
// integers).
func maxAbs(t *tensor.Tensor) float64 {
	if t.DType != ir.F32 {
		return 0
	}
	m := 0.0
	for _, v := range t.Float32s() {
		m = math.Max(m, math.Abs(float64(v)))
	}
	return m
}

// maxScore is the largest |q·k| of attention's q [S, H, Dh] against the
// keys k [T, KH, Dh] of its head group (in float64: the exact sums, which
// an f16 accumulator must hold).
func maxScore(q, k *tensor.Tensor) float64 {
	if q.DType != ir.F32 || k.DType != ir.F32 || len(q.Shape) != 3 || len(k.Shape) != 3 || q.Shape[2] != k.Shape[2] || k.Shape[1] == 0 || q.Shape[1]%k.Shape[1] != 0 {
		return 0
	}
	s, h, dh := q.Shape[0], q.Shape[1], q.Shape[2]
	t, kh := k.Shape[0], k.Shape[1]
	qv, kv := q.Float32s(), k.Float32s()
	m := 0.0
	for i := range s {
		for hh := range h {
			qb := (i*h + hh) * dh
			g := hh / (h / kh)
			for j := range t {
				kb := (j*kh + g) * dh
				dot := 0.0
				for d := range dh {
					dot += float64(qv[qb+d]) * float64(kv[kb+d])
				}
				m = math.Max(m, math.Abs(dot))
			}
		}
	}
	return m
}

// jsonRange is a Range in the JSON report.
type jsonRange struct {
	InputMax        num    `json:"input_max_abs"`
	OutputMax       num    `json:"output_max_abs"`
	ScoreMax        num    `json:"score_max_abs,omitempty"`
	TargetMax       num    `json:"target_max_abs"`
	TargetNonFinite int    `json:"target_nonfinite"`
	TargetElems     int    `json:"target_elements"`
	Summary         string `json:"summary"`
}

// toJSONRange is the JSON form of r when a value left f16's range, else
// nil.
func toJSONRange(r Range) *jsonRange {
	if !r.Left() {
		return nil
	}
	return &jsonRange{InputMax: num(r.InputMax), OutputMax: num(r.OutputMax), ScoreMax: num(r.ScoreMax), TargetMax: num(r.TargetMax),
		TargetNonFinite: r.TargetNonFinite, TargetElems: r.TargetElems, Summary: r.String()}
}
