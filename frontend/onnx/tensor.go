package onnx

import (
	"encoding/binary"
	"fmt"
	"math"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/tapml/tapml/frontend/onnx/onnxpb"
	"github.com/tapml/tapml/internal/safeio"
	"github.com/tapml/tapml/ir"
	"github.com/tapml/tapml/tensor"
)

// maxElements bounds the tensors an ONNX file may declare (2^31 elements):
// beyond it a corrupt dim would make the importer allocate without end.
const maxElements = 1 << 31

// hostDType maps an ONNX element type to the dtype a constant of it is held
// in on the host while importing: integers narrower than 64 bits widen to
// i32 (u32 and u64 to i64), double narrows to f32. ok is false for types
// tapml has no use for (strings, complex numbers).
func hostDType(t int32) (ir.DType, bool) {
	switch onnxpb.TensorProto_DataType(t) {
	case onnxpb.TensorProto_FLOAT, onnxpb.TensorProto_DOUBLE:
		return ir.F32, true
	case onnxpb.TensorProto_FLOAT16:
		return ir.F16, true
	case onnxpb.TensorProto_BFLOAT16:
		return ir.BF16, true
	case onnxpb.TensorProto_INT8, onnxpb.TensorProto_UINT8, onnxpb.TensorProto_INT16, onnxpb.TensorProto_UINT16, onnxpb.TensorProto_INT32:
		return ir.I32, true
	case onnxpb.TensorProto_INT64, onnxpb.TensorProto_UINT32, onnxpb.TensorProto_UINT64:
		return ir.I64, true
	case onnxpb.TensorProto_BOOL:
		return ir.Bool, true
	}
	return ir.Invalid, false
}

// runtimeDType is the dtype a value of ONNX type t has in the IR: as
// hostDType, but 64-bit integers become i32 (the GPU targets have no
// 64-bit integers; ONNX models use them for shapes and indices, which fit)
// and so do booleans (0 and 1: GPU buffers hold no bool elements).
func runtimeDType(t int32) (ir.DType, bool) {
	dt, ok := hostDType(t)
	if dt == ir.I64 || dt == ir.Bool {
		dt = ir.I32 // booleans are i32 0/1 at run time, as ir.OpCompare writes them
	}
	return dt, ok
}

func typeName(t int32) string {
	if s, ok := onnxpb.TensorProto_DataType_name[t]; ok {
		return s
	}
	return "type " + strconv.Itoa(int(t))
}

// checkDims returns dims as ints, checking that they are >= 0 and that
// their product stays below maxElements.
func checkDims(dims []int64) ([]int, error) {
	out := make([]int, len(dims))
	n := int64(1)
	for i, d := range dims {
		if d < 0 {
			return nil, fmt.Errorf("dims %v: negative dim", dims)
		}
		if d > maxElements || (d > 0 && n > maxElements/d) {
			return nil, fmt.Errorf("dims %v: more than 2^31 elements", dims)
		}
		n *= d
		out[i] = int(d)
	}
	return out, nil
}

// decodeTensor turns a TensorProto into a host tensor (see hostDType). dir
// is the model's folder, for tensors stored in external files.
func decodeTensor(tp *onnxpb.TensorProto, dir string) (*tensor.Tensor, error) {
	if tp == nil {
		return nil, fmt.Errorf("missing tensor")
	}
	if tp.GetSegment() != nil {
		return nil, fmt.Errorf("tensor %q: segmented tensors are not supported", tp.GetName())
	}
	et := tp.GetDataType()
	dt, ok := hostDType(et)
	if !ok {
		return nil, fmt.Errorf("tensor %q: element type %s is not supported", tp.GetName(), typeName(et))
	}
	shape, err := checkDims(tp.GetDims())
	if err != nil {
		return nil, fmt.Errorf("tensor %q: %w", tp.GetName(), err)
	}
	n := tensor.NumElements(shape)
	raw := tp.GetRawData()
	if tp.GetDataLocation() == onnxpb.TensorProto_EXTERNAL {
		if raw, err = externalData(tp, dir); err != nil {
			return nil, fmt.Errorf("tensor %q: %w", tp.GetName(), err)
		}
	}
	mismatch := func(have int) error {
		return fmt.Errorf("tensor %q: %s%v needs %d elements, the file holds %d", tp.GetName(), typeName(et), tp.GetDims(), n, have)
	}
	if raw != nil || tp.GetDataLocation() == onnxpb.TensorProto_EXTERNAL {
		size := elemSize(et)
		if len(raw) != n*size {
			return nil, fmt.Errorf("tensor %q: %s%v needs %d bytes of raw data, the file holds %d", tp.GetName(), typeName(et), tp.GetDims(), n*size, len(raw))
		}
		out := tensor.New(dt, shape)
		for i := 0; i < n; i++ {
			b := raw[i*size:]
			switch onnxpb.TensorProto_DataType(et) {
			case onnxpb.TensorProto_FLOAT:
				binary.LittleEndian.PutUint32(out.Data[4*i:], binary.LittleEndian.Uint32(b))
			case onnxpb.TensorProto_DOUBLE:
				out.Float32s()[i] = float32(math.Float64frombits(binary.LittleEndian.Uint64(b)))
			case onnxpb.TensorProto_FLOAT16, onnxpb.TensorProto_BFLOAT16:
				copy(out.Data[2*i:2*i+2], b[:2])
			case onnxpb.TensorProto_INT8:
				out.SetFloat64At(i, float64(int8(b[0])))
			case onnxpb.TensorProto_UINT8:
				out.SetFloat64At(i, float64(b[0]))
			case onnxpb.TensorProto_INT16:
				out.SetFloat64At(i, float64(int16(binary.LittleEndian.Uint16(b))))
			case onnxpb.TensorProto_UINT16:
				out.SetFloat64At(i, float64(binary.LittleEndian.Uint16(b)))
			case onnxpb.TensorProto_INT32:
				binary.LittleEndian.PutUint32(out.Data[4*i:], binary.LittleEndian.Uint32(b))
			case onnxpb.TensorProto_UINT32:
				binary.LittleEndian.PutUint64(out.Data[8*i:], uint64(binary.LittleEndian.Uint32(b)))
			case onnxpb.TensorProto_INT64, onnxpb.TensorProto_UINT64:
				binary.LittleEndian.PutUint64(out.Data[8*i:], binary.LittleEndian.Uint64(b))
			case onnxpb.TensorProto_BOOL:
				out.Data[i] = b[0] & 1
			}
		}
		return out, nil
	}
	var have int
	switch onnxpb.TensorProto_DataType(et) {
	case onnxpb.TensorProto_FLOAT:
		have = len(tp.GetFloatData())
	case onnxpb.TensorProto_DOUBLE:
		have = len(tp.GetDoubleData())
	case onnxpb.TensorProto_INT64:
		have = len(tp.GetInt64Data())
	case onnxpb.TensorProto_UINT32, onnxpb.TensorProto_UINT64:
		have = len(tp.GetUint64Data())
	default:
		have = len(tp.GetInt32Data())
	}
	// Checked before anything is allocated: the dims alone can ask for 2^31
	// elements.
	if have != n {
		return nil, mismatch(have)
	}
	out := tensor.New(dt, shape)
	switch onnxpb.TensorProto_DataType(et) {
	case onnxpb.TensorProto_FLOAT:
		d := tp.GetFloatData()
		copy(out.Float32s(), d)
	case onnxpb.TensorProto_DOUBLE:
		d := tp.GetDoubleData()
		for i, v := range d {
			out.Float32s()[i] = float32(v)
		}
	case onnxpb.TensorProto_INT64:
		d := tp.GetInt64Data()
		for i, v := range d {
			binary.LittleEndian.PutUint64(out.Data[8*i:], uint64(v))
		}
	case onnxpb.TensorProto_UINT32, onnxpb.TensorProto_UINT64:
		d := tp.GetUint64Data()
		for i, v := range d {
			binary.LittleEndian.PutUint64(out.Data[8*i:], v)
		}
	default: // int32_data holds the narrow integers, bool, and f16/bf16 bits
		d := tp.GetInt32Data()
		for i, v := range d {
			switch dt {
			case ir.F16, ir.BF16:
				binary.LittleEndian.PutUint16(out.Data[2*i:], uint16(v))
			case ir.Bool:
				out.Data[i] = byte(v & 1)
			default:
				binary.LittleEndian.PutUint32(out.Data[4*i:], uint32(v))
			}
		}
	}
	return out, nil
}

// elemSize is the size in bytes of one element of ONNX type t in raw data.
func elemSize(t int32) int {
	switch onnxpb.TensorProto_DataType(t) {
	case onnxpb.TensorProto_INT8, onnxpb.TensorProto_UINT8, onnxpb.TensorProto_BOOL:
		return 1
	case onnxpb.TensorProto_INT16, onnxpb.TensorProto_UINT16, onnxpb.TensorProto_FLOAT16, onnxpb.TensorProto_BFLOAT16:
		return 2
	case onnxpb.TensorProto_DOUBLE, onnxpb.TensorProto_INT64, onnxpb.TensorProto_UINT64:
		return 8
	}
	return 4
}

// externalData reads a tensor's bytes from the file its external_data
// names (location, offset, length), relative to the model's folder.
func externalData(tp *onnxpb.TensorProto, dir string) ([]byte, error) {
	var loc string
	var off, length int64 = 0, -1
	for _, kv := range tp.GetExternalData() {
		var err error
		switch kv.GetKey() {
		case "location":
			loc = kv.GetValue()
		case "offset":
			off, err = strconv.ParseInt(kv.GetValue(), 10, 64)
		case "length":
			length, err = strconv.ParseInt(kv.GetValue(), 10, 64)
		}
		if err != nil || off < 0 {
			return nil, fmt.Errorf("external data: bad %s %q", kv.GetKey(), kv.GetValue())
		}
	}
	if loc == "" {
		return nil, fmt.Errorf("external data without a location")
	}
	if dir == "" {
		return nil, fmt.Errorf("external data in %q, but the model was not read from a file", loc)
	}
	if filepath.IsAbs(loc) || strings.Contains(filepath.ToSlash(loc), "../") {
		return nil, fmt.Errorf("external data location %q must be a path inside the model's folder", loc)
	}
	f, st, err := safeio.Open(filepath.Join(dir, loc))
	if err != nil {
		return nil, fmt.Errorf("external data: %w", err)
	}
	defer f.Close()
	if length < 0 {
		length = st.Size() - off
	}
	if off > st.Size() || length > st.Size()-off {
		return nil, fmt.Errorf("external data: %s holds %d bytes, the tensor needs %d at offset %d", loc, st.Size(), length, off)
	}
	buf := make([]byte, length)
	if _, err := f.ReadAt(buf, off); err != nil {
		return nil, fmt.Errorf("external data: %w", err)
	}
	return buf, nil
}

// ints returns the elements of an integer (or integral float) host tensor.
func ints(t *tensor.Tensor) []int64 {
	out := make([]int64, t.NumElements())
	for i := range out {
		if t.DType == ir.I64 {
			out[i] = int64(binary.LittleEndian.Uint64(t.Data[8*i:]))
		} else {
			out[i] = int64(t.Float64At(i))
		}
	}
	return out
}

// floats returns the elements of a host tensor as float64.
func floats(t *tensor.Tensor) []float64 {
	out := make([]float64, t.NumElements())
	for i := range out {
		out[i] = t.Float64At(i)
	}
	return out
}

// i64Tensor makes an i64 host tensor.
func i64Tensor(shape []int, v []int64) *tensor.Tensor {
	t := tensor.New(ir.I64, shape)
	for i, x := range v {
		binary.LittleEndian.PutUint64(t.Data[8*i:], uint64(x))
	}
	return t
}

// toI32 converts an i64 (or bool) host tensor to i32, checking the range.
func toI32(t *tensor.Tensor) (*tensor.Tensor, error) {
	out := tensor.New(ir.I32, t.Shape)
	o := out.Int32s()
	for i, v := range ints(t) {
		if v < math.MinInt32 || v > math.MaxInt32 {
			return nil, fmt.Errorf("value %d does not fit i32", v)
		}
		o[i] = int32(v)
	}
	return out, nil
}
