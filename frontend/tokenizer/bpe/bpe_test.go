package bpe

import (
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// gpt2Merges are the merges of gpt2Config's vocabulary: ids 256.. in order.
var gpt2Merges = [][2]string{
	{"Ġ", "w"},     // 256 Ġw
	{"o", "r"},     // 257 or
	{"Ġw", "or"},   // 258 Ġwor
	{"l", "d"},     // 259 ld
	{"Ġwor", "ld"}, // 260 Ġworld
}

// gpt2Config is a small GPT-2-style configuration: ids 0..255 are the bytes
// (id = byte value), then gpt2Merges, then <|endoftext|> (261), split by
// pattern p before the byte-level mapping.
func gpt2Config(p Pattern) Config {
	var tokens []string
	for b := 0; b < 256; b++ {
		tokens = append(tokens, ByteChar(byte(b)))
	}
	for _, m := range gpt2Merges {
		tokens = append(tokens, m[0]+m[1])
	}
	return Config{
		Tokens: tokens, Merges: gpt2Merges, Unk: -1, BOS: -1, EOS: 261,
		Added:         []AddedToken{{ID: 261, Content: "<|endoftext|>", Special: true}},
		PreTokenizers: []PreTokenizer{Split(p), ByteLevel(false, false)},
		Decoders:      []Decoder{ByteLevelDecoder()},
	}
}

func TestNew(t *testing.T) {
	tok, err := New(gpt2Config(GPT2Pattern))
	if err != nil {
		t.Fatal(err)
	}
	// "world": o+r (rank 1), then l+d (rank 3); " world" merges whole.
	if got, want := tok.Encode("world world<|endoftext|>", true, false), []int{'w', 257, 259, 260, 261}; !cmp.Equal(got, want) {
		t.Errorf("Encode = %v, want %v", got, want)
	}
	if tok.BOS() != -1 || tok.EOS() != 261 || !tok.IsSpecial(261) || tok.VocabSize() != 262 || tok.Kind() != "byte-level BPE" {
		t.Errorf("BOS %d EOS %d special(261) %v vocab %d kind %q", tok.BOS(), tok.EOS(), tok.IsSpecial(261), tok.VocabSize(), tok.Kind())
	}
	if got := tok.Decode([]int{'w', 257, 259, 261, 260}); got != "world world" {
		t.Errorf("Decode = %q", got)
	}
	for _, tc := range []struct {
		name string
		edit func(c *Config)
		want string
	}{
		{"duplicate token", func(c *Config) { c.Tokens = append(append([]string{}, c.Tokens...), "or") }, `tokens 257 and 261 are both "or"`},
		{"merge result missing", func(c *Config) { c.Merges = [][2]string{{"Ġ", "h"}} }, `merges[0] "Ġ" + "h": the merged token "Ġh" is not in the vocab`},
		{"merge part missing", func(c *Config) { c.Merges = [][2]string{{"Ġw", "or"}, {"ab", "c"}} }, `merges[1] "ab" + "c": "ab" is not in the vocab`},
		{"added id", func(c *Config) { c.Added = []AddedToken{{ID: -1, Content: "x"}} }, "added token 0: id -1 is outside"},
		{"added empty", func(c *Config) { c.Added = []AddedToken{{ID: 300, Content: ""}} }, "added token 0: empty content"},
		{"added vs vocab id", func(c *Config) { c.Added = []AddedToken{{ID: 300, Content: "or"}} }, `"or" has id 300, but the vocabulary gives it 257`},
		{"added vs vocab token", func(c *Config) { c.Added = []AddedToken{{ID: 257, Content: "<x>"}} }, `clashes with the vocabulary's "or"`},
		{"added twice", func(c *Config) { c.Added = append(c.Added, AddedToken{ID: 261, Content: "<eot>"}) }, "clashes with added token"},
		{"EOS", func(c *Config) { c.EOS = 400 }, "EOS id 400 is not a token"},
		{"BOS gap", func(c *Config) { c.Added, c.EOS = nil, -1; c.Tokens = append(c.Tokens, "", "<x>"); c.BOS = 261 }, "BOS id 261 is not a token"},
		{"unk", func(c *Config) { c.Unk = 264 }, "unknown token id 264 is not a token"},
		{"empty", func(c *Config) { *c = Config{Unk: -1, BOS: -1, EOS: -1} }, "empty vocabulary"},
	} {
		c := gpt2Config(GPT2Pattern)
		tc.edit(&c)
		if _, err := New(c); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %q", tc.name, err, tc.want)
		}
	}
}

func TestSplitMerge(t *testing.T) {
	if a, b, err := SplitMerge("Ġt he"); a != "Ġt" || b != "he" || err != nil {
		t.Errorf("SplitMerge = %q %q %v", a, b, err)
	}
	for _, s := range []string{"abc", "a b c", ""} {
		if _, _, err := SplitMerge(s); err == nil || !strings.Contains(err.Error(), "not two tokens") {
			t.Errorf("SplitMerge(%q): %v", s, err)
		}
	}
}

func TestPatternOf(t *testing.T) {
	for _, p := range []Pattern{GPT2Pattern, Qwen2Pattern, Llama3Pattern} {
		if got, ok := PatternOf(p.Regex()); !ok || got != p {
			t.Errorf("PatternOf(%d's regex) = %d, %v", p, got, ok)
		}
	}
	if _, ok := PatternOf(`\w+`); ok {
		t.Errorf(`PatternOf(\w+) is a pattern`)
	}
}

// TestSplitPatterns checks the hand-written matchers against pieces worked
// out from the regexes by hand.
func TestSplitPatterns(t *testing.T) {
	for _, tc := range []struct {
		p    Pattern
		text string
		want []string
	}{
		{GPT2Pattern, "Hello, world!", []string{"Hello", ",", " world", "!"}},
		{GPT2Pattern, "don't stop", []string{"don", "'t", " stop"}},
		{GPT2Pattern, "I'M", []string{"I", "'", "M"}}, // case-sensitive contractions
		{GPT2Pattern, "abc123 45", []string{"abc", "123", " 45"}},
		{GPT2Pattern, "x   y", []string{"x", "  ", " y"}},
		{GPT2Pattern, "x  ", []string{"x", "  "}},
		{GPT2Pattern, "$hello", []string{"$", "hello"}},
		{GPT2Pattern, " ?!", []string{" ?!"}},
		{GPT2Pattern, "a\n\nb", []string{"a", "\n", "\n", "b"}}, // \s+(?!\S) leaves the last \n to \s+
		{GPT2Pattern, "naïve café", []string{"naïve", " café"}},
		{Qwen2Pattern, "I'M here", []string{"I", "'M", " here"}},
		{Qwen2Pattern, "abc123", []string{"abc", "1", "2", "3"}},
		{Llama3Pattern, "abc12345", []string{"abc", "123", "45"}},
		{Qwen2Pattern, "hi!!\n\nthere", []string{"hi", "!!\n\n", "there"}},
		{Qwen2Pattern, "a \n b", []string{"a", " \n", " b"}},
		{Qwen2Pattern, "x   y", []string{"x", "  ", " y"}},
		{Qwen2Pattern, "$hello", []string{"$hello"}},
		{Qwen2Pattern, " 42", []string{" ", "4", "2"}},
		{Qwen2Pattern, "a\n\n", []string{"a", "\n\n"}},
		{Qwen2Pattern, "\xff\xfeok", []string{"\xff\xfe", "ok"}}, // invalid bytes are "other" characters
	} {
		got := tc.p.split(tc.text)
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("pattern %d on %q (-want +got):\n%s", tc.p, tc.text, diff)
		}
	}
}

// TestDigits: every number character alone, the rest in runs.
func TestDigits(t *testing.T) {
	var got []string
	for _, pc := range Digits().apply([]piece{{"ab12 ³c٣", true}}) {
		got = append(got, pc.text)
	}
	if diff := cmp.Diff([]string{"ab", "1", "2", " ", "³", "c", "٣"}, got); diff != "" {
		t.Errorf("pieces (-want +got):\n%s", diff)
	}
}

// TestMetaspaceSplit: Metaspace with split cuts before each ▁.
func TestMetaspaceSplit(t *testing.T) {
	var got []string
	for _, pc := range Metaspace("▁", PrependAlways, true).apply([]piece{{"hi  there", true}}) {
		got = append(got, pc.text)
	}
	if diff := cmp.Diff([]string{"▁hi", "▁", "▁there"}, got); diff != "" {
		t.Errorf("pieces (-want +got):\n%s", diff)
	}
}

// FuzzByteLevel: byte-level BPE with each supported split pattern encodes
// any bytes and decodes them back exactly, and the patterns' pieces are
// non-empty and cover the text.
func FuzzByteLevel(f *testing.F) {
	for _, s := range []string{"hello the world", "a  b\n\n c", "I'M don't", "日本 123 4567", "\xff\x00 \t\r\n"} {
		f.Add(s)
	}
	patterns := []Pattern{GPT2Pattern, Qwen2Pattern, Llama3Pattern}
	var toks []*Tokenizer
	for _, p := range patterns {
		tok, err := New(gpt2Config(p))
		if err != nil {
			f.Fatal(err)
		}
		toks = append(toks, tok)
	}
	digits := gpt2Config(GPT2Pattern) // StarCoder's: digits apart first
	digits.PreTokenizers = append([]PreTokenizer{Digits()}, digits.PreTokenizers...)
	tok, err := New(digits)
	if err != nil {
		f.Fatal(err)
	}
	toks = append(toks, tok)
	f.Fuzz(func(t *testing.T, s string) {
		if pieces := splitDigits(s); strings.Join(pieces, "") != s || slices.Contains(pieces, "") {
			t.Fatalf("digits: pieces %q do not cover %q", pieces, s)
		}
		for _, p := range patterns {
			pieces := p.split(s)
			for _, pc := range pieces {
				if pc == "" {
					t.Fatalf("pattern %d: empty piece in %q", p, s)
				}
			}
			if strings.Join(pieces, "") != s {
				t.Fatalf("pattern %d: pieces %q do not cover %q", p, pieces, s)
			}
		}
		want := strings.ReplaceAll(s, "<|endoftext|>", "")
		for _, tok := range toks {
			if got := tok.Decode(tok.Encode(s, false, false)); got != want {
				t.Fatalf("Decode(Encode(%q)) = %q", s, got)
			}
		}
	})
}
