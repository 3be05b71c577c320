// Package stablelm is Stability AI's StableLM (StableLM-3B-4E1T,
// StableLM 2) for arch.Build: pre-norm blocks with LayerNorms, partial
// rotary embeddings, optional q/k/v biases and a SwiGLU MLP. Weight names
// are Hugging Face's StableLmModel names.
package stablelm

import "github.com/tapml/tapml/frontend/arch"

// Config is a StableLM model's hyperparameters: QKVBias is use_qkv_bias;
// Tied: the classifier is the token embedding.
type Config struct {
	arch.Sizes
	QKVBias, Tied bool
}

// Stack returns the model of c for arch.Build.
func (c Config) Stack() arch.Stack {
	return arch.Stack{
		Arch: "stablelm", Config: c, Sizes: c.Sizes, Topology: arch.PreNorm,
		Head: arch.LMHead(c.Tied), Norm: arch.Norm{Kind: arch.LayerNorm, Eps: c.NormEps},
		Attention: arch.Attention{QKVBias: c.QKVBias},
	}
}
