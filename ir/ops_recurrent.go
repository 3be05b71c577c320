package ir

import "fmt"

// The ops of recurrent models (RWKV, Mamba), whose layers carry a state
// from one call to the next instead of a KV cache. Each takes the tokens
// of a call in order, S of them ([S, C] tensors), so prefill runs the
// whole prompt through the recurrence in one call and decode one token.
// A state starts as zeros. The ops that update a state do it in place,
// like kv_write: the state is input 0 and output 0 (InPlace), the
// sequence's result output 1.

func init() {
	shift := moveFacts
	recurrent := sumFacts
	recurrent.Effects, recurrent.InPlace = SideEffects, UpdatesInputs(1)
	conv := recurrent
	conv.SumLength = Rule[int]{Doc: "K = w's last dim (taps)", Of: func(c Call) int {
		if len(c.In) == 3 && c.In[2].Shape.Rank() == 2 {
			return staticDim(c.In[2], 1)
		}
		return 1
	}}
	conv.Cost = Rule[int64]{Doc: "|x|·K", Of: func(c Call) int64 {
		if len(c.In) == 3 && c.In[2].Shape.Rank() == 2 {
			return max(c.In[1].Shape.NumElements(), 1) * int64(staticDim(c.In[2], 1))
		}
		return elements(c)
	}}
	// A scan's output at row s sums the contributions of every earlier row
	// (the state counts as one), each passed through Transcendentals
	// exponentials per row.
	scanRows := func(c Call) int {
		if len(c.In) > 1 && c.In[1].Shape.Rank() == 2 {
			return staticDim(c.In[1], 0) + 1
		}
		return 1
	}
	wkv := recurrent
	wkv.Transcendentals = always(4)
	wkv.SumLength = Rule[int]{Doc: "K = S + 1 (the rows and the state)", Of: scanRows}
	wkv.Cost = Rule[int64]{Doc: "80·|k|", Of: func(c Call) int64 {
		if len(c.In) == 5 {
			return 80 * max(c.In[1].Shape.NumElements(), 1)
		}
		return elements(c)
	}}
	scan := recurrent
	scan.Transcendentals = always(1)
	scan.SumLength = Rule[int]{Doc: "K = S + 1 + N (the rows, the state and the sum over N)", Of: func(c Call) int {
		if len(c.In) == 6 && c.In[0].Shape.Rank() == 2 {
			return scanRows(c) + staticDim(c.In[0], 1)
		}
		return scanRows(c)
	}}
	scan.Cost = Rule[int64]{Doc: "20·|x|·N", Of: func(c Call) int64 {
		if len(c.In) == 6 && c.In[0].Shape.Rank() == 2 {
			return 20 * max(c.In[1].Shape.NumElements(), 1) * int64(staticDim(c.In[0], 1))
		}
		return elements(c)
	}}
	register(&OpDef{Op: OpTokenShift, Kind: KindData, MinInputs: 2, MaxInputs: 2, Outputs: 1,
		Doc: "x[S, C], prev[1, C] -> [S, C]: x moved one row down the sequence, row 0 taken from prev (the " +
			"row before x: the last row of the previous call, zeros at the start): out[0] = prev[0], " +
			"out[s] = x[s-1]. RWKV's time shift",
		Infer: inferTokenShift, Facts: shift})
	register(&OpDef{Op: OpCausalConv1D, Kind: KindContraction, MinInputs: 3, MaxInputs: 3, Outputs: 2,
		Doc: "state[K-1, C], x[S, C], w[C, K] -> state'[K-1, C], y[S, C]: a depthwise causal convolution along " +
			"the sequence that carries its window from call to call (Mamba's conv1d, without its bias). With u " +
			"the rows of state followed by those of x, y[s, c] = Σ_j w[c, j]·u[s+j, c] summed in f32 in order of " +
			"j, and state' = the last K-1 rows of u. Executors update state in place",
		Infer: inferCausalConv1D, Facts: conv})
	register(&OpDef{Op: OpWKV, Kind: KindReduction, MinInputs: 5, MaxInputs: 5, Outputs: 2,
		Doc: "state[3, C], k[S, C], v[S, C], w[C], u[C] -> state'[3, C], y[S, C]: RWKV-4's WKV recurrence in the " +
			"max-tracking form of transformers' rwkv_linear_attention_cpu. state's rows are a and b (the " +
			"numerator and denominator, scaled by e^-p) and p; b = 0 marks a channel with no history, whose p " +
			"is taken as -1e38. w is the decay (-exp(time_decay)), u the bonus of the current token (time_first). " +
			"For each row s in order, in f32: q = max(p, u+k); e1 = exp(p-q); e2 = exp(u+k-q); " +
			"y = (e1·a + e2·v) / (e1·b + e2); then q = max(p+w, k); e1 = exp(p+w-q); e2 = exp(k-q); " +
			"a = e1·a + e2·v; b = e1·b + e2; p = q. Executors update state in place",
		Infer: inferWKV, Facts: wkv})
	register(&OpDef{Op: OpSelectiveScan, Kind: KindReduction, MinInputs: 6, MaxInputs: 6, Outputs: 2,
		Doc: "state[C, N], x[S, C], dt[S, C], A[C, N], B[S, N], Cm[S, N] -> state'[C, N], y[S, C]: Mamba's " +
			"selective scan as transformers' recurrent path computes it. For each row s in order, in f32: " +
			"h[c, n] = exp(A[c, n]·dt[s, c])·h[c, n] + (dt[s, c]·B[s, n])·x[s, c], then y[s, c] = " +
			"Σ_n h[c, n]·Cm[s, n] summed in order of n. state holds h from call to call; executors update it " +
			"in place",
		Infer: inferSelectiveScan, Facts: scan})
}

// rows checks that t is a float [S, C] (S may be symbolic) with C static.
func rows(name string, t Type) error {
	if !t.DType.IsFloat() || t.Shape.Rank() != 2 || !t.Shape[1].IsStatic() {
		return fmt.Errorf("%s must be a float [S, C] with a static C, got %s", name, t)
	}
	return nil
}

// sameAs checks that t has ref's dtype and shape.
func sameAs(name string, t, ref Type) error {
	if !t.Equal(ref) {
		return fmt.Errorf("%s must be %s, got %s", name, ref, t)
	}
	return nil
}

func inferTokenShift(in []Type, _ Attrs) ([]Type, error) {
	x, prev := in[0], in[1]
	if err := rows("x", x); err != nil {
		return nil, err
	}
	if err := sameAs("prev", prev, T(x.DType, Shape{D(1), x.Shape[1]})); err != nil {
		return nil, err
	}
	return []Type{T(x.DType, x.Shape.Clone())}, nil
}

func inferCausalConv1D(in []Type, _ Attrs) ([]Type, error) {
	state, x, w := in[0], in[1], in[2]
	if err := rows("x", x); err != nil {
		return nil, err
	}
	c := x.Shape[1]
	if w.DType != x.DType || w.Shape.Rank() != 2 || w.Shape[0] != c || !w.Shape[1].IsStatic() || w.Shape[1].Size < 1 {
		return nil, fmt.Errorf("w must be %s[%s, K] with K >= 1, got %s", x.DType, c, w)
	}
	if err := sameAs("state", state, T(x.DType, Shape{D(w.Shape[1].Size - 1), c})); err != nil {
		return nil, err
	}
	return []Type{T(state.DType, state.Shape.Clone()), T(x.DType, x.Shape.Clone())}, nil
}

func inferWKV(in []Type, _ Attrs) ([]Type, error) {
	state, k := in[0], in[1]
	if err := rows("k", k); err != nil {
		return nil, err
	}
	c := k.Shape[1]
	if err := sameAs("v", in[2], k); err != nil {
		return nil, err
	}
	for i, name := range []string{"w", "u"} {
		if err := sameAs(name, in[3+i], T(k.DType, Shape{c})); err != nil {
			return nil, err
		}
	}
	if err := sameAs("state", state, T(k.DType, Shape{D(3), c})); err != nil {
		return nil, err
	}
	return []Type{T(state.DType, state.Shape.Clone()), T(k.DType, k.Shape.Clone())}, nil
}

func inferSelectiveScan(in []Type, _ Attrs) ([]Type, error) {
	state, x := in[0], in[1]
	if err := rows("x", x); err != nil {
		return nil, err
	}
	if err := sameAs("dt", in[2], x); err != nil {
		return nil, err
	}
	a := in[3]
	if a.DType != x.DType || a.Shape.Rank() != 2 || a.Shape[0] != x.Shape[1] || !a.Shape[1].IsStatic() {
		return nil, fmt.Errorf("A must be %s[%s, N], got %s", x.DType, x.Shape[1], a)
	}
	bc := T(x.DType, Shape{x.Shape[0], a.Shape[1]})
	if err := sameAs("B", in[4], bc); err != nil {
		return nil, err
	}
	if err := sameAs("Cm", in[5], bc); err != nil {
		return nil, err
	}
	if err := sameAs("state", state, a); err != nil {
		return nil, err
	}
	return []Type{T(state.DType, state.Shape.Clone()), T(x.DType, x.Shape.Clone())}, nil
}
