package ir

import "strconv"

// Op identifies an op of the registry. It is a small integer rather than a
// string so that the compiler checks every op a program names: code writes
// ir.OpMatmul, a misspelt constant does not compile, and an untyped string
// literal ("matmul") does not convert to Op (it would to a `type Op string`).
// Switches and map literals keyed by Op have their duplicates caught at
// compile time, and the registry is an array indexed by Op.
//
// The constants are declared in the order of their names, so comparing two
// Ops compares their names (TestOpsInNameOrder keeps it so). The text form,
// test bundles, reports and the CLI use the names: String and OpNamed
// convert.
type Op uint8

const (
	OpNone Op = iota // no op: the zero Op (an Expr leaf, an unset Node)
	OpAbs
	OpAdd
	OpArgmax
	OpAttention
	OpCast
	OpCausalConv1D
	OpCompare
	OpConcat
	OpConstant
	OpConv2D
	OpConvTranspose2D
	OpDequantize
	OpDiv
	OpErf
	OpExp
	OpExpertMatmul
	OpFusedElementwise
	OpGather
	OpGelu
	OpIota
	OpKVWrite
	OpLayerNorm
	OpLog
	OpMatmul
	OpMaximum
	OpMinimum
	OpMul
	OpNeg
	OpPool2D
	OpPow
	OpProbe
	OpReduceMax
	OpReduceMean
	OpReduceSum
	OpRelu
	OpReshape
	OpResize
	OpRMSNorm
	OpRMSNormMatmul
	OpRMSNormQKV
	OpRMSNormSwiGLU
	OpRope
	OpRopeKVWrite
	OpRsqrt
	OpSelectiveScan
	OpSigmoid
	OpSilu
	OpSlice
	OpSoftmax
	OpSoftplus
	OpSqrt
	OpSub
	OpTanh
	OpTokenShift
	OpTopK
	OpTransfer
	OpTranspose
	OpWhere
	OpWKV

	numOps // the number of Ops, OpNone included
)

// opNames are the ops' names, as the text form writes them.
var opNames = [numOps]string{
	OpAbs:              "abs",
	OpAdd:              "add",
	OpArgmax:           "argmax",
	OpAttention:        "attention",
	OpCast:             "cast",
	OpCausalConv1D:     "causal_conv1d",
	OpCompare:          "compare",
	OpConcat:           "concat",
	OpConstant:         "constant",
	OpConv2D:           "conv2d",
	OpConvTranspose2D:  "conv_transpose2d",
	OpDequantize:       "dequantize",
	OpDiv:              "div",
	OpErf:              "erf",
	OpExp:              "exp",
	OpExpertMatmul:     "expert_matmul",
	OpFusedElementwise: "fused_elementwise",
	OpGather:           "gather",
	OpGelu:             "gelu",
	OpIota:             "iota",
	OpKVWrite:          "kv_write",
	OpLayerNorm:        "layer_norm",
	OpLog:              "log",
	OpMatmul:           "matmul",
	OpMaximum:          "maximum",
	OpMinimum:          "minimum",
	OpMul:              "mul",
	OpNeg:              "neg",
	OpPool2D:           "pool2d",
	OpPow:              "pow",
	OpProbe:            "probe",
	OpReduceMax:        "reduce_max",
	OpReduceMean:       "reduce_mean",
	OpReduceSum:        "reduce_sum",
	OpRelu:             "relu",
	OpReshape:          "reshape",
	OpResize:           "resize",
	OpRMSNorm:          "rms_norm",
	OpRMSNormMatmul:    "rms_norm_matmul",
	OpRMSNormQKV:       "rms_norm_qkv",
	OpRMSNormSwiGLU:    "rms_norm_swiglu",
	OpRope:             "rope",
	OpRopeKVWrite:      "rope_kv_write",
	OpRsqrt:            "rsqrt",
	OpSelectiveScan:    "selective_scan",
	OpSigmoid:          "sigmoid",
	OpSilu:             "silu",
	OpSlice:            "slice",
	OpSoftmax:          "softmax",
	OpSoftplus:         "softplus",
	OpSqrt:             "sqrt",
	OpSub:              "sub",
	OpTanh:             "tanh",
	OpTokenShift:       "token_shift",
	OpTopK:             "topk",
	OpTransfer:         "transfer",
	OpTranspose:        "transpose",
	OpWhere:            "where",
	OpWKV:              "wkv",
}

// opsByName maps each name back to its Op.
var opsByName = func() map[string]Op {
	m := make(map[string]Op, numOps)
	for op := OpNone + 1; op < numOps; op++ {
		m[opNames[op]] = op
	}
	return m
}()

// String returns the op's name ("<none>" for OpNone, which has none).
func (o Op) String() string {
	if o == OpNone {
		return "<none>"
	}
	if o < numOps {
		return opNames[o]
	}
	return "Op(" + strconv.Itoa(int(o)) + ")"
}

// OpNamed returns the op of the given name; ok is false when no op has it.
func OpNamed(name string) (op Op, ok bool) {
	op, ok = opsByName[name]
	return op, ok
}
