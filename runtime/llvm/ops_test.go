package llvm_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"strings"
	"testing"

	cg "github.com/tapml/tapml/codegen/llvm"
	"github.com/tapml/tapml/internal/testenv/storedtest"
	"github.com/tapml/tapml/ir"
	"github.com/tapml/tapml/runtime"
	"github.com/tapml/tapml/runtime/cpu"
	"github.com/tapml/tapml/runtime/llvm"
	"github.com/tapml/tapml/tensor"
)

// Tolerances, as |llvm - cpu| <= atol + rtol·|cpu| per element (NaN must
// meet NaN; integers and bools must be equal):
//
//   - exact: data ops, cast, argmax, kv_write, and the IEEE-exact float ops
//     (neg, abs, relu, add, sub, mul, div, sqrt, rsqrt, maximum, minimum):
//     both sides do the same correctly rounded f32 operations.
//   - libm: exp, log, tanh, pow are float32(f(float64(x))) on both sides, with
//     glibc's double functions here and Go's math there. Those agree to
//     about 1 ulp of a double, so the f32 results differ by at most 1 f32 ulp
//     (when the double straddles a rounding boundary): rtol 2.5e-7 (2 ulp).
//   - chains (silu, sigmoid, gelu, fused expressions, norms, softmax, rope,
//     attention): the same f32 operations in the same order, fed by libm
//     values that may differ by 1 ulp; a few dependent roundings and
//     cancellation (rope's v0·c - v1·s, softmax's division by a sum) grow
//     that to a few ulp of the operands: rtol 2e-6, atol 1e-6 (values are
//     O(1)).
//   - matmul, conv2d, conv_transpose2d: the LLVM kernels reassociate or fuse
//     their dot products (vectorised), gonum sums in its own order; each
//     result is within γ_K·Σ|a||b| of the exact dot product (γ_K ≈ K·2^-24),
//     so the two differ by at most 2·K·2^-24·Σ_k|a_k·b_k| (+ 2^-24·|bias|
//     for the bias add), computed per element (a proven bound).
type tol struct {
	atol, rtol float64
	// bound, when set, gives the allowed difference of every element
	bound func(c opCase) []float64
}

var (
	exact = tol{}
	libm  = tol{atol: 1e-37, rtol: 2.5e-7}
	chain = tol{atol: 1e-6, rtol: 2e-6}
	mmTol = tol{bound: matmulBound}
	// normMmTol: rms_norm_matmul's kernel normalizes x as rms_norm does
	// (the same f32 operations in the same order, so the same bits), then
	// takes matmul's bound on the normalized rows.
	normMmTol = tol{bound: func(c opCase) []float64 {
		return matmulBound(opCase{attrs: ir.Attrs{"transpose_b": ir.BoolAttr(true)}, in: []*tensor.Tensor{rmsNormRows(c.in[0], c.in[1], c.attrs), c.in[2]}})
	}}
	// swigluTol: rms_norm_swiglu's gate and up products each within
	// matmul's bound of the reference, carried through silu(gate)·up.
	swigluTol = tol{bound: swigluBound}
	// qkvTol: rms_norm_qkv's outputs are rms_norm_matmul's of each weight;
	// its cases give the three weights one shape, and every output takes
	// the largest of the three normMmTol bounds at each element (a bound
	// on each).
	qkvTol = tol{bound: func(c opCase) []float64 {
		var out []float64
		for _, w := range c.in[2:] {
			b := normMmTol.bound(opCase{attrs: c.attrs, in: []*tensor.Tensor{c.in[0], c.in[1], w}})
			if out == nil {
				out = b
			}
			for i := range out {
				out[i] = max(out[i], b[i])
			}
		}
		return out
	}}
	convTol = tol{bound: convBound}
)

type opCase struct {
	name  string
	op    ir.Op
	attrs ir.Attrs
	in    []*tensor.Tensor
	tol   tol
}

func rng(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, 17)) }

// randF32 returns a tensor of uniform values in [lo, hi).
func randF32(r *rand.Rand, lo, hi float64, shape ...int) *tensor.Tensor {
	t := tensor.New(ir.F32, shape)
	for i := range t.Float32s() {
		t.Float32s()[i] = float32(lo + (hi-lo)*r.Float64())
	}
	return t
}

func randI32(r *rand.Rand, lo, hi int, shape ...int) *tensor.Tensor {
	t := tensor.New(ir.I32, shape)
	for i := range t.Int32s() {
		t.Int32s()[i] = int32(lo + r.IntN(hi-lo))
	}
	return t
}

func randI64(r *rand.Rand, lo, hi int, shape ...int) *tensor.Tensor {
	t := tensor.New(ir.I64, shape)
	for i := 0; i < t.NumElements(); i++ {
		t.SetFloat64At(i, float64(lo+r.IntN(hi-lo)))
	}
	return t
}

func f32s(shape []int, v ...float32) *tensor.Tensor { return tensor.FromFloat32(shape, v) }

// opCases is the table of kernel tests: every op of the registry, on
// several shapes (odd sizes, broadcasting, a big GEMV).
func opCases() []opCase {
	r := rng(1)
	var cs []opCase
	add := func(name string, op ir.Op, attrs ir.Attrs, t tol, in ...*tensor.Tensor) {
		cs = append(cs, opCase{name: name, op: op, attrs: attrs, in: in, tol: t})
	}
	special := f32s([]int{8}, 0, float32(math.Copysign(0, -1)), 1, -1, float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()), 1e-40)
	for _, op := range ir.UnaryOps {
		t := chain // silu, sigmoid, gelu and any other op with a transcendental
		switch {
		case op == ir.OpExp || op == ir.OpLog || op == ir.OpTanh || op == ir.OpErf:
			t = libm
		case op == ir.OpSqrt || op == ir.OpRsqrt || ir.LookupOp(op).Transcendentals.Of(ir.Call{}) == 0:
			t = exact
		}
		lo := -4.0
		if op == ir.OpLog || op == ir.OpSqrt || op == ir.OpRsqrt {
			lo = 0.01
		}
		add(op.String()+"/7", op, nil, t, randF32(r, lo, 4, 7))
		add(op.String()+"/3x5x33", op, nil, t, randF32(r, lo, 4, 3, 5, 33))
		add(op.String()+"/special", op, nil, t, special)
	}
	for _, op := range ir.BinaryOps {
		t := exact
		lo := -3.0
		if op == ir.OpPow {
			t, lo = libm, 0.1
		}
		add(op.String()+"/4x1x6*5x1", op, nil, t, randF32(r, lo, 3, 4, 1, 6), randF32(r, lo, 3, 5, 1))
		add(op.String()+"/17*17", op, nil, t, randF32(r, lo, 3, 17), randF32(r, lo, 3, 17))
		add(op.String()+"/2x3*scalar", op, nil, t, randF32(r, lo, 3, 2, 3), randF32(r, lo, 3))
		add(op.String()+"/1*3x9", op, nil, t, randF32(r, lo, 3, 1), randF32(r, lo, 3, 3, 9))
	}
	add("maximum/zeros_nan", ir.OpMaximum, nil, exact, f32s([]int{4}, 0, float32(math.Copysign(0, -1)), float32(math.NaN()), 2),
		f32s([]int{4}, float32(math.Copysign(0, -1)), 0, 1, float32(math.NaN())))
	add("minimum/zeros_nan", ir.OpMinimum, nil, exact, f32s([]int{4}, 0, float32(math.Copysign(0, -1)), float32(math.NaN()), 2),
		f32s([]int{4}, float32(math.Copysign(0, -1)), 0, 1, float32(math.NaN())))
	for _, c := range ir.Comparisons {
		add("compare/"+c, ir.OpCompare, ir.Attrs{"cmp": ir.StringAttr(c)}, exact, randF32(r, -1, 1, 4, 1, 6), randF32(r, -1, 1, 5, 1))
		add("compare/"+c+"/special", ir.OpCompare, ir.Attrs{"cmp": ir.StringAttr(c)}, exact, special, f32s(nil, float32(math.NaN())))
		add("compare/"+c+"/i32", ir.OpCompare, ir.Attrs{"cmp": ir.StringAttr(c)}, exact, randI32(r, -2, 2, 3, 4), randI32(r, -2, 2, 4))
	}
	add("where", ir.OpWhere, nil, exact, randI32(r, -1, 2, 2, 1), special, randF32(r, -1, 1, 2, 8))
	add("where/i32", ir.OpWhere, nil, exact, randI32(r, 0, 2, 6), randI32(r, -9, 9, 6), randI32(r, -9, 9))
	add("add/i32", ir.OpAdd, nil, exact, randI32(r, -100, 100, 5, 3), randI32(r, -100, 100, 3))
	add("mul/i64", ir.OpMul, nil, exact, randI64(r, -100, 100, 4, 6), randI64(r, -100, 100, 4, 1))
	add("maximum/i32", ir.OpMaximum, nil, exact, randI32(r, -9, 9, 11), randI32(r, -9, 9, 11))
	add("abs/i64", ir.OpAbs, nil, exact, randI64(r, -50, 50, 9))
	add("relu/i32", ir.OpRelu, nil, exact, randI32(r, -50, 50, 9))
	add("add/f16", ir.OpAdd, nil, exact, randF32(r, -2, 2, 3, 7).Convert(ir.F16), randF32(r, -2, 2, 7).Convert(ir.F16))
	add("exp/bf16", ir.OpExp, nil, libm, randF32(r, -2, 2, 13).Convert(ir.BF16))
	fused := func(expr string) ir.Attrs { return ir.Attrs{"expr": ir.StringAttr(expr)} }
	add("fused/swiglu", ir.OpFusedElementwise, fused("mul(silu($0), $1)"), chain, randF32(r, -4, 4, 3, 70), randF32(r, -4, 4, 3, 70))
	add("fused/bcast", ir.OpFusedElementwise, fused("add(mul($0, 0.5), exp($1))"), chain, randF32(r, -4, 4, 2, 3, 4), randF32(r, -2, 2, 4))
	add("fused/three", ir.OpFusedElementwise, fused("div(sub($0, $1), maximum($2, 0.25))"), chain,
		randF32(r, -4, 4, 5, 1), randF32(r, -4, 4, 1, 6), randF32(r, 0, 2, 5, 6))

	castT := func(to ir.DType) ir.Attrs { return ir.Attrs{"to": ir.DTypeAttr(to)} }
	mixed := f32s([]int{10}, 0, -0.5, 1.5, -2.7, 3.99, 1e6, -7, 65519, 1e-8, float32(math.Inf(1)))
	add("cast/f32-i32", ir.OpCast, castT(ir.I32), exact, f32s([]int{6}, 0, -0.5, 1.5, -2.7, 3.99, 1e6))
	add("cast/i32-f32", ir.OpCast, castT(ir.F32), exact, randI32(r, -1<<30, 1<<30, 9))
	add("cast/f32-f16", ir.OpCast, castT(ir.F16), exact, mixed)
	add("cast/f16-f32", ir.OpCast, castT(ir.F32), exact, randF32(r, -9, 9, 7).Convert(ir.F16))
	add("cast/f32-bf16", ir.OpCast, castT(ir.BF16), exact, mixed)
	add("cast/bf16-f32", ir.OpCast, castT(ir.F32), exact, randF32(r, -9, 9, 7).Convert(ir.BF16))
	add("cast/i64-f32", ir.OpCast, castT(ir.F32), exact, randI64(r, -1<<40, 1<<40, 5))
	add("cast/i32-i64", ir.OpCast, castT(ir.I64), exact, randI32(r, -1<<30, 1<<30, 5))
	add("cast/f32-bool", ir.OpCast, castT(ir.Bool), exact, f32s([]int{4}, 0, float32(math.Copysign(0, -1)), 2, float32(math.NaN())))
	add("cast/bool-f32", ir.OpCast, castT(ir.F32), exact, f32s([]int{4}, 0, 1, 0, 3).Convert(ir.Bool))
	add("cast/f32-f32", ir.OpCast, castT(ir.F32), exact, randF32(r, -1, 1, 3))

	constant := func(dt ir.DType, shape []int64, vals ...float64) ir.Attrs {
		return ir.Attrs{"dtype": ir.DTypeAttr(dt), "shape": ir.ShapeAttr(ir.S(shape...)), "value": ir.FloatsAttr(vals...)}
	}
	add("constant/f32", ir.OpConstant, constant(ir.F32, []int64{2, 3}, 1, -2.5, 3, 0.1, 1e-3, 7), exact)
	add("constant/i32_fill", ir.OpConstant, constant(ir.I32, []int64{4}, -7), exact)
	add("constant/f16", ir.OpConstant, constant(ir.F16, []int64{3}, 0.1, 2, -3), exact)
	add("constant/scalar", ir.OpConstant, constant(ir.F32, nil, 0.3), exact)
	add("constant/i64", ir.OpConstant, constant(ir.I64, []int64{2}, 1<<40, -3), exact)

	axis := func(a int64) ir.Attrs { return ir.Attrs{"axis": ir.IntAttr(a)} }
	add("gather/rows", ir.OpGather, nil, exact, randF32(r, -1, 1, 10, 7), tensor.FromInt32([]int{5}, []int32{3, 0, 9, 3, 1}))
	add("gather/i64ids", ir.OpGather, nil, exact, randF32(r, -1, 1, 6, 4), tensor.FromInt32([]int{2, 3}, []int32{5, 4, 0, 1, 2, 3}).Convert(ir.I64))
	add("gather/axis1", ir.OpGather, axis(1), exact, randF32(r, -1, 1, 3, 9, 4), tensor.FromInt32([]int{2}, []int32{8, 2}))
	add("gather/i32table", ir.OpGather, nil, exact, randI32(r, 0, 99, 5, 3), tensor.FromInt32([]int{1}, []int32{4}))

	tb := ir.Attrs{"transpose_b": ir.BoolAttr(true)}
	add("matmul/gemv_32000x288", ir.OpMatmul, tb, mmTol, randF32(r, -1, 1, 1, 288), randF32(r, -0.06, 0.06, 32000, 288))
	// Weights in storage dtypes: decoded exactly (dequantize and gather
	// give the reference's bits), read by the matmuls in registers.
	for _, dt := range ir.StorageDTypes {
		e, _ := dt.Block()
		k := 2 * max(e, 32)
		add("dequantize/"+dt.String(), ir.OpDequantize, nil, exact, storedtest.Tensor(r, dt, 3, k))
		add("matmul/gemv_"+dt.String(), ir.OpMatmul, tb, mmTol, randF32(r, -1, 1, 1, k), storedtest.Tensor(r, dt, 7, k))
	}
	add("matmul/5x64*9x64T_q4_0", ir.OpMatmul, tb, mmTol, randF32(r, -1, 1, 5, 64), storedtest.Tensor(r, ir.Q4_0, 9, 64))
	add("matmul/2x3x256*3x256T_q5_k", ir.OpMatmul, tb, mmTol, randF32(r, -1, 1, 2, 3, 256), storedtest.Tensor(r, ir.Q5_K, 3, 256))
	add("matmul/4x37*6x37T_f16", ir.OpMatmul, tb, mmTol, randF32(r, -1, 1, 4, 37), storedtest.Tensor(r, ir.F16, 6, 37))
	add("gather/q8_0", ir.OpGather, nil, exact, storedtest.Tensor(r, ir.Q8_0, 11, 64), randI32(r, 0, 11, 4))
	add("gather/bf16", ir.OpGather, nil, exact, storedtest.Tensor(r, ir.BF16, 11, 6), randI32(r, 0, 11, 2, 2))
	add("matmul/5x33*17x33T", ir.OpMatmul, tb, mmTol, randF32(r, -1, 1, 5, 33), randF32(r, -1, 1, 17, 33))
	add("matmul/3x50*10x50T", ir.OpMatmul, tb, mmTol, randF32(r, -1, 1, 3, 50), randF32(r, -1, 1, 10, 50))
	add("matmul/2x3x7*3x7T", ir.OpMatmul, tb, mmTol, randF32(r, -1, 1, 2, 3, 7), randF32(r, -1, 1, 3, 7))
	add("matmul/3x7x20*20x9", ir.OpMatmul, nil, mmTol, randF32(r, -1, 1, 3, 7, 20), randF32(r, -1, 1, 20, 9))
	add("matmul/4x16*16x70", ir.OpMatmul, nil, mmTol, randF32(r, -1, 1, 4, 16), randF32(r, -1, 1, 16, 70))
	// A norm fused into the products that read it (passes/norm.go): one
	// row and several, chunks and a last partial tile, stored weights.
	add("rms_norm_matmul/1x40*9x40T", ir.OpRMSNormMatmul, nil, normMmTol, randF32(r, -1, 1, 1, 40), randF32(r, -1, 1, 40), randF32(r, -1, 1, 9, 40))
	add("rms_norm_matmul/3x2x24*70x24T", ir.OpRMSNormMatmul, nil, normMmTol, randF32(r, -1, 1, 3, 2, 24), randF32(r, -1, 1, 24), randF32(r, -1, 1, 70, 24))
	add("rms_norm_matmul/q4_0", ir.OpRMSNormMatmul, nil, normMmTol, randF32(r, -1, 1, 2, 64), randF32(r, -1, 1, 64), storedtest.Tensor(r, ir.Q4_0, 9, 64))
	add("rms_norm_matmul/f16", ir.OpRMSNormMatmul, nil, normMmTol, randF32(r, -1, 1, 1, 37), randF32(r, -1, 1, 37), storedtest.Tensor(r, ir.F16, 6, 37))
	// Gate and up with silu·mul (passes/swiglu.go): one row and several,
	// stored weights of two formats.
	add("rms_norm_swiglu/1x40", ir.OpRMSNormSwiGLU, nil, swigluTol, randF32(r, -1, 1, 1, 40), randF32(r, -1, 1, 40), randF32(r, -1, 1, 9, 40), randF32(r, -1, 1, 9, 40))
	add("rms_norm_swiglu/3x2x24", ir.OpRMSNormSwiGLU, nil, swigluTol, randF32(r, -1, 1, 3, 2, 24), randF32(r, -1, 1, 24), randF32(r, -1, 1, 70, 24), randF32(r, -1, 1, 70, 24))
	add("rms_norm_swiglu/q4_0+f16", ir.OpRMSNormSwiGLU, nil, swigluTol, randF32(r, -1, 1, 2, 64), randF32(r, -1, 1, 64), storedtest.Tensor(r, ir.Q4_0, 9, 64), storedtest.Tensor(r, ir.F16, 9, 64))
	// q, k and v of one norm (passes/qkv.go): one row and several, chunks
	// and a last partial tile, stored weights of three formats.
	add("rms_norm_qkv/1x40", ir.OpRMSNormQKV, nil, qkvTol, randF32(r, -1, 1, 1, 40), randF32(r, -1, 1, 40), randF32(r, -1, 1, 9, 40), randF32(r, -1, 1, 9, 40), randF32(r, -1, 1, 9, 40))
	add("rms_norm_qkv/3x2x24", ir.OpRMSNormQKV, nil, qkvTol, randF32(r, -1, 1, 3, 2, 24), randF32(r, -1, 1, 24), randF32(r, -1, 1, 70, 24), randF32(r, -1, 1, 70, 24), randF32(r, -1, 1, 70, 24))
	add("rms_norm_qkv/q4_0+f16+q8_0", ir.OpRMSNormQKV, nil, qkvTol, randF32(r, -1, 1, 2, 64), randF32(r, -1, 1, 64), storedtest.Tensor(r, ir.Q4_0, 9, 64), storedtest.Tensor(r, ir.F16, 9, 64), storedtest.Tensor(r, ir.Q8_0, 9, 64))
	// A residual add fused in (the addend c, passes/residual.go), in every
	// kernel: transposed GEMV and tiles (f32 and stored), the vector
	// tiles, the in-place accumulation (f16 inputs).
	add("matmul/addend_gemv_T", ir.OpMatmul, tb, mmTol, randF32(r, -1, 1, 1, 40), randF32(r, -1, 1, 9, 40), randF32(r, -1, 1, 1, 9))
	add("matmul/addend_5x64*9x64T_q4_0", ir.OpMatmul, tb, mmTol, randF32(r, -1, 1, 5, 64), storedtest.Tensor(r, ir.Q4_0, 9, 64), randF32(r, -1, 1, 5, 9))
	add("matmul/addend_4x16*16x70", ir.OpMatmul, nil, mmTol, randF32(r, -1, 1, 4, 16), randF32(r, -1, 1, 16, 70), randF32(r, -1, 1, 4, 70))
	add("matmul/addend_bcast", ir.OpMatmul, nil, mmTol, randF32(r, -1, 1, 2, 1, 4, 8), randF32(r, -1, 1, 3, 8, 5), randF32(r, -1, 1, 2, 3, 4, 5))
	add("matmul/gemv_1x40*40x100", ir.OpMatmul, nil, mmTol, randF32(r, -1, 1, 1, 40), randF32(r, -1, 1, 40, 100))
	add("matmul/6x5*5x19", ir.OpMatmul, nil, mmTol, randF32(r, -1, 1, 6, 5), randF32(r, -1, 1, 5, 19))
	add("matmul/2x9*9x7", ir.OpMatmul, nil, mmTol, randF32(r, -1, 1, 2, 9), randF32(r, -1, 1, 9, 7))
	add("matmul/f16_nt", ir.OpMatmul, nil, tol{atol: 1e-3, rtol: 1e-3}, randF32(r, -1, 1, 3, 8).Convert(ir.F16), randF32(r, -1, 1, 8, 5).Convert(ir.F16))
	add("matmul/bcast", ir.OpMatmul, nil, mmTol, randF32(r, -1, 1, 2, 1, 4, 8), randF32(r, -1, 1, 3, 8, 5))
	add("matmul/bcastT", ir.OpMatmul, tb, mmTol, randF32(r, -1, 1, 3, 4, 8), randF32(r, -1, 1, 2, 1, 6, 8))
	add("matmul/k0", ir.OpMatmul, nil, exact, randF32(r, -1, 1, 2, 0), randF32(r, -1, 1, 0, 3))
	add("matmul/f16", ir.OpMatmul, tb, tol{atol: 1e-3, rtol: 1e-3}, randF32(r, -1, 1, 2, 8).Convert(ir.F16), randF32(r, -1, 1, 5, 8).Convert(ir.F16))

	eps := ir.Attrs{"eps": ir.FloatAttr(1e-5)}
	add("rms_norm/1x288", ir.OpRMSNorm, eps, chain, randF32(r, -2, 2, 1, 288), randF32(r, 0.5, 1.5, 288))
	add("rms_norm/5x33", ir.OpRMSNorm, nil, chain, randF32(r, -2, 2, 5, 33), randF32(r, 0.5, 1.5, 33))
	add("layer_norm/4x17", ir.OpLayerNorm, eps, chain, randF32(r, -2, 2, 4, 17), randF32(r, 0.5, 1.5, 17), randF32(r, -1, 1, 17))
	add("layer_norm/2x3x64", ir.OpLayerNorm, nil, chain, randF32(r, -2, 2, 2, 3, 64), randF32(r, 0.5, 1.5, 64), randF32(r, -1, 1, 64))
	add("layer_norm/no bias", ir.OpLayerNorm, nil, chain, randF32(r, -2, 2, 3, 40), randF32(r, 0.5, 1.5, 40))
	add("softmax/3x100", ir.OpSoftmax, nil, chain, randF32(r, -5, 5, 3, 100))
	add("softmax/axis0", ir.OpSoftmax, axis(0), chain, randF32(r, -5, 5, 5, 3, 2))
	add("softmax/axis1", ir.OpSoftmax, axis(1), chain, randF32(r, -5, 5, 2, 7, 3))
	add("argmax/3x259", ir.OpArgmax, nil, exact, randF32(r, -5, 5, 3, 259))
	add("argmax/i32_axis0", ir.OpArgmax, axis(0), exact, randI32(r, -3, 3, 4, 5))
	add("argmax/ties", ir.OpArgmax, nil, exact, f32s([]int{2, 3}, 1, 3, 3, float32(math.NaN()), 2, 2))

	pos := func(p int32) *tensor.Tensor { return tensor.ScalarInt32(p) }
	rope := func(style string, dims int64) ir.Attrs {
		return ir.Attrs{"theta": ir.FloatAttr(10000), "style": ir.StringAttr(style), "dims": ir.IntAttr(dims)}
	}
	add("rope/1x6x48", ir.OpRope, rope("interleaved", 0), chain, randF32(r, -2, 2, 1, 6, 48), pos(5))
	add("rope/3x4x16_half", ir.OpRope, rope("half", 0), chain, randF32(r, -2, 2, 3, 4, 16), pos(100))
	add("rope/partial", ir.OpRope, rope("interleaved", 8), chain, randF32(r, -2, 2, 2, 3, 16), pos(7))
	add("rope/freq_factors", ir.OpRope, ir.Attrs{"theta": ir.FloatAttr(500000), "freq_factors": ir.FloatsAttr(1, 1, 1.5, 2, 4, 8, 8, 8)},
		chain, randF32(r, -2, 2, 3, 4, 16), pos(200))
	add("rope/yarn", ir.OpRope, ir.Attrs{"style": ir.StringAttr("half"), "freq_factors": ir.FloatsAttr(1, 1.5, 3, 4), "attention_factor": ir.FloatAttr(1.14)},
		chain, randF32(r, -2, 2, 2, 4, 8), pos(40))
	for _, p := range []int32{0, 14, 40} { // rows 0, 1 and the last of the table
		add(fmt.Sprintf("rope/table_pos%d", p), ir.OpRope, ir.Attrs{"style": ir.StringAttr("half"), "original_max": ir.IntAttr(16), "attention_factor": ir.FloatAttr(1.2)},
			chain, randF32(r, -2, 2, 3, 4, 16), pos(p), randF32(r, 0, 1, 5, 8))
	}

	add("kv_write/3rows", ir.OpKVWrite, nil, exact, randF32(r, -1, 1, 16, 2, 8), randF32(r, -1, 1, 3, 2, 8), pos(5))
	add("kv_write/last", ir.OpKVWrite, nil, exact, randF32(r, -1, 1, 9, 1, 4), randF32(r, -1, 1, 1, 1, 4), pos(8))
	// rope_kv_write (passes/ropekv.go): the caches and q, within rope's
	// tolerance (v's rows and the untouched cache rows are exact): a decode
	// step at the caches' last row, a partial half-style rotation by a
	// freqs table, several rows with frequency factors.
	ropeKV := func(t, h, kh, dh, s int) []*tensor.Tensor {
		return []*tensor.Tensor{randF32(r, -1, 1, t, kh, dh), randF32(r, -1, 1, t, kh, dh), randF32(r, -2, 2, s, h, dh), randF32(r, -2, 2, s, kh, dh), randF32(r, -1, 1, s, kh, dh)}
	}
	add("rope_kv_write/decode_last", ir.OpRopeKVWrite, nil, chain, append(ropeKV(16, 8, 2, 8, 1), pos(15))...)
	add("rope_kv_write/table", ir.OpRopeKVWrite, ir.Attrs{"style": ir.StringAttr("half"), "dims": ir.IntAttr(8), "original_max": ir.IntAttr(16), "attention_factor": ir.FloatAttr(1.2)},
		chain, append(ropeKV(32, 4, 2, 16, 1), pos(17), randF32(r, 0, 1, 5, 4))...)
	add("rope_kv_write/rows", ir.OpRopeKVWrite, ir.Attrs{"theta": ir.FloatAttr(500000), "freq_factors": ir.FloatsAttr(1, 1, 1.5, 2, 4, 8, 8, 8)},
		chain, append(ropeKV(16, 2, 1, 16, 3), pos(4))...)

	att := func(causal bool) ir.Attrs {
		return ir.Attrs{"scale": ir.FloatAttr(0.25), "causal": ir.BoolAttr(causal)}
	}
	add("attention/decode_gqa", ir.OpAttention, att(true), chain, randF32(r, -1, 1, 1, 8, 16), randF32(r, -1, 1, 32, 4, 16), randF32(r, -1, 1, 32, 4, 16), pos(10))
	add("attention/prefill", ir.OpAttention, att(true), chain, randF32(r, -1, 1, 4, 4, 8), randF32(r, -1, 1, 20, 2, 8), randF32(r, -1, 1, 20, 2, 8), pos(3))
	add("attention/noncausal", ir.OpAttention, att(false), chain, randF32(r, -1, 1, 3, 2, 8), randF32(r, -1, 1, 7, 2, 8), randF32(r, -1, 1, 7, 2, 8), pos(4))
	capped := ir.Attrs{"scale": ir.FloatAttr(0.25), "softcap": ir.FloatAttr(0.5), "window": ir.IntAttr(3)}
	add("attention/softcap_window", ir.OpAttention, capped, chain, randF32(r, -2, 2, 4, 4, 8), randF32(r, -2, 2, 20, 2, 8), randF32(r, -1, 1, 20, 2, 8), pos(6))

	shape := func(s ...int64) ir.Attrs { return ir.Attrs{"shape": ir.ShapeAttr(ir.S(s...))} }
	add("reshape/6x4", ir.OpReshape, shape(6, 4), exact, randF32(r, -1, 1, 2, 3, 4))
	add("probe", ir.OpProbe, ir.Attrs{"tag": ir.StringAttr("x")}, exact, randF32(r, -1, 1, 5))
	add("transfer", ir.OpTransfer, ir.Attrs{"from": ir.StringAttr("source"), "to": ir.StringAttr("target")}, exact, randI32(r, 0, 9, 3, 2))
	perm := func(p ...int64) ir.Attrs { return ir.Attrs{"perm": ir.IntsAttr(p...)} }
	add("transpose/2x3x4", ir.OpTranspose, perm(2, 0, 1), exact, randF32(r, -1, 1, 2, 3, 4))
	add("transpose/5x7", ir.OpTranspose, perm(1, 0), exact, randF32(r, -1, 1, 5, 7))
	add("transpose/i32", ir.OpTranspose, perm(0, 2, 1), exact, randI32(r, 0, 99, 3, 4, 5))
	slice := func(ax, start, end, step int64) ir.Attrs {
		return ir.Attrs{"axis": ir.IntAttr(ax), "start": ir.IntAttr(start), "end": ir.IntAttr(end), "step": ir.IntAttr(step)}
	}
	add("slice/step3", ir.OpSlice, slice(0, 2, 9, 3), exact, randF32(r, -1, 1, 10, 4))
	add("slice/last3", ir.OpSlice, slice(1, -3, math.MaxInt32, 1), exact, randF32(r, -1, 1, 3, 8))
	add("slice/empty", ir.OpSlice, slice(0, 5, 2, 1), exact, randF32(r, -1, 1, 6, 2))
	add("concat/axis1", ir.OpConcat, axis(1), exact, randF32(r, -1, 1, 2, 3), randF32(r, -1, 1, 2, 5))
	add("concat/axis0", ir.OpConcat, axis(0), exact, randF32(r, -1, 1, 1, 4), randF32(r, -1, 1, 3, 4), randF32(r, -1, 1, 2, 4))

	iota := func(ax int64, s ...int64) ir.Attrs {
		return ir.Attrs{"shape": ir.ShapeAttr(ir.S(s...)), "axis": ir.IntAttr(ax)}
	}
	add("iota/7", ir.OpIota, iota(0, 7), exact, pos(3))
	add("iota/2x5_axis1", ir.OpIota, iota(1, 2, 5), exact, pos(-2))
	reduce := func(keep bool, axes ...int64) ir.Attrs {
		return ir.Attrs{"axes": ir.IntsAttr(axes...), "keepdims": ir.BoolAttr(keep)}
	}
	for _, op := range ir.ReduceOps {
		tl := chain
		if op == ir.OpReduceMax {
			tl = exact
		}
		add(op.String()+"/last", op, reduce(true, -1), tl, randF32(r, -2, 2, 3, 37))
		add(op.String()+"/middle", op, reduce(false, 1), tl, randF32(r, -2, 2, 2, 5, 3))
		add(op.String()+"/two", op, reduce(true, 0, 2), tl, randF32(r, -2, 2, 4, 3, 5))
		add(op.String()+"/none", op, reduce(true), tl, randF32(r, -2, 2, 2, 3))
	}
	add("reduce_max/nan", ir.OpReduceMax, reduce(true, 1), exact, f32s([]int{2, 3}, 1, float32(math.NaN()), 2, 3, 2, 1))
	pool := func(mode string, k, st, pads []int64, ceil, incl bool) ir.Attrs {
		return ir.Attrs{"mode": ir.StringAttr(mode), "kernel": ir.IntsAttr(k...), "strides": ir.IntsAttr(st...),
			"pads": ir.IntsAttr(pads...), "ceil_mode": ir.BoolAttr(ceil), "count_include_pad": ir.BoolAttr(incl)}
	}
	add("pool2d/max2x2", ir.OpPool2D, pool("max", []int64{2, 2}, []int64{2, 2}, []int64{0, 0, 0, 0}, false, false), exact, randF32(r, -2, 2, 2, 3, 6, 7))
	add("pool2d/max3x3_pad_ceil", ir.OpPool2D, pool("max", []int64{3, 3}, []int64{2, 2}, []int64{1, 1, 1, 1}, true, false), exact, randF32(r, -2, 2, 1, 2, 7, 8))
	add("pool2d/avg3x3_pad", ir.OpPool2D, pool("avg", []int64{3, 3}, []int64{1, 1}, []int64{1, 1, 1, 1}, false, false), chain, randF32(r, -2, 2, 1, 2, 5, 6))
	add("pool2d/avg_incl_pad_ceil", ir.OpPool2D, pool("avg", []int64{2, 3}, []int64{2, 2}, []int64{1, 0, 1, 2}, true, true), chain, randF32(r, -2, 2, 1, 3, 6, 7))
	add("pool2d/max_dilated", ir.OpPool2D, ir.Attrs{"kernel": ir.IntsAttr(2, 2), "dilations": ir.IntsAttr(2, 3)}, exact, randF32(r, -2, 2, 1, 1, 7, 9))
	conv := func(st, pads, dil []int64, groups int64) ir.Attrs {
		return ir.Attrs{"strides": ir.IntsAttr(st...), "pads": ir.IntsAttr(pads...), "dilations": ir.IntsAttr(dil...), "groups": ir.IntAttr(groups)}
	}
	add("conv2d/3x3", ir.OpConv2D, conv([]int64{1, 1}, []int64{0, 0, 0, 0}, []int64{1, 1}, 1), convTol, randF32(r, -1, 1, 1, 3, 6, 7), randF32(r, -1, 1, 4, 3, 3, 3))
	add("conv2d/pad_stride_bias", ir.OpConv2D, conv([]int64{2, 1}, []int64{1, 2, 0, 1}, []int64{1, 1}, 1), convTol, randF32(r, -1, 1, 2, 4, 7, 6), randF32(r, -1, 1, 5, 4, 3, 2), randF32(r, -1, 1, 5))
	add("conv2d/groups_dilated", ir.OpConv2D, conv([]int64{1, 2}, []int64{2, 2, 2, 2}, []int64{2, 2}, 2), convTol, randF32(r, -1, 1, 1, 4, 8, 9), randF32(r, -1, 1, 6, 2, 3, 3), randF32(r, -1, 1, 6))
	add("conv2d/1x1", ir.OpConv2D, conv([]int64{1, 1}, []int64{0, 0, 0, 0}, []int64{1, 1}, 1), convTol, randF32(r, -1, 1, 1, 16, 5, 5), randF32(r, -1, 1, 8, 16, 1, 1))
	convT := func(st, pads, dil, outPad []int64, groups int64) ir.Attrs {
		a := conv(st, pads, dil, groups)
		a["output_padding"] = ir.IntsAttr(outPad...)
		return a
	}
	add("conv_transpose2d/stride2", ir.OpConvTranspose2D, convT([]int64{2, 2}, []int64{0, 0, 0, 0}, []int64{1, 1}, []int64{0, 0}, 1), convTol, randF32(r, -1, 1, 1, 3, 4, 5), randF32(r, -1, 1, 3, 2, 3, 3))
	add("conv_transpose2d/pads_outpad_bias", ir.OpConvTranspose2D, convT([]int64{2, 3}, []int64{1, 0, 1, 2}, []int64{1, 1}, []int64{1, 2}, 1), convTol, randF32(r, -1, 1, 2, 2, 3, 4), randF32(r, -1, 1, 2, 3, 3, 4), randF32(r, -1, 1, 3))
	add("conv_transpose2d/groups_dilated", ir.OpConvTranspose2D, convT([]int64{1, 1}, []int64{1, 1, 1, 1}, []int64{2, 2}, []int64{0, 0}, 2), convTol, randF32(r, -1, 1, 1, 4, 5, 5), randF32(r, -1, 1, 4, 3, 3, 3))
	resize := func(h, w int64, mode, coord, nearest string, scales ...float64) ir.Attrs {
		a := ir.Attrs{"size": ir.IntsAttr(h, w), "mode": ir.StringAttr(mode), "coord": ir.StringAttr(coord), "nearest": ir.StringAttr(nearest)}
		if len(scales) > 0 {
			a["scales"] = ir.FloatsAttr(scales...)
		}
		return a
	}
	for _, coord := range ir.ResizeCoordModes {
		add("resize/linear_"+coord, ir.OpResize, resize(7, 9, "linear", coord, "round_prefer_floor"), chain, randF32(r, -2, 2, 1, 2, 4, 5))
		add("resize/nearest_"+coord, ir.OpResize, resize(8, 3, "nearest", coord, "round_prefer_floor"), exact, randF32(r, -2, 2, 1, 2, 4, 5))
	}
	for _, nearest := range ir.ResizeNearestModes {
		add("resize/nearest_"+nearest, ir.OpResize, resize(6, 10, "nearest", "asymmetric", nearest), exact, randF32(r, -2, 2, 2, 1, 4, 5))
	}
	add("resize/scales", ir.OpResize, resize(8, 10, "linear", "half_pixel", "round_prefer_floor", 2, 2.5), chain, randF32(r, -2, 2, 1, 1, 4, 4))
	add("resize/down", ir.OpResize, resize(2, 3, "linear", "align_corners", "round_prefer_floor"), chain, randF32(r, -2, 2, 1, 2, 5, 7))
	// With scales, align_corners divides by in·scale (7.5, 3.5), not the output size.
	add("resize/align_scales", ir.OpResize, resize(7, 3, "linear", "align_corners", "round_prefer_floor", 1.5, 0.7), chain, randF32(r, -2, 2, 1, 2, 5, 5))
	llmCases(add) // llm_ops_test.go
	return cs
}

// nodeOf builds the node of a case, with parameter values typed like its inputs.
func nodeOf(id int, c opCase) *ir.Node {
	n := &ir.Node{ID: id, Op: c.op, Attrs: c.attrs}
	if n.Attrs == nil {
		n.Attrs = ir.Attrs{}
	}
	for i, t := range c.in {
		n.Inputs = append(n.Inputs, &ir.Value{Name: fmt.Sprintf("x%d_%d", id, i), Type: t.Type()})
	}
	return n
}

// outTypes returns the output types of a node on its inputs.
func outTypes(t testing.TB, n *ir.Node) []ir.Type {
	in := make([]ir.Type, len(n.Inputs))
	for i, v := range n.Inputs {
		in[i] = v.Type
	}
	out, _, err := ir.InferTypes(n.Op, in, n.Attrs)
	if err != nil {
		t.Fatalf("%s: %v", n, err)
	}
	return out
}

// runOn launches n on dev with copies of the inputs and downloads the outputs.
func runOn(dev runtime.Device, n *ir.Node, in []*tensor.Tensor, outs []ir.Type) ([]*tensor.Tensor, error) {
	bufs := make([]*runtime.Buffer, len(in))
	for i, t := range in {
		b, err := dev.Upload(t.Clone())
		if err != nil {
			return nil, err
		}
		bufs[i] = b
	}
	res, err := dev.Launch(n, bufs, outs)
	if err != nil {
		return nil, err
	}
	var ts []*tensor.Tensor
	for _, b := range res {
		t, err := dev.Download(b)
		if err != nil {
			return nil, err
		}
		ts = append(ts, t)
	}
	return ts, nil
}

// compare checks got against the reference want under tolerance tl. a and b
// are the matmul operands (for the matmul bound).
func compare(got, want *tensor.Tensor, tl tol, c opCase) error {
	if got.DType != want.DType || fmt.Sprint(got.Shape) != fmt.Sprint(want.Shape) {
		return fmt.Errorf("got %s, want %s", got, want)
	}
	var bound []float64
	if tl.bound != nil {
		bound = tl.bound(c)
	}
	bad := 0
	var first string
	for i := 0; i < want.NumElements(); i++ {
		g, w := got.Float64At(i), want.Float64At(i)
		if !want.DType.IsFloat() {
			if g != w {
				bad++
				if first == "" {
					first = fmt.Sprintf("element %d: got %v, want %v", i, g, w)
				}
			}
			continue
		}
		if math.IsNaN(w) || math.IsNaN(g) {
			if math.IsNaN(w) != math.IsNaN(g) {
				bad++
				if first == "" {
					first = fmt.Sprintf("element %d: got %v, want %v", i, g, w)
				}
			}
			continue
		}
		lim := tl.atol + tl.rtol*math.Abs(w)
		if bound != nil {
			lim = bound[i]
		}
		if g != w && !(math.Abs(g-w) <= lim) {
			bad++
			if first == "" {
				first = fmt.Sprintf("element %d: got %v, want %v (|diff| %.3g > %.3g)", i, g, w, math.Abs(g-w), lim)
			}
		}
	}
	if bad > 0 {
		return fmt.Errorf("%d of %d elements differ; first: %s", bad, want.NumElements(), first)
	}
	return nil
}

// rmsNormRows is rms_norm of x's rows by g, in the CPU reference's f32
// operations and order.
func rmsNormRows(x, g *tensor.Tensor, attrs ir.Attrs) *tensor.Tensor {
	eps := float32(1e-5) // the op's default
	if a, ok := attrs["eps"]; ok {
		eps = float32(a.Float)
	}
	out := tensor.New(ir.F32, x.Shape)
	xs, gs, os := x.Float32s(), g.Float32s(), out.Float32s()
	k := len(gs)
	for r := 0; r < len(xs)/k; r++ {
		var ss float32
		for _, v := range xs[r*k : (r+1)*k] {
			ss += float32(v * v) // rounded before the add, as the reference
		}
		inv := 1 / float32(math.Sqrt(float64(ss/float32(k)+eps)))
		for j := range k {
			os[r*k+j] = gs[j] * (inv * xs[r*k+j])
		}
	}
	return out
}

// matmulBound returns 2·K·2^-24·Σ_k|a_k·b_k| (+ a denormal floor) for every
// output element of a matmul case.
func matmulBound(c opCase) []float64 {
	a, b := c.in[0].Convert(ir.F32), c.in[1].Convert(ir.F32)
	transB := c.attrs["transpose_b"].Bool
	as, bs := a.Shape, b.Shape
	m, k := as[len(as)-2], as[len(as)-1]
	n := bs[len(bs)-1]
	if transB {
		n = bs[len(bs)-2]
	}
	ab, bb := as[:len(as)-2], bs[:len(bs)-2]
	r := max(len(ab), len(bb))
	batch := make([]int, r)
	for i := range batch {
		da, db := 1, 1
		if j := i - (r - len(ab)); j >= 0 {
			da = ab[j]
		}
		if j := i - (r - len(bb)); j >= 0 {
			db = bb[j]
		}
		batch[i] = max(da, db)
	}
	nb := tensor.NumElements(batch)
	out := make([]float64, nb*m*n)
	stride := func(shape []int, bi int) int { // matrix index of batch bi in an operand
		idx, mul := 0, 1
		for d := r - 1; d >= 0; d-- {
			c := (bi / tensor.NumElements(batch[d+1:])) % batch[d]
			if j := d - (r - len(shape)); j >= 0 && shape[j] != 1 {
				idx += c * mul
			}
			if j := d - (r - len(shape)); j >= 0 {
				mul *= shape[j]
			}
		}
		return idx
	}
	af, bf := a.Float32s(), b.Float32s()
	for bi := 0; bi < nb; bi++ {
		ao, bo := stride(ab, bi)*m*k, stride(bb, bi)*k*n
		for i := 0; i < m; i++ {
			for j := 0; j < n; j++ {
				s := 0.0
				for kk := 0; kk < k; kk++ {
					bv := bf[bo+kk*n+j]
					if transB {
						bv = bf[bo+j*k+kk]
					}
					s += math.Abs(float64(af[ao+i*k+kk]) * float64(bv))
				}
				out[(bi*m+i)*n+j] = 2*float64(k)*0x1p-24*s + 1e-30
			}
		}
	}
	return out
}

// swigluBound bounds |got - want| of rms_norm_swiglu: with g and u the
// exact products of the normalized rows and eg, eu their matmulBounds, the
// kernel's silu(g')·u' differs from the reference's by at most
// 1.1·(eg+eg')·(|u|+eu) + (|silu(g)|+1.1·eg)·(eu+eu') (silu's slope is
// within [-0.1, 1.1]; each side is off by its own bound), plus 8 ulp of
// the result for silu's exp, division and the two multiplies.
func swigluBound(c opCase) []float64 {
	tb := ir.Attrs{"transpose_b": ir.BoolAttr(true)}
	h := rmsNormRows(c.in[0], c.in[1], c.attrs)
	eg := matmulBound(opCase{attrs: tb, in: []*tensor.Tensor{h, c.in[2]}})
	eu := matmulBound(opCase{attrs: tb, in: []*tensor.Tensor{h, c.in[3]}})
	hs, wg, wu := h.Float32s(), c.in[2].Convert(ir.F32).Float32s(), c.in[3].Convert(ir.F32).Float32s()
	n := len(wg) / len(c.in[1].Float32s())
	k := len(wg) / n
	out := make([]float64, len(eg))
	for i := range out {
		row, col := i/n, i%n
		var g, u float64
		for j := range k {
			g += float64(hs[row*k+j]) * float64(wg[col*k+j])
			u += float64(hs[row*k+j]) * float64(wu[col*k+j])
		}
		silu := g / (1 + math.Exp(-g))
		out[i] = 2.2*eg[i]*(math.Abs(u)+eu[i]) + 2*(math.Abs(silu)+1.1*eg[i])*eu[i] + 8*0x1p-24*math.Abs(silu*u) + 1e-30
	}
	return out
}

// convBound is matmulBound for conv2d and conv_transpose2d: per output
// element, K terms (the taps of its window) and Σ|x·w| over those that read
// an input, following the ops' docs directly.
func convBound(c opCase) []float64 {
	x, w := c.in[0], c.in[1]
	types := []ir.Type{x.Type(), w.Type()}
	if len(c.in) > 2 {
		types = append(types, c.in[2].Type())
	}
	outs, attrs, err := ir.InferTypes(c.op, types, c.attrs)
	if err != nil {
		panic(err)
	}
	sp, _ := ir.Spatial(attrs)
	os := outs[0].Shape.Sizes()
	n, ch, h, wd := x.Shape[0], x.Shape[1], x.Shape[2], x.Shape[3]
	o, ho, wo := os[1], os[2], os[3]
	kh, kw := w.Shape[2], w.Shape[3]
	groups := int(attrs.Int("groups"))
	cg, og := ch/groups, o/groups
	sh, sw, dh, dw := int(sp.Strides[0]), int(sp.Strides[1]), int(sp.Dilations[0]), int(sp.Dilations[1])
	top, left := int(sp.Pads[0]), int(sp.Pads[1])
	xf, wf := x.Float32s(), w.Float32s()
	out := make([]float64, n*o*ho*wo)
	k := float64(cg * kh * kw)
	for b := 0; b < n; b++ {
		for oc := 0; oc < o; oc++ {
			g := oc / og
			for y := 0; y < ho; y++ {
				for xx := 0; xx < wo; xx++ {
					s := 0.0
					for ci := 0; ci < cg; ci++ {
						chn := g*cg + ci
						for i := 0; i < kh; i++ {
							for j := 0; j < kw; j++ {
								var iy, ix int
								var wv float32
								if c.op == ir.OpConv2D {
									iy, ix = y*sh-top+i*dh, xx*sw-left+j*dw
									wv = wf[((oc*cg+ci)*kh+i)*kw+j]
								} else {
									ty, tx := y+top-i*dh, xx+left-j*dw
									if ty < 0 || tx < 0 || ty%sh != 0 || tx%sw != 0 {
										continue
									}
									iy, ix = ty/sh, tx/sw
									wv = wf[((chn*og+oc-g*og)*kh+i)*kw+j]
								}
								if iy < 0 || iy >= h || ix < 0 || ix >= wd {
									continue
								}
								s += math.Abs(float64(xf[((b*ch+chn)*h+iy)*wd+ix]) * float64(wv))
							}
						}
					}
					bias := 0.0
					if len(c.in) > 2 {
						bias = math.Abs(float64(c.in[2].Float32s()[oc]))
					}
					out[((b*o+oc)*ho+y)*wo+xx] = 2*k*0x1p-24*s + 0x1p-24*(bias+s) + 1e-30
				}
			}
		}
	}
	return out
}

// TestOps runs every case's kernel on the llvm device (all kernels in one
// module) and compares it with the cpu reference.
func TestOps(t *testing.T) {
	dev := newDevice(t, llvm.Options{CopyReshape: true})
	ref := cpu.New()
	cases := opCases()
	nodes := make([]*ir.Node, len(cases))
	f := &ir.Function{Name: "ops"}
	for i, c := range cases {
		nodes[i] = nodeOf(i+1, c)
		f.Nodes = append(f.Nodes, nodes[i])
		f.Params = append(f.Params, nodes[i].Inputs...)
	}
	if err := dev.Prepare(nil, f, nodes); err != nil {
		t.Fatal(err)
	}
	if s := dev.Stats(); s.Modules != 1 {
		t.Errorf("Prepare built %d modules, want 1 (one batch)", s.Modules)
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if !cpu.Supports(c.op) {
				t.Fatalf("the cpu reference has no %s kernel", c.op)
			}
			n := nodes[i]
			outs := outTypes(t, n)
			want, err := runOn(ref, n, c.in, outs)
			if err != nil {
				t.Fatalf("cpu: %v", err)
			}
			got, err := runOn(dev, n, c.in, outs)
			if err != nil {
				t.Fatalf("llvm: %v", err)
			}
			for j := range want {
				if err := compare(got[j], want[j], c.tol, c); err != nil {
					t.Errorf("output %d: %v", j, err)
				}
			}
		})
	}
	if s := dev.Stats(); s.Modules != 1 {
		t.Errorf("the launches built %d modules in all, want 1: every kernel was prepared", s.Modules)
	}
}

// TestEveryOpHasKernelAndCase fails when an op of the registry has no LLVM
// kernel, or no case in the kernel tests.
func TestEveryOpHasKernelAndCase(t *testing.T) {
	tested := map[ir.Op]bool{}
	for _, c := range opCases() {
		tested[c.op] = true
	}
	var missing []string
	for _, d := range ir.Ops() {
		if !cg.Supports(d.Op) {
			missing = append(missing, d.Name+" (no kernel)")
		} else if !tested[d.Op] {
			missing = append(missing, d.Name+" (no test case)")
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("ops without LLVM coverage: %s", strings.Join(missing, ", "))
	}
}

// newDevice opens a device that uses the default kernel cache, so reruns
// do not recompile. It fails without clang-14 (scripts/setup.sh installs it).
func newDevice(t testing.TB, opts llvm.Options) *llvm.Device {
	t.Helper()
	d, err := llvm.Open(opts)
	if err != nil {
		t.Fatalf("no llvm device: %v", err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}
