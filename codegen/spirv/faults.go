package spirv

import (
	"slices"
	"sort"
)

// Faults are deliberate bugs Generate injects into a kernel when
// Options.Fault names one, the same as the WGSL generator's. They exist
// only so that tests of the carving and migration tools can plant a known
// culprit in one node and check that the tools find it. Generate returns an
// error when the fault does not apply to the node's op.
//
//   - wrong_index: an off-by-one in an index. Elementwise ops, cast, copies
//     (reshape, probe, transfer), transpose, slice and concat read the
//     source element after the right one (clamped to the last element);
//     constant shifts its values by one; gather reads the row of id+1;
//     matmul reads b one k further; rms_norm, layer_norm and softmax read
//     x[i+1] in their reductions; argmax scans from element 1; rope rotates
//     pair i by the angle of pair i+1; kv_write writes rows pos+1..;
//     attention reads key row t+1; iota counts from index 1; conv2d,
//     conv_transpose2d and pool2d read the pixel right of the tap; resize
//     samples the column right of the source; the reductions over axes
//     read the next output's elements.
//   - wrong_constant: a constant perturbed. rms_norm and layer_norm use
//     eps·1000 (plus 1e-3); rope uses theta·1.1; attention uses scale·1.1;
//     constant adds 1 to its values; gelu uses 0.05 for 0.044715;
//     fused_elementwise multiplies its first float constant by 1.1.
//   - missing_barrier: drops the first barrier of kernels that use
//     workgroup memory: rms_norm, layer_norm, softmax, argmax, attention.
//     The result is a data race: wrong on most GPUs, possibly right on CPU
//     drivers that run a workgroup in lockstep.
//   - f16_overflow: float intermediates whose magnitude exceeds 65504 (the
//     largest f16) become ±inf, as in an f16 kernel: elementwise results,
//     matmul, convolution and attention accumulators, norm sums of squares,
//     softmax and reduce_sum/reduce_mean sums, rope outputs.
const (
	FaultWrongIndex     = "wrong_index"
	FaultWrongConstant  = "wrong_constant"
	FaultMissingBarrier = "missing_barrier"
	FaultF16Overflow    = "f16_overflow"
)

// FaultNames lists the faults Generate can inject, sorted.
func FaultNames() []string {
	n := []string{FaultWrongIndex, FaultWrongConstant, FaultMissingBarrier, FaultF16Overflow}
	sort.Strings(n)
	return n
}

func knownFault(f string) bool { return slices.Contains(FaultNames(), f) }
