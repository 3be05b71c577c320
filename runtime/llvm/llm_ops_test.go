package llvm_test

import (
	"math"

	"github.com/tapml/tapml/ir"
	"github.com/tapml/tapml/tensor"
)

// llmCases are the kernel tests of the mixture-of-experts and recurrent
// ops. Tolerances (see ops_test.go): topk and token_shift move values and
// causal_conv1d sums its taps in the reference's order with the same
// roundings (exact); wkv and selective_scan chain libm exps through the
// rows (chain); expert_matmul's dot products are reassociated to vectorise
// (expertBound, the matmul bound).
func llmCases(add func(name string, op ir.Op, attrs ir.Attrs, t tol, in ...*tensor.Tensor)) {
	r := rng(3)
	topk := func(k, axis int64) ir.Attrs { return ir.Attrs{"k": ir.IntAttr(k), "axis": ir.IntAttr(axis)} }
	add("topk/router", ir.OpTopK, topk(2, -1), exact, randF32(r, 0, 1, 9, 4))
	add("topk/axis0", ir.OpTopK, topk(3, 0), exact, randF32(r, -1, 1, 5, 3, 2))
	nan := float32(math.NaN())
	add("topk/ties_nan", ir.OpTopK, topk(4, -1), exact, f32s([]int{2, 6}, 3, 1, 3, nan, 1, 2, 0.25, 0.25, 0.25, 0.25, 0.25, 0.25))
	add("expert_matmul/decode", ir.OpExpertMatmul, nil, tol{bound: expertBound}, randF32(r, -1, 1, 1, 32), randF32(r, -1, 1, 4, 64, 32), randI32(r, 0, 4, 1, 2))
	add("expert_matmul/pairs", ir.OpExpertMatmul, nil, tol{bound: expertBound}, randF32(r, -1, 1, 3, 2, 37), randF32(r, -1, 1, 8, 5, 37), randI32(r, 0, 8, 3, 2))
	add("token_shift", ir.OpTokenShift, nil, exact, randF32(r, -1, 1, 5, 16), randF32(r, -1, 1, 1, 16))
	add("causal_conv1d/prefill", ir.OpCausalConv1D, nil, exact, randF32(r, -1, 1, 3, 24), randF32(r, -1, 1, 7, 24), randF32(r, -1, 1, 24, 4))
	add("causal_conv1d/decode", ir.OpCausalConv1D, nil, exact, randF32(r, -1, 1, 3, 24), randF32(r, -1, 1, 1, 24), randF32(r, -1, 1, 24, 4))
	add("wkv/prefill", ir.OpWKV, nil, chain, randF32(r, 0, 3, 3, 16), randF32(r, -2, 2, 6, 16), randF32(r, -1, 1, 6, 16), randF32(r, -3, -0.01, 16), randF32(r, -1, 1, 16))
	add("wkv/empty", ir.OpWKV, nil, chain, randF32(r, 0, 0, 3, 16), randF32(r, -2, 2, 6, 16), randF32(r, -1, 1, 6, 16), randF32(r, -3, -0.01, 16), randF32(r, -1, 1, 16))
	add("selective_scan", ir.OpSelectiveScan, nil, chain, randF32(r, -1, 1, 16, 8), randF32(r, -1, 1, 5, 16), randF32(r, 0.001, 0.5, 5, 16),
		randF32(r, -8, -0.5, 16, 8), randF32(r, -1, 1, 5, 8), randF32(r, -1, 1, 5, 8))
	add("softplus", ir.OpSoftplus, nil, chain, randF32(r, -30, 30, 7, 9))
}

// expertBound is matmulBound for expert_matmul: 2·K·2^-24·Σ_k|x_k·w_k| per
// output, with each pair's expert row.
func expertBound(c opCase) []float64 {
	x, w, ids := c.in[0].Float32s(), c.in[1], c.in[2].Int32s()
	n, k := w.Shape[1], w.Shape[2]
	pairs, perToken := c.in[2].Shape[0]*c.in[2].Shape[1], c.in[2].Shape[1]
	if len(c.in[0].Shape) == 3 {
		perToken = 1
	}
	out := make([]float64, pairs*n)
	for p := range pairs {
		xr := x[p/perToken*k:]
		for o := range n {
			wr := w.Float32s()[(int(ids[p])*n+o)*k:]
			s := 0.0
			for m := range k {
				s += math.Abs(float64(xr[m]) * float64(wr[m]))
			}
			out[p*n+o] = 2 * float64(k) * 0x1p-24 * s
		}
	}
	return out
}
