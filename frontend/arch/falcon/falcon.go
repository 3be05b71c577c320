// Package falcon is TII's Falcon in its falcon-7b form for arch.Build:
// parallel blocks over one LayerNorm, multi-query attention whose q, k and
// v projections are one fused layer (split at load into views of its
// rows), RoPE, a two-layer MLP (exact GELU), no biases, and a classifier
// tied to the token embedding. Weight names are Hugging Face's FalconModel names
// ("h.0.self_attention.query_key_value.weight").
package falcon

import "github.com/tapml/tapml/frontend/arch"

// Config is a Falcon model's hyperparameters (KVHeads is 1).
type Config struct{ arch.Sizes }

// Stack returns the model of c for arch.Build.
func (c Config) Stack() arch.Stack {
	return arch.Stack{
		Arch: "falcon", Config: c, Sizes: c.Sizes, Topology: arch.Parallel,
		Embedding: "word_embeddings", LayerPrefix: "h.", FinalNorm: "ln_f",
		Norm: arch.Norm{Kind: arch.LayerNorm, Eps: c.NormEps}, Norms: []string{"input_layernorm"},
		AttentionName: "self_attention", Attention: arch.Attention{
			Layout: arch.FusedQKV, QKV: "query_key_value", Q: "q", K: "k", V: "v", Out: "dense"},
		MLP: arch.MLP{Up: "dense_h_to_4h", Down: "dense_4h_to_h"},
	}
}
