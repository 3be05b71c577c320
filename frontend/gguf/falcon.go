package gguf

import (
	"github.com/tapml/tapml/frontend/arch"
	"github.com/tapml/tapml/frontend/arch/falcon"
)

// falconFamily reads GGUF falcon files into arch/falcon: parallel blocks,
// one q/k/v projection (llama.cpp's converter regroups Falcon-40B's into
// q's rows, then k's, then v's), RoPE on the halves of each head, and a
// classifier of its own when the file has output.weight. Falcon-7B's
// attention and MLP read one LayerNorm; Falcon-40B's attention reads a
// second one, attn_norm_2 (transformers' ln_attn), its MLP attn_norm.
var falconFamily = stackFamily(layerEps, arch.GeluTanh,
	suffixedNames("h.", map[string]string{"token_embd": "word_embeddings", "output_norm": "ln_f", "output": "lm_head"},
		map[string]string{
			"attn_norm": "input_layernorm", "attn_norm_2": "ln_attn", "attn_qkv": "self_attention.query_key_value",
			"attn_output": "self_attention.dense", "ffn_up": "mlp.dense_h_to_4h", "ffn_down": "mlp.dense_4h_to_h",
		}),
	func(f *File, _ string, h hparams, s arch.Sizes) (arch.Stack, error) {
		st := falcon.Config{Sizes: s}.Stack()
		st.Head = arch.LMHead(h.tied)
		if f.has("blk.0.attn_norm_2.weight") {
			st.Norms = []string{"ln_attn", "input_layernorm"} // the attention's, the MLP's
		}
		return st, nil
	})
