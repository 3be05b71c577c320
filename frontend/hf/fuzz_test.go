package hf

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzParseConfig: config.json parsing never panics, and an accepted
// config describes a buildable model.
func FuzzParseConfig(f *testing.F) {
	f.Add([]byte(`{"architectures": ["LlamaForCausalLM"], "hidden_size": 16, "intermediate_size": 24, "num_hidden_layers": 2,
		"num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 32, "max_position_embeddings": 16, "rope_scaling": null}`))
	f.Add([]byte(`{"model_type": "qwen2", "hidden_size": 16, "intermediate_size": 24, "num_hidden_layers": 1, "head_dim": 6,
		"num_attention_heads": 4, "vocab_size": 32, "bos_token_id": [1, 2], "eos_token_id": 2.0}`))
	f.Add([]byte(`{"architectures": ["GPT2LMHeadModel"], "n_embd": 8, "n_layer": 1, "n_head": 2, "vocab_size": 10, "n_positions": 8, "n_inner": null}`))
	f.Add([]byte(`[1, 2]`))
	for _, name := range []string{"mamba", "mixtral", "qwen2_moe", "qwen3_moe", "rwkv"} {
		data, err := os.ReadFile(filepath.Join("testdata", "models", name, ConfigFile))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := ParseConfig("config.json", data)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "config.json: ") {
				t.Fatalf("error does not name the file: %v", err)
			}
			return
		}
		if err := c.Model.Validate(); err != nil {
			t.Fatalf("accepted config does not validate: %v", err)
		}
	})
}

// FuzzParseIndex: index parsing never panics, and accepted file names are
// plain .safetensors names.
func FuzzParseIndex(f *testing.F) {
	f.Add([]byte(`{"metadata": {"total_size": 10}, "weight_map": {"a": "model-00001-of-00002.safetensors", "b": "model-00002-of-00002.safetensors"}}`))
	f.Add([]byte(`{"weight_map": {"a": "../x.safetensors"}}`))
	f.Add([]byte(`{"weight_map": []}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		wm, err := ParseIndex("index.json", data)
		if err != nil {
			return
		}
		for k, v := range wm {
			if k == "" || strings.ContainsAny(v, "/\\") || !strings.HasSuffix(v, ".safetensors") {
				t.Fatalf("accepted %q -> %q", k, v)
			}
		}
	})
}

// FuzzTokenizerJSON: loading arbitrary tokenizer.json never panics; an
// accepted tokenizer encodes and decodes text without panicking and gives
// only ids of its vocabulary.
func FuzzTokenizerJSON(f *testing.F) {
	f.Add(byteLevelJSON(f, gpt2Pre), "hello the world")
	f.Add(spJSON(f, true, true), "ab a é")
	f.Add(spJSON(f, false, false), "<s>ba<unk>")
	f.Add([]byte(`{"model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2}, "merges": [["a", "b"]]},
		"added_tokens": [{"id": 5, "content": "x", "lstrip": true, "rstrip": true, "single_word": true}],
		"pre_tokenizer": {"type": "Metaspace", "replacement": "_", "split": true}}`), "ab x ab")
	f.Fuzz(func(t *testing.T, data []byte, text string) {
		tok, err := ParseTokenizer("tokenizer.json", data)
		if err != nil {
			return
		}
		for _, bos := range []bool{false, true} {
			ids := tok.Encode(text, bos, bos)
			for _, id := range ids {
				if id < 0 || id >= tok.VocabSize() {
					t.Fatalf("Encode(%q) gave id %d outside [0, %d)", text, id, tok.VocabSize())
				}
			}
			tok.Decode(ids)
			prev := -1
			for _, id := range append(ids, -3, tok.VocabSize()) {
				tok.Piece(prev, id)
				prev = id
			}
		}
	})
}
