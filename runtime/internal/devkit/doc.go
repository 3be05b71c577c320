// Package devkit is what tapml's devices share, so that each keeps only
// what is truly its own (the calls of wgpu, Metal, the wire protocol or
// the browser's WebGPU). Each part is a small type with one job:
//
//   - SizeClass and Pool: freed buffers kept by size class for reuse, up
//     to a budget, and drained between a device server's host sessions so
//     that no session reads another's data;
//   - Buf and Allocator: a device buffer shared by the runtime.Buffers that
//     alias it (a reshape is a view of its input's memory), freed when the
//     last one is, and the allocation of buffers through the pool;
//   - Handle, Handles, Wrap, Take, View: the runtime.Buffer side of those
//     handles (which device, freed or live, views);
//   - Batch: when recorded dispatches go to the GPU in one submission,
//     with the ramp that starts the GPU early after each wait;
//   - Stats: what a GPU device counts;
//   - StaticInputs, Prepare, PlanKey, Faults, NodeError: the checks and
//     caches every device repeats around its kernels;
//   - NumOutputs, CheckBindings, Allocator.Bind, Outputs: the buffers of a
//     launch of a kernel (inputs, in-place updates, new outputs);
//   - TypeSig, CheckTensor: the key of a list of types and the check of a
//     host tensor's size (also used by the CPU devices).
//
// Nothing here locks: each device serialises its methods on its own lock.
// The hot path of a launch (Handles, Allocator.Alloc on a pool hit, Bind,
// Batch.Add) makes no interface or indirect calls and allocates only the
// result slices and buffers a launch has always allocated.
package devkit
