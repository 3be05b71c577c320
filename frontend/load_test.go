package frontend

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tapml/tapml/frontend/arch/llama"
	"github.com/tapml/tapml/frontend/hf"
	"github.com/tapml/tapml/frontend/llama2c"
	"github.com/tapml/tapml/frontend/tokenizer/bpe"
	"github.com/tapml/tapml/frontend/tokenizer/sentencepiece"
	"github.com/tapml/tapml/ir"
)

var small = llama.Config{Dim: 16, HiddenDim: 24, Layers: 1, Heads: 2, KVHeads: 2, Vocab: 259, MaxSeq: 8,
	NormEps: 1e-5, RopeTheta: 10000, RopeStyle: "interleaved", TiedEmbeddings: true}

// TestLoadHFFolder: a folder with config.json loads through frontend/hf,
// with its tokenizer.json, and --tokenizer replaces that tokenizer.
func TestLoadHFFolder(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "hf")
	tok := sentencepiece.NewBytes()
	pieces := make([]string, tok.VocabSize())
	for i := range pieces {
		pieces[i] = tok.Token(i)
	}
	tj, err := hf.SentencePieceTokenizerJSON(pieces, make([]float32, len(pieces)), map[int]string{0: "<unk>", 1: "<s>", 2: "</s>"}, 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := hf.WriteLlama(dir, small, llama.RandomWeights(small, 1), hf.WriteOptions{BOS: 1, EOS: 2, Tokenizer: tj}); err != nil {
		t.Fatal(err)
	}
	m, err := Load(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if m.Format != "hf" || m.Module.Func("decode") == nil {
		t.Errorf("format %q", m.Format)
	}
	if _, ok := m.Tokenizer.(*bpe.Tokenizer); !ok || m.Tokenizer.BOS() != 1 {
		t.Errorf("tokenizer %T", m.Tokenizer)
	}
	if ids := m.Tokenizer.Encode("hi", true, false); len(ids) < 2 || ids[0] != 1 || m.Tokenizer.Decode(ids[len(ids)-2:]) != "hi" {
		t.Errorf("Encode(hi) = %v", ids)
	}
	// A llama2.c tokenizer file replaces it.
	tokPath := filepath.Join(t.TempDir(), "tok.bin")
	writeTokBin(t, tokPath, pieces)
	m, err = Load(dir, Options{Tokenizer: tokPath})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := m.Tokenizer.(*sentencepiece.Tokenizer); !ok {
		t.Errorf("tokenizer %T after --tokenizer", m.Tokenizer)
	}
}

// writeTokBin writes a llama2.c tokenizer file of pieces with zero scores.
func writeTokBin(t *testing.T, path string, pieces []string) {
	b := []byte{16, 0, 0, 0}
	for _, p := range pieces {
		b = append(b, 0, 0, 0, 0, byte(len(p)), 0, 0, 0)
		b = append(b, p...)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestNoTokenizerIsNil: a model without a tokenizer has a nil Tokenizer
// interface (not a typed nil), which `tapmlc run` relies on.
func TestNoTokenizerIsNil(t *testing.T) {
	path := filepath.Join(t.TempDir(), "m.bin")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := llama2c.Write(f, small, llama.RandomWeights(small, 1), llama2c.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	f.Close()
	m, err := Load(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if m.Tokenizer != nil {
		t.Errorf("tokenizer %T %v, want nil", m.Tokenizer, m.Tokenizer)
	}
}

func TestLoadOtherFolder(t *testing.T) {
	_, err := Load(t.TempDir(), Options{})
	if err == nil || !strings.Contains(err.Error(), "nor a Hugging Face model folder (no config.json)") {
		t.Errorf("error %v", err)
	}
}

// TestLoadTextSourceCycle: an IR text file whose "source" leads back to
// itself (as `tapmlc import m.tir -o m.tir` writes it) is an error naming
// the files, not an endless recursion.
func TestLoadTextSourceCycle(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "m.bin")
	f, err := os.Create(bin)
	if err != nil {
		t.Fatal(err)
	}
	if err := llama2c.Write(f, small, llama.RandomWeights(small, 1), llama2c.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	f.Close()
	m, err := Load(bin, Options{})
	if err != nil {
		t.Fatal(err)
	}
	write := func(name, source string) string {
		p := filepath.Join(dir, name)
		m.Module.Meta["source"] = source
		if err := os.WriteFile(p, []byte(ir.Text(m.Module)), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	self := write("self.tir", "self.tir")
	a := write("a.tir", "b.tir")
	write("b.tir", filepath.Join(dir, "a.tir"))
	ok := write("ok.tir", "a2.tir")
	write("a2.tir", "m.bin")
	for _, p := range []string{self, a} {
		_, err := Load(p, Options{})
		if err == nil || !strings.Contains(err.Error(), "cycle") {
			t.Errorf("Load(%s): error %v, want a source cycle", filepath.Base(p), err)
		}
	}
	if _, err := Load(ok, Options{}); err != nil {
		t.Errorf("a chain of text files without a cycle: %v", err)
	}
}
