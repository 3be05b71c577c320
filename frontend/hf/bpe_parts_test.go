package hf

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestNewBPE builds a tokenizer from parts (the GGUF route) and checks it
// encodes as the same tokenizer read from a tokenizer.json does, and that
// bad parts are errors naming the problem.
func TestNewBPE(t *testing.T) {
	var tokens []string
	for b := 0; b < 256; b++ {
		tokens = append(tokens, string(byteToRune[b]))
	}
	tokens = append(tokens, "Ġt", "he", "Ġthe", "<|endoftext|>")
	parts := BPEParts{Tokens: tokens, Merges: []string{"Ġ t", "h e", "Ġt he"}, Pattern: "gpt2",
		Added: []int{259}, Special: []int{259}, BOS: -1, EOS: 259}
	tok, err := NewBPE("parts", parts)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := tok.Encode("the the<|endoftext|>", true, false), []int{'t', 257, 258, 259}; !cmp.Equal(got, want) {
		t.Errorf("Encode = %v, want %v", got, want)
	}
	if tok.BOS() != -1 || tok.EOS() != 259 || !tok.IsSpecial(259) {
		t.Errorf("BOS %d EOS %d special(259) %v", tok.BOS(), tok.EOS(), tok.IsSpecial(259))
	}
	for _, tc := range []struct {
		name string
		edit func(p *BPEParts)
		want string
	}{
		{"pattern", func(p *BPEParts) { p.Pattern = "bert" }, `pre-tokenizer pattern "bert" is not supported`},
		{"duplicate token", func(p *BPEParts) { p.Tokens = append(append([]string{}, p.Tokens...), "he") }, `tokens 257 and 260 are both "he"`},
		{"merge result missing", func(p *BPEParts) { p.Merges = []string{"Ġ h"} }, `merges[0] "Ġ" + "h": the merged token "Ġh" is not in the vocab`},
		{"added id", func(p *BPEParts) { p.Added = []int{999} }, "added token id 999 is outside the 260 tokens"},
		{"EOS id", func(p *BPEParts) { p.EOS = 400 }, "EOS id 400 is not a token"},
	} {
		p := parts
		tc.edit(&p)
		if _, err := NewBPE("parts", p); err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "parts: ") {
			t.Errorf("%s: error %v, want %q", tc.name, err, tc.want)
		}
	}
}
