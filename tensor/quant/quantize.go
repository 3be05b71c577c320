package quant

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/tapml/tapml/ir"
	"github.com/x448/float16"
)

// The encoders repeat ggml's quantize_row_*_ref (ggml-quants.c), the
// routines llama-quantize uses without an importance matrix, operation for
// operation: every float32(...) below rounds where ggml's C rounds, so no
// compiler fuses a product into an FMA with a different rounding, and ties
// go the way ggml's nearest_int and roundf send them.

// encoders encode one block (len(x) is the format's elements per block,
// len(block) its bytes).
var encoders = map[ir.DType]func(x []float32, block []byte){
	ir.Q4_0: encodeQ4_0, ir.Q4_1: encodeQ4_1, ir.Q5_0: encodeQ5_0, ir.Q5_1: encodeQ5_1, ir.Q8_0: encodeQ8_0,
	ir.Q4_K: encodeQ4K,
}

// Encodes lists the block formats Quantize writes, in ggml's order.
var Encodes = func() []ir.DType {
	var ds []ir.DType
	for _, d := range ir.BlockDTypes {
		if encoders[d] != nil {
			ds = append(ds, d)
		}
	}
	return ds
}()

// Quantize encodes x, a whole number of blocks of dt, as ggml's
// quantize_row_*_ref does.
func Quantize(dt ir.DType, x []float32) ([]byte, error) {
	enc := encoders[dt]
	if enc == nil {
		return nil, fmt.Errorf("quant: cannot encode %s (encodes %s)", dt, names(Encodes))
	}
	size := dt.Bytes(int64(len(x)))
	if size < 0 {
		elems, _ := dt.Block()
		return nil, fmt.Errorf("quant: %d values are not whole blocks of %d for %s", len(x), elems, dt)
	}
	elems, bytes := dt.Block()
	out := make([]byte, size)
	for b := 0; b < len(x)/elems; b++ {
		enc(x[b*elems:(b+1)*elems], out[b*bytes:(b+1)*bytes])
	}
	return out, nil
}

func names(ds []ir.DType) string {
	s := ""
	for i, d := range ds {
		if i > 0 {
			s += ", "
		}
		s += d.String()
	}
	return s
}

// putHalf stores f rounded to the nearest f16 (ties to even), as
// GGML_FP32_TO_FP16 does, and returns the stored value as f32.
func putHalf(b []byte, f float32) float32 {
	h := float16.Fromfloat32(f).Bits()
	binary.LittleEndian.PutUint16(b, h)
	return F16ToF32(h)
}

// absMax returns the element of largest magnitude (the first of equal
// ones) and that magnitude.
func absMax(x []float32) (signed, amax float32) {
	for _, v := range x {
		if a := float32(math.Abs(float64(v))); amax < a {
			amax, signed = a, v
		}
	}
	return signed, amax
}

// inverse is ggml's id = d ? 1.0f/d : 0.0f.
func inverse(d float32) float32 {
	if d == 0 {
		return 0
	}
	return 1 / d
}

// packNibbles stores 32 levels as ggml's 16 bytes of nibbles (byte j holds
// level j low and level j+16 high) and returns their fifth bits (bit j is
// level j's bit 4), which the 5-bit formats store apart.
func packNibbles(q *[32]byte, qs []byte) (fifth uint32) {
	for j := 0; j < 16; j++ {
		qs[j] = q[j]&0xf | (q[j+16]&0xf)<<4
		fifth |= uint32(q[j]>>4)<<j | uint32(q[j+16]>>4)<<(j+16)
	}
	return fifth
}

// symmetricLevels are Q4_0's and Q5_0's levels of a block: d = the
// element of largest magnitude / -half (half is 8 or 16), level
// min(2·half - 1, trunc(x/d + half + 0.5)).
func symmetricLevels(x []float32, half float32) (d float32, q [32]byte) {
	m, _ := absMax(x)
	d = m / -half
	id := inverse(d)
	for j, v := range x {
		q[j] = byte(min(int8(2*half-1), int8(float32(v*id)+(half+0.5))))
	}
	return d, q
}

// minLevels are Q4_1's and Q5_1's levels of a block: d = (max - min) /
// top, level trunc((x - min)/d + 0.5), at most top when clamp (ggml clamps
// Q4_1's, not Q5_1's).
func minLevels(x []float32, top float32, clamp bool) (d, lo float32, q [32]byte) {
	lo, hi := float32(math.MaxFloat32), float32(-math.MaxFloat32)
	for _, v := range x {
		lo, hi = min(lo, v), max(hi, v)
	}
	d = (hi - lo) / top
	id := inverse(d)
	for j, v := range x {
		l := float32(float32(v-lo)*id) + 0.5
		if clamp {
			q[j] = byte(min(int8(top), int8(l)))
		} else {
			q[j] = uint8(l)
		}
	}
	return d, lo, q
}

// Q4_0: f16 d, then the nibbles of symmetric levels.
func encodeQ4_0(x []float32, b []byte) {
	d, q := symmetricLevels(x, 8)
	putHalf(b, d)
	packNibbles(&q, b[2:18])
}

// Q4_1: f16 d and min, then the nibbles of levels above min.
func encodeQ4_1(x []float32, b []byte) {
	d, lo, q := minLevels(x, 15, true)
	putHalf(b, d)
	putHalf(b[2:], lo)
	packNibbles(&q, b[4:20])
}

// Q5_0: f16 d, the fifth bits, then the nibbles of symmetric levels.
func encodeQ5_0(x []float32, b []byte) {
	d, q := symmetricLevels(x, 16)
	putHalf(b, d)
	binary.LittleEndian.PutUint32(b[2:], packNibbles(&q, b[6:22]))
}

// Q5_1: f16 d and min, the fifth bits, then the nibbles.
func encodeQ5_1(x []float32, b []byte) {
	d, lo, q := minLevels(x, 31, false)
	putHalf(b, d)
	putHalf(b[2:], lo)
	binary.LittleEndian.PutUint32(b[4:], packNibbles(&q, b[8:24]))
}

// Q8_0: d = max|x|/127; q = round(x/d), halves away from zero (roundf).
func encodeQ8_0(x []float32, b []byte) {
	_, amax := absMax(x)
	d := amax / 127
	id := inverse(d)
	putHalf(b, d)
	for j, v := range x {
		b[2+j] = byte(int8(math.Round(float64(float32(v * id)))))
	}
}

// nearestInt rounds to the nearest integer, ties to even, as ggml's
// nearest_int does (by adding 1.5·2^23), for |f| <= 2^22.
func nearestInt(f float32) int {
	v := f + 12582912
	return int(math.Float32bits(v)&0x7fffff) - 0x400000
}

// fitScaleMin is ggml's make_qkx2_quants: the scale and minimum (returned
// negated, as ggml stores it) of n values at levels 0..nmax that
// minimise the weighted error (absolute when mad, squared otherwise),
// trying nstep+1 scales around nmax/(max - min). L gets the levels.
func fitScaleMin(x, w []float32, L []uint8, nmax int, rmin, rdelta float32, nstep int, mad bool) (scale, negMin float32) {
	lo, hi := x[0], x[0]
	sumW := w[0]
	sumX := float32(sumW * x[0])
	for i := 1; i < len(x); i++ {
		lo, hi = min(lo, x[i]), max(hi, x[i])
		sumW += w[i]
		sumX += float32(w[i] * x[i])
	}
	lo = min(lo, 0)
	if hi == lo {
		clear(L)
		return 0, -lo
	}
	errOf := func(scale, lo float32, L []uint8) float32 {
		e := float32(0)
		for i, v := range x {
			diff := float32(float32(scale*float32(L[i]))+lo) - v
			if mad {
				diff = float32(math.Abs(float64(diff)))
			} else {
				diff = float32(diff * diff)
			}
			e += float32(w[i] * diff)
		}
		return e
	}
	level := func(iscale, v float32) uint8 {
		return uint8(max(0, min(nmax, nearestInt(float32(iscale*(v-lo))))))
	}
	iscale := float32(nmax) / (hi - lo)
	scale = 1 / iscale
	for i, v := range x {
		L[i] = level(iscale, v)
	}
	best := errOf(scale, lo, L)
	aux := make([]uint8, len(x))
	for is := 0; is <= nstep; is++ {
		iscale := float32(float32(rmin+float32(rdelta*float32(is)))+float32(nmax)) / (hi - lo)
		var sumL, sumL2, sumXL float32
		for i, v := range x {
			l := level(iscale, v)
			aux[i] = l
			wl := float32(w[i] * float32(l))
			sumL += wl
			sumL2 += float32(wl * float32(l))
			sumXL += float32(wl * v)
		}
		D := float32(sumW*sumL2) - float32(sumL*sumL)
		if D <= 0 {
			continue
		}
		thisScale := (float32(sumW*sumXL) - float32(sumX*sumL)) / D
		thisMin := (float32(sumL2*sumX) - float32(sumL*sumXL)) / D
		if thisMin > 0 {
			thisMin = 0
			thisScale = sumXL / sumL2
		}
		if e := errOf(thisScale, thisMin, aux); e < best {
			copy(L, aux)
			best, scale, lo = e, thisScale, thisMin
		}
	}
	return scale, -lo
}

// Q4_K: per 32 elements a scale and minimum fitted by fitScaleMin (weights
// av_x + |x|, av_x the sub-block's RMS), quantized to 6 bits against the
// largest of each; then every element requantized to 4 bits against the
// stored (rounded) scales.
func encodeQ4K(x []float32, b []byte) {
	var L [256]uint8
	var scales, mins [8]float32
	var w [32]float32
	var maxScale, maxMin float32
	for j := 0; j < 8; j++ {
		sub := x[32*j : 32*j+32]
		var sumX2 float32
		for _, v := range sub {
			sumX2 += float32(v * v)
		}
		av := float32(math.Sqrt(float64(sumX2 / 32)))
		for l, v := range sub {
			w[l] = av + float32(math.Abs(float64(v)))
		}
		scales[j], mins[j] = fitScaleMin(sub, w[:], L[32*j:32*j+32], 15, -1, 0.1, 20, false)
		maxScale, maxMin = max(maxScale, scales[j]), max(maxMin, mins[j])
	}
	var invScale, invMin float32
	if maxScale > 0 {
		invScale = 63 / maxScale
	}
	if maxMin > 0 {
		invMin = 63 / maxMin
	}
	sc := b[4:16]
	clear(sc)
	for j := 0; j < 8; j++ {
		ls := min(63, uint8(nearestInt(float32(invScale*scales[j]))))
		lm := min(63, uint8(nearestInt(float32(invMin*mins[j]))))
		if j < 4 {
			sc[j], sc[j+4] = ls, lm
		} else {
			sc[j+4] = ls&0xf | (lm&0xf)<<4
			sc[j-4] |= ls >> 4 << 6
			sc[j] |= lm >> 4 << 6
		}
	}
	d := putHalf(b, maxScale/63)
	dmin := putHalf(b[2:], maxMin/63)
	for j := 0; j < 8; j++ {
		s, m := scaleMinK4(sc, j)
		dj := d * float32(s)
		if dj == 0 {
			continue
		}
		dm := dmin * float32(m)
		for i, v := range x[32*j : 32*j+32] {
			L[32*j+i] = uint8(max(0, min(15, nearestInt(float32(v+dm)/dj))))
		}
	}
	qs := b[16:144]
	for j := 0; j < 4; j++ {
		for l := 0; l < 32; l++ {
			qs[32*j+l] = L[64*j+l] | L[64*j+l+32]<<4
		}
	}
}
