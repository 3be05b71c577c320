package vulkan

import "github.com/tapml/tapml/ir"

// Under f16 compute (Options.Compute) a tensor the IR types f32 is stored
// as f16 (devkit.ToHalf and FromHalf convert): half says which dtypes
// are, storedBytes what a tensor takes.

// half reports whether tensors of dtype dt are stored as f16.
func (d *Device) half(dt ir.DType) bool { return dt == ir.F32 && d.opts.Compute == ir.F16 }

// storedBytes is the device memory a tensor of type t takes.
func (d *Device) storedBytes(t ir.Type) int64 {
	if d.half(t.DType) {
		return t.Bytes() / 2
	}
	return t.Bytes()
}
