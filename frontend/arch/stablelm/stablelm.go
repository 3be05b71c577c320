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
		Embedding: "embed_tokens", LayerPrefix: "layers.", FinalNorm: "norm", Head: arch.LMHead(c.Tied),
		Norm: arch.Norm{Kind: arch.LayerNorm, Eps: c.NormEps}, Norms: []string{"input_layernorm", "post_attention_layernorm"},
		AttentionName: "self_attn", Attention: arch.Attention{
			Q: "q_proj", K: "k_proj", V: "v_proj", Out: "o_proj", QKVBias: c.QKVBias, RopeStyle: "half"},
		MLPName: "mlp", MLP: arch.MLP{Gate: "gate_proj", Up: "up_proj", Down: "down_proj"},
	}
}
