package gguf

import (
	"github.com/tapml/tapml/frontend/arch"
	"github.com/tapml/tapml/frontend/arch/granite"
)

// graniteFamily reads GGUF granite files (Granite 3.x) into arch/granite:
// LLaMA's blocks with the multipliers of embedding_scale, residual_scale,
// attention.scale and logit_scale, and biases where the file has them.
// Its converter permutes q and k as LLaMA's does, so RoPE rotates adjacent
// pairs.
var graniteFamily = stackFamily(rmsEps, arch.Silu, stackNames,
	func(f *File, name string, h hparams, s arch.Sizes) (arch.Stack, error) {
		c := granite.Config{Sizes: s, Tied: h.tied,
			AttentionBias: f.has("blk.0.attn_q.bias"), MLPBias: f.has("blk.0.ffn_up.bias")}
		var err error
		for _, m := range []struct {
			p   *float64
			key string
		}{
			{&c.EmbeddingMultiplier, "embedding_scale"}, {&c.ResidualMultiplier, "residual_scale"},
			{&c.AttentionMultiplier, "attention.scale"},
		} {
			if *m.p, err = f.floatKey(key(name, m.key), 0); err != nil {
				return arch.Stack{}, err
			}
		}
		if c.LogitsScaling, err = f.requiredFloat(key(name, "logit_scale")); err != nil {
			return arch.Stack{}, err
		}
		// rope.scaling.finetuned false turns Granite's RoPE off.
		if v, ok := f.Get(key(name, "rope.scaling.finetuned")); ok {
			on, isBool := v.Bool()
			if !isBool {
				return arch.Stack{}, f.errorf("metadata %s is %s %s, want a bool", key(name, "rope.scaling.finetuned"), v.Type, v)
			}
			if !on {
				return arch.Stack{}, f.errorf("metadata %s is false: Granite without RoPE is not supported", key(name, "rope.scaling.finetuned"))
			}
		}
		st := c.Stack()
		st.Attention.RopeStyle = "interleaved"
		return st, nil
	})
