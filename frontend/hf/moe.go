package hf

import (
	"encoding/json"
	"strconv"
	"strings"

	"github.com/tapml/tapml/frontend/arch"
	"github.com/tapml/tapml/frontend/arch/llama"
)

// The mixture-of-experts variants: arch/llama with a mixture-of-experts
// feed-forward. Mixtral's attention is Mistral's (its sliding window
// included); Qwen2-MoE has q/k/v biases and a shared expert with a sigmoid
// gate, Qwen3-MoE Qwen3's q/k norms. Defaults are transformers'
// (MixtralConfig, Qwen2MoeConfig, Qwen3MoeConfig).
var (
	mixtralModel = llamaVariant{arch: "MixtralForCausalLM", modelType: "mixtral", defPos: 4096 * 32, defKVHeads: 8,
		window: everyLayer, rope: ropeRules{theta: 1e6}}
	qwen2MoeModel = llamaVariant{arch: "Qwen2MoeForCausalLM", modelType: "qwen2_moe", defPos: 32768, qkvBias: true}
	qwen3MoeModel = llamaVariant{arch: "Qwen3MoeForCausalLM", modelType: "qwen3_moe", defPos: 32768, qkNorm: true}
)

// moeFamily is the variant as family makes it, with the experts' weights,
// one tensor per expert in the checkpoint, stacked into the family's
// [E, ...] weights.
func (v llamaVariant) moeFamily() family {
	f := v.family()
	f.config = func(o jsonObject, c *Config) (arch.Config, error) { return o.moe(c, v) }
	f.tensor = func(canon string, _ arch.Config, _ *Checkpoint) string { return moeTensorName(canon, v.modelType) }
	f.stacked = func(canon string, m arch.Config) []string {
		num, part, ok := moeWeight(canon)
		if !ok || part != "w1" && part != "w2" && part != "w3" {
			return nil
		}
		names := make([]string, m.(llama.Config).MoE.Experts)
		for e := range names {
			names[e] = moeExpertName(num, e, part, v.modelType)
		}
		return names
	}
	return f
}

// moeWeight splits a canonical MoE weight name "layers.N.moe.PART".
func moeWeight(canon string) (num, part string, ok bool) {
	rest, ok := strings.CutPrefix(canon, "layers.")
	if !ok {
		return "", "", false
	}
	num, part, ok = strings.Cut(rest, ".moe.")
	return num, part, ok
}

// qwenExpert names an expert's projections: Mixtral's w1, w2 and w3 are
// Qwen's gate, down and up.
var qwenExpert = map[string]string{"w1": "gate_proj", "w2": "down_proj", "w3": "up_proj"}

// moeExpertName is the checkpoint's tensor of expert e's projection part
// (w1, w2 or w3) in layer num.
func moeExpertName(num string, e int, part, modelType string) string {
	if modelType == "mixtral" {
		return "model.layers." + num + ".block_sparse_moe.experts." + strconv.Itoa(e) + "." + part + ".weight"
	}
	return "model.layers." + num + ".mlp.experts." + strconv.Itoa(e) + "." + qwenExpert[part] + ".weight"
}

// moeTensorName maps the canonical names of the MoE families that are not
// stacked: the router, the shared expert and its gate, and the LLaMA
// names (q/k norms included).
func moeTensorName(canon, modelType string) string {
	if num, part, ok := moeWeight(canon); ok {
		switch {
		case part == "router" && modelType == "mixtral":
			return "model.layers." + num + ".block_sparse_moe.gate.weight"
		case part == "router":
			return "model.layers." + num + ".mlp.gate.weight"
		case part == "shared_gate":
			return "model.layers." + num + ".mlp.shared_expert_gate.weight"
		case strings.HasPrefix(part, "shared."):
			return "model.layers." + num + ".mlp.shared_expert." + qwenExpert[strings.TrimPrefix(part, "shared.")] + ".weight"
		}
	}
	return LlamaTensorName(canon)
}

// moe reads a MoE model's config.json: the LLaMA part as llama does, then
// the experts.
func (o jsonObject) moe(c *Config, v llamaVariant) (arch.Config, error) {
	ac, err := o.llama(c, v)
	if err != nil {
		return nil, err
	}
	l := ac.(llama.Config)
	m := &llama.MoE{Hidden: l.HiddenDim, NormTopK: true}
	get := o.ints(&err)
	if v.modelType == "mixtral" {
		get(&m.Experts, "num_local_experts", 8, 1, bigLayer)
		get(&m.TopK, "num_experts_per_tok", 2, 1, bigLayer)
		if err != nil {
			return nil, err
		}
		l.MoE = m
		return l, nil
	}
	qwen2 := v.modelType == "qwen2_moe"
	experts, topK, hidden := int64(128), int64(8), int64(768)
	key := "num_experts"
	if qwen2 {
		experts, topK, hidden = 60, 4, 1408
	} else if o.present("num_local_experts") {
		key = "num_local_experts" // transformers 5's name (num_experts maps to it)
	}
	get(&m.Experts, key, experts, 1, bigLayer)
	get(&m.TopK, "num_experts_per_tok", topK, 1, bigLayer)
	get(&m.Hidden, "moe_intermediate_size", hidden, 1, bigDim)
	if qwen2 {
		get(&m.SharedHidden, "shared_expert_intermediate_size", 5632, 1, bigDim)
	}
	var step int
	get(&step, "decoder_sparse_step", 1, 1, bigLayer)
	if err != nil {
		return nil, err
	}
	if m.NormTopK, err = o.bool("norm_topk_prob", false); err != nil {
		return nil, err
	}
	only, err := o.layerList("mlp_only_layers", l.Layers)
	if err != nil {
		return nil, err
	}
	for i := range l.Layers {
		if only[i] || (i+1)%step != 0 {
			m.Dense = append(m.Dense, i)
		}
	}
	if qwen2 {
		if l.QKVBias, err = o.bool("qkv_bias", true); err != nil {
			return nil, err
		}
		if err := o.fullAttentionOnly(); err != nil {
			return nil, err
		}
	}
	l.MoE = m
	return l, nil
}

// layerList reads a list of layer numbers below layers (absent: none) as
// a set.
func (o jsonObject) layerList(key string, layers int) ([]bool, error) {
	set := make([]bool, layers)
	if !o.present(key) {
		return set, nil
	}
	var list []int
	if err := json.Unmarshal(o.m[key], &list); err != nil {
		return nil, o.errorf(key, "want a list of layer numbers, got %s", o.m[key])
	}
	for _, l := range list {
		if l < 0 || l >= layers {
			return nil, o.errorf(key, "layer %d is out of range [0, %d)", l, layers)
		}
		set[l] = true
	}
	return set, nil
}

// fullAttentionOnly refuses layer_types other than full attention.
func (o jsonObject) fullAttentionOnly() error {
	if !o.present("layer_types") {
		return nil
	}
	var types []string
	if err := json.Unmarshal(o.m["layer_types"], &types); err != nil {
		return o.errorf("layer_types", "want a list of strings, got %s", o.m["layer_types"])
	}
	for i, t := range types {
		if t != "full_attention" {
			return o.errorf("layer_types", "layer %d is %q: only full attention is implemented", i, t)
		}
	}
	return nil
}
