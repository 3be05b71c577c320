package gpt2

import (
	"math"
	"strings"
	"testing"

	"github.com/tapml/tapml/frontend/arch"
	"github.com/tapml/tapml/internal/testenv/llmtest"
	"github.com/tapml/tapml/ir"
)

var tiny = Config{Dim: 32, Inner: 64, Layers: 2, Heads: 4, Vocab: 50, Positions: 24, MaxSeq: 16, NormEps: 1e-5}

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		edit func(*Config)
		err  string
	}{
		{func(*Config) {}, ""},
		{func(c *Config) { c.Heads = 5 }, "not a multiple of n_head"},
		{func(c *Config) { c.MaxSeq = 25 }, "exceeds the 24 positions"},
		{func(c *Config) { c.NormEps = 0 }, "epsilon"},
		{func(c *Config) { c.Inner = 0 }, "must be positive"},
	} {
		c := tiny
		tc.edit(&c)
		err := c.Validate()
		if (err == nil) != (tc.err == "") || err != nil && !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%+v: Validate() = %v, want %q", c, err, tc.err)
		}
	}
	if _, err := arch.Build("x", tiny, map[string]ir.WeightSource{}); err == nil || !strings.Contains(err.Error(), `missing weight "wte.weight"`) {
		t.Errorf("Build without weights: %v", err)
	}
}

// TestPrefillMatchesDecode: the logits after a prefill of n tokens equal
// those after n single decode steps (position embeddings through iota,
// causal attention and the caches agree), to f32 rounding.
func TestPrefillMatchesDecode(t *testing.T) {
	m, err := arch.Build("tiny", tiny, RandomWeights(tiny, 1))
	if err != nil {
		t.Fatal(err)
	}
	if m.Meta["arch"] != "gpt2" {
		t.Errorf("meta %v", m.Meta)
	}
	iotas := 0
	for _, n := range m.Func("prefill").Nodes {
		if n.Op == ir.OpIota {
			iotas++
		}
		if n.Op == ir.OpMatmul && n.Attrs.Bool("transpose_b") != (n.Prov == "lm_head") {
			t.Errorf("%s: transpose_b %v", n, n.Attrs.Bool("transpose_b"))
		}
	}
	if iotas != 1 {
		t.Errorf("%d iota nodes", iotas)
	}
	// Each node is at the provenance of what it computes (the residual adds
	// and the GELU once carried the projection's before them).
	ops := map[string]string{}
	for _, n := range m.Func("decode").Nodes {
		ops[n.Prov] += n.Op.String() + " "
	}
	for prov, want := range map[string]string{"h.1.attn.residual": "add ", "h.1.mlp.gelu": "gelu ", "h.1.mlp.residual": "add ",
		"h.1.attn.c_proj": "matmul add ", "h.1.mlp.c_fc": "matmul add ", "embeddings": "add "} {
		if ops[prov] != want {
			t.Errorf("nodes at %s: %q, want %q", prov, ops[prov], want)
		}
	}
	toks := []int{3, 14, 15, 9, 26, 5}
	ra, rb := llmtest.NewRunner(t, m), llmtest.NewRunner(t, m)
	want := ra.Forward(t, toks)
	var got []float32
	for _, tok := range toks {
		got = rb.Forward(t, []int{tok})
	}
	for i := range want {
		if d := math.Abs(float64(want[i] - got[i])); d > 1e-5 {
			t.Fatalf("logit %d: prefill %g, decode %g", i, want[i], got[i])
		}
	}
	// The next step continues the same way from either.
	a, b := ra.Forward(t, []int{7}), rb.Forward(t, []int{7})
	for i := range a {
		if d := math.Abs(float64(a[i] - b[i])); d > 1e-5 {
			t.Fatalf("next step, logit %d: %g vs %g", i, a[i], b[i])
		}
	}
}

// TestBigCodeSplitsAtLoad: GPTBigCode's c_attn (nn.Linear, out×in) is
// split at load into the layers q, k and v, views of its rows; with one
// key/value head, k and v are one head wide.
func TestBigCodeSplitsAtLoad(t *testing.T) {
	c := tiny
	c.KVHeads, c.Linear = 1, true
	m, err := arch.Build("bigcode", c, RandomWeights(c, 2))
	if err != nil {
		t.Fatal(err)
	}
	for name, typ := range map[string]string{
		"h.0.attn.q.weight": "f32[32, 32]", "h.0.attn.k.weight": "f32[8, 32]", "h.0.attn.v.weight": "f32[8, 32]",
		"h.0.attn.q.bias": "f32[32]", "h.0.attn.k.bias": "f32[8]", "h.0.attn.v.bias": "f32[8]",
	} {
		if w := m.Weight(name); w == nil || w.Type.String() != typ {
			t.Errorf("weight %s: %v, want %s", name, w, typ)
		}
	}
	for _, name := range []string{"h.0.attn.c_attn.weight", "h.0.attn.c_attn.bias"} {
		if m.Weight(name) != nil {
			t.Errorf("the fused %s is in the module", name)
		}
	}
}
