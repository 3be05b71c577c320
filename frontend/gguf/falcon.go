package gguf

import (
	"github.com/tapml/tapml/frontend/arch"
	"github.com/tapml/tapml/frontend/arch/falcon"
)

// falconFamily reads GGUF falcon files in falcon-7b's form into
// arch/falcon: parallel blocks over one LayerNorm, one q/k/v projection
// (q's rows, then k's, then v's), RoPE on the halves of each head, and a
// classifier of its own when the file has output.weight. Falcon-40B's
// second norm (attn_norm_2) is not read.
var falconFamily = stackFamily(layerEps, arch.GeluTanh,
	suffixedNames("h.", map[string]string{"token_embd": "word_embeddings", "output_norm": "ln_f", "output": "lm_head"},
		map[string]string{
			"attn_norm": "input_layernorm", "attn_qkv": "self_attention.query_key_value",
			"attn_output": "self_attention.dense", "ffn_up": "mlp.dense_h_to_4h", "ffn_down": "mlp.dense_4h_to_h",
		}),
	func(_ *File, _ string, h hparams, s arch.Sizes) (arch.Stack, error) {
		st := falcon.Config{Sizes: s}.Stack()
		st.Head = arch.LMHead(h.tied)
		return st, nil
	})
