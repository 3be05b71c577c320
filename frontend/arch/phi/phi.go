// Package phi is Microsoft's Phi (phi-1, phi-1.5, phi-2) for arch.Build:
// parallel blocks (the attention and the MLP read one LayerNorm of the
// block's input and add to it together), partial rotary embeddings, biases
// on every projection, a two-layer MLP (phi-2's activation is GELU's tanh
// approximation), and a classifier with a bias.
// Weight names are Hugging Face's PhiModel names ("layers.0.self_attn.dense.weight").
package phi

import "github.com/tapml/tapml/frontend/arch"

// Config is a Phi model's hyperparameters.
type Config struct{ arch.Sizes }

// Stack returns the model of c for arch.Build.
func (c Config) Stack() arch.Stack {
	return arch.Stack{
		Arch: "phi", Config: c, Sizes: c.Sizes, Topology: arch.Parallel,
		FinalNorm: "final_layernorm", Head: "lm_head", HeadBias: true,
		Norm: arch.Norm{Kind: arch.LayerNorm, Eps: c.NormEps}, Norms: []string{"input_layernorm"},
		Attention: arch.Attention{Out: "dense", QKVBias: true, OutBias: true},
		MLP:       arch.MLP{Up: "fc1", Down: "fc2", Bias: true},
	}
}
