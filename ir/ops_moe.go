package ir

import (
	"fmt"
	"math"
)

// The ops of mixture-of-experts layers: a router keeps the k best experts
// of each token (topk over its softmax), and each token is projected by
// the weights of its own experts (expert_matmul), which reads only those
// experts' rows of the stacked weights. Everything else of a MoE layer (the
// softmax, the renormalisation of the kept probabilities, the activation,
// the weighted sum over the k experts, a shared expert and its gate) is
// made of the ops of ops.go.

func init() {
	topk := moveFacts // it selects: the values are inputs, the indices integers
	topk.Compute, topk.Numerics = ComputeF32, always(Selects)
	topk.Cost = Rule[int64]{Doc: "in·k", Of: func(c Call) int64 {
		if len(c.In) == 1 {
			return c.In[0].Shape.NumElements() * max(c.Attrs.Int("k"), 1)
		}
		return elements(c)
	}}
	expert := sumFacts
	expert.Routing, expert.SumLength = RoutedBy(2), sumLastDim
	expert.Cost = Rule[int64]{Doc: "out·K", Of: func(c Call) int64 {
		if len(c.In) == 3 && len(c.Out) == 1 && c.In[0].Shape.Rank() >= 2 {
			return c.Out[0].Shape.NumElements() * c.In[0].Shape[c.In[0].Shape.Rank()-1].Size
		}
		return elements(c)
	}}
	register(&OpDef{Op: OpTopK, Kind: KindReduction, MinInputs: 1, MaxInputs: 1, Outputs: 2,
		Doc: "x[..., N, ...] -> values[..., k, ...] (x's dtype) and indices i32[..., k, ...]: the k largest elements " +
			"along axis, largest first. NaN ranks above every number; equal elements (+0 and -0 are equal, NaNs " +
			"among themselves) come lower index first. N must be static and >= k. (torch.topk on CPU has no tie " +
			"rule: equal elements come in whatever order libstdc++'s nth_element or partial_sort leaves them, e.g. " +
			"indices [2, 3] for the top 2 of four equal values; the values always agree)",
		Attrs: []AttrSpec{
			{Name: "k", Kind: AttrInt, Doc: "how many to keep, 1..N"},
			{Name: "axis", Kind: AttrInt, Default: ptr(IntAttr(-1))},
		},
		Infer: inferTopK, Facts: topk})
	register(&OpDef{Op: OpExpertMatmul, Kind: KindContraction, MinInputs: 3, MaxInputs: 3, Outputs: 1,
		Doc: "x[S, K] or x[S, k, K], w[E, N, K], ids i32[S, k] -> [S, k, N]: out[s, j] = w[ids[s, j]] · x[s] " +
			"(x[s, j] when x has the k axis), each expert's weight stored out×in as PyTorch's Linear and GGUF store " +
			"it, accumulated in f32: each token projected by the experts its router chose, reading only their " +
			"weights. An id outside [0, E) is a run-time error",
		Infer: inferExpertMatmul, Facts: expert})
}

func inferTopK(in []Type, a Attrs) ([]Type, error) {
	x := in[0]
	if !x.DType.IsFloat() {
		return nil, fmt.Errorf("x must be float, got %s", x.DType)
	}
	ax, err := normAxis(a.Int("axis"), x.Shape.Rank())
	if err != nil {
		return nil, err
	}
	n, k := x.Shape[ax], a.Int("k")
	if !n.IsStatic() {
		return nil, fmt.Errorf("axis %d of x %s must be static", ax, x.Shape)
	}
	if k < 1 || k > n.Size || k > math.MaxInt32 {
		return nil, fmt.Errorf("k = %d must be in [1, %d], the length of axis %d", k, n.Size, ax)
	}
	s := x.Shape.Clone()
	s[ax] = D(k)
	return []Type{T(x.DType, s), T(I32, s.Clone())}, nil
}

func inferExpertMatmul(in []Type, _ Attrs) ([]Type, error) {
	x, w, ids := in[0], in[1], in[2]
	if !x.DType.IsFloat() || w.DType != x.DType {
		return nil, fmt.Errorf("x and w must share a float dtype, got %s and %s", x.DType, w.DType)
	}
	if w.Shape.Rank() != 3 || !w.Shape.IsStatic() {
		return nil, fmt.Errorf("w must be a static [E, N, K], got %s", w.Shape)
	}
	if ids.DType != I32 || ids.Shape.Rank() != 2 || !ids.Shape[1].IsStatic() {
		return nil, fmt.Errorf("ids must be i32[S, k] with a static k, got %s", ids)
	}
	r := x.Shape.Rank()
	switch {
	case r != 2 && r != 3:
		return nil, fmt.Errorf("x must be [S, K] or [S, k, K], got %s", x.Shape)
	case x.Shape[0] != ids.Shape[0]:
		return nil, fmt.Errorf("x %s and ids %s differ in S", x.Shape, ids.Shape)
	case r == 3 && x.Shape[1] != ids.Shape[1]:
		return nil, fmt.Errorf("x %s and ids %s differ in k", x.Shape, ids.Shape)
	case x.Shape[r-1] != w.Shape[2]:
		return nil, fmt.Errorf("x %s and w %s differ in K", x.Shape, w.Shape)
	}
	return []Type{T(x.DType, Shape{ids.Shape[0], ids.Shape[1], w.Shape[1]})}, nil
}
