package ir

import (
	"fmt"
	"math"
)

// The op table. Each op's semantics are documented beside its row; the CPU
// reference (runtime/cpu) implements exactly this, and every code generator
// must agree with it.

// UnaryOps are the elementwise ops of one input. Output type = input type.
var UnaryOps = []Op{OpNeg, OpExp, OpLog, OpSqrt, OpRsqrt, OpAbs, OpSilu, OpSigmoid, OpTanh, OpRelu, OpGelu, OpErf, OpSoftplus}

// BinaryOps are the elementwise ops of two inputs with numpy broadcasting.
var BinaryOps = []Op{OpAdd, OpSub, OpMul, OpDiv, OpPow, OpMaximum, OpMinimum}

// elementwise describes each op of UnaryOps and BinaryOps: its semantics
// and how its facts differ from elementwiseFacts (f32 arithmetic, one
// correctly rounded op).
var elementwise = map[Op]struct {
	doc            string
	ints           bool // defined on i32 and i64 too (wrapping)
	transcendental bool // GPUs allow a few ULP
	costly         bool // a libm call: costs 16
}{
	OpNeg:      {doc: "-x", ints: true},
	OpExp:      {doc: "e^x", transcendental: true, costly: true},
	OpLog:      {doc: "ln x", transcendental: true, costly: true},
	OpSqrt:     {doc: "√x", transcendental: true},
	OpRsqrt:    {doc: "1/√x", transcendental: true},
	OpAbs:      {doc: "|x|", ints: true},
	OpSilu:     {doc: "x·sigmoid(x)", transcendental: true, costly: true},
	OpSigmoid:  {doc: "1/(1+e^-x)", transcendental: true, costly: true},
	OpTanh:     {doc: "tanh x", transcendental: true, costly: true},
	OpRelu:     {doc: "max(x, 0)", ints: true},
	OpGelu:     {doc: "0.5·x·(1+tanh(√(2/π)·(x+0.044715·x³))) (the tanh approximation GPT-2 uses)", transcendental: true, costly: true},
	OpErf:      {doc: "erf x = 2/√π·∫₀ˣ e^(-t²) dt (exact GELU is 0.5·x·(1+erf(x/√2)))", transcendental: true, costly: true},
	OpSoftplus: {doc: "ln(1+e^x) as log1p(e^x); x itself when x > 20 (PyTorch's softplus)", transcendental: true, costly: true},
	OpAdd:      {doc: "a+b", ints: true},
	OpSub:      {doc: "a-b", ints: true},
	OpMul:      {doc: "a·b", ints: true},
	OpDiv:      {doc: "a/b"},
	OpPow:      {doc: "a^b", transcendental: true, costly: true},
	OpMaximum:  {doc: "max(a, b)", ints: true},
	OpMinimum:  {doc: "min(a, b)", ints: true},
}

// elementwiseOpFacts are the facts of one op of UnaryOps or BinaryOps.
func elementwiseOpFacts(op Op) Facts {
	f, e := elementwiseFacts, elementwise[op]
	if e.ints {
		f.Compute = ComputeF32OrInt
	}
	if e.transcendental {
		f.Transcendentals = always(1)
	}
	if e.costly {
		f.Cost = costTranscendental
	}
	return f
}

func init() {
	for _, op := range UnaryOps {
		register(&OpDef{Op: op, Doc: elementwise[op].doc, Kind: KindElementwise, MinInputs: 1, MaxInputs: 1, Outputs: 1,
			Infer: inferUnary, Facts: elementwiseOpFacts(op)})
	}
	for _, op := range BinaryOps {
		register(&OpDef{Op: op, Doc: elementwise[op].doc, Kind: KindElementwise, MinInputs: 2, MaxInputs: 2, Outputs: 1,
			Infer: inferBinary, Facts: elementwiseOpFacts(op)})
	}
	// The facts of the rows below, as they differ from the common sets
	// (facts.go).
	sideEffect := moveFacts // probe records its input
	sideEffect.Effects = SideEffects
	kvWrite := sideEffect // the cache is updated in place
	kvWrite.InPlace = UpdatesInputs(1)
	cast := moveFacts // a float result is rounded once
	cast.Numerics, cast.ChainLength = always(OneRounding), always(1)
	argmax := moveFacts // compares values of any numeric dtype; floats in f32
	argmax.Compute = ComputeF32OrInt
	norm := sumFacts
	norm.SumLength = sumLastDim
	softmax := sumFacts
	softmax.SumLength, softmax.Transcendentals, softmax.Cost = sumSoftmax, always(1), costTranscendental
	matmul := sumFacts
	matmul.SumLength, matmul.Cost = sumLastDim, costMatmul
	attention := sumFacts
	attention.SumLength, attention.Transcendentals, attention.Cost = sumAttention, attentionTranscendentals, costAttention
	rope := elementwiseFacts // sin and cos of an angle that grows with the position
	rope.Numerics, rope.Transcendentals, rope.Cost = always(Angle), always(1), costTranscendental
	ropeKV := rope // rope's rotations, and the caches updated in place as kv_write's
	ropeKV.Effects, ropeKV.InPlace = SideEffects, UpdatesInputs(2)
	matmul.Storage = storageMatmul
	normMatmul := matmul
	normMatmul.Storage, normMatmul.Cost = storageNormMatmul, costNormMatmul
	normSwiGLU := normMatmul // silu and mul on the output: one transcendental an element
	normSwiGLU.Storage, normSwiGLU.Cost, normSwiGLU.Transcendentals = storageNormSwiGLU, costNormSwiGLU, always(1)
	normQKV := normMatmul
	normQKV.Storage, normQKV.Cost = storageNormQKV, costNormQKV
	gather := moveFacts
	gather.Storage = storageGather
	dequantize := moveFacts // exact: every product of a scale and a quantized integer fits f32's 24 bits, one add rounds
	dequantize.Storage = storageDequantize
	fused := elementwiseFacts
	fused.ChainLength, fused.Transcendentals, fused.Cost = fusedChainLength, fusedTranscendentals, costTranscendental
	register(&OpDef{Op: OpConstant, Kind: KindData, Outputs: 1,
		Doc: "a constant tensor: value holds every element (row-major) or one element repeated",
		Attrs: []AttrSpec{
			{Name: "dtype", Kind: AttrDType, Default: ptr(DTypeAttr(F32))},
			{Name: "shape", Kind: AttrShape, Default: ptr(ShapeAttr(Shape{}))},
			{Name: "value", Kind: AttrFloats},
		},
		Infer: inferConstant, Facts: moveFacts})
	register(&OpDef{Op: OpCast, Kind: KindElementwise, MinInputs: 1, MaxInputs: 1, Outputs: 1,
		Doc:   "converts elements to dtype `to` (float to int truncates toward zero)",
		Attrs: []AttrSpec{{Name: "to", Kind: AttrDType}},
		Infer: func(in []Type, a Attrs) ([]Type, error) { return []Type{T(a.DType("to"), in[0].Shape.Clone())}, nil }, Facts: cast})
	register(&OpDef{Op: OpGather, Kind: KindData, MinInputs: 2, MaxInputs: 2, Outputs: 1,
		Doc: "embedding lookup: out = table indexed by integer ids along axis; " +
			"shape table[:axis] + ids + table[axis+1:]. An id out of range is a run-time error",
		Attrs: []AttrSpec{{Name: "axis", Kind: AttrInt, Default: ptr(IntAttr(0))}},
		Infer: inferGather, Facts: gather})
	register(&OpDef{Op: OpDequantize, Kind: KindData, MinInputs: 1, MaxInputs: 1, Outputs: 1,
		Doc: "a weight in a storage dtype (f16, bf16, a ggml block format) as f32, decoded as ggml's " +
			"dequantize_row_* does (the same products and sums in the same order); an f32 input is returned as is",
		Infer: inferDequantize, Facts: dequantize})
	register(&OpDef{Op: OpMatmul, Kind: KindContraction, MinInputs: 2, MaxInputs: 3, Outputs: 1,
		Doc: "a[..., M, K] × b[..., K, N] -> [..., M, N]; with transpose_b, b is [..., N, K] " +
			"(weights stored out×in). Leading dims broadcast. Accumulates in f32; an optional c " +
			"of the output's type is added to the sum (a residual add fused in)",
		Attrs: []AttrSpec{{Name: "transpose_b", Kind: AttrBool, Default: ptr(BoolAttr(false))}},
		Infer: inferMatmul, Facts: matmul})
	register(&OpDef{Op: OpRMSNorm, Kind: KindReduction, MinInputs: 2, MaxInputs: 2, Outputs: 1,
		Doc:   "x[..., D], w[D]: x / sqrt(mean(x²) + eps) · w over the last axis",
		Attrs: []AttrSpec{{Name: "eps", Kind: AttrFloat, Default: ptr(FloatAttr(1e-5))}},
		Infer: inferNorm, Facts: norm})
	register(&OpDef{Op: OpRMSNormMatmul, Kind: KindContraction, MinInputs: 3, MaxInputs: 3, Outputs: 1,
		Doc: "x[..., K], g[K], w[N, K] -> [..., N]: matmul(rms_norm(x, g), w) with transpose_b, each normalized " +
			"element rounded as rms_norm rounds it (passes/norm.go fuses a norm into the products that read it)",
		Attrs: []AttrSpec{{Name: "eps", Kind: AttrFloat, Default: ptr(FloatAttr(1e-5))}},
		Infer: inferRMSNormMatmul, Facts: normMatmul})
	register(&OpDef{Op: OpRMSNormSwiGLU, Kind: KindContraction, MinInputs: 4, MaxInputs: 4, Outputs: 1,
		Doc: "x[..., K], g[K], wg[N, K], wu[N, K] -> [..., N]: silu(h·wgᵀ)·(h·wuᵀ) with h = rms_norm(x, g), each " +
			"step rounded as rms_norm_matmul, silu and mul round it (passes/swiglu.go fuses a decode step's gate, up " +
			"and silu·mul)",
		Attrs: []AttrSpec{{Name: "eps", Kind: AttrFloat, Default: ptr(FloatAttr(1e-5))}},
		Infer: inferRMSNormSwiGLU, Facts: normSwiGLU})
	register(&OpDef{Op: OpRMSNormQKV, Kind: KindContraction, MinInputs: 5, MaxInputs: 5, Outputs: 3,
		Doc: "x[..., K], g[K], wq[Nq, K], wk[Nk, K], wv[Nv, K] -> [..., Nq], [..., Nk], [..., Nv]: the three " +
			"rms_norm_matmul of one row and norm (passes/qkv.go fuses a decode step's q, k and v)",
		Attrs: []AttrSpec{{Name: "eps", Kind: AttrFloat, Default: ptr(FloatAttr(1e-5))}},
		Infer: inferRMSNormQKV, Facts: normQKV})
	register(&OpDef{Op: OpLayerNorm, Kind: KindReduction, MinInputs: 2, MaxInputs: 3, Outputs: 1,
		Doc:   "x[..., D], w[D], optional b[D]: (x - mean) / sqrt(var + eps) · w (+ b) over the last axis",
		Attrs: []AttrSpec{{Name: "eps", Kind: AttrFloat, Default: ptr(FloatAttr(1e-5))}},
		Infer: inferNorm, Facts: norm})
	register(&OpDef{Op: OpSoftmax, Kind: KindReduction, MinInputs: 1, MaxInputs: 1, Outputs: 1,
		Doc:   "exp(x - max) / sum(exp(x - max)) along axis",
		Attrs: []AttrSpec{{Name: "axis", Kind: AttrInt, Default: ptr(IntAttr(-1))}},
		Infer: inferAxisKeep, Facts: softmax})
	register(&OpDef{Op: OpArgmax, Kind: KindReduction, MinInputs: 1, MaxInputs: 1, Outputs: 1,
		Doc:   "index (i32) of the largest element along axis, the first one on ties; the axis is removed",
		Attrs: []AttrSpec{{Name: "axis", Kind: AttrInt, Default: ptr(IntAttr(-1))}},
		Infer: inferArgmax, Facts: argmax})
	register(&OpDef{Op: OpRope, Kind: KindElementwise, MinInputs: 2, MaxInputs: 3, Outputs: 1,
		Doc: "rotary position embedding. x[S, H, Dh], pos i32[] (position of row 0; row s is at pos+s). " +
			"Pair i (i < dims/2) is rotated by angle p·freq[i], freq[i] = theta^(-2i/dims)/freq_factors[i], " +
			"and multiplied by attention_factor (YaRN's and LongRoPE's). style interleaved pairs " +
			"(2i, 2i+1) (llama2.c, GGUF); style half pairs (i, i+dims/2) (Hugging Face). dims 0 means Dh; " +
			"freq_factors empty means all 1 (else dims/2 positive divisors: Llama 3.1's, linear and YaRN scaling). " +
			"With a third input freqs[R, dims/2] the frequencies depend on the length L = pos+S the call reaches: " +
			"they are row min(max(L-original_max, 0), R-1) of freqs (LongRoPE's short and long factors, " +
			"dynamic NTK's base per length), and theta and freq_factors are unused",
		Attrs: ropeAttrs,
		Infer: inferRope, Facts: rope})
	register(&OpDef{Op: OpKVWrite, Kind: KindData, MinInputs: 3, MaxInputs: 3, Outputs: 1,
		Doc: "cache[T, KH, Dh], new[S, KH, Dh], pos i32[]: the cache with rows pos..pos+S-1 replaced by new. " +
			"pos+S > T is a run-time error (a static S > T a type error). Executors update the cache in place",
		Infer: inferKVWrite, Facts: kvWrite})
	register(&OpDef{Op: OpRopeKVWrite, Kind: KindElementwise, MinInputs: 6, MaxInputs: 7, Outputs: 3,
		Doc: "k_cache[T, KH, Dh], v_cache[T, KH, Dh], q[S, H, Dh], k[S, KH, Dh], v[S, KH, Dh], pos i32[], " +
			"optional freqs -> k_cache, v_cache, rope(q): rope of q and of k (one set of attributes, as rope's), " +
			"kv_write of the rotated k and of v at pos. The caches are updated in place (outputs 0 and 1); " +
			"passes/ropekv.go fuses a decode step's four nodes into one",
		Attrs: ropeAttrs,
		Infer: inferRopeKVWrite, Facts: ropeKV})
	register(&OpDef{Op: OpAttention, Kind: KindContraction, MinInputs: 4, MaxInputs: 4, Outputs: 1,
		Doc: "q[S, H, Dh], k[T, KH, Dh], v[T, KH, Dh], pos i32[]: scaled dot-product attention over cache rows " +
			"0..pos+S-1 with grouped heads (head h reads kv head h/(H/KH)). With causal, query s sees rows 0..pos+s. " +
			"A score is (q·k)·scale, then softcap·tanh(score/softcap) when softcap > 0 (Gemma 2's soft-capping). " +
			"window > 0 is a sliding window: query s sees only rows t > pos+s-window",
		Attrs: []AttrSpec{
			{Name: "scale", Kind: AttrFloat},
			{Name: "causal", Kind: AttrBool, Default: ptr(BoolAttr(true))},
			{Name: "softcap", Kind: AttrFloat, Default: ptr(FloatAttr(0))},
			{Name: "window", Kind: AttrInt, Default: ptr(IntAttr(0))},
		},
		Infer: inferAttention, Facts: attention})
	register(&OpDef{Op: OpReshape, Kind: KindData, MinInputs: 1, MaxInputs: 1, Outputs: 1,
		Doc:   "same elements, new shape (row-major order kept)",
		Attrs: []AttrSpec{{Name: "shape", Kind: AttrShape}},
		Infer: inferReshape, Facts: moveFacts})
	register(&OpDef{Op: OpTranspose, Kind: KindData, MinInputs: 1, MaxInputs: 1, Outputs: 1,
		Doc:   "out dim i is input dim perm[i]",
		Attrs: []AttrSpec{{Name: "perm", Kind: AttrInts}},
		Infer: inferTranspose, Facts: moveFacts})
	register(&OpDef{Op: OpSlice, Kind: KindData, MinInputs: 1, MaxInputs: 1, Outputs: 1,
		Doc: "elements start, start+step, ... < end along axis; negative start/end count from the end, " +
			"both are clamped to the dim; step >= 1. A symbolic dim can only be taken whole (start 0) or " +
			"as its last k (start -k, which needs the dim >= k at run time), with end >= 2^31-1 and step 1",
		Attrs: []AttrSpec{
			{Name: "axis", Kind: AttrInt},
			{Name: "start", Kind: AttrInt},
			{Name: "end", Kind: AttrInt},
			{Name: "step", Kind: AttrInt, Default: ptr(IntAttr(1))},
		},
		Infer: inferSlice, Facts: moveFacts})
	register(&OpDef{Op: OpConcat, Kind: KindData, MinInputs: 1, MaxInputs: -1, Outputs: 1,
		Doc:   "joins inputs along axis; other dims must match",
		Attrs: []AttrSpec{{Name: "axis", Kind: AttrInt}},
		Infer: inferConcat, Facts: moveFacts})
	register(&OpDef{Op: OpProbe, Kind: KindMeta, MinInputs: 1, MaxInputs: 1, Outputs: 1,
		Doc:   "identity that records its input for test carving; tag names what it observes",
		Attrs: []AttrSpec{{Name: "tag", Kind: AttrString, Default: ptr(StringAttr(""))}},
		Infer: inferUnary, Facts: sideEffect})
	register(&OpDef{Op: OpTransfer, Kind: KindMeta, MinInputs: 1, MaxInputs: 1, Outputs: 1,
		Doc: "identity that moves a tensor between placements at a migration boundary",
		Attrs: []AttrSpec{
			{Name: "from", Kind: AttrString},
			{Name: "to", Kind: AttrString},
		},
		Infer: inferUnary, Facts: moveFacts})
	register(&OpDef{Op: OpFusedElementwise, Kind: KindElementwise, MinInputs: 1, MaxInputs: -1, Outputs: 1,
		Doc: "a chain of elementwise ops in one kernel: expr is a term over inputs $0..$n-1 and float " +
			"constants, e.g. mul(silu($0), $1); inputs broadcast; the result has input 0's dtype",
		Attrs: []AttrSpec{{Name: "expr", Kind: AttrString}},
		Infer: inferFused, Facts: fused})
}

func inferUnary(in []Type, _ Attrs) ([]Type, error) {
	return []Type{T(in[0].DType, in[0].Shape.Clone())}, nil
}

func inferBinary(in []Type, _ Attrs) ([]Type, error) {
	if in[0].DType != in[1].DType {
		return nil, fmt.Errorf("input dtypes differ: %s and %s", in[0].DType, in[1].DType)
	}
	s, err := BroadcastShapes(in[0].Shape, in[1].Shape)
	if err != nil {
		return nil, err
	}
	return []Type{T(in[0].DType, s)}, nil
}

func inferConstant(_ []Type, a Attrs) ([]Type, error) {
	s := a.Shape("shape")
	for _, d := range s {
		if !d.IsStatic() || d.Size < 0 {
			return nil, fmt.Errorf("shape %s must be static with sizes >= 0", s)
		}
	}
	n := s.NumElements()
	if v := len(a.Floats("value")); v != 1 && int64(v) != n {
		return nil, fmt.Errorf("value has %d elements, shape %s needs 1 or %d", v, s, n)
	}
	return []Type{T(a.DType("dtype"), s.Clone())}, nil
}

// normAxis maps a possibly negative axis into [0, rank).
func normAxis(axis int64, rank int) (int, error) {
	if axis < 0 {
		axis += int64(rank)
	}
	if axis < 0 || axis >= int64(rank) {
		return 0, fmt.Errorf("axis %d out of range for rank %d", axis, rank)
	}
	return int(axis), nil
}

// NormAxis maps a possibly negative axis into [0, rank); kernels use it.
func NormAxis(axis int64, rank int) int {
	a, _ := normAxis(axis, rank)
	return a
}

func inferGather(in []Type, a Attrs) ([]Type, error) {
	table, ids := in[0], in[1]
	if !ids.DType.IsInt() {
		return nil, fmt.Errorf("ids must be integers, got %s", ids.DType)
	}
	ax, err := normAxis(a.Int("axis"), table.Shape.Rank())
	if err != nil {
		return nil, err
	}
	s := append(Shape{}, table.Shape[:ax]...)
	s = append(s, ids.Shape...)
	s = append(s, table.Shape[ax+1:]...)
	return []Type{T(table.DType, s)}, nil
}

func inferDequantize(in []Type, _ Attrs) ([]Type, error) {
	if in[0].DType != F32 { // a storage dtype reads as f32 (Storage)
		return nil, fmt.Errorf("x must be f32 or a storage dtype (%s), got %s", dtypeList(StorageDTypes), in[0].DType)
	}
	return []Type{T(F32, in[0].Shape.Clone())}, nil
}

func inferMatmul(in []Type, a Attrs) ([]Type, error) {
	x, y := in[0], in[1]
	if x.DType != y.DType || !x.DType.IsFloat() {
		return nil, fmt.Errorf("inputs must share a float dtype, got %s and %s", x.DType, y.DType)
	}
	if x.Shape.Rank() < 2 || y.Shape.Rank() < 2 {
		return nil, fmt.Errorf("inputs must have rank >= 2, got %s and %s", x.Shape, y.Shape)
	}
	xr, yr := x.Shape.Rank(), y.Shape.Rank()
	m, k := x.Shape[xr-2], x.Shape[xr-1]
	k2, n := y.Shape[yr-2], y.Shape[yr-1]
	if a.Bool("transpose_b") {
		k2, n = n, k2
	}
	if k != k2 {
		return nil, fmt.Errorf("inner dims differ: %s × %s (transpose_b=%v): %s vs %s", x.Shape, y.Shape, a.Bool("transpose_b"), k, k2)
	}
	batch, err := BroadcastShapes(x.Shape[:xr-2], y.Shape[:yr-2])
	if err != nil {
		return nil, fmt.Errorf("batch dims: %w", err)
	}
	out := T(x.DType, append(batch, m, n))
	if len(in) > 2 && !in[2].Equal(out) {
		return nil, fmt.Errorf("the addend c must have the output's type %s, got %s", out, in[2])
	}
	return []Type{out}, nil
}

func inferRMSNormMatmul(in []Type, a Attrs) ([]Type, error) {
	if _, err := inferNorm(in[:2], a); err != nil {
		return nil, err
	}
	x, w := in[0], in[2]
	if x.Shape.Rank() < 2 {
		return nil, fmt.Errorf("x must have rank >= 2 (rows of K), got %s", x)
	}
	k := x.Shape[x.Shape.Rank()-1]
	if w.DType != x.DType || w.Shape.Rank() != 2 || w.Shape[1] != k {
		return nil, fmt.Errorf("w must be %s[N, %s] (out×in), got %s", x.DType, k, w)
	}
	return []Type{T(x.DType, append(x.Shape[:x.Shape.Rank()-1].Clone(), w.Shape[0]))}, nil
}

// SwiGLUExpr is the fused_elementwise expression of SwiGLU's gate,
// silu(gate)·up, that rms_norm_swiglu computes on its two products.
const SwiGLUExpr = "mul(silu($0), $1)"

func inferRMSNormSwiGLU(in []Type, a Attrs) ([]Type, error) {
	out, err := inferRMSNormMatmul(in[:3], a)
	if err != nil {
		return nil, err
	}
	if !in[3].Equal(in[2]) {
		return nil, fmt.Errorf("wu must be %s like wg, got %s", in[2], in[3])
	}
	return out, nil
}

func inferRMSNormQKV(in []Type, a Attrs) ([]Type, error) {
	var outs []Type
	for _, w := range in[2:] {
		out, err := inferRMSNormMatmul([]Type{in[0], in[1], w}, a)
		if err != nil {
			return nil, err
		}
		outs = append(outs, out[0])
	}
	return outs, nil
}

func inferNorm(in []Type, _ Attrs) ([]Type, error) {
	x := in[0]
	if x.Shape.Rank() < 1 || !x.DType.IsFloat() {
		return nil, fmt.Errorf("x must be a float tensor of rank >= 1, got %s", x)
	}
	d := x.Shape[x.Shape.Rank()-1]
	for i, p := range in[1:] {
		if p.DType != x.DType || p.Shape.Rank() != 1 || p.Shape[0] != d {
			return nil, fmt.Errorf("input %d must be %s[%s] like x's last dim, got %s", i+1, x.DType, d, p)
		}
	}
	return []Type{T(x.DType, x.Shape.Clone())}, nil
}

func inferAxisKeep(in []Type, a Attrs) ([]Type, error) {
	if _, err := normAxis(a.Int("axis"), in[0].Shape.Rank()); err != nil {
		return nil, err
	}
	if !in[0].DType.IsFloat() {
		return nil, fmt.Errorf("x must be float, got %s", in[0].DType)
	}
	return []Type{T(in[0].DType, in[0].Shape.Clone())}, nil
}

func inferArgmax(in []Type, a Attrs) ([]Type, error) {
	ax, err := normAxis(a.Int("axis"), in[0].Shape.Rank())
	if err != nil {
		return nil, err
	}
	s := append(Shape{}, in[0].Shape[:ax]...)
	s = append(s, in[0].Shape[ax+1:]...)
	return []Type{T(I32, s)}, nil
}

func checkPos(t Type) error {
	if t.DType != I32 || t.Shape.Rank() != 0 {
		return fmt.Errorf("pos must be an i32 scalar (i32[]), got %s", t)
	}
	return nil
}

func inferRope(in []Type, a Attrs) ([]Type, error) {
	x := in[0]
	if x.Shape.Rank() != 3 || !x.DType.IsFloat() {
		return nil, fmt.Errorf("x must be a float tensor [S, H, Dh], got %s", x)
	}
	if err := checkPos(in[1]); err != nil {
		return nil, err
	}
	if s := a.String("style"); s != "interleaved" && s != "half" {
		return nil, fmt.Errorf("style must be \"interleaved\" or \"half\", got %q", s)
	}
	dh := x.Shape[2]
	dims := a.Int("dims")
	if !dh.IsStatic() {
		return nil, fmt.Errorf("head dim must be static, got %s", dh)
	}
	if dims == 0 {
		dims = dh.Size
	}
	if dims < 2 || dims%2 != 0 || dims > dh.Size {
		return nil, fmt.Errorf("dims %d must be even, >= 2 and <= head dim %d", dims, dh.Size)
	}
	if t := a.Float("theta"); !(t > 0) || math.IsInf(t, 1) {
		return nil, fmt.Errorf("theta must be positive and finite, got %g", t)
	}
	if ff := a.Floats("freq_factors"); len(ff) > 0 {
		if int64(len(ff)) != dims/2 {
			return nil, fmt.Errorf("freq_factors has %d values, want dims/2 = %d", len(ff), dims/2)
		}
		for i, f := range ff {
			if !(f > 0) || math.IsInf(f, 1) {
				return nil, fmt.Errorf("freq_factors[%d] must be positive and finite, got %g", i, f)
			}
		}
	}
	if f := a.Float("attention_factor"); !(f > 0) || math.IsInf(f, 1) {
		return nil, fmt.Errorf("attention_factor must be positive and finite, got %g", f)
	}
	if o := a.Int("original_max"); o < 0 || o > math.MaxInt32 {
		return nil, fmt.Errorf("original_max %d must be in [0, 2^31)", o)
	}
	if len(in) == 3 {
		ft := in[2]
		if ft.DType != F32 || ft.Shape.Rank() != 2 || !ft.Shape.IsStatic() || ft.Shape[0].Size < 1 || ft.Shape[1].Size != dims/2 {
			return nil, fmt.Errorf("freqs must be f32[R, dims/2 = %d] with R >= 1, got %s", dims/2, ft)
		}
	}
	return []Type{T(x.DType, x.Shape.Clone())}, nil
}

// ropeAttrs are the attributes of rope and of rope_kv_write.
var ropeAttrs = []AttrSpec{
	{Name: "theta", Kind: AttrFloat, Default: ptr(FloatAttr(10000))},
	{Name: "style", Kind: AttrString, Default: ptr(StringAttr("interleaved"))},
	{Name: "dims", Kind: AttrInt, Default: ptr(IntAttr(0))},
	{Name: "freq_factors", Kind: AttrFloats, Default: ptr(FloatsAttr())},
	{Name: "attention_factor", Kind: AttrFloat, Default: ptr(FloatAttr(1))},
	{Name: "original_max", Kind: AttrInt, Default: ptr(IntAttr(0))},
}

// inferRopeKVWrite checks rope_kv_write as its parts: rope of q and of k
// (with the freqs input when there is one), kv_write of k and of v.
func inferRopeKVWrite(in []Type, a Attrs) ([]Type, error) {
	kc, vc, q, k, v, pos := in[0], in[1], in[2], in[3], in[4], in[5]
	ropeIn := func(x Type) []Type { return append([]Type{x, pos}, in[6:]...) }
	qr, err := inferRope(ropeIn(q), a)
	if err != nil {
		return nil, fmt.Errorf("q: %w", err)
	}
	if _, err := inferRope(ropeIn(k), a); err != nil {
		return nil, fmt.Errorf("k: %w", err)
	}
	if q.Shape[0] != k.Shape[0] || k.Shape[0] != v.Shape[0] {
		return nil, fmt.Errorf("q, k and v must have the same rows, got %s, %s and %s", q, k, v)
	}
	kOut, err := inferKVWrite([]Type{kc, k, pos}, nil)
	if err != nil {
		return nil, fmt.Errorf("k_cache: %w", err)
	}
	vOut, err := inferKVWrite([]Type{vc, v, pos}, nil)
	if err != nil {
		return nil, fmt.Errorf("v_cache: %w", err)
	}
	return []Type{kOut[0], vOut[0], qr[0]}, nil
}

// RopeTableRow is the row of a rope freqs table (R rows) that a call of
// S rows from position pos uses: the length it reaches, pos+S, past
// original_max, clamped to the table.
func RopeTableRow(pos, s, originalMax, rows int) int {
	return min(max(pos+s-originalMax, 0), rows-1)
}

// RopeFreqs returns rope's per-pair frequencies as f32, the one definition
// the CPU reference and every code generator bake in: 1/powf(theta,
// 2i/dims) with the exponent and theta in f32 (as llama2.c computes it),
// divided in f32 by factors[i] when factors is not empty. theta is a
// parameter, not read from the attributes, so generators can perturb it
// for fault injection.
func RopeFreqs(theta float32, dims int, factors []float64) []float32 {
	freq := make([]float32, dims/2)
	for i := range freq {
		freq[i] = 1 / float32(math.Pow(float64(theta), float64(float32(2*i)/float32(dims))))
		if len(factors) > 0 {
			freq[i] /= float32(factors[i])
		}
	}
	return freq
}

func checkKV(name string, t Type) error {
	if t.Shape.Rank() != 3 || !t.DType.IsFloat() || !t.Shape.IsStatic() {
		return fmt.Errorf("%s must be a static float tensor [T, KH, Dh], got %s", name, t)
	}
	return nil
}

func inferKVWrite(in []Type, _ Attrs) ([]Type, error) {
	cache, nw := in[0], in[1]
	if err := checkKV("cache", cache); err != nil {
		return nil, err
	}
	if nw.DType != cache.DType || nw.Shape.Rank() != 3 || nw.Shape[1] != cache.Shape[1] || nw.Shape[2] != cache.Shape[2] {
		return nil, fmt.Errorf("new must be %s[S, %s, %s] like the cache, got %s", cache.DType, cache.Shape[1], cache.Shape[2], nw)
	}
	if err := checkPos(in[2]); err != nil {
		return nil, err
	}
	if s := nw.Shape[0]; s.IsStatic() && s.Size > cache.Shape[0].Size {
		return nil, fmt.Errorf("new has %d rows, more than the cache's %d", s.Size, cache.Shape[0].Size)
	}
	return []Type{T(cache.DType, cache.Shape.Clone())}, nil
}

func inferAttention(in []Type, a Attrs) ([]Type, error) {
	q, k, v := in[0], in[1], in[2]
	if q.Shape.Rank() != 3 || !q.DType.IsFloat() {
		return nil, fmt.Errorf("q must be a float tensor [S, H, Dh], got %s", q)
	}
	if err := checkKV("k", k); err != nil {
		return nil, err
	}
	if !k.Equal(v) {
		return nil, fmt.Errorf("k and v must have the same type, got %s and %s", k, v)
	}
	if k.DType != q.DType || k.Shape[2] != q.Shape[2] {
		return nil, fmt.Errorf("k %s does not match q %s (dtype and head dim)", k, q)
	}
	h, kh := q.Shape[1], k.Shape[1]
	if !h.IsStatic() || kh.Size < 1 || h.Size < 1 || h.Size%kh.Size != 0 {
		return nil, fmt.Errorf("query heads %s must be a static multiple of kv heads %s", h, kh)
	}
	if err := checkPos(in[3]); err != nil {
		return nil, err
	}
	if s := a.Float("scale"); s <= 0 || math.IsInf(s, 0) || math.IsNaN(s) {
		return nil, fmt.Errorf("scale must be positive and finite, got %g", s)
	}
	if c := a.Float("softcap"); !(c >= 0) || math.IsInf(c, 0) {
		return nil, fmt.Errorf("softcap must be 0 (none) or positive and finite, got %g", c)
	}
	if w := a.Int("window"); w < 0 || w > math.MaxInt32 {
		return nil, fmt.Errorf("window %d must be 0 (none) or in [1, 2^31)", w)
	}
	return []Type{T(q.DType, q.Shape.Clone())}, nil
}

// symbolicProduct splits a shape's element count into the static product
// and the multiset of symbols, so shapes with symbols can be compared.
func symbolicProduct(s Shape) (int64, map[string]int) {
	n, syms := int64(1), map[string]int{}
	for _, d := range s {
		if d.IsStatic() {
			n *= d.Size
		} else {
			syms[d.Sym]++
		}
	}
	return n, syms
}

func inferReshape(in []Type, a Attrs) ([]Type, error) {
	x, s := in[0], a.Shape("shape").Clone()
	// One -1 dim takes the rest, when that is computable.
	infer := -1
	for i, d := range s {
		if d.IsStatic() && d.Size == -1 {
			if infer >= 0 {
				return nil, fmt.Errorf("shape %s has more than one -1", s)
			}
			infer = i
		} else if d.IsStatic() && d.Size < 0 {
			return nil, fmt.Errorf("shape %s has a negative dim", s)
		}
	}
	xn, xs := symbolicProduct(x.Shape)
	if infer >= 0 {
		rest := append(append(Shape{}, s[:infer]...), s[infer+1:]...)
		rn, rs := symbolicProduct(rest)
		for sym, c := range rs {
			if xs[sym] < c {
				return nil, fmt.Errorf("cannot infer -1 in %s from %s", s, x.Shape)
			}
		}
		left := map[string]int{}
		for sym, c := range xs {
			if c-rs[sym] > 0 {
				left[sym] = c - rs[sym]
			}
		}
		if len(left) > 1 || (len(left) == 1 && xn != rn) || rn == 0 || xn%rn != 0 {
			return nil, fmt.Errorf("cannot infer -1 in %s from %s", s, x.Shape)
		}
		if len(left) == 1 {
			for sym, c := range left {
				if c != 1 {
					return nil, fmt.Errorf("cannot infer -1 in %s from %s", s, x.Shape)
				}
				s[infer] = Sym(sym)
			}
		} else {
			s[infer] = D(xn / rn)
		}
	}
	sn, ss := symbolicProduct(s)
	same := sn == xn && len(ss) == len(xs)
	for sym, c := range ss {
		same = same && xs[sym] == c
	}
	if !same {
		return nil, fmt.Errorf("cannot reshape %s to %s: element counts differ", x.Shape, s)
	}
	return []Type{T(x.DType, s)}, nil
}

func inferTranspose(in []Type, a Attrs) ([]Type, error) {
	x, perm := in[0], a.Ints("perm")
	if len(perm) != x.Shape.Rank() {
		return nil, fmt.Errorf("perm %v has %d entries, input rank is %d", perm, len(perm), x.Shape.Rank())
	}
	seen := make([]bool, len(perm))
	out := make(Shape, len(perm))
	for i, p := range perm {
		if p < 0 || int(p) >= len(perm) || seen[p] {
			return nil, fmt.Errorf("perm %v is not a permutation of 0..%d", perm, len(perm)-1)
		}
		seen[p] = true
		out[i] = x.Shape[p]
	}
	return []Type{T(x.DType, out)}, nil
}

// SliceBounds resolves a slice's start, end and step against a dim of size n
// (negative values count from the end; both are clamped to [0, n]) and
// returns the first index and the number of elements taken. step must be
// >= 1 (the verifier ensures it); a smaller step takes nothing.
func SliceBounds(start, end, step, n int64) (first, count int64) {
	if start < 0 {
		start += n
	}
	if end < 0 {
		end += n
	}
	start = min(max(start, 0), n)
	end = min(max(end, 0), n)
	if end <= start || step < 1 {
		return start, 0
	}
	return start, (end-start-1)/step + 1
}

func inferSlice(in []Type, a Attrs) ([]Type, error) {
	x := in[0]
	ax, err := normAxis(a.Int("axis"), x.Shape.Rank())
	if err != nil {
		return nil, err
	}
	if a.Int("step") < 1 {
		return nil, fmt.Errorf("step must be >= 1, got %d", a.Int("step"))
	}
	d := x.Shape[ax]
	out := x.Shape.Clone()
	if !d.IsStatic() {
		// A symbolic dim can be taken whole, or its last k elements
		// (start -k, open end), which needs the dim to be >= k at run time.
		start, end, step := a.Int("start"), a.Int("end"), a.Int("step")
		switch {
		case start == 0 && end >= math.MaxInt32 && step == 1:
		case start < 0 && start > math.MinInt64 && end >= math.MaxInt32 && step == 1:
			out[ax] = D(-start)
		default:
			return nil, fmt.Errorf("a symbolic dim %s can only be sliced whole (start 0) or as its last k (start -k), with end >= 2^31-1 and step 1", d)
		}
		return []Type{T(x.DType, out)}, nil
	}
	_, count := SliceBounds(a.Int("start"), a.Int("end"), a.Int("step"), d.Size)
	out[ax] = D(count)
	return []Type{T(x.DType, out)}, nil
}

func inferConcat(in []Type, a Attrs) ([]Type, error) {
	ax, err := normAxis(a.Int("axis"), in[0].Shape.Rank())
	if err != nil {
		return nil, err
	}
	out := in[0].Shape.Clone()
	total := int64(0)
	for i, t := range in {
		if t.DType != in[0].DType || t.Shape.Rank() != out.Rank() {
			return nil, fmt.Errorf("input %d is %s, want %s of rank %d", i, t, in[0].DType, out.Rank())
		}
		for j := range out {
			if j != ax && t.Shape[j] != out[j] {
				return nil, fmt.Errorf("input %d has shape %s, which differs from %s outside axis %d", i, t.Shape, in[0].Shape, ax)
			}
		}
		if !t.Shape[ax].IsStatic() {
			if len(in) == 1 {
				return []Type{T(in[0].DType, out)}, nil
			}
			return nil, fmt.Errorf("cannot concat along symbolic dim %s", t.Shape[ax])
		}
		if total > math.MaxInt64-t.Shape[ax].Size {
			return nil, fmt.Errorf("the concatenated dim overflows int64")
		}
		total += t.Shape[ax].Size
	}
	out[ax] = D(total)
	return []Type{T(in[0].DType, out)}, nil
}

func inferFused(in []Type, a Attrs) ([]Type, error) {
	e, err := ParseExpr(a.String("expr"))
	if err != nil {
		return nil, err
	}
	if n := e.MaxInput() + 1; n != len(in) {
		return nil, fmt.Errorf("expr %q uses %d inputs, node has %d", a.String("expr"), n, len(in))
	}
	s := in[0].Shape
	for _, t := range in[1:] {
		if t.DType != in[0].DType {
			return nil, fmt.Errorf("input dtypes differ: %s and %s", in[0].DType, t.DType)
		}
		if s, err = BroadcastShapes(s, t.Shape); err != nil {
			return nil, err
		}
	}
	return []Type{T(in[0].DType, s.Clone())}, nil
}
