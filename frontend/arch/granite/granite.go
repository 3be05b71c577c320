// Package granite is IBM's Granite (3.x) for arch.Build: LLaMA's blocks
// with its multipliers: the embeddings are scaled, the attention's and the
// MLP's outputs are scaled before each residual addition, the attention
// scale is a hyperparameter, and the logits are divided. Weight names are
// Hugging Face's GraniteModel names.
package granite

import "github.com/tapml/tapml/frontend/arch"

// Config is a Granite model's hyperparameters: embedding_multiplier,
// residual_multiplier, attention_multiplier and logits_scaling, the
// biases of attention_bias and mlp_bias, and whether the classifier is the
// token embedding.
type Config struct {
	arch.Sizes
	EmbeddingMultiplier, ResidualMultiplier, AttentionMultiplier, LogitsScaling float64
	AttentionBias, MLPBias, Tied                                                bool
}

// Stack returns the model of c for arch.Build. The logits are multiplied
// by 1/logits_scaling (transformers divides: the two differ by an f32
// rounding at most).
func (c Config) Stack() arch.Stack {
	logit := 0.0
	if c.LogitsScaling != 0 {
		logit = 1 / c.LogitsScaling
	}
	return arch.Stack{
		Arch: "granite", Config: c, Sizes: c.Sizes, Topology: arch.PreNorm,
		EmbedScale: c.EmbeddingMultiplier, ResidualScale: c.ResidualMultiplier, LogitScale: logit,
		Head: arch.LMHead(c.Tied), Norm: arch.Norm{Kind: arch.RMSNorm, Eps: c.NormEps},
		Attention: arch.Attention{QKVBias: c.AttentionBias, OutBias: c.AttentionBias, Scale: c.AttentionMultiplier},
		MLP:       arch.MLP{Bias: c.MLPBias},
	}
}
