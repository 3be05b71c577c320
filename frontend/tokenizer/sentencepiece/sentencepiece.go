// Package sentencepiece is SentencePiece's BPE as llama2.c's run.c
// implements it: pieces with scores, merged highest score first, and
// "<0xXX>" byte-fallback tokens. llama2.c's tok*.bin files, GGUF's "llama"
// tokenizers and build folders construct it from their vocabularies.
//
// Encode and Piece reproduce run.c's encode() and decode()+safe_printf()
// byte for byte, so that a generation loop built on them prints exactly
// what run.c prints.
package sentencepiece

import (
	"fmt"
	"slices"
	"strings"
)

// Tokenizer maps text to token ids and back. It is immutable after New and
// safe for concurrent use.
type Tokenizer struct {
	vocab  []string
	scores []float32
	ids    map[string]int // piece -> lowest id with that piece
	bos    int
	eos    int
	eog    []int // the ids that end generation
	unk    int
	space  int      // id of the piece " " (the dummy prefix), or -1
	bytes  [256]int // id of the byte-fallback token "<0xXX>" of each byte
	isByte map[int]byte
}

// New returns a tokenizer over vocab (pieces, with a plain ' ' for spaces)
// and their merge scores. bos and eos are the ids of the sequence delimiters
// (1 and 2 in llama2.c and Llama 2), or -1 where the vocabulary has none.
// Generation ends when BOS is sampled, llama2.c's convention (WithEOG
// changes that).
// Byte-fallback tokens are the pieces named "<0xXX>" (two upper-case hex
// digits); a byte without one encodes as the unknown token ("<unk>", or id 0).
// Where a piece occurs more than once, lookups use its lowest id.
func New(vocab []string, scores []float32, bos, eos int) (*Tokenizer, error) {
	n := len(vocab)
	switch {
	case n == 0:
		return nil, fmt.Errorf("tokenizer: empty vocabulary")
	case len(scores) != n:
		return nil, fmt.Errorf("tokenizer: %d pieces but %d scores", n, len(scores))
	case bos < -1 || bos >= n:
		return nil, fmt.Errorf("tokenizer: BOS id %d outside the vocabulary of %d", bos, n)
	case eos < -1 || eos >= n:
		return nil, fmt.Errorf("tokenizer: EOS id %d outside the vocabulary of %d", eos, n)
	}
	t := &Tokenizer{
		vocab:  append([]string(nil), vocab...),
		scores: append([]float32(nil), scores...),
		ids:    make(map[string]int, n),
		bos:    bos,
		eos:    eos,
		isByte: map[int]byte{},
	}
	if bos >= 0 {
		t.eog = []int{bos}
	}
	for i, p := range t.vocab {
		if _, dup := t.ids[p]; !dup {
			t.ids[p] = i
		}
	}
	if id, ok := t.ids["<unk>"]; ok {
		t.unk = id
	}
	t.space = -1
	if id, ok := t.ids[" "]; ok {
		t.space = id
	}
	for b := 0; b < 256; b++ {
		id, ok := t.ids[bytePiece(byte(b))]
		if !ok {
			id = t.unk
		} else {
			t.isByte[id] = byte(b)
		}
		t.bytes[b] = id
	}
	return t, nil
}

// NewBytes returns the tokenizer of the built-in tiny model: 259 tokens,
// 0 <unk>, 1 <s>, 2 </s>, and 3..258 the bytes <0x00>..<0xFF>. It has no
// merges, so every byte of the text is one token.
func NewBytes() *Tokenizer {
	vocab := make([]string, 259)
	vocab[0], vocab[1], vocab[2] = "<unk>", "<s>", "</s>"
	for b := 0; b < 256; b++ {
		vocab[3+b] = bytePiece(byte(b))
	}
	t, err := New(vocab, make([]float32, len(vocab)), 1, 2)
	if err != nil {
		panic(err) // unreachable: the vocabulary above is valid
	}
	return t
}

func bytePiece(b byte) string { return fmt.Sprintf("<0x%02X>", b) }

// VocabSize returns the number of tokens.
func (t *Tokenizer) VocabSize() int { return len(t.vocab) }

// BOS returns the id of the beginning-of-sequence token (-1 if none).
func (t *Tokenizer) BOS() int { return t.bos }

// EOS returns the id of the end-of-sequence token (-1 if none).
func (t *Tokenizer) EOS() int { return t.eos }

// WithEOG returns a copy of t whose generation ends at the ids eog
// instead (none when eog is empty).
func (t *Tokenizer) WithEOG(eog []int) (*Tokenizer, error) {
	for _, id := range eog {
		if id < 0 {
			return nil, fmt.Errorf("tokenizer: end-of-generation id %d is negative", id)
		}
	}
	c := *t
	c.eog = append([]int{}, eog...)
	return &c, nil
}

// EOG returns the ids that end generation.
func (t *Tokenizer) EOG() []int { return append([]int{}, t.eog...) }

// IsEOG reports whether sampling id ends generation.
func (t *Tokenizer) IsEOG(id int) bool { return slices.Contains(t.eog, id) }

// Token returns the piece of id as stored in the vocabulary ("" when id is
// out of range).
func (t *Tokenizer) Token(id int) string {
	if id < 0 || id >= len(t.vocab) {
		return ""
	}
	return t.vocab[id]
}

// Score returns the merge score of id (0 when id is out of range).
func (t *Tokenizer) Score(id int) float32 {
	if id < 0 || id >= len(t.scores) {
		return 0
	}
	return t.scores[id]
}

// ID returns the lowest id whose piece is p.
func (t *Tokenizer) ID(p string) (int, bool) {
	id, ok := t.ids[p]
	return id, ok
}

// Encode splits text into tokens as run.c's encode() does: optional BOS, a
// dummy-prefix " " when text is not empty, one token per UTF-8 codepoint
// found in the vocabulary (else one byte-fallback token per byte; at most
// four bytes are gathered into one codepoint), then repeated merging of the
// adjacent pair whose concatenated piece has the highest score (leftmost
// on ties; BOS takes part, as in run.c), and optional EOS.
//
// Where run.c has undefined behaviour Encode picks a defined one: a
// vocabulary without " " gets the space as a byte-fallback token, and a NUL
// byte (which a C string cannot hold) is an ordinary byte.
func (t *Tokenizer) Encode(text string, bos, eos bool) []int {
	toks := make([]int, 0, len(text)+3)
	if bos && t.bos >= 0 {
		toks = append(toks, t.bos)
	}
	if text != "" {
		if t.space >= 0 {
			toks = append(toks, t.space)
		} else {
			toks = append(toks, t.bytes[' '])
		}
	}
	buf := make([]byte, 0, 4)
	for i := 0; i < len(text); i++ {
		c := text[i]
		if c&0xC0 != 0x80 { // not a continuation byte: a new codepoint starts
			buf = buf[:0]
		}
		buf = append(buf, c)
		if i+1 < len(text) && text[i+1]&0xC0 == 0x80 && len(buf) < 4 {
			continue
		}
		if id, ok := t.ids[string(buf)]; ok {
			toks = append(toks, id)
		} else {
			for _, b := range buf {
				toks = append(toks, t.bytes[b])
			}
		}
		buf = buf[:0]
	}
	toks = t.merge(toks)
	if eos && t.eos >= 0 {
		toks = append(toks, t.eos)
	}
	return toks
}

// merge applies run.c's greedy BPE merges to toks in place. pair[i] caches
// the merge of toks[i] and toks[i+1] (id, or -1), so each round compares
// scores and only the two pairs next to the merge are looked up again.
func (t *Tokenizer) merge(toks []int) []int {
	if len(toks) < 2 {
		return toks
	}
	pair := make([]int, len(toks)-1)
	lookup := func(i int) int {
		if id, ok := t.ids[t.vocab[toks[i]]+t.vocab[toks[i+1]]]; ok {
			return id
		}
		return -1
	}
	for i := range pair {
		pair[i] = lookup(i)
	}
	for {
		best, bestIdx := float32(-1e10), -1
		for i, id := range pair {
			if id >= 0 && t.scores[id] > best {
				best, bestIdx = t.scores[id], i
			}
		}
		if bestIdx < 0 {
			return toks
		}
		toks[bestIdx] = pair[bestIdx]
		toks = append(toks[:bestIdx+1], toks[bestIdx+2:]...)
		pair = append(pair[:bestIdx], pair[bestIdx+1:]...)
		if bestIdx < len(pair) {
			pair[bestIdx] = lookup(bestIdx)
		}
		if bestIdx > 0 {
			pair[bestIdx-1] = lookup(bestIdx - 1)
		}
	}
}

// Piece returns exactly what run.c prints for token tok generated after
// token prev: the piece without its leading space when prev is BOS, a
// "<0xXX>" piece as that byte, cut at a NUL byte (printf's %s), and nothing
// for a one-byte piece that is neither printable ASCII nor whitespace
// (safe_printf). An id outside the vocabulary prints nothing.
func (t *Tokenizer) Piece(prev, tok int) string {
	if tok < 0 || tok >= len(t.vocab) {
		return ""
	}
	p := t.vocab[tok]
	if prev == t.bos && strings.HasPrefix(p, " ") {
		p = p[1:]
	}
	if b, ok := scanByte(p); ok {
		p = string([]byte{b})
	}
	if i := strings.IndexByte(p, 0); i >= 0 {
		p = p[:i]
	}
	if len(p) == 1 && !isPrint(p[0]) && !isSpace(p[0]) {
		return ""
	}
	return p
}

// Decode returns the text that ids encode: pieces concatenated raw (a
// byte-fallback token as its byte), BOS and EOS dropped, and the
// dummy-prefix space removed. Decode(Encode(s, ...)) == s for every s when
// the vocabulary has all 256 byte tokens. Unlike Piece it filters nothing.
func (t *Tokenizer) Decode(ids []int) string {
	var sb strings.Builder
	for _, id := range ids {
		if id < 0 || id >= len(t.vocab) || id == t.bos || id == t.eos {
			continue
		}
		if b, ok := t.isByte[id]; ok {
			sb.WriteByte(b)
			continue
		}
		sb.WriteString(t.vocab[id])
	}
	return strings.TrimPrefix(sb.String(), " ")
}

// scanByte mirrors run.c's sscanf(piece, "<0x%02hhX>", &b) == 1: the literal
// "<0x", then optional C whitespace, an optional sign and hex digits, at
// most two characters counting the sign; what follows is not checked.
func scanByte(p string) (byte, bool) {
	rest, ok := strings.CutPrefix(p, "<0x")
	if !ok {
		return 0, false
	}
	for rest != "" && isSpace(rest[0]) {
		rest = rest[1:]
	}
	width, neg := 2, false
	if rest != "" && (rest[0] == '+' || rest[0] == '-') {
		neg = rest[0] == '-'
		rest, width = rest[1:], 1
	}
	v, digits := 0, 0
	for digits < width && digits < len(rest) {
		d := hexDigit(rest[digits])
		if d < 0 {
			break
		}
		v = v*16 + d
		digits++
	}
	if digits == 0 {
		return 0, false
	}
	if neg {
		v = -v
	}
	return byte(v), true
}

func hexDigit(c byte) int {
	switch {
	case '0' <= c && c <= '9':
		return int(c - '0')
	case 'a' <= c && c <= 'f':
		return int(c-'a') + 10
	case 'A' <= c && c <= 'F':
		return int(c-'A') + 10
	}
	return -1
}

// isPrint and isSpace are C's isprint and isspace in the "C" locale, which
// run.c runs in.
func isPrint(c byte) bool { return 0x20 <= c && c <= 0x7E }
func isSpace(c byte) bool { return c == ' ' || ('\t' <= c && c <= '\r') }
