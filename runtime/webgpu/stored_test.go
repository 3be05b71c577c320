package webgpu

import (
	"math/rand/v2"

	"github.com/tapml/tapml/internal/testenv/storedtest"
	"github.com/tapml/tapml/ir"
	"github.com/tapml/tapml/tensor"
)

func storedW(dt ir.DType, shape ...int) func(r *rand.Rand) *tensor.Tensor {
	return func(r *rand.Rand) *tensor.Tensor { return storedtest.Tensor(r, dt, shape...) }
}

// storedOpCases read weights in storage dtypes: the decoding is exact
// (each product of a scale and a quantized integer fits f32, one add
// rounds), so dequantize and gather must give the reference's bits, and a
// matmul over a stored weight has the f32 matmul's tolerance. The GEMVs
// take every way of reading a weight without subgroups (runs of whole
// blocks, eight f16, units of four, single elements; codegen/wgsl's
// gemvKinds) and the fused norms' staged activations.
func storedOpCases() []opCase {
	tb := ir.Attrs{"transpose_b": ir.BoolAttr(true)}
	var cs []opCase
	for _, dt := range ir.StorageDTypes {
		e, _ := dt.Block()
		k := 2 * max(e, 32)
		cs = append(cs,
			opCase{name: "dequantize " + dt.String(), op: ir.OpDequantize, gen: ins(storedW(dt, 3, k)), tol: exact},
			opCase{name: "gemv " + dt.String(), op: ir.OpMatmul, attrs: tb, gen: ins(f32s(-1, 1, 1, k), storedW(dt, 21, k)), tol: mmTol(k)},
			opCase{name: "rms_norm_swiglu rows " + dt.String(), op: ir.OpRMSNormSwiGLU,
				gen: ins(f32s(-1, 1, 2, k), f32s(-1, 1, k), storedW(dt, 11, k), storedW(dt, 11, k)), tol: swigluTol(k)},
		)
	}
	return append(cs,
		opCase{name: "gather q4_k", op: ir.OpGather, gen: ins(storedW(ir.Q4_K, 12, 256), ids(0, 12, 5)), tol: exact},
		opCase{name: "gather f16 rows of 6", op: ir.OpGather, gen: ins(storedW(ir.F16, 9, 6), ids(0, 9, 4)), tol: exact},
		opCase{name: "gemv f16 scalar", op: ir.OpMatmul, attrs: tb, gen: ins(f32s(-1, 1, 1, 37), storedW(ir.F16, 20, 37)), tol: mmTol(37)},
		opCase{name: "gemv q4_0 odd blocks", op: ir.OpMatmul, attrs: tb, gen: ins(f32s(-1, 1, 1, 96), storedW(ir.Q4_0, 13, 96)), tol: mmTol(96)},
		opCase{name: "gemv f16 k%8=4", op: ir.OpMatmul, attrs: tb, gen: ins(f32s(-1, 1, 1, 36), storedW(ir.F16, 13, 36)), tol: mmTol(36)},
		opCase{name: "rms_norm_qkv q4_0 q8_0 f16", op: ir.OpRMSNormQKV, gen: ins(f32s(-1, 1, 2, 64), f32s(-1, 1, 64),
			storedW(ir.Q4_0, 9, 64), storedW(ir.Q8_0, 5, 64), storedW(ir.F16, 5, 64)), tol: mmTol(64)},
		opCase{name: "tiled q4_0", op: ir.OpMatmul, attrs: tb, gen: ins(f32s(-1, 1, 2, 37, 64), storedW(ir.Q4_0, 33, 64)), tol: mmTol(64)},
		opCase{name: "tiled q5_k small m", op: ir.OpMatmul, attrs: tb, gen: ins(f32s(-1, 1, 5, 256), storedW(ir.Q5_K, 12, 256)), tol: mmTol(256)},
		opCase{name: "tiled bf16", op: ir.OpMatmul, attrs: tb, gen: ins(f32s(-1, 1, 20, 45), storedW(ir.BF16, 33, 45)), tol: mmTol(45)},
	)
}
