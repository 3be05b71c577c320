package hf

import (
	"encoding/json"
	"fmt"
)

// BPEParts describes a byte-level BPE tokenizer by its parts, as formats
// other than tokenizer.json carry it (GGUF's "gpt2" tokenizers).
type BPEParts struct {
	Tokens  []string // by id, in GPT-2's byte alphabet ("Ġthe")
	Added   []int    // ids matched whole in the text before BPE (control and user-defined tokens)
	Special []int    // of Added, the special ones (skipped by Decode's callers, never split)
	Merges  []string // "a b", by rank
	// Pattern is the pre-tokenizer regex: "gpt2", "llama3" or "qwen2".
	Pattern string
	// IgnoreMerges emits a pre-token that is itself in the vocabulary as
	// one token without merging (Llama 3).
	IgnoreMerges bool
	BOS, EOS     int // -1: none
}

// patternNames maps BPEParts.Pattern to the regexes of knownPatterns.
var patternNames = map[string]splitPattern{"gpt2": patGPT2, "llama3": patLlama3, "qwen2": patQwen2}

// NewBPE builds a Tokenizer from parts. It goes through the same checks as
// a tokenizer.json (the parts are written as one and parsed), so errors
// read the same; name prefixes them.
func NewBPE(name string, p BPEParts) (*Tokenizer, error) {
	pat, ok := patternNames[p.Pattern]
	if !ok {
		return nil, fmt.Errorf("%s: pre-tokenizer pattern %q is not supported (supported: gpt2, llama3, qwen2)", name, p.Pattern)
	}
	var regex string
	for r, sp := range knownPatterns {
		if sp == pat {
			regex = r
		}
	}
	vocab := make(map[string]int64, len(p.Tokens))
	for id, tok := range p.Tokens {
		if prev, dup := vocab[tok]; dup {
			return nil, fmt.Errorf("%s: tokens %d and %d are both %q", name, prev, id, tok)
		}
		vocab[tok] = int64(id)
	}
	special := map[int]bool{}
	for _, id := range p.Special {
		special[id] = true
	}
	added := []map[string]any{}
	for _, id := range p.Added {
		if id < 0 || id >= len(p.Tokens) {
			return nil, fmt.Errorf("%s: added token id %d is outside the %d tokens", name, id, len(p.Tokens))
		}
		added = append(added, map[string]any{"id": id, "content": p.Tokens[id], "special": special[id]})
	}
	doc := map[string]any{
		"added_tokens": added,
		"pre_tokenizer": map[string]any{"type": "Sequence", "pretokenizers": []any{
			map[string]any{"type": "Split", "pattern": map[string]any{"Regex": regex}, "behavior": "Isolated", "invert": false},
			map[string]any{"type": "ByteLevel", "add_prefix_space": false, "use_regex": false},
		}},
		"decoder": map[string]any{"type": "ByteLevel"},
		"model":   map[string]any{"type": "BPE", "vocab": vocab, "merges": p.Merges, "ignore_merges": p.IgnoreMerges},
	}
	data, err := json.Marshal(doc)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", name, err)
	}
	t, err := ParseTokenizer(name, data)
	if err != nil {
		return nil, err
	}
	for _, x := range []struct {
		dst  *int
		id   int
		what string
	}{{&t.bos, p.BOS, "BOS"}, {&t.eos, p.EOS, "EOS"}} {
		if x.id >= len(t.pieces) || (x.id >= 0 && t.pieces[x.id] == "") {
			return nil, fmt.Errorf("%s: %s id %d is not a token", name, x.what, x.id)
		}
		*x.dst = max(x.id, -1)
	}
	return t, nil
}
