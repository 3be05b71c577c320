package llama

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/tapml/tapml/frontend/arch"
	"github.com/tapml/tapml/internal/testenv/llmtest"
	"github.com/tapml/tapml/ir"
)

// tinyMoE is Tiny with q/k norms and a mixture of 4 experts (top 2, a
// shared expert) in layer 0; layer 1 stays dense.
func tinyMoE() Config {
	c := Tiny
	c.QKNorm = true
	c.MoE = &MoE{Experts: 4, TopK: 2, Hidden: 24, NormTopK: true, SharedHidden: 16, Dense: []int{1}}
	return c
}

func TestMoEValidate(t *testing.T) {
	for _, tc := range []struct {
		edit func(*MoE)
		err  string
	}{
		{func(*MoE) {}, ""},
		{func(m *MoE) { m.TopK = 5 }, "5 experts per token exceed the 4 experts"},
		{func(m *MoE) { m.Hidden = 0 }, "must be positive"},
		{func(m *MoE) { m.Dense = []int{1, 0} }, "must be increasing layer numbers below 2"},
		{func(m *MoE) { m.Dense = []int{2} }, "below 2"},
	} {
		c := tinyMoE()
		tc.edit(c.MoE)
		if err := c.Validate(); (err == nil) != (tc.err == "") || err != nil && !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%+v: %v, want %q", *c.MoE, err, tc.err)
		}
	}
}

// The mixture's layer reads the stacked experts through expert_matmul,
// the dense layer its SwiGLU, and both run: prefill then decode give the
// logits of prefill alone.
func TestMoEGraph(t *testing.T) {
	c := tinyMoE()
	shapes := map[string][]int{}
	for _, ns := range c.WeightShapes() {
		shapes[ns.Name] = ns.Shape
	}
	want := map[string][]int{
		"layers.0.moe.router": {4, 64}, "layers.0.moe.w1": {4, 24, 64}, "layers.0.moe.w2": {4, 64, 24}, "layers.0.moe.w3": {4, 24, 64},
		"layers.0.moe.shared.w1": {16, 64}, "layers.0.moe.shared.w2": {64, 16}, "layers.0.moe.shared_gate": {1, 64},
		"layers.0.attention.q_norm": {8}, "layers.1.feed_forward.w1": {172, 64},
		"layers.0.feed_forward.w1": nil, "layers.1.moe.w1": nil,
	}
	for name, w := range want {
		if diff := cmp.Diff(w, shapes[name]); diff != "" {
			t.Errorf("%s (-want +got):\n%s", name, diff)
		}
	}
	m, err := arch.Build("moe", c, RandomWeights(c, 9))
	if err != nil {
		t.Fatal(err)
	}
	count := map[ir.Op]int{}
	for _, n := range m.Func("decode").Nodes {
		count[n.Op]++
	}
	if count[ir.OpTopK] != 1 || count[ir.OpExpertMatmul] != 3 || count[ir.OpSigmoid] != 1 || count[ir.OpRMSNorm] != 2*2+2*2+1 {
		t.Errorf("decode has %d topk, %d expert_matmul, %d sigmoid, %d rms_norm", count[ir.OpTopK], count[ir.OpExpertMatmul], count[ir.OpSigmoid], count[ir.OpRMSNorm])
	}
	if !strings.Contains(m.Meta["config"], "qk_norm=true experts=4 top_k=2 expert_hidden=24 norm_topk=true shared_hidden=16 dense_layers=[1]") {
		t.Errorf("meta %q", m.Meta["config"])
	}
	toks := []int{5, 77, 200, 3}
	all := llmtest.NewRunner(t, m).Forward(t, toks)
	r := llmtest.NewRunner(t, m)
	r.Forward(t, toks[:2])
	r.Forward(t, toks[2:3])
	got := r.Forward(t, toks[3:])
	// Prefill's matmuls (gonum's sgemm) and decode's may sum in other
	// orders: 1e-6 of the logits' scale.
	if e, at := llmtest.RelErr(got, llmtest.Widen(all)); !(e <= 1e-6) {
		t.Errorf("prefill+decode differs from prefill by %g (token %d)", e, at)
	}
}
