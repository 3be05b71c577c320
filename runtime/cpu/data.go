package cpu

import (
	"fmt"

	"github.com/tapml/tapml/ir"
	"github.com/tapml/tapml/tensor"
	"github.com/tapml/tapml/tensor/quant"
)

// Data ops: they move elements without arithmetic and work on every dtype
// (they copy bytes), except cast, which converts, and constant.

// constantKernel builds the tensor of a constant node: value holds every
// element (row-major) or one repeated; it is converted to dtype as cast
// converts (float to int truncates toward zero).
func constantKernel(_ *Device, c *call) ([]*tensor.Tensor, error) {
	dt := c.attrs.DType("dtype")
	s := c.attrs.Shape("shape")
	if !s.IsStatic() {
		return nil, fmt.Errorf("shape %s must be static", s)
	}
	if dt.Size() == 0 {
		return nil, fmt.Errorf("invalid dtype %s", dt)
	}
	for _, d := range s {
		if d.Size < 0 {
			return nil, fmt.Errorf("shape %s has a negative dim", s)
		}
	}
	out := tensor.New(dt, s.Sizes())
	vals := c.attrs.Floats("value")
	n := out.NumElements()
	if len(vals) != 1 && len(vals) != n {
		return nil, fmt.Errorf("value has %d elements, shape %s needs 1 or %d", len(vals), s, n)
	}
	if dt == ir.F32 {
		o := out.Float32s()
		for i := range o {
			o[i] = float32(vals[min(i, len(vals)-1)])
		}
		return []*tensor.Tensor{out}, nil
	}
	for i := 0; i < n; i++ {
		out.SetFloat64At(i, vals[min(i, len(vals)-1)])
	}
	return []*tensor.Tensor{out}, nil
}

// castKernel converts between f32, f16, bf16, i32, i64 and bool with
// tensor.Convert: float to int truncates toward zero (NaN and out-of-range
// values give an unspecified integer), anything to bool is "!= 0", f32 to
// f16/bf16 rounds to nearest even.
func castKernel(_ *Device, c *call) ([]*tensor.Tensor, error) {
	to := c.attrs.DType("to")
	if to.Size() == 0 {
		return nil, fmt.Errorf("cannot cast to %s", to)
	}
	x := c.in[0]
	if x.DType == ir.F32 && to == ir.I32 {
		out := tensor.New(ir.I32, x.Shape)
		o := out.Int32s()
		for i, v := range x.Float32s() {
			o[i] = int32(v)
		}
		return []*tensor.Tensor{out}, nil
	}
	if x.DType == ir.I32 && to == ir.F32 {
		out := tensor.New(ir.F32, x.Shape)
		o := out.Float32s()
		for i, v := range x.Int32s() {
			o[i] = float32(v)
		}
		return []*tensor.Tensor{out}, nil
	}
	return []*tensor.Tensor{x.Convert(to)}, nil
}

// gatherKernel: out = table indexed by ids along axis, shape
// table[:axis] + ids + table[axis+1:]. ids are i32 or i64 in [0, dim); any
// other id is an error.
func gatherKernel(_ *Device, c *call) ([]*tensor.Tensor, error) {
	table, ids := c.in[0], c.in[1]
	outer, dim, inner, err := axisLayout(table.Shape, c.attrs.Int("axis"))
	if err != nil {
		return nil, err
	}
	var idx []int
	switch ids.DType {
	case ir.I32:
		idx = make([]int, ids.NumElements())
		for i, v := range ids.Int32s() {
			idx[i] = int(v)
		}
	case ir.I64:
		idx = make([]int, ids.NumElements())
		for i, v := range view[int64](ids) {
			idx[i] = int(v)
		}
	default:
		return nil, fmt.Errorf("ids must be i32 or i64, got %s", ids.DType)
	}
	for i, id := range idx {
		if id < 0 || id >= dim {
			return nil, fmt.Errorf("id %d (element %d of ids) is out of range [0, %d)", id, i, dim)
		}
	}
	ax := ax1(table.Shape, c.attrs.Int("axis"))
	shape := append(append(append([]int{}, table.Shape[:ax]...), ids.Shape...), table.Shape[ax+1:]...)
	st := ir.LookupOp(ir.OpGather).Storage.Of(ir.Call{In: []ir.Type{table.Type(), ids.Type()}, Attrs: c.attrs})
	if st.Accepts(0, table.DType) {
		return gatherDecoded(table, idx, outer, dim, inner, shape)
	}
	out := tensor.New(table.DType, shape)
	row := inner * table.DType.Size()
	for o := 0; o < outer; o++ {
		src := table.Data[o*dim*row:]
		dst := out.Data[o*len(idx)*row:]
		for i, id := range idx {
			copy(dst[i*row:(i+1)*row], src[id*row:(id+1)*row])
		}
	}
	return []*tensor.Tensor{out}, nil
}

// gatherDecoded gathers rows of inner elements (whole blocks: the axis is
// not the last) from a table in a storage dtype, decoded to f32.
func gatherDecoded(table *tensor.Tensor, idx []int, outer, dim, inner int, shape []int) ([]*tensor.Tensor, error) {
	row := int(table.DType.Bytes(int64(inner)))
	out := tensor.New(ir.F32, shape)
	dst := out.Float32s()
	for o := 0; o < outer; o++ {
		for i, id := range idx {
			src := table.Data[(o*dim+id)*row:][:row]
			if err := quant.Dequantize(table.DType, src, dst[(o*len(idx)+i)*inner:][:inner]); err != nil {
				return nil, err
			}
		}
	}
	return []*tensor.Tensor{out}, nil
}

// dequantizeKernel decodes a tensor in a storage dtype to f32 exactly (an
// f32 tensor is returned as it is).
func dequantizeKernel(d *Device, c *call) ([]*tensor.Tensor, error) {
	x := c.in[0]
	if x.DType == ir.F32 {
		return []*tensor.Tensor{x}, nil
	}
	if !quant.Decodes(x.DType) {
		return nil, fmt.Errorf("cannot dequantize %s", x.DType)
	}
	return []*tensor.Tensor{d.widened(x)}, nil
}

// ax1 maps a valid (already checked) possibly negative axis into [0, rank).
func ax1(shape []int, axis int64) int {
	if axis < 0 {
		axis += int64(len(shape))
	}
	return int(axis)
}

// reshapeKernel returns a tensor that shares x's data. The new shape is
// the expected output type when the caller gives one, else the shape
// attribute, whose one -1 dim takes the remaining elements.
func reshapeKernel(_ *Device, c *call) ([]*tensor.Tensor, error) {
	x := c.in[0]
	shape := c.outShape(0)
	if shape == nil {
		s := c.attrs.Shape("shape")
		shape = make([]int, len(s))
		infer, known := -1, 1
		for i, d := range s {
			switch {
			case !d.IsStatic():
				return nil, fmt.Errorf("shape %s has symbolic dims; pass the output type", s)
			case d.Size == -1 && infer < 0:
				infer = i
			case d.Size < 0:
				return nil, fmt.Errorf("bad shape %s", s)
			default:
				shape[i] = int(d.Size)
				known *= int(d.Size)
			}
		}
		if infer >= 0 {
			if known == 0 || x.NumElements()%known != 0 {
				return nil, fmt.Errorf("cannot reshape %v to %s", x.Shape, s)
			}
			shape[infer] = x.NumElements() / known
		}
	}
	if tensor.NumElements(shape) != x.NumElements() {
		return nil, fmt.Errorf("cannot reshape %v to %v: element counts differ", x.Shape, shape)
	}
	return []*tensor.Tensor{x.Reshaped(shape)}, nil
}

// transposeKernel: out dim i is input dim perm[i].
func transposeKernel(_ *Device, c *call) ([]*tensor.Tensor, error) {
	x := c.in[0]
	perm := c.attrs.Ints("perm")
	r := len(x.Shape)
	if len(perm) != r {
		return nil, fmt.Errorf("perm %v has %d entries, input rank is %d", perm, len(perm), r)
	}
	seen := make([]bool, r)
	shape := make([]int, r)
	identity := true
	for i, p := range perm {
		if p < 0 || int(p) >= r || seen[p] {
			return nil, fmt.Errorf("perm %v is not a permutation of 0..%d", perm, r-1)
		}
		seen[p] = true
		shape[i] = x.Shape[p]
		identity = identity && int(p) == i
	}
	out := tensor.New(x.DType, shape)
	if identity || out.NumElements() == 0 {
		copy(out.Data, x.Data)
		return []*tensor.Tensor{out}, nil
	}
	inStrides := make([]int, r)
	acc := 1
	for j := r - 1; j >= 0; j-- {
		inStrides[j] = acc
		acc *= x.Shape[j]
	}
	strides := make([]int, r) // input stride of each output dim
	for i, p := range perm {
		strides[i] = inStrides[p]
	}
	switch x.DType.Size() {
	case 1:
		permute(view[uint8](out), view[uint8](x), shape, strides)
	case 2:
		permute(view[uint16](out), view[uint16](x), shape, strides)
	case 4:
		permute(view[uint32](out), view[uint32](x), shape, strides)
	case 8:
		permute(view[uint64](out), view[uint64](x), shape, strides)
	default:
		return nil, fmt.Errorf("unsupported dtype %s", x.DType)
	}
	return []*tensor.Tensor{out}, nil
}

// permute writes dst in row-major order of shape, reading src at the given
// per-dim strides.
func permute[T any](dst, src []T, shape, strides []int) {
	r := len(shape)
	inner, is := shape[r-1], strides[r-1]
	idx := make([]int, r)
	off := 0
	for o := 0; o < len(dst); o += inner {
		d := dst[o : o+inner]
		for j := range d {
			d[j] = src[off+j*is]
		}
		for k := r - 2; k >= 0; k-- {
			idx[k]++
			off += strides[k]
			if idx[k] < shape[k] {
				break
			}
			off -= strides[k] * shape[k]
			idx[k] = 0
		}
	}
}

// sliceKernel takes elements start, start+step, ... < end along axis
// (bounds resolved by ir.SliceBounds: negative counts from the end, both
// clamped to the dim).
func sliceKernel(_ *Device, c *call) ([]*tensor.Tensor, error) {
	x := c.in[0]
	outer, dim, inner, err := axisLayout(x.Shape, c.attrs.Int("axis"))
	if err != nil {
		return nil, err
	}
	step := c.attrs.Int("step")
	if step < 1 {
		return nil, fmt.Errorf("step must be >= 1, got %d", step)
	}
	first, count := ir.SliceBounds(c.attrs.Int("start"), c.attrs.Int("end"), step, int64(dim))
	ax := ax1(x.Shape, c.attrs.Int("axis"))
	shape := append([]int{}, x.Shape...)
	shape[ax] = int(count)
	out := tensor.New(x.DType, shape)
	row := inner * x.DType.Size()
	n, f, st := int(count), int(first), int(step)
	for o := 0; o < outer; o++ {
		src := x.Data[o*dim*row:]
		dst := out.Data[o*n*row:]
		if st == 1 {
			copy(dst[:n*row], src[f*row:(f+n)*row])
			continue
		}
		for i := 0; i < n; i++ {
			j := f + i*st
			copy(dst[i*row:(i+1)*row], src[j*row:(j+1)*row])
		}
	}
	return []*tensor.Tensor{out}, nil
}

// concatKernel joins its inputs along axis; the other dims must match.
func concatKernel(_ *Device, c *call) ([]*tensor.Tensor, error) {
	x0 := c.in[0]
	outer, _, inner, err := axisLayout(x0.Shape, c.attrs.Int("axis"))
	if err != nil {
		return nil, err
	}
	ax := ax1(x0.Shape, c.attrs.Int("axis"))
	shape := append([]int{}, x0.Shape...)
	shape[ax] = 0
	for i, t := range c.in {
		if t.DType != x0.DType || len(t.Shape) != len(x0.Shape) {
			return nil, fmt.Errorf("input %d is %s, want %s of rank %d", i, t, x0.DType, len(x0.Shape))
		}
		for j := range t.Shape {
			if j != ax && t.Shape[j] != x0.Shape[j] {
				return nil, fmt.Errorf("input %d has shape %v, which differs from %v outside axis %d", i, t.Shape, x0.Shape, ax)
			}
		}
		shape[ax] += t.Shape[ax]
	}
	out := tensor.New(x0.DType, shape)
	esz := x0.DType.Size()
	outRow := shape[ax] * inner * esz
	at := 0
	for _, t := range c.in {
		row := t.Shape[ax] * inner * esz
		for o := 0; o < outer; o++ {
			copy(out.Data[o*outRow+at:o*outRow+at+row], t.Data[o*row:(o+1)*row])
		}
		at += row
	}
	return []*tensor.Tensor{out}, nil
}

// identityKernel (probe, transfer) returns its input itself.
func identityKernel(_ *Device, c *call) ([]*tensor.Tensor, error) {
	return []*tensor.Tensor{c.in[0]}, nil
}
