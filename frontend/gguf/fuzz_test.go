package gguf

import (
	"math/rand/v2"
	"strings"
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
	f.Add(fuzzSeedQwen2BPE())
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

// fuzzSeedQwen2BPE is a qwen2 file with Q8_0 and Q4_K matrices (random
// blocks: every bit pattern is valid data) and a byte-level BPE tokenizer,
// so the fuzzer starts from the quantized and BPE paths too.
func fuzzSeedQwen2BPE() []byte {
	tokens, merges := trainBPE(bpeCorpus, 20)
	c := tinyConfig
	c.Dim, c.HiddenDim, c.Vocab, c.QKVBias, c.RopeStyle = 256, 32, len(tokens), true, "half"
	r := rand.New(rand.NewPCG(1, 1))
	lf := llamaFile{c: c, arch: "qwen2", ctx: 16, typeOf: matrices(func(n string) GGMLType {
		switch {
		case strings.HasSuffix(n, ".bias"):
			return GGMLF32
		case strings.HasPrefix(n, "token_embd"):
			return GGMLQ4_K
		}
		return GGMLQ8_0
	}), quantize: func(typ GGMLType, vals []float32) []byte {
		elems, bytes := typ.blockLayout()
		b := make([]byte, len(vals)/elems*bytes)
		for i := range b {
			b[i] = byte(r.Uint32())
		}
		return b
	}}
	lf.extraKVs = []wkv{
		{"tokenizer.ggml.model", TypeString, "gpt2"},
		{"tokenizer.ggml.pre", TypeString, "qwen2"},
		{"tokenizer.ggml.tokens", TypeArray, warr{TypeString, anys(tokens)}},
		{"tokenizer.ggml.merges", TypeArray, warr{TypeString, anys(merges)}},
	}
	return lf.writer().bytes()
}

// TestFuzzSeedQwen2BPELoads: the seed is a valid model with a tokenizer,
// so fuzzing starts from inputs that reach every builder.
func TestFuzzSeedQwen2BPELoads(t *testing.T) {
	p := writeTemp(t, "seed.gguf", fuzzSeedQwen2BPE())
	m, tok, err := Load(p)
	if err != nil {
		t.Fatal(err)
	}
	if tok == nil || m.Weight("layers.0.attention.bq") == nil {
		t.Errorf("tokenizer %v, bias weight %v", tok, m.Weight("layers.0.attention.bq"))
	}
}
