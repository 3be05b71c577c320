package gguf

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"slices"

	"github.com/tapml/tapml/frontend/arch/llama"
	"github.com/tapml/tapml/internal/atomicfile"
	"github.com/tapml/tapml/ir"
	"github.com/tapml/tapml/tensor"
	"github.com/tapml/tapml/tensor/quant"
	"github.com/x448/float16"
)

// Writer assembles a GGUF version 3 file: metadata entries and tensors, in
// the order they are added, written with the default alignment. It writes
// only valid files (the tests keep their own writer for broken ones); bench
// tools use it to make model files of any shape for tapml and llama.cpp.
type Writer struct {
	meta    []writerKV
	tensors []writerTensor
	err     error
}

// writerKV is one metadata entry, its value already encoded.
type writerKV struct {
	key   string
	typ   ValueType
	value []byte
}

type writerTensor struct {
	name string
	dims []uint64 // ggml order: innermost first
	typ  GGMLType
	data []byte
}

var le = binary.LittleEndian

// String, Uint32, Float32, Bool, Strings, Float32s and Int32s add one
// metadata entry of that GGUF type.
func (w *Writer) String(key, v string) { w.add(key, TypeString, appendString(nil, v)) }
func (w *Writer) Uint32(key string, v uint32) {
	w.add(key, TypeUint32, le.AppendUint32(nil, v))
}
func (w *Writer) Float32(key string, v float32) {
	w.add(key, TypeFloat32, le.AppendUint32(nil, math.Float32bits(v)))
}
func (w *Writer) Bool(key string, v bool) {
	b := byte(0)
	if v {
		b = 1
	}
	w.add(key, TypeBool, []byte{b})
}
func (w *Writer) Strings(key string, v []string) {
	b := arrayHeader(TypeString, len(v))
	for _, s := range v {
		b = appendString(b, s)
	}
	w.add(key, TypeArray, b)
}
func (w *Writer) Float32s(key string, v []float32) {
	b := arrayHeader(TypeFloat32, len(v))
	for _, f := range v {
		b = le.AppendUint32(b, math.Float32bits(f))
	}
	w.add(key, TypeArray, b)
}
func (w *Writer) Int32s(key string, v []int32) {
	b := arrayHeader(TypeInt32, len(v))
	for _, n := range v {
		b = le.AppendUint32(b, uint32(n))
	}
	w.add(key, TypeArray, b)
}

func appendString(b []byte, s string) []byte { return append(le.AppendUint64(b, uint64(len(s))), s...) }

func arrayHeader(elem ValueType, n int) []byte {
	return le.AppendUint64(le.AppendUint32(nil, uint32(elem)), uint64(n))
}

func (w *Writer) add(key string, typ ValueType, value []byte) {
	for _, kv := range w.meta {
		if kv.key == key && w.err == nil {
			w.err = fmt.Errorf("gguf writer: metadata key %q added twice", key)
		}
	}
	w.meta = append(w.meta, writerKV{key: key, typ: typ, value: value})
}

// Tensor adds a tensor of type typ with dims in row-major order (outermost
// first, as tapml writes shapes; the file stores them innermost first).
// data holds its bytes in ggml's layout for typ.
func (w *Writer) Tensor(name string, typ GGMLType, dims []int, data []byte) {
	if w.err != nil {
		return
	}
	elems, bytes := typ.blockLayout()
	if elems == 0 || len(dims) == 0 || len(dims) > MaxDims {
		w.err = fmt.Errorf("gguf writer: tensor %s: type %s with %d dims cannot be written", name, typ, len(dims))
		return
	}
	gd := make([]uint64, len(dims))
	n := int64(1)
	for i, d := range dims {
		gd[len(dims)-1-i] = uint64(d)
		n *= int64(d)
	}
	if int64(dims[len(dims)-1])%int64(elems) != 0 || n/int64(elems)*int64(bytes) != int64(len(data)) {
		w.err = fmt.Errorf("gguf writer: tensor %s: %d bytes do not hold %v elements of %s", name, len(data), dims, typ)
		return
	}
	w.tensors = append(w.tensors, writerTensor{name: name, dims: gd, typ: typ, data: data})
}

// WriteFile writes the file at path atomically.
func (w *Writer) WriteFile(path string) error {
	if w.err != nil {
		return w.err
	}
	return atomicfile.Write(path, w.write)
}

func (w *Writer) write(out io.Writer) error {
	c := &countingWriter{w: out}
	b := bufio.NewWriterSize(c, 1<<20)
	put := func(v any) { binary.Write(b, le, v) }
	str := func(s string) { b.Write(appendString(nil, s)) }
	b.WriteString(Magic)
	put(uint32(3))
	put(uint64(len(w.tensors)))
	put(uint64(len(w.meta)))
	for _, kv := range w.meta {
		str(kv.key)
		put(uint32(kv.typ))
		b.Write(kv.value)
	}
	pad := func(n int64) int64 { return (n + DefaultAlignment - 1) / DefaultAlignment * DefaultAlignment }
	var off int64
	for _, t := range w.tensors {
		str(t.name)
		put(uint32(len(t.dims)))
		for _, d := range t.dims {
			put(d)
		}
		put(uint32(t.typ))
		put(uint64(off))
		off += pad(int64(len(t.data)))
	}
	zeros := make([]byte, DefaultAlignment)
	align := func() {
		if r := (c.n + int64(b.Buffered())) % DefaultAlignment; r != 0 {
			b.Write(zeros[:DefaultAlignment-r])
		}
	}
	align()
	for _, t := range w.tensors {
		b.Write(t.data)
		align()
	}
	return b.Flush()
}

// countingWriter counts the bytes written through it (the writer needs its
// position to align the data section).
type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// fileTypes are general.file_type (llama.cpp's llama_ftype) of a file whose
// matrices are all of one type.
var fileTypes = map[GGMLType]uint32{GGMLF32: 0, GGMLF16: 1, GGMLQ4_0: 2, GGMLQ4_1: 3, GGMLQ8_0: 7, GGMLQ5_0: 8, GGMLQ5_1: 9, GGMLQ4_K: 14}

// WriteLlama writes a LLaMA model (architecture "llama": c and weights
// under frontend/llama's canonical names, f32 bytes) as a GGUF file that
// both tapml and llama.cpp load: matrices stored as typ (F32, F16, or a
// block format tensor/quant encodes, bit for bit as ggml's
// quantize_row_*_ref: every matrix whose rows are whole blocks, the
// embedding and the classifier included, as llama-quantize --pure does;
// the others and the norm weights stay F32, as llama.cpp's converter
// keeps norms), and a synthetic
// SentencePiece vocabulary of c.Vocab pieces (<unk>, <s>, </s>, the 256
// byte tokens, then made-up words), since llama.cpp needs one. GGUF LLaMA
// files rotate interleaved pairs, so c.RopeStyle must be "interleaved".
func WriteLlama(path string, c llama.Config, weights map[string]ir.WeightSource, typ GGMLType) error {
	if err := c.Validate(); err != nil {
		return err
	}
	if c.RopeStyle != "interleaved" {
		return fmt.Errorf("gguf writer: rope style %q: a GGUF llama file rotates interleaved pairs", c.RopeStyle)
	}
	dt := irTypes[typ]
	if _, ok := fileTypes[typ]; !ok || dt.IsBlock() && !slices.Contains(quant.Encodes, dt) {
		return fmt.Errorf("gguf writer: matrices of type %s cannot be written (F32, F16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K)", typ)
	}
	if c.Vocab < 3+256 {
		return fmt.Errorf("gguf writer: vocabulary of %d is smaller than the %d special and byte tokens", c.Vocab, 3+256)
	}
	var w Writer
	w.String("general.architecture", "llama")
	w.String("general.name", "tapml synthetic")
	w.Uint32("general.file_type", fileTypes[typ])
	w.Uint32("llama.context_length", uint32(c.MaxSeq))
	w.Uint32("llama.embedding_length", uint32(c.Dim))
	w.Uint32("llama.block_count", uint32(c.Layers))
	w.Uint32("llama.feed_forward_length", uint32(c.HiddenDim))
	w.Uint32("llama.rope.dimension_count", uint32(c.HeadDim()))
	w.Uint32("llama.attention.head_count", uint32(c.Heads))
	w.Uint32("llama.attention.head_count_kv", uint32(c.KVHeads))
	w.Float32("llama.attention.layer_norm_rms_epsilon", float32(c.NormEps))
	w.Float32("llama.rope.freq_base", float32(c.RopeTheta))
	tokens, scores, types := syntheticVocab(c.Vocab)
	w.String("tokenizer.ggml.model", "llama")
	w.Strings("tokenizer.ggml.tokens", tokens)
	w.Float32s("tokenizer.ggml.scores", scores)
	w.Int32s("tokenizer.ggml.token_type", types)
	w.Uint32("tokenizer.ggml.unknown_token_id", 0)
	w.Uint32("tokenizer.ggml.bos_token_id", 1)
	w.Uint32("tokenizer.ggml.eos_token_id", 2)
	for _, ns := range c.WeightShapes() {
		src, ok := weights[ns.Name]
		if !ok {
			return fmt.Errorf("gguf writer: no weight %s", ns.Name)
		}
		b, err := src.Bytes()
		if err != nil {
			return fmt.Errorf("gguf writer: weight %s: %w", ns.Name, err)
		}
		t := GGMLF32
		switch {
		case len(ns.Shape) == 1:
		case typ == GGMLF16:
			t, b = GGMLF16, f32ToF16(b)
		case dt.IsBlock() && ir.T(dt, ir.S(int64(ns.Shape[0]), int64(ns.Shape[1]))).Validate() == nil:
			f, err := tensor.FromBytes(ir.F32, ns.Shape, b)
			if err != nil {
				return fmt.Errorf("gguf writer: weight %s: %w", ns.Name, err)
			}
			if b, err = quant.Quantize(dt, f.Float32s()); err != nil {
				return fmt.Errorf("gguf writer: weight %s%v: %w", ns.Name, ns.Shape, err)
			}
			t = typ
		}
		w.Tensor(llamaNames.gguf(ns.Name), t, ns.Shape, b)
	}
	return w.WriteFile(path)
}

// syntheticVocab is a SentencePiece vocabulary of n pieces that llama.cpp
// accepts: <unk> (type 2), <s> and </s> (control, 3), <0x00>..<0xFF> (byte,
// 6), then distinct words "▁w<i>" (normal, 1) scored by rank.
func syntheticVocab(n int) ([]string, []float32, []int32) {
	tokens := []string{"<unk>", "<s>", "</s>"}
	types := []int32{2, 3, 3}
	for b := 0; b < 256; b++ {
		tokens = append(tokens, fmt.Sprintf("<0x%02X>", b))
		types = append(types, 6)
	}
	for i := len(tokens); i < n; i++ {
		tokens = append(tokens, fmt.Sprintf("▁w%d", i))
		types = append(types, 1)
	}
	scores := make([]float32, n)
	for i := range scores {
		scores[i] = -float32(i)
	}
	return tokens, scores, types
}

// f32ToF16 narrows little-endian f32 values to f16, rounding to nearest even.
func f32ToF16(b []byte) []byte {
	out := make([]byte, len(b)/2)
	for i := 0; i < len(b)/4; i++ {
		v := math.Float32frombits(le.Uint32(b[4*i:]))
		le.PutUint16(out[2*i:], float16.Fromfloat32(v).Bits())
	}
	return out
}
