package main

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/tapml/tapml/codegen/spirv"
	"github.com/tapml/tapml/codegen/wgsl"
	"github.com/tapml/tapml/ir"
	"github.com/tapml/tapml/runtime/vulkan"
)

// Every op of every shape is a valid node, and the bytes are the weights'
// encoded size plus the activations: TinyLlama's o-proj in Q4_0 is
// 2048·2048/32 blocks of 18 bytes, x, the addend and the output 2048 f32
// each.
func TestGEMVOps(t *testing.T) {
	for _, m := range gemvModels {
		for _, dt := range []ir.DType{ir.F32, ir.F16, ir.Q4_0, ir.Q8_0} {
			for _, o := range m.ops(dt) {
				if _, _, err := ir.InferTypes(o.op, o.in, o.attrs); err != nil {
					t.Errorf("%s %s %s: %v", m.name, dt, o.name, err)
				}
			}
		}
	}
	o := gemvModels["tinyllama"].ops(ir.Q4_0)[1]
	outs, _, err := ir.InferTypes(o.op, o.in, o.attrs)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := o.bytes(outs), int64(2048*2048/32*18+3*2048*4); got != want {
		t.Errorf("%s bytes = %d, want %d", o.name, got, want)
	}
}

// randomStored's weights decode to finite values of moderate size (the
// outputs of a K = 8192 row stay far from f32's range): |v| <= 1 for
// f32, < 1/2 for f16, <= 128/64 for Q8_0 and 8/64 for Q4_0.
func TestRandomStored(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, c := range []struct {
		dt  ir.DType
		max float64
	}{{ir.F32, 1}, {ir.F16, 0.5}, {ir.Q8_0, 2}, {ir.Q4_0, 0.125}} {
		x, err := randomStored(r, ir.T(c.dt, ir.S(4, 64)))
		if err != nil {
			t.Fatal(err)
		}
		for i, v := range x.Convert(ir.F32).Float32s() {
			if math.IsNaN(float64(v)) || math.Abs(float64(v)) > c.max {
				t.Fatalf("%s: element %d is %g, want |v| <= %g", c.dt, i, v, c.max)
			}
		}
	}
}

// timeGEMV on the device (lavapipe here): a chain has a barrier before
// every call but the first, and a variant computes what the default does.
func TestMeasureGEMVOp(t *testing.T) {
	dev, err := vulkan.Open(vulkan.Options{Generate: spirv.Generate})
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	o := gemvModels["tiny"].ops(ir.Q4_0)[1]
	vs := []wgsl.GEMVVariant{{}, {Tuning: wgsl.Tuning{GEMVRowLanes: 8, GEMVRows: 8}}}
	const reps = 4
	res, bytes, err := measureGEMVOp(dev, dev.Tuning(), vs, o, reps)
	if err != nil {
		t.Fatal(err)
	}
	if bytes <= 0 || len(res) != len(vs) {
		t.Fatalf("%d bytes, %d results", bytes, len(res))
	}
	for _, g := range res {
		if g.err != "" || g.chain <= 0 || g.b2b <= 0 || g.barriers != float64(reps-1)/reps || g.relErr > 1e-5 {
			t.Errorf("%s: %+v", g.variant, g)
		}
	}
}
