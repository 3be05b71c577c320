package wgsl

import "github.com/tapml/tapml/codegen/fault"

// Options.Fault plants one of the test-only faults of codegen/fault in the
// kernel: that package's table says what each does and which ops' kernels
// take it. Generate returns an error when the fault does not apply to the
// node's op or to the kernel variant its shapes select. The generators
// name the faults by these aliases of the table's names.
const (
	FaultWrongIndex     = fault.WrongIndex
	FaultWrongConstant  = fault.WrongConstant
	FaultMissingBarrier = fault.MissingBarrier
	FaultF16Overflow    = fault.F16Overflow
)

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
