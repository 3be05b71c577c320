package hf

import (
	"github.com/tapml/tapml/frontend/arch"
	"github.com/tapml/tapml/frontend/arch/starcoder2"
)

// starcoder2Family is Starcoder2ForCausalLM over arch/starcoder2, with its
// sliding window (sliding_window; null or absent: none).
var starcoder2Family = stackFamily("Starcoder2ForCausalLM", "starcoder2", "model.",
	sizeKeys{eps: "norm_epsilon", defEps: 1e-5, defAct: "gelu_pytorch_tanh", defPos: 4096},
	func(o jsonObject, s arch.Sizes) (arch.Stack, error) {
		m := starcoder2.Config{Sizes: s}
		var err error
		get := o.bools(&err)
		get(&m.Bias, "use_bias", true)
		get(&m.Tied, "tie_word_embeddings", true)
		if err != nil {
			return arch.Stack{}, err
		}
		if o.present("sliding_window") && !o.isNull("sliding_window") {
			if m.Window, err = o.int("sliding_window", -1, 1, bigPos); err != nil {
				return arch.Stack{}, err
			}
		}
		return m.Stack(), nil
	})
