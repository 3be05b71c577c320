package gguf

import (
	"github.com/tapml/tapml/frontend/arch"
	"github.com/tapml/tapml/frontend/arch/gptneox"
)

// gptneoxFamily reads GGUF gptneox files (Pythia, GPT-NeoX) into
// arch/gptneox: LayerNorms, partial RoPE on the halves of each head, a
// two-layer MLP, biases, and blocks parallel or not as
// use_parallel_residual says. llama.cpp's converter regroups the fused
// q/k/v projection, laid out head by head in transformers, into q's rows,
// then k's, then v's, so it is split at load like Falcon's.
var gptneoxFamily = stackFamily(layerEps, arch.GeluTanh,
	suffixedNames("layers.", map[string]string{"token_embd": "embed_in", "output_norm": "final_layer_norm", "output": "embed_out"},
		map[string]string{
			"attn_norm": "input_layernorm", "attn_qkv": "attention.query_key_value", "attn_output": "attention.dense",
			"ffn_norm": "post_attention_layernorm", "ffn_up": "mlp.dense_h_to_4h", "ffn_down": "mlp.dense_4h_to_h",
		}),
	func(f *File, name string, _ hparams, s arch.Sizes) (arch.Stack, error) {
		st := gptneox.Config{Sizes: s}.Stack()
		st.Attention.Layout, st.Attention.Q, st.Attention.K, st.Attention.V = arch.FusedQKV, "q", "k", "v"
		k := key(name, "use_parallel_residual")
		v, ok := f.Get(k)
		if !ok {
			return st, f.errorf("missing metadata %s", k)
		}
		parallel, isBool := v.Bool()
		if !isBool {
			return st, f.errorf("metadata %s is %s %s, want a bool", k, v.Type, v)
		}
		if !parallel {
			st.Topology = arch.PreNorm
		}
		return st, nil
	})
