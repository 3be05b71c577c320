package gguf

import "github.com/tapml/tapml/frontend/arch/gpt2"

// gpt2Family reads GGUF gpt2 files and starcoder ones (GPTBigCode, whose
// key/value heads are fewer) into arch/gpt2: learned position embeddings
// (context_length rows), LayerNorms, one fused q/k/v projection,
// GELU, biases. llama.cpp's converter transposes GPT-2's Conv1D weights,
// so every linear layer is stored out×in.
var gpt2Family = family{
	names: suffixedNames("h.",
		map[string]string{"token_embd": "wte", "position_embd": "wpe", "output_norm": "ln_f", "output": "lm_head"},
		map[string]string{
			"attn_norm": "ln_1", "attn_qkv": "attn.c_attn", "attn_output": "attn.c_proj",
			"ffn_norm": "ln_2", "ffn_up": "mlp.c_fc", "ffn_down": "mlp.c_proj",
		}),
	config: func(f *File, name string) (model, error) {
		h, err := f.hparams(name, layerEps)
		if err != nil {
			return model{}, err
		}
		if h.dim%h.heads != 0 || h.headDim != h.dim/h.heads {
			return model{}, f.errorf("metadata %s = %d differs from %s/%s; not supported", key(name, "attention.key_length"),
				h.headDim, key(name, "embedding_length"), key(name, "attention.head_count"))
		}
		c := gpt2.Config{Dim: h.dim, Inner: h.ffn, Layers: h.layers, Heads: h.heads, Vocab: h.vocab,
			Positions: h.context, MaxSeq: h.maxSeq, NormEps: h.eps, LMHead: !h.tied, Linear: true}
		if h.kvHeads != h.heads {
			c.KVHeads = h.kvHeads
		}
		return model{config: c, context: h.context, maxSeq: h.maxSeq}, nil
	},
}
