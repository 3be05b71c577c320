package gguf

import "github.com/tapml/tapml/frontend/arch"

// stackFamily is a GGUF architecture over a family assembled from parts
// (arch.Stack): config makes the family's Stack of the shared
// hyperparameters (the norm epsilon under epsKey, the MLP's activation
// act: llama.cpp's, which for GELU is the tanh approximation whatever
// transformers uses), and names maps llama.cpp's tensor names onto the
// Stack's.
func stackFamily(epsKey string, act arch.Activation, names tensorNames,
	config func(f *File, name string, h hparams, s arch.Sizes) (arch.Stack, error)) family {
	return family{
		names: names,
		config: func(f *File, name string) (model, error) {
			h, err := f.hparams(name, epsKey)
			if err != nil {
				return model{}, err
			}
			if h.ropeLinear > 0 {
				return model{}, f.errorf("linear RoPE scaling (%s %g) is not supported for %s", key(name, "rope.scaling.factor"), h.ropeLinear, name)
			}
			s, err := config(f, name, h, h.sizes(act))
			return model{config: s, context: h.context, maxSeq: h.maxSeq}, err
		},
	}
}

// stackNames maps llama.cpp's names onto an arch.Stack's default ones
// (LLaMA's layout, in Hugging Face's names); families add their own.
var stackNames = suffixedNames("layers.",
	map[string]string{"token_embd": "embed_tokens", "output_norm": "norm", "output": "lm_head"},
	map[string]string{
		"attn_norm": "input_layernorm", "attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj",
		"attn_v": "self_attn.v_proj", "attn_output": "self_attn.o_proj", "ffn_norm": "post_attention_layernorm",
		"ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj", "ffn_down": "mlp.down_proj",
	})

// has reports whether the file has the tensor name.
func (f *File) has(name string) bool {
	_, ok := f.Tensor(name)
	return ok
}

// requiredFloat reads a float metadata entry that must be present.
func (f *File) requiredFloat(key string) (float64, error) {
	x, err := f.floatKey(key, 0)
	if err == nil && x == 0 {
		err = f.errorf("missing metadata %s", key)
	}
	return x, err
}
