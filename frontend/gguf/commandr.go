package gguf

import (
	"github.com/tapml/tapml/frontend/arch"
	"github.com/tapml/tapml/frontend/arch/cohere"
)

// commandRFamily reads GGUF command-r files (Cohere's Command-R) into
// arch/cohere: parallel blocks over one LayerNorm without bias, RoPE on
// adjacent pairs, the classifier tied to the token embedding and its
// logits scaled by logit_scale. Command R+'s per-head q/k norms are not
// read (its files are refused by their tensors).
var commandRFamily = stackFamily(layerEps, arch.Silu, stackNames,
	func(f *File, name string, _ hparams, s arch.Sizes) (arch.Stack, error) {
		scale, err := f.requiredFloat(key(name, "logit_scale"))
		return cohere.Config{Sizes: s, LogitScale: scale}.Stack(), err
	})
