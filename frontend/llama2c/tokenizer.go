package llama2c

import (
	"encoding/binary"
	"fmt"
	"math"
	"os"

	"github.com/tapml/tapml/frontend/tokenizer/sentencepiece"
	"github.com/tapml/tapml/ir"
)

// maxTokenFile caps the size of a tokenizer file read into memory.
const maxTokenFile = 1 << 30

// VocabMismatchError says that a tokenizer file and a model disagree on the
// vocabulary size.
type VocabMismatchError struct {
	Path   string // the tokenizer file
	Tokens int    // tokens the file holds
	Vocab  int    // the model's vocabulary size
	Model  string // the model file, when known
}

func (e *VocabMismatchError) Error() string {
	model := "the model"
	if e.Model != "" {
		model = e.Model
	}
	return fmt.Sprintf("%s: tokenizer has %d tokens, but %s has vocab_size %d", e.Path, e.Tokens, model, e.Vocab)
}

// LoadModelTokenizer loads the tokenizer file at path for module m (its
// vocabulary size is the first dimension of the tok_embeddings weight); a
// mismatch error names both files.
func LoadModelTokenizer(path string, m *ir.Module) (*sentencepiece.Tokenizer, error) {
	w := m.Weight("tok_embeddings")
	if w == nil || len(w.Type.Shape) != 2 || !w.Type.Shape[0].IsStatic() {
		return nil, fmt.Errorf("%s: module %q has no static tok_embeddings weight to size the tokenizer by", path, m.Name)
	}
	t, err := LoadTokenizer(path, int(w.Type.Shape[0].Size))
	if e, ok := err.(*VocabMismatchError); ok {
		e.Model = m.Meta["source"]
	}
	return t, err
}

// LoadTokenizer reads a llama2.c tokenizer file (tok*.bin: int32
// max_token_length, then per token a float32 score, an int32 length and the
// piece's bytes) for a model of vocabSize tokens. A file that holds another
// number of tokens is a *VocabMismatchError; vocabSize <= 0 takes every
// token in the file. Ids 1 and 2 are BOS and EOS, as in run.c.
func LoadTokenizer(path string, vocabSize int) (*sentencepiece.Tokenizer, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, unwrapPathError(err))
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: not a regular file", path)
	}
	if st.Size() > maxTokenFile {
		return nil, fmt.Errorf("%s: %d bytes is too large for a tokenizer file", path, st.Size())
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, unwrapPathError(err))
	}
	vocab, scores, err := ParseTokenizer(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if vocabSize > 0 && len(vocab) != vocabSize {
		return nil, &VocabMismatchError{Path: path, Tokens: len(vocab), Vocab: vocabSize}
	}
	bos, eos := 1, 2
	if len(vocab) <= 2 {
		bos, eos = -1, -1
	}
	t, err := sentencepiece.New(vocab, scores, bos, eos)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return t, nil
}

// ParseTokenizer decodes the bytes of a tok*.bin file into its pieces and
// scores. The records must fill the file exactly.
func ParseTokenizer(data []byte) (vocab []string, scores []float32, err error) {
	if len(data) < 4 {
		return nil, nil, fmt.Errorf("not a llama2.c tokenizer: %d bytes, shorter than the 4-byte header", len(data))
	}
	maxLen := int32(binary.LittleEndian.Uint32(data))
	if maxLen < 0 {
		return nil, nil, fmt.Errorf("not a llama2.c tokenizer: max_token_length %d is negative", maxLen)
	}
	off := 4
	for off < len(data) {
		i := len(vocab)
		if len(data)-off < 8 {
			return nil, nil, fmt.Errorf("truncated: token %d at byte %d needs an 8-byte score and length, %d bytes left", i, off, len(data)-off)
		}
		score := math.Float32frombits(binary.LittleEndian.Uint32(data[off:]))
		n := int64(int32(binary.LittleEndian.Uint32(data[off+4:])))
		off += 8
		if n < 0 {
			return nil, nil, fmt.Errorf("corrupt: token %d at byte %d has negative length %d", i, off-8, n)
		}
		if n > int64(len(data)-off) {
			return nil, nil, fmt.Errorf("truncated: token %d at byte %d has length %d, %d bytes left", i, off-8, n, len(data)-off)
		}
		vocab = append(vocab, string(data[off:off+int(n)]))
		scores = append(scores, score)
		off += int(n)
	}
	if len(vocab) == 0 {
		return nil, nil, fmt.Errorf("not a llama2.c tokenizer: no tokens")
	}
	return vocab, scores, nil
}
