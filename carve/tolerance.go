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

// Policy derives a case's tolerance from its op kind, output dtype and
// reduction length. With eps the output dtype's machine epsilon, S the
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

// transcendental ops: their GPU implementations are not correctly rounded.
var transcendental = map[ir.Op]bool{
	ir.OpExp: true, ir.OpLog: true, ir.OpSqrt: true, ir.OpRsqrt: true, ir.OpSilu: true, ir.OpSigmoid: true,
	ir.OpTanh: true, ir.OpGelu: true, ir.OpPow: true,
}

// ReductionLength is the number of terms each output element of a call
// sums (1 for ops that reduce nothing): matmul's inner dim, the normalized
// or softmaxed axis, attention's head dim plus the keys it reads (pos + S,
// the most any query sees), conv2d's C/groups·kh·kw, the most terms of a
// conv_transpose2d output (C/groups·ceil(kh/sh')·ceil(kw/sw'), sh' =
// sh/gcd(sh, dh)), the reduced elements of reduce_sum and reduce_mean, an
// avg pool2d's window kh·kw, and the 4 neighbours of a linear resize.
// Ops that select rather than sum (reduce_max, max pool2d, nearest resize,
// iota) have 1. in are the call's input types; pos is the value of its
// position input (0 when it has none). Symbolic dims count as 1.
func ReductionLength(op ir.Op, attrs ir.Attrs, in []ir.Type, pos int) int {
	last := func(t ir.Type) int {
		if r := t.Shape.Rank(); r > 0 && t.Shape[r-1].IsStatic() {
			return int(t.Shape[r-1].Size)
		}
		return 1
	}
	dim := func(t ir.Type, i int) int {
		if i >= 0 && i < t.Shape.Rank() && t.Shape[i].IsStatic() && t.Shape[i].Size > 0 {
			return int(t.Shape[i].Size)
		}
		return 1
	}
	switch op {
	case ir.OpConv2D:
		// w[O, C/groups, kh, kw]
		if len(in) > 1 && in[1].Shape.Rank() == 4 {
			return dim(in[1], 1) * dim(in[1], 2) * dim(in[1], 3)
		}
	case ir.OpConvTranspose2D:
		// x[N, C, H, W], w[C, O/groups, kh, kw]
		if len(in) > 1 && in[0].Shape.Rank() == 4 && in[1].Shape.Rank() == 4 {
			groups := max(attrs.Int("groups"), 1)
			k := max(dim(in[0], 1)/int(groups), 1)
			st, dl := attrs.Ints("strides"), attrs.Ints("dilations")
			for a := 0; a < 2; a++ {
				taps := dim(in[1], 2+a)
				if len(st) == 2 && len(dl) == 2 && st[a] > 0 && dl[a] > 0 {
					period := int(st[a] / gcd(st[a], dl[a])) // kernel taps i, i+period, ... hit the same output
					taps = (taps + period - 1) / period
				}
				k *= taps
			}
			return k
		}
	case ir.OpPool2D:
		if attrs.String("mode") == "avg" {
			if kn := attrs.Ints("kernel"); len(kn) == 2 && kn[0] > 0 && kn[1] > 0 {
				return int(kn[0] * kn[1])
			}
		}
	case ir.OpReduceSum, ir.OpReduceMean:
		if len(in) > 0 {
			k := 1
			for _, a := range attrs.Ints("axes") {
				if r := int64(in[0].Shape.Rank()); a >= -r && a < r {
					k *= dim(in[0], ir.NormAxis(a, int(r)))
				}
			}
			return k
		}
	case ir.OpResize:
		if attrs.String("mode") == "linear" {
			return 4
		}
	case ir.OpMatmul:
		if len(in) > 0 {
			return last(in[0])
		}
	case ir.OpRMSNorm, ir.OpLayerNorm:
		if len(in) > 0 {
			return last(in[0])
		}
	case ir.OpSoftmax:
		if len(in) > 0 {
			r := in[0].Shape.Rank()
			if r == 0 {
				return 1
			}
			ax := ir.NormAxis(attrs.Int("axis"), r)
			if d := in[0].Shape[ax]; d.IsStatic() {
				return int(d.Size)
			}
		}
	case ir.OpAttention:
		if len(in) > 0 && in[0].Shape.Rank() == 3 {
			s := in[0].Shape[0].Size
			return last(in[0]) + pos + int(max(s, 1))
		}
	}
	return 1
}

// For returns the tolerance of a call of op with attrs on inputs in whose
// reference outputs are out.
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
	types := make([]ir.Type, len(in))
	for i, t := range in {
		types[i] = t.Type()
	}
	pos := 0
	if n := len(in); n > 0 && (op == ir.OpRope || op == ir.OpAttention) {
		if t := in[n-1]; t.DType == ir.I32 && t.NumElements() == 1 {
			pos = int(t.Int32s()[0])
		}
	}
	rel := func(r float64, rule string, args ...any) Tolerance {
		return Tolerance{RTol: r, ATol: r * scale, Rule: fmt.Sprintf(rule, args...) + fmt.Sprintf("; atol = rtol·S, S = %.4g", scale)}
	}
	switch {
	case op == ir.OpResize && attrs.String("mode") == "linear":
		l := 1
		if len(types) > 0 && types[0].Shape.Rank() == 4 {
			for _, dd := range types[0].Shape[2:] {
				if dd.IsStatic() {
					l = max(l, int(dd.Size))
				}
			}
		}
		r := p.Reduction * 2 * eps
		return Tolerance{
			RTol: r,
			ATol: (p.Reduction*2 + 2*float64(l)) * eps * scale,
			Rule: fmt.Sprintf("linear resize %s, K=4 neighbours, input axes <= %d: rtol = %g·sqrt(4)·eps, atol = (%g·sqrt(4) + 2·L)·eps·S, S = %.4g", dt, l, p.Reduction, p.Reduction, scale),
		}
	case op == ir.OpReduceMax || (op == ir.OpPool2D && attrs.String("mode") != "avg"):
		return exact("max selects one of its inputs")
	case d.Kind == ir.KindData || d.Kind == ir.KindMeta || op == ir.OpArgmax:
		return exact(string(d.Kind) + " op")
	case op == ir.OpCast:
		return Tolerance{RTol: eps, Rule: fmt.Sprintf("cast to %s: rtol = eps = %.3g", dt, eps)}
	case op == ir.OpRope:
		rows := 1
		if len(in) > 0 && in[0].Type().Shape.Rank() == 3 {
			rows = in[0].Shape[0]
		}
		p2 := float64(pos + rows - 1)
		return Tolerance{
			RTol: (p.Elementwise + p.Transcendental) * eps,
			ATol: (p.Elementwise + p2) * eps * scale,
			Rule: fmt.Sprintf("rope %s at positions <= %g: rtol = (%g+%g)·eps, atol = (%g+p)·eps·S, S = %.4g", dt, p2, p.Elementwise, p.Transcendental, p.Elementwise, scale),
		}
	case d.Kind == ir.KindElementwise:
		n, t := 1, 0
		if op == ir.OpFusedElementwise {
			if e, err := ir.ParseExpr(attrs.String("expr")); err == nil {
				n, t = countOps(e)
				n = max(n, 1)
			}
		} else if transcendental[op] {
			t = 1
		}
		return rel((p.Elementwise*float64(n)+p.Transcendental*float64(t))*eps,
			"elementwise %s, %d ops (%d transcendental): rtol = (%g·%d + %g·%d)·eps", dt, n, t, p.Elementwise, n, p.Transcendental, t)
	case d.Kind == ir.KindReduction || d.Kind == ir.KindContraction:
		k := ReductionLength(op, attrs, types, pos)
		c, kind := p.Reduction, "reduction"
		if d.Kind == ir.KindContraction {
			c, kind = p.Contraction, "contraction"
		}
		r := c * math.Sqrt(float64(k)) * eps
		extra := ""
		if op == ir.OpSoftmax || op == ir.OpAttention {
			r += p.Transcendental * eps
			extra = fmt.Sprintf(" + %g·eps (exp)", p.Transcendental)
		}
		return rel(r, "%s %s over K=%d: rtol = %g·sqrt(K)·eps%s", kind, dt, k, c, extra)
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

func gcd(a, b int64) int64 {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// countOps counts the ops of a fused expression and how many of them are
// transcendental.
func countOps(e *ir.Expr) (n, t int) {
	if e == nil || e.Op == ir.OpNone {
		return 0, 0
	}
	n = 1
	if transcendental[e.Op] {
		t = 1
	}
	for _, a := range e.Args {
		an, at := countOps(a)
		n, t = n+an, t+at
	}
	return n, t
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
