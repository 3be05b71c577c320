package artifact

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/tapml/tapml/frontend/llama2c"
	"github.com/tapml/tapml/frontend/tokenizer/sentencepiece"
	"github.com/tapml/tapml/internal/testenv"
)

func TestTokenizerRoundTrip(t *testing.T) {
	tok512, err := llama2c.LoadTokenizer(testenv.Model(t, "tok512.bin"), 512)
	if err != nil {
		t.Fatal(err)
	}
	toks := map[string]*sentencepiece.Tokenizer{"bytes": sentencepiece.NewBytes(), "tok512": tok512}
	for name, tk := range toks {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "build")
			o := cpuOpts(dir)
			o.Tokenizer = tk
			if _, _, err := Compile(tiny(t), o); err != nil {
				t.Fatal(err)
			}
			_, man, err := Load(dir)
			if err != nil {
				t.Fatal(err)
			}
			got, err := LoadTokenizer(dir, man)
			if err != nil {
				t.Fatal(err)
			}
			if got.VocabSize() != tk.VocabSize() || got.BOS() != tk.BOS() || got.EOS() != tk.EOS() {
				t.Fatalf("vocab %d bos %d eos %d, want %d %d %d", got.VocabSize(), got.BOS(), got.EOS(), tk.VocabSize(), tk.BOS(), tk.EOS())
			}
			for i := 0; i < tk.VocabSize(); i++ {
				if got.Token(i) != tk.Token(i) || got.Score(i) != tk.Score(i) {
					t.Fatalf("token %d: %q %g, want %q %g", i, got.Token(i), got.Score(i), tk.Token(i), tk.Score(i))
				}
			}
			text := "Once upon a time, a little robot said hello."
			if diff := cmp.Diff(tk.Encode(text, true, false), got.Encode(text, true, false)); diff != "" {
				t.Error(diff)
			}
			// The file must hold the manifest's vocab_size tokens.
			bad := *man.Tokenizer
			bad.VocabSize++
			if _, err := LoadTokenizer(dir, &Manifest{Tokenizer: &bad}); err == nil || !strings.Contains(err.Error(), "vocab_size") {
				t.Errorf("a vocab_size the file does not hold: %v", err)
			}
			// A corrupt tokenizer file is caught by its checksum.
			p := filepath.Join(dir, TokenizerFile)
			b, _ := os.ReadFile(p)
			b[5] ^= 0xff
			os.WriteFile(p, b, 0o644)
			if _, _, err := Load(dir); err == nil || !strings.Contains(err.Error(), TokenizerFile+": corrupt") {
				t.Errorf("got %v", err)
			}
		})
	}
	// No tokenizer: LoadTokenizer returns nil.
	dir := filepath.Join(t.TempDir(), "build")
	if _, _, err := Compile(tiny(t), cpuOpts(dir)); err != nil {
		t.Fatal(err)
	}
	_, man, _ := Load(dir)
	if tk, err := LoadTokenizer(dir, man); tk != nil || err != nil {
		t.Errorf("LoadTokenizer of a build without one: %v, %v", tk, err)
	}
}
