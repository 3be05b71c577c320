package ir

import (
	"math"
	"slices"
	"strings"
	"testing"
)

func ty(t *testing.T, s string) Type {
	t.Helper()
	typ, err := ParseType(s)
	if err != nil {
		t.Fatal(err)
	}
	return typ
}

// TestInferTypes is the shape-inference table: input types and attributes
// of one op, and either the output type or a substring of the error.
func TestInferTypes(t *testing.T) {
	const big = math.MaxInt32
	type tc struct {
		op    Op
		in    []string
		attrs Attrs
		want  string // the output types (", " between several), or "error: <substring>"
	}
	tests := []tc{
		// unary: the output is the input.
		{OpNeg, []string{"f32[seq, 8]"}, nil, "f32[seq, 8]"},
		{OpExp, []string{"bf16[]"}, nil, "bf16[]"},
		{OpSilu, []string{"f16[0, 3]"}, nil, "f16[0, 3]"},
		{OpRelu, []string{"f32[2]", "f32[2]"}, nil, "error: op relu takes 1 input, got 2"},
		{OpProbe, []string{"i32[seq]"}, Attrs{"tag": StringAttr("x")}, "i32[seq]"},
		{OpTransfer, []string{"f32[2]"}, Attrs{"from": StringAttr("source"), "to": StringAttr("target")}, "f32[2]"},
		{OpTransfer, []string{"f32[2]"}, Attrs{"from": StringAttr("source")}, `error: op transfer: missing required attribute "to" (string)`},

		// binary: numpy broadcasting, a symbol broadcasts with 1 and itself.
		{OpAdd, []string{"f32[seq, 8]", "f32[8]"}, nil, "f32[seq, 8]"},
		{OpAdd, []string{"f32[seq, 1]", "f32[1, 8]"}, nil, "f32[seq, 8]"},
		{OpSub, []string{"f32[1, 8]", "f32[seq, 1]"}, nil, "f32[seq, 8]"},
		{OpMul, []string{"f32[seq]", "f32[seq]"}, nil, "f32[seq]"},
		{OpDiv, []string{"f32[]", "f32[2, 3]"}, nil, "f32[2, 3]"},
		{OpPow, []string{"f32[2, 1, 3]", "f32[4, 1]"}, nil, "f32[2, 4, 3]"},
		{OpMaximum, []string{"f32[0]", "f32[1]"}, nil, "f32[0]"},
		{OpAdd, []string{"f32[seq]", "f32[n]"}, nil, "error: shapes [seq] and [n] do not broadcast (dim 0: seq vs n)"},
		{OpAdd, []string{"f32[seq]", "f32[4]"}, nil, "error: do not broadcast (dim 0: seq vs 4)"},
		{OpAdd, []string{"f32[2, 3]", "f32[3, 3]"}, nil, "error: (dim 0: 2 vs 3)"},
		{OpMinimum, []string{"f32[2]", "f16[2]"}, nil, "error: op minimum: input dtypes differ: f32 and f16"},
		{OpAdd, []string{"f32[2]"}, nil, "error: op add takes 2 inputs, got 1"},

		{OpNeg, []string{"f32[2]"}, nil, "f32[2]"},
		{OpGather, []string{"bool[2147483648, 2147483648]", "i32[1073741824, 1073741824]"}, nil, "error: op gather: output 0: type bool[1073741824, 1073741824, 2147483648]: too large"},

		// constant
		{OpConstant, nil, Attrs{"value": FloatsAttr(1)}, "f32[]"},
		{OpConstant, nil, Attrs{"dtype": DTypeAttr(I32), "shape": ShapeAttr(S(2, 2)), "value": IntsAttr(1, 2, 3, 4)}, "i32[2, 2]"},
		{OpConstant, nil, Attrs{"shape": IntsAttr(0), "value": FloatsAttr()}, "f32[0]"},
		{OpConstant, nil, Attrs{"shape": IntsAttr(3), "value": FloatsAttr(0.5)}, "f32[3]"},
		{OpConstant, nil, Attrs{"shape": IntsAttr(2, 2), "value": FloatsAttr(1, 2, 3)}, "error: value has 3 elements, shape [2, 2] needs 1 or 4"},
		{OpConstant, nil, Attrs{"shape": ShapeAttr(Shape{Sym("seq")}), "value": FloatsAttr(1)}, "error: shape [seq] must be static with sizes >= 0"},
		{OpConstant, nil, Attrs{"shape": IntsAttr(-1), "value": FloatsAttr(1)}, "error: shape [-1] must be static with sizes >= 0"},
		{OpConstant, nil, Attrs{"shape": IntsAttr(1<<62, 4), "value": FloatsAttr(1)}, "error: element count overflows int64"},
		{OpConstant, nil, Attrs{"shape": IntsAttr(-2), "value": FloatsAttr(1)}, "error: dim -2 is negative"},
		{OpConstant, nil, Attrs{"dtype": DTypeAttr(Invalid), "value": FloatsAttr(1)}, `error: attribute "dtype": invalid dtype invalid`},
		{OpConstant, nil, nil, `error: missing required attribute "value" (floats)`},
		{OpConstant, []string{"f32[]"}, Attrs{"value": FloatsAttr(1)}, "error: op constant takes 0 inputs, got 1"},
		{OpConstant, nil, Attrs{"value": FloatAttr(1)}, `error: attribute "value" must be floats, got float 1.0`},

		// cast
		{OpCast, []string{"f32[seq]"}, Attrs{"to": DTypeAttr(I32)}, "i32[seq]"},
		{OpCast, []string{"f32[seq]"}, nil, `error: missing required attribute "to" (dtype)`},
		{OpCast, []string{"f32[seq]"}, Attrs{"to": DTypeAttr(DType(99))}, "error: invalid dtype dtype(99)"},

		// gather: table[:axis] + ids + table[axis+1:]
		{OpGather, []string{"f32[16, 8]", "i32[seq]"}, nil, "f32[seq, 8]"},
		{OpGather, []string{"f32[16, 8]", "i64[2, 3]"}, nil, "f32[2, 3, 8]"},
		{OpGather, []string{"f32[16, 8]", "i32[seq]"}, Attrs{"axis": IntAttr(1)}, "f32[16, seq]"},
		{OpGather, []string{"f32[16, 8]", "i32[]"}, Attrs{"axis": IntAttr(-1)}, "f32[16]"},
		{OpGather, []string{"f32[16, 8]", "f32[seq]"}, nil, "error: ids must be integers, got f32"},
		{OpGather, []string{"f32[]", "i32[1]"}, nil, "error: axis 0 out of range for rank 0"},
		{OpGather, []string{"f32[4]", "i32[1]"}, Attrs{"axis": IntAttr(math.MinInt64)}, "error: out of range for rank 1"},

		// storage dtypes: an accepted input reads as f32, a block format elsewhere is an error
		{OpDequantize, []string{"q4_0[4, 32]"}, nil, "f32[4, 32]"},
		{OpDequantize, []string{"bf16[seq, 3]"}, nil, "f32[seq, 3]"},
		{OpDequantize, []string{"f32[3]"}, nil, "f32[3]"},
		{OpDequantize, []string{"i32[3]"}, nil, "error: x must be f32 or a storage dtype (f16, bf16, q4_0, q4_1, q5_0, q5_1, q8_0, q2_k, q3_k, q4_k, q5_k, q6_k), got i32"},
		{OpMatmul, []string{"f32[seq, 32]", "q4_0[4, 32]"}, Attrs{"transpose_b": BoolAttr(true)}, "f32[seq, 4]"},
		{OpMatmul, []string{"f32[1, 256]", "q6_k[3, 256]"}, Attrs{"transpose_b": BoolAttr(true)}, "f32[1, 3]"},
		{OpMatmul, []string{"f32[2, 8]", "f16[4, 8]"}, Attrs{"transpose_b": BoolAttr(true)}, "f32[2, 4]"},
		{OpMatmul, []string{"f16[2, 8]", "f16[4, 8]"}, Attrs{"transpose_b": BoolAttr(true)}, "f16[2, 4]"},
		{OpMatmul, []string{"f32[2, 32]", "q8_0[32, 32]"}, nil, "error: op matmul: input 1 is q8_0[32, 32], which the op does not read (its stored input: -); dequantize it first"},
		{OpMatmul, []string{"q8_0[2, 32]", "f32[4, 32]"}, Attrs{"transpose_b": BoolAttr(true)}, "error: input 0 is q8_0[2, 32], which the op does not read (its stored input: -)"},
		{OpGather, []string{"q4_k[16, 256]", "i32[seq]"}, nil, "f32[seq, 256]"},
		{OpGather, []string{"f16[16, 8]", "i32[seq]"}, nil, "f32[seq, 8]"},
		{OpGather, []string{"f16[16, 8]", "i32[seq]"}, Attrs{"axis": IntAttr(1)}, "f16[16, seq]"},
		{OpGather, []string{"q4_k[16, 256]", "i32[seq]"}, Attrs{"axis": IntAttr(1)}, "error: input 0 is q4_k[16, 256], which the op does not read (its stored input: -)"},
		{OpRMSNorm, []string{"f32[seq, 32]", "q8_0[32]"}, nil, "error: input 1 is q8_0[32], which the op does not read"},
		{OpAdd, []string{"f32[32]", "q8_0[32]"}, nil, "error: input 1 is q8_0[32], which the op does not read"},
		{OpCast, []string{"f32[seq]"}, Attrs{"to": DTypeAttr(Q4_0)}, "error: attribute \"to\": dtype q4_0 is a block format of stored weights, not an element type"},

		// matmul
		{OpMatmul, []string{"f32[seq, 8]", "f32[8, 4]"}, nil, "f32[seq, 4]"},
		{OpMatmul, []string{"f32[seq, 8]", "f32[4, 8]"}, Attrs{"transpose_b": BoolAttr(true)}, "f32[seq, 4]"},
		{OpMatmul, []string{"f32[2, k]", "f32[k, 3]"}, nil, "f32[2, 3]"},
		{OpMatmul, []string{"f32[2, 1, 3, 4]", "f32[5, 4, 6]"}, nil, "f32[2, 5, 3, 6]"},
		// The addend c (a residual add fused in) has the output's type.
		{OpMatmul, []string{"f32[seq, 32]", "q4_0[4, 32]", "f32[seq, 4]"}, Attrs{"transpose_b": BoolAttr(true)}, "f32[seq, 4]"},
		{OpMatmul, []string{"f32[2, 8]", "f32[8, 4]", "f32[4]"}, nil, "error: the addend c must have the output's type f32[2, 4], got f32[4]"},
		{OpMatmul, []string{"f32[seq, 8]", "f32[4, 8]"}, nil, "error: inner dims differ: [seq, 8] × [4, 8] (transpose_b=false): 8 vs 4"},
		{OpMatmul, []string{"f32[8]", "f32[8, 4]"}, nil, "error: inputs must have rank >= 2, got [8] and [8, 4]"},
		{OpMatmul, []string{"f32[2, 8]", "f16[8, 4]"}, nil, "error: inputs must share a float dtype, got f32 and f16"},
		{OpMatmul, []string{"i32[2, 8]", "i32[8, 4]"}, nil, "error: inputs must share a float dtype"},
		{OpMatmul, []string{"f32[2, 3, 4]", "f32[5, 4, 6]"}, nil, "error: batch dims: shapes [2] and [5] do not broadcast"},

		// norms
		{OpRMSNorm, []string{"f32[seq, 8]", "f32[8]"}, Attrs{"eps": FloatAttr(1e-6)}, "f32[seq, 8]"},
		{OpRMSNorm, []string{"f32[seq, d]", "f32[d]"}, Attrs{"eps": IntAttr(0)}, "f32[seq, d]"},
		{OpRMSNorm, []string{"f32[seq, 8]", "f32[4]"}, nil, "error: input 1 must be f32[8] like x's last dim, got f32[4]"},
		{OpRMSNormMatmul, []string{"f32[2, seq, 8]", "f32[8]", "f32[5, 8]"}, nil, "f32[2, seq, 5]"},
		{OpRMSNormMatmul, []string{"f32[1, 32]", "f32[32]", "q4_0[6, 32]"}, nil, "f32[1, 6]"},
		{OpRMSNormMatmul, []string{"f32[1, 8]", "f32[8]", "f32[8, 5]"}, nil, "error: w must be f32[N, 8] (out×in), got f32[8, 5]"},
		{OpRMSNormMatmul, []string{"f32[1, 8]", "f32[4]", "f32[5, 8]"}, nil, "error: input 1 must be f32[8] like x's last dim, got f32[4]"},
		{OpRMSNormSwiGLU, []string{"f32[1, 8]", "f32[8]", "f32[5, 8]", "f32[5, 8]"}, nil, "f32[1, 5]"},
		{OpRMSNormSwiGLU, []string{"f32[1, 32]", "f32[32]", "q4_0[6, 32]", "q8_0[6, 32]"}, nil, "f32[1, 6]"},
		{OpRMSNormSwiGLU, []string{"f32[1, 8]", "f32[8]", "f32[5, 8]", "f32[4, 8]"}, nil, "error: wu must be f32[5, 8] like wg, got f32[4, 8]"},
		{OpRMSNormSwiGLU, []string{"f32[1, 8]", "f32[8]", "f32[8, 5]", "f32[8, 5]"}, nil, "error: w must be f32[N, 8] (out×in), got f32[8, 5]"},
		{OpRMSNormQKV, []string{"f32[1, 32]", "f32[32]", "f32[8, 32]", "q8_0[4, 32]", "f16[4, 32]"}, nil, "f32[1, 8], f32[1, 4], f32[1, 4]"},
		{OpRMSNormQKV, []string{"f32[1, 8]", "f32[8]", "f32[8, 8]", "f32[4, 8]", "f32[4, 9]"}, nil, "error: w must be f32[N, 8] (out×in), got f32[4, 9]"},
		{OpRMSNorm, []string{"f32[]", "f32[1]"}, nil, "error: x must be a float tensor of rank >= 1, got f32[]"},
		{OpRMSNorm, []string{"i32[4]", "i32[4]"}, nil, "error: x must be a float tensor"},
		{OpLayerNorm, []string{"f32[seq, 8]", "f32[8]", "f32[8]"}, nil, "f32[seq, 8]"},
		{OpLayerNorm, []string{"f32[seq, 8]", "f32[8]", "f16[8]"}, nil, "error: input 2 must be f32[8] like x's last dim, got f16[8]"},
		{OpLayerNorm, []string{"f32[seq, 8]", "f32[8]"}, nil, "f32[seq, 8]"},
		{OpLayerNorm, []string{"f32[seq, 8]"}, nil, "error: op layer_norm takes 2 to 3 inputs, got 1"},
		{OpRMSNorm, []string{"f32[seq, 8]", "f32[8]"}, Attrs{"eps": StringAttr("1")}, `error: attribute "eps" must be float, got string "1"`},

		// softmax, argmax
		{OpSoftmax, []string{"f32[seq, 8]"}, nil, "f32[seq, 8]"},
		{OpSoftmax, []string{"f32[seq, 8]"}, Attrs{"axis": IntAttr(-2)}, "f32[seq, 8]"},
		{OpSoftmax, []string{"f32[seq, 8]"}, Attrs{"axis": IntAttr(2)}, "error: axis 2 out of range for rank 2"},
		{OpSoftmax, []string{"i32[8]"}, nil, "error: x must be float, got i32"},
		{OpArgmax, []string{"f32[seq, 8]"}, nil, "i32[seq]"},
		{OpArgmax, []string{"f32[seq, 8]"}, Attrs{"axis": IntAttr(0)}, "i32[8]"},
		{OpArgmax, []string{"i64[5]"}, nil, "i32[]"},
		{OpArgmax, []string{"f32[]"}, nil, "error: axis -1 out of range for rank 0"},

		// rope
		{OpRope, []string{"f32[seq, 2, 4]", "i32[]"}, nil, "f32[seq, 2, 4]"},
		{OpRope, []string{"f32[seq, 2, 8]", "i32[]"}, Attrs{"style": StringAttr("half"), "dims": IntAttr(4), "theta": FloatAttr(1e6)}, "f32[seq, 2, 8]"},
		{OpRope, []string{"f32[seq, 2, 4]", "i32[]"}, Attrs{"style": StringAttr("neox")}, `error: style must be "interleaved" or "half", got "neox"`},
		{OpRope, []string{"f32[seq, 2, 4]", "i32[]"}, Attrs{"dims": IntAttr(3)}, "error: dims 3 must be even, >= 2 and <= head dim 4"},
		{OpRope, []string{"f32[seq, 2, 4]", "i32[]"}, Attrs{"dims": IntAttr(6)}, "error: dims 6 must be even"},
		{OpRope, []string{"f32[seq, 2, 4]", "i32[]"}, Attrs{"dims": IntAttr(-2)}, "error: dims -2 must be even"},
		{OpRope, []string{"f32[seq, 2, 3]", "i32[]"}, nil, "error: dims 3 must be even"},
		{OpRope, []string{"f32[seq, 2, dh]", "i32[]"}, nil, "error: head dim must be static, got dh"},
		{OpRope, []string{"f32[seq, 2, 4]", "i32[1]"}, nil, "error: pos must be an i32 scalar (i32[]), got i32[1]"},
		{OpRope, []string{"f32[seq, 2, 4]", "i64[]"}, nil, "error: pos must be an i32 scalar"},
		{OpRope, []string{"f32[seq, 8]", "i32[]"}, nil, "error: x must be a float tensor [S, H, Dh], got f32[seq, 8]"},
		{OpRope, []string{"f32[seq, 2, 4]", "i32[]"}, Attrs{"theta": FloatAttr(0)}, "error: theta must be positive and finite, got 0"},
		{OpRope, []string{"f32[seq, 2, 4]", "i32[]"}, Attrs{"theta": FloatAttr(math.NaN())}, "error: theta must be positive and finite, got NaN"},
		{OpRope, []string{"f32[seq, 2, 4]", "i32[]"}, Attrs{"theta": FloatAttr(math.Inf(1))}, "error: theta must be positive and finite, got +Inf"},

		// kv_write
		{OpKVWrite, []string{"f32[16, 2, 4]", "f32[seq, 2, 4]", "i32[]"}, nil, "f32[16, 2, 4]"},
		{OpRopeKVWrite, []string{"f32[16, 2, 4]", "f32[16, 2, 4]", "f32[1, 4, 4]", "f32[1, 2, 4]", "f32[1, 2, 4]", "i32[]"}, nil, "f32[16, 2, 4], f32[16, 2, 4], f32[1, 4, 4]"},
		{OpRopeKVWrite, []string{"f16[16, 2, 8]", "f16[16, 2, 8]", "f16[1, 4, 8]", "f16[1, 2, 8]", "f16[1, 2, 8]", "i32[]", "f32[3, 2]"}, Attrs{"dims": IntAttr(4)}, "f16[16, 2, 8], f16[16, 2, 8], f16[1, 4, 8]"},
		{OpRopeKVWrite, []string{"f32[16, 2, 4]", "f32[16, 2, 4]", "f32[1, 4, 4]", "f32[1, 2, 4]", "f32[1, 2, 4]", "i32[]"}, Attrs{"dims": IntAttr(3)}, "error: q: dims 3 must be even"},
		{OpRopeKVWrite, []string{"f32[16, 2, 4]", "f32[16, 2, 4]", "f32[1, 4, 8]", "f32[1, 2, 4]", "f32[1, 2, 4]", "i32[]"}, Attrs{"dims": IntAttr(6)}, "error: k: dims 6 must be even"},
		{OpRopeKVWrite, []string{"f32[16, 2, 4]", "f32[16, 2, 4]", "f32[2, 4, 4]", "f32[1, 2, 4]", "f32[1, 2, 4]", "i32[]"}, nil, "error: q, k and v must have the same rows"},
		{OpRopeKVWrite, []string{"f32[16, 2, 4]", "f32[16, 1, 4]", "f32[1, 4, 4]", "f32[1, 2, 4]", "f32[1, 2, 4]", "i32[]"}, nil, "error: v_cache: new must be f32[S, 1, 4] like the cache"},
		{OpRopeKVWrite, []string{"f16[16, 2, 4]", "f32[16, 2, 4]", "f32[1, 4, 4]", "f32[1, 2, 4]", "f32[1, 2, 4]", "i32[]"}, nil, "error: k_cache: new must be f16[S, 2, 4]"},
		{OpKVWrite, []string{"f32[16, 2, 4]", "f32[16, 2, 4]", "i32[]"}, nil, "f32[16, 2, 4]"},
		{OpKVWrite, []string{"f32[16, 2, 4]", "f32[17, 2, 4]", "i32[]"}, nil, "error: new has 17 rows, more than the cache's 16"},
		{OpKVWrite, []string{"f32[t, 2, 4]", "f32[1, 2, 4]", "i32[]"}, nil, "error: cache must be a static float tensor [T, KH, Dh], got f32[t, 2, 4]"},
		{OpKVWrite, []string{"f32[16, 2, 4]", "f32[1, 1, 4]", "i32[]"}, nil, "error: new must be f32[S, 2, 4] like the cache, got f32[1, 1, 4]"},
		{OpKVWrite, []string{"f32[16, 2, 4]", "f16[1, 2, 4]", "i32[]"}, nil, "error: new must be f32[S, 2, 4]"},
		{OpKVWrite, []string{"f32[16, 2, 4]", "f32[2, 4]", "i32[]"}, nil, "error: new must be f32[S, 2, 4]"},
		{OpKVWrite, []string{"f32[16, 2, 4]", "f32[1, 2, 4]", "f32[]"}, nil, "error: pos must be an i32 scalar"},

		// attention
		{OpAttention, []string{"f32[seq, 4, 8]", "f32[16, 2, 8]", "f32[16, 2, 8]", "i32[]"}, Attrs{"scale": FloatAttr(0.35)}, "f32[seq, 4, 8]"},
		{OpAttention, []string{"f32[1, 4, 8]", "f32[16, 4, 8]", "f32[16, 4, 8]", "i32[]"}, Attrs{"scale": FloatAttr(1), "causal": BoolAttr(false)}, "f32[1, 4, 8]"},
		{OpAttention, []string{"f32[seq, 4, 8]", "f32[16, 2, 8]", "f32[16, 2, 8]", "i32[]"}, nil, `error: missing required attribute "scale" (float)`},
		{OpAttention, []string{"f32[seq, 4, 8]", "f32[16, 2, 8]", "f32[8, 2, 8]", "i32[]"}, Attrs{"scale": FloatAttr(1)}, "error: k and v must have the same type, got f32[16, 2, 8] and f32[8, 2, 8]"},
		{OpAttention, []string{"f32[seq, 3, 8]", "f32[16, 2, 8]", "f32[16, 2, 8]", "i32[]"}, Attrs{"scale": FloatAttr(1)}, "error: query heads 3 must be a static multiple of kv heads 2"},
		{OpAttention, []string{"f32[seq, 4, 8]", "f32[16, 0, 8]", "f32[16, 0, 8]", "i32[]"}, Attrs{"scale": FloatAttr(1)}, "error: query heads 4 must be a static multiple of kv heads 0"},
		{OpAttention, []string{"f32[seq, 0, 8]", "f32[16, 2, 8]", "f32[16, 2, 8]", "i32[]"}, Attrs{"scale": FloatAttr(1)}, "error: query heads 0 must be a static multiple"},
		{OpAttention, []string{"f32[seq, h, 8]", "f32[16, 2, 8]", "f32[16, 2, 8]", "i32[]"}, Attrs{"scale": FloatAttr(1)}, "error: query heads h must be a static multiple"},
		{OpAttention, []string{"f32[seq, 4, 4]", "f32[16, 2, 8]", "f32[16, 2, 8]", "i32[]"}, Attrs{"scale": FloatAttr(1)}, "error: k f32[16, 2, 8] does not match q f32[seq, 4, 4] (dtype and head dim)"},
		{OpAttention, []string{"f32[seq, 4, 8]", "f32[t, 2, 8]", "f32[t, 2, 8]", "i32[]"}, Attrs{"scale": FloatAttr(1)}, "error: k must be a static float tensor"},
		{OpAttention, []string{"f32[seq, 4, 8]", "f32[16, 2, 8]", "f32[16, 2, 8]", "i32[]"}, Attrs{"scale": FloatAttr(0)}, "error: scale must be positive and finite, got 0"},
		{OpAttention, []string{"f32[seq, 4, 8]", "f32[16, 2, 8]", "f32[16, 2, 8]", "i32[]"}, Attrs{"scale": FloatAttr(math.Inf(1))}, "error: scale must be positive and finite, got +Inf"},
		{OpAttention, []string{"f32[seq, 4, 8]", "f32[16, 2, 8]", "f32[16, 2, 8]", "i32[]"}, Attrs{"scale": FloatAttr(math.NaN())}, "error: scale must be positive and finite, got NaN"},

		// reshape, with symbols
		{OpReshape, []string{"f32[seq, 8]"}, Attrs{"shape": ShapeAttr(Shape{Sym("seq"), D(2), D(4)})}, "f32[seq, 2, 4]"},
		{OpReshape, []string{"f32[seq, 2, 4]"}, Attrs{"shape": ShapeAttr(Shape{Sym("seq"), D(-1)})}, "f32[seq, 8]"},
		{OpReshape, []string{"f32[seq, 2, 4]"}, Attrs{"shape": ShapeAttr(Shape{D(-1), D(8)})}, "f32[seq, 8]"},
		{OpReshape, []string{"f32[seq, 8]"}, Attrs{"shape": ShapeAttr(Shape{D(8), Sym("seq")})}, "f32[8, seq]"},
		{OpReshape, []string{"f32[2, 8]"}, Attrs{"shape": IntsAttr(-1, 4)}, "f32[4, 4]"},
		{OpReshape, []string{"f32[2, 3, 4]"}, Attrs{"shape": IntsAttr(24)}, "f32[24]"},
		{OpReshape, []string{"f32[]"}, Attrs{"shape": IntsAttr(1, 1)}, "f32[1, 1]"},
		{OpReshape, []string{"f32[1]"}, Attrs{"shape": IntsAttr()}, "f32[]"},
		{OpReshape, []string{"f32[0, 4]"}, Attrs{"shape": IntsAttr(-1, 2)}, "f32[0, 2]"},
		{OpReshape, []string{"f32[0, 4]"}, Attrs{"shape": IntsAttr(-1, 0)}, "error: cannot infer -1 in [-1, 0] from [0, 4]"},
		{OpReshape, []string{"f32[seq, 8]"}, Attrs{"shape": IntsAttr(-1)}, "error: cannot infer -1 in [-1] from [seq, 8]"},
		{OpReshape, []string{"f32[seq, 8]"}, Attrs{"shape": IntsAttr(-1, 4)}, "error: cannot infer -1 in [-1, 4] from [seq, 8]"},
		{OpReshape, []string{"f32[a, b]"}, Attrs{"shape": IntsAttr(-1)}, "error: cannot infer -1 in [-1] from [a, b]"},
		{OpReshape, []string{"f32[seq, seq]"}, Attrs{"shape": IntsAttr(-1)}, "error: cannot infer -1"},
		{OpReshape, []string{"f32[2, 8]"}, Attrs{"shape": ShapeAttr(Shape{Sym("seq"), D(-1)})}, "error: cannot infer -1 in [seq, -1] from [2, 8]"},
		{OpReshape, []string{"f32[2, 8]"}, Attrs{"shape": IntsAttr(-1, -1)}, "error: shape [-1, -1] has more than one -1"},
		{OpReshape, []string{"f32[2, 8]"}, Attrs{"shape": IntsAttr(-2, 8)}, `error: attribute "shape": shape [-2, 8]: dim -2 is negative`},
		{OpReshape, []string{"f32[2, 4]"}, Attrs{"shape": IntsAttr(3, 3)}, "error: cannot reshape [2, 4] to [3, 3]: element counts differ"},
		{OpReshape, []string{"f32[n]"}, Attrs{"shape": ShapeAttr(Shape{Sym("seq")})}, "error: cannot reshape [n] to [seq]"},
		{OpReshape, []string{"f32[2]"}, nil, `error: missing required attribute "shape" (shape)`},

		// transpose
		{OpTranspose, []string{"f32[seq, 8]"}, Attrs{"perm": IntsAttr(1, 0)}, "f32[8, seq]"},
		{OpTranspose, []string{"f32[]"}, Attrs{"perm": IntsAttr()}, "f32[]"},
		{OpTranspose, []string{"f32[seq, 8]"}, Attrs{"perm": IntsAttr(0)}, "error: perm [0] has 1 entries, input rank is 2"},
		{OpTranspose, []string{"f32[seq, 8]"}, Attrs{"perm": IntsAttr(0, 0)}, "error: perm [0 0] is not a permutation of 0..1"},
		{OpTranspose, []string{"f32[seq, 8]"}, Attrs{"perm": IntsAttr(0, 2)}, "error: perm [0 2] is not a permutation"},
		{OpTranspose, []string{"f32[seq, 8]"}, Attrs{"perm": IntsAttr(-1, 0)}, "error: perm [-1 0] is not a permutation"},

		// slice: static dims, and the last k of a symbolic one
		{OpSlice, []string{"f32[10]"}, Attrs{"axis": IntAttr(0), "start": IntAttr(2), "end": IntAttr(8), "step": IntAttr(3)}, "f32[2]"},
		{OpSlice, []string{"f32[10]"}, Attrs{"axis": IntAttr(0), "start": IntAttr(-3), "end": IntAttr(big)}, "f32[3]"},
		{OpSlice, []string{"f32[10]"}, Attrs{"axis": IntAttr(0), "start": IntAttr(-30), "end": IntAttr(-8)}, "f32[2]"},
		{OpSlice, []string{"f32[10]"}, Attrs{"axis": IntAttr(0), "start": IntAttr(8), "end": IntAttr(2)}, "f32[0]"},
		{OpSlice, []string{"f32[10]"}, Attrs{"axis": IntAttr(0), "start": IntAttr(1), "end": IntAttr(10), "step": IntAttr(math.MaxInt64)}, "f32[1]"},
		{OpSlice, []string{"f32[10]"}, Attrs{"axis": IntAttr(0), "start": IntAttr(math.MinInt64), "end": IntAttr(math.MaxInt64)}, "f32[10]"},
		{OpSlice, []string{"f32[10]"}, Attrs{"axis": IntAttr(0), "start": IntAttr(0), "end": IntAttr(10), "step": IntAttr(0)}, "error: step must be >= 1, got 0"},
		{OpSlice, []string{"f32[seq, 8]"}, Attrs{"axis": IntAttr(0), "start": IntAttr(-1), "end": IntAttr(big)}, "f32[1, 8]"},
		{OpSlice, []string{"f32[seq, 8]"}, Attrs{"axis": IntAttr(-2), "start": IntAttr(-4), "end": IntAttr(math.MaxInt64)}, "f32[4, 8]"},
		{OpSlice, []string{"f32[seq, 8]"}, Attrs{"axis": IntAttr(0), "start": IntAttr(0), "end": IntAttr(big)}, "f32[seq, 8]"},
		{OpSlice, []string{"f32[seq, 8]"}, Attrs{"axis": IntAttr(1), "start": IntAttr(2), "end": IntAttr(4)}, "f32[seq, 2]"},
		{OpSlice, []string{"f32[seq, 8]"}, Attrs{"axis": IntAttr(0), "start": IntAttr(1), "end": IntAttr(big)}, "error: a symbolic dim seq can only be sliced whole"},
		{OpSlice, []string{"f32[seq, 8]"}, Attrs{"axis": IntAttr(0), "start": IntAttr(0), "end": IntAttr(4)}, "error: a symbolic dim seq can only be sliced whole"},
		{OpSlice, []string{"f32[seq, 8]"}, Attrs{"axis": IntAttr(0), "start": IntAttr(-1), "end": IntAttr(big), "step": IntAttr(2)}, "error: a symbolic dim seq"},
		{OpSlice, []string{"f32[seq, 8]"}, Attrs{"axis": IntAttr(0), "start": IntAttr(math.MinInt64), "end": IntAttr(big)}, "error: a symbolic dim seq"},
		{OpSlice, []string{"f32[seq, 8]"}, Attrs{"axis": IntAttr(2), "start": IntAttr(0), "end": IntAttr(1)}, "error: axis 2 out of range for rank 2"},
		{OpSlice, []string{"f32[8]"}, Attrs{"axis": IntAttr(0), "end": IntAttr(1)}, `error: missing required attribute "start" (int)`},

		// concat
		{OpConcat, []string{"f32[2, 3]", "f32[4, 3]"}, Attrs{"axis": IntAttr(0)}, "f32[6, 3]"},
		{OpConcat, []string{"f32[seq, 2]", "f32[seq, 3]", "f32[seq, 0]"}, Attrs{"axis": IntAttr(-1)}, "f32[seq, 5]"},
		{OpConcat, []string{"f32[seq, 2]"}, Attrs{"axis": IntAttr(0)}, "f32[seq, 2]"},
		{OpConcat, []string{"f32[seq, 2]", "f32[1, 2]"}, Attrs{"axis": IntAttr(0)}, "error: cannot concat along symbolic dim seq"},
		{OpConcat, []string{"f32[2, 3]", "f16[4, 3]"}, Attrs{"axis": IntAttr(0)}, "error: input 1 is f16[4, 3], want f32 of rank 2"},
		{OpConcat, []string{"f32[2, 3]", "f32[4]"}, Attrs{"axis": IntAttr(0)}, "error: input 1 is f32[4], want f32 of rank 2"},
		{OpConcat, []string{"f32[2, 3]", "f32[4, 2]"}, Attrs{"axis": IntAttr(0)}, "error: input 1 has shape [4, 2], which differs from [2, 3] outside axis 0"},
		{OpConcat, []string{"bool[4611686018427387904]", "bool[4611686018427387904]"}, Attrs{"axis": IntAttr(0)}, "error: the concatenated dim overflows int64"},
		{OpConcat, []string{"f32[]"}, Attrs{"axis": IntAttr(0)}, "error: axis 0 out of range for rank 0"},
		{OpConcat, nil, Attrs{"axis": IntAttr(0)}, "error: op concat takes at least 1 inputs, got 0"},

		// fused_elementwise
		{OpFusedElementwise, []string{"f32[seq, 8]", "f32[8]"}, Attrs{"expr": StringAttr("mul(silu($0), $1)")}, "f32[seq, 8]"},
		{OpFusedElementwise, []string{"f32[seq, 1]", "f32[1, 8]", "f32[]"}, Attrs{"expr": StringAttr("add($0, mul($1, $2))")}, "f32[seq, 8]"},
		{OpFusedElementwise, []string{"f32[2]"}, Attrs{"expr": StringAttr("exp(2.5)")}, "error: uses 0 inputs, node has 1"},
		{OpFusedElementwise, []string{"f32[2]"}, Attrs{"expr": StringAttr("add($0, $1)")}, "error: uses 2 inputs, node has 1"},
		{OpFusedElementwise, []string{"f32[2]", "f16[2]"}, Attrs{"expr": StringAttr("add($0, $1)")}, "error: input dtypes differ: f32 and f16"},
		{OpFusedElementwise, []string{"f32[2]", "f32[3]"}, Attrs{"expr": StringAttr("add($0, $1)")}, "error: do not broadcast"},
		{OpFusedElementwise, []string{"f32[2]"}, Attrs{"expr": StringAttr("softmax($0)")}, `error: "softmax" is not an elementwise op`},

		// ops_nn.go (more rows in TestInferNN)
		{OpIota, []string{"i32[]"}, Attrs{"shape": ShapeAttr(Shape{Sym("seq")})}, "i32[seq]"},
		{OpConv2D, []string{"f32[1, 1, 28, 28]", "f32[8, 1, 5, 5]", "f32[8]"}, Attrs{"pads": IntsAttr(2, 2, 2, 2)}, "f32[1, 8, 28, 28]"},
		{OpConvTranspose2D, []string{"f32[1, 4, 5, 5]", "f32[4, 2, 2, 2]"}, Attrs{"strides": IntsAttr(2, 2)}, "f32[1, 2, 10, 10]"},
		{OpPool2D, []string{"f32[1, 8, 28, 28]"}, Attrs{"kernel": IntsAttr(2, 2), "strides": IntsAttr(2, 2)}, "f32[1, 8, 14, 14]"},
		{OpResize, []string{"f32[1, 3, 4, 5]"}, Attrs{"size": IntsAttr(8, 10)}, "f32[1, 3, 8, 10]"},
		{OpReduceSum, []string{"f32[seq, 8]"}, Attrs{"axes": IntsAttr(-1)}, "f32[seq, 1]"},
		{OpReduceMean, []string{"f32[seq, 8]"}, Attrs{"axes": IntsAttr(1), "keepdims": BoolAttr(false)}, "f32[seq]"},
		{OpReduceMax, []string{"f32[2, 3]"}, Attrs{"axes": IntsAttr(0)}, "f32[1, 3]"},

		// ops_logic.go
		{OpCompare, []string{"f32[seq, 8]", "f32[8]"}, Attrs{"cmp": StringAttr("eq")}, "i32[seq, 8]"},
		{OpCompare, []string{"i32[2, 1]", "i32[3]"}, Attrs{"cmp": StringAttr("ge")}, "i32[2, 3]"},
		{OpCompare, []string{"f32[2]", "i32[2]"}, Attrs{"cmp": StringAttr("lt")}, "error: input dtypes differ"},
		{OpCompare, []string{"f32[2]", "f32[2]"}, Attrs{"cmp": StringAttr("approx")}, `error: cmp "approx" is not one of`},
		{OpCompare, []string{"f32[2]", "f32[3]"}, Attrs{"cmp": StringAttr("ne")}, "error: do not broadcast"},
		{OpWhere, []string{"i32[2, 1]", "f32[3]", "f32[2, 1]"}, nil, "f32[2, 3]"},
		{OpWhere, []string{"i32[]", "i32[4]", "i32[]"}, nil, "i32[4]"},
		{OpWhere, []string{"f32[2]", "f32[2]", "f32[2]"}, nil, "error: cond must be i32"},
		{OpWhere, []string{"i32[2]", "f32[2]", "f16[2]"}, nil, "error: a and b differ in dtype"},
		{OpWhere, []string{"i32[2]", "f32[3]", "f32[3]"}, nil, "error: do not broadcast"},

		// ops_moe.go
		{OpTopK, []string{"f32[seq, 8]"}, Attrs{"k": IntAttr(2)}, "f32[seq, 2], i32[seq, 2]"},
		{OpTopK, []string{"f32[5, 4, 3]"}, Attrs{"k": IntAttr(4), "axis": IntAttr(1)}, "f32[5, 4, 3], i32[5, 4, 3]"},
		{OpTopK, []string{"f32[8, seq]"}, Attrs{"k": IntAttr(2)}, "error: axis 1 of x [8, seq] must be static"},
		{OpTopK, []string{"f32[8]"}, Attrs{"k": IntAttr(9)}, "error: k = 9 must be in [1, 8]"},
		{OpTopK, []string{"f32[8]"}, Attrs{"k": IntAttr(0)}, "error: k = 0 must be in [1, 8]"},
		{OpTopK, []string{"i32[8]"}, Attrs{"k": IntAttr(1)}, "error: x must be float"},
		{OpExpertMatmul, []string{"f32[seq, 32]", "f32[4, 64, 32]", "i32[seq, 2]"}, nil, "f32[seq, 2, 64]"},
		{OpExpertMatmul, []string{"f32[seq, 2, 64]", "f32[4, 32, 64]", "i32[seq, 2]"}, nil, "f32[seq, 2, 32]"},
		{OpExpertMatmul, []string{"f32[seq, 3, 64]", "f32[4, 32, 64]", "i32[seq, 2]"}, nil, "error: differ in k"},
		{OpExpertMatmul, []string{"f32[1, 32]", "f32[4, 64, 32]", "i32[seq, 2]"}, nil, "error: differ in S"},
		{OpExpertMatmul, []string{"f32[1, 31]", "f32[4, 64, 32]", "i32[1, 2]"}, nil, "error: differ in K"},
		{OpExpertMatmul, []string{"f32[1, 32]", "f32[64, 32]", "i32[1, 2]"}, nil, "error: w must be a static [E, N, K]"},
		{OpExpertMatmul, []string{"f32[1, 32]", "f32[4, 64, 32]", "f32[1, 2]"}, nil, "error: ids must be i32[S, k]"},
		{OpExpertMatmul, []string{"f32[1, 32]", "f16[4, 64, 32]", "i32[1, 2]"}, nil, "error: must share a float dtype"},

		// ops_recurrent.go
		{OpTokenShift, []string{"f32[seq, 8]", "f32[1, 8]"}, nil, "f32[seq, 8]"},
		{OpTokenShift, []string{"f32[seq, 8]", "f32[8]"}, nil, "error: prev must be f32[1, 8]"},
		{OpCausalConv1D, []string{"f32[3, 8]", "f32[seq, 8]", "f32[8, 4]"}, nil, "f32[3, 8], f32[seq, 8]"},
		{OpCausalConv1D, []string{"f32[0, 8]", "f32[1, 8]", "f32[8, 1]"}, nil, "f32[0, 8], f32[1, 8]"},
		{OpCausalConv1D, []string{"f32[4, 8]", "f32[seq, 8]", "f32[8, 4]"}, nil, "error: state must be f32[3, 8]"},
		{OpCausalConv1D, []string{"f32[3, 8]", "f32[seq, 8]", "f32[7, 4]"}, nil, "error: w must be f32[8, K]"},
		{OpCausalConv1D, []string{"f32[3, 8]", "f32[8, seq]", "f32[8, 4]"}, nil, "error: x must be a float [S, C] with a static C"},
		{OpWKV, []string{"f32[3, 8]", "f32[seq, 8]", "f32[seq, 8]", "f32[8]", "f32[8]"}, nil, "f32[3, 8], f32[seq, 8]"},
		{OpWKV, []string{"f32[3, 8]", "f32[seq, 8]", "f32[1, 8]", "f32[8]", "f32[8]"}, nil, "error: v must be f32[seq, 8]"},
		{OpWKV, []string{"f32[3, 8]", "f32[seq, 8]", "f32[seq, 8]", "f32[8]", "f32[1, 8]"}, nil, "error: u must be f32[8]"},
		{OpWKV, []string{"f32[2, 8]", "f32[seq, 8]", "f32[seq, 8]", "f32[8]", "f32[8]"}, nil, "error: state must be f32[3, 8]"},
		{OpSelectiveScan, []string{"f32[8, 4]", "f32[seq, 8]", "f32[seq, 8]", "f32[8, 4]", "f32[seq, 4]", "f32[seq, 4]"}, nil, "f32[8, 4], f32[seq, 8]"},
		{OpSelectiveScan, []string{"f32[8, 4]", "f32[seq, 8]", "f32[seq, 8]", "f32[8, 4]", "f32[seq, 4]", "f32[1, 4]"}, nil, "error: Cm must be f32[seq, 4]"},
		{OpSelectiveScan, []string{"f32[8, 4]", "f32[seq, 8]", "f32[seq, 8]", "f32[7, 4]", "f32[seq, 4]", "f32[seq, 4]"}, nil, "error: A must be f32[8, N]"},
		{OpSelectiveScan, []string{"f32[8, 3]", "f32[seq, 8]", "f32[seq, 8]", "f32[8, 4]", "f32[seq, 4]", "f32[seq, 4]"}, nil, "error: state must be f32[8, 4]"},

		// unknown ops
		{OpNone, nil, nil, `error: unknown op "<none>"`},
		{Op(200), nil, nil, `error: unknown op "Op(200)"`},
	}
	inferred := map[Op]bool{}
	for _, tc := range tests {
		if !strings.HasPrefix(tc.want, "error: ") {
			inferred[tc.op] = true
		}
	}
	for _, d := range Ops() {
		if !inferred[d.Op] && !slices.Contains(UnaryOps, d.Op) && !slices.Contains(BinaryOps, d.Op) {
			t.Errorf("op %s has no row in the inference table that infers a type", d.Name)
		}
	}
	for _, tc := range tests {
		name := tc.op.String() + "(" + strings.Join(tc.in, ", ") + ")"
		if len(tc.attrs) > 0 {
			name += formatAttrs(tc.attrs)
		}
		t.Run(name, func(t *testing.T) {
			in := make([]Type, len(tc.in))
			for i, s := range tc.in {
				in[i] = ty(t, s)
			}
			out, _, err := InferTypes(tc.op, in, tc.attrs)
			if want, ok := strings.CutPrefix(tc.want, "error: "); ok {
				if err == nil {
					t.Fatalf("got %v, want an error with %q", out, want)
				}
				if !strings.Contains(err.Error(), want) {
					t.Fatalf("error %q does not contain %q", err, want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := make([]string, len(out))
			for i, o := range out {
				got[i] = o.String()
			}
			if strings.Join(got, ", ") != tc.want {
				t.Fatalf("got %v, want %s", out, tc.want)
			}
			for _, o := range out {
				if err := o.Validate(); err != nil {
					t.Errorf("inferred type is malformed: %v", err)
				}
				// The inputs are not aliased by the outputs.
				for _, t0 := range in {
					if len(t0.Shape) > 0 && len(o.Shape) > 0 && &t0.Shape[0] == &o.Shape[0] {
						t.Error("output shape aliases an input shape")
					}
				}
			}
		})
	}
}

// TestInferDoesNotPanicOnOddInputs runs every op's inference over odd
// ranks, zero and huge dims and extreme attribute values.
func TestInferDoesNotPanicOnOddInputs(t *testing.T) {
	types := []Type{
		T(F32, nil), T(F32, S(0)), T(I32, Shape{}), T(F32, Shape{Sym("s")}), T(Bool, S(1, 1, 1, 1, 1)),
		T(F32, S(2, 3, 4)), T(F32, Shape{Sym("s"), D(0), D(4)}), T(F32, S(3, 0, 4)), T(Invalid, S(2)),
		T(F32, S(math.MaxInt64)), T(I64, S(0, 0, 0)),
	}
	attrs := []Attrs{
		nil,
		{"axis": IntAttr(math.MinInt64), "start": IntAttr(math.MinInt64), "end": IntAttr(math.MinInt64), "step": IntAttr(math.MinInt64)},
		{"axis": IntAttr(-1), "start": IntAttr(-1), "end": IntAttr(math.MaxInt64), "step": IntAttr(math.MaxInt64)},
		{"perm": IntsAttr(math.MaxInt64), "shape": IntsAttr(-1), "scale": FloatAttr(1), "expr": StringAttr("$0"), "to": DTypeAttr(F16)},
		{"dims": IntAttr(math.MaxInt64), "theta": FloatAttr(-0.0), "value": FloatsAttr(), "tag": StringAttr("")},
	}
	for _, d := range Ops() {
		for n := 0; n <= 4; n++ {
			// every combination of n inputs would be too many; walk a few.
			for i := range types {
				in := make([]Type, n)
				for j := range in {
					in[j] = types[(i+j*3)%len(types)]
				}
				for _, a := range attrs {
					na := Attrs{}
					for k, v := range a {
						if spec := d.Attr(k); spec != nil {
							na[k] = v
						}
					}
					InferTypes(d.Op, in, na) // must not panic
				}
			}
		}
	}
}

func TestSliceBounds(t *testing.T) {
	tests := []struct{ start, end, step, n, first, count int64 }{
		{0, 10, 1, 10, 0, 10},
		{2, 8, 3, 10, 2, 2},
		{-3, math.MaxInt32, 1, 10, 7, 3},
		{-30, -8, 1, 10, 0, 2},
		{8, 2, 1, 10, 8, 0},
		{1, 10, math.MaxInt64, 10, 1, 1},
		{math.MinInt64, math.MaxInt64, 1, 10, 0, 10},
		{0, 10, 0, 10, 0, 0},
		{0, 10, -1, 10, 0, 0},
		{0, 5, 2, 0, 0, 0},
	}
	for _, tc := range tests {
		first, count := SliceBounds(tc.start, tc.end, tc.step, tc.n)
		if first != tc.first || count != tc.count {
			t.Errorf("SliceBounds(%d, %d, %d, %d) = %d, %d; want %d, %d", tc.start, tc.end, tc.step, tc.n, first, count, tc.first, tc.count)
		}
	}
}

func TestBroadcastShapes(t *testing.T) {
	tests := []struct{ a, b, want string }{
		{"f32[seq, 1]", "f32[1, 8]", "[seq, 8]"},
		{"f32[]", "f32[]", "[]"},
		{"f32[1]", "f32[seq]", "[seq]"},
		{"f32[seq]", "f32[seq]", "[seq]"},
		{"f32[seq]", "f32[len]", "error"},
		{"f32[0]", "f32[1]", "[0]"},
		{"f32[0]", "f32[2]", "error"},
	}
	for _, tc := range tests {
		got, err := BroadcastShapes(ty(t, tc.a).Shape, ty(t, tc.b).Shape)
		s := "error"
		if err == nil {
			s = got.String()
		}
		if s != tc.want {
			t.Errorf("BroadcastShapes(%s, %s) = %s (%v), want %s", tc.a, tc.b, s, err, tc.want)
		}
	}
}

func TestTypeHelpers(t *testing.T) {
	ts := ty(t, "f16[seq, 4]")
	if ts.Bytes() != -1 || ts.Shape.NumElements() != -1 || ts.Shape.IsStatic() {
		t.Errorf("symbolic type: bytes %d, elements %d", ts.Bytes(), ts.Shape.NumElements())
	}
	b := ts.Shape.Bind(map[string]int64{"seq": 3, "other": 9})
	if b.String() != "[3, 4]" || ts.Shape.String() != "[seq, 4]" {
		t.Errorf("Bind: %s (original %s)", b, ts.Shape)
	}
	if tt := T(F16, b); tt.Bytes() != 24 || b.NumElements() != 12 {
		t.Errorf("bytes %d", tt.Bytes())
	}
	if got := b.Sizes(); len(got) != 2 || got[0] != 3 || got[1] != 4 {
		t.Errorf("Sizes %v", got)
	}
	func() {
		defer func() {
			if recover() == nil {
				t.Error("Sizes of a symbolic shape did not panic")
			}
		}()
		ts.Shape.Sizes()
	}()
	for _, s := range []string{"f32[]", "i64[1, 2, 3]", "bool[0]", "bf16[a.b, _c9]"} {
		if got := ty(t, s).String(); got != s {
			t.Errorf("ParseType(%q) prints %q", s, got)
		}
	}
	for _, s := range []string{"f32", "f32[", "q8[2]", "f32[-1]", "f32[inf]", "f32[2] x", "f32[2.5]", "f32[99999999999999999999]", "f32[4611686018427387904]", ""} {
		if _, err := ParseType(s); err == nil {
			t.Errorf("ParseType(%q) succeeded", s)
		}
	}
	for _, d := range []DType{F32, F16, BF16, I32, I64, Bool} {
		p, err := ParseDType(d.String())
		if err != nil || p != d {
			t.Errorf("ParseDType(%s) = %v, %v", d, p, err)
		}
		if d.Size() == 0 {
			t.Errorf("%s has size 0", d)
		}
	}
	if _, err := ParseDType("invalid"); err == nil {
		t.Error(`ParseDType("invalid") succeeded`)
	}
	if DType(200).String() != "dtype(200)" || AttrKind(77).String() != "attrkind(77)" {
		t.Error("String of unknown enum values")
	}
	for _, s := range []string{"seq", "_", "a.b", "x9"} {
		if !ValidSymbol(s) {
			t.Errorf("ValidSymbol(%q) = false", s)
		}
	}
	for _, s := range []string{"", "9a", "a-b", "inf", "nan", "a b", ".a", "é"} {
		if ValidSymbol(s) {
			t.Errorf("ValidSymbol(%q) = true", s)
		}
	}
}

func TestAttrEqualAndClone(t *testing.T) {
	negZero := math.Copysign(0, -1)
	eq := []struct{ a, b Attr }{
		{FloatAttr(math.NaN()), FloatAttr(-math.NaN())},
		{FloatsAttr(1, math.NaN()), FloatsAttr(1, math.NaN())},
		{ShapeAttr(Shape{Sym("s"), D(2)}), ShapeAttr(Shape{Sym("s"), D(2)})},
		{IntsAttr(), IntsAttr()},
	}
	for _, tc := range eq {
		if !tc.a.Equal(tc.b) {
			t.Errorf("%s != %s", tc.a, tc.b)
		}
	}
	ne := []struct{ a, b Attr }{
		{FloatAttr(0), FloatAttr(negZero)},
		{FloatsAttr(0), FloatsAttr(negZero)},
		{IntAttr(1), FloatAttr(1)},
		{IntsAttr(1, 2), IntsAttr(1)},
		{IntsAttr(1, 2), IntsAttr(1, 3)},
		{FloatsAttr(1), FloatsAttr(1, 2)},
		{StringAttr("a"), StringAttr("b")},
		{BoolAttr(true), BoolAttr(false)},
		{DTypeAttr(F32), DTypeAttr(F16)},
		{ShapeAttr(S(2)), ShapeAttr(Shape{Sym("n")})},
		{Attr{Kind: 99}, Attr{Kind: 99}},
	}
	for _, tc := range ne {
		if tc.a.Equal(tc.b) {
			t.Errorf("%s == %s", tc.a, tc.b)
		}
	}
	a := Attrs{"i": IntsAttr(1, 2), "f": FloatsAttr(3), "s": ShapeAttr(S(4))}
	c := a.Clone()
	c["i"].Ints[0], c["f"].Floats[0], c["s"].Shape[0] = 9, 9, D(9)
	if !a.Equal(Attrs{"i": IntsAttr(1, 2), "f": FloatsAttr(3), "s": ShapeAttr(S(4))}) {
		t.Errorf("Clone shares lists: %v", a)
	}
	if a.Equal(c) || !a.Equal(a.Clone()) || a.Equal(Attrs{}) || Attrs(nil).Clone() != nil {
		t.Error("Attrs.Equal / Clone")
	}
	// Normalization copies values and defaults; changing a node's attribute
	// must change neither the caller's map nor the registry's default.
	in := Attrs{"shape": IntsAttr(2, 4)}
	_, na, err := InferTypes(OpReshape, []Type{T(F32, S(8))}, in)
	if err != nil {
		t.Fatal(err)
	}
	na["shape"].Shape[0] = D(5)
	if in["shape"].Ints[0] != 2 {
		t.Error("NormalizeAttrs shares the caller's lists")
	}
	_, na, _ = InferTypes(OpConstant, nil, Attrs{"value": FloatsAttr(1)})
	na["shape"] = ShapeAttr(append(na["shape"].Shape, D(3)))
	if d := LookupOp(OpConstant).Attr("shape").Default; len(d.Shape) != 0 {
		t.Errorf("registry default changed: %s", d)
	}
}
