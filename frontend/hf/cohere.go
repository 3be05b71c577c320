package hf

import (
	"github.com/tapml/tapml/frontend/arch"
	"github.com/tapml/tapml/frontend/arch/cohere"
)

// cohereFamily is CohereForCausalLM (Command-R) over arch/cohere.
var cohereFamily = stackFamily("CohereForCausalLM", "cohere", "model.", func(o jsonObject, c *Config) (arch.Stack, error) {
	s, err := o.sizes(c, sizeKeys{ffn: "intermediate_size", kvHeads: "num_key_value_heads", eps: "layer_norm_eps", defEps: 1e-5, act: "hidden_act", defAct: "silu", defPos: 8192, defRotary: 1})
	if err != nil {
		return arch.Stack{}, err
	}
	m := cohere.Config{Sizes: s}
	if m.LogitScale, err = o.float("logit_scale", 0.0625); err != nil {
		return arch.Stack{}, err
	}
	return m.Stack(), o.refuse(
		refused{"use_qk_norm", "LayerNorms of q and k", []string{"false"}},
		refused{"attention_bias", "attention biases", []string{"false"}},
		refused{"tie_word_embeddings", "Cohere's classifier is the token embedding", []string{"true"}})
})
