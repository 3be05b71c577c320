package llama

import (
	"math"
	"math/rand/v2"
	"strings"

	"github.com/tapml/tapml/frontend/arch"
	"github.com/tapml/tapml/ir"
)

// RandomWeights returns deterministic random f32 weights for c: linear and
// embedding weights uniform in ±1/√(in), norm weights 1, q/k/v biases
// (QKVBias) uniform in ±1/√(dim). The same seed gives the same bytes on
// every machine (math/rand/v2's PCG).
func RandomWeights(c Config, seed uint64) map[string]ir.WeightSource {
	r := rand.New(rand.NewPCG(seed, 0x7461706d6c)) // "tapml"
	return arch.RandomWeights(c.WeightShapes(), func(ns arch.NamedShape) func() float64 {
		switch {
		case isBias(ns.Name):
			return arch.Symmetric(r, 1/math.Sqrt(float64(c.Dim)))
		case len(ns.Shape) == 1:
			return arch.Constant(1)
		}
		return arch.Symmetric(r, 1/math.Sqrt(float64(ns.Shape[len(ns.Shape)-1])))
	})
}

// isBias reports whether a weight name is one of the q/k/v biases.
func isBias(name string) bool {
	return strings.HasSuffix(name, ".attention.bq") || strings.HasSuffix(name, ".attention.bk") ||
		strings.HasSuffix(name, ".attention.bv")
}

// Tiny is the configuration of the built-in model that `tapmlc run` uses
// when no model is given: small enough to build in milliseconds, shaped like
// a real LLaMA (GQA, SwiGLU) over a byte-level vocabulary.
var Tiny = Config{Dim: 64, HiddenDim: 172, Layers: 2, Heads: 8, KVHeads: 4, Vocab: 259, MaxSeq: 256,
	NormEps: 1e-5, RopeTheta: 10000, RopeStyle: "interleaved", TiedEmbeddings: true}

// Stories15M is the shape of llama2.c's stories15M (vocab 32000), used by
// benchmarks with random weights.
var Stories15M = Config{Dim: 288, HiddenDim: 768, Layers: 6, Heads: 6, KVHeads: 6, Vocab: 32000, MaxSeq: 256,
	NormEps: 1e-5, RopeTheta: 10000, RopeStyle: "interleaved", TiedEmbeddings: true}

// TinyLlama is the shape of TinyLlama-1.1B, used by GPU benchmarks.
var TinyLlama = Config{Dim: 2048, HiddenDim: 5632, Layers: 22, Heads: 32, KVHeads: 4, Vocab: 32000, MaxSeq: 2048,
	NormEps: 1e-5, RopeTheta: 10000, RopeStyle: "half", TiedEmbeddings: false}
