package hf

import (
	"github.com/tapml/tapml/frontend/arch"
	"github.com/tapml/tapml/frontend/arch/gptneox"
)

// gptneoxFamily is GPTNeoXForCausalLM (Pythia, GPT-NeoX-20B) over
// arch/gptneox. Its attention has as many key/value heads as heads,
// whatever num_key_value_heads says (transformers reads only
// num_attention_heads); transformers 4 configs name partial_rotary_factor
// rotary_pct and the RoPE base rotary_emb_base.
var gptneoxFamily = stackFamily("GPTNeoXForCausalLM", "gpt_neox", "gpt_neox.",
	sizeKeys{allHeads: true, eps: "layer_norm_eps", defEps: 1e-5, defAct: "gelu", defPos: 2048,
		defRotary: 0.25, aliases: [][2]string{{"partial_rotary_factor", "rotary_pct"}, {"rope_theta", "rotary_emb_base"}}},
	func(o jsonObject, s arch.Sizes) (arch.Stack, error) {
		return gptneox.Config{Sizes: s}.Stack(), o.refuse(
			refused{"use_parallel_residual", "sequential residual blocks", []string{"true"}},
			refused{"attention_bias", "an attention without biases", []string{"true"}},
			refused{"tie_word_embeddings", "GPT-NeoX's classifier is embed_out", []string{"false"}})
	})
