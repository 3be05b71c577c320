package gguf

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/tapml/tapml/frontend/arch/llama"
	"github.com/tapml/tapml/internal/testenv"
	"github.com/tapml/tapml/internal/testenv/llmtest"
)

// llamaCppLogits runs llama.cpp on the GGUF file at path: the prompt as one
// batch, then each decode token alone. It returns the logits of the last
// position after each call.
func llamaCppLogits(t *testing.T, path string, prompt, decode []int) [][]float32 {
	t.Helper()
	args := []string{llamaLibs(t), path}
	for _, tok := range prompt {
		args = append(args, strconv.Itoa(tok))
	}
	args = append(args, "--")
	for _, tok := range decode {
		args = append(args, strconv.Itoa(tok))
	}
	cmd := exec.Command(harness(t, "llamalogits"), args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("llama.cpp on %s: %v\n%s", path, err, stderr.String())
	}
	calls := 1 + len(decode)
	if len(out)%(4*calls) != 0 {
		t.Fatalf("llama.cpp wrote %d bytes for %d calls", len(out), calls)
	}
	vocab := len(out) / 4 / calls
	logits := make([][]float32, calls)
	for c := range logits {
		logits[c] = make([]float32, vocab)
		for i := range logits[c] {
			logits[c][i] = math.Float32frombits(binary.LittleEndian.Uint32(out[4*(c*vocab+i):]))
		}
	}
	return logits
}

// Tolerances of TestLogitsAgainstLlamaCpp, on max|ours - llama.cpp| /
// max|llama.cpp|. llama.cpp does not compute what the IR does in f32: its
// default KV cache is F16 (K and V rounded to 2^-11 relative), and its CPU
// matmuls round the activations to the weight's kind of number: to f16 for
// F16 weights, to 8-bit blocks (Q8_0, Q8_K: up to 1/254 of the block's
// largest value) for quantized ones. Observed: 1e-4 to 1.4e-3 for F32 and
// F16 files, 1.4e-2 to 3.6e-2 for Q8_0 and Q4_K. A real mistake is of order
// 1: with Q4_K's nibbles swapped the error is 1.3 to 1.7.
const (
	llamaCppTolFloat     = 5e-3
	llamaCppTolQuantized = 0.1
)

// TestLogitsAgainstLlamaCpp compares the IR of Load, run on the CPU
// reference device, with llama.cpp's own inference of the same file: an
// oracle independent of this package's reading of the format, unlike the
// float64 reference pass of TestLogitsAgainstReference.
func TestLogitsAgainstLlamaCpp(t *testing.T) {
	check := func(t *testing.T, path string, prompt, decode []int, tol float64) {
		want := llamaCppLogits(t, path, prompt, decode)
		m, _, err := Load(path)
		if err != nil {
			t.Fatal(err)
		}
		run := llmtest.NewRunner(t, m)
		calls := [][]int{prompt}
		for _, tok := range decode {
			calls = append(calls, []int{tok})
		}
		for c, toks := range calls {
			got := run.Forward(t, toks)
			ref := make([]float64, len(want[c]))
			for i, v := range want[c] {
				ref[i] = float64(v)
			}
			e, at := llmtest.RelErr(got, ref)
			what := fmt.Sprintf("call %d %v", c, toks)
			t.Logf("%s: max abs error / max |logit| = %.3g (at %d: ours %g, llama.cpp %g)", what, e, at, got[at], ref[at])
			if e > tol {
				t.Errorf("%s: relative error %.3g > %g", what, e, tol)
			}
		}
	}
	t.Run("llama-2-tiny-random", func(t *testing.T) {
		check(t, testenv.Model(t, tinyGGUF), []int{1, 15043, 3186, 29892, 920}, []int{338, 263, 31999, 0, 2}, llamaCppTolFloat)
	})
	// Synthetic files (several layers, GQA) with dims that are whole K-quant
	// super-blocks, and a tokenizer: llama.cpp will not load a file without.
	c := quantConfig
	qwen2 := c
	qwen2.QKVBias, qwen2.RopeStyle, qwen2.RopeTheta = true, "half", 1000000
	qwen2Tied := qwen2
	qwen2Tied.TiedEmbeddings = true
	for _, tc := range []struct {
		name   string
		arch   string
		c      llama.Config
		typeOf func(string) GGMLType
		tol    float64
	}{
		{"F32", "llama", c, func(string) GGMLType { return GGMLF32 }, llamaCppTolFloat},
		{"F16", "llama", c, matrices(func(string) GGMLType { return GGMLF16 }), llamaCppTolFloat},
		{"Q8_0", "llama", c, matrices(func(string) GGMLType { return GGMLQ8_0 }), llamaCppTolQuantized},
		{"Q4_K", "llama", c, matrices(func(string) GGMLType { return GGMLQ4_K }), llamaCppTolQuantized},
		// Qwen2: q/k/v biases (F32, as llama.cpp's converter keeps them),
		// NEOX RoPE, a classifier tied to the embeddings or not.
		{"qwen2-F32", "qwen2", qwen2, func(string) GGMLType { return GGMLF32 }, llamaCppTolFloat},
		{"qwen2-tied-Q4_K", "qwen2", qwen2Tied, matrices(func(n string) GGMLType {
			if strings.HasSuffix(n, ".bias") {
				return GGMLF32
			}
			return GGMLQ4_K
		}), llamaCppTolQuantized},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lf := llamaFile{c: tc.c, arch: tc.arch, ctx: 64, typeOf: tc.typeOf, seed: 5, vocab: testVocab(tc.c.Vocab),
				quantize: ggmlQuantizer(t)}
			p := writeTemp(t, tc.name+".gguf", lf.writer().bytes())
			check(t, p, []int{1, 17, 250, 3, 99}, []int{5, 150, 1}, tc.tol)
		})
	}
	// WriteLlama's files (what the GPU benchmarks give llama.cpp) load in
	// llama.cpp with its synthetic vocabulary and compute the same model;
	// quantized ones hold tensor/quant's blocks, which are ggml's own.
	for typ, tol := range map[GGMLType]float64{GGMLF32: llamaCppTolFloat, GGMLF16: llamaCppTolFloat,
		GGMLQ4_0: llamaCppTolQuantized, GGMLQ8_0: llamaCppTolQuantized, GGMLQ4_K: llamaCppTolQuantized} {
		t.Run("WriteLlama-"+typ.String(), func(t *testing.T) {
			c := c
			c.Vocab = 300
			p := filepath.Join(t.TempDir(), "w.gguf")
			if err := WriteLlama(p, c, llama.RandomWeights(c, 3), typ); err != nil {
				t.Fatal(err)
			}
			check(t, p, []int{1, 17, 250, 3, 99}, []int{5, 150, 1}, tol)
		})
	}
	// Llama 3.1's rope scaling: per-pair frequency divisors in a
	// rope_freqs tensor. These divisors are not Llama 3.1's (which leave
	// the fast pairs alone, so short prompts barely show them) but vary
	// over every pair, so a loader that ignored them would be far off.
	t.Run("rope_freqs", func(t *testing.T) {
		c := c
		c.RopeTheta = 500000
		factors := make([]float32, c.HeadDim()/2)
		for i := range factors {
			factors[i] = 1 + 3*float32((i*7)%5)/4
		}
		w := llamaFile{c: c, ctx: 64, typeOf: func(string) GGMLType { return GGMLF32 }, seed: 6, vocab: testVocab(c.Vocab)}.writer()
		w.tensors = append(w.tensors, wtensor{ropeFreqs, []uint64{uint64(len(factors))}, GGMLF32, encode(GGMLF32, factors)})
		p := writeTemp(t, "rope_freqs.gguf", w.bytes())
		check(t, p, []int{1, 17, 250, 3, 99, 4, 8, 15, 16, 23, 42}, []int{5, 150, 1}, llamaCppTolFloat)
	})
}
