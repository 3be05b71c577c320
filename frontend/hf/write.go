package hf

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/tapml/tapml/frontend/arch/gpt2"
	"github.com/tapml/tapml/frontend/arch/llama"
	"github.com/tapml/tapml/frontend/tokenizer/bpe"
	"github.com/tapml/tapml/ir"
	"github.com/tapml/tapml/tensor"
	"github.com/tapml/tapml/tensor/safetensors"
	"github.com/x448/float16"
)

// WriteOptions choose how WriteLlama and WriteGPT2 lay out a model folder.
type WriteOptions struct {
	// DType stores the weights as F32 (the default), F16 or BF16 (rounded
	// to nearest even). DTypeOf, when set, chooses per tensor (by its
	// Hugging Face name) instead.
	DType   ir.DType
	DTypeOf func(name string) ir.DType
	// Shards > 1 splits the weights over that many files
	// model-0000i-of-0000n.safetensors with model.safetensors.index.json.
	Shards int
	// BOS and EOS are written as bos_token_id and eos_token_id when >= 0.
	BOS, EOS int
	// Tokenizer, when set, is written as tokenizer.json.
	Tokenizer []byte
}

// WriteLlama writes a model of arch/llama's configuration c as a
// Hugging Face folder: LlamaForCausalLM, or Qwen2ForCausalLM when c has
// QKVBias. Weights with interleaved RoPE pairs (llama2.c, GGUF) have the
// rows of their q and k projections permuted into Hugging Face's half
// layout, as Hugging Face's convert_llama_weights_to_hf.py does, so the
// folder computes the same function. Partial rotary (RopeDims) cannot be
// expressed and is an error.
func WriteLlama(dir string, c llama.Config, weights map[string]ir.WeightSource, o WriteOptions) error {
	if err := c.Validate(); err != nil {
		return err
	}
	if c.RopeDims != 0 && c.RopeDims != c.HeadDim() {
		return fmt.Errorf("rope dims %d: partial rotary embeddings cannot be written for LLaMA or Qwen2", c.RopeDims)
	}
	arch, typ := "LlamaForCausalLM", "llama"
	if c.QKVBias {
		arch, typ = "Qwen2ForCausalLM", "qwen2"
	}
	cfg := map[string]any{
		"architectures": []string{arch}, "model_type": typ,
		"hidden_size": c.Dim, "intermediate_size": c.HiddenDim, "num_hidden_layers": c.Layers,
		"num_attention_heads": c.Heads, "num_key_value_heads": c.KVHeads, "vocab_size": c.Vocab,
		"max_position_embeddings": c.MaxSeq, "rms_norm_eps": c.NormEps, "rope_theta": c.RopeTheta,
		"tie_word_embeddings": c.TiedEmbeddings, "hidden_act": "silu", "torch_dtype": "float32",
	}
	if c.HeadSize != 0 {
		cfg["head_dim"] = c.HeadSize
	}
	hd := c.HeadDim()
	var entries []safetensors.Entry
	for _, ns := range c.WeightShapes() {
		src, ok := weights[ns.Name]
		if !ok {
			return fmt.Errorf("missing weight %q", ns.Name)
		}
		data := src.Bytes
		if c.RopeStyle == "interleaved" {
			_, part, _ := strings.Cut(strings.TrimPrefix(ns.Name, "layers."), ".")
			switch part {
			case "attention.wq", "attention.wk", "attention.bq", "attention.bk":
				rowLen := 1
				if len(ns.Shape) == 2 {
					rowLen = ns.Shape[1]
				}
				data = func() ([]byte, error) {
					b, err := src.Bytes()
					if err != nil {
						return nil, err
					}
					return halfRows(b, ns.Shape[0]/hd, hd, 4*rowLen)
				}
			}
		}
		entries = append(entries, safetensors.Entry{Name: LlamaTensorName(ns.Name), DType: ir.F32, Shape: ns.Shape, Data: data})
	}
	return writeFolder(dir, cfg, entries, o)
}

// halfRows permutes the rows of each head from interleaved RoPE pairs
// (2i, 2i+1) to Hugging Face's halves (i, i+hd/2): new row j·hd/2 + i is
// old row 2i + j.
func halfRows(b []byte, heads, hd, rowBytes int) ([]byte, error) {
	if len(b) != heads*hd*rowBytes {
		return nil, fmt.Errorf("%d bytes, want %d", len(b), heads*hd*rowBytes)
	}
	out := make([]byte, len(b))
	for h := 0; h < heads; h++ {
		for i := 0; i < hd/2; i++ {
			for j := 0; j < 2; j++ {
				dst := (h*hd + j*hd/2 + i) * rowBytes
				src := (h*hd + 2*i + j) * rowBytes
				copy(out[dst:dst+rowBytes], b[src:src+rowBytes])
			}
		}
	}
	return out, nil
}

// WriteGPT2 writes a GPT-2 model as a Hugging Face GPT2LMHeadModel folder
// (tensor names with the "transformer." prefix, as transformers saves it,
// and lm_head.weight when c has one).
func WriteGPT2(dir string, c gpt2.Config, weights map[string]ir.WeightSource, o WriteOptions) error {
	if err := c.Validate(); err != nil {
		return err
	}
	if c.KVHeads != 0 || c.Linear {
		return fmt.Errorf("WriteGPT2 writes GPT-2's layout, not GPTBigCode's (kv heads %d, linear %v)", c.KVHeads, c.Linear)
	}
	cfg := map[string]any{
		"architectures": []string{"GPT2LMHeadModel"}, "model_type": "gpt2",
		"n_embd": c.Dim, "n_inner": c.Inner, "n_layer": c.Layers, "n_head": c.Heads, "vocab_size": c.Vocab,
		"n_positions": c.Positions, "n_ctx": c.Positions, "layer_norm_epsilon": c.NormEps,
		"activation_function": "gelu_new", "tie_word_embeddings": !c.LMHead, "torch_dtype": "float32",
	}
	var entries []safetensors.Entry
	for _, ns := range c.WeightShapes() {
		src, ok := weights[ns.Name]
		if !ok {
			return fmt.Errorf("missing weight %q", ns.Name)
		}
		name := "transformer." + ns.Name
		if ns.Name == "lm_head.weight" {
			name = ns.Name
		}
		entries = append(entries, safetensors.Entry{Name: name, DType: ir.F32, Shape: ns.Shape, Data: src.Bytes})
	}
	return writeFolder(dir, cfg, entries, o)
}

// writeFolder writes config.json, the weights (converted to the chosen
// dtypes, sharded when asked) and tokenizer.json.
func writeFolder(dir string, cfg map[string]any, entries []safetensors.Entry, o WriteOptions) error {
	if o.BOS >= 0 {
		cfg["bos_token_id"] = o.BOS
	}
	if o.EOS >= 0 {
		cfg["eos_token_id"] = o.EOS
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for i := range entries {
		dt := o.DType
		if o.DTypeOf != nil {
			dt = o.DTypeOf(entries[i].Name)
		}
		if dt == ir.Invalid {
			dt = ir.F32
		}
		if dt != ir.F32 && dt != ir.F16 && dt != ir.BF16 {
			return fmt.Errorf("tensor %q: dtype %s cannot be written (F32, F16 or BF16)", entries[i].Name, dt)
		}
		if dt != ir.F32 {
			get := entries[i].Data
			entries[i].DType = dt
			entries[i].Data = func() ([]byte, error) {
				b, err := get()
				if err != nil {
					return nil, err
				}
				return narrow(b, dt), nil
			}
		}
	}
	cb, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, ConfigFile), append(cb, '\n'), 0o644); err != nil {
		return err
	}
	if o.Tokenizer != nil {
		if err := os.WriteFile(filepath.Join(dir, TokenizerFile), o.Tokenizer, 0o644); err != nil {
			return err
		}
	}
	if o.Shards <= 1 {
		return safetensors.Write(filepath.Join(dir, WeightsFile), entries, map[string]string{"format": "pt"})
	}
	if o.Shards > len(entries) {
		return fmt.Errorf("%d shards for %d tensors", o.Shards, len(entries))
	}
	total := int64(0)
	sizes := make([]int64, len(entries))
	for i, e := range entries {
		n := int64(e.DType.Size())
		for _, d := range e.Shape {
			n *= int64(d)
		}
		sizes[i] = n
		total += n
	}
	weightMap := map[string]string{}
	start, acc := 0, int64(0)
	for s := 1; s <= o.Shards; s++ {
		// Fill shard s up to s/n of the bytes, leaving a tensor for each
		// later shard.
		end := start + 1
		acc += sizes[start]
		for end < len(entries)-(o.Shards-s) && (s == o.Shards || acc+sizes[end] <= total*int64(s)/int64(o.Shards)) {
			acc += sizes[end]
			end++
		}
		name := fmt.Sprintf("model-%05d-of-%05d.safetensors", s, o.Shards)
		for _, e := range entries[start:end] {
			weightMap[e.Name] = name
		}
		if err := safetensors.Write(filepath.Join(dir, name), entries[start:end], map[string]string{"format": "pt"}); err != nil {
			return err
		}
		start = end
	}
	ib, err := json.MarshalIndent(map[string]any{"metadata": map[string]any{"total_size": total}, "weight_map": weightMap}, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, IndexFile), append(ib, '\n'), 0o644)
}

// narrow converts little-endian f32 bytes to F16 or BF16, rounding to
// nearest even.
func narrow(b []byte, dt ir.DType) []byte {
	n := len(b) / 4
	out := make([]byte, 2*n)
	for i := 0; i < n; i++ {
		f := math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
		h := tensor.F32ToBF16(f)
		if dt == ir.F16 {
			h = float16.Fromfloat32(f).Bits()
		}
		binary.LittleEndian.PutUint16(out[2*i:], h)
	}
	return out
}

// SentencePieceTokenizerJSON writes the tokenizer.json of a
// SentencePiece BPE vocabulary (as llama2.c's tok*.bin and GGUF's llama
// tokenizers hold it: pieces with ' ' for "▁", a score each, "<0xXX>" byte
// tokens), the way Hugging Face's LlamaConverter does: a Prepend("▁") +
// Replace(" ", "▁") normalizer, byte fallback, and merges for every split
// of every piece into two pieces of the vocabulary, ranked by the merged
// piece's score (highest first). special lists the ids of the added
// special tokens with the content to give them (e.g. 1: "<s>"); unk is the
// id of the unknown token (-1 for none) and bos the id the post-processor
// puts first (-1 for none).
func SentencePieceTokenizerJSON(pieces []string, scores []float32, special map[int]string, unk, bos int) ([]byte, error) {
	if len(pieces) != len(scores) {
		return nil, fmt.Errorf("%d pieces but %d scores", len(pieces), len(scores))
	}
	tok := make([]string, len(pieces))
	vocab := map[string]int{}
	for i, p := range pieces {
		if s, ok := special[i]; ok {
			p = s
		} else {
			p = strings.ReplaceAll(p, " ", "▁")
		}
		if _, dup := vocab[p]; dup {
			return nil, fmt.Errorf("piece %q (id %d) occurs twice", p, i)
		}
		tok[i], vocab[p] = p, i
	}
	type merge struct {
		l, r  string
		score float32
		id    int // of the merged piece
	}
	var merges []merge
	for id, p := range tok {
		if _, ok := special[id]; ok {
			continue
		}
		if _, isByte := bpe.ParseByteToken(p); isByte {
			continue
		}
		var local []merge
		for i := 1; i < len(p); i++ {
			l, r := p[:i], p[i:]
			if !validSplit(l, r) {
				continue
			}
			_, okl := vocab[l]
			_, okr := vocab[r]
			if okl && okr {
				local = append(local, merge{l, r, scores[id], id})
			}
		}
		sort.SliceStable(local, func(a, b int) bool {
			if vocab[local[a].l] != vocab[local[b].l] {
				return vocab[local[a].l] < vocab[local[b].l]
			}
			return vocab[local[a].r] < vocab[local[b].r]
		})
		merges = append(merges, local...)
	}
	sort.SliceStable(merges, func(a, b int) bool { return merges[a].score > merges[b].score })
	ms := make([][2]string, len(merges))
	for i, m := range merges {
		ms[i] = [2]string{m.l, m.r}
	}
	var added []map[string]any
	ids := make([]int, 0, len(special))
	for id := range special {
		ids = append(ids, id)
	}
	sort.Ints(ids)
	for _, id := range ids {
		if id < 0 || id >= len(pieces) {
			return nil, fmt.Errorf("special id %d outside the vocabulary", id)
		}
		added = append(added, map[string]any{"id": id, "content": tok[id], "single_word": false, "lstrip": false,
			"rstrip": false, "normalized": false, "special": true})
	}
	model := map[string]any{"type": "BPE", "dropout": nil, "continuing_subword_prefix": nil, "end_of_word_suffix": nil,
		"fuse_unk": true, "byte_fallback": true, "ignore_merges": false, "vocab": vocab, "merges": ms, "unk_token": nil}
	if unk >= 0 {
		if unk >= len(tok) {
			return nil, fmt.Errorf("unk id %d outside the vocabulary", unk)
		}
		model["unk_token"] = tok[unk]
	}
	var post any
	if bos >= 0 {
		if bos >= len(tok) {
			return nil, fmt.Errorf("bos id %d outside the vocabulary", bos)
		}
		post = map[string]any{
			"type":   "TemplateProcessing",
			"single": []any{map[string]any{"SpecialToken": map[string]any{"id": tok[bos], "type_id": 0}}, map[string]any{"Sequence": map[string]any{"id": "A", "type_id": 0}}},
			"pair": []any{map[string]any{"SpecialToken": map[string]any{"id": tok[bos], "type_id": 0}}, map[string]any{"Sequence": map[string]any{"id": "A", "type_id": 0}},
				map[string]any{"SpecialToken": map[string]any{"id": tok[bos], "type_id": 1}}, map[string]any{"Sequence": map[string]any{"id": "B", "type_id": 1}}},
			"special_tokens": map[string]any{tok[bos]: map[string]any{"id": tok[bos], "ids": []int{bos}, "tokens": []string{tok[bos]}}},
		}
	}
	str := func(s string) map[string]any { return map[string]any{"String": s} }
	doc := map[string]any{
		"version":      "1.0",
		"truncation":   nil,
		"padding":      nil,
		"added_tokens": added,
		"normalizer": map[string]any{"type": "Sequence", "normalizers": []any{
			map[string]any{"type": "Prepend", "prepend": "▁"},
			map[string]any{"type": "Replace", "pattern": str(" "), "content": "▁"},
		}},
		"pre_tokenizer":  nil,
		"post_processor": post,
		"decoder": map[string]any{"type": "Sequence", "decoders": []any{
			map[string]any{"type": "Replace", "pattern": str("▁"), "content": " "},
			map[string]any{"type": "ByteFallback"},
			map[string]any{"type": "Fuse"},
			map[string]any{"type": "Strip", "content": " ", "start": 1, "stop": 0},
		}},
		"model": model,
	}
	return json.MarshalIndent(doc, "", "  ")
}

// validSplit reports whether cutting a piece into l and r falls between
// characters (Hugging Face cuts pieces by character, not byte).
func validSplit(l, r string) bool {
	return len(r) > 0 && (r[0]&0xC0 != 0x80)
}
