package hf

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/tapml/tapml/ir"
)

// copyFixture copies a fixture's config.json and weights into a fresh
// folder, so a test may edit the config.
func copyFixture(t *testing.T, name string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), name)
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{ConfigFile, WeightsFile} {
		data, err := os.ReadFile(filepath.Join("testdata", "models", name, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestStackConfigs: the config.json of each family assembled from parts
// is read as its transformers class reads it; what the graph does not
// implement is an error naming the file and the key.
func TestStackConfigs(t *testing.T) {
	for _, tc := range []struct {
		fixture, name string
		edit          func(map[string]any)
		err           string // "" loads
	}{
		{"phi", "activation", func(m map[string]any) { m["hidden_act"] = "relu" }, `hidden_act: "relu" is not supported (supported: silu`},
		{"phi", "exact gelu", func(m map[string]any) { m["hidden_act"] = "gelu" }, ""},
		{"phi", "qk norm", func(m map[string]any) { m["qk_layernorm"] = true }, "qk_layernorm: true is not supported"},
		{"phi", "tied", func(m map[string]any) { m["tie_word_embeddings"] = true }, "tie_word_embeddings: true is not supported"},
		{"phi", "no rotary dims", func(m map[string]any) {
			delete(m, "rope_parameters")
			m["partial_rotary_factor"] = 0.1
		}, "partial_rotary_factor: 0.1 of the head dim 8 rotates 0 dims"},
		{"phi", "rotary factors differ", func(m map[string]any) { m["partial_rotary_factor"] = 0.25 }, "partial_rotary_factor: 0.25 differs from rope_parameters' 0.5"},
		{"phi", "head_dim", func(m map[string]any) { m["head_dim"] = 16 }, "head_dim: 16 is not supported"},
		{"phi", "head_dim as computed", func(m map[string]any) { m["head_dim"] = 8 }, ""},
		{"phi", "rope_scaling", func(m map[string]any) { m["rope_scaling"] = map[string]any{"type": "linear", "factor": 2} }, "rope_scaling"},
		{"stablelm", "parallel", func(m map[string]any) { m["use_parallel_residual"] = true }, "use_parallel_residual: true is not supported"},
		{"stablelm", "no qkv bias", func(m map[string]any) { m["use_qkv_bias"] = false }, "tensors the StableLmForCausalLM graph does not use"},
		{"olmo2", "attention bias", func(m map[string]any) { m["attention_bias"] = true }, "attention_bias: true is not supported"},
		{"granite", "logits scaling", func(m map[string]any) { m["logits_scaling"] = 0 }, "logits_scaling: want a positive finite number"},
		{"cohere", "qk norm", func(m map[string]any) { m["use_qk_norm"] = true }, "use_qk_norm: true is not supported"},
		{"gpt_neox", "sequential", func(m map[string]any) { m["use_parallel_residual"] = false }, "use_parallel_residual: false is not supported"},
		{"falcon", "new architecture", func(m map[string]any) { m["new_decoder_architecture"] = true }, "new_decoder_architecture: true is not supported"},
		{"falcon", "alibi", func(m map[string]any) { m["alibi"] = true }, "alibi: true is not supported"},
		{"falcon", "multi-head", func(m map[string]any) { m["multi_query"] = false }, "multi_query: false is not supported"},
		{"falcon", "old width key", func(m map[string]any) { m["n_embed"] = m["hidden_size"]; delete(m, "hidden_size") }, ""},
		{"falcon", "default ffn", func(m map[string]any) { delete(m, "ffn_hidden_size") }, ""}, // 4·hidden_size, as the weights
		{"starcoder2", "sliding window", func(map[string]any) {}, ""},
		{"starcoder2", "a window of 0", func(m map[string]any) { m["sliding_window"] = 0 }, "sliding_window"},
		{"starcoder2", "a window that never bites", func(m map[string]any) { m["sliding_window"] = 128 }, ""},
		{"starcoder2", "no window", func(m map[string]any) { m["sliding_window"] = nil }, ""},
		{"gpt_bigcode", "multi-head", func(m map[string]any) { m["multi_query"] = false }, "multi_query: false is not supported"},
	} {
		t.Run(tc.fixture+"/"+tc.name, func(t *testing.T) {
			dir := copyFixture(t, tc.fixture)
			editJSON(t, filepath.Join(dir, ConfigFile), tc.edit)
			loadWant(t, dir, tc.err)
		})
	}
}

// TestGPTNeoXTransformers4Config: Pythia's config.json, written by
// transformers 4, names the rotary fraction rotary_pct and the RoPE base
// rotary_emb_base (values other than the defaults here, to be seen read).
func TestGPTNeoXTransformers4Config(t *testing.T) {
	dir := copyFixture(t, "gpt_neox")
	editJSON(t, filepath.Join(dir, ConfigFile), func(m map[string]any) {
		delete(m, "rope_parameters")
		delete(m, "partial_rotary_factor")
		m["rotary_pct"], m["rotary_emb_base"] = 0.5, 500
	})
	m, _, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	ropes := 0
	for _, n := range m.Func("decode").Nodes {
		if n.Op == ir.OpRope {
			ropes++
			if d, th := n.Attrs.Int("dims"), n.Attrs.Float("theta"); d != 4 || th != 500 {
				t.Errorf("%s: rope dims %d, theta %g; want 4 (half of 8), 500", n.Prov, d, th)
			}
		}
	}
	if ropes != 4 {
		t.Errorf("%d rope nodes, want 4 (q and k of 2 layers)", ropes)
	}
}
