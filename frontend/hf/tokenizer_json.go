package hf

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"

	"github.com/tapml/tapml/frontend/tokenizer/bpe"
	"golang.org/x/text/unicode/norm"
)

// maxTokenizerFile bounds the size of tokenizer.json read into memory.
const maxTokenizerFile = 256 << 20

// LoadTokenizer reads a tokenizer.json file.
func LoadTokenizer(path string) (*bpe.Tokenizer, error) {
	c, err := readTokenizer(path)
	if err != nil {
		return nil, err
	}
	return newTokenizer(path, c)
}

// readTokenizer reads a tokenizer.json file into the tokenizer's parts.
func readTokenizer(path string) (bpe.Config, error) {
	data, err := readSmall(path, maxTokenizerFile)
	if err != nil {
		return bpe.Config{}, err
	}
	return parseTokenizer(path, data)
}

// newTokenizer builds the tokenizer of c, read from the file name.
func newTokenizer(name string, c bpe.Config) (*bpe.Tokenizer, error) {
	t, err := bpe.New(c)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return t, nil
}

// The JSON layout of tokenizer.json, as far as it is read.
type tokJSON struct {
	AddedTokens   []addedJSON     `json:"added_tokens"`
	Normalizer    json.RawMessage `json:"normalizer"`
	PreTokenizer  json.RawMessage `json:"pre_tokenizer"`
	PostProcessor json.RawMessage `json:"post_processor"`
	Decoder       json.RawMessage `json:"decoder"`
	Model         *modelJSON      `json:"model"`
}

type addedJSON struct {
	ID         *int64  `json:"id"`
	Content    *string `json:"content"`
	SingleWord bool    `json:"single_word"`
	LStrip     bool    `json:"lstrip"`
	RStrip     bool    `json:"rstrip"`
	Normalized bool    `json:"normalized"`
	Special    bool    `json:"special"`
}

type modelJSON struct {
	Type                    string            `json:"type"`
	Dropout                 *float64          `json:"dropout"`
	UnkToken                *string           `json:"unk_token"`
	ContinuingSubwordPrefix *string           `json:"continuing_subword_prefix"`
	EndOfWordSuffix         *string           `json:"end_of_word_suffix"`
	FuseUnk                 bool              `json:"fuse_unk"`
	ByteFallback            bool              `json:"byte_fallback"`
	IgnoreMerges            bool              `json:"ignore_merges"`
	Vocab                   map[string]int64  `json:"vocab"`
	Merges                  []json.RawMessage `json:"merges"`
}

// component is a normalizer, pre-tokenizer, decoder or post-processor:
// its type and its fields.
type component map[string]json.RawMessage

func (c component) typ() string {
	var s string
	json.Unmarshal(c["type"], &s)
	return s
}

func (c component) str(key string) (string, bool) {
	var s string
	if err := json.Unmarshal(c[key], &s); err != nil {
		return "", false
	}
	return s, true
}

func (c component) boolean(key string, def bool) bool {
	var b bool
	if err := json.Unmarshal(c[key], &b); err != nil {
		return def
	}
	return b
}

// list decodes a list of components (Sequence's members).
func (c component) list(key string) ([]component, error) {
	var out []component
	if err := json.Unmarshal(c[key], &out); err != nil {
		return nil, fmt.Errorf("%s: %q must be a list of objects", c.typ(), key)
	}
	return out, nil
}

// stringPattern reads {"String": s} patterns (Replace, Split); regexes
// come back with isRegex.
func (c component) pattern() (s string, isRegex bool, err error) {
	var p struct {
		String *string `json:"String"`
		Regex  *string `json:"Regex"`
	}
	if err := json.Unmarshal(c["pattern"], &p); err != nil {
		return "", false, fmt.Errorf("%s: bad pattern %s", c.typ(), c["pattern"])
	}
	switch {
	case p.String != nil:
		return *p.String, false, nil
	case p.Regex != nil:
		return *p.Regex, true, nil
	}
	return "", false, fmt.Errorf("%s: pattern %s has neither String nor Regex", c.typ(), c["pattern"])
}

func isNull(raw json.RawMessage) bool {
	t := bytes.TrimSpace(raw)
	return len(t) == 0 || bytes.Equal(t, []byte("null"))
}

// maxNesting bounds Sequence nesting.
const maxNesting = 8

// ParseTokenizer reads the bytes of a tokenizer.json (name is used in
// errors). Supported: BPE models; normalizers Prepend, Replace (string
// patterns), NFC/NFD/NFKC/NFKD, Lowercase and Sequence; pre-tokenizers
// ByteLevel, Metaspace, Split with GPT-2's, Qwen2's or Llama 3's regex
// (behavior Isolated), and Sequence; decoders ByteLevel, Metaspace,
// Replace, ByteFallback, Fuse, Strip and Sequence; post-processors
// TemplateProcessing, ByteLevel, RobertaProcessing, BertProcessing and
// Sequence (for the BOS and EOS ids). Other components are errors naming
// them. Added tokens are matched on the raw text even when "normalized" is
// true.
func ParseTokenizer(name string, data []byte) (*bpe.Tokenizer, error) {
	c, err := parseTokenizer(name, data)
	if err != nil {
		return nil, err
	}
	return newTokenizer(name, c)
}

func parseTokenizer(name string, data []byte) (bpe.Config, error) {
	c, err := tokenizerConfig(data)
	if err != nil {
		return c, fmt.Errorf("%s: %w", name, err)
	}
	return c, nil
}

// tokenizerConfig maps a tokenizer.json onto bpe.Config.
func tokenizerConfig(data []byte) (bpe.Config, error) {
	var tj tokJSON
	c := bpe.Config{Unk: -1, BOS: -1, EOS: -1}
	if err := json.Unmarshal(data, &tj); err != nil {
		return c, fmt.Errorf("not a tokenizer.json: %v", err)
	}
	mj := tj.Model
	if mj == nil {
		return c, fmt.Errorf("no \"model\"")
	}
	if mj.Type != "BPE" && !(mj.Type == "" && mj.Merges != nil) {
		return c, fmt.Errorf("model type %q is not supported (only BPE)", mj.Type)
	}
	if mj.Dropout != nil && *mj.Dropout != 0 {
		return c, fmt.Errorf("model: BPE dropout %g is not supported (it randomises tokenization)", *mj.Dropout)
	}
	if mj.ContinuingSubwordPrefix != nil && *mj.ContinuingSubwordPrefix != "" {
		return c, fmt.Errorf("model: continuing_subword_prefix %q is not supported", *mj.ContinuingSubwordPrefix)
	}
	if mj.EndOfWordSuffix != nil && *mj.EndOfWordSuffix != "" {
		return c, fmt.Errorf("model: end_of_word_suffix %q is not supported", *mj.EndOfWordSuffix)
	}
	c.ByteFallback, c.FuseUnk, c.IgnoreMerges = mj.ByteFallback, mj.FuseUnk, mj.IgnoreMerges
	if len(mj.Vocab) == 0 {
		return c, fmt.Errorf("model: empty vocab")
	}
	byID := map[int]string{}
	size := 0
	for tok, id := range mj.Vocab {
		if id < 0 || id >= bpe.MaxTokens {
			return c, fmt.Errorf("model: token %q has id %d, outside [0, %d)", tok, id, bpe.MaxTokens)
		}
		if prev, dup := byID[int(id)]; dup {
			a, b := prev, tok
			if b < a {
				a, b = b, a
			}
			return c, fmt.Errorf("model: tokens %q and %q share id %d", a, b, id)
		}
		byID[int(id)] = tok
		size = max(size, int(id)+1)
	}
	c.Tokens = make([]string, size)
	for id, tok := range byID {
		c.Tokens[id] = tok
	}
	for i, a := range tj.AddedTokens {
		if a.ID == nil || a.Content == nil {
			return c, fmt.Errorf("added_tokens[%d]: needs id and content", i)
		}
		if *a.ID < 0 || *a.ID >= bpe.MaxTokens {
			return c, fmt.Errorf("added_tokens[%d]: id %d is outside [0, %d)", i, *a.ID, bpe.MaxTokens)
		}
		c.Added = append(c.Added, bpe.AddedToken{ID: int(*a.ID), Content: *a.Content, LStrip: a.LStrip, RStrip: a.RStrip,
			SingleWord: a.SingleWord, Special: a.Special})
	}
	// idOf finds a token by name, as the post-processor and unk_token name them.
	idOf := func(name string) (int, bool) {
		if id, ok := mj.Vocab[name]; ok {
			return int(id), true
		}
		for _, a := range c.Added {
			if a.Content == name {
				return a.ID, true
			}
		}
		return 0, false
	}
	if mj.UnkToken != nil {
		id, ok := idOf(*mj.UnkToken)
		if !ok {
			return c, fmt.Errorf("model: unk_token %q is not in the vocab", *mj.UnkToken)
		}
		c.Unk = id
	}
	for rank, raw := range mj.Merges {
		a, b, err := parseMerge(raw)
		if err != nil {
			return c, fmt.Errorf("model: merges[%d]: %v", rank, err)
		}
		c.Merges = append(c.Merges, [2]string{a, b})
	}
	var err error
	if c.Normalizers, err = parseNormalizer(tj.Normalizer, 0); err != nil {
		return c, fmt.Errorf("normalizer: %w", err)
	}
	if c.PreTokenizers, err = parsePreTokenizer(tj.PreTokenizer, 0); err != nil {
		return c, fmt.Errorf("pre_tokenizer: %w", err)
	}
	if c.Decoders, err = parseDecoder(tj.Decoder, 0); err != nil {
		return c, fmt.Errorf("decoder: %w", err)
	}
	if c.BOS, c.EOS, err = parsePostProcessor(tj.PostProcessor, 0, idOf); err != nil {
		return c, fmt.Errorf("post_processor: %w", err)
	}
	return c, nil
}

// parseMerge reads a merge as "a b" (older files) or ["a", "b"].
func parseMerge(raw json.RawMessage) (string, string, error) {
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return bpe.SplitMerge(s)
	}
	var pair []string
	if err := json.Unmarshal(raw, &pair); err != nil || len(pair) != 2 {
		return "", "", fmt.Errorf("%s is neither \"a b\" nor [\"a\", \"b\"]", raw)
	}
	return pair[0], pair[1], nil
}

func parseComponent(raw json.RawMessage) (component, error) {
	var c component
	if err := json.Unmarshal(raw, &c); err != nil {
		return nil, fmt.Errorf("%s is not an object", raw)
	}
	return c, nil
}

// parseList reads a component of a list-valued pipeline stage
// (normalizer, pre-tokenizer, decoder): null, a Sequence whose members
// (under key) are read recursively, or one component that leaf turns into
// items.
func parseList[T any](raw json.RawMessage, depth int, key string, leaf func(c component) ([]T, error)) ([]T, error) {
	if isNull(raw) {
		return nil, nil
	}
	if depth > maxNesting {
		return nil, fmt.Errorf("Sequence nested too deeply")
	}
	c, err := parseComponent(raw)
	if err != nil {
		return nil, err
	}
	if c.typ() != "Sequence" {
		return leaf(c)
	}
	subs, err := c.list(key)
	if err != nil {
		return nil, err
	}
	var out []T
	for _, s := range subs {
		raw, _ := json.Marshal(s)
		items, err := parseList(raw, depth+1, key, leaf)
		if err != nil {
			return nil, err
		}
		out = append(out, items...)
	}
	return out, nil
}

// unicodeForms are the Unicode normalizers by type.
var unicodeForms = map[string]norm.Form{"NFC": norm.NFC, "NFD": norm.NFD, "NFKC": norm.NFKC, "NFKD": norm.NFKD}

func parseNormalizer(raw json.RawMessage, depth int) ([]bpe.Normalizer, error) {
	return parseList(raw, depth, "normalizers", func(c component) ([]bpe.Normalizer, error) {
		switch typ := c.typ(); typ {
		case "Prepend":
			p, ok := c.str("prepend")
			if !ok {
				return nil, fmt.Errorf("Prepend needs a string \"prepend\"")
			}
			return []bpe.Normalizer{bpe.Prepend(p)}, nil
		case "Replace":
			from, to, err := replaceArgs(c)
			if err != nil {
				return nil, err
			}
			return []bpe.Normalizer{bpe.Replace(from, to)}, nil
		case "NFC", "NFD", "NFKC", "NFKD":
			return []bpe.Normalizer{bpe.Unicode(unicodeForms[typ])}, nil
		case "Lowercase":
			return []bpe.Normalizer{bpe.Lowercase()}, nil
		default:
			return nil, fmt.Errorf("type %q is not supported (supported: Sequence, Prepend, Replace, NFC, NFD, NFKC, NFKD, Lowercase)", typ)
		}
	})
}

func parsePreTokenizer(raw json.RawMessage, depth int) ([]bpe.PreTokenizer, error) {
	return parseList(raw, depth, "pretokenizers", func(c component) ([]bpe.PreTokenizer, error) {
		switch typ := c.typ(); typ {
		case "ByteLevel":
			return []bpe.PreTokenizer{bpe.ByteLevel(c.boolean("add_prefix_space", true), c.boolean("use_regex", true))}, nil
		case "Metaspace":
			rep, scheme, err := metaspace(c)
			if err != nil {
				return nil, err
			}
			return []bpe.PreTokenizer{bpe.Metaspace(rep, scheme, c.boolean("split", true))}, nil
		case "Split":
			pat, isRegex, err := c.pattern()
			if err != nil {
				return nil, err
			}
			sp, known := bpe.PatternOf(pat)
			if !isRegex || !known {
				return nil, fmt.Errorf("Split pattern %s is not supported (supported: the regexes of GPT-2, Qwen2 and Llama 3)", c["pattern"])
			}
			if b, _ := c.str("behavior"); b != "Isolated" {
				return nil, fmt.Errorf("Split behavior %q is not supported (only Isolated)", b)
			}
			if c.boolean("invert", false) {
				return nil, fmt.Errorf("Split with invert is not supported")
			}
			return []bpe.PreTokenizer{bpe.Split(sp)}, nil
		default:
			return nil, fmt.Errorf("type %q is not supported (supported: Sequence, ByteLevel, Metaspace, Split)", typ)
		}
	})
}

// replaceArgs reads a Replace normalizer or decoder: a non-empty String
// pattern and its replacement "content".
func replaceArgs(c component) (from, to string, err error) {
	from, isRegex, err := c.pattern()
	if err != nil {
		return "", "", err
	}
	if isRegex || from == "" {
		return "", "", fmt.Errorf("Replace with pattern %s is not supported (only non-empty String patterns)", c["pattern"])
	}
	to, ok := c.str("content")
	if !ok {
		return "", "", fmt.Errorf("Replace needs a string \"content\"")
	}
	return from, to, nil
}

// prependSchemes are Metaspace's prepend_scheme values.
var prependSchemes = map[string]bpe.PrependScheme{"always": bpe.PrependAlways, "first": bpe.PrependFirst, "never": bpe.PrependNever}

// metaspace reads Metaspace's replacement and prepend scheme (or the older
// add_prefix_space flag).
func metaspace(c component) (string, bpe.PrependScheme, error) {
	rep, ok := c.str("replacement")
	if !ok || rep == "" {
		return "", 0, fmt.Errorf("Metaspace needs a non-empty string \"replacement\"")
	}
	scheme := bpe.PrependAlways
	if s, ok := c.str("prepend_scheme"); ok {
		if scheme, ok = prependSchemes[s]; !ok {
			return "", 0, fmt.Errorf("Metaspace prepend_scheme %q is not supported (always, first, never)", s)
		}
	} else if !c.boolean("add_prefix_space", true) {
		scheme = bpe.PrependNever
	}
	return rep, scheme, nil
}

func parseDecoder(raw json.RawMessage, depth int) ([]bpe.Decoder, error) {
	return parseList(raw, depth, "decoders", func(c component) ([]bpe.Decoder, error) {
		switch typ := c.typ(); typ {
		case "ByteLevel":
			return []bpe.Decoder{bpe.ByteLevelDecoder()}, nil
		case "ByteFallback":
			return []bpe.Decoder{bpe.ByteFallbackDecoder()}, nil
		case "Fuse":
			return nil, nil // pieces are concatenated anyway
		case "Replace":
			from, to, err := replaceArgs(c)
			if err != nil {
				return nil, err
			}
			return []bpe.Decoder{bpe.ReplaceDecoder(from, to)}, nil
		case "Strip":
			content, ok := c.str("content")
			var start int64
			if err := json.Unmarshal(c["start"], &start); err != nil || !ok || content == "" || start < 0 || start > math.MaxInt16 {
				return nil, fmt.Errorf("Strip needs a string \"content\" and a count \"start\"")
			}
			return []bpe.Decoder{bpe.StripDecoder(content, int(start))}, nil
		case "Metaspace":
			rep, scheme, err := metaspace(c)
			if err != nil {
				return nil, err
			}
			return []bpe.Decoder{bpe.MetaspaceDecoder(rep, scheme != bpe.PrependNever)}, nil
		default:
			return nil, fmt.Errorf("type %q is not supported (supported: Sequence, ByteLevel, ByteFallback, Fuse, Replace, Strip, Metaspace)", typ)
		}
	})
}

// parsePostProcessor finds the BOS and EOS ids that the post-processor
// puts around a single sequence (-1 where it puts none); idOf finds a
// token's id by its name.
func parsePostProcessor(raw json.RawMessage, depth int, idOf func(string) (int, bool)) (bos, eos int, err error) {
	bos, eos = -1, -1
	if isNull(raw) {
		return bos, eos, nil
	}
	if depth > maxNesting {
		return bos, eos, fmt.Errorf("Sequence nested too deeply")
	}
	c, err := parseComponent(raw)
	if err != nil {
		return bos, eos, err
	}
	byName := func(name string) (int, error) {
		id, ok := idOf(name)
		if !ok {
			return -1, fmt.Errorf("%s: token %q is not in the vocabulary", c.typ(), name)
		}
		return id, nil
	}
	switch typ := c.typ(); typ {
	case "Sequence":
		subs, err := c.list("processors")
		if err != nil {
			return bos, eos, err
		}
		for _, s := range subs {
			raw, _ := json.Marshal(s)
			b, e, err := parsePostProcessor(raw, depth+1, idOf)
			if err != nil {
				return bos, eos, err
			}
			if b >= 0 {
				bos = b
			}
			if e >= 0 {
				eos = e
			}
		}
		return bos, eos, nil
	case "ByteLevel":
		return bos, eos, nil
	case "RobertaProcessing", "BertProcessing":
		var cls, sep []json.RawMessage
		var cn, sn string
		if json.Unmarshal(c["cls"], &cls) != nil || json.Unmarshal(c["sep"], &sep) != nil || len(cls) != 2 || len(sep) != 2 ||
			json.Unmarshal(cls[0], &cn) != nil || json.Unmarshal(sep[0], &sn) != nil {
			return bos, eos, fmt.Errorf("%s needs \"cls\" and \"sep\" as [token, id]", typ)
		}
		if bos, err = byName(cn); err != nil {
			return -1, -1, err
		}
		eos, err = byName(sn)
		return bos, eos, err
	case "TemplateProcessing":
		var single []map[string]struct {
			ID string `json:"id"`
		}
		if err := json.Unmarshal(c["single"], &single); err != nil {
			return bos, eos, fmt.Errorf("TemplateProcessing: \"single\" must be a list of pieces")
		}
		var specials map[string]struct {
			IDs []int64 `json:"ids"`
		}
		if !isNull(c["special_tokens"]) {
			if err := json.Unmarshal(c["special_tokens"], &specials); err != nil {
				return bos, eos, fmt.Errorf("TemplateProcessing: bad \"special_tokens\"")
			}
		}
		seenSeq := false
		for _, p := range single {
			if _, ok := p["Sequence"]; ok {
				seenSeq = true
				continue
			}
			sp, ok := p["SpecialToken"]
			if !ok {
				return bos, eos, fmt.Errorf("TemplateProcessing: piece %v is neither Sequence nor SpecialToken", p)
			}
			id := -1
			if st, ok := specials[sp.ID]; ok && len(st.IDs) == 1 {
				id = int(st.IDs[0])
			} else if st, ok := specials[sp.ID]; ok {
				return bos, eos, fmt.Errorf("TemplateProcessing: special token %q has %d ids, want 1", sp.ID, len(st.IDs))
			} else if id, err = byName(sp.ID); err != nil {
				return bos, eos, err
			}
			if id < 0 || id >= bpe.MaxTokens {
				return bos, eos, fmt.Errorf("TemplateProcessing: special token %q has id %d outside [0, %d)", sp.ID, id, bpe.MaxTokens)
			}
			if !seenSeq && bos < 0 {
				bos = id
			} else if seenSeq && eos < 0 {
				eos = id
			}
		}
		return bos, eos, nil
	default:
		return bos, eos, fmt.Errorf("type %q is not supported (supported: Sequence, ByteLevel, TemplateProcessing, RobertaProcessing, BertProcessing)", typ)
	}
}
