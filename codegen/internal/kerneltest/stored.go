package kerneltest

import "github.com/tapml/tapml/ir"

// StoredCases are the kernels that read weights in storage dtypes:
// dequantize, gather and the matmul variants (GEMV, vec4 or scalar, and
// the tiled kernels) over every block format and f16/bf16, with shapes
// whose rows are one block, several, or not whole units (f16).
func StoredCases() []Case {
	tr := ir.Attrs{"transpose_b": ir.BoolAttr(true)}
	t := func(dt ir.DType, s ...int64) ir.Type { return ir.T(dt, ir.S(s...)) }
	var cs []Case
	for _, dt := range ir.BlockDTypes {
		e, _ := dt.Block()
		k := int64(2 * e)
		cs = append(cs,
			Case{"dequantize_" + dt.String(), ir.OpDequantize, nil, []ir.Type{t(dt, 3, k)}},
			Case{"gemv_t_" + dt.String(), ir.OpMatmul, tr, []ir.Type{F32(1, k), t(dt, 20, k)}},
		)
	}
	return append(cs,
		Case{"dequantize_f16", ir.OpDequantize, nil, []ir.Type{t(ir.F16, 5, 7)}},
		Case{"dequantize_bf16", ir.OpDequantize, nil, []ir.Type{t(ir.BF16, 3, 8)}},
		Case{"gather_q4_0", ir.OpGather, nil, []ir.Type{t(ir.Q4_0, 40, 64), I32(3)}},
		Case{"gather_q6_k", ir.OpGather, nil, []ir.Type{t(ir.Q6_K, 10, 256), I32(2, 2)}},
		Case{"gather_f16_rows", ir.OpGather, nil, []ir.Type{t(ir.F16, 9, 6), I32(4)}},
		Case{"gather_bf16_axis1", ir.OpGather, ir.Attrs{"axis": ir.IntAttr(1)}, []ir.Type{t(ir.BF16, 2, 9, 8), I32(3)}},
		Case{"gemv_t_f16_scalar", ir.OpMatmul, tr, []ir.Type{F32(1, 37), t(ir.F16, 20, 37)}},
		Case{"gemv_t_bf16", ir.OpMatmul, tr, []ir.Type{F32(1, 64), t(ir.BF16, 10, 64)}},
		Case{"gemv_t_q8_0_batch", ir.OpMatmul, tr, []ir.Type{F32(3, 1, 1, 64), t(ir.Q8_0, 2, 10, 64)}},
		Case{"tiled_q4_0", ir.OpMatmul, tr, []ir.Type{F32(2, 37, 64), t(ir.Q4_0, 33, 64)}},
		Case{"tiled_q4_k_small_m", ir.OpMatmul, tr, []ir.Type{F32(5, 256), t(ir.Q4_K, 12, 256)}},
		Case{"tiled_f16", ir.OpMatmul, tr, []ir.Type{F32(20, 45), t(ir.F16, 33, 45)}},
		// The shape the vec4 tiled kernel takes when a tuning selects it.
		Case{"tiled_vec_t_q8_0", ir.OpMatmul, tr, []ir.Type{F32(130, 64), t(ir.Q8_0, 36, 64)}},
		Case{"tiled_vec_t_f16", ir.OpMatmul, tr, []ir.Type{F32(130, 64), t(ir.F16, 36, 64)}},
	)
}
