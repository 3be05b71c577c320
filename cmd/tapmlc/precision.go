package main

import (
	"github.com/spf13/pflag"
	"github.com/tapml/tapml/ir"
	"github.com/tapml/tapml/runtime"
)

// precisionFlags are --compute and --accumulate, which run, carve, compile
// and migrate share (carve, which runs only the reference, takes
// --compute alone).
type precisionFlags struct{ p runtime.Precision }

func (pf *precisionFlags) register(f *pflag.FlagSet, accumulate bool) {
	pf.p = runtime.F32
	f.Var(dtypeValue{&pf.p.Compute}, "compute", "dtype of activations and the KV cache on the target: f32 or f16 (f16 storage, f32 arithmetic; "+
		"vulkan where the device has shaderFloat16, metal (macOS), remote where the device has shader-f16, cpu as the reference's emulation of it; "+
		"other targets say so and compute in f32)")
	if !accumulate {
		return
	}
	f.Var(dtypeValue{&pf.p.Accumulate}, "accumulate", "dtype of attention's score and softmax-sum accumulators on the target: f32 or f16 "+
		"(f16 is what a careless port does; it overflows where a score passes 65504)")
}

// dtypeValue is a flag value that takes f32 or f16.
type dtypeValue struct{ dt *ir.DType }

func (v dtypeValue) String() string {
	if v.dt == nil || *v.dt == ir.Invalid {
		return "f32"
	}
	return v.dt.String()
}

func (v dtypeValue) Set(s string) error {
	dt, err := runtime.ParsePrecisionDType(s)
	if err != nil {
		return err
	}
	*v.dt = dt
	return nil
}

func (dtypeValue) Type() string { return "dtype" }
