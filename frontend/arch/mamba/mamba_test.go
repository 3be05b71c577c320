package mamba

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/tapml/tapml/frontend/arch"
	"github.com/tapml/tapml/internal/testenv/llmtest"
	"github.com/tapml/tapml/ir"
)

var tiny = Config{Dim: 16, Inner: 32, State: 4, ConvKernel: 4, DtRank: 1, Layers: 2, Vocab: 50, NormEps: 1e-5,
	ConvBias: true, Bias: true, MaxSeq: 64, TiedEmbeddings: true}

// randomWeights: matrices in ±1/√(in), A_log as transformers initialises
// it (log 1..N), the rest in ±1.
func randomWeights(c Config) map[string]ir.WeightSource {
	r := rand.New(rand.NewPCG(7, 8))
	return arch.RandomWeights(c.WeightShapes(), func(ns arch.NamedShape) func() float64 {
		switch {
		case strings.HasSuffix(ns.Name, "A_log"):
			i := 0
			return func() float64 { i++; return math.Log(float64((i-1)%c.State + 1)) }
		case len(ns.Shape) >= 2:
			return arch.Symmetric(r, 1/math.Sqrt(float64(ns.Shape[len(ns.Shape)-1])))
		}
		return arch.Symmetric(r, 1)
	})
}

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		edit func(*Config)
		err  string
	}{
		{func(*Config) {}, ""},
		{func(c *Config) { c.ConvKernel = 1 }, "conv kernel 1"},
		{func(c *Config) { c.State = 0 }, "must be positive"},
		{func(c *Config) { c.NormEps = 0 }, "epsilon"},
	} {
		c := tiny
		tc.edit(&c)
		if err := c.Validate(); (err == nil) != (tc.err == "") || err != nil && !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%+v: %v, want %q", c, err, tc.err)
		}
	}
}

// The convolution's window and the scan's state carry the sequence: a
// prompt fed at once, or in parts and token by token, gives the same
// logits (prompts shorter than the window included). Prefill's matmuls
// (gonum's sgemm) and decode's may sum in other orders, so they may differ
// by rounding (1e-6 of the logits' scale); a state that lost or repeated a
// token moves them by 1e-2 and more.
func TestStateCarriesTheSequence(t *testing.T) {
	m, err := arch.Build("mamba", tiny, randomWeights(tiny))
	if err != nil {
		t.Fatal(err)
	}
	toks := []int{3, 14, 15, 9, 26, 5, 35}
	for _, first := range []int{1, 2, 5} {
		if e, at := llmtest.Chunked(t, m, toks, first); !(e <= 1e-6) {
			t.Errorf("prefill of %d, then decode: logits differ by %g (token %d)", first, e, at)
		}
	}
}
