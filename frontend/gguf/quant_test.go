package gguf

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/tapml/tapml/ir"
	"github.com/tapml/tapml/tensor/quant"
)

// ggmlRun runs the harness: mode quant or dequant, of type typ, on in.
func ggmlRun(t testing.TB, mode string, typ GGMLType, in []byte) []byte {
	t.Helper()
	cmd := exec.Command(harness(t, "ggmlquant"), mode, typ.String())
	cmd.Stdin = bytes.NewReader(in)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("ggmlquant %s %s: %v\n%s", mode, typ, err, stderr.String())
	}
	return out
}

// ggmlQuantize quantizes vals with ggml's quantize_row_*_ref.
func ggmlQuantize(t testing.TB, typ GGMLType, vals []float32) []byte {
	return ggmlRun(t, "quant", typ, encode(GGMLF32, vals))
}

// ggmlQuantizer is ggmlQuantize as a llamaFile.quantize encoder.
func ggmlQuantizer(t testing.TB) func(GGMLType, []float32) []byte {
	return func(typ GGMLType, vals []float32) []byte { return ggmlQuantize(t, typ, vals) }
}

// ggmlDequantize decodes blocks with ggml's dequantize_row_*.
func ggmlDequantize(t testing.TB, typ GGMLType, blocks []byte) []float32 {
	raw := ggmlRun(t, "dequant", typ, blocks)
	out := make([]float32, len(raw)/4)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
	}
	return out
}

// testValues returns n values with the shapes real weights take and a few
// they rarely do: gaussian rows of different scales, an all-zero block, a
// constant block, one large outlier, only-positive and only-negative runs.
func testValues(n int, seed uint64) []float32 {
	r := rand.New(rand.NewPCG(seed, 5))
	vals := make([]float32, n)
	for i := range vals {
		scale := []float64{0.02, 1, 30}[(i/256)%3]
		vals[i] = float32(r.NormFloat64() * scale)
	}
	for i := 0; i < 32 && i < n; i++ {
		vals[i] = 0
	}
	for i := 32; i < 64 && i < n; i++ {
		vals[i] = 0.75
	}
	if n > 300 {
		vals[300] = 1000
	}
	for i := 512; i < 768 && i < n; i++ {
		vals[i] = float32(math.Abs(float64(vals[i])))
	}
	for i := 768; i < 1024 && i < n; i++ {
		vals[i] = -float32(math.Abs(float64(vals[i])))
	}
	return vals
}

// sameBits reports whether a and b are the same float32 (any NaN equals
// any NaN: their payloads depend on operand order, not on the format).
func sameBits(a, b float32) bool {
	if a != a && b != b {
		return true
	}
	return math.Float32bits(a) == math.Float32bits(b)
}

// TestDequantizeMatchesGGML decodes blocks that ggml quantized, and blocks
// of random bytes, with tensor/quant (the CPU reference's decoder) and
// requires ggml's dequantized values bit for bit: the decoders repeat
// ggml's arithmetic in the same order, so any difference is a layout or
// formula mistake, not rounding.
func TestDequantizeMatchesGGML(t *testing.T) {
	const n = 4 * 1024 // 16 super-blocks, 128 small blocks
	for _, typ := range quantTypes {
		t.Run(typ.String(), func(t *testing.T) {
			dt := irTypes[typ]
			elems, bytes := dt.Block()
			vals := testValues(n, uint64(typ))
			quantized := ggmlQuantize(t, typ, vals)
			if want := n / elems * bytes; len(quantized) != want {
				t.Fatalf("ggml wrote %d bytes for %d values, want %d (block layout %d elements in %d bytes)", len(quantized), n, want, elems, bytes)
			}
			r := rand.New(rand.NewPCG(uint64(typ), 11))
			random := make([]byte, 64*bytes)
			for i := range random {
				random[i] = byte(r.Uint32())
			}
			for what, blocks := range map[string][]byte{"ggml-quantized": quantized, "random-bytes": random} {
				want := ggmlDequantize(t, typ, blocks)
				got := dequantize(t, dt, blocks)
				if len(got) != len(want) {
					t.Fatalf("%s: %d values, ggml %d", what, len(got), len(want))
				}
				bad := 0
				for i, w := range want {
					if g := got[i]; !sameBits(g, w) {
						if bad++; bad <= 5 {
							t.Errorf("%s: element %d (block %d, index %d): got %g (%#08x), ggml %g (%#08x)",
								what, i, i/elems, i%elems, g, math.Float32bits(g), w, math.Float32bits(w))
						}
					}
				}
				if bad > 5 {
					t.Errorf("%s: %d of %d elements differ", what, bad, len(want))
				}
			}
			// The quantized values must approximate the originals, or the
			// comparison above could pass on two equal wrong answers.
			// Bound: one quantization step per element, where a step is the
			// block's range over the format's levels (2^bits - 1): half a
			// step of rounding, plus the f16 rounding of the scale and the
			// clamping of the symmetric formats' extreme level. The K-types
			// also round their sub-scales to 6 bits, so allow 4 steps
			// (Q2_K's 2-bit values: 8).
			got := dequantize(t, dt, quantized)
			bits := map[GGMLType]int{GGMLQ4_0: 4, GGMLQ4_1: 4, GGMLQ5_0: 5, GGMLQ5_1: 5, GGMLQ8_0: 8,
				GGMLQ2_K: 2, GGMLQ3_K: 3, GGMLQ4_K: 4, GGMLQ5_K: 5, GGMLQ6_K: 6}[typ]
			steps := 1.0
			if elems == 256 {
				steps = 4
				if typ == GGMLQ2_K {
					steps = 8
				}
			}
			for b := 0; b < n/elems; b++ {
				block := vals[b*elems : (b+1)*elems]
				// The symmetric formats span ±max|x| even when a block is
				// one-sided, so the range is taken as 2·max|x|.
				rng := 2 * math.Max(-float64(slices.Min(block)), float64(slices.Max(block)))
				tol := steps*rng/float64(int(1)<<bits-1) + 1e-6
				for i, v := range block {
					if d := math.Abs(float64(got[b*elems+i]) - float64(v)); d > tol {
						t.Fatalf("block %d element %d: %g decodes to %g, off by %g > %g", b, i, v, got[b*elems+i], d, tol)
					}
				}
			}
		})
	}
}

// dequantize decodes blocks of dt with tensor/quant.
func dequantize(t testing.TB, dt ir.DType, blocks []byte) []float32 {
	t.Helper()
	elems, bytes := dt.Block()
	out := make([]float32, len(blocks)/bytes*elems)
	if err := quant.Dequantize(dt, blocks, out); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestQuantizeMatchesGGML: tensor/quant's encoders (tapmlc --quantize)
// write ggml's quantize_row_*_ref blocks byte for byte, on values with the
// shapes real weights take and the corner cases testValues adds (zero and
// constant blocks, an outlier, one-signed runs), and on every float
// pattern of small integers, where ties in rounding are common.
func TestQuantizeMatchesGGML(t *testing.T) {
	const n = 4 * 1024
	ties := make([]float32, n)
	for i := range ties {
		ties[i] = float32(i%17-8) * 0.5
	}
	for _, dt := range quant.Encodes {
		var typ GGMLType
		for g, d := range irTypes {
			if d == dt {
				typ = g
			}
		}
		t.Run(dt.String(), func(t *testing.T) {
			for what, vals := range map[string][]float32{"weights": testValues(n, uint64(typ)+100), "ties": ties} {
				want := ggmlQuantize(t, typ, vals)
				got, err := quant.Quantize(dt, vals)
				if err != nil {
					t.Fatal(err)
				}
				if len(got) != len(want) {
					t.Fatalf("%s: %d bytes, ggml %d", what, len(got), len(want))
				}
				_, bytes := dt.Block()
				for i := range want {
					if got[i] != want[i] {
						b := i / bytes
						t.Fatalf("%s: block %d byte %d is %#02x, ggml %#02x\ngot  % x\nggml % x", what, b, i%bytes, got[i], want[i],
							got[b*bytes:(b+1)*bytes], want[b*bytes:(b+1)*bytes])
					}
				}
			}
		})
	}
}

// TestQuantizedHeaderChecks: a quantized tensor's innermost dim must be
// whole blocks, and its data must fit the file.
func TestQuantizedHeaderChecks(t *testing.T) {
	w := small()
	w.tensors = append(w.tensors, wtensor{"q", []uint64{100, 2}, GGMLQ4_K, make([]byte, 2*144)})
	if _, err := Parse("q.gguf", w.bytes()); err == nil || !strings.Contains(err.Error(), `tensor "q" of type Q4_K: innermost dim 100 is not a multiple of the block size 256`) {
		t.Errorf("dims not whole blocks: error %v", err)
	}
	w = small()
	w.tensors = append(w.tensors, wtensor{"q", []uint64{64, 2}, GGMLQ8_0, make([]byte, 3*34)}) // 4 blocks needed
	if _, err := Parse("q.gguf", w.bytes()); err == nil || !strings.Contains(err.Error(), "lies outside the data section") {
		t.Errorf("short data: error %v", err)
	}
}

// TestLogitsQuantized loads synthetic models whose matrices ggml quantized
// and compares the IR's logits with the float64 reference forward pass
// reading the same tensors through ggml's own dequantizer.
func TestLogitsQuantized(t *testing.T) {
	c := quantConfig
	for _, tc := range []struct {
		name   string
		typeOf func(name string) GGMLType
	}{
		{"Q8_0", matrices(func(string) GGMLType { return GGMLQ8_0 })},
		// llama.cpp's Q4_K_M recipe: Q6_K for attn_v, ffn_down and the
		// classifier, Q4_K elsewhere.
		{"Q4_K_M", matrices(func(n string) GGMLType {
			if strings.HasSuffix(n, "attn_v.weight") || strings.HasSuffix(n, "ffn_down.weight") || n == "output.weight" {
				return GGMLQ6_K
			}
			return GGMLQ4_K
		})},
		{"legacy-mix", matrices(func(n string) GGMLType {
			return []GGMLType{GGMLQ4_0, GGMLQ4_1, GGMLQ5_0, GGMLQ5_1, GGMLQ8_0}[len(n)%5]
		})},
		{"low-bit-K", matrices(func(n string) GGMLType {
			return []GGMLType{GGMLQ2_K, GGMLQ3_K, GGMLQ5_K}[len(n)%3]
		})},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lf := llamaFile{c: c, ctx: 64, typeOf: tc.typeOf, seed: 3,
				quantize: ggmlQuantizer(t)}
			p := writeTemp(t, tc.name+".gguf", lf.writer().bytes())
			checkLogits(t, p, []int{1, 17, 250, 3, 99}, []int{5, 150, 1})
		})
	}
}

// ggmlWrite writes w's metadata and tensors with ggml's own GGUF writer
// (scalar u32, f32 and string metadata only).
func ggmlWrite(t *testing.T, w *ggufWriter, path string) {
	t.Helper()
	var desc bytes.Buffer
	for _, kv := range w.kvs {
		switch kv.typ {
		case TypeUint32:
			fmt.Fprintf(&desc, "u32 %s %d\n", kv.key, kv.val)
		case TypeFloat32:
			fmt.Fprintf(&desc, "f32 %s %.9g\n", kv.key, kv.val)
		case TypeString:
			fmt.Fprintf(&desc, "str %s %s\n", kv.key, kv.val)
		default:
			t.Fatalf("ggmlWrite: metadata %s of type %s", kv.key, kv.typ)
		}
	}
	for _, ts := range w.tensors {
		ne := []uint64{ts.dims[0], 1}
		if len(ts.dims) > 1 {
			ne[1] = ts.dims[1]
		}
		fmt.Fprintf(&desc, "tensor %s %d %d %d %d %d\n", ts.name, uint32(ts.typ), len(ts.dims), ne[0], ne[1], len(ts.data))
		desc.Write(ts.data)
	}
	cmd := exec.Command(harness(t, "ggmlquant"), "gguf", path)
	cmd.Stdin = &desc
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("ggmlquant gguf: %v\n%s", err, out)
	}
}

// TestLoadGGMLWritten loads a Q4_K_M model that ggml's own GGUF writer
// wrote (its alignment, padding and tensor order, not our test writer's).
func TestLoadGGMLWritten(t *testing.T) {
	c := quantConfig
	lf := llamaFile{c: c, ctx: 64, typeOf: matrices(func(n string) GGMLType {
		if strings.HasSuffix(n, "attn_v.weight") || strings.HasSuffix(n, "ffn_down.weight") {
			return GGMLQ6_K
		}
		return GGMLQ4_K
	}), seed: 4, quantize: ggmlQuantizer(t)}
	p := filepath.Join(t.TempDir(), "ggml-written.gguf")
	ggmlWrite(t, lf.writer(), p)
	f, err := Open(p)
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]GGMLType{"token_embd.weight": GGMLQ4_K, "blk.1.attn_v.weight": GGMLQ6_K, "blk.0.attn_norm.weight": GGMLF32} {
		if ti, ok := f.Tensor(name); !ok || ti.Type != want {
			t.Errorf("ggml's file: tensor %s is %v (found %v), want %s", name, ti.Type, ok, want)
		}
	}
	f.Close()
	checkLogits(t, p, []int{1, 17, 250}, []int{5, 150})
}

// matrices applies typeOf to the 2-D weights and keeps the norms F32.
func matrices(typeOf func(string) GGMLType) func(string) GGMLType {
	return func(n string) GGMLType {
		if strings.HasSuffix(n, "norm.weight") {
			return GGMLF32
		}
		return typeOf(n)
	}
}
