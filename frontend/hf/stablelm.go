package hf

import (
	"github.com/tapml/tapml/frontend/arch"
	"github.com/tapml/tapml/frontend/arch/stablelm"
)

// stablelmFamily is StableLmForCausalLM over arch/stablelm.
var stablelmFamily = stackFamily("StableLmForCausalLM", "stablelm", "model.",
	sizeKeys{eps: "layer_norm_eps", defEps: 1e-5, defAct: "silu", defPos: 4096, defRotary: 0.25},
	func(o jsonObject, s arch.Sizes) (arch.Stack, error) {
		m := stablelm.Config{Sizes: s}
		var err error
		get := o.bools(&err)
		get(&m.QKVBias, "use_qkv_bias", false)
		get(&m.Tied, "tie_word_embeddings", false)
		if err != nil {
			return arch.Stack{}, err
		}
		return m.Stack(), o.refuse(
			refused{"qk_layernorm", "per-head LayerNorms of q and k", []string{"false"}},
			refused{"use_parallel_residual", "parallel residual blocks", []string{"false"}})
	})
