// Package cohere is Cohere's Command-R family for arch.Build: parallel
// blocks over one LayerNorm without bias, RoPE on interleaved pairs, a
// SwiGLU MLP, and a classifier tied to the token embedding whose logits
// are scaled. Weight names are Hugging Face's CohereModel names.
package cohere

import "github.com/tapml/tapml/frontend/arch"

// Config is a Cohere model's hyperparameters: the sizes and logit_scale.
type Config struct {
	arch.Sizes
	LogitScale float64
}

// Stack returns the model of c for arch.Build.
func (c Config) Stack() arch.Stack {
	return arch.Stack{
		Arch: "cohere", Config: c, Sizes: c.Sizes, Topology: arch.Parallel, LogitScale: c.LogitScale,
		Norm: arch.Norm{Kind: arch.LayerNormNoBias, Eps: c.NormEps}, Norms: []string{"input_layernorm"},
		Attention: arch.Attention{RopeStyle: "interleaved"},
	}
}
