package hf

import (
	"cmp"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"

	"github.com/tapml/tapml/frontend/arch"
	"github.com/tapml/tapml/frontend/arch/llama"
)

// A llamaVariant is one of the LLaMA-like model types: what tells its
// config.json and checkpoint apart from LLaMA's.
type llamaVariant struct {
	arch, modelType string
	defPos          int64 // max_position_embeddings when config.json has none
	defKVHeads      int64 // num_key_value_heads when config.json has none (0: num_attention_heads)
	qkvBias         bool  // q/k/v biases (Qwen2)
	qkNorm          bool  // per-head q and k RMSNorms (Qwen3)
	fused           bool  // qkv_proj and gate_up_proj (Phi-3)
	window          windowRule
	defWindow       int64 // sliding_window when config.json has none (everyLayer)
	rope            ropeRules
}

// windowRule is how a model type's config.json sets sliding windows.
type windowRule int

const (
	noWindow    windowRule = iota // LLaMA, Qwen MoE: none (use_sliding_window must be false)
	everyLayer                    // Mistral, Mixtral, Phi-3: sliding_window (or null) for every layer
	qwenWindows                   // Qwen2, Qwen3: use_sliding_window, max_window_layers, layer_types
)

// The LLaMA-like variants.
var (
	llamaModel   = llamaVariant{arch: "LlamaForCausalLM", modelType: "llama", defPos: 2048}
	mistralModel = llamaVariant{arch: "MistralForCausalLM", modelType: "mistral", defPos: 131072, window: everyLayer, defWindow: 4096}
	phi3Model    = llamaVariant{arch: "Phi3ForCausalLM", modelType: "phi3", defPos: 4096, fused: true, window: everyLayer,
		rope: ropeRules{renames: map[string]string{"su": "longrope", "yarn": "longrope"}, originalMax: 4096}}
	qwen2Model = llamaVariant{arch: "Qwen2ForCausalLM", modelType: "qwen2", defPos: 32768, qkvBias: true, window: qwenWindows}
	qwen3Model = llamaVariant{arch: "Qwen3ForCausalLM", modelType: "qwen3", defPos: 32768, qkNorm: true, window: qwenWindows}
)

// family is the variant over arch/llama with Hugging Face's "half" RoPE
// layout.
func (v llamaVariant) family() family {
	return family{
		arch: v.arch, modelType: v.modelType,
		config: func(o jsonObject, c *Config) (arch.Config, error) { return o.llama(c, v) },
		tensor: func(canon string, _ arch.Config, _ *Checkpoint) string { return LlamaTensorName(canon) },
		unread: func(name string, m arch.Config) bool { return llamaUnread(name, m.(llama.Config).TiedEmbeddings) },
	}
}

// llamaUnread: old checkpoints store RoPE's inverse frequencies; a tied
// classifier may be stored although it is not read.
func llamaUnread(name string, tied bool) bool {
	return rotaryBuffer.MatchString(name) || (tied && name == "lm_head.weight")
}

var rotaryBuffer = regexp.MustCompile(`^model\.layers\.[0-9]+\.self_attn\.rotary_emb\.inv_freq$`)

// llamaDefaults are a model type's values of keys config.json may leave
// out (its transformers configuration class's defaults).
type llamaDefaults struct {
	pos, headDim int64 // headDim 0: hidden_size / num_attention_heads
	kvHeads      int64 // 0: num_attention_heads
	tied         bool
}

// llamaBase reads what every LLaMA-like config.json says the same way:
// the shapes, the norm epsilon, the context and tied embeddings.
func (o jsonObject) llamaBase(c *Config, def llamaDefaults) (llama.Config, error) {
	l := llama.Config{Vocab: c.Vocab, RopeStyle: "half"}
	var err error
	get := o.ints(&err)
	get(&l.Dim, "hidden_size", -1, 1, bigDim)
	get(&l.HiddenDim, "intermediate_size", -1, 1, bigDim)
	get(&l.Layers, "num_hidden_layers", -1, 1, bigLayer)
	get(&l.Heads, "num_attention_heads", -1, 1, bigDim)
	get(&l.KVHeads, "num_key_value_heads", cmp.Or(def.kvHeads, int64(l.Heads)), 1, bigDim)
	get(&c.MaxPositions, "max_position_embeddings", def.pos, 1, bigPos)
	get(&l.HeadSize, "head_dim", def.headDim, 0, bigDim)
	if err != nil {
		return l, err
	}
	if l.HeadSize == 0 && l.Dim%l.Heads != 0 {
		return l, fmt.Errorf("%s: hidden_size %d is not a multiple of num_attention_heads %d", o.file, l.Dim, l.Heads)
	}
	if l.HeadSize == l.Dim/l.Heads && l.Dim%l.Heads == 0 {
		l.HeadSize = 0 // the default; keep the model's meta as a plain LLaMA's
	}
	if l.Heads%l.KVHeads != 0 {
		return l, fmt.Errorf("%s: num_attention_heads %d is not a multiple of num_key_value_heads %d", o.file, l.Heads, l.KVHeads)
	}
	if l.NormEps, err = o.float("rms_norm_eps", 1e-6); err != nil {
		return l, err
	}
	if l.TiedEmbeddings, err = o.bool("tie_word_embeddings", def.tied); err != nil {
		return l, err
	}
	l.MaxSeq = min(c.MaxPositions, MaxSeqCap)
	return l, nil
}

// setRope reads RoPE's settings into l.
func (o jsonObject) setRope(l *llama.Config, c *Config, rules ropeRules) error {
	r, err := o.rope(c.MaxPositions, rules)
	if err != nil {
		return err
	}
	useRope(l, r)
	if r.partial != 1 {
		if rules.originalMax == 0 {
			// transformers' LLaMA-like models other than Phi-3 rotate whole heads.
			return o.errorf("partial_rotary_factor", "%g is not supported (only Phi-3 rotates part of each head)", r.partial)
		}
		if l.RopeDims = int(float64(l.HeadDim()) * r.partial); l.RopeDims == l.HeadDim() {
			l.RopeDims = 0
		}
	}
	return nil
}

// useRope sets l's RoPE base and scaling.
func useRope(l *llama.Config, r ropeConfig) {
	l.RopeTheta, l.RopeScaling = r.theta, r.scaling
	if r.scaling.Type == "dynamic" {
		// Dynamic NTK exists to run past max_position_embeddings: its
		// base grows with the sequence, so the cache gets the cap.
		l.MaxSeq = MaxSeqCap
	}
}

// llama reads the config.json of a LLaMA-like variant.
func (o jsonObject) llama(c *Config, v llamaVariant) (arch.Config, error) {
	l, err := o.llamaBase(c, llamaDefaults{pos: v.defPos, kvHeads: v.defKVHeads})
	if err != nil {
		return nil, err
	}
	if err := o.setRope(&l, c, v.rope); err != nil {
		return nil, err
	}
	if err := o.unsupported("hidden_act", "only silu", `"silu"`); err != nil {
		return nil, err
	}
	for _, u := range []struct {
		key, why string
		accepted []string
	}{
		{"attention_bias", "the graph has no o_proj bias", []string{"false"}},
		{"mlp_bias", "the graph has no MLP biases", []string{"false"}},
		{"attention_dropout", "dropout at inference", []string{"0", "0.0"}},
	} {
		if err := o.unsupported(u.key, u.why, u.accepted...); err != nil {
			return nil, err
		}
	}
	if err := o.windows(&l, v.window, v.defWindow); err != nil {
		return nil, err
	}
	l.QKVBias, l.QKNorm, l.FusedQKV, l.FusedGateUp = v.qkvBias, v.qkNorm, v.fused, v.fused
	return l, nil
}

// windows reads the sliding-window settings by the variant's rule.
func (o jsonObject) windows(l *llama.Config, rule windowRule, def int64) error {
	var err error
	switch rule {
	case noWindow:
		return o.unsupported("use_sliding_window", "sliding-window attention is not implemented for this architecture", "false")
	case everyLayer:
		l.SlidingWindow, err = o.nullableInt("sliding_window", def)
		return err
	}
	// Qwen: a window only with use_sliding_window, on the layers that
	// layer_types marks (by default those from max_window_layers on).
	use, err := o.bool("use_sliding_window", false)
	if err != nil || !use {
		return err
	}
	if l.SlidingWindow, err = o.int("sliding_window", 4096, 0, bigPos); err != nil {
		return err
	}
	from, err := o.int("max_window_layers", 28, 0, bigLayer)
	if err != nil {
		return err
	}
	l.SlidingLayers = make([]bool, l.Layers)
	for i := range l.SlidingLayers {
		l.SlidingLayers[i] = i >= from
	}
	return o.layerTypes(l)
}

// layerTypes reads layer_types, when present, into l.SlidingLayers: a
// list of "full_attention" and "sliding_attention", one per layer.
func (o jsonObject) layerTypes(l *llama.Config) error {
	if !o.present("layer_types") {
		return nil
	}
	var types []string
	if err := json.Unmarshal(o.m["layer_types"], &types); err != nil || len(types) != l.Layers {
		return o.errorf("layer_types", "want %d strings (one per layer), got %s", l.Layers, o.m["layer_types"])
	}
	l.SlidingLayers = make([]bool, l.Layers)
	for i, t := range types {
		switch t {
		case "full_attention":
		case "sliding_attention":
			l.SlidingLayers[i] = true
		default:
			return o.errorf("layer_types", "layer %d is %q (supported: full_attention, sliding_attention)", i, t)
		}
	}
	return nil
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
	// Phi-3's fused projections, Qwen3's and Gemma 3's q/k norms.
	"attention.wqkv":   "self_attn.qkv_proj.weight",
	"feed_forward.w13": "mlp.gate_up_proj.weight",
	"attention.q_norm": "self_attn.q_norm.weight",
	"attention.k_norm": "self_attn.k_norm.weight",
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
