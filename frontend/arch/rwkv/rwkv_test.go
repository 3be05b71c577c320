package rwkv

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/tapml/tapml/frontend/arch"
	"github.com/tapml/tapml/internal/testenv/llmtest"
	"github.com/tapml/tapml/ir"
)

var tiny = Config{Dim: 16, Inner: 40, Layers: 3, Vocab: 50, NormEps: 1e-5, MaxSeq: 64}

// randomWeights: matrices in ±1/√(in), layer norms near 1, time mixes in
// [0, 1], decays and bonuses in ±1.
func randomWeights(c Config) map[string]ir.WeightSource {
	r := rand.New(rand.NewPCG(5, 6))
	return arch.RandomWeights(c.WeightShapes(), func(ns arch.NamedShape) func() float64 {
		switch {
		case strings.Contains(ns.Name, "time_mix"):
			return arch.Uniform(r, 0, 1)
		case strings.HasSuffix(ns.Name, "ln1.weight") || strings.HasSuffix(ns.Name, "ln2.weight"):
			return arch.Uniform(r, 0.5, 1.5)
		case len(ns.Shape) == 2:
			return arch.Symmetric(r, 1/math.Sqrt(float64(ns.Shape[1])))
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
		{func(c *Config) { c.Inner = 0 }, "must be positive"},
		{func(c *Config) { c.NormEps = math.Inf(1) }, "epsilon"},
		{func(c *Config) { c.RescaleEvery = -1 }, "rescale_every"},
	} {
		c := tiny
		tc.edit(&c)
		if err := c.Validate(); (err == nil) != (tc.err == "") || err != nil && !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%+v: %v, want %q", c, err, tc.err)
		}
	}
}

// The state carries the sequence: a prompt fed at once, or in parts and
// token by token, gives the same logits. Prefill's matmuls (gonum's sgemm)
// and decode's may sum in other orders, so they may differ by rounding
// (1e-6 of the logits' scale); a state that lost or repeated a token
// moves them by 1e-2 and more.
func TestStateCarriesTheSequence(t *testing.T) {
	m, err := arch.Build("rwkv", tiny, randomWeights(tiny))
	if err != nil {
		t.Fatal(err)
	}
	toks := []int{3, 14, 15, 9, 26, 5, 35}
	if e, at := llmtest.Chunked(t, m, toks, 3); !(e <= 1e-6) {
		t.Errorf("chunked run differs by %g (token %d)", e, at)
	}
}

// transformers' rescaling (halve the hidden states every RescaleEvery
// layers, divide the output projections to match) is a change of scale
// that the layer norms undo, up to their epsilon: the logits barely move.
func TestRescale(t *testing.T) {
	toks := []int{1, 2, 3, 4}
	w := randomWeights(tiny)
	m0, err := arch.Build("rwkv", tiny, w)
	if err != nil {
		t.Fatal(err)
	}
	c := tiny
	c.RescaleEvery = 1
	m1, err := arch.Build("rwkv", c, w)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(ir.Text(m1), `loc("blocks.1.rescale")`) || strings.Contains(ir.Text(m0), `rescale")`) {
		t.Fatal("the rescaled graph has no rescale nodes, or the plain one has")
	}
	want := llmtest.NewRunner(t, m0).Forward(t, toks)
	got := llmtest.NewRunner(t, m1).Forward(t, toks)
	if e, _ := llmtest.RelErr(got, llmtest.Widen(want)); !(e < 1e-3) || e == 0 {
		t.Errorf("rescaled logits differ by %g, want a little (layer norm epsilon) and below 1e-3", e)
	}
}
