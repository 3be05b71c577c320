package hf

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strings"
)

// maxTokenizerFile bounds the size of tokenizer.json read into memory.
const maxTokenizerFile = 256 << 20

// maxTokenID bounds token ids, so that a corrupt file cannot make the
// loader allocate a huge table.
const maxTokenID = 1 << 24

// LoadTokenizer reads a tokenizer.json file.
func LoadTokenizer(path string) (*Tokenizer, error) {
	data, err := readSmall(path, maxTokenizerFile)
	if err != nil {
		return nil, err
	}
	return ParseTokenizer(path, data)
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
// errors). Only BPE models are supported.
func ParseTokenizer(name string, data []byte) (*Tokenizer, error) {
	t, err := parseTokenizer(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	t.name = name
	return t, nil
}

func parseTokenizer(data []byte) (*Tokenizer, error) {
	var tj tokJSON
	if err := json.Unmarshal(data, &tj); err != nil {
		return nil, fmt.Errorf("not a tokenizer.json: %v", err)
	}
	mj := tj.Model
	if mj == nil {
		return nil, fmt.Errorf("no \"model\"")
	}
	if mj.Type != "BPE" && !(mj.Type == "" && mj.Merges != nil) {
		return nil, fmt.Errorf("model type %q is not supported (only BPE)", mj.Type)
	}
	if mj.Dropout != nil && *mj.Dropout != 0 {
		return nil, fmt.Errorf("model: BPE dropout %g is not supported (it randomises tokenization)", *mj.Dropout)
	}
	if mj.ContinuingSubwordPrefix != nil && *mj.ContinuingSubwordPrefix != "" {
		return nil, fmt.Errorf("model: continuing_subword_prefix %q is not supported", *mj.ContinuingSubwordPrefix)
	}
	if mj.EndOfWordSuffix != nil && *mj.EndOfWordSuffix != "" {
		return nil, fmt.Errorf("model: end_of_word_suffix %q is not supported", *mj.EndOfWordSuffix)
	}
	t := &Tokenizer{
		vocab: make(map[string]int, len(mj.Vocab)), merges: map[uint64]mergeRule{}, unk: -1,
		byteFallback: mj.ByteFallback, fuseUnk: mj.FuseUnk, ignoreMerges: mj.IgnoreMerges,
		special: map[int]bool{}, bos: -1, eos: -1,
	}
	if len(mj.Vocab) == 0 {
		return nil, fmt.Errorf("model: empty vocab")
	}
	size := 0
	byID := map[int]string{}
	for tok, id := range mj.Vocab {
		if id < 0 || id >= maxTokenID {
			return nil, fmt.Errorf("model: token %q has id %d, outside [0, %d)", tok, id, maxTokenID)
		}
		if prev, dup := byID[int(id)]; dup {
			a, b := prev, tok
			if b < a {
				a, b = b, a
			}
			return nil, fmt.Errorf("model: tokens %q and %q share id %d", a, b, id)
		}
		byID[int(id)] = tok
		t.vocab[tok] = int(id)
		size = max(size, int(id)+1)
	}
	for i, a := range tj.AddedTokens {
		if a.ID == nil || a.Content == nil {
			return nil, fmt.Errorf("added_tokens[%d]: needs id and content", i)
		}
		if *a.ID < 0 || *a.ID >= maxTokenID {
			return nil, fmt.Errorf("added_tokens[%d]: id %d is outside [0, %d)", i, *a.ID, maxTokenID)
		}
		if *a.Content == "" {
			return nil, fmt.Errorf("added_tokens[%d]: empty content", i)
		}
		id := int(*a.ID)
		if v, ok := t.vocab[*a.Content]; ok && v != id {
			return nil, fmt.Errorf("added_tokens[%d]: %q has id %d, but the vocab gives it %d", i, *a.Content, id, v)
		}
		if v, ok := byID[id]; ok && v != *a.Content {
			return nil, fmt.Errorf("added_tokens[%d]: %q has id %d, which clashes with the vocab's %q", i, *a.Content, id, v)
		}
		for _, o := range t.added {
			if o.id == id || o.content == *a.Content {
				return nil, fmt.Errorf("added_tokens[%d]: %q (id %d) clashes with added token %q (id %d)", i, *a.Content, id, o.content, o.id)
			}
		}
		t.added = append(t.added, addedToken{id: id, content: *a.Content, lstrip: a.LStrip, rstrip: a.RStrip,
			singleWord: a.SingleWord, special: a.Special})
		if a.Special {
			t.special[id] = true
		}
		size = max(size, id+1)
	}
	t.pieces = make([]string, size)
	for tok, id := range t.vocab {
		t.pieces[id] = tok
	}
	for _, a := range t.added {
		t.pieces[a.id] = a.content
	}
	t.sortAdded()
	if mj.UnkToken != nil {
		id, ok := t.ID(*mj.UnkToken)
		if !ok {
			return nil, fmt.Errorf("model: unk_token %q is not in the vocab", *mj.UnkToken)
		}
		t.unk = id
	}
	for b := 0; b < 256; b++ {
		t.byteIDs[b] = -1
		if id, ok := t.vocab[fmt.Sprintf("<0x%02X>", b)]; ok {
			t.byteIDs[b] = id
		}
	}
	for rank, raw := range mj.Merges {
		a, b, err := parseMerge(raw)
		if err != nil {
			return nil, fmt.Errorf("model: merges[%d]: %v", rank, err)
		}
		ia, oka := t.vocab[a]
		ib, okb := t.vocab[b]
		im, okm := t.vocab[a+b]
		if !oka || !okb || !okm {
			return nil, fmt.Errorf("model: merges[%d] %q + %q: %s is not in the vocab", rank, a, b, missing(oka, okb, a, b, a+b))
		}
		if _, dup := t.merges[pairKey(ia, ib)]; !dup {
			t.merges[pairKey(ia, ib)] = mergeRule{rank: rank, id: im}
		}
	}
	var err error
	if t.normalizers, err = parseNormalizer(tj.Normalizer, 0); err != nil {
		return nil, fmt.Errorf("normalizer: %w", err)
	}
	if t.pretok, err = parsePreTokenizer(tj.PreTokenizer, 0); err != nil {
		return nil, fmt.Errorf("pre_tokenizer: %w", err)
	}
	for _, p := range t.pretok {
		t.byteLevel = t.byteLevel || p.kind == "bytelevel"
	}
	if t.decoders, err = parseDecoder(tj.Decoder, 0); err != nil {
		return nil, fmt.Errorf("decoder: %w", err)
	}
	if t.bos, t.eos, err = t.parsePostProcessor(tj.PostProcessor, 0); err != nil {
		return nil, fmt.Errorf("post_processor: %w", err)
	}
	return t, nil
}

func missing(oka, okb bool, a, b, ab string) string {
	switch {
	case !oka:
		return fmt.Sprintf("%q", a)
	case !okb:
		return fmt.Sprintf("%q", b)
	}
	return fmt.Sprintf("the merged token %q", ab)
}

// parseMerge reads a merge as "a b" (older files) or ["a", "b"].
func parseMerge(raw json.RawMessage) (string, string, error) {
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		a, b, ok := strings.Cut(s, " ")
		if !ok || strings.Contains(b, " ") {
			return "", "", fmt.Errorf("%q is not two tokens separated by one space", s)
		}
		return a, b, nil
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

func parseNormalizer(raw json.RawMessage, depth int) ([]normalizer, error) {
	return parseList(raw, depth, "normalizers", func(c component) ([]normalizer, error) {
		switch typ := c.typ(); typ {
		case "Prepend":
			p, ok := c.str("prepend")
			if !ok {
				return nil, fmt.Errorf("Prepend needs a string \"prepend\"")
			}
			return []normalizer{{kind: "prepend", arg: p}}, nil
		case "Replace":
			from, to, err := replaceArgs(c)
			if err != nil {
				return nil, err
			}
			return []normalizer{{kind: "replace", from: from, arg: to}}, nil
		case "NFC", "NFD", "NFKC", "NFKD", "Lowercase":
			return []normalizer{{kind: strings.ToLower(typ)}}, nil
		default:
			return nil, fmt.Errorf("type %q is not supported (supported: Sequence, Prepend, Replace, NFC, NFD, NFKC, NFKD, Lowercase)", typ)
		}
	})
}

func parsePreTokenizer(raw json.RawMessage, depth int) ([]preTokenizer, error) {
	return parseList(raw, depth, "pretokenizers", func(c component) ([]preTokenizer, error) {
		switch typ := c.typ(); typ {
		case "ByteLevel":
			return []preTokenizer{{kind: "bytelevel", addPrefixSpace: c.boolean("add_prefix_space", true),
				useRegex: c.boolean("use_regex", true)}}, nil
		case "Metaspace":
			p, err := metaspace(c)
			if err != nil {
				return nil, err
			}
			p.splitOn = c.boolean("split", true)
			return []preTokenizer{p}, nil
		case "Split":
			pat, isRegex, err := c.pattern()
			if err != nil {
				return nil, err
			}
			sp, known := knownPatterns[pat]
			if !isRegex || !known {
				return nil, fmt.Errorf("Split pattern %s is not supported (supported: the regexes of GPT-2, Qwen2 and Llama 3)", c["pattern"])
			}
			if b, _ := c.str("behavior"); b != "Isolated" {
				return nil, fmt.Errorf("Split behavior %q is not supported (only Isolated)", b)
			}
			if c.boolean("invert", false) {
				return nil, fmt.Errorf("Split with invert is not supported")
			}
			return []preTokenizer{{kind: "split", pattern: sp}}, nil
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

// metaspace reads Metaspace's replacement and prepend scheme (or the older
// add_prefix_space flag).
func metaspace(c component) (preTokenizer, error) {
	rep, ok := c.str("replacement")
	if !ok || rep == "" {
		return preTokenizer{}, fmt.Errorf("Metaspace needs a non-empty string \"replacement\"")
	}
	p := preTokenizer{kind: "metaspace", replacement: rep, prepend: "always"}
	if s, ok := c.str("prepend_scheme"); ok {
		switch s {
		case "always", "first", "never":
			p.prepend = s
		default:
			return p, fmt.Errorf("Metaspace prepend_scheme %q is not supported (always, first, never)", s)
		}
	} else if !c.boolean("add_prefix_space", true) {
		p.prepend = "never"
	}
	return p, nil
}

func parseDecoder(raw json.RawMessage, depth int) ([]decoder, error) {
	return parseList(raw, depth, "decoders", func(c component) ([]decoder, error) {
		switch typ := c.typ(); typ {
		case "ByteLevel":
			return []decoder{{kind: "bytelevel"}}, nil
		case "ByteFallback":
			return []decoder{{kind: "bytefallback"}}, nil
		case "Fuse":
			return nil, nil // pieces are concatenated anyway
		case "Replace":
			from, to, err := replaceArgs(c)
			if err != nil {
				return nil, err
			}
			return []decoder{{kind: "replace", from: from, to: to}}, nil
		case "Strip":
			content, ok := c.str("content")
			var start int64
			if err := json.Unmarshal(c["start"], &start); err != nil || !ok || content == "" || start < 0 || start > math.MaxInt16 {
				return nil, fmt.Errorf("Strip needs a string \"content\" and a count \"start\"")
			}
			return []decoder{{kind: "strip", stripChar: content, strip: int(start)}}, nil
		case "Metaspace":
			p, err := metaspace(c)
			if err != nil {
				return nil, err
			}
			return []decoder{{kind: "metaspace", replacement: p.replacement, prependAny: p.prepend != "never"}}, nil
		default:
			return nil, fmt.Errorf("type %q is not supported (supported: Sequence, ByteLevel, ByteFallback, Fuse, Replace, Strip, Metaspace)", typ)
		}
	})
}

// parsePostProcessor finds the BOS and EOS ids that the post-processor
// puts around a single sequence (-1 where it puts none).
func (t *Tokenizer) parsePostProcessor(raw json.RawMessage, depth int) (bos, eos int, err error) {
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
		id, ok := t.ID(name)
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
			b, e, err := t.parsePostProcessor(raw, depth+1)
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
			if id < 0 || id >= len(t.pieces) {
				return bos, eos, fmt.Errorf("TemplateProcessing: special token %q has id %d outside the vocabulary", sp.ID, id)
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

// useConfig completes the tokenizer with the model's config.json: BOS and
// EOS from bos_token_id and eos_token_id where the post-processor names
// none, and a check that every id is a row of the model's embedding.
func (t *Tokenizer) useConfig(c *Config, modelVocab int) error {
	if len(t.pieces) > modelVocab {
		return fmt.Errorf("the tokenizer has ids up to %d, but the model's vocab_size is %d", len(t.pieces)-1, modelVocab)
	}
	for _, x := range []struct {
		dst  *int
		id   int
		what string
	}{{&t.bos, c.BOS, "bos_token_id"}, {&t.eos, c.EOS, "eos_token_id"}} {
		if *x.dst >= 0 || x.id < 0 {
			continue
		}
		if x.id >= len(t.pieces) || t.pieces[x.id] == "" {
			return fmt.Errorf("config.json's %s %d is not a token of the tokenizer", x.what, x.id)
		}
		*x.dst = x.id
	}
	return nil
}
