package hf

import (
	"github.com/tapml/tapml/frontend/arch"
	"github.com/tapml/tapml/frontend/arch/phi"
)

// phiFamily is PhiForCausalLM (phi-1, phi-1.5, phi-2) over arch/phi.
var phiFamily = stackFamily("PhiForCausalLM", "phi", "model.",
	sizeKeys{eps: "layer_norm_eps", defEps: 1e-5, defAct: "gelu_new", defPos: 2048, defRotary: 0.5},
	func(o jsonObject, s arch.Sizes) (arch.Stack, error) {
		return phi.Config{Sizes: s}.Stack(), o.refuse(
			refused{"qk_layernorm", "LayerNorms of q and k", []string{"false"}},
			refused{"tie_word_embeddings", "Phi's classifier has a bias and a weight of its own", []string{"false"}})
	})
