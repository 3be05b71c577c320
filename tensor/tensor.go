// Package tensor holds dense tensors in host memory: the values that cross
// between tapml's devices, files and tests.
package tensor

import (
	"encoding/binary"
	"fmt"
	"math"
	"unsafe"

	"github.com/tapml/tapml/ir"
	"github.com/tapml/tapml/tensor/quant"
	"github.com/x448/float16"
)

// Tensor is a dense row-major tensor in host memory. Data holds the
// elements little-endian in DType (for a block format, the blocks of each
// row of the last dim in turn); it is 4-byte aligned when the tensor was
// made by this package, so Float32s and Int32s view it without copying.
type Tensor struct {
	DType ir.DType
	Shape []int
	Data  []byte
}

// NumElements is the product of shape (1 for a scalar).
func NumElements(shape []int) int {
	n := 1
	for _, d := range shape {
		n *= d
	}
	return n
}

// alignedBytes allocates n zeroed bytes on an 8-byte boundary.
func alignedBytes(n int) []byte {
	if n == 0 {
		return []byte{}
	}
	words := make([]uint64, (n+7)/8)
	return unsafe.Slice((*byte)(unsafe.Pointer(&words[0])), n)
}

// ByteSize is the size in bytes of a tensor of dtype dt and shape, or -1
// when a block format's shape is not whole blocks.
func ByteSize(dt ir.DType, shape []int) int {
	return int(dt.Bytes(int64(NumElements(shape))))
}

// New returns a zero tensor. A block format's shape must be whole blocks.
func New(dt ir.DType, shape []int) *Tensor {
	n := ByteSize(dt, shape)
	if n < 0 {
		panic(fmt.Sprintf("tensor: %s%v is not whole blocks", dt, shape))
	}
	return &Tensor{DType: dt, Shape: append([]int{}, shape...), Data: alignedBytes(n)}
}

// FromFloat32 returns an f32 tensor holding a copy of data.
func FromFloat32(shape []int, data []float32) *Tensor {
	t := New(ir.F32, shape)
	if len(data) != t.NumElements() {
		panic(fmt.Sprintf("tensor: %d values for shape %v", len(data), shape))
	}
	copy(t.Float32s(), data)
	return t
}

// FromInt32 returns an i32 tensor holding a copy of data.
func FromInt32(shape []int, data []int32) *Tensor {
	t := New(ir.I32, shape)
	if len(data) != t.NumElements() {
		panic(fmt.Sprintf("tensor: %d values for shape %v", len(data), shape))
	}
	copy(t.Int32s(), data)
	return t
}

// Scalar returns an i32 scalar tensor.
func ScalarInt32(v int32) *Tensor { return FromInt32(nil, []int32{v}) }

// FromBytes wraps raw little-endian element bytes, copying them only when
// they are not aligned for typed access. It checks the length.
func FromBytes(dt ir.DType, shape []int, data []byte) (*Tensor, error) {
	want := ByteSize(dt, shape)
	if want < 0 {
		return nil, fmt.Errorf("tensor %s%v: the last dim is not whole blocks of the format", dt, shape)
	}
	if len(data) != want {
		return nil, fmt.Errorf("tensor %s%v needs %d bytes, got %d", dt, shape, want, len(data))
	}
	if len(data) > 0 && uintptr(unsafe.Pointer(&data[0]))%8 != 0 {
		c := alignedBytes(len(data))
		copy(c, data)
		data = c
	}
	return &Tensor{DType: dt, Shape: append([]int{}, shape...), Data: data}, nil
}

// Type returns the IR type of the tensor.
func (t *Tensor) Type() ir.Type {
	s := make(ir.Shape, len(t.Shape))
	for i, d := range t.Shape {
		s[i] = ir.D(int64(d))
	}
	return ir.T(t.DType, s)
}

// NumElements is the number of elements.
func (t *Tensor) NumElements() int { return NumElements(t.Shape) }

// Float32s views the data of an f32 tensor.
func (t *Tensor) Float32s() []float32 {
	if t.DType != ir.F32 {
		panic("tensor: Float32s of a " + t.DType.String() + " tensor")
	}
	if len(t.Data) == 0 {
		return []float32{}
	}
	return unsafe.Slice((*float32)(unsafe.Pointer(&t.Data[0])), len(t.Data)/4)
}

// Int32s views the data of an i32 tensor.
func (t *Tensor) Int32s() []int32 {
	if t.DType != ir.I32 {
		panic("tensor: Int32s of a " + t.DType.String() + " tensor")
	}
	if len(t.Data) == 0 {
		return []int32{}
	}
	return unsafe.Slice((*int32)(unsafe.Pointer(&t.Data[0])), len(t.Data)/4)
}

// Clone returns a deep copy.
func (t *Tensor) Clone() *Tensor {
	c := New(t.DType, t.Shape)
	copy(c.Data, t.Data)
	return c
}

// Reshaped returns a tensor sharing t's data with another shape of the same size.
func (t *Tensor) Reshaped(shape []int) *Tensor {
	if NumElements(shape) != t.NumElements() {
		panic(fmt.Sprintf("tensor: reshape %v to %v", t.Shape, shape))
	}
	return &Tensor{DType: t.DType, Shape: append([]int{}, shape...), Data: t.Data}
}

// Float64At returns element i converted to float64, for any dtype.
func (t *Tensor) Float64At(i int) float64 {
	switch t.DType {
	case ir.F32:
		return float64(math.Float32frombits(binary.LittleEndian.Uint32(t.Data[4*i:])))
	case ir.F16:
		return float64(float16.Frombits(binary.LittleEndian.Uint16(t.Data[2*i:])).Float32())
	case ir.BF16:
		return float64(math.Float32frombits(uint32(binary.LittleEndian.Uint16(t.Data[2*i:])) << 16))
	case ir.I32:
		return float64(int32(binary.LittleEndian.Uint32(t.Data[4*i:])))
	case ir.I64:
		return float64(int64(binary.LittleEndian.Uint64(t.Data[8*i:])))
	case ir.Bool:
		if t.Data[i] != 0 {
			return 1
		}
		return 0
	}
	panic("tensor: Float64At of " + t.DType.String())
}

// SetFloat64At stores v, converted to the tensor's dtype, at element i.
func (t *Tensor) SetFloat64At(i int, v float64) {
	switch t.DType {
	case ir.F32:
		binary.LittleEndian.PutUint32(t.Data[4*i:], math.Float32bits(float32(v)))
	case ir.F16:
		binary.LittleEndian.PutUint16(t.Data[2*i:], float16.Fromfloat32(float32(v)).Bits())
	case ir.BF16:
		binary.LittleEndian.PutUint16(t.Data[2*i:], F32ToBF16(float32(v)))
	case ir.I32:
		binary.LittleEndian.PutUint32(t.Data[4*i:], uint32(int32(v)))
	case ir.I64:
		binary.LittleEndian.PutUint64(t.Data[8*i:], uint64(int64(v)))
	case ir.Bool:
		t.Data[i] = 0
		if v != 0 {
			t.Data[i] = 1
		}
	default:
		panic("tensor: SetFloat64At of " + t.DType.String())
	}
}

// F32ToBF16 rounds to nearest even.
func F32ToBF16(f float32) uint16 {
	b := math.Float32bits(f)
	if f != f {
		return uint16(b>>16) | 0x40
	}
	return uint16((b + 0x7fff + (b>>16)&1) >> 16)
}

// Convert returns t converted to dtype dt (a copy, even when dt is t's
// dtype). A tensor in a block format converts only to f32: it is decoded
// exactly as ggml decodes it (tensor/quant).
func (t *Tensor) Convert(dt ir.DType) *Tensor {
	if dt == t.DType {
		return t.Clone()
	}
	out := New(dt, t.Shape)
	n := t.NumElements()
	if dt == ir.F32 && quant.Decodes(t.DType) {
		if err := quant.Dequantize(t.DType, t.Data, out.Float32s()); err != nil {
			panic("tensor: " + err.Error()) // t's size was checked when it was made
		}
		return out
	}
	for i := 0; i < n; i++ {
		out.SetFloat64At(i, t.Float64At(i))
	}
	return out
}

func (t *Tensor) String() string {
	return fmt.Sprintf("%s%v", t.DType, t.Shape)
}
