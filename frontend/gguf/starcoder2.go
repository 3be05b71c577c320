package gguf

import (
	"github.com/tapml/tapml/frontend/arch"
	"github.com/tapml/tapml/frontend/arch/starcoder2"
)

// starcoder2Family reads GGUF starcoder2 files into arch/starcoder2:
// LayerNorms, biases on every projection, a two-layer MLP, RoPE on the
// halves of each head. llama.cpp gives it no sliding window.
var starcoder2Family = stackFamily(layerEps, arch.GeluTanh,
	stackNames.with(nil, suffixes(map[string]string{"ffn_up": "mlp.c_fc", "ffn_down": "mlp.c_proj"})),
	func(f *File, _ string, h hparams, s arch.Sizes) (arch.Stack, error) {
		return starcoder2.Config{Sizes: s, Bias: f.has("blk.0.attn_output.bias"), Tied: h.tied}.Stack(), nil
	})
