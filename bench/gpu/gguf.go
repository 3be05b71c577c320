package main

import (
	"flag"
	"fmt"

	"github.com/tapml/tapml/frontend/arch/llama"
	"github.com/tapml/tapml/frontend/gguf"
)

// Shapes of public models, for GGUF files with random weights that tapml
// and llama.cpp both run (GGUF LLaMA files rotate interleaved pairs).
var ggufShapes = map[string]llama.Config{
	"tinyllama": withStyle(llama.TinyLlama),
	// Llama-3.2-1B: hidden 2048, 16 layers, 32/8 heads, ffn 8192, vocab
	// 128,256, RoPE base 500,000, classifier tied to the embeddings.
	"llama32-1b": {Dim: 2048, HiddenDim: 8192, Layers: 16, Heads: 32, KVHeads: 8, Vocab: 128256, MaxSeq: 2048,
		NormEps: 1e-5, RopeTheta: 500000, RopeStyle: "interleaved", TiedEmbeddings: true},
	"stories15M": withStyle(llama.Stories15M),
	// Gemma-2-2B's width, depth, heads and vocabulary (256,000, tied) in a
	// LLaMA body: its embedding (2.2 GiB in f32) exceeds every WebGPU
	// buffer limit. Not Gemma's block (head dim 288 here, not 256; no
	// soft-capping or sandwich norms): a test of the vocabulary split.
	"gemma2-2b-vocab": {Dim: 2304, HiddenDim: 9216, Layers: 26, Heads: 8, KVHeads: 4, Vocab: 256000, MaxSeq: 2048,
		NormEps: 1e-6, RopeTheta: 10000, RopeStyle: "interleaved", TiedEmbeddings: true},
	"tiny": withStyle(llama.Tiny), // for tests
}

func withStyle(c llama.Config) llama.Config {
	c.RopeStyle = "interleaved"
	return c
}

// ggufCmd writes a GGUF file of a named shape with bench's random weights.
func ggufCmd(args []string) error {
	fs := flag.NewFlagSet("gguf", flag.ExitOnError)
	shape := fs.String("shape", "tinyllama", "model shape: tinyllama, llama32-1b, gemma2-2b-vocab, stories15M, tiny")
	typ := fs.String("type", "F32", "matrix type: F32, F16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0 or Q4_K")
	out := fs.String("o", "", "the file to write")
	fs.Parse(args)
	c, ok := ggufShapes[*shape]
	if !ok {
		return fmt.Errorf("unknown shape %q (tinyllama, llama32-1b, gemma2-2b-vocab, stories15M, tiny)", *shape)
	}
	types := map[string]gguf.GGMLType{"F32": gguf.GGMLF32, "F16": gguf.GGMLF16, "Q4_0": gguf.GGMLQ4_0, "Q4_1": gguf.GGMLQ4_1,
		"Q5_0": gguf.GGMLQ5_0, "Q5_1": gguf.GGMLQ5_1, "Q8_0": gguf.GGMLQ8_0, "Q4_K": gguf.GGMLQ4_K}
	t, ok := types[*typ]
	if !ok {
		return fmt.Errorf("unknown type %q (F32, F16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K)", *typ)
	}
	if *out == "" {
		return fmt.Errorf("-o is required")
	}
	logf("%s %s: drawing random weights", *shape, *typ)
	w := randomWeights(c)
	logf("writing %s", *out)
	return gguf.WriteLlama(*out, c, w, t)
}
