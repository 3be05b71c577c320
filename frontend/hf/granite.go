package hf

import (
	"github.com/tapml/tapml/frontend/arch"
	"github.com/tapml/tapml/frontend/arch/granite"
)

// graniteFamily is GraniteForCausalLM over arch/granite.
var graniteFamily = stackFamily("GraniteForCausalLM", "granite", "model.", func(o jsonObject, c *Config) (arch.Stack, error) {
	s, err := o.sizes(c, sizeKeys{ffn: "intermediate_size", kvHeads: "num_key_value_heads", eps: "rms_norm_eps", defEps: 1e-6, act: "hidden_act", defAct: "silu", defPos: 2048, defRotary: 1})
	if err != nil {
		return arch.Stack{}, err
	}
	m := granite.Config{Sizes: s}
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
	for _, b := range []struct {
		dst *bool
		key string
	}{{&m.AttentionBias, "attention_bias"}, {&m.MLPBias, "mlp_bias"}, {&m.Tied, "tie_word_embeddings"}} {
		if *b.dst, err = o.bool(b.key, false); err != nil {
			return arch.Stack{}, err
		}
	}
	return m.Stack(), nil
})
