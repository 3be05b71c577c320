package gguf

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/tapml/tapml/frontend/arch/llama"
	"github.com/x448/float16"
)

// A small GGUF writer for tests: it writes what the spec describes, so the
// parser can be tested on files with any content, valid or broken.

// wkv is one metadata entry to write. val is a Go value matching typ:
// uint8..int64, float32/64, bool, string, or warr for arrays.
type wkv struct {
	key string
	typ ValueType
	val any
}

// warr is an array value: items are Go values of elem's type (warr again
// for nested arrays).
type warr struct {
	elem  ValueType
	items []any
}

// wtensor is one tensor to write; data is its raw bytes.
type wtensor struct {
	name string
	dims []uint64 // GGML order, innermost first
	typ  GGMLType
	data []byte
}

type ggufWriter struct {
	version uint32
	align   int // 0: DefaultAlignment
	kvs     []wkv
	tensors []wtensor
}

func putStr(b *bytes.Buffer, s string) {
	binary.Write(b, binary.LittleEndian, uint64(len(s)))
	b.WriteString(s)
}

func putValue(b *bytes.Buffer, typ ValueType, v any) {
	le := binary.LittleEndian
	switch typ {
	case TypeString:
		putStr(b, v.(string))
	case TypeArray:
		a := v.(warr)
		binary.Write(b, le, uint32(a.elem))
		binary.Write(b, le, uint64(len(a.items)))
		for _, it := range a.items {
			putValue(b, a.elem, it)
		}
	case TypeBool:
		if v.(bool) {
			b.WriteByte(1)
		} else {
			b.WriteByte(0)
		}
	default: // fixed-size numbers: v is the matching Go type
		if err := binary.Write(b, le, v); err != nil {
			panic(fmt.Sprintf("writer: %s value %T: %v", typ, v, err))
		}
	}
}

func (w *ggufWriter) bytes() []byte {
	var b bytes.Buffer
	le := binary.LittleEndian
	align := w.align
	if align == 0 {
		align = DefaultAlignment
	}
	version := w.version
	if version == 0 {
		version = 3
	}
	b.WriteString(Magic)
	binary.Write(&b, le, version)
	binary.Write(&b, le, uint64(len(w.tensors)))
	binary.Write(&b, le, uint64(len(w.kvs)))
	for _, kv := range w.kvs {
		putStr(&b, kv.key)
		binary.Write(&b, le, uint32(kv.typ))
		putValue(&b, kv.typ, kv.val)
	}
	off := 0
	for _, t := range w.tensors {
		putStr(&b, t.name)
		binary.Write(&b, le, uint32(len(t.dims)))
		for _, d := range t.dims {
			binary.Write(&b, le, d)
		}
		binary.Write(&b, le, uint32(t.typ))
		binary.Write(&b, le, uint64(off))
		off += (len(t.data) + align - 1) / align * align
	}
	for b.Len()%align != 0 {
		b.WriteByte(0)
	}
	for _, t := range w.tensors {
		b.Write(t.data)
		for b.Len()%align != 0 {
			b.WriteByte(0)
		}
	}
	return b.Bytes()
}

// writeTemp writes data to a file in t's temp dir and returns its path.
func writeTemp(t testing.TB, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// encode returns vals as bytes of a tensor of type typ (F32, F16 or BF16;
// 16-bit values are rounded to nearest even by x448/float16 or by hand).
func encode(typ GGMLType, vals []float32) []byte {
	switch typ {
	case GGMLF32:
		out := make([]byte, 4*len(vals))
		for i, v := range vals {
			binary.LittleEndian.PutUint32(out[4*i:], math.Float32bits(v))
		}
		return out
	case GGMLF16:
		out := make([]byte, 2*len(vals))
		for i, v := range vals {
			binary.LittleEndian.PutUint16(out[2*i:], float16.Fromfloat32(v).Bits())
		}
		return out
	case GGMLBF16:
		out := make([]byte, 2*len(vals))
		for i, v := range vals {
			u := math.Float32bits(v)
			u += 0x7fff + (u>>16)&1 // round to nearest even (values are finite)
			binary.LittleEndian.PutUint16(out[2*i:], uint16(u>>16))
		}
		return out
	}
	panic("encode: type " + typ.String())
}

// llamaFile describes a synthetic LLaMA GGUF file.
type llamaFile struct {
	c        llama.Config
	ctx      int                        // llama.context_length
	typeOf   func(gguf string) GGMLType // tensor type by GGUF name (nil: F16 matrices, F32 vectors)
	vocab    []string                   // tokenizer pieces (nil: no tokenizer)
	extraKVs []wkv
	seed     uint64
	quantize func(GGMLType, []float32) []byte // encoder of quantized types (ggml's)
	arch     string                           // general.architecture ("" is llama)
}

// writer returns the writer of a synthetic LLaMA file with random weights.
func (lf llamaFile) writer() *ggufWriter {
	c := lf.c
	r := rand.New(rand.NewPCG(lf.seed, 99))
	arch := lf.arch
	if arch == "" {
		arch = "llama"
	}
	k := func(key string) string { return arch + "." + key }
	w := &ggufWriter{kvs: []wkv{
		{"general.architecture", TypeString, arch},
		{"general.name", TypeString, "synthetic"},
		{k("context_length"), TypeUint32, uint32(lf.ctx)},
		{k("embedding_length"), TypeUint32, uint32(c.Dim)},
		{k("block_count"), TypeUint32, uint32(c.Layers)},
		{k("feed_forward_length"), TypeUint32, uint32(c.HiddenDim)},
		{k("rope.dimension_count"), TypeUint32, uint32(c.HeadDim())},
		{k("attention.head_count"), TypeUint32, uint32(c.Heads)},
		{k("attention.head_count_kv"), TypeUint32, uint32(c.KVHeads)},
		{k("attention.layer_norm_rms_epsilon"), TypeFloat32, float32(c.NormEps)},
		{k("rope.freq_base"), TypeFloat32, float32(c.RopeTheta)},
	}}
	if lf.vocab != nil {
		toks := make([]any, len(lf.vocab))
		scores := make([]any, len(lf.vocab))
		types := make([]any, len(lf.vocab))
		for i, s := range lf.vocab {
			toks[i], scores[i], types[i] = s, float32(-i), int32(1)
		}
		w.kvs = append(w.kvs,
			wkv{"tokenizer.ggml.model", TypeString, "llama"},
			wkv{"tokenizer.ggml.tokens", TypeArray, warr{TypeString, toks}},
			wkv{"tokenizer.ggml.scores", TypeArray, warr{TypeFloat32, scores}},
			wkv{"tokenizer.ggml.token_type", TypeArray, warr{TypeInt32, types}},
			wkv{"tokenizer.ggml.bos_token_id", TypeUint32, uint32(1)},
			wkv{"tokenizer.ggml.eos_token_id", TypeUint32, uint32(2)},
		)
	}
	w.kvs = append(w.kvs, lf.extraKVs...)
	for _, ns := range c.WeightShapes() {
		name := llamaNames.gguf(ns.Name)
		typ := GGMLF16
		if len(ns.Shape) == 1 {
			typ = GGMLF32
		}
		if lf.typeOf != nil {
			typ = lf.typeOf(name)
		}
		n := 1
		dims := make([]uint64, len(ns.Shape))
		for i, d := range ns.Shape {
			n *= d
			dims[len(ns.Shape)-1-i] = uint64(d)
		}
		vals := make([]float32, n)
		for i := range vals {
			if len(ns.Shape) == 1 {
				vals[i] = float32(0.5 + r.Float64())
			} else {
				vals[i] = float32((2*r.Float64() - 1) / math.Sqrt(float64(ns.Shape[1])) * 2)
			}
		}
		var data []byte
		if typ.quantized() {
			data = lf.quantize(typ, vals)
		} else {
			data = encode(typ, vals)
		}
		w.tensors = append(w.tensors, wtensor{name, dims, typ, data})
	}
	return w
}

// smallConfig is a synthetic model with GQA, several layers and a vocab
// that the test tokenizer fills.
var smallConfig = llama.Config{Dim: 32, HiddenDim: 72, Layers: 3, Heads: 4, KVHeads: 2, Vocab: 300,
	MaxSeq: 64, NormEps: 1e-5, RopeTheta: 10000, RopeStyle: "interleaved"}

// quantConfig is smallConfig with dims that are whole K-quant
// super-blocks along every matrix row (so any quantized type fits).
var quantConfig = func() llama.Config {
	c := smallConfig
	c.Dim, c.HiddenDim, c.Heads, c.KVHeads, c.Layers = 256, 512, 4, 2, 2
	return c
}()

// tinyConfig is the smallest synthetic model (fuzz seeds).
var tinyConfig = llama.Config{Dim: 8, HiddenDim: 16, Layers: 1, Heads: 2, KVHeads: 1, Vocab: 8,
	MaxSeq: 16, NormEps: 1e-5, RopeTheta: 10000, RopeStyle: "interleaved"}

// testVocab is a SentencePiece-like vocabulary of n pieces.
func testVocab(n int) []string {
	v := []string{"<unk>", "<s>", "</s>"}
	for i := 0; i < 256 && len(v) < n; i++ {
		v = append(v, fmt.Sprintf("<0x%02X>", i))
	}
	for len(v) < n {
		v = append(v, "\u2581w"+strconv.Itoa(len(v)))
	}
	return v
}
