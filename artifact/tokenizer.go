package artifact

import (
	"encoding/binary"
	"fmt"
	"math"
	"path/filepath"

	"github.com/tapml/tapml/frontend/llama2c"
	"github.com/tapml/tapml/frontend/tokenizer/sentencepiece"
	"github.com/tapml/tapml/internal/safeio"
)

// TokenizerFile is the tokenizer of a build folder, when the model has one.
const TokenizerFile = "tokenizer.bin"

// Tokenizer is the manifest entry of the folder's tokenizer: the file, in
// llama2.c's tok*.bin layout (int32 max piece length, then per token a
// float32 score, an int32 length and the piece's bytes; little-endian), and
// what that layout does not hold.
type Tokenizer struct {
	File      string `yaml:"file"`
	Format    string `yaml:"format"`
	VocabSize int    `yaml:"vocab_size"`
	BOS       int    `yaml:"bos"`
	EOS       int    `yaml:"eos"`
	// EOG are the ids that end generation; absent in older builds, whose
	// generation ends at BOS (llama2.c's convention).
	EOG []int `yaml:"eog,omitempty"`
}

// encodeTokenizer writes t in llama2.c's layout.
func encodeTokenizer(t *sentencepiece.Tokenizer) []byte {
	maxLen := 0
	for i := 0; i < t.VocabSize(); i++ {
		maxLen = max(maxLen, len(t.Token(i)))
	}
	out := binary.LittleEndian.AppendUint32(nil, uint32(maxLen))
	for i := 0; i < t.VocabSize(); i++ {
		p := t.Token(i)
		out = binary.LittleEndian.AppendUint32(out, math.Float32bits(t.Score(i)))
		out = binary.LittleEndian.AppendUint32(out, uint32(len(p)))
		out = append(out, p...)
	}
	return out
}

// LoadTokenizer returns the tokenizer of a loaded build folder, or nil when
// the build has none. Load has verified the file's checksum.
func LoadTokenizer(dir string, man *Manifest) (*sentencepiece.Tokenizer, error) {
	if man.Tokenizer == nil {
		return nil, nil
	}
	tk := man.Tokenizer
	p := filepath.Join(dir, filepath.FromSlash(tk.File))
	if tk.Format != "llama2c" {
		return nil, fmt.Errorf("%s: tokenizer format %q is not one this tapmlc reads (llama2c)", p, tk.Format)
	}
	data, err := safeio.ReadFile(p, safeio.MaxText)
	if err != nil {
		return nil, err
	}
	vocab, scores, err := llama2c.ParseTokenizer(data)
	if err != nil {
		return nil, fmt.Errorf("%s: corrupt tokenizer: %w", p, err)
	}
	if len(vocab) != tk.VocabSize {
		return nil, fmt.Errorf("%s: corrupt tokenizer: %d tokens, but the manifest says vocab_size %d", p, len(vocab), tk.VocabSize)
	}
	t, err := sentencepiece.New(vocab, scores, tk.BOS, tk.EOS)
	if err == nil && tk.EOG != nil {
		t, err = t.WithEOG(tk.EOG)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", p, err)
	}
	return t, nil
}
