package vulkan

import (
	"encoding/binary"
	"math"

	"github.com/tapml/tapml/ir"
	"github.com/x448/float16"
)

// Under f16 compute (Options.Compute) a tensor the IR types f32 is stored
// as f16: half says which dtypes are, storedBytes what a tensor takes.

// half reports whether tensors of dtype dt are stored as f16.
func (d *Device) half(dt ir.DType) bool { return dt == ir.F32 && d.opts.Compute == ir.F16 }

// storedBytes is the device memory a tensor of type t takes.
func (d *Device) storedBytes(t ir.Type) int64 {
	if d.half(t.DType) {
		return t.Bytes() / 2
	}
	return t.Bytes()
}

// toHalf rounds little-endian f32 data to f16 (to nearest even; values
// beyond f16's range become infinities, as the GPU's conversion does).
func toHalf(f32 []byte) []byte {
	out := make([]byte, len(f32)/2)
	for i := range len(f32) / 4 {
		v := math.Float32frombits(binary.LittleEndian.Uint32(f32[4*i:]))
		binary.LittleEndian.PutUint16(out[2*i:], float16.Fromfloat32(v).Bits())
	}
	return out
}

// fromHalf widens f16 data into f32 (exactly).
func fromHalf(f16, f32 []byte) {
	for i := range len(f16) / 2 {
		v := float16.Frombits(binary.LittleEndian.Uint16(f16[2*i:])).Float32()
		binary.LittleEndian.PutUint32(f32[4*i:], math.Float32bits(v))
	}
}
