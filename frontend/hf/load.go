// Package hf imports Hugging Face model folders: config.json, the weights
// in model.safetensors (or shards listed by model.safetensors.index.json)
// and, when present, tokenizer.json. Supported architectures are
// LlamaForCausalLM and Qwen2ForCausalLM (through frontend/arch/llama, with
// Hugging Face's "half" RoPE layout and Qwen2's q/k/v biases) and
// GPT2LMHeadModel (through frontend/arch/gpt2). Weights may be F32, F16 or BF16;
// they are memory-mapped, F32 ones used in place and 16-bit ones widened to
// f32 on first use.
//
// Everything read from the folder is checked: config.json's
// hyperparameters (unsupported features such as rope_scaling are errors
// naming the key), every tensor's presence, dtype and shape (errors name
// the file and the tensor), the index file and its shards, and
// tokenizer.json. Tensors the graph would not use are an error too, so a
// model is never half-understood.
package hf

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"github.com/tapml/tapml/frontend/arch"
	"github.com/tapml/tapml/frontend/tokenizer/bpe"
	"github.com/tapml/tapml/ir"
)

// Sniff reports whether dir is a folder with a config.json, which is how
// a Hugging Face model folder is recognised.
func Sniff(dir string) bool {
	st, err := os.Stat(filepath.Join(dir, ConfigFile))
	return err == nil && st.Mode().IsRegular()
}

// Load imports the model folder dir. It returns the module and the
// tokenizer of tokenizer.json (nil when the folder has none). The weight
// files stay mapped for the life of the process, since the module's
// weights view them.
func Load(dir string) (*ir.Module, *bpe.Tokenizer, error) {
	cfgPath := filepath.Join(dir, ConfigFile)
	data, err := readSmall(cfgPath, maxConfigFile)
	if err != nil {
		return nil, nil, err
	}
	cfg, err := ParseConfig(cfgPath, data)
	if err != nil {
		return nil, nil, err
	}
	ck, err := OpenCheckpoint(dir)
	if err != nil {
		return nil, nil, err
	}
	name := filepath.Base(filepath.Clean(dir))
	m, err := cfg.Build(name, ck)
	if err != nil {
		ck.Close()
		return nil, nil, err
	}
	m.Meta["source"] = dir
	m.Meta["format"] = "huggingface"
	m.Meta["hf.architecture"] = cfg.Arch
	if ck.Index != "" {
		m.Meta["hf.shards"] = fmt.Sprint(len(ck.shards))
	}
	tokPath := filepath.Join(dir, TokenizerFile)
	if _, err := os.Stat(tokPath); errors.Is(err, fs.ErrNotExist) {
		m.Meta["tokenizer"] = "none"
		return m, nil, nil
	}
	tok, err := loadTokenizer(tokPath, cfg)
	if err != nil {
		ck.Close()
		return nil, nil, err
	}
	m.Meta["tokenizer"] = fmt.Sprintf("huggingface %s (%d tokens)", tok.Kind(), tok.VocabSize())
	return m, tok, nil
}

// loadTokenizer reads the model's tokenizer.json, completed by its
// config.json and checked against its vocabulary size.
func loadTokenizer(path string, cfg *Config) (*bpe.Tokenizer, error) {
	c, err := readTokenizer(path)
	if err != nil {
		return nil, err
	}
	if err := useConfig(&c, cfg); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	tok, err := newTokenizer(path, c)
	if err != nil {
		return nil, err
	}
	if vocab := vocabOf(cfg); tok.VocabSize() > vocab {
		return nil, fmt.Errorf("%s: the tokenizer has ids up to %d, but the model's vocab_size is %d", path, tok.VocabSize()-1, vocab)
	}
	return tok, nil
}

func vocabOf(c *Config) int {
	if c.Arch == "GPT2LMHeadModel" {
		return c.GPT2.Vocab
	}
	return c.Llama.Vocab
}

// Build builds the module of the configured model over the checkpoint's
// tensors, checking each tensor's shape and that every tensor is used.
func (c *Config) Build(name string, ck *Checkpoint) (*ir.Module, error) {
	var (
		shapes  []namedShape
		ignored = func(string) bool { return false }
	)
	switch c.Arch {
	case "LlamaForCausalLM", "Qwen2ForCausalLM":
		for _, ns := range c.Llama.WeightShapes() {
			shapes = append(shapes, namedShape{ns.Name, LlamaTensorName(ns.Name), ns.Shape})
		}
		ignored = func(n string) bool {
			// Old checkpoints store RoPE's inverse frequencies; a tied
			// classifier may be stored although it is not read.
			return rotaryBuffer.MatchString(n) || (c.Llama.TiedEmbeddings && n == "lm_head.weight")
		}
	case "GPT2LMHeadModel":
		prefix := ""
		if ck.Has("transformer.wte.weight") {
			prefix = "transformer."
		}
		for _, ns := range c.GPT2.WeightShapes() {
			shapes = append(shapes, namedShape{ns.Name, prefix + ns.Name, ns.Shape})
		}
		ignored = func(n string) bool {
			// The causal-mask buffers of old checkpoints, and the tied head.
			return gpt2Buffer.MatchString(n) || n == "lm_head.weight"
		}
	default:
		return nil, fmt.Errorf("architecture %q is not supported", c.Arch)
	}
	weights := map[string]ir.WeightSource{}
	used := map[string]bool{}
	for _, ns := range shapes {
		src, err := ck.Source(ns.file, ns.shape)
		if err != nil {
			return nil, err
		}
		weights[ns.canon] = src
		used[ns.file] = true
	}
	var extra []string
	for _, n := range ck.Names() {
		if !used[n] && !ignored(n) {
			extra = append(extra, n)
		}
	}
	if len(extra) > 0 {
		sort.Strings(extra)
		if len(extra) > 5 {
			extra = append(extra[:5], fmt.Sprintf("... (%d in all)", len(extra)))
		}
		where := filepath.Join(ck.Dir, WeightsFile)
		if ck.Index != "" {
			where = ck.Index
		}
		return nil, fmt.Errorf("%s: tensors the %s graph does not use (unsupported model variant, or config.json does not match the weights): %s",
			where, c.Arch, strings.Join(extra, ", "))
	}
	var m *ir.Module
	var err error
	if c.Arch == "GPT2LMHeadModel" {
		m, err = arch.Build(name, c.GPT2, weights)
	} else {
		m, err = arch.Build(name, c.Llama, weights)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", ck.Dir, err)
	}
	m.Meta["max_position_embeddings"] = fmt.Sprint(c.MaxPositions)
	return m, nil
}

type namedShape struct {
	canon, file string
	shape       []int
}

var (
	rotaryBuffer = regexp.MustCompile(`^model\.layers\.[0-9]+\.self_attn\.rotary_emb\.inv_freq$`)
	gpt2Buffer   = regexp.MustCompile(`^(transformer\.)?h\.[0-9]+\.attn\.(bias|masked_bias)$`)
)

// llamaNames maps arch/llama's per-layer weight names to Hugging
// Face's.
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
