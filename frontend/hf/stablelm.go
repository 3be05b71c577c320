package hf

import (
	"github.com/tapml/tapml/frontend/arch"
	"github.com/tapml/tapml/frontend/arch/stablelm"
)

// stablelmFamily is StableLmForCausalLM over arch/stablelm.
var stablelmFamily = stackFamily("StableLmForCausalLM", "stablelm", "model.", func(o jsonObject, c *Config) (arch.Stack, error) {
	s, err := o.sizes(c, sizeKeys{ffn: "intermediate_size", kvHeads: "num_key_value_heads", eps: "layer_norm_eps", defEps: 1e-5, act: "hidden_act", defAct: "silu", defPos: 4096, defRotary: 0.25})
	if err != nil {
		return arch.Stack{}, err
	}
	m := stablelm.Config{Sizes: s}
	if m.QKVBias, err = o.bool("use_qkv_bias", false); err != nil {
		return arch.Stack{}, err
	}
	if m.Tied, err = o.bool("tie_word_embeddings", false); err != nil {
		return arch.Stack{}, err
	}
	return m.Stack(), o.refuse(
		refused{"qk_layernorm", "per-head LayerNorms of q and k", []string{"false"}},
		refused{"use_parallel_residual", "parallel residual blocks", []string{"false"}})
})
