package wgsl

import "sort"

// Faults are deliberate bugs Generate injects into a kernel when
// Options.Fault names one. They exist only so that tests of the carving and
// migration tools can plant a known culprit in one node and check that the
// tools find it. Generate returns an error when the fault does not apply to
// the node's op (or to the kernel variant its shapes select).
//
//   - wrong_index: an off-by-one in an index. Elementwise ops, cast, copies
//     (reshape, probe, transfer), transpose, slice and concat read the
//     source element after the right one (the last reads past the end and
//     gets WGSL's bounds-checked value); constant shifts its values by one;
//     gather reads the row of id+1; matmul reads b one k further; rms_norm,
//     layer_norm and softmax read x[i+1] in their reductions; argmax scans
//     from element 1 (never returning 0); rope rotates pair i by the angle of
//     pair i+1; kv_write writes rows pos+1..; attention reads key row t+1;
//     topk scans from element 1; expert_matmul reads expert id+1 (mod E);
//     token_shift reads the row after; causal_conv1d reads tap j+1,
//     selective_scan B[n+1] (both clamped); wkv reads k of the next row.
//   - wrong_constant: a constant perturbed. rms_norm and layer_norm use
//     eps·1000 (plus 1e-3); rope uses theta·1.1 (with a freqs table, its
//     frequencies ·1.1); attention uses scale·1.1;
//     constant adds 1 to its values; gelu uses 0.05 for 0.044715;
//     fused_elementwise multiplies its first float constant by 1.1.
//   - missing_barrier: drops a workgroupBarrier() in kernels that share
//     workgroup memory: the one after the tiles are loaded (tiled matmul),
//     after the scores are written (attention), after the partial results
//     are written, before each tree reduction (GEMV when it reduces across
//     lanes, rms_norm, layer_norm, softmax, argmax). The result is then a
//     data race: wrong on most devices (lavapipe too, in the tests), but it
//     may happen to be right where a workgroup's invocations run in
//     lockstep.
//   - f16_overflow: every float intermediate whose magnitude exceeds 65504
//     (the largest f16) becomes ±inf, as it would in an f16 kernel:
//     elementwise results, matmul, expert_matmul and attention
//     accumulators, norm sums of squares, softmax sums, rope outputs,
//     causal_conv1d sums, wkv's outputs and state, selective_scan's state
//     and sums.
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

func knownFault(f string) bool {
	for _, n := range FaultNames() {
		if n == f {
			return true
		}
	}
	return false
}

// f16Helper declares ov(), the f16_overflow fault's filter, when the kernel
// injects that fault, and returns the name to wrap float intermediates in
// ("" when the fault is off: wrap returns its argument).
func (g *gen) f16Helper() {
	if g.fault == FaultF16Overflow {
		g.p("fn ov(v: f32) -> f32 { return select(v, sign(v) * f32_bits(0x7f800000u), abs(v) > 65504.0f); }")
	}
}

// ov wraps a float expression in the f16_overflow filter when that fault is
// injected.
func (g *gen) ov(expr string) string {
	if g.faultIs(FaultF16Overflow) {
		return "ov(" + expr + ")"
	}
	return expr
}
