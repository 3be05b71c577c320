package hf

import (
	"github.com/tapml/tapml/frontend/arch"
	"github.com/tapml/tapml/frontend/arch/starcoder2"
)

// starcoder2Family is Starcoder2ForCausalLM over arch/starcoder2. A
// sliding window shorter than the KV cache is refused until the attention
// op has a window; one at least as long never bites (StarCoder2's 4096
// with tapml's cache of at most MaxSeqCap positions).
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
		if o.present("sliding_window") {
			w, err := o.int("sliding_window", -1, 1, bigPos)
			if err != nil {
				return arch.Stack{}, err
			}
			if w < s.MaxSeq {
				return arch.Stack{}, o.errorf("sliding_window", "%d is shorter than the %d cached positions: sliding-window attention is not implemented", w, s.MaxSeq)
			}
		}
		return m.Stack(), nil
	})
