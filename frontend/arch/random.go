package arch

import (
	"math/rand/v2"

	"github.com/tapml/tapml/ir"
)

// RandomWeights returns f32 weights for ws (tests, benchmarks and the
// built-in model): gen gives, for each weight, the function that draws its
// elements one by one. Weights are drawn in the order of ws, so one seeded
// source gives the same bytes on every machine.
func RandomWeights(ws []NamedShape, gen func(NamedShape) func() float64) map[string]ir.WeightSource {
	out := map[string]ir.WeightSource{}
	for _, ns := range ws {
		n := 1
		for _, d := range ns.Shape {
			n *= d
		}
		next := gen(ns)
		xs := make([]float32, n)
		for i := range xs {
			xs[i] = float32(next())
		}
		out[ns.Name] = ir.BytesSource(f32Bytes(xs))
	}
	return out
}

// Uniform draws from r uniformly in [lo, hi).
func Uniform(r *rand.Rand, lo, hi float64) func() float64 {
	return func() float64 { return lo + (hi-lo)*r.Float64() }
}

// Symmetric draws from r uniformly in ±bound, as (2u-1)·bound.
func Symmetric(r *rand.Rand, bound float64) func() float64 {
	return func() float64 { return (2*r.Float64() - 1) * bound }
}

// Constant returns v for every element, drawing nothing.
func Constant(v float64) func() float64 { return func() float64 { return v } }
