package gemma

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/tapml/tapml/frontend/arch"
	"github.com/tapml/tapml/frontend/arch/llama"
	"github.com/tapml/tapml/ir"
)

// Gemma 2's block: four (1+w) norms per layer, the scaled embedding and
// soft-capped logits; Gemma 1 has LLaMA's two norms and no cap.
func TestBlocks(t *testing.T) {
	base := llama.Tiny
	base.RopeStyle, base.TiedEmbeddings = "half", true
	for _, tc := range []struct {
		name  string
		c     Config
		norms int // rms_norm nodes per function
		tanh  bool
	}{
		{"gemma", Config{Config: base}, 2*base.Layers + 1, false},
		{"gemma2", Config{Config: base, PostNorms: true, FinalSoftcap: 30}, 4*base.Layers + 1, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ws := tc.c.WeightShapes()
			names := map[string]bool{}
			for _, ns := range ws {
				names[ns.Name] = true
			}
			if names["layers.1.post_ffn_norm"] != tc.c.PostNorms || names["layers.0.post_attention_norm"] != tc.c.PostNorms {
				t.Errorf("post norm weights: %v", names)
			}
			r := rand.New(rand.NewPCG(1, 2))
			m, err := arch.Build(tc.name, tc.c, arch.RandomWeights(ws, func(arch.NamedShape) func() float64 { return arch.Symmetric(r, 0.1) }))
			if err != nil {
				t.Fatal(err)
			}
			norms, tanh, gelu := 0, false, 0
			for _, n := range m.Func("decode").Nodes {
				switch n.Op {
				case ir.OpRMSNorm:
					norms++
					// (1+w): the weight input is an add of the weight and 1.
					if d := n.Inputs[1].Def; d == nil || d.Op != ir.OpAdd {
						t.Errorf("%s: norm weight is not 1+w", n.Prov)
					}
				case ir.OpTanh:
					tanh = tanh || strings.HasPrefix(n.Prov, "output")
				case ir.OpGelu:
					gelu++
				}
			}
			if norms != tc.norms || tanh != tc.tanh || gelu != base.Layers {
				t.Errorf("%d norms, logit tanh %v, %d gelu; want %d, %v, %d", norms, tanh, gelu, tc.norms, tc.tanh, base.Layers)
			}
			if !strings.Contains(m.Meta["config"], "gemma post_norms=") {
				t.Errorf("meta %q", m.Meta["config"])
			}
		})
	}
	if err := (Config{Config: base, FinalSoftcap: -1}).Validate(); err == nil {
		t.Error("a negative softcap validates")
	}
}
