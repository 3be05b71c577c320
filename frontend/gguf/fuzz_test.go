package gguf

import (
	"testing"
)

// FuzzParse feeds arbitrary bytes to the parser (and to the model and
// tokenizer builders when it accepts them): never a panic, and a parsed
// file's tensor data always lies inside the input.
func FuzzParse(f *testing.F) {
	f.Add(small().bytes())
	f.Add((&ggufWriter{version: 2, kvs: []wkv{
		{"n", TypeArray, warr{TypeArray, []any{warr{TypeString, []any{"a"}}}}},
		{"general.alignment", TypeUint32, uint32(64)},
	}}).bytes())
	f.Add(llamaFile{c: tinyConfig, ctx: 16, vocab: testVocab(tinyConfig.Vocab)}.writer().bytes())
	f.Add([]byte("GGUF"))
	f.Fuzz(func(t *testing.T, data []byte) {
		g, err := Parse("fuzz.gguf", data)
		if err != nil {
			return
		}
		for i := range g.Tensors {
			ti := &g.Tensors[i]
			if ti.Size < 0 {
				continue
			}
			b, err := g.TensorData(ti)
			if err != nil || int64(len(b)) != ti.Size {
				t.Fatalf("tensor %q: %d bytes, %v", ti.Name, len(b), err)
			}
		}
		for _, kv := range g.Metadata {
			_ = kv.Value.String()
		}
		fuzzBuild(g)
	})
}

// fuzzBuild runs the model and tokenizer builders on a parsed file; they
// must return errors, never panic. Weights are converted too.
func fuzzBuild(g *File) {
	if m, err := g.Module(); err == nil {
		for _, w := range m.Weights {
			w.Source.Bytes()
		}
	}
	g.Tokenizer()
}
