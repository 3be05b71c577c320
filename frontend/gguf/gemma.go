package gguf

import (
	"math"

	"github.com/tapml/tapml/frontend/arch/gemma"
)

// gemmaFamily reads the GGUF architectures gemma, gemma2 and gemma3 into
// arch/gemma, as llama.cpp builds them: RoPE on the halves of each head,
// norm weights that already hold Gemma's 1 + w (the converter adds the 1),
// from Gemma 2 on the post norms, an attention scale of 1/√key_length
// (1/√(embedding_length/head_count) for the 27B models, which llama.cpp
// knows by their layer count) and sliding windows by a fixed pattern.
func gemmaFamily(version int) family {
	return family{
		names: gemmaNames,
		config: func(f *File, name string) (model, error) {
			h, err := f.hparams(name, rmsEps)
			if err != nil {
				return model{}, err
			}
			l, err := f.llamaConfig(name, h)
			if err != nil {
				return model{}, err
			}
			l.RopeStyle, l.QKNorm = "half", version == 3
			if version >= 2 {
				l.AttnScale = gemmaAttnScale(h, version)
			}
			g := gemma.Config{Config: l, PostNorms: version >= 2, ShiftedNorms: true}
			switch version {
			case 2:
				err = f.gemma2(name, &g)
			case 3:
				err = f.gemma3(name, &g)
			}
			return model{config: g, context: h.context, maxSeq: l.MaxSeq}, err
		},
	}
}

// gemmaNames maps llama.cpp's names onto arch/gemma's.
var gemmaNames = llamaNames.with(nil, map[string]string{
	"post_attention_norm.weight": "post_attention_norm", "post_ffw_norm.weight": "post_ffn_norm",
})

// gemmaAttnScale is llama.cpp's attention scale of Gemma 2 and 3: Google's
// query_pre_attn_scalar, which the file does not carry, is
// embedding_length/head_count for the 27B models (46 layers in Gemma 2,
// 62 in Gemma 3) and the head width otherwise.
func gemmaAttnScale(h hparams, version int) float64 {
	if (version == 2 && h.layers == 46 || version == 3 && h.layers == 62) && h.dim%h.heads == 0 {
		return 1 / math.Sqrt(float64(h.dim/h.heads))
	}
	return 1 / math.Sqrt(float64(h.headDim))
}

// gemma2 reads Gemma 2's sliding window (4096 by default), on every other
// layer from the first, and its soft-capping of the attention scores and
// of the logits (50 and 30 by default).
func (f *File) gemma2(name string, g *gemma.Config) error {
	l := &g.Config
	w, err := f.intKey(key(name, "attention.sliding_window"), ptr(4096), 1, 1<<31-1)
	if err != nil {
		return err
	}
	l.SlidingWindow, l.SlidingLayers = int(w), slidingPattern(l.Layers, 2)
	if l.AttnSoftcap, err = f.floatKey(key(name, "attn_logit_softcapping"), 50); err != nil {
		return err
	}
	g.FinalSoftcap, err = f.floatKey(key(name, "final_logit_softcapping"), 30)
	return err
}

// gemma3 reads Gemma 3's sliding window, on five layers of every six; its
// local layers rotate with base rope.freq_base_swa (10000) and without the
// linear scaling of the global ones. A file without a window attends
// globally everywhere; final_logit_softcapping, when a file has it,
// soft-caps the logits.
func (f *File) gemma3(name string, g *gemma.Config) error {
	l := &g.Config
	w, err := f.intKey(key(name, "attention.sliding_window"), ptr(0), 0, 1<<31-1)
	if err != nil {
		return err
	}
	if w > 0 {
		l.SlidingWindow, l.SlidingLayers = int(w), slidingPattern(l.Layers, 6)
		if l.LocalRopeTheta, err = f.floatKey(key(name, "rope.freq_base_swa"), 10000); err != nil {
			return err
		}
	}
	g.FinalSoftcap, err = f.floatKey(key(name, "final_logit_softcapping"), 0)
	return err
}

// slidingPattern marks the sliding-window layers as llama.cpp's
// set_swa_pattern(n) does: all but every n-th, the last of each n.
func slidingPattern(layers, n int) []bool {
	flags := make([]bool, layers)
	for l := range flags {
		flags[l] = l%n < n-1
	}
	return flags
}
