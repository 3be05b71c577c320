// Package cpu is tapml's reference device: every op of the ir registry,
// computed on the host in float32 with float32 accumulation. It is the
// oracle the other targets are compared with, so it is plain and exact
// about its arithmetic:
//
//   - Sums run in float32. Where llama2.c's run.c has the op (rmsnorm,
//     softmax, RoPE, attention, SwiGLU's silu) the kernel does run.c's
//     operations in run.c's order. Products that feed a sum are rounded
//     explicitly so no compiler fuses them into an FMA.
//   - Transcendentals (exp, log, tanh, pow, cos, sin) are computed in
//     float64 and rounded to float32, within an ulp of C's expf & co.
//   - Matrix products run on gonum's blas32 in small tiles that keep gonum
//     on its serial path: every output element is one f32 dot product over
//     K (see matmul.go). With attention, RoPE and the norms working row
//     by row, an output row's bits do not depend on how many rows are
//     computed with it: prefill of N tokens and N decode steps agree bit
//     for bit.
//   - Results are deterministic: big loops are split over goroutines, but
//     each output element is computed by exactly one of them with the same
//     code, so the bits do not depend on the split (nor on GOMAXPROCS, nor
//     on where the allocator put the operands). They can differ between
//     architectures, as gonum's assembly and C's libm do.
//
// Dtypes each op supports (f16 and bf16 inputs of arithmetic ops are
// widened to f32, the op runs in f32, and the result is rounded once to the
// output dtype):
//
//	neg abs relu add sub mul maximum minimum   f32 f16 bf16 i32 i64
//	other unary and binary ops, fused_elementwise,
//	matmul rms_norm layer_norm softmax rope attention   f32 f16 bf16
//	argmax                                     f32 f16 bf16 i32 i64 (-> i32)
//	conv2d conv_transpose2d pool2d resize
//	reduce_sum reduce_mean reduce_max          f32 f16 bf16 (see conv.go)
//	iota                                       i32 start -> i32
//	constant cast                              f32 f16 bf16 i32 i64 bool
//	gather                                     any table dtype; ids i32 or i64
//	kv_write reshape transpose slice concat probe transfer   any dtype
//
// pos inputs (rope, kv_write, attention) are i32 scalars.
//
// Buffers. A Buffer's Handle is a *tensor.Tensor. Upload wraps the caller's
// tensor without copying it: the caller must not modify it afterwards, and
// a kv_write on it updates it in place. Download returns a copy, so later
// in-place updates never change a tensor a caller has downloaded. Outputs
// of reshape share memory with their input; probe, transfer and kv_write
// return their input buffer itself.
package cpu
