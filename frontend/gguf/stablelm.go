package gguf

import (
	"github.com/tapml/tapml/frontend/arch"
	"github.com/tapml/tapml/frontend/arch/stablelm"
)

// stablelmFamily reads GGUF stablelm files into arch/stablelm: LayerNorms,
// partial RoPE (rope.dimension_count) on the halves of each head, q/k/v
// biases when the file has them. StableLM 2 12B's per-head q/k norms and
// parallel blocks are not read (its files are refused by their tensors).
var stablelmFamily = stackFamily(layerEps, arch.Silu, stackNames,
	func(f *File, _ string, h hparams, s arch.Sizes) (arch.Stack, error) {
		return stablelm.Config{Sizes: s, QKVBias: f.has("blk.0.attn_q.bias"), Tied: h.tied}.Stack(), nil
	})
