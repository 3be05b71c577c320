package bpe

import (
	"unicode"
	"unicode/utf8"
)

// Pattern is one of the pre-tokenizer regular expressions of byte-level
// BPE tokenizers, matched by hand: Go's regexp has no lookahead, and these
// patterns need `\s+(?!\S)`. Each is an alternation tried in order at
// every position (leftmost-first, as Oniguruma and fancy-regex do), and
// every character is matched by some alternative, so the pieces cover the
// text.
type Pattern int

const (
	// GPT2Pattern is GPT-2's pattern, used by the ByteLevel pre-tokenizer
	// when useRegex is set:
	//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
	GPT2Pattern Pattern = iota + 1
	// Qwen2Pattern is Qwen2's Split pattern (cl100k's with single digits):
	//   (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
	Qwen2Pattern
	// Llama3Pattern is Llama 3's (and cl100k's): Qwen2's with \p{N}{1,3}.
	Llama3Pattern
)

// regexes are the patterns' regular expressions as tokenizer.json files
// spell them.
var regexes = map[Pattern]string{
	GPT2Pattern:   `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`,
	Qwen2Pattern:  `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`,
	Llama3Pattern: `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`,
}

// Regex returns p's regular expression.
func (p Pattern) Regex() string { return regexes[p] }

// PatternOf returns the pattern whose regular expression is regex.
func PatternOf(regex string) (Pattern, bool) {
	for p, r := range regexes {
		if r == regex {
			return p, true
		}
	}
	return 0, false
}

// Character classes. \s is Unicode White_Space (what unicode.IsSpace
// tests), \p{L} letters, \p{N} numbers (Nd, Nl, No). A byte that is not
// valid UTF-8 counts as one character of none of these classes.
func runeAt(s string, i int) (rune, int) { return utf8.DecodeRuneInString(s[i:]) }

func isL(r rune) bool     { return unicode.IsLetter(r) }
func isN(r rune) bool     { return unicode.IsNumber(r) }
func isS(r rune) bool     { return unicode.IsSpace(r) }
func isOther(r rune) bool { return !isS(r) && !isL(r) && !isN(r) }
func isNL(r rune) bool    { return r == '\r' || r == '\n' }

// run returns the end of the longest run of characters in class from i.
func run(s string, i int, class func(rune) bool) int {
	for i < len(s) {
		r, w := runeAt(s, i)
		if !class(r) {
			break
		}
		i += w
	}
	return i
}

// contraction matches 's|'t|'re|'ve|'m|'ll|'d at i (ASCII case-insensitive
// when fold), returning the end or -1.
func contraction(s string, i int, fold bool) int {
	if s[i] != '\'' {
		return -1
	}
	for _, c := range []string{"s", "t", "re", "ve", "m", "ll", "d"} {
		j := i + 1 + len(c)
		if j > len(s) {
			continue
		}
		got := s[i+1 : j]
		if got == c || fold && asciiLower(got) == c {
			return j
		}
	}
	return -1
}

func asciiLower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}

// optSpaceRun matches ` ?X+` at i: an optional ASCII space, then one or
// more characters of class. It returns the end or -1.
func optSpaceRun(s string, i int, class func(rune) bool) int {
	if s[i] == ' ' && i+1 < len(s) {
		if r, _ := runeAt(s, i+1); class(r) {
			return run(s, i+1, class)
		}
	}
	// Without the optional space (a space is in none of the classes).
	if r, _ := runeAt(s, i); class(r) {
		return run(s, i, class)
	}
	return -1
}

// spaces matches `\s+(?!\S)|\s+` at i (s[i] is white space): the run of
// white space, less its last character when a non-space follows and the
// run is longer than one.
func spaces(s string, i int) int {
	j := run(s, i, isS)
	if j == len(s) {
		return j
	}
	if _, w := lastRune(s[i:j]); j-w > i {
		return j - w
	}
	return j
}

func lastRune(s string) (rune, int) { return utf8.DecodeLastRuneInString(s) }

// match returns the end of the piece that starts at i (> i).
func (p Pattern) match(s string, i int) int {
	r, w := runeAt(s, i)
	if p == GPT2Pattern {
		if j := contraction(s, i, false); j > 0 {
			return j
		}
		for _, class := range []func(rune) bool{isL, isN, isOther} {
			if j := optSpaceRun(s, i, class); j > 0 {
				return j
			}
		}
		if isS(r) {
			return spaces(s, i)
		}
		return i + w
	}
	if j := contraction(s, i, true); j > 0 {
		return j
	}
	// [^\r\n\p{L}\p{N}]?\p{L}+
	if isL(r) {
		return run(s, i, isL)
	}
	if !isNL(r) && !isN(r) && i+w < len(s) {
		if r2, _ := runeAt(s, i+w); isL(r2) {
			return run(s, i+w, isL)
		}
	}
	// \p{N} or \p{N}{1,3}
	if isN(r) {
		j, n := i+w, 1
		for p == Llama3Pattern && n < 3 && j < len(s) {
			r2, w2 := runeAt(s, j)
			if !isN(r2) {
				break
			}
			j, n = j+w2, n+1
		}
		return j
	}
	// ` ?[^\s\p{L}\p{N}]+[\r\n]*`
	if j := optSpaceRun(s, i, isOther); j > 0 {
		return run(s, j, isNL)
	}
	if isS(r) {
		// \s*[\r\n]+: up to the last newline of the white-space run.
		j := run(s, i, isS)
		for k := j; k > i; {
			r2, w2 := lastRune(s[i:k])
			if isNL(r2) {
				return k
			}
			k -= w2
		}
		return spaces(s, i)
	}
	return i + w
}

// split cuts s into the pieces the pattern matches (Hugging Face's Split
// with behavior Isolated).
func (p Pattern) split(s string) []string {
	var out []string
	for i := 0; i < len(s); {
		j := p.match(s, i)
		if j <= i {
			j = i + 1 // unreachable: every character matches; never loop
		}
		out = append(out, s[i:j])
		i = j
	}
	return out
}

// splitDigits cuts s into its number characters, one a piece, and the
// runs of other characters between them.
func splitDigits(s string) []string {
	var out []string
	for i := 0; i < len(s); {
		r, w := runeAt(s, i)
		j := i + w
		if !isN(r) {
			j = run(s, i, func(r rune) bool { return !isN(r) })
		}
		out = append(out, s[i:j])
		i = j
	}
	return out
}

// ByteChar returns the character of b in GPT-2's byte alphabet, in which
// byte-level vocabularies spell their tokens ("Ġ" is the space).
func ByteChar(b byte) string { return string(byteToRune[b]) }

// byteToRune is GPT-2's bytes_to_unicode: printable Latin-1 bytes map to
// themselves, the other 68 bytes to U+0100 onwards, so that every byte is a
// visible character.
var byteToRune, runeToByte = func() ([256]rune, map[rune]byte) {
	var b2r [256]rune
	r2b := map[rune]byte{}
	n := 0
	for b := 0; b < 256; b++ {
		if '!' <= b && b <= '~' || 0xA1 <= b && b <= 0xAC || 0xAE <= b && b <= 0xFF {
			b2r[b] = rune(b)
		} else {
			b2r[b] = rune(256 + n)
			n++
		}
		r2b[b2r[b]] = byte(b)
	}
	return b2r, r2b
}()

// byteLevel maps every byte of s to its character.
func byteLevel(s string) string {
	out := make([]rune, len(s))
	for i := 0; i < len(s); i++ {
		out[i] = byteToRune[s[i]]
	}
	return string(out)
}

// fromByteLevel maps the characters of a byte-level token back to bytes;
// ok is false when some character is not in the byte alphabet.
func fromByteLevel(s string) ([]byte, bool) {
	out := make([]byte, 0, len(s))
	for _, r := range s {
		b, ok := runeToByte[r]
		if !ok {
			return nil, false
		}
		out = append(out, b)
	}
	return out, true
}
