// Package hf imports Hugging Face model folders: config.json, the weights
// in model.safetensors (or shards listed by model.safetensors.index.json)
// and, when present, tokenizer.json and generation_config.json. Supported
// architectures (Architectures) are the LLaMA-like ones (llama.go: Llama,
// Mistral, Qwen2, Qwen3 and Phi-3 through frontend/arch/llama, with Hugging
// Face's "half" RoPE layout; with mixtures of experts (moe.go) Mixtral,
// Qwen2-MoE and Qwen3-MoE), Gemma 1-3 (gemma.go, frontend/arch/gemma),
// GPT2LMHeadModel and GPTBigCodeForCausalLM (gpt2.go, frontend/arch/gpt2),
// the families assembled from arch's parts (Phi, StableLM, OLMo 2,
// Granite, Cohere, GPT-NeoX, Falcon, StarCoder2), and the recurrent
// RwkvForCausalLM and MambaForCausalLM (rwkv.go, mamba.go); each is a
// family (config.go) in a file of its own that maps config.json and the
// tensor names onto the arch family. RoPE settings in either form
// transformers writes are read once, in rope.go. Weights may be F32, F16
// or BF16; they are memory-mapped, F32 ones used in place and 16-bit ones
// widened to f32 on first use (a mixture's per-expert tensors are stacked
// on first use).
//
// Everything read from the folder is checked: config.json's
// hyperparameters (unsupported features such as rope_scaling are errors
// naming the key), every tensor's presence, dtype and shape (errors name
// the file and the tensor), the index file and its shards, and
// tokenizer.json. Tensors the graph would not use are an error too, so a
// model is never half-understood.
package hf

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
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
	if err := cfg.readGenerationConfig(filepath.Join(dir, GenerationConfigFile)); err != nil {
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

// readGenerationConfig takes the ids that end generation from
// generation_config.json's eos_token_id (an id or a list), when the file
// exists and names them: transformers' generate stops there.
func (c *Config) readGenerationConfig(path string) error {
	data, err := readSmall(path, maxConfigFile)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	o := jsonObject{file: path}
	if err := json.Unmarshal(data, &o.m); err != nil || o.m == nil {
		return fmt.Errorf("%s: not a JSON object: %v", path, err)
	}
	ids, err := o.tokenIDs("eos_token_id")
	if err != nil || ids == nil {
		return err
	}
	c.EOG = ids
	return nil
}

// loadTokenizer reads the model's tokenizer.json, completed by its
// config.json and checked against its vocabulary size.
func loadTokenizer(path string, cfg *Config) (*bpe.Tokenizer, error) {
	c, err := readTokenizer(path)
	if err != nil {
		return nil, err
	}
	// What goes around a prompt is the tokenizer's own business (its
	// post-processor), never config.json's bos_token_id. Nor is it
	// tokenizer_config.json's add_bos_token: transformers 5 drops that key
	// when tokenizer.json exists (PreTrainedTokenizerBase._from_pretrained),
	// and tapml reads only tokenizer.json. Generation ends at the model's
	// EOS ids.
	c.EOG = cfg.EOG
	tok, err := newTokenizer(path, c)
	if err != nil {
		return nil, err
	}
	if vocab := cfg.Vocab; tok.VocabSize() > vocab {
		return nil, fmt.Errorf("%s: the tokenizer has ids up to %d, but the model's vocab_size is %d", path, tok.VocabSize()-1, vocab)
	}
	return tok, nil
}

// Build builds the module of the configured model over the checkpoint's
// tensors, checking each tensor's shape and that every tensor is used.
func (c *Config) Build(name string, ck *Checkpoint) (*ir.Module, error) {
	weights := map[string]ir.WeightSource{}
	used := map[string]bool{}
	for _, ns := range c.Model.WeightShapes() {
		if c.family.stacked != nil {
			if parts := c.family.stacked(ns.Name, c.Model); parts != nil {
				src, err := ck.Stack(parts, ns.Shape)
				if err != nil {
					return nil, err
				}
				weights[ns.Name] = src
				for _, p := range parts {
					used[p] = true
				}
				continue
			}
		}
		file := c.family.tensor(ns.Name, c.Model, ck)
		src, err := ck.Source(file, ns.Shape)
		if err != nil {
			return nil, err
		}
		weights[ns.Name] = src
		used[file] = true
	}
	var extra []string
	for _, n := range ck.Names() {
		if !used[n] && !c.family.unread(n, c.Model) {
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
	m, err := arch.Build(name, c.Model, weights)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", ck.Dir, err)
	}
	if c.MaxPositions > 0 {
		m.Meta["max_position_embeddings"] = fmt.Sprint(c.MaxPositions)
	}
	return m, nil
}
