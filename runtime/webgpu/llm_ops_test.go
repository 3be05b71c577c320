package webgpu

import (
	"math/rand/v2"

	"github.com/tapml/tapml/ir"
	"github.com/tapml/tapml/tensor"
)

// llmOpCases are the kernel tests of the mixture-of-experts and recurrent
// ops (opCases includes them), in the shapes of the tiny transformers
// fixtures and of Mixtral-sized rows. Tolerances: topk and token_shift
// move values (exact); expert_matmul is a K-long dot product in another
// order (mmTol(K)); causal_conv1d sums K = 4 taps, possibly fused into
// multiply-adds (reduction); wkv and selective_scan chain exp and
// multiply-adds through up to 9 rows of recurrence, with the driver's exp
// off by a few ULP per step (transc).
func llmOpCases() []opCase {
	var cs []opCase
	add := func(c opCase) { cs = append(cs, c) }
	topk := func(name string, k, axis int64, gen func(r *rand.Rand) *tensor.Tensor) {
		add(opCase{name: "topk " + name, op: ir.OpTopK, attrs: ir.Attrs{"k": ir.IntAttr(k), "axis": ir.IntAttr(axis)}, gen: ins(gen), tol: exact})
	}
	topk("router", 2, -1, f32s(0, 1, 41, 4))
	topk("mixtral 8 experts", 2, -1, f32s(0, 1, 3, 8))
	topk("qwen 60 experts top 4", 4, -1, f32s(0, 1, 2, 60))
	topk("axis 0", 3, 0, f32s(-1, 1, 5, 3, 2))
	topk("ties", 3, -1, func(*rand.Rand) *tensor.Tensor {
		return tensor.FromFloat32([]int{2, 6}, []float32{3, 1, 3, 3, 1, 2, 0.25, 0.25, 0.25, 0.25, 0.25, 0.25})
	})
	ex := func(name string, x []int, e, n int) {
		pairs := x[0] * 2
		if len(x) == 3 {
			pairs = x[0] * x[1]
		}
		k := x[len(x)-1]
		add(opCase{name: "expert_matmul " + name, op: ir.OpExpertMatmul,
			gen: ins(f32s(-1, 1, x...), f32s(-1, 1, e, n, k), ids(0, e, pairs/2, 2)), tol: mmTol(k)})
	}
	ex("decode gate", []int{1, 32}, 4, 64)
	ex("decode down", []int{1, 2, 64}, 4, 32)
	ex("prefill", []int{9, 32}, 4, 64)
	ex("odd K", []int{3, 37}, 8, 19)
	ex("wide", []int{1, 1024}, 8, 300)
	add(opCase{name: "token_shift prefill", op: ir.OpTokenShift, gen: ins(f32s(-1, 1, 9, 32), f32s(-1, 1, 1, 32)), tol: exact})
	add(opCase{name: "token_shift decode", op: ir.OpTokenShift, gen: ins(f32s(-1, 1, 1, 32), f32s(-1, 1, 1, 32)), tol: exact})
	conv := func(name string, s, c, k int) {
		add(opCase{name: "causal_conv1d " + name, op: ir.OpCausalConv1D,
			gen: ins(f32s(-1, 1, k-1, c), f32s(-1, 1, s, c), f32s(-1, 1, c, k)), tol: reduction})
	}
	conv("prefill", 9, 64, 4)
	conv("decode", 1, 64, 4)
	conv("short prefill", 2, 300, 4)
	wkv := func(name string, s, c int) {
		add(opCase{name: "wkv " + name, op: ir.OpWKV, gen: func(r *rand.Rand) []*tensor.Tensor {
			state := randF32(r, 0, 3, 3, c) // a, b > 0 and p as a real state has them
			return []*tensor.Tensor{state, randF32(r, -2, 2, s, c), randF32(r, -1, 1, s, c), randF32(r, -3, -0.01, c), randF32(r, -1, 1, c)}
		}, tol: transc})
	}
	wkv("prefill", 9, 32)
	wkv("decode", 1, 32)
	add(opCase{name: "wkv empty state", op: ir.OpWKV, gen: ins(f32s(0, 0, 3, 32), f32s(-2, 2, 5, 32), f32s(-1, 1, 5, 32), f32s(-3, -0.01, 32), f32s(-1, 1, 32)), tol: transc})
	scan := func(name string, s, c, n int) {
		add(opCase{name: "selective_scan " + name, op: ir.OpSelectiveScan,
			gen: ins(f32s(-1, 1, c, n), f32s(-1, 1, s, c), f32s(0.001, 0.5, s, c), f32s(-8, -0.5, c, n), f32s(-1, 1, s, n), f32s(-1, 1, s, n)), tol: transc})
	}
	scan("prefill", 9, 64, 8)
	scan("decode", 1, 64, 8)
	scan("wide state", 3, 40, 16)
	add(opCase{name: "softplus", op: ir.OpSoftplus, gen: ins(f32s(-30, 30, 7, 33)), tol: transc})
	return cs
}
