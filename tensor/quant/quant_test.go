package quant

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/tapml/tapml/ir"
	"github.com/x448/float16"
)

// (Decoding and encoding are checked bit for bit against ggml's own
// library in frontend/gguf's tests, which hold the harness that drives it.)

// TestF16Exhaustive checks F16ToF32 on all 65536 halves against
// x448/float16, and BF16ToF32 on a few known values.
func TestF16Exhaustive(t *testing.T) {
	for h := 0; h < 1<<16; h++ {
		got := F16ToF32(uint16(h))
		want := float16.Frombits(uint16(h)).Float32()
		if math.IsNaN(float64(want)) {
			if !math.IsNaN(float64(got)) {
				t.Fatalf("F16ToF32(%#04x) = %v, want NaN", h, got)
			}
			continue
		}
		if math.Float32bits(got) != math.Float32bits(want) {
			t.Fatalf("F16ToF32(%#04x) = %v (%#08x), want %v (%#08x)", h, got, math.Float32bits(got), want, math.Float32bits(want))
		}
	}
	for h, want := range map[uint16]float32{0x3f80: 1, 0xc000: -2, 0x0000: 0, 0x4049: 3.140625, 0x7f80: float32(math.Inf(1))} {
		if got := BF16ToF32(h); got != want {
			t.Errorf("BF16ToF32(%#04x) = %v, want %v", h, got, want)
		}
	}
}

func randomBytes(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, 8))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// TestDequantizeParallel: a tensor large enough to be split across
// goroutines (into uneven parts) decodes to the same bits as one pass.
func TestDequantizeParallel(t *testing.T) {
	for _, dt := range []ir.DType{ir.Q4_0, ir.Q6_K, ir.F16} {
		elems, bytes := dt.Block()
		blocks := (3<<18+5*256)/elems + 1
		raw := randomBytes(7, blocks*bytes)
		serial := make([]float32, blocks*elems)
		decodeBlocks(decoders[dt], elems, bytes, raw, serial, 0, blocks)
		par := make([]float32, len(serial))
		if err := Dequantize(dt, raw, par); err != nil {
			t.Fatal(err)
		}
		for i := range par {
			if math.Float32bits(par[i]) != math.Float32bits(serial[i]) && !(par[i] != par[i] && serial[i] != serial[i]) {
				t.Fatalf("%s: element %d: parallel %v, serial %v", dt, i, par[i], serial[i])
			}
		}
	}
}

// TestQuantizeRoundTrip: every encoder's blocks decode to within one
// quantization step of the values (a step is the block's range over the
// format's 2^bits - 1 levels; Q4_K's 6-bit sub-scales: 4 steps).
func TestQuantizeRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	x := make([]float32, 1024)
	for i := range x {
		x[i] = float32(r.NormFloat64() * []float64{0.02, 1, 30}[i/256%3])
	}
	bits := map[ir.DType]int{ir.Q4_0: 4, ir.Q4_1: 4, ir.Q5_0: 5, ir.Q5_1: 5, ir.Q8_0: 8, ir.Q4_K: 4}
	if len(bits) != len(Encodes) {
		t.Fatalf("encoders %v, the test knows %v", Encodes, bits)
	}
	for _, dt := range Encodes {
		raw, err := Quantize(dt, x)
		if err != nil {
			t.Fatal(err)
		}
		got := make([]float32, len(x))
		if err := Dequantize(dt, raw, got); err != nil {
			t.Fatal(err)
		}
		elems, _ := dt.Block()
		steps := 1.0
		if elems == 256 {
			steps = 4
		}
		for b := 0; b < len(x)/elems; b++ {
			blk := x[b*elems : (b+1)*elems]
			rng := 2 * math.Max(-float64(slices.Min(blk)), float64(slices.Max(blk)))
			tol := steps*rng/float64(int(1)<<bits[dt]-1) + 1e-6
			for i, v := range blk {
				if d := math.Abs(float64(got[b*elems+i] - v)); d > tol {
					t.Fatalf("%s: element %d: %g decodes to %g (off by %g > %g)", dt, b*elems+i, v, got[b*elems+i], d, tol)
				}
			}
		}
	}
}

func TestErrors(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"quantize a format without encoder", func() error { _, err := Quantize(ir.Q6_K, make([]float32, 256)); return err }(),
			"quant: cannot encode q6_k (encodes q4_0, q4_1, q5_0, q5_1, q8_0, q4_k)"},
		{"quantize part of a block", func() error { _, err := Quantize(ir.Q4_0, make([]float32, 40)); return err }(),
			"quant: 40 values are not whole blocks of 32 for q4_0"},
		{"decode an element dtype", Dequantize(ir.I32, make([]byte, 4), make([]float32, 1)), "quant: cannot decode i32"},
		{"decode short data", Dequantize(ir.Q8_0, make([]byte, 33), make([]float32, 32)), "quant: 32 elements of q8_0 need 34 bytes, got 33"},
		{"decode part of a block", Dequantize(ir.Q4_K, make([]byte, 144), make([]float32, 100)), "quant: 100 elements are not whole blocks of 256 for q4_k"},
	}
	for _, tc := range tests {
		if tc.err == nil || !strings.Contains(tc.err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %q", tc.name, tc.err, tc.want)
		}
	}
}

// BenchmarkDequantize measures decoding a 4096×4096 matrix of each format
// (what the CPU reference pays once per stored weight).
func BenchmarkDequantize(b *testing.B) {
	const n = 4096 * 4096
	for _, dt := range ir.StorageDTypes {
		elems, bytes := dt.Block()
		raw := randomBytes(1, n/elems*bytes)
		out := make([]float32, n)
		b.Run(dt.String(), func(b *testing.B) {
			b.SetBytes(4 * n)
			for b.Loop() {
				if err := Dequantize(dt, raw, out); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
