package hf

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tapml/tapml/frontend/arch/gpt2"
	"github.com/tapml/tapml/frontend/arch/llama"
	"github.com/tapml/tapml/ir"
	"github.com/tapml/tapml/tensor"
	"github.com/tapml/tapml/tensor/safetensors"
)

var smallLlama = llama.Config{Dim: 16, HiddenDim: 24, Layers: 2, Heads: 4, KVHeads: 2, Vocab: 32, MaxSeq: 16,
	NormEps: 1e-5, RopeTheta: 10000, RopeStyle: "half"}

// writeSmall writes a small LLaMA folder and returns it.
func writeSmall(t *testing.T, c llama.Config, o WriteOptions) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "m")
	if o.BOS == 0 && o.EOS == 0 {
		o.BOS, o.EOS = -1, -1
	}
	if err := WriteLlama(dir, c, llama.RandomWeights(c, 1), o); err != nil {
		t.Fatal(err)
	}
	return dir
}

// editJSON rewrites a JSON file of dir through edit.
func editJSON(t *testing.T, path string, edit func(map[string]any)) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	edit(m)
	out, _ := json.Marshal(m)
	if err := os.WriteFile(path, out, 0o644); err != nil {
		t.Fatal(err)
	}
}

// loadWant loads the folder dir: it must load when want is "" (and
// loadWant returns the module), else fail with an error that contains want
// and names the folder.
func loadWant(t *testing.T, dir, want string) *ir.Module {
	t.Helper()
	m, _, err := Load(dir)
	if want == "" {
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), dir) {
		t.Fatalf("error %v, want one naming %s with %q", err, dir, want)
	}
	return nil
}

func TestLoadSmall(t *testing.T) {
	dir := writeSmall(t, smallLlama, WriteOptions{DType: ir.F16})
	m, tok, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if tok != nil || m.Meta["tokenizer"] != "none" || m.Meta["format"] != "huggingface" || m.Meta["hf.architecture"] != "LlamaForCausalLM" {
		t.Errorf("tokenizer %v, meta %v", tok, m.Meta)
	}
	if !Sniff(dir) || Sniff(t.TempDir()) {
		t.Errorf("Sniff")
	}
	// F16 weights stay f16: the matmuls read them as they are, the norms
	// through a dequantize node.
	w := m.Weight("layers.0.attention.wq")
	b, err := w.Source.Bytes()
	if err != nil || len(b) != 2*16*16 || w.Type.DType != ir.F16 {
		t.Errorf("wq: %d bytes, %s, %v", len(b), w.Type, err)
	}
	deq := 0
	for _, n := range m.Func("decode").Nodes {
		if n.Op == ir.OpDequantize {
			deq++
			if u := n.Inputs[0]; !u.IsWeight() || u.Type.Shape.Rank() != 1 {
				t.Errorf("%s dequantizes %s, want a norm's 1-D weight", n, u.Ref())
			}
		}
	}
	if want := 2*smallLlama.Layers + 1; deq != want {
		t.Errorf("decode has %d dequantize nodes, want one per norm weight (%d)", deq, want)
	}
}

// transformers 5 writes the RoPE base inside rope_parameters: a loader that
// read only rope_theta would build a model with the default base.
func TestRopeParametersTheta(t *testing.T) {
	dir := writeSmall(t, smallLlama, WriteOptions{})
	editJSON(t, filepath.Join(dir, ConfigFile), func(m map[string]any) {
		delete(m, "rope_theta")
		m["rope_parameters"] = map[string]any{"rope_type": "default", "rope_theta": 123456.0}
	})
	m, _, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range m.Funcs[0].Nodes {
		if n.Op == ir.OpRope {
			if th := n.Attrs.Float("theta"); th != 123456 {
				t.Fatalf("rope theta %g, want 123456", th)
			}
			return
		}
	}
	t.Fatal("no rope node")
}

func TestConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(map[string]any)
		err  string
	}{
		{"rope_scaling", func(m map[string]any) { m["rope_scaling"] = map[string]any{"type": "proportional", "factor": 2} }, `rope_scaling: rope_type: "proportional" is not supported (supported: default, linear, dynamic, llama3, yarn, longrope)`},
		{"rope_parameters type", func(m map[string]any) {
			delete(m, "rope_theta")
			m["rope_parameters"] = map[string]any{"rope_type": "ntk", "factor": 4, "rope_theta": 1e4}
		}, `rope_parameters: rope_type: "ntk" is not supported`},
		{"rope_parameters and rope_scaling", func(m map[string]any) {
			delete(m, "rope_theta")
			m["rope_parameters"] = map[string]any{"rope_type": "default", "rope_theta": 1e4}
			m["rope_scaling"] = map[string]any{"rope_type": "linear", "factor": 4}
		}, `rope_scaling: given with rope_parameters`},
		{"linear without factor", func(m map[string]any) { m["rope_scaling"] = map[string]any{"type": "linear"} }, `rope_scaling: missing "factor"`},
		{"llama3 without low_freq_factor", func(m map[string]any) {
			m["rope_scaling"] = map[string]any{"rope_type": "llama3", "factor": 8, "high_freq_factor": 4}
		}, `rope_scaling: missing "low_freq_factor"`},
		{"llama3 band", func(m map[string]any) {
			m["rope_scaling"] = map[string]any{"rope_type": "llama3", "factor": 8, "low_freq_factor": 4, "high_freq_factor": 1}
		}, `high_freq_factor 1 must exceed low_freq_factor 4`},
		{"longrope factors", func(m map[string]any) {
			m["rope_scaling"] = map[string]any{"rope_type": "longrope", "short_factor": []float64{1, 1, 1}, "long_factor": []float64{1, 2}}
		}, `3 short_factor for 2 rotated pairs`},
		{"longrope factor sign", func(m map[string]any) {
			m["rope_scaling"] = map[string]any{"rope_type": "longrope", "short_factor": []float64{-1}, "long_factor": []float64{2}}
		}, `short_factor[0]: want a positive finite number, got -1`},
		{"yarn beta", func(m map[string]any) {
			m["rope_scaling"] = map[string]any{"rope_type": "yarn", "factor": 4, "beta_fast": "fast"}
		}, `beta_fast: want a number, got "fast"`},
		{"partial rotary", func(m map[string]any) { m["partial_rotary_factor"] = 0.5 }, `partial_rotary_factor: 0.5 is not supported (only Phi-3`},
		{"layer types", func(m map[string]any) {
			m["architectures"] = []string{"Qwen3ForCausalLM"}
			m["use_sliding_window"] = true
			m["layer_types"] = []string{"full_attention", "chunked_attention"}
		}, `layer_types: layer 1 is "chunked_attention"`},
		{"rope_parameters and rope_theta", func(m map[string]any) {
			m["rope_parameters"] = map[string]any{"rope_type": "default", "rope_theta": 1e6}
			m["rope_theta"] = 1e4
		}, `rope_theta: given both`},
		{"rope_parameters not an object", func(m map[string]any) { m["rope_parameters"] = 3 }, `rope_parameters: want an object`},
		{"architecture", func(m map[string]any) { m["architectures"] = []string{"BertForMaskedLM"} }, `"BertForMaskedLM" is not supported (supported: CohereForCausalLM, `},
		{"how to add", func(m map[string]any) { m["architectures"] = []string{"BertForMaskedLM"} }, `see "How to add an architecture" in tapml's README.md`},
		{"model_type", func(m map[string]any) { delete(m, "architectures"); m["model_type"] = "bert" }, `model_type "bert" is not supported`},
		{"by model_type", func(m map[string]any) { delete(m, "architectures") }, ""},
		{"missing key", func(m map[string]any) { delete(m, "hidden_size") }, `missing "hidden_size"`},
		{"not an int", func(m map[string]any) { m["num_hidden_layers"] = "two" }, `num_hidden_layers: want an integer, got "two"`},
		{"fraction", func(m map[string]any) { m["num_hidden_layers"] = 2.5 }, "num_hidden_layers: want an integer, got 2.5"},
		{"int as float", func(m map[string]any) { m["num_hidden_layers"] = 2.0 }, ""},
		{"negative", func(m map[string]any) { m["vocab_size"] = -3 }, "vocab_size: -3 is out of range"},
		{"heads", func(m map[string]any) { m["num_attention_heads"] = 3 }, "hidden_size 16 is not a multiple of num_attention_heads 3"},
		{"kv heads", func(m map[string]any) { m["num_key_value_heads"] = 3 }, "not a multiple of num_key_value_heads 3"},
		{"eps", func(m map[string]any) { m["rms_norm_eps"] = 0 }, "rms_norm_eps: want a positive finite number"},
		{"act", func(m map[string]any) { m["hidden_act"] = "gelu" }, `hidden_act: "gelu" is not supported`},
		{"attention_bias", func(m map[string]any) { m["attention_bias"] = true }, "attention_bias: true is not supported"},
		{"sliding", func(m map[string]any) { m["use_sliding_window"] = true }, "use_sliding_window: true is not supported"},
		// The shapes config.json implies must be the tensors' shapes.
		{"hidden mismatch", func(m map[string]any) { m["intermediate_size"] = 32 }, `tensor "model.layers.0.mlp.gate_proj.weight" has shape [24 16], but config.json implies [32 16]`},
		{"vocab mismatch", func(m map[string]any) { m["vocab_size"] = 33 }, `tensor "model.embed_tokens.weight" has shape [32 16], but config.json implies [33 16]`},
		{"layers mismatch", func(m map[string]any) { m["num_hidden_layers"] = 1 }, "tensors the LlamaForCausalLM graph does not use"},
		{"untied", func(m map[string]any) { m["tie_word_embeddings"] = false }, `missing tensor "lm_head.weight"`},
		{"qwen2 without biases", func(m map[string]any) { m["architectures"] = []string{"Qwen2ForCausalLM"} }, `missing tensor "model.layers.0.self_attn.q_proj.bias"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := smallLlama
			c.TiedEmbeddings = true
			dir := writeSmall(t, c, WriteOptions{})
			cfg := filepath.Join(dir, ConfigFile)
			editJSON(t, cfg, tc.edit)
			loadWant(t, dir, tc.err)
		})
	}
}

func TestGPT2ConfigErrors(t *testing.T) {
	c := gpt2.Config{Dim: 8, Inner: 16, Layers: 1, Heads: 2, Vocab: 10, Positions: 8, MaxSeq: 8, NormEps: 1e-5}
	for _, tc := range []struct {
		name string
		edit func(map[string]any)
		err  string
	}{
		{"activation", func(m map[string]any) { m["activation_function"] = "gelu" }, `activation_function: "gelu" is not supported`},
		{"n_ctx", func(m map[string]any) { m["n_ctx"] = 4 }, "n_ctx: 4 differs from n_positions 8"},
		{"untied", func(m map[string]any) { m["tie_word_embeddings"] = false }, `missing tensor "lm_head.weight"`},
		{"inverse layer scaling", func(m map[string]any) { m["scale_attn_by_inverse_layer_idx"] = true }, "scale_attn_by_inverse_layer_idx"},
		{"n_inner", func(m map[string]any) { m["n_inner"] = nil }, `tensor "transformer.h.0.mlp.c_fc.weight" has shape [8 16], but config.json implies [8 32]`},
		{"gelu_pytorch_tanh", func(m map[string]any) { m["activation_function"] = "gelu_pytorch_tanh" }, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "g")
			if err := WriteGPT2(dir, c, gpt2.RandomWeights(c, 1), WriteOptions{BOS: -1, EOS: -1}); err != nil {
				t.Fatal(err)
			}
			editJSON(t, filepath.Join(dir, ConfigFile), tc.edit)
			loadWant(t, dir, tc.err)
		})
	}
}

func TestWeightErrors(t *testing.T) {
	t.Run("no weights", func(t *testing.T) {
		dir := writeSmall(t, smallLlama, WriteOptions{})
		os.Remove(filepath.Join(dir, WeightsFile))
		_, _, err := Load(dir)
		if err == nil || !strings.Contains(err.Error(), "no model.safetensors or model.safetensors.index.json") {
			t.Fatalf("error %v", err)
		}
	})
	t.Run("missing tensor", func(t *testing.T) {
		dir := writeSmall(t, smallLlama, WriteOptions{})
		rewrite(t, filepath.Join(dir, WeightsFile), func(ts map[string]*tensor.Tensor) { delete(ts, "model.norm.weight") })
		_, _, err := Load(dir)
		if err == nil || !strings.Contains(err.Error(), filepath.Join(dir, "model.safetensors")+`: missing tensor "model.norm.weight"`) {
			t.Fatalf("error %v", err)
		}
	})
	t.Run("int tensor", func(t *testing.T) {
		dir := writeSmall(t, smallLlama, WriteOptions{})
		rewrite(t, filepath.Join(dir, WeightsFile), func(ts map[string]*tensor.Tensor) { ts["model.norm.weight"] = tensor.New(ir.I32, []int{16}) })
		_, _, err := Load(dir)
		if err == nil || !strings.Contains(err.Error(), `tensor "model.norm.weight" has dtype i32; weights must be F32, F16 or BF16`) {
			t.Fatalf("error %v", err)
		}
	})
	t.Run("corrupt", func(t *testing.T) {
		dir := writeSmall(t, smallLlama, WriteOptions{})
		os.WriteFile(filepath.Join(dir, WeightsFile), []byte("\x05\x00\x00\x00\x00\x00\x00\x00{\"a\""), 0o644)
		_, _, err := Load(dir)
		if err == nil || !strings.Contains(err.Error(), filepath.Join(dir, WeightsFile)) {
			t.Fatalf("error %v", err)
		}
	})
	sharded := func(t *testing.T) string { return writeSmall(t, smallLlama, WriteOptions{Shards: 2}) }
	shard2 := "model-00002-of-00002.safetensors"
	t.Run("missing shard", func(t *testing.T) {
		dir := sharded(t)
		os.Remove(filepath.Join(dir, shard2))
		_, _, err := Load(dir)
		if err == nil || !strings.Contains(err.Error(), IndexFile+": shard "+shard2) || !strings.Contains(err.Error(), "is missing") {
			t.Fatalf("error %v", err)
		}
	})
	for _, tc := range []struct {
		name string
		edit func(map[string]any)
		err  string
	}{
		{"no weight_map", func(m map[string]any) { delete(m, "weight_map") }, `no "weight_map"`},
		{"path escape", func(m map[string]any) { m["weight_map"].(map[string]any)["model.norm.weight"] = "../x.safetensors" }, "not a .safetensors file name in the model folder"},
		{"wrong shard", func(m map[string]any) {
			m["weight_map"].(map[string]any)["model.embed_tokens.weight"] = shard2
		}, `tensor "model.embed_tokens.weight" is in this file, but model.safetensors.index.json maps it to ` + shard2},
		{"phantom", func(m map[string]any) {
			m["weight_map"].(map[string]any)["model.extra"] = shard2
		}, `maps tensor "model.extra" to ` + shard2 + `, but that file has no such tensor`},
		{"unlisted", func(m map[string]any) { delete(m["weight_map"].(map[string]any), "model.norm.weight") }, `tensor "model.norm.weight" is not listed in model.safetensors.index.json`},
		{"not strings", func(m map[string]any) { m["weight_map"].(map[string]any)["model.norm.weight"] = 3 }, "want a file name"},
		{"empty", func(m map[string]any) { m["weight_map"] = map[string]any{} }, `"weight_map" is empty`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := sharded(t)
			editJSON(t, filepath.Join(dir, IndexFile), tc.edit)
			_, _, err := Load(dir)
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Fatalf("error %v, want %q", err, tc.err)
			}
		})
	}
	t.Run("duplicate key", func(t *testing.T) {
		_, err := ParseIndex("idx.json", []byte(`{"weight_map": {"a": "x.safetensors", "a": "y.safetensors"}}`))
		if err == nil || !strings.Contains(err.Error(), `idx.json: weight_map: tensor "a" is listed twice`) {
			t.Fatalf("error %v", err)
		}
	})
	t.Run("tokenizer vocab", func(t *testing.T) {
		dir := writeSmall(t, smallLlama, WriteOptions{Tokenizer: byteLevelJSON(t, gpt2Pre)})
		_, _, err := Load(dir)
		if err == nil || !strings.Contains(err.Error(), "tokenizer.json: the tokenizer has ids up to 263, but the model's vocab_size is 32") {
			t.Fatalf("error %v", err)
		}
	})
}

// rewrite rewrites a safetensors file through edit.
func rewrite(t *testing.T, path string, edit func(map[string]*tensor.Tensor)) {
	t.Helper()
	ts, _, err := safetensors.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	edit(ts)
	var names []string
	for n := range ts {
		names = append(names, n)
	}
	if err := safetensors.WriteTensors(path, names, ts, nil); err != nil {
		t.Fatal(err)
	}
}

// TestGPT2Generate runs a GPT-2 folder with a byte-level tokenizer through
// runtime/llm's generation loop, as `tapmlc run` does.
func TestGPT2Generate(t *testing.T) {
	c := gpt2.Config{Dim: 32, Inner: 64, Layers: 2, Heads: 4, Vocab: 264, Positions: 64, MaxSeq: 64, NormEps: 1e-5}
	dir := filepath.Join(t.TempDir(), "gpt2")
	if err := WriteGPT2(dir, c, gpt2.RandomWeights(c, 3), WriteOptions{BOS: 263, EOS: 263, Tokenizer: byteLevelJSON(t, gpt2Pre)}); err != nil {
		t.Fatal(err)
	}
	m, tok, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	// config.json's bos_token_id does not make the tokenizer prepend
	// anything (its post-processor adds nothing); eos_token_id ends
	// generation.
	if tok.BOS() != -1 || tok.EOS() != -1 || !tok.IsEOG(263) {
		t.Fatalf("bos %d eos %d eog %v", tok.BOS(), tok.EOS(), tok.EOG())
	}
	text, ids := generate(t, m, tok, "hello the", 20)
	if !strings.HasPrefix(text, "hello the") || len(ids) == 0 {
		t.Errorf("text %q, ids %v", text, ids)
	}
	t.Logf("%q", text)
}
