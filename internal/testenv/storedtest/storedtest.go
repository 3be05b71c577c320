// Package storedtest makes the weights in storage dtypes (f16, bf16, the
// block formats) that the kernel tests of every target feed to the ops
// that read them.
package storedtest

import (
	"encoding/binary"
	"math/rand/v2"

	"github.com/tapml/tapml/ir"
	"github.com/tapml/tapml/tensor"
	"github.com/tapml/tapml/tensor/quant"
	"github.com/x448/float16"
)

// scaleOffsets are the byte offsets of the f16 scales in a block of the
// formats tensor/quant has no encoder for.
var scaleOffsets = map[ir.DType][]int{ir.Q2_K: {80, 82}, ir.Q3_K: {108}, ir.Q5_K: {0, 2}, ir.Q6_K: {208}}

// Tensor returns a tensor of dtype dt and shape (whole blocks for a block
// format) of values like a weight's, in ±1: random values rounded to f16
// or bf16, or quantized by ggml's encoders where tensor/quant has one;
// the other block formats get random bytes (every pattern is a block)
// with finite scales, so every element of every block is decoded from
// real bits.
func Tensor(r *rand.Rand, dt ir.DType, shape ...int) *tensor.Tensor {
	x := tensor.New(ir.F32, shape)
	for i := range x.Float32s() {
		x.Float32s()[i] = float32(2*r.Float64() - 1)
	}
	if !dt.IsBlock() {
		return x.Convert(dt)
	}
	if raw, err := quant.Quantize(dt, x.Float32s()); err == nil {
		t, err := tensor.FromBytes(dt, shape, raw)
		if err != nil {
			panic(err)
		}
		return t
	}
	t := tensor.New(dt, shape)
	for i := range t.Data {
		t.Data[i] = byte(r.Uint32())
	}
	_, bytes := dt.Block()
	for b := 0; b < len(t.Data); b += bytes {
		for _, off := range scaleOffsets[dt] {
			s := float16.Fromfloat32(float32(0.001 + 0.01*r.Float64()))
			binary.LittleEndian.PutUint16(t.Data[b+off:], s.Bits())
		}
	}
	return t
}
