package devkit

import (
	"encoding/binary"
	"math"

	"github.com/x448/float16"
)

// Under f16 compute a device stores the tensors the IR types f32 as f16
// (the vulkan target, and the remote target where its device has
// shader-f16): uploads round with ToHalf, downloads widen with FromHalf.

// ToHalf rounds little-endian f32 data to f16 (to nearest even; values
// beyond f16's range become infinities, as the GPU's conversion does).
func ToHalf(f32 []byte) []byte {
	out := make([]byte, len(f32)/2)
	for i := range len(f32) / 4 {
		v := math.Float32frombits(binary.LittleEndian.Uint32(f32[4*i:]))
		binary.LittleEndian.PutUint16(out[2*i:], float16.Fromfloat32(v).Bits())
	}
	return out
}

// FromHalf widens f16 data into f32 (exactly), len(f32) = 2*len(f16).
func FromHalf(f16, f32 []byte) {
	for i := range len(f16) / 2 {
		v := float16.Frombits(binary.LittleEndian.Uint16(f16[2*i:])).Float32()
		binary.LittleEndian.PutUint32(f32[4*i:], math.Float32bits(v))
	}
}
