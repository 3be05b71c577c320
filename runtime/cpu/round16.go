package cpu

import (
	"encoding/binary"
	"math"

	"github.com/tapml/tapml/ir"
	"github.com/tapml/tapml/tensor"
	"github.com/x448/float16"
)

// round16 rounds an f32 value to the nearest f16 (ties to even; beyond
// f16's range to infinity) and back: what a store to an f16 buffer keeps.
func round16(v float32) float32 { return float16.Fromfloat32(v).Float32() }

// roundTo16 rounds the values of an f32 tensor to f16 in place, writing
// only the values that change (a tensor whose values are f16 already, a
// view of a rounded input, is left untouched).
func roundTo16(t *tensor.Tensor) {
	for i := 0; i+4 <= len(t.Data); i += 4 {
		bits := binary.LittleEndian.Uint32(t.Data[i:])
		if r := math.Float32bits(round16(math.Float32frombits(bits))); r != bits {
			binary.LittleEndian.PutUint32(t.Data[i:], r)
		}
	}
}

// Round16 returns an f32 tensor with its values rounded to f16 (t itself
// when they are f16 values already, or t is not f32; else a rounded copy,
// leaving t as it was): the values an f16 target holds of it.
func Round16(t *tensor.Tensor) *tensor.Tensor {
	if t.DType != ir.F32 || roundedTo16(t) {
		return t
	}
	t = t.Clone()
	roundTo16(t)
	return t
}

// roundedTo16 reports whether every value of an f32 tensor is an f16
// value already.
func roundedTo16(t *tensor.Tensor) bool {
	for i := 0; i+4 <= len(t.Data); i += 4 {
		bits := binary.LittleEndian.Uint32(t.Data[i:])
		if math.Float32bits(round16(math.Float32frombits(bits))) != bits {
			return false
		}
	}
	return true
}
