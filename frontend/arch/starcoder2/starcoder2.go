// Package starcoder2 is BigCode's StarCoder2 for arch.Build: pre-norm
// blocks with LayerNorms, biases on every projection (use_bias), grouped-
// query attention with RoPE, a two-layer MLP (GELU's tanh approximation),
// a classifier tied to the token embedding, and sliding-window attention
// (the attention op's window). Weight names are Hugging Face's
// Starcoder2Model names.
package starcoder2

import "github.com/tapml/tapml/frontend/arch"

// Config is a StarCoder2 model's hyperparameters: Bias is use_bias;
// Tied: the classifier is the token embedding.
type Config struct {
	arch.Sizes
	Bias, Tied bool
	// Window, when positive, is the sliding window of every layer's
	// attention (sliding_window).
	Window int
}

// Stack returns the model of c for arch.Build.
func (c Config) Stack() arch.Stack {
	return arch.Stack{
		Arch: "starcoder2", Config: c, Sizes: c.Sizes, Topology: arch.PreNorm,
		Head: arch.LMHead(c.Tied), Norm: arch.Norm{Kind: arch.LayerNorm, Eps: c.NormEps},
		Attention: arch.Attention{QKVBias: c.Bias, OutBias: c.Bias, Window: c.Window},
		MLP:       arch.MLP{Up: "c_fc", Down: "c_proj", Bias: c.Bias},
	}
}
