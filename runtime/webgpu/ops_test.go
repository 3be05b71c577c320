package webgpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/tapml/tapml/codegen/wgsl"
	"github.com/tapml/tapml/ir"
	"github.com/tapml/tapml/tensor"
)

// opCase is one kernel test: an op with attributes on inputs made by gen,
// compared with the CPU reference at tolerance tol.
type opCase struct {
	name  string
	op    ir.Op
	attrs ir.Attrs
	gen   func(r *rand.Rand) []*tensor.Tensor
	tol   tol
}

// Tolerances, per kind of kernel (f32 everywhere; ε = 2^-24 ≈ 6e-8):
//
//   - exact: data movement (gather, copies, transpose, slice, concat,
//     kv_write, constant, cast), argmax (it only compares), and the IEEE
//     correctly rounded arithmetic add/sub/mul/neg/abs/relu/max/min.
//   - elementwise with transcendentals (exp, log, tanh, silu, ...): Vulkan
//     allows exp/log 3+2|x| ulp and division 2.5 ulp, so 1e-5 relative
//     (≈ 80 ulp) plus 1e-6 absolute near zeros.
//   - matmul: a length-K f32 dot product in a different summation order
//     than gonum's; the rounding error grows like √K·ε·Σ|a||b|; with inputs
//     in [-1, 1] that is 2e-6·√K absolute (≈ 1.3e-4 at K = 4096) plus 1e-5
//     relative.
//   - rms_norm, layer_norm, softmax: a reduction over D in a tree order
//     (error ~ log2(D)·ε relative to the sums) and one transcendental per
//     element: 1e-5 relative, 1e-6 absolute.
//   - rope: the frequencies and angles are the reference's own f32 values;
//     the kernel reduces the angle to [-π, π] itself (Cody-Waite) and only
//     the driver's sin/cos there differ from the reference's float64 ones:
//     2e-6 absolute, for positions up to 10^5.
//   - attention: Dh-long score dot products, a softmax over up to T rows and
//     a T-long weighted sum, with an online (chunked) softmax: 2e-5
//     absolute, 1e-4 relative.
var (
	exact     = tol{Exact: true}
	transc    = tol{Abs: 1e-6, Rel: 1e-5}
	reduction = tol{Abs: 1e-6, Rel: 1e-5}
	ropeTol   = tol{Abs: 2e-6, Rel: 1e-5}
	attnTol   = tol{Abs: 2e-5, Rel: 1e-4}
)

// swigluTol: rms_norm_swiglu's silu(gate)·up, each product within
// mmTol(k) and multiplied by the other factor (silu's slope is at most
// 1.1), which for these inputs (x, g, weights in [-1, 1]: normalized rows
// of RMS 1/√3, weights of RMS 1/√3) is within 4σ = 4√K/3: an absolute
// 2·(4√K/3)·2e-6·√K, and 3e-5 relative for the products' and silu's
// relative terms.
func swigluTol(k int) tol {
	return tol{Abs: 2 * (4 * math.Sqrt(float64(k)) / 3) * 2e-6 * math.Sqrt(float64(k)), Rel: 3e-5}
}

func mmTol(k int) tol { return tol{Abs: 2e-6 * math.Sqrt(float64(k)), Rel: 1e-5} }

func f32s(lo, hi float64, shape ...int) func(r *rand.Rand) *tensor.Tensor {
	return func(r *rand.Rand) *tensor.Tensor { return randF32(r, lo, hi, shape...) }
}

func ins(fs ...func(r *rand.Rand) *tensor.Tensor) func(r *rand.Rand) []*tensor.Tensor {
	return func(r *rand.Rand) []*tensor.Tensor {
		out := make([]*tensor.Tensor, len(fs))
		for i, f := range fs {
			out[i] = f(r)
		}
		return out
	}
}

func scalar(v int32) func(r *rand.Rand) *tensor.Tensor {
	return func(*rand.Rand) *tensor.Tensor { return tensor.ScalarInt32(v) }
}

func ids(lo, hi int, shape ...int) func(r *rand.Rand) *tensor.Tensor {
	return func(r *rand.Rand) *tensor.Tensor { return randI32(r, lo, hi, shape...) }
}

// Shapes of the real models: stories260K (dim 64, hidden 172, 8 heads of
// 8, 4 kv heads, vocab 512, 512 cache rows) and stories15M (dim 288, hidden
// 768, 6 heads of 48, vocab 32000).
func opCases() []opCase {
	var cs []opCase
	add := func(c opCase) { cs = append(cs, c) }
	for _, op := range ir.UnaryOps {
		lo, hi := -4.0, 4.0
		if op == ir.OpLog || op == ir.OpSqrt || op == ir.OpRsqrt {
			lo, hi = 0.01, 10
		}
		tl := transc
		if op == ir.OpNeg || op == ir.OpAbs || op == ir.OpRelu {
			tl = exact
		}
		for _, shape := range [][]int{{7, 33}, {1000}, {1}} {
			add(opCase{name: fmt.Sprintf("%s%v", op, shape), op: op, gen: ins(f32s(lo, hi, shape...)), tol: tl})
		}
	}
	for _, op := range ir.BinaryOps {
		tl := exact
		a, b := f32s(-3, 3, 5, 1, 7), f32s(-3, 3, 3, 7)
		switch op {
		case ir.OpDiv:
			tl = transc
			b = f32s(0.5, 2, 3, 7)
		case ir.OpPow:
			tl = transc
			a = f32s(0.05, 3, 5, 1, 7)
			b = f32s(-2, 2, 3, 7)
		}
		add(opCase{name: op.String() + "-broadcast", op: op, gen: ins(a, b), tol: tl})
		add(opCase{name: op.String() + "-same", op: op, gen: ins(f32s(0.5, 2, 300), f32s(0.5, 2, 300)), tol: tl})
		add(opCase{name: op.String() + "-scalar", op: op, gen: ins(f32s(0.5, 2, 2, 3), f32s(0.5, 2)), tol: tl})
	}
	add(opCase{name: "pow-negative-base", op: ir.OpPow, gen: func(r *rand.Rand) []*tensor.Tensor {
		return []*tensor.Tensor{
			tensor.FromFloat32([]int{8}, []float32{-2, -2, -1.5, -3, 0, 0, 2, -2}),
			tensor.FromFloat32([]int{8}, []float32{2, 3, -1, 0.5, 0, 2, -2, 0}),
		}
	}, tol: transc})
	for _, op := range []ir.Op{ir.OpAdd, ir.OpSub, ir.OpMul, ir.OpNeg, ir.OpAbs, ir.OpRelu, ir.OpMaximum, ir.OpMinimum} {
		g := ins(ids(-1000, 1000, 4, 9), ids(-1000, 1000, 9))
		if slices.Contains(ir.UnaryOps, op) {
			g = ins(ids(-1000, 1000, 4, 9))
		}
		add(opCase{name: op.String() + "-i32", op: op, gen: g, tol: exact})
	}
	fused := func(expr string, fs ...func(r *rand.Rand) *tensor.Tensor) {
		add(opCase{name: "fused " + expr, op: ir.OpFusedElementwise, attrs: ir.Attrs{"expr": ir.StringAttr(expr)}, gen: ins(fs...), tol: transc})
	}
	fused("mul(silu($0), $1)", f32s(-4, 4, 3, 172), f32s(-4, 4, 3, 172))
	fused("add(mul($0, 0.5), tanh(sub($1, $2)))", f32s(-2, 2, 2, 5, 7), f32s(-2, 2, 7), f32s(-2, 2, 5, 1))
	fused("gelu(div($0, 1.5))", f32s(-3, 3, 1001))
	fused("pow(abs($0), 2)", f32s(-3, 3, 33))

	add(opCase{name: "constant splat", op: ir.OpConstant, attrs: ir.Attrs{"shape": ir.ShapeAttr(ir.S(3, 5)), "value": ir.FloatsAttr(2.5)}, gen: ins(), tol: exact})
	add(opCase{name: "constant values", op: ir.OpConstant, attrs: ir.Attrs{"shape": ir.ShapeAttr(ir.S(2, 3)), "value": ir.FloatsAttr(1, -2, 3.25, 4, 1e-8, -1e30)}, gen: ins(), tol: exact})
	add(opCase{name: "constant i32", op: ir.OpConstant, attrs: ir.Attrs{"dtype": ir.DTypeAttr(ir.I32), "shape": ir.ShapeAttr(ir.S(4)), "value": ir.FloatsAttr(1, -2, 7, 300000)}, gen: ins(), tol: exact})
	add(opCase{name: "cast f32->i32", op: ir.OpCast, attrs: ir.Attrs{"to": ir.DTypeAttr(ir.I32)}, gen: ins(f32s(-100, 100, 3, 77)), tol: exact})
	add(opCase{name: "cast i32->f32", op: ir.OpCast, attrs: ir.Attrs{"to": ir.DTypeAttr(ir.F32)}, gen: ins(ids(-100000, 100000, 3, 77)), tol: exact})

	add(opCase{name: "gather 260K", op: ir.OpGather, gen: ins(f32s(-1, 1, 512, 64), ids(0, 512, 5)), tol: exact})
	add(opCase{name: "gather 15M", op: ir.OpGather, gen: ins(f32s(-1, 1, 32000, 288), ids(0, 32000, 3)), tol: exact})
	add(opCase{name: "gather axis1", op: ir.OpGather, attrs: ir.Attrs{"axis": ir.IntAttr(1)}, gen: ins(f32s(-1, 1, 3, 10, 4), ids(0, 10, 2, 3)), tol: exact})

	// mm adds a matmul case; c, when given, is the shape of the addend (a
	// residual add fused in, passes/residual.go).
	mm := func(name string, tb bool, a, b []int, c ...[]int) {
		k := a[len(a)-1]
		gens := []func(*rand.Rand) *tensor.Tensor{f32s(-1, 1, a...), f32s(-1, 1, b...)}
		for _, c := range c {
			name = "+c " + name
			gens = append(gens, f32s(-1, 1, c...))
		}
		add(opCase{name: "matmul " + name, op: ir.OpMatmul, attrs: ir.Attrs{"transpose_b": ir.BoolAttr(tb)}, gen: ins(gens...), tol: mmTol(k)})
	}
	mm("gemv 15M classifier", true, []int{1, 288}, []int{32000, 288})
	mm("gemv 15M w1", true, []int{1, 288}, []int{768, 288})
	mm("gemv 15M w2", true, []int{1, 768}, []int{288, 768})
	mm("gemv 260K", true, []int{1, 64}, []int{172, 64})
	mm("gemv odd K", true, []int{1, 37}, []int{19, 37})
	mm("gemv not transposed", false, []int{1, 37}, []int{37, 20})
	mm("gemv not transposed odd", false, []int{1, 37}, []int{37, 19})
	mm("prefill 15M", true, []int{7, 288}, []int{768, 288})
	mm("prefill 260K", true, []int{13, 64}, []int{172, 64})
	mm("tiled odd", true, []int{67, 45}, []int{33, 45})
	mm("tiled odd not transposed", false, []int{67, 45}, []int{45, 33})
	add(opCase{name: "rms_norm_matmul 15M", op: ir.OpRMSNormMatmul, gen: ins(f32s(-1, 1, 1, 288), f32s(-1, 1, 288), f32s(-1, 1, 768, 288)), tol: mmTol(288)})
	add(opCase{name: "rms_norm_matmul rows odd K", op: ir.OpRMSNormMatmul, gen: ins(f32s(-1, 1, 3, 37), f32s(-1, 1, 37), f32s(-1, 1, 19, 37)), tol: mmTol(37)})
	add(opCase{name: "rms_norm_swiglu 15M", op: ir.OpRMSNormSwiGLU, gen: ins(f32s(-1, 1, 1, 288), f32s(-1, 1, 288), f32s(-1, 1, 768, 288), f32s(-1, 1, 768, 288)), tol: swigluTol(288)})
	add(opCase{name: "rms_norm_swiglu rows odd K", op: ir.OpRMSNormSwiGLU, gen: ins(f32s(-1, 1, 3, 37), f32s(-1, 1, 37), f32s(-1, 1, 19, 37), f32s(-1, 1, 19, 37)), tol: swigluTol(37)})
	add(opCase{name: "rms_norm_qkv 15M", op: ir.OpRMSNormQKV, gen: ins(f32s(-1, 1, 1, 288), f32s(-1, 1, 288), f32s(-1, 1, 288, 288), f32s(-1, 1, 96, 288), f32s(-1, 1, 96, 288)), tol: mmTol(288)})
	add(opCase{name: "rms_norm_qkv rows odd K", op: ir.OpRMSNormQKV, gen: ins(f32s(-1, 1, 3, 37), f32s(-1, 1, 37), f32s(-1, 1, 19, 37), f32s(-1, 1, 5, 37), f32s(-1, 1, 7, 37)), tol: mmTol(37)})
	mm("gemv", true, []int{1, 288}, []int{768, 288}, []int{1, 768})
	mm("gemv not transposed", false, []int{1, 37}, []int{37, 20}, []int{1, 20})
	mm("tiled", true, []int{67, 45}, []int{33, 45}, []int{67, 33})
	mm("tiled vec4", false, []int{64, 64}, []int{64, 64}, []int{64, 64})
	mm("tiled 128", false, []int{128, 128}, []int{128, 128})
	mm("batched broadcast", false, []int{3, 1, 5, 9}, []int{2, 9, 6})
	mm("batched gemv", true, []int{4, 1, 16}, []int{4, 10, 16})
	mm("K=0", false, []int{3, 0}, []int{0, 4})

	norm := func(name string, shape ...int) {
		d := shape[len(shape)-1]
		add(opCase{name: "rms_norm " + name, op: ir.OpRMSNorm, gen: ins(f32s(-2, 2, shape...), f32s(0.5, 1.5, d)), tol: reduction})
		add(opCase{name: "layer_norm " + name, op: ir.OpLayerNorm, gen: ins(f32s(-2, 2, shape...), f32s(0.5, 1.5, d), f32s(-1, 1, d)), tol: reduction})
		add(opCase{name: "layer_norm no bias " + name, op: ir.OpLayerNorm, gen: ins(f32s(-2, 2, shape...), f32s(0.5, 1.5, d)), tol: reduction})
	}
	norm("260K", 1, 64)
	norm("15M prefill", 5, 288)
	norm("odd", 3, 2, 301)
	norm("tiny D", 4, 3)
	for _, c := range []struct {
		shape []int
		axis  int64
	}{{[]int{1, 32000}, -1}, {[]int{8, 1, 17}, -1}, {[]int{6, 5, 7}, 1}, {[]int{300, 3}, 0}, {[]int{2, 513}, -1}} {
		name := fmt.Sprintf("%v axis %d", c.shape, c.axis)
		add(opCase{name: "softmax " + name, op: ir.OpSoftmax, attrs: ir.Attrs{"axis": ir.IntAttr(c.axis)}, gen: ins(f32s(-5, 5, c.shape...)), tol: reduction})
		add(opCase{name: "argmax " + name, op: ir.OpArgmax, attrs: ir.Attrs{"axis": ir.IntAttr(c.axis)}, gen: ins(f32s(-5, 5, c.shape...)), tol: exact})
	}
	add(opCase{name: "argmax ties", op: ir.OpArgmax, gen: func(*rand.Rand) []*tensor.Tensor {
		return []*tensor.Tensor{tensor.FromFloat32([]int{2, 6}, []float32{1, 3, 3, 2, 3, 0, -1, -1, -1, -1, -1, -1})}
	}, tol: exact})
	// Rows of many passes of a workgroup: ties across lanes (row 0, 700
	// wins), NaNs passed over (row 1, 2 wins), a NaN first chosen as the
	// CPU's scan chooses it (rows 2 and 3, 0 wins).
	add(opCase{name: "argmax ties long", op: ir.OpArgmax, gen: func(*rand.Rand) []*tensor.Tensor {
		const n = 3001
		v := make([]float32, 4*n)
		for i := range v {
			v[i] = -1
		}
		for _, j := range []int{2999, 1500, 700, 700 + 256, 1213} {
			v[j] = 4
		}
		nan := float32(math.NaN())
		for _, j := range []int{1, 5, 2000, 3000} {
			v[n+j] = nan
		}
		v[n+2500], v[n+2] = 2, 2
		for j := range n {
			v[2*n+j] = nan
		}
		v[3*n], v[3*n+7] = nan, 9
		return []*tensor.Tensor{tensor.FromFloat32([]int{4, n}, v)}
	}, tol: exact})
	add(opCase{name: "argmax i32", op: ir.OpArgmax, gen: ins(ids(-50, 50, 3, 100)), tol: exact})

	rope := func(name, style string, dims int64, pos int32, shape ...int) {
		add(opCase{name: "rope " + name, op: ir.OpRope, attrs: ir.Attrs{"style": ir.StringAttr(style), "dims": ir.IntAttr(dims), "theta": ir.FloatAttr(10000)},
			gen: ins(f32s(-1, 1, shape...), scalar(pos)), tol: ropeTol})
	}
	rope("260K decode", "interleaved", 0, 37, 1, 8, 8)
	rope("15M prefill", "interleaved", 0, 0, 9, 6, 48)
	rope("half pos 511", "half", 0, 511, 1, 6, 48)
	rope("partial dims", "half", 16, 100, 3, 2, 24)
	add(opCase{name: "rope freq_factors", op: ir.OpRope, attrs: ir.Attrs{"theta": ir.FloatAttr(500000),
		"freq_factors": ir.FloatsAttr(1, 1, 1.5, 2, 4, 8, 8, 8)},
		gen: ins(f32s(-1, 1, 3, 4, 16), scalar(200)), tol: ropeTol})
	rope("partial interleaved", "interleaved", 6, 3, 2, 3, 10)
	rope("far position", "half", 0, 100000, 2, 2, 64)
	add(opCase{name: "rope yarn", op: ir.OpRope, attrs: ir.Attrs{"style": ir.StringAttr("half"),
		"freq_factors": ir.FloatsAttr(1, 1.5, 3, 4), "attention_factor": ir.FloatAttr(1.14)},
		gen: ins(f32s(-1, 1, 2, 4, 8), scalar(40)), tol: ropeTol})
	for _, pos := range []int32{0, 14, 40} { // rows 0, 1 and the last of the table
		add(opCase{name: fmt.Sprintf("rope table pos %d", pos), op: ir.OpRope, attrs: ir.Attrs{"style": ir.StringAttr("half"),
			"original_max": ir.IntAttr(16), "attention_factor": ir.FloatAttr(1.2)},
			gen: ins(f32s(-1, 1, 3, 4, 16), scalar(pos), f32s(0, 1, 5, 8)), tol: ropeTol})
	}

	kv := func(name string, pos int32, t, kh, dh, s int) {
		add(opCase{name: "kv_write " + name, op: ir.OpKVWrite, gen: ins(f32s(-1, 1, t, kh, dh), f32s(-1, 1, s, kh, dh), scalar(pos)), tol: exact})
	}
	kv("260K decode", 17, 512, 4, 8, 1)
	kv("15M prefill", 0, 256, 6, 48, 9)
	kv("last rows", 509, 512, 4, 8, 3)
	// rope_kv_write (passes/ropekv.go): the caches, then q; k's rows in
	// the k cache are rope's (ropeTol), the rest exact.
	ropeKV := func(name string, attrs ir.Attrs, pos int32, t, h, kh, dh, s int, more ...func(*rand.Rand) *tensor.Tensor) {
		add(opCase{name: "rope_kv_write " + name, op: ir.OpRopeKVWrite, attrs: attrs, gen: ins(append([]func(*rand.Rand) *tensor.Tensor{
			f32s(-1, 1, t, kh, dh), f32s(-1, 1, t, kh, dh), f32s(-1, 1, s, h, dh), f32s(-1, 1, s, kh, dh), f32s(-1, 1, s, kh, dh), scalar(pos)}, more...)...), tol: ropeTol})
	}
	ropeKV("260K decode", nil, 37, 512, 8, 4, 8, 1)
	ropeKV("last row half partial", ir.Attrs{"style": ir.StringAttr("half"), "dims": ir.IntAttr(16), "theta": ir.FloatAttr(500000)}, 63, 64, 6, 2, 48, 1)
	ropeKV("llama3 factors", ir.Attrs{"theta": ir.FloatAttr(500000), "freq_factors": ir.FloatsAttr(1, 1, 1.5, 2, 4, 8, 8, 8)}, 200, 256, 4, 2, 16, 1)
	ropeKV("table rows", ir.Attrs{"style": ir.StringAttr("half"), "original_max": ir.IntAttr(16), "attention_factor": ir.FloatAttr(1.2)}, 14, 64, 4, 2, 16, 3, f32s(0, 1, 5, 8))

	attnWith := func(name string, attrs ir.Attrs, pos int32, s, h, kh, dh, t int) {
		attrs["scale"] = ir.FloatAttr(1 / math.Sqrt(float64(dh)))
		add(opCase{name: "attention " + name, op: ir.OpAttention, attrs: attrs,
			gen: ins(f32s(-1, 1, s, h, dh), f32s(-1, 1, t, kh, dh), f32s(-1, 1, t, kh, dh), scalar(pos)), tol: attnTol})
	}
	attn := func(name string, causal bool, pos int32, s, h, kh, dh, t int) {
		attnWith(name, ir.Attrs{"causal": ir.BoolAttr(causal)}, pos, s, h, kh, dh, t)
	}
	// Gemma 2's soft-capping (scores beyond the cap: the inputs are
	// scaled up) and sliding windows across chunks and at the start.
	attnWith("softcap", ir.Attrs{"softcap": ir.FloatAttr(0.5)}, 20, 2, 4, 2, 16, 64)
	attnWith("window decode", ir.Attrs{"window": ir.IntAttr(4)}, 37, 1, 8, 4, 8, 512)
	attnWith("window prefill", ir.Attrs{"window": ir.IntAttr(3), "softcap": ir.FloatAttr(2)}, 0, 6, 4, 2, 16, 64)
	attnWith("window long cache", ir.Attrs{"window": ir.IntAttr(3000)}, 4500, 1, 2, 1, 64, 5000)
	attn("260K decode", true, 37, 1, 8, 4, 8, 512)
	attn("260K full cache", true, 511, 1, 8, 4, 8, 512)
	attn("15M decode", true, 200, 1, 6, 6, 48, 256)
	attn("15M prefill", true, 0, 9, 6, 6, 48, 256)
	attn("prefill at pos", true, 5, 4, 4, 2, 16, 64)
	attn("not causal", false, 3, 3, 4, 1, 16, 32)
	attn("long cache chunks", true, 4500, 1, 2, 1, 64, 5000)
	attn("wide head", true, 30, 2, 2, 2, 160, 40)
	// Decode shapes of the slot kernel: caches spanning several steps of
	// each key slot's value loads, GQA groups of 8, head dims 64, 80 and
	// 128, and a head dim that is no multiple of 4 (scalar loads) and
	// wider than a workgroup (lanes own two elements, the last one partly).
	attn("decode gqa8 long cache", true, 650, 1, 16, 2, 64, 700)
	attnWith("decode dh80 softcap window", ir.Attrs{"window": ir.IntAttr(300), "softcap": ir.FloatAttr(0.5)}, 390, 1, 4, 1, 80, 400)
	attn("decode dh128 gqa8", true, 299, 1, 8, 1, 128, 300)
	attn("odd head dim", true, 10, 2, 2, 1, 258, 50)
	attn("prefill gqa8", true, 3, 5, 8, 1, 64, 64)

	add(opCase{name: "reshape", op: ir.OpReshape, attrs: ir.Attrs{"shape": ir.ShapeAttr(ir.S(4, -1))}, gen: ins(f32s(-1, 1, 2, 3, 10)), tol: exact})
	add(opCase{name: "probe", op: ir.OpProbe, gen: ins(f32s(-1, 1, 3, 5)), tol: exact})
	add(opCase{name: "transfer", op: ir.OpTransfer, attrs: ir.Attrs{"from": ir.StringAttr("source"), "to": ir.StringAttr("target")}, gen: ins(ids(-9, 9, 7)), tol: exact})
	add(opCase{name: "transpose 3d", op: ir.OpTranspose, attrs: ir.Attrs{"perm": ir.IntsAttr(2, 0, 1)}, gen: ins(f32s(-1, 1, 3, 5, 7)), tol: exact})
	add(opCase{name: "transpose 2d", op: ir.OpTranspose, attrs: ir.Attrs{"perm": ir.IntsAttr(1, 0)}, gen: ins(f32s(-1, 1, 33, 65)), tol: exact})
	slice := func(name string, axis, start, end, step int64, shape ...int) {
		add(opCase{name: "slice " + name, op: ir.OpSlice, attrs: ir.Attrs{"axis": ir.IntAttr(axis), "start": ir.IntAttr(start), "end": ir.IntAttr(end), "step": ir.IntAttr(step)},
			gen: ins(f32s(-1, 1, shape...)), tol: exact})
	}
	slice("last token", 0, -1, math.MaxInt32, 1, 7, 288)
	slice("strided", 1, 1, 9, 3, 2, 10, 3)
	slice("negative", 2, -5, -1, 2, 2, 3, 9)
	add(opCase{name: "concat axis0", op: ir.OpConcat, attrs: ir.Attrs{"axis": ir.IntAttr(0)}, gen: ins(f32s(-1, 1, 2, 5), f32s(-1, 1, 3, 5), f32s(-1, 1, 1, 5)), tol: exact})
	add(opCase{name: "concat axis1", op: ir.OpConcat, attrs: ir.Attrs{"axis": ir.IntAttr(-1)}, gen: ins(f32s(-1, 1, 4, 3), f32s(-1, 1, 4, 0), f32s(-1, 1, 4, 7)), tol: exact})
	add(opCase{name: "concat i32", op: ir.OpConcat, attrs: ir.Attrs{"axis": ir.IntAttr(1)}, gen: ins(ids(0, 9, 2, 2, 3), ids(0, 9, 2, 1, 3)), tol: exact})
	cmp := func(c string) ir.Attrs { return ir.Attrs{"cmp": ir.StringAttr(c)} }
	add(opCase{name: "compare ge", op: ir.OpCompare, attrs: cmp("ge"), gen: ins(f32s(-1, 1, 5, 1, 7), f32s(-1, 1, 3, 7)), tol: exact})
	add(opCase{name: "compare eq i32", op: ir.OpCompare, attrs: cmp("eq"), gen: ins(ids(0, 3, 4, 3), ids(0, 3, 3)), tol: exact})
	add(opCase{name: "compare lt scalar", op: ir.OpCompare, attrs: cmp("lt"), gen: ins(f32s(-1, 1, 9), f32s(-1, 1)), tol: exact})
	add(opCase{name: "where", op: ir.OpWhere, gen: ins(ids(0, 2, 5, 1), f32s(-1, 1, 3, 5, 7), f32s(-1, 1, 7)), tol: exact})
	add(opCase{name: "where i32", op: ir.OpWhere, gen: ins(ids(-1, 2, 4), ids(0, 9, 4), ids(0, 9)), tol: exact})
	cs = append(cs, nnOpCases()...)     // nn_ops_test.go
	cs = append(cs, llmOpCases()...)    // llm_ops_test.go
	cs = append(cs, storedOpCases()...) // stored_test.go
	return cs
}

// TestOpsAgainstCPU runs every op's WGSL kernel on the device and compares
// it with the CPU reference.
func TestOpsAgainstCPU(t *testing.T) {
	covered := map[ir.Op]bool{}
	for i, c := range opCases() {
		covered[c.op] = true
		t.Run(c.name, func(t *testing.T) {
			r := newRand(uint64(i) + 1)
			in := c.gen(r)
			types := make([]ir.Type, len(in))
			for j, x := range in {
				types[j] = x.Type()
			}
			n, outs := mkNode(t, 100+i, c.op, c.attrs, types...)
			want := reference(t, n, outs, in...)
			got, err := run(t, testDev, n, outs, in...)
			if err != nil {
				t.Fatal(err)
			}
			for j := range want {
				compare(t, c.name, want[j], got[j], c.tol)
			}
			if testing.Verbose() && want[0].DType == ir.F32 {
				t.Logf("max abs error %.3g", maxErr(want[0], got[0]))
			}
		})
	}
	for _, d := range ir.Ops() {
		if !covered[d.Op] {
			t.Errorf("op %s has no test case", d.Name)
		}
	}
}

// TestEveryOpHasKernel fails when an op of the registry lacks a WGSL kernel.
func TestEveryOpHasKernel(t *testing.T) {
	for _, d := range ir.Ops() {
		if !wgsl.Supports(d.Op) {
			t.Errorf("op %s has no WGSL kernel", d.Name)
		}
	}
}

// TestOpsSmallLimits runs the op cases on a second device whose kernels are
// generated for small limits (64 invocations, 7 workgroups per grid
// dimension, 4 KiB of workgroup memory), so that folded 2D/3D grids,
// small workgroups and chunked attention run for real. Cases whose grid
// cannot fold within 7 per dimension must be refused with the generator's
// grid error.
func TestOpsSmallLimits(t *testing.T) {
	if testing.Short() {
		t.Skip("second device")
	}
	d, err := Open(Options{Limits: wgsl.Limits{MaxInvocationsPerWorkgroup: 64, MaxWorkgroupSizeX: 64,
		MaxWorkgroupsPerDimension: 7, MaxWorkgroupStorageSize: 4096}})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	for i, c := range opCases() {
		t.Run(c.name, func(t *testing.T) {
			in := c.gen(newRand(uint64(i) + 1))
			types := make([]ir.Type, len(in))
			for j, x := range in {
				types[j] = x.Type()
			}
			n, outs := mkNode(t, 100+i, c.op, c.attrs, types...)
			if _, err := wgsl.Generate(n, types, outs, wgsl.Options{Limits: d.Limits()}); err != nil {
				if !strings.Contains(err.Error(), "grid") {
					t.Fatal(err)
				}
				// The grid cannot fold within these limits: the device must
				// refuse the launch with that error, not run a wrong kernel.
				if _, err := run(t, d, n, outs, in...); err == nil || !strings.Contains(err.Error(), "grid") {
					t.Fatalf("launch of a kernel whose grid does not fit: error %v, want the grid error", err)
				}
				return
			}
			want := reference(t, n, outs, in...)
			got, err := run(t, d, n, outs, in...)
			if err != nil {
				t.Fatal(err)
			}
			for j := range want {
				compare(t, c.name, want[j], got[j], c.tol)
			}
		})
	}
}
