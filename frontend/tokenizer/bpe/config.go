package bpe

import (
	"fmt"
	"strings"
)

// MaxTokens bounds the ids of a tokenizer, so that a corrupt file cannot
// make a loader allocate a huge table.
const MaxTokens = 1 << 24

// Config is everything a Tokenizer is made of, as plain data.
type Config struct {
	// Tokens is the vocabulary by id; an id without a token is "".
	Tokens []string
	// Merges are the merge rules by rank, first merged first: the pair of
	// tokens whose concatenation is the merged token.
	Merges [][2]string
	// Added tokens (special tokens such as "<s>" or "<|endoftext|>", and
	// user-defined ones) are cut out of the text before anything else and
	// never merged. Their ids may lie beyond Tokens.
	Added []AddedToken
	// Unk is the id of the token that stands for a character with no token
	// (fused into one for a run of them with FuseUnk), or -1: such
	// characters are dropped.
	Unk     int
	FuseUnk bool
	// ByteFallback spells a character with no token by its "<0xXX>" byte
	// tokens, when the vocabulary has them.
	ByteFallback bool
	// IgnoreMerges makes a word that is itself a token that one token,
	// without merging (Llama 3).
	IgnoreMerges bool

	Normalizers   []Normalizer   // applied in order to each stretch of text between added tokens
	PreTokenizers []PreTokenizer // applied in order, each to the words of the one before
	Decoders      []Decoder      // applied in order to each token's text
	BOS, EOS      int            // the ids Encode puts around the text, or -1
	// EOG are the ids that end generation when sampled (end of
	// generation: the model's EOS ids).
	EOG []int
}

// AddedToken is a token matched whole in the text.
type AddedToken struct {
	ID      int
	Content string
	// LStrip and RStrip make the token absorb the white space on its left
	// and right; SingleWord matches it only with no word character beside.
	LStrip, RStrip, SingleWord bool
	// Special tokens (control tokens) print nothing.
	Special bool
}

// Token returns the token of id, from the vocabulary or the added tokens
// ("" when id has none).
func (c *Config) Token(id int) string {
	for _, a := range c.Added {
		if a.ID == id {
			return a.Content
		}
	}
	if id < 0 || id >= len(c.Tokens) {
		return ""
	}
	return c.Tokens[id]
}

// SplitMerge reads a merge rule written as "a b" (the two tokens, one space
// between).
func SplitMerge(s string) (a, b string, err error) {
	a, b, ok := strings.Cut(s, " ")
	if !ok || strings.Contains(b, " ") {
		return "", "", fmt.Errorf("%q is not two tokens separated by one space", s)
	}
	return a, b, nil
}

// New builds a tokenizer from c, checking that its parts agree: no token
// twice in the vocabulary, every merge of tokens into a token, added tokens
// that clash with no other token, and BOS, EOS and Unk ids that are tokens.
func New(c Config) (*Tokenizer, error) {
	if len(c.Tokens) > MaxTokens {
		return nil, fmt.Errorf("%d tokens, more than the %d supported", len(c.Tokens), MaxTokens)
	}
	t := &Tokenizer{
		vocab: make(map[string]int, len(c.Tokens)), merges: map[uint64]mergeRule{}, unk: -1,
		byteFallback: c.ByteFallback, fuseUnk: c.FuseUnk, ignoreMerges: c.IgnoreMerges,
		normalizers: c.Normalizers, pretok: c.PreTokenizers, decoders: c.Decoders,
		special: map[int]bool{}, bos: -1, eos: -1,
	}
	for id, tok := range c.Tokens {
		if tok == "" {
			continue
		}
		if prev, dup := t.vocab[tok]; dup {
			return nil, fmt.Errorf("tokens %d and %d are both %q", prev, id, tok)
		}
		t.vocab[tok] = id
	}
	size := len(c.Tokens)
	for i, a := range c.Added {
		switch {
		case a.ID < 0 || a.ID >= MaxTokens:
			return nil, fmt.Errorf("added token %d: id %d is outside [0, %d)", i, a.ID, MaxTokens)
		case a.Content == "":
			return nil, fmt.Errorf("added token %d: empty content", i)
		}
		if v, ok := t.vocab[a.Content]; ok && v != a.ID {
			return nil, fmt.Errorf("added token %d: %q has id %d, but the vocabulary gives it %d", i, a.Content, a.ID, v)
		}
		if a.ID < len(c.Tokens) && c.Tokens[a.ID] != "" && c.Tokens[a.ID] != a.Content {
			return nil, fmt.Errorf("added token %d: %q has id %d, which clashes with the vocabulary's %q", i, a.Content, a.ID, c.Tokens[a.ID])
		}
		for _, o := range t.added {
			if o.id == a.ID || o.content == a.Content {
				return nil, fmt.Errorf("added token %d: %q (id %d) clashes with added token %q (id %d)", i, a.Content, a.ID, o.content, o.id)
			}
		}
		t.added = append(t.added, addedToken{id: a.ID, content: a.Content, lstrip: a.LStrip, rstrip: a.RStrip,
			singleWord: a.SingleWord, special: a.Special})
		if a.Special {
			t.special[a.ID] = true
		}
		size = max(size, a.ID+1)
	}
	if size == 0 {
		return nil, fmt.Errorf("empty vocabulary")
	}
	t.pieces = make([]string, size)
	copy(t.pieces, c.Tokens)
	for _, a := range t.added {
		t.pieces[a.id] = a.content
	}
	t.sortAdded()
	for b := 0; b < 256; b++ {
		t.byteIDs[b] = -1
		if id, ok := t.vocab[fmt.Sprintf("<0x%02X>", b)]; ok {
			t.byteIDs[b] = id
		}
	}
	for rank, m := range c.Merges {
		a, b := m[0], m[1]
		ia, oka := t.vocab[a]
		ib, okb := t.vocab[b]
		im, okm := t.vocab[a+b]
		if !oka || !okb || !okm {
			return nil, fmt.Errorf("merges[%d] %q + %q: %s is not in the vocab", rank, a, b, missing(oka, okb, a, b, a+b))
		}
		if _, dup := t.merges[pairKey(ia, ib)]; !dup {
			t.merges[pairKey(ia, ib)] = mergeRule{rank: rank, id: im}
		}
	}
	for _, p := range t.pretok {
		t.byteLevel = t.byteLevel || p.kind == "bytelevel"
	}
	for _, x := range []struct {
		dst  *int
		id   int
		what string
	}{{&t.unk, c.Unk, "unknown token"}, {&t.bos, c.BOS, "BOS"}, {&t.eos, c.EOS, "EOS"}} {
		if x.id >= len(t.pieces) || (x.id >= 0 && t.pieces[x.id] == "") {
			return nil, fmt.Errorf("%s id %d is not a token", x.what, x.id)
		}
		*x.dst = max(x.id, -1)
	}
	for _, id := range c.EOG {
		// A model may sample ids beyond the tokenizer's (a padded
		// vocabulary), so any id may end generation.
		if id < 0 || id >= MaxTokens {
			return nil, fmt.Errorf("end-of-generation id %d is outside [0, %d)", id, MaxTokens)
		}
	}
	t.eog = append([]int{}, c.EOG...)
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
