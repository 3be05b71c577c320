package gguf

import (
	"github.com/tapml/tapml/frontend/arch"
	"github.com/tapml/tapml/frontend/arch/phi"
)

// phi2Family reads GGUF phi2 files (phi-1, phi-1.5, phi-2) into arch/phi:
// parallel blocks over one LayerNorm, partial RoPE on the halves of each
// head, biases everywhere, the classifier's too.
var phi2Family = stackFamily(layerEps, arch.GeluTanh,
	stackNames.with(suffixes(map[string]string{"output_norm": "final_layernorm"}), suffixes(map[string]string{
		"attn_output": "self_attn.dense", "ffn_up": "mlp.fc1", "ffn_down": "mlp.fc2",
	})),
	func(_ *File, _ string, _ hparams, s arch.Sizes) (arch.Stack, error) {
		return phi.Config{Sizes: s}.Stack(), nil
	})
