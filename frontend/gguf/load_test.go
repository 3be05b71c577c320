package gguf

import (
	"bytes"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/tapml/tapml/frontend/tokenizer/sentencepiece"
	"github.com/tapml/tapml/internal/testenv"
	"github.com/tapml/tapml/ir"
)

// TestLoadTiny loads the real tiny Llama-2 file: config, weights (the
// file's bytes in the file's types) and the embedded tokenizer.
func TestLoadTiny(t *testing.T) {
	path := testenv.Model(t, tinyGGUF)
	m, tok, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	wantMeta := map[string]string{
		"arch":           "llama",
		"config":         "dim=8 hidden=32 layers=1 heads=2 kv_heads=2 vocab=32000 max_seq=4096 eps=1e-05 theta=10000 rope=interleaved tied=false",
		"source":         path,
		"format":         "gguf",
		"gguf.version":   "3",
		"context_length": "4096",
		"max_seq":        "4096",
		"general.name":   "LLaMA v2",
		"tokenizer":      "llama (embedded, 32000 tokens)",
	}
	if d := cmp.Diff(wantMeta, m.Meta); d != "" {
		t.Errorf("meta (-want +got):\n%s", d)
	}
	var names []string
	for _, w := range m.Weights {
		names = append(names, w.Name+" "+w.Type.String())
	}
	wantW := []string{
		"tok_embeddings f16[32000, 8]",
		"layers.0.attention_norm f32[8]", "layers.0.attention.wq f16[8, 8]", "layers.0.attention.wk f16[8, 8]",
		"layers.0.attention.wv f16[8, 8]", "layers.0.attention.wo f16[8, 8]", "layers.0.ffn_norm f32[8]",
		"layers.0.feed_forward.w1 f16[32, 8]", "layers.0.feed_forward.w2 f16[8, 32]", "layers.0.feed_forward.w3 f16[32, 8]",
		"norm f32[8]", "output f16[32000, 8]",
	}
	if d := cmp.Diff(wantW, names); d != "" {
		t.Errorf("weights (-want +got):\n%s", d)
	}

	// Weights are the file's bytes in the file's types, not copies and
	// not widened: F16 tensors stay f16 up to the kernels that read them.
	f, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, w := range m.Weights {
		ti, _ := f.Tensor(families["llama"].names.gguf(w.Name))
		raw, _ := f.TensorData(ti)
		got, err := w.Source.Bytes()
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, raw) {
			t.Errorf("%s: %d bytes, not the file's %d", w.Name, len(got), len(raw))
		}
		if want := irTypes[ti.Type]; ir.SourceDType(w.Source) != want || w.Type.DType != want {
			t.Errorf("%s: source holds %s and the weight is %s, want the file's %s (%s)", w.Name, ir.SourceDType(w.Source), w.Type, want, ti.Type)
		}
	}

	// The embedded Llama-2 tokenizer.
	if tok == nil {
		t.Fatal("no tokenizer")
	}
	if tok.VocabSize() != 32000 || tok.BOS() != 1 || tok.EOS() != 2 {
		t.Errorf("tokenizer: vocab %d bos %d eos %d", tok.VocabSize(), tok.BOS(), tok.EOS())
	}
	// Llama 2's SentencePiece model encodes "Hello world" as <s> ▁Hello ▁world.
	if got := tok.Encode("Hello world", true, false); !cmp.Equal(got, []int{1, 15043, 3186}) {
		t.Errorf("Encode(Hello world) = %v, want [1 15043 3186]", got)
	}
	if got := tok.(*sentencepiece.Tokenizer).Token(3186); got != " world" {
		t.Errorf("piece 3186 = %q, want %q (▁ mapped to space)", got, " world")
	}
	if got := tok.Piece(1, 15043) + tok.Piece(15043, 3186); got != "Hello world" {
		t.Errorf("pieces = %q", got)
	}
}

// Helpers that edit a synthetic file's writer.

func dropKV(w *ggufWriter, key string) {
	for i, kv := range w.kvs {
		if kv.key == key {
			w.kvs = append(w.kvs[:i], w.kvs[i+1:]...)
			return
		}
	}
	panic("dropKV: no " + key)
}

func setKV(w *ggufWriter, key string, typ ValueType, val any) {
	for i, kv := range w.kvs {
		if kv.key == key {
			w.kvs[i] = wkv{key, typ, val}
			return
		}
	}
	w.kvs = append(w.kvs, wkv{key, typ, val})
}

func tensorOf(w *ggufWriter, name string) *wtensor {
	for i := range w.tensors {
		if w.tensors[i].name == name {
			return &w.tensors[i]
		}
	}
	panic("tensorOf: no " + name)
}

func dropTensor(w *ggufWriter, name string) {
	for i := range w.tensors {
		if w.tensors[i].name == name {
			w.tensors = append(w.tensors[:i], w.tensors[i+1:]...)
			return
		}
	}
	panic("dropTensor: no " + name)
}

// TestLoadSynthetic covers what the real file does not: tied embeddings,
// the default kv head count, MaxSeq capping and BF16 weights.
func TestLoadSynthetic(t *testing.T) {
	c := smallConfig
	c.KVHeads, c.TiedEmbeddings = c.Heads, true
	w := llamaFile{c: c, ctx: 100000, vocab: testVocab(c.Vocab), typeOf: func(string) GGMLType { return GGMLBF16 }}.writer()
	dropKV(w, "llama.attention.head_count_kv")
	p := writeTemp(t, "synthetic.gguf", w.bytes())
	m, tok, err := Load(p)
	if err != nil {
		t.Fatal(err)
	}
	want := "dim=32 hidden=72 layers=3 heads=4 kv_heads=4 vocab=300 max_seq=4096 eps=1e-05 theta=10000 rope=interleaved tied=true"
	if m.Meta["config"] != want || m.Meta["max_seq"] != "4096" || m.Meta["context_length"] != "100000" {
		t.Errorf("meta %v\nwant config %s", m.Meta, want)
	}
	if m.Weight("output") != nil {
		t.Error("tied model has an output weight")
	}
	if tok == nil || tok.VocabSize() != 300 {
		t.Fatalf("tokenizer %v", tok)
	}
	if got := tok.(*sentencepiece.Tokenizer).Token(299); got != " w299" {
		t.Errorf("piece 299 = %q, want %q", got, " w299")
	}
	// No merges reach these pieces, so text falls back to byte tokens
	// (id 3+b): the dummy-prefix space, then 'A'.
	if got := tok.Encode("A", false, false); !cmp.Equal(got, []int{3 + ' ', 3 + 'A'}) {
		t.Errorf("Encode(A) = %v, want [35 68]", got)
	}
	// No tokenizer in the file: a nil tokenizer, no error.
	w = llamaFile{c: smallConfig, ctx: 64}.writer()
	p = writeTemp(t, "notok.gguf", w.bytes())
	m, tok, err = Load(p)
	if err != nil || tok != nil || m.Meta["tokenizer"] != "none" {
		t.Errorf("file without tokenizer: tok %v, err %v, meta %q", tok, err, m.Meta["tokenizer"])
	}
}

// TestLoadErrors: each problem gives one error naming the file and the
// problem.
func TestLoadErrors(t *testing.T) {
	base := func() *ggufWriter {
		return llamaFile{c: smallConfig, ctx: 64, vocab: testVocab(smallConfig.Vocab)}.writer()
	}
	for _, tc := range []struct {
		name string
		edit func(w *ggufWriter)
		want string
	}{
		{"unsupported quantized tensor", func(w *ggufWriter) {
			q := tensorOf(w, "blk.1.attn_q.weight")
			q.typ, q.data = GGMLIQ2_XXS, make([]byte, 32*32/256*66)
		}, `tensor "blk.1.attn_q.weight" has type IQ2_XXS (ggml type 16), which tapml does not support; supported types: F32 (0), F16 (1), BF16 (30), Q4_0 (2), Q4_1 (3), Q5_0 (6), Q5_1 (7), Q8_0 (8), Q2_K (10), Q3_K (11), Q4_K (12), Q5_K (13), Q6_K (14)`},
		{"k-quant tensor of partial blocks", func(w *ggufWriter) {
			q := tensorOf(w, "token_embd.weight")
			q.typ = GGMLQ6_K
		}, `tensor "token_embd.weight" of type Q6_K: innermost dim 32 is not a multiple of the block size 256`},
		{"unknown tensor type", func(w *ggufWriter) { tensorOf(w, "output.weight").typ = 77 }, `tensor "output.weight" has type unknown type 77 (ggml type 77)`},
		{"architecture", func(w *ggufWriter) { setKV(w, "general.architecture", TypeString, "gpt2") }, `architecture "gpt2" is not supported (supported: llama, qwen2)`},
		{"no architecture", func(w *ggufWriter) { dropKV(w, "general.architecture") }, "no general.architecture"},
		{"missing tensor", func(w *ggufWriter) { dropTensor(w, "blk.2.ffn_up.weight") }, `missing tensor "blk.2.ffn_up.weight" (for weight layers.2.feed_forward.w3)`},
		{"missing embeddings", func(w *ggufWriter) { dropTensor(w, "token_embd.weight") }, `missing tensor "token_embd.weight"`},
		{"wrong shape", func(w *ggufWriter) { tensorOf(w, "blk.0.attn_k.weight").dims = []uint64{16, 32} },
			`tensor "blk.0.attn_k.weight" (weight layers.0.attention.wk) has shape [32 16] (GGUF dims [16 32]), want [16 32]`},
		{"wrong vector shape", func(w *ggufWriter) {
			n := tensorOf(w, "output_norm.weight")
			n.dims, n.data = []uint64{16}, n.data[:64]
		}, `tensor "output_norm.weight" (weight norm) has shape [16] (GGUF dims [16]), want [32]`},
		{"extra tensor", func(w *ggufWriter) {
			w.tensors = append(w.tensors, wtensor{"blk.0.attn_q_norm.weight", []uint64{8}, GGMLF32, make([]byte, 32)})
		}, "tensors the llama graph does not use (unsupported model variant): blk.0.attn_q_norm.weight"},
		{"rope_freqs of zeros", func(w *ggufWriter) {
			w.tensors = append(w.tensors, wtensor{"rope_freqs.weight", []uint64{4}, GGMLF32, make([]byte, 16)})
		}, `tensor "rope_freqs.weight": factor 0 is 0, want positive and finite`},
		{"rope_freqs length", func(w *ggufWriter) {
			w.tensors = append(w.tensors, wtensor{"rope_freqs.weight", []uint64{3}, GGMLF32, make([]byte, 12)})
		}, `tensor "rope_freqs.weight" has GGUF dims [3], want [4] (head_dim/2)`},
		{"missing metadata", func(w *ggufWriter) { dropKV(w, "llama.block_count") }, "missing metadata llama.block_count"},
		{"metadata type", func(w *ggufWriter) { setKV(w, "llama.embedding_length", TypeString, "32") }, `metadata llama.embedding_length is string "32", want an integer`},
		{"metadata range", func(w *ggufWriter) { setKV(w, "llama.attention.head_count", TypeInt32, int32(-4)) }, "llama.attention.head_count = -4 is out of range"},
		{"heads do not divide", func(w *ggufWriter) { setKV(w, "llama.attention.head_count", TypeUint32, uint32(5)) }, "embedding_length 32 is not a multiple of llama.attention.head_count 5"},
		{"partial rope", func(w *ggufWriter) { setKV(w, "llama.rope.dimension_count", TypeUint32, uint32(4)) }, "llama.rope.dimension_count = 4 differs from the head dim 8"},
		{"rope scaling", func(w *ggufWriter) { setKV(w, "llama.rope.scaling.type", TypeString, "yarn") }, `llama.rope.scaling.type "yarn" is not supported`},
		{"experts", func(w *ggufWriter) { setKV(w, "llama.expert_count", TypeUint32, uint32(8)) }, "mixture-of-experts"},
		{"bad eps", func(w *ggufWriter) { setKV(w, "llama.attention.layer_norm_rms_epsilon", TypeFloat32, float32(-1)) }, "layer_norm_rms_epsilon = -1 must be positive"},
		{"vocab size disagrees", func(w *ggufWriter) { setKV(w, "llama.vocab_size", TypeUint32, uint32(301)) }, "llama.vocab_size 301 differs from the 300 rows of token_embd.weight"},
		{"tokenizer model", func(w *ggufWriter) { setKV(w, "tokenizer.ggml.model", TypeString, "bert") }, `tokenizer model "bert" is not supported (supported: llama (SentencePiece), gpt2 (byte-level BPE))`},
		{"gpt2 tokenizer without merges", func(w *ggufWriter) { setKV(w, "tokenizer.ggml.model", TypeString, "gpt2") }, "tokenizer model gpt2 but no tokenizer.ggml.merges"},
		{"gpt2 merges not strings", func(w *ggufWriter) {
			setKV(w, "tokenizer.ggml.model", TypeString, "gpt2")
			setKV(w, "tokenizer.ggml.merges", TypeUint32, uint32(7))
		}, "tokenizer.ggml.merges is uint32 7, want an array of strings"},
		{"gpt2 tokenizer with another pre-tokenizer", func(w *ggufWriter) {
			setKV(w, "tokenizer.ggml.model", TypeString, "gpt2")
			setKV(w, "tokenizer.ggml.merges", TypeArray, warr{TypeString, []any{}})
			setKV(w, "tokenizer.ggml.pre", TypeString, "deepseek-llm")
		}, `tokenizer.ggml.pre "deepseek-llm" is not supported (supported: deepseek-r1-qwen, gpt-2, llama-bpe, llama-v3, llama3, qwen2)`},
		{"tokenizer tokens type", func(w *ggufWriter) { setKV(w, "tokenizer.ggml.tokens", TypeUint8, uint8(1)) }, "tokenizer.ggml.tokens is uint8 1, want an array of strings"},
		{"tokenizer scores length", func(w *ggufWriter) {
			setKV(w, "tokenizer.ggml.scores", TypeArray, warr{TypeFloat32, []any{float32(0)}})
		}, "tokenizer.ggml.scores is array [1 x float32: 0], want 300 floats"},
		{"tokenizer bos", func(w *ggufWriter) { setKV(w, "tokenizer.ggml.bos_token_id", TypeUint32, uint32(300)) }, "tokenizer.ggml.bos_token_id = 300 is out of range [0, 299]"},
		{"tokenizer larger than model", func(w *ggufWriter) {
			v := make([]any, 400)
			s := make([]any, 400)
			for i, p := range testVocab(400) {
				v[i], s[i] = p, float32(0)
			}
			setKV(w, "tokenizer.ggml.tokens", TypeArray, warr{TypeString, v})
			setKV(w, "tokenizer.ggml.scores", TypeArray, warr{TypeFloat32, s})
			dropKV(w, "tokenizer.ggml.token_type")
		}, "the tokenizer has 400 tokens, more than the model's 300 embedding rows"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := base()
			tc.edit(w)
			p := writeTemp(t, "model.gguf", w.bytes())
			m, _, err := Load(p)
			if err == nil {
				t.Fatalf("no error (module %q), want %q", m.Name, tc.want)
			}
			if !strings.HasPrefix(err.Error(), p+": ") || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q\nwant it to start with %s and say %q", err, p, tc.want)
			}
		})
	}
	// The error for a file that is not GGUF at all, or missing.
	p := writeTemp(t, "notgguf.bin", []byte("this is not a model file"))
	if _, _, err := Load(p); err == nil || !strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), "not a GGUF file") {
		t.Errorf("non-GGUF file: %v", err)
	}
	if _, _, err := Load(p + ".missing"); err == nil || !strings.Contains(err.Error(), p+".missing") {
		t.Errorf("missing file: %v", err)
	}
}

func TestCanonicalNames(t *testing.T) {
	for in, want := range map[string]string{
		"token_embd.weight": "tok_embeddings", "output_norm.weight": "norm", "output.weight": "output",
		"blk.0.attn_norm.weight": "layers.0.attention_norm", "blk.12.attn_q.weight": "layers.12.attention.wq",
		"blk.3.attn_k.weight": "layers.3.attention.wk", "blk.3.attn_v.weight": "layers.3.attention.wv",
		"blk.3.attn_output.weight": "layers.3.attention.wo", "blk.3.ffn_norm.weight": "layers.3.ffn_norm",
		"blk.3.ffn_gate.weight": "layers.3.feed_forward.w1", "blk.3.ffn_down.weight": "layers.3.feed_forward.w2",
		"blk.3.ffn_up.weight":  "layers.3.feed_forward.w3",
		"blk.03.ffn_up.weight": "", "blk.-1.ffn_up.weight": "", "blk.3.ffn_up.bias": "", "rope_freqs.weight": "", "blk.3.weight": "",
	} {
		got, ok := llamaNames.canonical(in)
		if got != want || ok != (want != "") {
			t.Errorf("canonical(%q) = %q, %v; want %q", in, got, ok, want)
		}
		if ok && llamaNames.gguf(got) != in {
			t.Errorf("gguf(%q) = %q, want %q", got, llamaNames.gguf(got), in)
		}
	}
}
