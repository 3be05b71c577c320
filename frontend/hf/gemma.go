package hf

import (
	"encoding/json"
	"math"

	"github.com/tapml/tapml/frontend/arch"
	"github.com/tapml/tapml/frontend/arch/gemma"
	"github.com/tapml/tapml/frontend/arch/llama"
)

// A gemmaVersion is GemmaForCausalLM (1), Gemma2ForCausalLM (2) or
// Gemma3ForCausalLM (3, the text model) over arch/gemma.
type gemmaVersion struct {
	arch, modelType string
	version         int
	defPos          int64
}

var (
	gemmaModel  = gemmaVersion{"GemmaForCausalLM", "gemma", 1, 8192}
	gemma2Model = gemmaVersion{"Gemma2ForCausalLM", "gemma2", 2, 8192}
	gemma3Model = gemmaVersion{"Gemma3ForCausalLM", "gemma3_text", 3, 131072}
)

func (v gemmaVersion) family() family {
	return family{
		arch: v.arch, modelType: v.modelType,
		config: func(o jsonObject, c *Config) (arch.Config, error) { return o.gemma(c, v) },
		tensor: func(canon string, m arch.Config, _ *Checkpoint) string {
			if m.(gemma.Config).PostNorms {
				if pre, part := llama.SplitLayer(canon); pre != "" {
					if name, ok := gemmaPostNormNames[part]; ok {
						return "model." + pre + name
					}
				}
			}
			return LlamaTensorName(canon)
		},
		unread: func(name string, m arch.Config) bool { return llamaUnread(name, m.(gemma.Config).TiedEmbeddings) },
	}
}

// gemmaPostNormNames are Gemma 2 and 3's norm names: their
// post_attention_layernorm follows the attention (LLaMA's is the
// feed-forward's input norm, pre_feedforward_layernorm here).
var gemmaPostNormNames = map[string]string{
	"ffn_norm":            "pre_feedforward_layernorm.weight",
	"post_attention_norm": "post_attention_layernorm.weight",
	"post_ffn_norm":       "post_feedforward_layernorm.weight",
}

// gemma reads a Gemma config.json, with its configuration class's
// defaults for absent keys (head_dim 256, tied embeddings, Gemma 2's
// soft-capping at 50 and 30, sliding windows of 4096, ...).
func (o jsonObject) gemma(c *Config, v gemmaVersion) (arch.Config, error) {
	l, err := o.llamaBase(c, llamaDefaults{pos: v.defPos, headDim: 256, tied: true})
	if err != nil {
		return nil, err
	}
	g := gemma.Config{PostNorms: v.version >= 2}
	actKey := "hidden_activation"
	if v.version == 1 {
		actKey = "hidden_act" // what transformers 5's Gemma reads
	}
	act, err := o.string(actKey, "gelu_pytorch_tanh")
	if err != nil {
		return nil, err
	}
	switch act {
	case "gelu_pytorch_tanh", "gelu_new", "gelu_fast":
		// GELU's tanh approximation
	default:
		return nil, o.errorf(actKey, "%q is not supported (only the tanh approximation of GELU: gelu_pytorch_tanh)", act)
	}
	for _, u := range []struct {
		key, why string
		accepted []string
	}{
		{"attention_bias", "the graph has no attention biases", []string{"false"}},
		{"attention_dropout", "dropout at inference", []string{"0", "0.0"}},
		{"use_bidirectional_attention", "bidirectional attention", []string{"false"}},
	} {
		if err := o.unsupported(u.key, u.why, u.accepted...); err != nil {
			return nil, err
		}
	}
	if v.version == 3 {
		err = o.gemma3Rope(&l, c)
	} else {
		err = o.setRope(&l, c, ropeRules{})
	}
	if err != nil {
		return nil, err
	}
	if v.version == 1 {
		g.Config = l
		return g, nil
	}
	scalar, err := o.float("query_pre_attn_scalar", 256)
	if err != nil {
		return nil, err
	}
	l.AttnScale = 1 / math.Sqrt(scalar)
	if l.SlidingWindow, err = o.nullableInt("sliding_window", 4096); err != nil {
		return nil, err
	}
	// The sliding layers: layer_types, else every other one from layer 0
	// (Gemma 2) or all but every sixth (Gemma 3's sliding_window_pattern).
	pattern := 2
	if v.version == 3 {
		if pattern, err = o.int("sliding_window_pattern", 6, 1, bigLayer); err != nil {
			return nil, err
		}
	}
	l.SlidingLayers = make([]bool, l.Layers)
	for i := range l.SlidingLayers {
		l.SlidingLayers[i] = (i+1)%pattern != 0
	}
	if err := o.layerTypes(&l); err != nil {
		return nil, err
	}
	if v.version == 2 {
		// Gemma 3's attention ignores attn_logit_softcapping.
		if l.AttnSoftcap, err = o.nullableFloat("attn_logit_softcapping", 50); err != nil {
			return nil, err
		}
		if g.FinalSoftcap, err = o.nullableFloat("final_logit_softcapping", 30); err != nil {
			return nil, err
		}
	} else if g.FinalSoftcap, err = o.nullableFloat("final_logit_softcapping", 0); err != nil {
		return nil, err
	}
	l.QKNorm = v.version == 3
	g.Config = l
	return g, nil
}

// gemma3Rope reads Gemma 3's two RoPEs: the global layers' (rope_theta,
// default 10^6, and any scaling) and the sliding layers' unscaled one
// (rope_local_base_freq, default 10^4), in transformers 4's form or in
// transformers 5's rope_parameters keyed by layer type.
func (o jsonObject) gemma3Rope(l *llama.Config, c *Config) error {
	params, err := o.object("rope_parameters")
	if err != nil {
		return err
	}
	if params == nil || !params.present("full_attention") && !params.present("sliding_attention") {
		if err := o.setRope(l, c, ropeRules{theta: 1e6}); err != nil {
			return err
		}
		l.LocalRopeTheta, err = o.float("rope_local_base_freq", 1e4)
		return err
	}
	for _, key := range []string{"rope_theta", "rope_scaling", "rope_local_base_freq"} {
		if o.present(key) {
			return o.errorf(key, "given with rope_parameters by layer type (one form or the other)")
		}
	}
	for _, lt := range []struct {
		key   string
		theta float64
	}{{"full_attention", 1e6}, {"sliding_attention", 1e4}} {
		// Each layer type's entry reads as a rope_parameters of its own.
		one := jsonObject{file: params.file, m: map[string]json.RawMessage{}}
		if params.present(lt.key) {
			one.m["rope_parameters"] = params.m[lt.key]
		}
		r, err := one.rope(c.MaxPositions, ropeRules{theta: lt.theta})
		if err != nil {
			return err
		}
		if r.partial != 1 {
			return one.errorf(lt.key, "partial_rotary_factor %g is not supported", r.partial)
		}
		if lt.key == "full_attention" {
			useRope(l, r)
		} else if r.scaling.Type != "" {
			return one.errorf(lt.key, "rope_type %q: scaling the sliding layers' RoPE is not supported", r.scaling.Type)
		} else {
			l.LocalRopeTheta = r.theta
		}
	}
	return nil
}
