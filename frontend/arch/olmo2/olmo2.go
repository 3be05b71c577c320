// Package olmo2 is AI2's OLMo 2 for arch.Build: blocks whose norms follow
// the attention and the MLP (x + norm(attn(x)), then x + norm(mlp(x))),
// RMSNorms of the whole q and k projections before RoPE, a SwiGLU MLP and
// RMSNorm. Weight names are Hugging Face's Olmo2Model names.
package olmo2

import "github.com/tapml/tapml/frontend/arch"

// Config is an OLMo 2 model's hyperparameters; Tied: the classifier is the
// token embedding.
type Config struct {
	arch.Sizes
	Tied bool
}

// Stack returns the model of c for arch.Build.
func (c Config) Stack() arch.Stack {
	norm := arch.Norm{Kind: arch.RMSNorm, Eps: c.NormEps}
	return arch.Stack{
		Arch: "olmo2", Config: c, Sizes: c.Sizes, Topology: arch.PostNorm,
		Head: arch.LMHead(c.Tied), Norm: norm, Norms: []string{"post_attention_layernorm", "post_feedforward_layernorm"},
		Attention: arch.Attention{QKNorm: norm, QNorm: "q_norm", KNorm: "k_norm"},
	}
}
