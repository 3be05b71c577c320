// Package quant decodes and encodes ggml's block formats (ir.Q4_0 ...
// ir.Q6_K) and the 16-bit floats weights are stored in: the CPU
// reference's meaning of a weight that keeps its storage dtype. Decoding
// repeats ggml's dequantize_row_* arithmetic in the same order, so the f32
// values are bit for bit the ones those routines compute; encoding repeats
// ggml's quantize_row_*_ref, so its blocks are bit for bit ggml's
// (frontend/gguf's tests compare both against ggml's own library).
//
// GPU and native kernels decode the same formats in their own code
// (codegen); this package is the oracle they are judged against.
package quant

import (
	"encoding/binary"
	"fmt"
	"math"
	goruntime "runtime"
	"sync"

	"github.com/tapml/tapml/ir"
)

// decoders decode one block (len(block) is the format's bytes per block,
// len(out) its elements per block; ir.DType.Block gives both).
var decoders = map[ir.DType]func(block []byte, out []float32){
	ir.Q4_0: decodeQ4_0, ir.Q4_1: decodeQ4_1, ir.Q5_0: decodeQ5_0, ir.Q5_1: decodeQ5_1, ir.Q8_0: decodeQ8_0,
	ir.Q2_K: decodeQ2K, ir.Q3_K: decodeQ3K, ir.Q4_K: decodeQ4K, ir.Q5_K: decodeQ5K, ir.Q6_K: decodeQ6K,
	ir.F16:  func(b []byte, out []float32) { out[0] = F16ToF32(binary.LittleEndian.Uint16(b)) },
	ir.BF16: func(b []byte, out []float32) { out[0] = BF16ToF32(binary.LittleEndian.Uint16(b)) },
}

// Decodes reports whether Dequantize decodes dt: f16, bf16 and every
// block format.
func Decodes(dt ir.DType) bool { return decoders[dt] != nil }

// Dequantize decodes raw, the bytes of len(out) elements of dtype dt, into
// out. Large tensors are split across GOMAXPROCS goroutines: decoding runs
// well under memory speed on one core, and a 7B model has billions of
// elements.
func Dequantize(dt ir.DType, raw []byte, out []float32) error {
	dec := decoders[dt]
	if dec == nil {
		return fmt.Errorf("quant: cannot decode %s", dt)
	}
	elems, bytes := dt.Block()
	want := dt.Bytes(int64(len(out)))
	if want < 0 {
		return fmt.Errorf("quant: %d elements are not whole blocks of %d for %s", len(out), elems, dt)
	}
	if want != int64(len(raw)) {
		return fmt.Errorf("quant: %d elements of %s need %d bytes, got %d", len(out), dt, want, len(raw))
	}
	blocks := len(out) / elems
	const minElems = 128 << 10 // per goroutine
	workers := min(goruntime.GOMAXPROCS(0), len(out)/minElems)
	if workers <= 1 {
		decodeBlocks(dec, elems, bytes, raw, out, 0, blocks)
		return nil
	}
	var wg sync.WaitGroup
	for w := range workers {
		b0, b1 := blocks*w/workers, blocks*(w+1)/workers
		wg.Go(func() { decodeBlocks(dec, elems, bytes, raw, out, b0, b1) })
	}
	wg.Wait()
	return nil
}

// decodeBlocks decodes blocks [b0, b1) of raw into their place in out.
func decodeBlocks(dec func([]byte, []float32), elems, bytes int, raw []byte, out []float32, b0, b1 int) {
	for b := b0; b < b1; b++ {
		dec(raw[b*bytes:(b+1)*bytes], out[b*elems:(b+1)*elems])
	}
}

// F16ToF32 converts an IEEE 754 half-precision value to float32 exactly
// (every half is representable as a float32), subnormals, infinities and
// NaNs included.
func F16ToF32(h uint16) float32 {
	sign := uint32(h>>15) << 31
	exp := uint32(h>>10) & 0x1f
	mant := uint32(h) & 0x3ff
	switch {
	case exp == 0x1f: // inf or NaN; keep the payload
		return math.Float32frombits(sign | 0xff<<23 | mant<<13)
	case exp != 0: // normal: rebias 15 -> 127
		return math.Float32frombits(sign | (exp+127-15)<<23 | mant<<13)
	case mant == 0:
		return math.Float32frombits(sign)
	}
	// Subnormal half: mant · 2^-24; normalise it for float32.
	e := uint32(127 - 15 + 1)
	for mant&0x400 == 0 {
		mant <<= 1
		e--
	}
	return math.Float32frombits(sign | e<<23 | (mant&0x3ff)<<13)
}

// BF16ToF32 converts a bfloat16 value to float32 exactly.
func BF16ToF32(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }

// half reads the f16 at b[0:2].
func half(b []byte) float32 { return F16ToF32(binary.LittleEndian.Uint16(b)) }

// The explicit float32(...) conversions below round each product before
// the next operation, as ggml's C does, so no compiler fuses them into an
// FMA with a different rounding.

// Q4_0: f16 scale d, then 16 bytes: the low nibbles are elements 0-15 and
// the high nibbles 16-31, each value (q - 8)·d.
func decodeQ4_0(b []byte, out []float32) {
	d, qs := half(b), b[2:18]
	for j, q := range qs {
		out[j] = float32(int(q&0xf)-8) * d
		out[j+16] = float32(int(q>>4)-8) * d
	}
}

// Q4_1: f16 scale d and f16 minimum m, then nibbles as in Q4_0, each
// value q·d + m.
func decodeQ4_1(b []byte, out []float32) {
	d, m, qs := half(b), half(b[2:]), b[4:20]
	for j, q := range qs {
		out[j] = float32(float32(q&0xf)*d) + m
		out[j+16] = float32(float32(q>>4)*d) + m
	}
}

// fifthBits returns the 32 high bits of Q5_0/Q5_1 (bit j is element j's).
func fifthBits(b []byte) uint32 { return binary.LittleEndian.Uint32(b) }

// Q5_0: f16 scale d, 4 bytes of fifth bits, nibbles as in Q4_0; each
// value (q - 16)·d with q five bits wide.
func decodeQ5_0(b []byte, out []float32) {
	d, qh, qs := half(b), fifthBits(b[2:]), b[6:22]
	for j, q := range qs {
		lo := int(q&0xf) | int(qh>>j&1)<<4
		hi := int(q>>4) | int(qh>>(j+16)&1)<<4
		out[j] = float32(lo-16) * d
		out[j+16] = float32(hi-16) * d
	}
}

// Q5_1: f16 scale d and minimum m, fifth bits, nibbles; each value q·d + m.
func decodeQ5_1(b []byte, out []float32) {
	d, m, qh, qs := half(b), half(b[2:]), fifthBits(b[4:]), b[8:24]
	for j, q := range qs {
		lo := q&0xf | byte(qh>>j&1)<<4
		hi := q>>4 | byte(qh>>(j+16)&1)<<4
		out[j] = float32(float32(lo)*d) + m
		out[j+16] = float32(float32(hi)*d) + m
	}
}

// Q8_0: f16 scale d, then 32 signed bytes; each value q·d.
func decodeQ8_0(b []byte, out []float32) {
	d := half(b)
	for j, q := range b[2:34] {
		out[j] = float32(int8(q)) * d
	}
}

// Q2_K: 16 bytes of 4-bit scale and 4-bit minimum (one pair per 16
// elements), 64 bytes of 2-bit values, then f16 d and dmin. Each half of
// 128 elements reads 32 bytes of values four times, two bits further each
// time; each value d·scale·q - dmin·min.
func decodeQ2K(b []byte, out []float32) {
	scales, qs := b[0:16], b[16:80]
	d, dmin := half(b[80:]), half(b[82:])
	for g, sc := range scales { // a scale and a minimum per 16 elements
		dl := d * float32(sc&0xf)
		ml := dmin * float32(sc>>4)
		for i := 16 * g; i < 16*g+16; i++ {
			part, rest := i/128, i%128
			shift, group := 2*(rest/32), rest%32 // group: byte within the 32 of this half
			q := qs[32*part+group] >> shift & 3
			out[i] = float32(dl*float32(q)) - ml
		}
	}
}

// q3Scale returns Q3_K's signed 6-bit scale j of 16: the low 4 bits are
// nibbles of bytes 0-7, the high 2 bits come from bytes 8-11.
func q3Scale(s []byte, j int) int {
	lo := s[j%8] >> (4 * (j / 8)) & 0xf
	hi := s[8+j%4] >> (2 * (j / 4)) & 3
	return int(lo|hi<<4) - 32
}

// Q3_K: 32 bytes of high bits, 64 bytes of 2-bit values, 12 bytes of
// 6-bit scales (one per 16 elements), then f16 d. A value is its two low
// bits minus 4 when its high bit is clear; each value d·scale·q.
func decodeQ3K(b []byte, out []float32) {
	hmask, qs, scales := b[0:32], b[32:96], b[96:108]
	d := half(b[108:])
	for g := 0; g < 16; g++ { // a scale per 16 elements
		dl := d * float32(q3Scale(scales, g))
		for i := 16 * g; i < 16*g+16; i++ {
			part, rest := i/128, i%128
			step, group := rest/32, rest%32
			q := int(qs[32*part+group] >> (2 * step) & 3)
			if hmask[group]>>(4*part+step)&1 == 0 {
				q -= 4
			}
			out[i] = dl * float32(q)
		}
	}
}

// scaleMinK4 returns the 6-bit scale and minimum j of 8 of Q4_K and Q5_K:
// j < 4 are the low 6 bits of bytes j and j+4; the others take their low
// 4 bits from the nibbles of byte j+4 and their top 2 bits from the top
// bits of bytes j-4 and j.
func scaleMinK4(s []byte, j int) (sc, m byte) {
	if j < 4 {
		return s[j] & 63, s[j+4] & 63
	}
	return s[j+4]&0xf | s[j-4]>>6<<4, s[j+4]>>4 | s[j]>>6<<4
}

// Q4_K: f16 d and dmin, 12 bytes of scales and minimums (one pair per 32
// elements), 128 bytes of nibbles: each 64 elements read 32 bytes, low
// nibbles first. Each value d·scale·q - dmin·min.
func decodeQ4K(b []byte, out []float32) {
	d, dmin := half(b), half(b[2:])
	scales, qs := b[4:16], b[16:144]
	for sub := 0; sub < 8; sub++ { // a scale and a minimum per 32 elements
		sc, m := scaleMinK4(scales, sub)
		d1, m1 := d*float32(sc), dmin*float32(m)
		row, shift := qs[32*(sub/2):32*(sub/2)+32], 4*(sub%2)
		for l, q := range row {
			out[32*sub+l] = float32(d1*float32(q>>shift&0xf)) - m1
		}
	}
}

// Q5_K: Q4_K plus 32 bytes of fifth bits before the nibbles: element i's
// is bit i/32 of byte i%32.
func decodeQ5K(b []byte, out []float32) {
	d, dmin := half(b), half(b[2:])
	scales, qh, qs := b[4:16], b[16:48], b[48:176]
	for sub := 0; sub < 8; sub++ { // a scale and a minimum per 32 elements
		sc, m := scaleMinK4(scales, sub)
		d1, m1 := d*float32(sc), dmin*float32(m)
		row, shift := qs[32*(sub/2):32*(sub/2)+32], 4*(sub%2)
		for l, q := range row {
			v := q>>shift&0xf | (qh[l]>>sub&1)<<4
			out[32*sub+l] = float32(d1*float32(v)) - m1
		}
	}
}

// Q6_K: 128 bytes of low nibbles, 64 bytes of 2-bit high parts, 16 signed
// 8-bit scales (one per 16 elements), then f16 d. Each half of 128
// elements reads 64 low-nibble bytes (quarters 0 and 2 low nibbles, 1 and
// 3 high) and 32 high-part bytes (quarter k at bits 2k); each value
// d·scale·(q - 32).
func decodeQ6K(b []byte, out []float32) {
	ql, qh, scales := b[0:128], b[128:192], b[192:208]
	d := half(b[208:])
	for g, sc := range scales { // a scale per 16 elements
		dl := d * float32(int8(sc))
		for i := 16 * g; i < 16*g+16; i++ {
			part, rest := i/128, i%128
			quarter, l := rest/32, rest%32
			lo := ql[64*part+32*(quarter%2)+l] >> (4 * (quarter / 2)) & 0xf
			hi := qh[32*part+l] >> (2 * quarter) & 3
			q := int(lo|hi<<4) - 32
			out[i] = dl * float32(q)
		}
	}
}
