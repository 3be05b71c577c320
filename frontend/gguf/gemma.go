package gguf

import (
	"math"

	"github.com/tapml/tapml/frontend/arch/gemma"
	"github.com/tapml/tapml/frontend/arch/llama"
)

// gemmaFamily reads the GGUF architectures gemma, gemma2 and gemma3 into
// arch/gemma, as llama.cpp builds them: RoPE on the halves of each head,
// norm weights that already hold Gemma's 1 + w (the converter adds the 1),
// from Gemma 2 on the post norms, an attention scale of 1/√key_length
// (1/√(embedding_length/head_count) for the 27B models, which llama.cpp
// knows by their layer count) and sliding windows by llama.cpp's layer
// patterns.
func gemmaFamily(version int) family {
	return family{
		names: gemmaNames,
		config: func(f *File, name string) (model, error) {
			h, l, err := f.llamaConfig(name)
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

// gemma2 reads Gemma 2's sliding window (4096 by default), on every
// other layer from the first (or as sliding_window_pattern says), with
// base rope.freq_base_swa (the global layers' RoPE by default), and its
// soft-capping of the attention scores and of the logits (50 and 30 by
// default).
func (f *File) gemma2(name string, g *gemma.Config) error {
	l := &g.Config
	w, err := f.intKey(key(name, "attention.sliding_window"), ptr(4096), 1, 1<<31-1)
	if err != nil {
		return err
	}
	if err := f.slidingLayers(name, l, int(w), 2, 0); err != nil {
		return err
	}
	if l.AttnSoftcap, err = f.floatKey(key(name, "attn_logit_softcapping"), 50); err != nil {
		return err
	}
	g.FinalSoftcap, err = f.floatKey(key(name, "final_logit_softcapping"), 30)
	return err
}

// gemma3 reads Gemma 3's sliding window, on five layers of every six (or
// as sliding_window_pattern says); its local layers rotate with base
// rope.freq_base_swa (10000) and without the linear scaling of the global
// ones. A file without a window attends globally everywhere;
// final_logit_softcapping, when a file has it, soft-caps the logits.
func (f *File) gemma3(name string, g *gemma.Config) error {
	l := &g.Config
	w, err := f.intKey(key(name, "attention.sliding_window"), ptr(0), 0, 1<<31-1)
	if err != nil {
		return err
	}
	if w > 0 {
		if err := f.slidingLayers(name, l, int(w), 6, 10000); err != nil {
			return err
		}
	}
	g.FinalSoftcap, err = f.floatKey(key(name, "final_logit_softcapping"), 0)
	return err
}

// slidingLayers sets l's sliding window of w positions on the layers that
// attention.sliding_window_pattern marks, and the RoPE base of those
// layers (rope.freq_base_swa; theta when absent, and when theta is 0 the
// global layers' base and scaling). The pattern is an
// integer n, as llama.cpp's set_swa_pattern(n) reads it (every layer
// slides but the last of each n; 0: every layer), or one flag per layer;
// period is its default.
func (f *File) slidingLayers(name string, l *llama.Config, w, period int, theta float64) error {
	k := key(name, "attention.sliding_window_pattern")
	flags := make([]bool, l.Layers)
	v, ok := f.Get(k)
	if a, isArr := v.Array(); ok && isArr {
		if a.Len() != l.Layers || a.Elem != TypeBool && !a.Elem.isInt() {
			return f.errorf("metadata %s is %s, want %d flags (one per layer) or a period", k, v, l.Layers)
		}
		for i := range flags {
			e := a.At(i)
			if b, isBool := e.Bool(); isBool {
				flags[i] = b
			} else {
				n, _ := e.Int()
				flags[i] = n != 0
			}
		}
	} else {
		n, err := f.intKey(k, ptr(int64(period)), 0, 1<<31-1)
		if err != nil {
			return err
		}
		for i := range flags {
			flags[i] = n == 0 || int64(i)%n < n-1
		}
	}
	l.SlidingWindow, l.SlidingLayers = w, flags
	// The local layers' own base; the sliding layers then rotate
	// unscaled, which llama.cpp does for Gemma 3 (not for Gemma 2).
	k = key(name, "rope.freq_base_swa")
	if _, ok := f.Get(k); !ok && theta == 0 {
		return nil
	}
	if theta == 0 && l.RopeScaling.Type != "" {
		return f.errorf("metadata %s with RoPE scaling: scaled local layers of a base of their own are not supported", k)
	}
	var err error
	l.LocalRopeTheta, err = f.floatKey(k, theta)
	return err
}
