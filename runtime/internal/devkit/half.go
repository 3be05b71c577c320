package devkit

import (
	"encoding/binary"
	"math"
	"slices"

	"github.com/tapml/tapml/codegen"
	"github.com/tapml/tapml/ir"
	"github.com/tapml/tapml/tensor"
	"github.com/x448/float16"
)

// Under f16 compute a device stores the tensors the IR types f32 as f16
// (the vulkan and metal targets, and the remote target where its device
// has shader-f16): uploads round with ToHalf, downloads widen with
// FromHalf, and HalfKernel gives the sizes of a kernel's buffers. Storage
// is that rule, which the devices share.

// Storage says how a device stores tensors: with Half (f16 compute) those
// the IR types f32 as f16, taking half the bytes; the rest as typed.
type Storage struct{ Half bool }

// Halved reports whether tensors of dtype dt are stored as f16.
func (s Storage) Halved(dt ir.DType) bool { return s.Half && dt == ir.F32 }

// Bytes is the device memory a tensor of type t takes.
func (s Storage) Bytes(t ir.Type) int64 {
	if s.Halved(t.DType) {
		return t.Bytes() / 2
	}
	return t.Bytes()
}

// Encode returns t's data as the device stores it (rounded to f16 where
// halved; t's own bytes otherwise).
func (s Storage) Encode(t *tensor.Tensor) []byte {
	if s.Halved(t.DType) {
		return ToHalf(t.Data)
	}
	return t.Data
}

// Kernel returns k with its bindings typed as the device stores them (k
// itself when nothing is halved).
func (s Storage) Kernel(k *codegen.Kernel) *codegen.Kernel {
	if !s.Half {
		return k
	}
	return HalfKernel(k)
}

// HalfKernel returns k with its f32 bindings typed f16, as a device under
// f16 compute stores them, for sizing and checking its buffers (Bind,
// CheckBindings); the runtime.Buffers of its outputs keep k's own types.
func HalfKernel(k *codegen.Kernel) *codegen.Kernel {
	hk := *k
	hk.Bindings = slices.Clone(k.Bindings)
	for i, b := range hk.Bindings {
		if b.Type.DType == ir.F32 {
			hk.Bindings[i].Type.DType = ir.F16
		}
	}
	return &hk
}

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
