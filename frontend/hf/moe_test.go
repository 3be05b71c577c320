package hf

import (
	"path/filepath"
	"testing"

	"github.com/tapml/tapml/ir"
)

// The MoE keys of config.json decide the graph, and the settings it does
// not implement are refused by name.
func TestMoEConfig(t *testing.T) {
	for _, tc := range []struct {
		fixture string
		name    string
		edit    func(map[string]any)
		err     string
	}{
		{"mixtral", "as written", func(map[string]any) {}, ""},
		{"mixtral", "sliding window", func(m map[string]any) { m["sliding_window"] = 4 }, ""},
		{"qwen3_moe", "sliding window", func(m map[string]any) { m["use_sliding_window"] = true }, "use_sliding_window: true is not supported"},
		{"mixtral", "top k above experts", func(m map[string]any) { m["num_experts_per_tok"] = 5 }, "5 experts per token exceed the 4 experts"},
		{"mixtral", "fewer experts", func(m map[string]any) { m["num_local_experts"] = 3 }, `"model.layers.0.block_sparse_moe.gate.weight" has shape [4 32], but config.json implies [3 32]`},
		{"qwen2_moe", "sliding layer", func(m map[string]any) { m["layer_types"] = []string{"full_attention", "sliding_attention"} }, `layer 1 is "sliding_attention"`},
		{"qwen2_moe", "dense layer out of range", func(m map[string]any) { m["mlp_only_layers"] = []int{7} }, "mlp_only_layers: layer 7 is out of range [0, 2)"},
		{"qwen2_moe", "no qkv bias", func(m map[string]any) { m["qkv_bias"] = false }, "self_attn.q_proj.bias"},
		{"qwen3_moe", "sparse step 2", func(m map[string]any) { m["decoder_sparse_step"] = 2 }, `missing tensor "model.layers.0.mlp.gate_proj.weight"`},
		{"qwen3_moe", "num_experts", func(m map[string]any) { delete(m, "num_local_experts"); m["num_experts"] = 4 }, ""},
	} {
		t.Run(tc.fixture+" "+tc.name, func(t *testing.T) {
			dir := copyFixture(t, tc.fixture)
			editJSON(t, filepath.Join(dir, ConfigFile), tc.edit)
			if m := loadWant(t, dir, tc.err); m != nil {
				if n := countOps(m, ir.OpExpertMatmul); n != 2*3*2 {
					t.Errorf("%d expert_matmul nodes, want 3 per layer and function", n)
				}
			}
		})
	}
}

func countOps(m *ir.Module, op ir.Op) int {
	n := 0
	for _, f := range m.Funcs {
		for _, nd := range f.Nodes {
			if nd.Op == op {
				n++
			}
		}
	}
	return n
}
