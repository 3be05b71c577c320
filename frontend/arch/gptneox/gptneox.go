// Package gptneox is EleutherAI's GPT-NeoX (Pythia, GPT-NeoX-20B) for
// arch.Build: parallel residual blocks (the attention and the MLP each read
// their own LayerNorm of the block's input), one fused q/k/v projection
// laid out head by head (split in the graph), partial rotary embeddings, a
// two-layer MLP (exact GELU), biases, and a classifier of its own
// (embed_out). Weight
// names are Hugging Face's GPTNeoXModel names, and embed_out.
package gptneox

import "github.com/tapml/tapml/frontend/arch"

// Config is a GPT-NeoX model's hyperparameters (KVHeads is Heads).
type Config struct{ arch.Sizes }

// Stack returns the model of c for arch.Build.
func (c Config) Stack() arch.Stack {
	return arch.Stack{
		Arch: "gptneox", Config: c, Sizes: c.Sizes, Topology: arch.Parallel,
		Embedding: "embed_in", FinalNorm: "final_layer_norm", Head: "embed_out",
		Norm:          arch.Norm{Kind: arch.LayerNorm, Eps: c.NormEps},
		AttentionName: "attention", Attention: arch.Attention{
			Layout: arch.FusedPerHead, QKV: "query_key_value", Out: "dense", QKVBias: true, OutBias: true},
		MLP: arch.MLP{Up: "dense_h_to_4h", Down: "dense_4h_to_h", Bias: true},
	}
}
