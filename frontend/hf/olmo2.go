package hf

import (
	"github.com/tapml/tapml/frontend/arch"
	"github.com/tapml/tapml/frontend/arch/olmo2"
)

// olmo2Family is Olmo2ForCausalLM over arch/olmo2.
var olmo2Family = stackFamily("Olmo2ForCausalLM", "olmo2", "model.", func(o jsonObject, c *Config) (arch.Stack, error) {
	s, err := o.sizes(c, sizeKeys{ffn: "intermediate_size", kvHeads: "num_key_value_heads", eps: "rms_norm_eps", defEps: 1e-5, act: "hidden_act", defAct: "silu", defPos: 2048, defRotary: 1})
	if err != nil {
		return arch.Stack{}, err
	}
	m := olmo2.Config{Sizes: s}
	if m.Tied, err = o.bool("tie_word_embeddings", false); err != nil {
		return arch.Stack{}, err
	}
	return m.Stack(), o.refuse(refused{"attention_bias", "attention biases", []string{"false"}})
})
