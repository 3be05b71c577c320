package carve

import (
	"fmt"
	"math"

	"github.com/tapml/tapml/ir"
	"github.com/tapml/tapml/tensor"
)

// Tolerance says how far a target's output may be from the reference. An
// element passes when |got - want| <= ATol + RTol·|want| (numpy's allclose);
// a NaN or infinite reference element must be matched exactly, and a
// tolerance of zero demands bit-identical results. Integer and boolean
// outputs are always compared exactly.
type Tolerance struct {
	ATol float64 `yaml:"atol" json:"atol"`
	RTol float64 `yaml:"rtol" json:"rtol"`
	// Rule says how the tolerance was derived (the policy's formula with
	// its numbers, or the override that set it).
	Rule string `yaml:"rule,omitempty" json:"rule,omitempty"`
}

// Check returns an error when atol or rtol is not a finite number >= 0
// (NaN would let every element pass, a negative one fail every element).
func (t Tolerance) Check() error {
	for _, v := range []struct {
		name string
		v    float64
	}{{"atol", t.ATol}, {"rtol", t.RTol}} {
		if math.IsNaN(v.v) || math.IsInf(v.v, 0) || v.v < 0 {
			return fmt.Errorf("tolerance %s %g is not a finite number >= 0", v.name, v.v)
		}
	}
	return nil
}

// excess is |got - want| over what the tolerance allows for want, when
// that is exceeded (+Inf when nothing is allowed, or a NaN differs); 0
// within tolerance.
func (t Tolerance) excess(got, want float64) float64 {
	d := math.Abs(got - want)
	allowed := t.ATol + t.RTol*math.Abs(want)
	switch {
	case got == want || (got != got && want != want):
		return 0
	case d != d:
		return math.Inf(1)
	case d <= allowed:
		return 0
	case allowed > 0:
		return d / allowed
	}
	return math.Inf(1)
}

// Exact reports whether the tolerance demands identical results.
func (t Tolerance) Exact() bool { return t.ATol == 0 && t.RTol == 0 }

// Eps is the machine epsilon of a float dtype (the gap between 1 and the
// next value): 2^-23 for f32, 2^-10 for f16, 2^-7 for bf16; 0 otherwise.
func Eps(dt ir.DType) float64 {
	switch dt {
	case ir.F32:
		return 0x1p-23
	case ir.F16:
		return 0x1p-10
	case ir.BF16:
		return 0x1p-7
	}
	return 0
}

// Policy derives a case's tolerance from its op's numerics (ir.Facts says
// which model each op follows, and its chain length, transcendentals and
// sum length), the op kind and the output dtype. With eps the output
// dtype's machine epsilon, S the
// largest finite magnitude of the reference output (the tensor's scale),
// and each tolerance written as RTol, with ATol = RTol·S:
//
//   - data and meta ops (gather, reshape, transpose, slice, concat,
//     kv_write, constant), argmax, casts to integers and every integer or
//     boolean output: exact. They move or select values; any difference is
//     a bug.
//   - cast to a float dtype: RTol = eps (one rounding).
//   - elementwise (unary, binary, fused_elementwise of n ops of which t are
//     transcendental): RTol = (Elementwise·n + Transcendental·t)·eps. Each
//     op rounds once; WGSL, MSL and Vulkan allow a few ULP on exp, log,
//     tanh, pow (and the ops built on them: silu, sigmoid, gelu, rsqrt).
//   - rope at positions up to p: RTol = (Elementwise + Transcendental)·eps,
//     ATol = (Elementwise + p)·eps·S. The angle p·theta^(-2i/d) is rounded
//     with an absolute error about eps·p, which sin and cos pass on to the
//     rotated values, so a target that computes the angle another way
//     (exp2/log2 instead of pow) differs by that much.
//   - reduction over K elements (rms_norm, layer_norm over the last dim,
//     softmax over its axis): RTol = Reduction·sqrt(K)·eps (+
//     Transcendental·eps for softmax's exp).
//   - contraction over K (matmul's inner dim; attention's head dim plus the
//     keys it reads; conv2d's C/groups·kh·kw; conv_transpose2d's
//     C/groups·ceil(kh/sh')·ceil(kw/sw'), the most kernel taps that land on
//     one output, sh' = sh/gcd(sh, dh)): RTol = Contraction·sqrt(K)·eps
//     (+ Transcendental·eps for attention's softmax).
//   - reduce_sum and reduce_mean over K reduced elements (the product of
//     the reduced dims), pool2d avg over a kh·kw window: RTol =
//     Reduction·sqrt(K)·eps, as above (the mean's division is one more
//     rounding, well inside it).
//   - reduce_max and pool2d max: exact. They select one of their inputs;
//     no arithmetic rounds.
//   - resize: nearest is exact (it selects, like a data op). linear mixes
//     the 4 neighbours (lerps of rows, then columns): RTol =
//     Reduction·sqrt(4)·eps, ATol = (Reduction·sqrt(4) + 2·L)·eps·S, with L
//     the longer input axis: the input coordinate (x_out + 0.5)/scale - 0.5
//     is rounded with an absolute error about eps·L, which moves the lerp
//     weight by that much, times the difference of two neighbours (<= 2·S).
//     A target that divides with a few ULP of error (GPUs may) differs by
//     that much.
//   - iota and the other data ops: exact (see above).
//
// Why sqrt(K): the rounding errors of a K-term sum behave like a random
// walk (each addition errs by at most eps/2 of the partial sum, with
// random sign), so the error of a sum grows like sqrt(K)·eps times its
// scale; a target summing in another order (tiles, trees, FMA) differs from
// the reference by about that. The worst-case bound K·eps is almost never
// reached and would hide real bugs in long reductions (for the 32000-wide
// classifier it is 0.4%). ATol scales with S because an output near zero
// may come from the cancellation of terms of the tensor's magnitude, where
// a relative bound is meaningless.
type Policy struct {
	Elementwise    float64 // ULP per elementwise op
	Transcendental float64 // extra ULP per transcendental function
	Reduction      float64 // multiplies sqrt(K)·eps for reductions
	Contraction    float64 // multiplies sqrt(K)·eps for contractions
}

// DefaultPolicy is the policy `tapmlc carve` records tolerances with.
func DefaultPolicy() Policy {
	return Policy{Elementwise: 4, Transcendental: 16, Reduction: 8, Contraction: 8}
}

// ForCompute returns the tolerance of a call carved under compute dtype
// compute: For's for f32. Under f16 compute the case's inputs are f16
// values (the reference's f16 emulation made them) and its reference
// outputs are the op computed in f32 from them and rounded once to f16,
// which is what correct f16 code (f16 storage, f32 arithmetic and
// accumulation) computes too, up to two things: its f32 arithmetic may
// differ from the reference's by For's f32 tolerance (the sum order of a
// K-term reduction: Contraction·sqrt(K)·eps32), and that difference may
// carry the value across an f16 rounding boundary, changing the rounded
// output by one f16 ulp, at most 2u·|x| with u = 2^-11 the unit roundoff
// of f16 (the ulp of x in [2^e, 2^(e+1)) is 2^(e-10) <= 2u·|x|). So
//
//	rtol = rtol_f32 + 2u,  atol = atol_f32 + 2u·S
//
// and exact ops stay exact (they move or decode the same f16 values, or
// select among them). The f16 term does not grow with K: accumulation is
// f32. (Accumulating in f16, --accumulate f16, errs by about
// sqrt(K)·u·S in a K-term sum, and overflows beyond 65504: the policy
// does not allow it, so the carved cases find it.)
func (p Policy) ForCompute(op ir.Op, attrs ir.Attrs, in, out []*tensor.Tensor, compute ir.DType) Tolerance {
	t := p.For(op, attrs, in, out)
	if compute != ir.F16 || t.Exact() || len(out) == 0 || out[0].DType != ir.F32 {
		return t
	}
	const u = 0x1p-11
	scale := 0.0
	for _, o := range out {
		scale = math.Max(scale, maxFinite(o))
	}
	t.RTol += 2 * u
	t.ATol += 2 * u * scale
	t.Rule += fmt.Sprintf("; f16 compute: + one f16 ulp, rtol + 2u = %.3g, atol + 2u·S (u = 2^-11)", t.RTol)
	return t
}

// For returns the tolerance of a call of op with attrs on inputs in whose
// reference outputs are out. The op's facts (ir.Facts: its numerics, chain
// length, transcendentals and sum length) select and parametrize the
// formula.
func (p Policy) For(op ir.Op, attrs ir.Attrs, in, out []*tensor.Tensor) Tolerance {
	exact := func(why string) Tolerance { return Tolerance{Rule: "exact: " + why} }
	d := ir.LookupOp(op)
	if d == nil {
		return exact("unknown op")
	}
	if len(out) == 0 {
		return exact("no outputs")
	}
	dt := out[0].DType
	eps := Eps(dt)
	if eps == 0 {
		return exact(dt.String() + " output")
	}
	scale := 0.0
	for _, o := range out {
		scale = math.Max(scale, maxFinite(o))
	}
	c := ir.Call{In: make([]ir.Type, len(in)), Attrs: attrs}
	for i, t := range in {
		c.In[i] = t.Type()
	}
	// The position input (rope, kv_write, attention) is the last, an i32
	// scalar.
	if n := len(in); n > 0 && in[n-1].DType == ir.I32 && in[n-1].NumElements() == 1 {
		c.Pos = int(in[n-1].Int32s()[0])
	}
	rel := func(r float64, rule string, args ...any) Tolerance {
		return Tolerance{RTol: r, ATol: r * scale, Rule: fmt.Sprintf(rule, args...) + fmt.Sprintf("; atol = rtol·S, S = %.4g", scale)}
	}
	t := float64(d.Transcendentals.Of(c))
	switch d.Numerics.Of(c) {
	case ir.Exact:
		return exact(string(d.Kind) + " op")
	case ir.Selects:
		return exact("max selects one of its inputs")
	case ir.OneRounding:
		return Tolerance{RTol: eps, Rule: fmt.Sprintf("%s to %s: rtol = eps = %.3g", d.Name, dt, eps)}
	case ir.Coordinate:
		l := 1
		if len(c.In) > 0 && c.In[0].Shape.Rank() == 4 {
			for _, dd := range c.In[0].Shape[2:] {
				if dd.IsStatic() {
					l = max(l, int(dd.Size))
				}
			}
		}
		k := d.SumLength.Of(c)
		sk := math.Sqrt(float64(k))
		return Tolerance{
			RTol: p.Reduction * sk * eps,
			ATol: (p.Reduction*sk + 2*float64(l)) * eps * scale,
			Rule: fmt.Sprintf("linear %s %s, K=%d neighbours, input axes <= %d: rtol = %g·sqrt(%d)·eps, atol = (%g·sqrt(%d) + 2·L)·eps·S, S = %.4g",
				d.Name, dt, k, l, p.Reduction, k, p.Reduction, k, scale),
		}
	case ir.Angle:
		rows := 1
		if len(in) > 0 && in[0].Type().Shape.Rank() == 3 {
			rows = in[0].Shape[0]
		}
		p2 := float64(c.Pos + rows - 1)
		return Tolerance{
			RTol: (p.Elementwise + p.Transcendental*t) * eps,
			ATol: (p.Elementwise + p2) * eps * scale,
			Rule: fmt.Sprintf("%s %s at positions <= %g: rtol = (%g+%g)·eps, atol = (%g+p)·eps·S, S = %.4g", d.Name, dt, p2, p.Elementwise, p.Transcendental*t, p.Elementwise, scale),
		}
	case ir.Chain:
		n := d.ChainLength.Of(c)
		return rel((p.Elementwise*float64(n)+p.Transcendental*t)*eps,
			"elementwise %s, %d ops (%d transcendental): rtol = (%g·%d + %g·%d)·eps", dt, n, int(t), p.Elementwise, n, p.Transcendental, int(t))
	case ir.Sum:
		k := d.SumLength.Of(c)
		co, kind := p.Reduction, "reduction"
		if d.Kind == ir.KindContraction {
			co, kind = p.Contraction, "contraction"
		}
		r := co * math.Sqrt(float64(k)) * eps
		extra := ""
		if t > 0 {
			r += p.Transcendental * t * eps
			extra = fmt.Sprintf(" + %g·eps (exp)", p.Transcendental*t)
		}
		return rel(r, "%s %s over K=%d: rtol = %g·sqrt(K)·eps%s", kind, dt, k, co, extra)
	}
	return exact("op kind " + string(d.Kind))
}

// Chain is the tolerance of a value a whole chain of ops computed, against
// the reference end to end (a model's output in a migration): rtol is the
// sum of the policy's RTols of the ops on the path from the model's inputs
// to the value with the largest such sum, ops the number of rounding ops
// (RTol > 0) on it, want the reference value; ATol = RTol·S as for one op.
//
// Why a sum: to first order every op adds its own relative rounding error
// to what its inputs carry and passes that on unchanged (condition number
// 1), so errors add up along a path; the worst path bounds the output. An
// op that amplifies error (a division by a small difference, normalizing a
// near-constant row) may exceed it legitimately; migration then names it,
// and its isolated and accumulated errors tell which it is.
func Chain(rtol float64, ops int, want *tensor.Tensor) Tolerance {
	s := maxFinite(want)
	return Tolerance{RTol: rtol, ATol: rtol * s,
		Rule: fmt.Sprintf("end to end over %d rounding ops: rtol = the sum of their rtols along the worst path = %.3g; atol = rtol·S, S = %.4g", ops, rtol, s)}
}

// maxFinite is the largest finite magnitude of t's elements (0 for an
// integer or empty tensor).
func maxFinite(t *tensor.Tensor) float64 {
	if !t.DType.IsFloat() {
		return 0
	}
	m := 0.0
	if t.DType == ir.F32 {
		for _, v := range t.Float32s() {
			if a := math.Abs(float64(v)); a > m && !math.IsInf(a, 0) {
				m = a
			}
		}
		return m
	}
	for i := 0; i < t.NumElements(); i++ {
		if a := math.Abs(t.Float64At(i)); a > m && !math.IsInf(a, 0) && a == a {
			m = a
		}
	}
	return m
}
