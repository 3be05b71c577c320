package gguf

import (
	"github.com/tapml/tapml/frontend/arch"
	"github.com/tapml/tapml/frontend/arch/olmo2"
)

// olmo2Family reads GGUF olmo2 files into arch/olmo2: norms after the
// attention and the MLP, RMSNorms of the whole q and k projections, RoPE
// on the halves of each head. OLMo 3's sliding windows (the same
// architecture with attention.sliding_window) are refused.
var olmo2Family = stackFamily(rmsEps, arch.Silu,
	stackNames.with(nil, suffixes(map[string]string{
		"post_attention_norm": "post_attention_layernorm", "post_ffw_norm": "post_feedforward_layernorm",
		"attn_q_norm": "self_attn.q_norm", "attn_k_norm": "self_attn.k_norm",
	})),
	func(f *File, name string, h hparams, s arch.Sizes) (arch.Stack, error) {
		if w, err := f.intKey(key(name, "attention.sliding_window"), ptr(0), 0, 1<<31-1); err != nil {
			return arch.Stack{}, err
		} else if w > 0 {
			return arch.Stack{}, f.errorf("%s = %d: OLMo 3's sliding-window attention is not supported", key(name, "attention.sliding_window"), w)
		}
		return olmo2.Config{Sizes: s, Tied: h.tied}.Stack(), nil
	})
