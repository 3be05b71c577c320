package hf

import (
	"github.com/tapml/tapml/frontend/arch"
	"github.com/tapml/tapml/frontend/arch/granite"
)

// graniteFamily is GraniteForCausalLM over arch/granite.
var graniteFamily = stackFamily("GraniteForCausalLM", "granite", "model.",
	sizeKeys{eps: "rms_norm_eps", defEps: 1e-6, defAct: "silu", defPos: 2048},
	func(o jsonObject, s arch.Sizes) (arch.Stack, error) {
		m := granite.Config{Sizes: s}
		var err error
		for _, f := range []struct {
			dst *float64
			key string
		}{
			{&m.EmbeddingMultiplier, "embedding_multiplier"}, {&m.ResidualMultiplier, "residual_multiplier"},
			{&m.AttentionMultiplier, "attention_multiplier"}, {&m.LogitsScaling, "logits_scaling"},
		} {
			if *f.dst, err = o.float(f.key, 1); err != nil {
				return arch.Stack{}, err
			}
		}
		get := o.bools(&err)
		get(&m.AttentionBias, "attention_bias", false)
		get(&m.MLPBias, "mlp_bias", false)
		get(&m.Tied, "tie_word_embeddings", false)
		return m.Stack(), err
	})
