package hf

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/tapml/tapml/frontend/arch"
	"github.com/tapml/tapml/frontend/arch/llama"
)

// llamaFamily is LlamaForCausalLM, or Qwen2ForCausalLM (model type
// "qwen2": q/k/v biases and a longer default context), over arch/llama
// with Hugging Face's "half" RoPE layout.
func llamaFamily(archName, modelType string) family {
	return family{
		arch: archName, modelType: modelType,
		config: func(o jsonObject, c *Config) (arch.Config, error) { return o.llama(c, modelType == "qwen2") },
		tensor: func(canon string, _ arch.Config, _ *Checkpoint) string { return LlamaTensorName(canon) },
		unread: func(name string, m arch.Config) bool {
			// Old checkpoints store RoPE's inverse frequencies; a tied
			// classifier may be stored although it is not read.
			return rotaryBuffer.MatchString(name) || (m.(llama.Config).TiedEmbeddings && name == "lm_head.weight")
		},
	}
}

var rotaryBuffer = regexp.MustCompile(`^model\.layers\.[0-9]+\.self_attn\.rotary_emb\.inv_freq$`)

func (o jsonObject) llama(c *Config, qwen bool) (arch.Config, error) {
	l := llama.Config{Vocab: c.Vocab}
	var err error
	get := o.ints(&err)
	get(&l.Dim, "hidden_size", -1, 1, bigDim)
	get(&l.HiddenDim, "intermediate_size", -1, 1, bigDim)
	get(&l.Layers, "num_hidden_layers", -1, 1, bigLayer)
	get(&l.Heads, "num_attention_heads", -1, 1, bigDim)
	get(&l.KVHeads, "num_key_value_heads", int64(l.Heads), 1, bigDim)
	defPos := int64(2048)
	if qwen {
		defPos = 32768
	}
	get(&c.MaxPositions, "max_position_embeddings", defPos, 1, bigPos)
	get(&l.HeadSize, "head_dim", 0, 0, bigDim)
	if err != nil {
		return nil, err
	}
	if l.HeadSize == 0 && l.Dim%l.Heads != 0 {
		return nil, fmt.Errorf("%s: hidden_size %d is not a multiple of num_attention_heads %d", o.file, l.Dim, l.Heads)
	}
	if l.HeadSize == l.Dim/l.Heads && l.Dim%l.Heads == 0 {
		l.HeadSize = 0 // the default; keep the model's meta as a plain LLaMA's
	}
	if l.Heads%l.KVHeads != 0 {
		return nil, fmt.Errorf("%s: num_attention_heads %d is not a multiple of num_key_value_heads %d", o.file, l.Heads, l.KVHeads)
	}
	if l.NormEps, err = o.float("rms_norm_eps", 1e-6); err != nil {
		return nil, err
	}
	if l.RopeTheta, err = o.ropeTheta(); err != nil {
		return nil, err
	}
	if l.TiedEmbeddings, err = o.bool("tie_word_embeddings", false); err != nil {
		return nil, err
	}
	act, err := o.string("hidden_act", "silu")
	if err != nil {
		return nil, err
	}
	if act != "silu" {
		return nil, o.errorf("hidden_act", "%q is not supported (only silu)", act)
	}
	for _, u := range []struct {
		key, why string
		accepted []string
	}{
		{"rope_scaling", "only plain RoPE is implemented", nil},
		{"attention_bias", "the graph has no o_proj bias", []string{"false"}},
		{"mlp_bias", "the graph has no MLP biases", []string{"false"}},
		{"partial_rotary_factor", "only full rotary embeddings", []string{"1", "1.0"}},
		{"use_sliding_window", "sliding-window attention is not implemented", []string{"false"}},
		{"attention_dropout", "dropout at inference", []string{"0", "0.0"}},
	} {
		if err := o.unsupported(u.key, u.why, u.accepted...); err != nil {
			return nil, err
		}
	}
	l.MaxSeq = min(c.MaxPositions, MaxSeqCap)
	l.RopeStyle = "half"
	l.QKVBias = qwen
	return l, nil
}

// llamaNames maps arch/llama's per-layer weight names to Hugging Face's.
var llamaNames = map[string]string{
	"attention_norm":  "input_layernorm.weight",
	"attention.wq":    "self_attn.q_proj.weight",
	"attention.wk":    "self_attn.k_proj.weight",
	"attention.wv":    "self_attn.v_proj.weight",
	"attention.bq":    "self_attn.q_proj.bias",
	"attention.bk":    "self_attn.k_proj.bias",
	"attention.bv":    "self_attn.v_proj.bias",
	"attention.wo":    "self_attn.o_proj.weight",
	"ffn_norm":        "post_attention_layernorm.weight",
	"feed_forward.w1": "mlp.gate_proj.weight",
	"feed_forward.w2": "mlp.down_proj.weight",
	"feed_forward.w3": "mlp.up_proj.weight",
}

// LlamaTensorName returns the Hugging Face tensor name of an arch/llama
// weight name ("layers.3.attention.wq" -> "model.layers.3.self_attn.q_proj.weight").
func LlamaTensorName(canon string) string {
	switch canon {
	case "tok_embeddings":
		return "model.embed_tokens.weight"
	case "norm":
		return "model.norm.weight"
	case "output":
		return "lm_head.weight"
	}
	if rest, ok := strings.CutPrefix(canon, "layers."); ok {
		if num, part, ok := strings.Cut(rest, "."); ok {
			if hf, ok := llamaNames[part]; ok {
				return "model.layers." + num + "." + hf
			}
		}
	}
	return canon
}
