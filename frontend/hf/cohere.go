package hf

import (
	"github.com/tapml/tapml/frontend/arch"
	"github.com/tapml/tapml/frontend/arch/cohere"
)

// cohereFamily is CohereForCausalLM (Command-R) over arch/cohere.
var cohereFamily = stackFamily("CohereForCausalLM", "cohere", "model.",
	sizeKeys{eps: "layer_norm_eps", defEps: 1e-5, defAct: "silu", defPos: 8192},
	func(o jsonObject, s arch.Sizes) (arch.Stack, error) {
		scale, err := o.float("logit_scale", 0.0625)
		if err != nil {
			return arch.Stack{}, err
		}
		return cohere.Config{Sizes: s, LogitScale: scale}.Stack(), o.refuse(
			refused{"use_qk_norm", "LayerNorms of q and k", []string{"false"}},
			refused{"attention_bias", "attention biases", []string{"false"}},
			refused{"tie_word_embeddings", "Cohere's classifier is the token embedding", []string{"true"}})
	})
