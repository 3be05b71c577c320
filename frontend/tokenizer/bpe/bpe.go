// Package bpe is byte-pair encoding with ranked merges and the pipeline
// that Hugging Face's tokenizers put around it: normalizers, pre-tokenizers,
// added tokens, byte fallback and decoders. Format loaders construct it from
// their files' data with New: frontend/hf from tokenizer.json, frontend/gguf
// from a "gpt2" vocabulary.
package bpe

import (
	"container/heap"
	"slices"
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// Tokenizer is a BPE tokenizer. It implements the two kinds of BPE that
// LLMs ship:
//
//   - byte-level BPE (GPT-2, Qwen2, Llama 3): text is split by the
//     pre-tokenizer's pattern, each piece's bytes are mapped to GPT-2's
//     byte alphabet and merged by ranked merges;
//   - SentencePiece-style BPE (LLaMA, Mistral): spaces become "▁" (by a
//     Prepend+Replace normalizer or a Metaspace pre-tokenizer), characters
//     missing from the vocabulary fall back to "<0xXX>" byte tokens, and
//     ranked merges combine the rest.
//
// Added tokens (special tokens such as "<s>" or "<|endoftext|>") are cut out
// of the text first, as Hugging Face does, and never merged.
//
// The pipeline's components are those of Config. Known differences from
// Hugging Face: added tokens are matched on the raw text (before the
// normalizers), and the contractions of (?i:'s|...) fold ASCII case only.
//
// A Tokenizer is immutable after loading and safe for concurrent use.
type Tokenizer struct {
	pieces []string // token of each id ("" for ids with none)
	vocab  map[string]int
	merges map[uint64]mergeRule
	unk    int // -1 without an unknown token

	byteFallback bool
	fuseUnk      bool
	ignoreMerges bool
	byteIDs      [256]int // id of "<0xXX>", or -1

	normalizers []Normalizer
	pretok      []PreTokenizer
	byteLevel   bool // a ByteLevel pre-tokenizer maps bytes to GPT-2's alphabet
	decoders    []Decoder

	added      []addedToken
	addedFirst map[byte][]int // first byte of the content -> indices into added, longest first
	special    map[int]bool

	bos, eos int
	eog      []int // the ids that end generation
}

type mergeRule struct{ rank, id int }

func pairKey(a, b int) uint64 { return uint64(uint32(a))<<32 | uint64(uint32(b)) }

type addedToken struct {
	id             int
	content        string
	lstrip, rstrip bool
	singleWord     bool
	special        bool
}

// A Normalizer rewrites the text before it is pre-tokenized.
type Normalizer struct {
	kind      string // "prepend", "replace", "unicode", "lowercase"
	from, arg string
	form      norm.Form
}

// Prepend puts s before a text that is not empty.
func Prepend(s string) Normalizer { return Normalizer{kind: "prepend", arg: s} }

// Replace replaces every from (not empty) by to.
func Replace(from, to string) Normalizer { return Normalizer{kind: "replace", from: from, arg: to} }

// Unicode brings the text to a Unicode normalization form (NFC, ...).
func Unicode(form norm.Form) Normalizer { return Normalizer{kind: "unicode", form: form} }

// Lowercase maps the text to lower case.
func Lowercase() Normalizer { return Normalizer{kind: "lowercase"} }

func (n Normalizer) apply(s string) string {
	switch n.kind {
	case "prepend":
		if s == "" {
			return s
		}
		return n.arg + s
	case "replace":
		return strings.ReplaceAll(s, n.from, n.arg)
	case "unicode":
		return n.form.String(s)
	case "lowercase":
		return strings.ToLower(s)
	}
	return s
}

// piece is a pre-tokenized piece of text; atStart marks the piece that
// begins the input (Metaspace's prepend_scheme "first").
type piece struct {
	text    string
	atStart bool
}

// A PreTokenizer cuts the text into the words that BPE merges within.
type PreTokenizer struct {
	kind string // "bytelevel", "metaspace", "split"
	// ByteLevel
	addPrefixSpace, useRegex bool
	// Metaspace
	replacement string
	prepend     PrependScheme
	splitOn     bool
	// Split
	pattern Pattern
}

// ByteLevel maps every byte of a word to GPT-2's byte alphabet (ByteChar),
// after putting a space before the text (addPrefixSpace) and splitting it
// by GPT-2's pattern (useRegex).
func ByteLevel(addPrefixSpace, useRegex bool) PreTokenizer {
	return PreTokenizer{kind: "bytelevel", addPrefixSpace: addPrefixSpace, useRegex: useRegex}
}

// PrependScheme says where Metaspace puts a replacement character before
// the text.
type PrependScheme int

const (
	PrependAlways PrependScheme = iota // before every stretch of text
	PrependFirst                       // before the start of the input only
	PrependNever
)

// Metaspace replaces spaces by replacement (SentencePiece's "▁"), prepends
// it as scheme says, and with split cuts the text before each one.
func Metaspace(replacement string, scheme PrependScheme, split bool) PreTokenizer {
	return PreTokenizer{kind: "metaspace", replacement: replacement, prepend: scheme, splitOn: split}
}

// Split cuts the text into the pieces that p matches.
func Split(p Pattern) PreTokenizer { return PreTokenizer{kind: "split", pattern: p} }

func (p PreTokenizer) apply(in []piece) []piece {
	var out []piece
	for _, pc := range in {
		switch p.kind {
		case "bytelevel":
			s := pc.text
			if p.addPrefixSpace && !strings.HasPrefix(s, " ") {
				s = " " + s
			}
			parts := []string{s}
			if p.useRegex {
				parts = GPT2Pattern.split(s)
			}
			for i, part := range parts {
				out = append(out, piece{byteLevel(part), pc.atStart && i == 0})
			}
		case "metaspace":
			s := strings.ReplaceAll(pc.text, " ", p.replacement)
			if !strings.HasPrefix(s, p.replacement) && (p.prepend == PrependAlways || p.prepend == PrependFirst && pc.atStart) {
				s = p.replacement + s
			}
			if !p.splitOn {
				out = append(out, piece{s, pc.atStart})
				continue
			}
			// Split before each replacement character (MergedWithNext).
			start := 0
			for i := 1; i < len(s); i++ {
				if strings.HasPrefix(s[i:], p.replacement) {
					out = append(out, piece{s[start:i], pc.atStart && start == 0})
					start = i
				}
			}
			if start < len(s) {
				out = append(out, piece{s[start:], pc.atStart && start == 0})
			}
		case "split":
			for i, part := range p.pattern.split(pc.text) {
				out = append(out, piece{part, pc.atStart && i == 0})
			}
		}
	}
	return out
}

// A Decoder turns a token back into text.
type Decoder struct {
	kind        string // "bytelevel", "metaspace", "replace", "bytefallback", "strip"
	from, to    string // Replace
	strip       int    // Strip: characters to remove from the start of the text
	stripChar   string
	replacement string // Metaspace
	prependAny  bool   // Metaspace: a replacement was prepended, so drop the first space
}

// ByteLevelDecoder maps GPT-2's byte alphabet back to bytes.
func ByteLevelDecoder() Decoder { return Decoder{kind: "bytelevel"} }

// ByteFallbackDecoder turns "<0xXX>" tokens into their byte.
func ByteFallbackDecoder() Decoder { return Decoder{kind: "bytefallback"} }

// ReplaceDecoder replaces every from by to.
func ReplaceDecoder(from, to string) Decoder { return Decoder{kind: "replace", from: from, to: to} }

// StripDecoder removes up to n leading copies of content from the first
// token of a text.
func StripDecoder(content string, n int) Decoder {
	return Decoder{kind: "strip", stripChar: content, strip: n}
}

// MetaspaceDecoder turns replacement back into spaces and, when the
// pre-tokenizer prepends one (prepended), drops the first token's.
func MetaspaceDecoder(replacement string, prepended bool) Decoder {
	return Decoder{kind: "metaspace", replacement: replacement, prependAny: prepended}
}

// decodeToken applies the decoders to one token; first says whether it is
// the first token of the text (where Strip and Metaspace drop a space).
func (t *Tokenizer) decodeToken(s string, first bool) string {
	for _, d := range t.decoders {
		switch d.kind {
		case "bytelevel":
			if b, ok := fromByteLevel(s); ok {
				s = string(b)
			}
		case "replace":
			s = strings.ReplaceAll(s, d.from, d.to)
		case "bytefallback":
			if b, ok := ParseByteToken(s); ok {
				s = string([]byte{b})
			}
		case "metaspace":
			s = strings.ReplaceAll(s, d.replacement, " ")
			if first && d.prependAny {
				s = strings.TrimPrefix(s, " ")
			}
		case "strip":
			if first {
				for i := 0; i < d.strip && strings.HasPrefix(s, d.stripChar); i++ {
					s = s[len(d.stripChar):]
				}
			}
		}
	}
	return s
}

// ParseByteToken reads a byte-fallback token "<0xXX>" (two hex digits).
func ParseByteToken(s string) (byte, bool) {
	if len(s) != 6 || !strings.HasPrefix(s, "<0x") || s[5] != '>' {
		return 0, false
	}
	hi, lo := hexVal(s[3]), hexVal(s[4])
	if hi < 0 || lo < 0 {
		return 0, false
	}
	return byte(hi<<4 | lo), true
}

func hexVal(c byte) int {
	switch {
	case '0' <= c && c <= '9':
		return int(c - '0')
	case 'A' <= c && c <= 'F':
		return int(c-'A') + 10
	case 'a' <= c && c <= 'f':
		return int(c-'a') + 10
	}
	return -1
}

// Kind describes the tokenizer: "byte-level BPE" or "SentencePiece BPE".
func (t *Tokenizer) Kind() string {
	if t.byteLevel {
		return "byte-level BPE"
	}
	return "SentencePiece BPE"
}

// VocabSize returns the number of ids (one more than the largest id).
func (t *Tokenizer) VocabSize() int { return len(t.pieces) }

// BOS returns the id of the beginning-of-sequence token, or -1.
func (t *Tokenizer) BOS() int { return t.bos }

// EOS returns the id of the end-of-sequence token, or -1.
func (t *Tokenizer) EOS() int { return t.eos }

// IsEOG reports whether sampling id ends generation.
func (t *Tokenizer) IsEOG(id int) bool { return slices.Contains(t.eog, id) }

// EOG returns the ids that end generation.
func (t *Tokenizer) EOG() []int { return append([]int{}, t.eog...) }

// Token returns the token of id as stored in tokenizer.json ("" when id
// has none).
func (t *Tokenizer) Token(id int) string {
	if id < 0 || id >= len(t.pieces) {
		return ""
	}
	return t.pieces[id]
}

// ID returns the id of a token of the vocabulary or an added token.
func (t *Tokenizer) ID(token string) (int, bool) {
	if id, ok := t.vocab[token]; ok {
		return id, true
	}
	for _, a := range t.added {
		if a.content == token {
			return a.id, true
		}
	}
	return 0, false
}

// IsSpecial reports whether id is a special added token.
func (t *Tokenizer) IsSpecial(id int) bool { return t.special[id] }

// Encode returns the ids of text: BOS first when bos is set and the
// tokenizer has one, then the text's tokens, then EOS when eos is set.
func (t *Tokenizer) Encode(text string, bos, eos bool) []int {
	var ids []int
	if bos && t.bos >= 0 {
		ids = append(ids, t.bos)
	}
	for _, seg := range t.splitAdded(text) {
		if seg.id >= 0 {
			ids = append(ids, seg.id)
		} else {
			ids = t.encodeText(ids, seg.text, seg.start == 0)
		}
	}
	if eos && t.eos >= 0 {
		ids = append(ids, t.eos)
	}
	return ids
}

type segment struct {
	text  string
	start int
	id    int // an added token's id, or -1 for text
}

// splitAdded cuts text at the added tokens: at each position the longest
// added token that matches (leftmost-longest, as Hugging Face's
// Aho-Corasick does), honouring lstrip/rstrip (the token absorbs the white
// space beside it) and single_word (no word character on either side).
func (t *Tokenizer) splitAdded(text string) []segment {
	var segs []segment
	last := 0 // start of the pending text
	for i := 0; i < len(text); {
		idx, n := t.matchAdded(text, i)
		if idx < 0 {
			i++
			continue
		}
		a := t.added[idx]
		begin, end := i, i+n
		if a.lstrip {
			for begin > last {
				r, w := utf8.DecodeLastRuneInString(text[last:begin])
				if !unicode.IsSpace(r) {
					break
				}
				begin -= w
			}
		}
		if a.rstrip {
			end = run(text, end, isS)
		}
		if begin > last {
			segs = append(segs, segment{text[last:begin], last, -1})
		}
		segs = append(segs, segment{text[begin:end], begin, a.id})
		last, i = end, end
	}
	if last < len(text) {
		segs = append(segs, segment{text[last:], last, -1})
	}
	return segs
}

// matchAdded returns the index (into t.added) and length of the longest
// added token at text[i:], or -1.
func (t *Tokenizer) matchAdded(text string, i int) (int, int) {
	for _, idx := range t.addedFirst[text[i]] {
		a := t.added[idx]
		if !strings.HasPrefix(text[i:], a.content) {
			continue
		}
		if a.singleWord {
			if i > 0 {
				if r, _ := utf8.DecodeLastRuneInString(text[:i]); isWordChar(r) {
					continue
				}
			}
			if j := i + len(a.content); j < len(text) {
				if r, _ := utf8.DecodeRuneInString(text[j:]); isWordChar(r) {
					continue
				}
			}
		}
		return idx, len(a.content)
	}
	return -1, 0
}

func isWordChar(r rune) bool { return r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r) }

// encodeText appends the ids of a stretch of text without added tokens.
func (t *Tokenizer) encodeText(ids []int, text string, atStart bool) []int {
	for _, n := range t.normalizers {
		text = n.apply(text)
	}
	pieces := []piece{{text, atStart}}
	for _, p := range t.pretok {
		pieces = p.apply(pieces)
	}
	for _, p := range pieces {
		if p.text != "" {
			ids = t.bpe(ids, p.text)
		}
	}
	return ids
}

// symbol is one symbol of a word being merged, in a doubly linked list.
type symbol struct {
	id         int
	prev, next int
	size       int // bytes of the word it covers; 0 once merged away
}

// bpe appends the ids of one pre-tokenized word: its characters (or their
// byte-fallback tokens, or the unknown token), merged by rank, lowest
// first and leftmost among equals, as Hugging Face's BPE model does.
func (t *Tokenizer) bpe(ids []int, word string) []int {
	if t.ignoreMerges {
		if id, ok := t.vocab[word]; ok {
			return append(ids, id)
		}
	}
	var syms []symbol
	add := func(id, size int) {
		syms = append(syms, symbol{id: id, prev: len(syms) - 1, next: -1, size: size})
	}
	unkRun := false
	for i := 0; i < len(word); {
		_, w := utf8.DecodeRuneInString(word[i:])
		ch := word[i : i+w]
		i += w
		if id, ok := t.vocab[ch]; ok {
			add(id, w)
			unkRun = false
			continue
		}
		if t.byteFallback {
			ok := true
			for j := 0; j < len(ch); j++ {
				ok = ok && t.byteIDs[ch[j]] >= 0
			}
			if ok {
				for j := 0; j < len(ch); j++ {
					add(t.byteIDs[ch[j]], 1)
				}
				unkRun = false
				continue
			}
		}
		if t.unk < 0 {
			continue // no unknown token: the character is dropped
		}
		if unkRun && t.fuseUnk {
			syms[len(syms)-1].size += w
			continue
		}
		add(t.unk, w)
		unkRun = true
	}
	for i := range syms {
		if i+1 < len(syms) {
			syms[i].next = i + 1
		}
	}
	if len(t.merges) > 0 && len(syms) > 1 {
		q := &mergeQueue{}
		for i := 0; i+1 < len(syms); i++ {
			if m, ok := t.merges[pairKey(syms[i].id, syms[i+1].id)]; ok {
				heap.Push(q, mergeItem{pos: i, rank: m.rank, id: m.id})
			}
		}
		for q.Len() > 0 {
			top := heap.Pop(q).(mergeItem)
			s := &syms[top.pos]
			if s.size == 0 || s.next < 0 {
				continue
			}
			nx := &syms[s.next]
			if m, ok := t.merges[pairKey(s.id, nx.id)]; !ok || m.id != top.id {
				continue // stale: a neighbour has changed since it was queued
			}
			s.id = top.id
			s.size += nx.size
			nx.size = 0
			s.next = nx.next
			if s.next >= 0 {
				syms[s.next].prev = top.pos
			}
			if s.prev >= 0 {
				if m, ok := t.merges[pairKey(syms[s.prev].id, s.id)]; ok {
					heap.Push(q, mergeItem{pos: s.prev, rank: m.rank, id: m.id})
				}
			}
			if s.next >= 0 {
				if m, ok := t.merges[pairKey(s.id, syms[s.next].id)]; ok {
					heap.Push(q, mergeItem{pos: top.pos, rank: m.rank, id: m.id})
				}
			}
		}
	}
	for i := 0; i < len(syms); {
		ids = append(ids, syms[i].id)
		if syms[i].next < 0 {
			break
		}
		i = syms[i].next
	}
	return ids
}

type mergeItem struct{ pos, rank, id int }

type mergeQueue []mergeItem

func (q mergeQueue) Len() int { return len(q) }
func (q mergeQueue) Less(i, j int) bool {
	if q[i].rank != q[j].rank {
		return q[i].rank < q[j].rank
	}
	return q[i].pos < q[j].pos
}
func (q mergeQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *mergeQueue) Push(x any)   { *q = append(*q, x.(mergeItem)) }
func (q *mergeQueue) Pop() any {
	old := *q
	x := old[len(old)-1]
	*q = old[:len(old)-1]
	return x
}

// Piece returns the text of token tok generated after token prev, as the
// decoders give it: byte-level tokens as their raw bytes, "▁" as a space,
// byte-fallback tokens as their byte; the leading space that the
// tokenizer's prefix adds is dropped from the first token of a text (prev
// BOS or < 0). Special tokens and ids outside the vocabulary give "".
// Pieces may end inside a UTF-8 sequence that the next piece completes.
func (t *Tokenizer) Piece(prev, tok int) string {
	if tok < 0 || tok >= len(t.pieces) || t.special[tok] {
		return ""
	}
	return t.decodeToken(t.pieces[tok], prev < 0 || prev == t.bos)
}

// Decode returns the text of ids: the pieces of the tokens concatenated,
// special tokens left out.
func (t *Tokenizer) Decode(ids []int) string {
	var sb strings.Builder
	first := true
	for _, id := range ids {
		if id < 0 || id >= len(t.pieces) || t.special[id] {
			continue
		}
		sb.WriteString(t.decodeToken(t.pieces[id], first))
		first = false
	}
	return sb.String()
}

// sortAdded builds the index of added tokens by first byte, longest first.
func (t *Tokenizer) sortAdded() {
	t.addedFirst = map[byte][]int{}
	order := make([]int, len(t.added))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return len(t.added[order[a]].content) > len(t.added[order[b]].content) })
	for _, i := range order {
		c := t.added[i].content
		if c == "" {
			continue
		}
		t.addedFirst[c[0]] = append(t.addedFirst[c[0]], i)
	}
}
