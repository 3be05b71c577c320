package hf

import (
	"path/filepath"
	"testing"

	"github.com/tapml/tapml/ir"
)

// The recurrent families read their config.json as transformers does, and
// refuse what they do not implement by name.
func TestRecurrentConfig(t *testing.T) {
	for _, tc := range []struct {
		fixture string
		name    string
		edit    func(map[string]any)
		err     string
	}{
		{"rwkv", "as written", func(map[string]any) {}, ""},
		{"rwkv", "attention size", func(m map[string]any) { m["attention_hidden_size"] = 16 }, "attention_hidden_size: 16 differs from hidden_size 32"},
		{"rwkv", "no intermediate size", func(m map[string]any) { m["intermediate_size"] = nil }, `tensor "rwkv.blocks.0.feed_forward.key.weight" has shape [64 32], but config.json implies [128 32]`},
		{"rwkv", "tied (head.weight left unread)", func(m map[string]any) { m["tie_word_embeddings"] = true }, ""},
		{"mamba", "as written", func(map[string]any) {}, ""},
		{"mamba", "intermediate size ignored", func(m map[string]any) { m["intermediate_size"] = 7 }, ""},
		{"mamba", "expand", func(m map[string]any) { m["expand"] = 3 }, `"backbone.layers.0.mixer.A_log" has shape [64 8], but config.json implies [96 8]`},
		{"mamba", "time step rank", func(m map[string]any) { m["time_step_rank"] = 4 }, `"backbone.layers.0.mixer.dt_proj.weight" has shape [64 2], but config.json implies [64 4]`},
		{"mamba", "conv kernel", func(m map[string]any) { m["conv_kernel"] = 1 }, "conv_kernel: 1 is out of range"},
		{"mamba", "activation", func(m map[string]any) { m["hidden_act"] = "gelu" }, `hidden_act: "gelu" is not supported`},
		{"mamba", "untied", func(m map[string]any) { m["tie_word_embeddings"] = false }, `missing tensor "lm_head.weight"`},
	} {
		t.Run(tc.fixture+" "+tc.name, func(t *testing.T) {
			dir := copyFixture(t, tc.fixture)
			editJSON(t, filepath.Join(dir, ConfigFile), tc.edit)
			if m := loadWant(t, dir, tc.err); m != nil && (m.Meta["max_seq"] == "" || countOps(m, ir.OpAttention) != 0) {
				t.Errorf("meta max_seq %q, %d attention nodes", m.Meta["max_seq"], countOps(m, ir.OpAttention))
			}
		})
	}
}
