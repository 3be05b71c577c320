package gguf

import (
	"encoding/binary"
	"math"
	goruntime "runtime"
	"sync"
)

// ggml's block-quantized tensor types. A tensor of such a type is a row of
// blocks, each holding a fixed number of elements (32, or 256 for the
// "K" super-blocks) as small integers plus one or a few f16 scales. tapml
// widens them to f32 when a weight is first used; the arithmetic of each
// decoder follows ggml's dequantize_row_* in the same order, so the f32
// weights are bit for bit the ones those reference routines compute (the
// tests compare against ggml's own library).

// quantFormat is the block layout of a quantized type and its decoder.
type quantFormat struct {
	elems, bytes int
	decode       func(block []byte, out []float32) // len(block) == bytes, len(out) == elems
}

// quantTypes are the quantized types tapml decodes, in ggml's order.
var quantTypes = []GGMLType{GGMLQ4_0, GGMLQ4_1, GGMLQ5_0, GGMLQ5_1, GGMLQ8_0, GGMLQ2_K, GGMLQ3_K, GGMLQ4_K, GGMLQ5_K, GGMLQ6_K}

// superBlock is the element count of a K-quant super-block (ggml's QK_K).
const superBlock = 256

var quantFormats = map[GGMLType]quantFormat{
	GGMLQ4_0: {32, 18, decodeQ4_0},
	GGMLQ4_1: {32, 20, decodeQ4_1},
	GGMLQ5_0: {32, 22, decodeQ5_0},
	GGMLQ5_1: {32, 24, decodeQ5_1},
	GGMLQ8_0: {32, 34, decodeQ8_0},
	GGMLQ2_K: {superBlock, 84, decodeQ2K},
	GGMLQ3_K: {superBlock, 110, decodeQ3K},
	GGMLQ4_K: {superBlock, 144, decodeQ4K},
	GGMLQ5_K: {superBlock, 176, decodeQ5K},
	GGMLQ6_K: {superBlock, 210, decodeQ6K},
}

// dequantize decodes the blocks of raw (a whole number of them) into
// little-endian f32 bytes. Large tensors are split across GOMAXPROCS
// goroutines: decoding runs at well under memory speed on one core (see
// BenchmarkDequantize), and a 7B model has billions of elements.
func dequantize(q quantFormat, raw []byte) []byte {
	blocks := len(raw) / q.bytes
	out := make([]byte, 4*blocks*q.elems)
	const minBlocks = 4096 // per goroutine: 128K elements (32-blocks) to 1M (K-quants)
	workers := min(goruntime.GOMAXPROCS(0), blocks/minBlocks)
	if workers <= 1 {
		decodeBlocks(q, raw, out, 0, blocks)
		return out
	}
	var wg sync.WaitGroup
	for w := range workers {
		b0, b1 := blocks*w/workers, blocks*(w+1)/workers
		wg.Go(func() { decodeBlocks(q, raw, out, b0, b1) })
	}
	wg.Wait()
	return out
}

// decodeBlocks decodes blocks [b0, b1) of raw into their place in out.
func decodeBlocks(q quantFormat, raw, out []byte, b0, b1 int) {
	vals := make([]float32, q.elems)
	for b := b0; b < b1; b++ {
		q.decode(raw[b*q.bytes:(b+1)*q.bytes], vals)
		dst := out[4*b*q.elems:]
		for i, v := range vals {
			binary.LittleEndian.PutUint32(dst[4*i:], math.Float32bits(v))
		}
	}
}

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
