package target

import (
	"testing"

	"github.com/tapml/tapml/codegen/fault"
	"github.com/tapml/tapml/codegen/wgsl"
	"github.com/tapml/tapml/internal/testenv/webgputest"
	"github.com/tapml/tapml/ir"
)

// Whether a fault applies is decided on the kernel the device generates,
// with its tuning: with the GPU tuning a GEMV reduces across a workgroup
// (so missing_barrier changes it); with the CPU drivers' default it does
// not.
func TestFaultAppliesUsesDeviceTuning(t *testing.T) {
	dev := webgputest.Device(t)
	prev := dev.Tuning()
	defer dev.SetTuning(prev)
	m := ir.NewModule("m")
	b := ir.NewFunction(m, "f")
	x := b.Param("x", ir.T(ir.F32, ir.S(1, 64)))
	w := b.Param("w", ir.T(ir.F32, ir.S(32, 64)))
	y := b.Op(ir.OpMatmul, []*ir.Value{x, w}, ir.Attrs{"transpose_b": ir.BoolAttr(true)})
	b.Return(y)
	if err := b.Err(); err != nil {
		t.Fatal(err)
	}
	in, out := []ir.Type{x.Type, w.Type}, []ir.Type{y.Type}
	dev.SetTuning(wgsl.DiscreteTuning())
	if err := FaultApplies("webgpu", dev, y.Def, in, out, fault.MissingBarrier); err != nil {
		t.Errorf("GPU tuning: %v, want the fault to apply", err)
	}
	dev.SetTuning(wgsl.Tuning{GEMVLanes: 1})
	if err := FaultApplies("webgpu", dev, y.Def, in, out, fault.MissingBarrier); err == nil {
		t.Error("one lane per output: missing_barrier applies, want an error (no barrier to drop)")
	}
}
