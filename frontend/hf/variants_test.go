package hf

import (
	"encoding/json"
	"maps"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/tapml/tapml/frontend/arch"
	"github.com/tapml/tapml/frontend/arch/gemma"
	"github.com/tapml/tapml/frontend/arch/llama"
)

// The LLaMA-like and Gemma config.json mappings: transformers' defaults
// for absent keys, null as "none", both RoPE forms, and what is refused.
func TestConfigVariants(t *testing.T) {
	shape := map[string]any{"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2,
		"num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 320, "head_dim": 8}
	parse := func(t *testing.T, arch string, kv map[string]any) (*Config, error) {
		m := maps.Clone(shape)
		m["architectures"] = []string{arch}
		maps.Copy(m, kv)
		data, _ := json.Marshal(m)
		return ParseConfig("config.json", data)
	}
	llamaOf := func(c arch.Config) llama.Config {
		if g, ok := c.(gemma.Config); ok {
			return g.Config
		}
		return c.(llama.Config)
	}
	for _, tc := range []struct {
		name string
		arch string
		kv   map[string]any
		err  string
		// check the parsed configuration.
		check func(t *testing.T, c arch.Config)
	}{
		{"gemma2 defaults", "Gemma2ForCausalLM", nil, "", func(t *testing.T, c arch.Config) {
			g := c.(gemma.Config)
			if g.AttnSoftcap != 50 || g.FinalSoftcap != 30 || g.SlidingWindow != 4096 || !cmp.Equal(g.SlidingLayers, []bool{true, false}) ||
				g.AttnScale != 1.0/16 || !g.PostNorms || !g.TiedEmbeddings {
				t.Errorf("%+v", g)
			}
		}},
		{"gemma2 null caps", "Gemma2ForCausalLM", map[string]any{"attn_logit_softcapping": nil, "final_logit_softcapping": nil, "sliding_window": nil},
			"", func(t *testing.T, c arch.Config) {
				if g := c.(gemma.Config); g.AttnSoftcap != 0 || g.FinalSoftcap != 0 || g.SlidingWindow != 0 {
					t.Errorf("%+v", g)
				}
			}},
		{"gemma3 transformers 4", "Gemma3ForCausalLM", map[string]any{"rope_theta": 1e6, "rope_local_base_freq": 1e4,
			"rope_scaling": map[string]any{"rope_type": "linear", "factor": 8}, "sliding_window_pattern": 2, "num_hidden_layers": 4},
			"", func(t *testing.T, c arch.Config) {
				g := c.(gemma.Config)
				if g.RopeTheta != 1e6 || g.LocalRopeTheta != 1e4 || g.RopeScaling.Type != "linear" || !g.QKNorm || g.AttnSoftcap != 0 ||
					!cmp.Equal(g.SlidingLayers, []bool{true, false, true, false}) {
					t.Errorf("%+v", g)
				}
			}},
		{"gemma3 scaled sliding rope", "Gemma3ForCausalLM", map[string]any{"rope_parameters": map[string]any{
			"full_attention": map[string]any{"rope_type": "default"}, "sliding_attention": map[string]any{"rope_type": "linear", "factor": 2}}},
			`sliding_attention: rope_type "linear": scaling the sliding layers' RoPE is not supported`, nil},
		{"gemma3 both forms", "Gemma3ForCausalLM", map[string]any{"rope_local_base_freq": 1e4, "rope_parameters": map[string]any{
			"full_attention": map[string]any{"rope_type": "default"}}}, `rope_local_base_freq: given with rope_parameters by layer type`, nil},
		{"gemma erf gelu", "GemmaForCausalLM", map[string]any{"hidden_act": "gelu"}, `hidden_act: "gelu" is not supported`, nil},
		{"gemma bidirectional", "Gemma3ForCausalLM", map[string]any{"use_bidirectional_attention": true}, `use_bidirectional_attention: true is not supported`, nil},
		{"mistral default window", "MistralForCausalLM", nil, "", func(t *testing.T, c arch.Config) {
			if l := c.(llama.Config); l.SlidingWindow != 4096 || l.SlidingLayers != nil {
				t.Errorf("%+v", l)
			}
		}},
		{"qwen2 windows from max_window_layers", "Qwen2ForCausalLM", map[string]any{"use_sliding_window": true, "sliding_window": 7, "max_window_layers": 1},
			"", func(t *testing.T, c arch.Config) {
				if l := c.(llama.Config); l.SlidingWindow != 7 || !cmp.Equal(l.SlidingLayers, []bool{false, true}) {
					t.Errorf("%+v", l)
				}
			}},
		{"qwen3 windows off", "Qwen3ForCausalLM", map[string]any{"use_sliding_window": false, "sliding_window": 7,
			"layer_types": []string{"sliding_attention", "sliding_attention"}}, "", func(t *testing.T, c arch.Config) {
			if l := c.(llama.Config); l.SlidingWindow != 0 || !l.QKNorm {
				t.Errorf("%+v", l)
			}
		}},
		{"mixtral defaults", "MixtralForCausalLM", map[string]any{"num_attention_heads": 8, "head_dim": 4, "num_key_value_heads": nil}, "",
			func(t *testing.T, c arch.Config) {
				l := c.(llama.Config)
				if l.KVHeads != 8 || l.RopeTheta != 1e6 || l.SlidingWindow != 0 || l.MaxSeq != MaxSeqCap ||
					l.MoE == nil || l.MoE.Experts != 8 || l.MoE.TopK != 2 || l.MoE.Hidden != 64 || !l.MoE.NormTopK {
					t.Errorf("%+v %+v", l, l.MoE)
				}
			}},
		{"mixtral window", "MixtralForCausalLM", map[string]any{"sliding_window": 7}, "", func(t *testing.T, c arch.Config) {
			if l := c.(llama.Config); l.SlidingWindow != 7 || l.SlidingLayers != nil {
				t.Errorf("%+v", l)
			}
		}},
		{"qwen3_moe q/k norms", "Qwen3MoeForCausalLM", nil, "", func(t *testing.T, c arch.Config) {
			if l := c.(llama.Config); !l.QKNorm || l.QKVBias || l.MoE == nil || l.MoE.SharedHidden != 0 {
				t.Errorf("%+v", l)
			}
		}},
		{"qwen2_moe windows refused", "Qwen2MoeForCausalLM", map[string]any{"use_sliding_window": true}, "use_sliding_window: true is not supported", nil},
		{"phi3 su", "Phi3ForCausalLM", map[string]any{"max_position_embeddings": 64, "original_max_position_embeddings": 16, "rope_theta": 1e4,
			"rope_scaling": map[string]any{"type": "su", "short_factor": []float64{1, 1, 1, 1}, "long_factor": []float64{1, 2, 3, 4}, "original_max_position_embeddings": 8}},
			"", func(t *testing.T, c arch.Config) {
				// The top-level original context wins, and the factor is 64/16.
				if s := c.(llama.Config).RopeScaling; s.Type != "longrope" || s.OriginalMax != 16 || s.Factor != 4 {
					t.Errorf("%+v", s)
				}
			}},
		{"phi3 partial rotary", "Phi3ForCausalLM", map[string]any{"partial_rotary_factor": 0.5}, "", func(t *testing.T, c arch.Config) {
			if l := c.(llama.Config); l.RopeDims != 4 || !l.FusedQKV || !l.FusedGateUp {
				t.Errorf("%+v", l)
			}
		}},
		{"dynamic context", "LlamaForCausalLM", map[string]any{"max_position_embeddings": 16,
			"rope_parameters": map[string]any{"rope_type": "dynamic", "factor": 2, "rope_theta": 1e4}}, "", func(t *testing.T, c arch.Config) {
			if l := llamaOf(c); l.MaxSeq != MaxSeqCap || l.RopeScaling.OriginalMax != 16 {
				t.Errorf("%+v", l)
			}
		}},
		{"yarn defaults", "LlamaForCausalLM", map[string]any{"max_position_embeddings": 64,
			"rope_parameters": map[string]any{"rope_type": "yarn", "rope_theta": 1e4, "original_max_position_embeddings": 16, "beta_fast": 0}},
			"", func(t *testing.T, c arch.Config) {
				if s := llamaOf(c).RopeScaling; s.Factor != 4 || s.BetaFast != 0 || !s.Truncate {
					t.Errorf("%+v", s)
				}
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := parse(t, tc.arch, tc.kv)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, c.Model)
		})
	}
}
