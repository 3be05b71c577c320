package hf

import (
	"github.com/tapml/tapml/frontend/arch"
	"github.com/tapml/tapml/frontend/arch/olmo2"
)

// olmo2Family is Olmo2ForCausalLM over arch/olmo2.
var olmo2Family = stackFamily("Olmo2ForCausalLM", "olmo2", "model.",
	sizeKeys{eps: "rms_norm_eps", defEps: 1e-5, defAct: "silu", defPos: 2048},
	func(o jsonObject, s arch.Sizes) (arch.Stack, error) {
		tied, err := o.bool("tie_word_embeddings", false)
		if err != nil {
			return arch.Stack{}, err
		}
		return olmo2.Config{Sizes: s, Tied: tied}.Stack(), o.refuse(refused{"attention_bias", "attention biases", []string{"false"}})
	})
