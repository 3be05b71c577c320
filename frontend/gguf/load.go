package gguf

import (
	"fmt"
	"maps"
	"math"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/tapml/tapml/frontend/arch"
	"github.com/tapml/tapml/frontend/tokenizer"
	"github.com/tapml/tapml/frontend/tokenizer/bpe"
	"github.com/tapml/tapml/frontend/tokenizer/sentencepiece"
	"github.com/tapml/tapml/ir"
)

// MaxSeqCap bounds the KV cache length Load gives a model: the file's
// context length, but at most this many positions.
const MaxSeqCap = 4096

// Load memory-maps a GGUF file and returns the module of its model and
// its embedded tokenizer (nil when the file carries none). The mapping
// stays for the life of the process: weights are slices of it, in their
// file's type (F16, BF16 and quantized ones are not widened).
func Load(path string) (*ir.Module, tokenizer.Model, error) {
	f, err := Open(path)
	if err != nil {
		return nil, nil, err
	}
	m, err := f.Module()
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	tok, err := f.Tokenizer()
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	if tok != nil {
		v, _ := f.Get("tokenizer.ggml.tokens")
		a, _ := v.Array()
		if vocab := int(m.Weight("tok_embeddings").Type.Shape[0].Size); a.Len() > vocab {
			f.Close()
			return nil, nil, f.errorf("the tokenizer has %d tokens, more than the model's %d embedding rows", a.Len(), vocab)
		}
		mv, _ := f.Get("tokenizer.ggml.model")
		model, _ := mv.Str()
		m.Meta["tokenizer"] = fmt.Sprintf("%s (embedded, %d tokens)", model, a.Len())
	} else {
		m.Meta["tokenizer"] = "none"
	}
	return m, tok, nil
}

// Architecture returns general.architecture.
func (f *File) Architecture() (string, error) {
	v, ok := f.Get("general.architecture")
	if !ok {
		return "", f.errorf("no general.architecture in the metadata")
	}
	s, ok := v.Str()
	if !ok {
		return "", f.errorf("general.architecture is a %s, want a string", v.Type)
	}
	return s, nil
}

// A family maps the files of one general.architecture onto a frontend/arch
// family: the ARCH.* metadata onto its config, llama.cpp's tensor names
// onto its canonical weight names. Each lives in a file of its own
// (llama.go) and is listed in families.
type family struct {
	config func(f *File, arch string) (model, error)
	names  tensorNames
}

// model is a family's reading of a file's metadata.
type model struct {
	config  arch.Config
	context int      // the file's context length (meta "context_length")
	maxSeq  int      // the KV cache length the model gets (meta "max_seq")
	read    []string // tensors read into the config, not used as weights
}

// families are the general.architecture values Module builds.
var families = map[string]family{
	"llama": llamaFamily("interleaved", false),
	// Qwen2 is LLaMA with q/k/v biases and RoPE on the halves of each head
	// (llama.cpp's NEOX rotation; its converter leaves q and k unpermuted).
	"qwen2": llamaFamily("half", true),
}

// Module builds the IR of the file's model. Architectures "llama" and
// "qwen2" are supported, with tensors of types F32, F16, BF16 or the
// quantized types Q4_0, Q4_1, Q5_0, Q5_1, Q8_0 and Q2_K to Q6_K (kept
// as they are: see arch.Build).
func (f *File) Module() (*ir.Module, error) {
	name, err := f.Architecture()
	if err != nil {
		return nil, err
	}
	fam, ok := families[name]
	if !ok {
		names := slices.Sorted(maps.Keys(families))
		return nil, f.errorf("architecture %q is not supported (supported: %s)", name, strings.Join(names, ", "))
	}
	for i := range f.Tensors {
		t := &f.Tensors[i]
		if !supported(t.Type) {
			return nil, f.errorf("tensor %q has type %s (ggml type %d), which tapml does not support; supported types: %s",
				t.Name, t.Type, uint32(t.Type), supportedList())
		}
	}
	md, err := fam.config(f, name)
	if err != nil {
		return nil, err
	}
	if err := md.config.Validate(); err != nil {
		return nil, f.errorf("%v", err)
	}
	weights, err := f.weights(name, md, fam.names)
	if err != nil {
		return nil, err
	}
	base := strings.TrimSuffix(filepath.Base(f.Path), filepath.Ext(f.Path))
	m, err := arch.Build(base, md.config, weights)
	if err != nil {
		return nil, f.errorf("%v", err)
	}
	m.Meta["source"] = f.Path
	m.Meta["format"] = "gguf"
	m.Meta["gguf.version"] = strconv.Itoa(int(f.Version))
	m.Meta["context_length"] = strconv.Itoa(md.context)
	m.Meta["max_seq"] = strconv.Itoa(md.maxSeq)
	if v, ok := f.Get("general.name"); ok {
		if s, ok := v.Str(); ok {
			m.Meta["general.name"] = s
		}
	}
	return m, nil
}

// intKey reads an integer metadata entry that must be present (when def
// is nil) and lie in [lo, hi].
func (f *File) intKey(key string, def *int64, lo, hi int64) (int64, error) {
	v, ok := f.Get(key)
	if !ok {
		if def != nil {
			return *def, nil
		}
		return 0, f.errorf("missing metadata %s", key)
	}
	n, ok := v.Int()
	if !ok {
		return 0, f.errorf("metadata %s is %s %s, want an integer", key, v.Type, v)
	}
	if n < lo || n > hi {
		return 0, f.errorf("metadata %s = %d is out of range [%d, %d]", key, n, lo, hi)
	}
	return n, nil
}

func (f *File) floatKey(key string, def float64) (float64, error) {
	v, ok := f.Get(key)
	if !ok {
		return def, nil
	}
	x, ok := v.Float()
	if !ok {
		return 0, f.errorf("metadata %s is %s %s, want a float", key, v.Type, v)
	}
	if v.Type == TypeFloat32 {
		// The shortest decimal that reads back as this float32 is what the
		// converter wrote (1e-05, not 9.999999747378752e-06).
		x, _ = strconv.ParseFloat(strconv.FormatFloat(x, 'g', -1, 32), 64)
	}
	if math.IsNaN(x) || math.IsInf(x, 0) || x <= 0 {
		return 0, f.errorf("metadata %s = %g must be positive and finite", key, x)
	}
	return x, nil
}

func ptr(v int64) *int64 { return &v }

// tensorNames maps llama.cpp's tensor names onto a family's canonical
// weight names.
type tensorNames struct {
	global map[string]string // whole names: "token_embd.weight" -> "tok_embeddings"
	block  map[string]string // after "blk.N.": "attn_q.weight" -> "attention.wq"
	layer  string            // what the canonical names of layer N start with, before "N."
}

// canonical maps a GGUF tensor name to the canonical name.
func (t tensorNames) canonical(name string) (string, bool) {
	if canon, ok := t.global[name]; ok {
		return canon, true
	}
	rest, ok := strings.CutPrefix(name, "blk.")
	if !ok {
		return "", false
	}
	num, part, ok := strings.Cut(rest, ".")
	if !ok {
		return "", false
	}
	if l, err := strconv.Atoi(num); err != nil || l < 0 || strconv.Itoa(l) != num {
		return "", false
	}
	canon, ok := t.block[part]
	if !ok {
		return "", false
	}
	return t.layer + num + "." + canon, true
}

// gguf is the inverse of canonical, for messages.
func (t tensorNames) gguf(canon string) string {
	for g, c := range t.global {
		if c == canon {
			return g
		}
	}
	rest, _ := strings.CutPrefix(canon, t.layer)
	num, part, _ := strings.Cut(rest, ".")
	for g, c := range t.block {
		if c == part {
			return "blk." + num + "." + g
		}
	}
	return "blk." + num + "." + part
}

// weights finds the tensor of every weight the model needs, checks its
// shape and wraps its data. Tensors the graph would not use are an error,
// so a file is never half-understood.
func (f *File) weights(family string, md model, names tensorNames) (map[string]ir.WeightSource, error) {
	byCanon := map[string]*TensorInfo{}
	for i := range f.Tensors {
		if canon, ok := names.canonical(f.Tensors[i].Name); ok {
			byCanon[canon] = &f.Tensors[i]
		}
	}
	weights := map[string]ir.WeightSource{}
	used := map[string]bool{}
	for _, ns := range md.config.WeightShapes() {
		t, ok := byCanon[ns.Name]
		if !ok {
			return nil, f.errorf("missing tensor %q (for weight %s)", names.gguf(ns.Name), ns.Name)
		}
		used[t.Name] = true
		if shape := t.Shape(); !slices.Equal(shape, ns.Shape) {
			return nil, f.errorf("tensor %q (weight %s) has shape %v (GGUF dims %v), want %v", t.Name, ns.Name, shape, t.Dims, ns.Shape)
		}
		src, err := f.source(t)
		if err != nil {
			return nil, err
		}
		weights[ns.Name] = src
	}
	for _, name := range md.read {
		used[name] = true
	}
	var extra []string
	for _, t := range f.Tensors {
		if !used[t.Name] {
			extra = append(extra, t.Name)
		}
	}
	if len(extra) > 0 {
		sort.Strings(extra)
		if len(extra) > 5 {
			extra = append(extra[:5], fmt.Sprintf("... (%d in all)", len(extra)))
		}
		return nil, f.errorf("tensors the %s graph does not use (unsupported model variant): %s", family, strings.Join(extra, ", "))
	}
	return weights, nil
}

// source returns the WeightSource of a tensor: the file's bytes, in the
// IR dtype of its ggml type (f16, bf16 and the block formats are kept as
// they are; the ops that read them dequantize in registers).
func (f *File) source(t *TensorInfo) (ir.WeightSource, error) {
	dt, ok := irTypes[t.Type]
	if !ok {
		return nil, f.errorf("tensor %q has type %s (ggml type %d), which tapml does not support; supported types: %s",
			t.Name, t.Type, uint32(t.Type), supportedList())
	}
	raw, err := f.TensorData(t)
	if err != nil {
		return nil, err
	}
	if dt == ir.F32 {
		return ir.BytesSource(raw), nil
	}
	return ir.TypedBytes{Type: dt, Data: raw}, nil
}

// Tokenizer returns the file's embedded tokenizer, or nil when it has
// none: SentencePiece vocabularies (tokenizer.ggml.model "llama"; '▁' in
// pieces becomes ' ') as *sentencepiece.Tokenizer, byte-level BPE ("gpt2",
// with the pre-tokenizers of GPT-2, Llama 3 and Qwen2) as *bpe.Tokenizer.
func (f *File) Tokenizer() (tokenizer.Model, error) {
	mv, ok := f.Get("tokenizer.ggml.model")
	if !ok {
		return nil, nil
	}
	model, ok := mv.Str()
	if !ok {
		return nil, f.errorf("tokenizer.ggml.model is %s %s, want a string", mv.Type, mv)
	}
	if model != "llama" && model != "gpt2" {
		return nil, f.errorf("tokenizer model %q is not supported (supported: llama (SentencePiece), gpt2 (byte-level BPE)); pass a tokenizer file instead", model)
	}
	tv, ok := f.Get("tokenizer.ggml.tokens")
	if !ok {
		return nil, f.errorf("tokenizer model %s but no tokenizer.ggml.tokens", model)
	}
	var tokens []string
	if ta, ok := tv.Array(); ok {
		tokens, ok = ta.Strings()
		if !ok {
			return nil, f.errorf("tokenizer.ggml.tokens is %s, want an array of strings", tv)
		}
	} else {
		return nil, f.errorf("tokenizer.ggml.tokens is %s %s, want an array of strings", tv.Type, tv)
	}
	n := len(tokens)
	if n == 0 {
		return nil, f.errorf("tokenizer.ggml.tokens is empty")
	}
	var types []int64
	if tt, ok := f.Get("tokenizer.ggml.token_type"); ok {
		a, ok := tt.Array()
		if ok {
			types, ok = a.Ints()
		}
		if !ok || len(types) != n {
			return nil, f.errorf("tokenizer.ggml.token_type is %s %s, want %d integers", tt.Type, tt, n)
		}
	}
	if model == "gpt2" {
		return f.bpeTokenizer(tokens, types)
	}
	scores := make([]float32, n)
	if sv, ok := f.Get("tokenizer.ggml.scores"); ok {
		var fs []float64
		if sa, ok := sv.Array(); ok {
			fs, _ = sa.Floats()
		}
		if len(fs) != n {
			return nil, f.errorf("tokenizer.ggml.scores is %s %s, want %d floats", sv.Type, sv, n)
		}
		for i, x := range fs {
			scores[i] = float32(x)
		}
	}
	bos, err := f.intKey("tokenizer.ggml.bos_token_id", ptr(1), 0, int64(n-1))
	if err != nil {
		return nil, err
	}
	eos, err := f.intKey("tokenizer.ggml.eos_token_id", ptr(2), 0, int64(n-1))
	if err != nil {
		return nil, err
	}
	// llama.cpp prepends BOS to SentencePiece prompts unless the file
	// says not to.
	add, err := f.addBOS(true)
	if err != nil {
		return nil, err
	}
	if !add {
		bos = -1
	}
	vocab := make([]string, n)
	for i, s := range tokens {
		vocab[i] = strings.ReplaceAll(s, "\u2581", " ")
	}
	tok, err := sentencepiece.New(vocab, scores, int(bos), int(eos))
	if err != nil {
		return nil, f.errorf("tokenizer: %v", err)
	}
	eog, err := f.eogIDs(int64(n), []int{int(eos)})
	if err != nil {
		return nil, err
	}
	if tok, err = tok.WithEOG(eog); err != nil {
		return nil, f.errorf("tokenizer: %v", err)
	}
	return tok, nil
}

// addBOS reads tokenizer.ggml.add_bos_token, def when absent.
func (f *File) addBOS(def bool) (bool, error) {
	v, ok := f.Get("tokenizer.ggml.add_bos_token")
	if !ok {
		return def, nil
	}
	add, isBool := v.Bool()
	if !isBool {
		return false, f.errorf("tokenizer.ggml.add_bos_token is %s %s, want a bool", v.Type, v)
	}
	return add, nil
}

// eogIDs are the ids that end generation, as llama.cpp stops: the EOS,
// EOT (end of turn) and EOM (end of message) ids the file names (def
// when it names none of them).
func (f *File) eogIDs(n int64, def []int) ([]int, error) {
	var ids []int
	for _, key := range []string{"tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id", "tokenizer.ggml.eom_token_id"} {
		if _, ok := f.Get(key); !ok {
			continue
		}
		id, err := f.intKey(key, nil, 0, n-1)
		if err != nil {
			return nil, err
		}
		if !slices.Contains(ids, int(id)) {
			ids = append(ids, int(id))
		}
	}
	if len(ids) == 0 {
		ids = def
	}
	return ids, nil
}

// ggml's token types (llama.cpp's llama_token_type).
const (
	tokenControl     = 3
	tokenUserDefined = 4
)

// bpePatterns maps tokenizer.ggml.pre, llama.cpp's name of a byte-level
// BPE pre-tokenizer, to its split pattern. Others (llama.cpp's "default",
// "deepseek-llm", ...) split text differently and are refused.
var bpePatterns = map[string]bpe.Pattern{
	"gpt-2": bpe.GPT2Pattern, "llama3": bpe.Llama3Pattern, "llama-v3": bpe.Llama3Pattern, "llama-bpe": bpe.Llama3Pattern,
	"qwen2": bpe.Qwen2Pattern, "deepseek-r1-qwen": bpe.Qwen2Pattern,
}

// bpeTokenizer builds a "gpt2" (byte-level BPE) tokenizer: merges from
// tokenizer.ggml.merges, control and user-defined tokens matched whole,
// BOS only when tokenizer.ggml.add_bos_token says so (llama.cpp's
// default for these is not to add one).
func (f *File) bpeTokenizer(tokens []string, types []int64) (tokenizer.Model, error) {
	mv, ok := f.Get("tokenizer.ggml.merges")
	if !ok {
		return nil, f.errorf("tokenizer model gpt2 but no tokenizer.ggml.merges")
	}
	ma, ok := mv.Array()
	var merges []string
	if ok {
		merges, ok = ma.Strings()
	}
	if !ok {
		return nil, f.errorf("tokenizer.ggml.merges is %s %s, want an array of strings", mv.Type, mv)
	}
	pre := "gpt-2"
	if pv, ok := f.Get("tokenizer.ggml.pre"); ok {
		if pre, ok = pv.Str(); !ok {
			return nil, f.errorf("tokenizer.ggml.pre is %s %s, want a string", pv.Type, pv)
		}
	}
	pattern, ok := bpePatterns[pre]
	if !ok {
		names := make([]string, 0, len(bpePatterns))
		for k := range bpePatterns {
			names = append(names, k)
		}
		sort.Strings(names)
		return nil, f.errorf("tokenizer.ggml.pre %q is not supported (supported: %s)", pre, strings.Join(names, ", "))
	}
	// llama.cpp splits by the pattern, maps bytes to GPT-2's alphabet and
	// merges; Llama 3's vocabulary words are kept whole.
	c := bpe.Config{Tokens: tokens, Unk: -1, BOS: -1, EOS: -1, IgnoreMerges: pattern == bpe.Llama3Pattern,
		PreTokenizers: []bpe.PreTokenizer{bpe.Split(pattern), bpe.ByteLevel(false, false)},
		Decoders:      []bpe.Decoder{bpe.ByteLevelDecoder()}}
	for i, m := range merges {
		a, b, err := bpe.SplitMerge(m)
		if err != nil {
			return nil, f.errorf("tokenizer.ggml.merges[%d]: %v", i, err)
		}
		c.Merges = append(c.Merges, [2]string{a, b})
	}
	for id, typ := range types {
		if typ == tokenControl || typ == tokenUserDefined {
			c.Added = append(c.Added, bpe.AddedToken{ID: id, Content: tokens[id], Special: typ == tokenControl})
		}
	}
	n := int64(len(tokens))
	add, err := f.addBOS(false)
	if err != nil {
		return nil, err
	}
	if add {
		bos, err := f.intKey("tokenizer.ggml.bos_token_id", nil, 0, n-1)
		if err != nil {
			return nil, err
		}
		c.BOS = int(bos)
	}
	if _, ok := f.Get("tokenizer.ggml.eos_token_id"); ok {
		eos, err := f.intKey("tokenizer.ggml.eos_token_id", nil, 0, n-1)
		if err != nil {
			return nil, err
		}
		c.EOS = int(eos)
	}
	if c.EOG, err = f.eogIDs(n, nil); err != nil {
		return nil, err
	}
	tok, err := bpe.New(c)
	if err != nil {
		return nil, f.errorf("tokenizer: %v", err)
	}
	return tok, nil
}
