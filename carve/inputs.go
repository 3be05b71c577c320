package carve

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/tapml/tapml/frontend/onnx/onnxpb"
	"github.com/tapml/tapml/internal/atomicfile"
	"github.com/tapml/tapml/internal/safeio"
	"github.com/tapml/tapml/ir"
	"github.com/tapml/tapml/tensor"
	"google.golang.org/protobuf/proto"
)

// Input files. A model that is not a language model is called on tensors:
// seeded random values (see Rand) or values from files, in one of three
// forms, told apart by content and name:
//
//   - NumPy .npy (format versions 1 to 3, little-endian or single-byte
//     dtypes f2, f4, f8, i1, i2, i4, i8, u1, u2, u4, u8, b1, C order): the
//     file carries its shape and dtype.
//   - ONNX TensorProto (.pb, the test-data format of the ONNX model zoo:
//     test_data_set_0/input_0.pb): the file carries its shape and dtype.
//   - raw little-endian values of the input's own dtype (f32 for float
//     inputs), any other name: the shape is the input's (so the model's
//     dims must be known: static, or given with an input shape).
//
// Values are converted to the input's dtype (float to float, integer to
// integer; an integer that does not fit in i32 is an error). The shape
// must be the input's.

// maxInputElements bounds what an input file may declare (2^31 elements),
// so a corrupt header cannot make the reader allocate without end.
const maxInputElements = 1 << 31

// npyMagic starts every .npy file.
var npyMagic = []byte("\x93NUMPY")

// ReadTensor reads a tensor file that carries its shape: a .npy file
// (recognised by its magic) or an ONNX TensorProto (.pb). For raw files,
// which carry no shape, it returns an error that says so; see ReadInput.
func ReadTensor(path string) (*tensor.Tensor, error) {
	data, err := safeio.ReadFile(path, safeio.MaxTensor)
	if err != nil {
		return nil, err
	}
	t, err := parseTensorFile(path, data)
	if err != nil {
		return nil, err
	}
	if t == nil {
		return nil, fmt.Errorf("%s: a raw file (neither .npy nor an ONNX TensorProto .pb): it has no shape of its own", path)
	}
	return t, nil
}

// HasShape reports whether the file at path carries its shape (a .npy or
// .pb file), that is, whether ReadTensor can read it.
func HasShape(path string) bool {
	if strings.EqualFold(filepath.Ext(path), ".pb") {
		return true
	}
	f, _, err := safeio.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	head := make([]byte, len(npyMagic))
	_, err = io.ReadFull(f, head)
	return err == nil && bytes.Equal(head, npyMagic)
}

// ReadInput reads the value of an input of type want from a file (.npy,
// .pb or raw; see above) and converts it to want's dtype. want's shape
// must be static when the file is raw; a file with a shape must have
// want's (symbolic dims of want match any size).
func ReadInput(path string, want ir.Type) (*tensor.Tensor, error) {
	data, err := safeio.ReadFile(path, safeio.MaxTensor)
	if err != nil {
		return nil, err
	}
	t, err := parseTensorFile(path, data)
	if err != nil {
		return nil, err
	}
	if t == nil {
		if !want.Shape.IsStatic() {
			return nil, fmt.Errorf("%s: a raw file has no shape, and the input's %s is not static: use a .npy file, or give the shape", path, want)
		}
		sizes := want.Shape.Sizes()
		n := tensor.NumElements(sizes)
		if size := want.DType.Size(); size == 0 || len(data) != n*size {
			return nil, fmt.Errorf("%s: a raw file of %d bytes, but an input %s needs %d bytes (little-endian %s values)", path, len(data), want, n*want.DType.Size(), want.DType)
		}
		t, err = tensor.FromBytes(want.DType, sizes, data)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		return t, nil
	}
	t, err = FitInput(t, want)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return t, nil
}

// FitInput returns t converted to want's dtype, checking its shape against
// want's (a symbolic dim of want matches any size).
func FitInput(t *tensor.Tensor, want ir.Type) (*tensor.Tensor, error) {
	if len(t.Shape) != want.Shape.Rank() {
		return nil, fmt.Errorf("a tensor %s, but the input is %s (rank %d, not %d)", t.Type(), want, len(t.Shape), want.Shape.Rank())
	}
	for i, d := range want.Shape {
		if d.IsStatic() && int64(t.Shape[i]) != d.Size {
			return nil, fmt.Errorf("a tensor %s, but the input is %s (dim %d is %d, not %d)", t.Type(), want, i, t.Shape[i], d.Size)
		}
	}
	if t.DType == want.DType {
		return t, nil
	}
	switch {
	case t.DType.IsFloat() && want.DType.IsFloat():
		return t.Convert(want.DType), nil
	case (t.DType.IsInt() || t.DType == ir.Bool) && (want.DType.IsInt() || want.DType == ir.Bool):
		out := tensor.New(want.DType, t.Shape)
		for i := range t.NumElements() {
			v := t.Float64At(i)
			if want.DType == ir.I32 && (v < math.MinInt32 || v > math.MaxInt32) {
				return nil, fmt.Errorf("element %d (%v) does not fit the input's i32", i, v)
			}
			out.SetFloat64At(i, v)
		}
		return out, nil
	}
	return nil, fmt.Errorf("a tensor of %s, but the input is %s", t.DType, want)
}

// parseTensorFile decodes a .npy or .pb file; it returns nil, nil for a raw
// file.
func parseTensorFile(path string, data []byte) (*tensor.Tensor, error) {
	if bytes.HasPrefix(data, npyMagic) {
		t, err := parseNPY(data)
		if err != nil {
			return nil, fmt.Errorf("%s: .npy: %w", path, err)
		}
		return t, nil
	}
	if strings.EqualFold(filepath.Ext(path), ".pb") {
		t, err := parseTensorProto(data)
		if err != nil {
			return nil, fmt.Errorf("%s: ONNX TensorProto: %w", path, err)
		}
		return t, nil
	}
	return nil, nil
}

// checkShape returns dims as ints: each >= 0, their product at most
// maxInputElements.
func checkShape(dims []int64) ([]int, error) {
	out := make([]int, len(dims))
	n := int64(1)
	for i, d := range dims {
		if d < 0 {
			return nil, fmt.Errorf("shape %v has a negative dim", dims)
		}
		if d > maxInputElements || (d > 0 && n > maxInputElements/d) {
			return nil, fmt.Errorf("shape %v has more than 2^31 elements", dims)
		}
		n *= d
		out[i] = int(d)
	}
	return out, nil
}

// npyType is how the elements of a .npy dtype are read.
type npyType struct {
	dt   ir.DType // the dtype the tensor holds them in
	size int
	read func(b []byte) float64 // nil: copied as they are (dt's own layout)
}

var npyTypes = map[string]npyType{
	"f2": {ir.F16, 2, nil},
	"f4": {ir.F32, 4, nil},
	"f8": {ir.F32, 8, func(b []byte) float64 { return math.Float64frombits(binary.LittleEndian.Uint64(b)) }},
	"i1": {ir.I32, 1, func(b []byte) float64 { return float64(int8(b[0])) }},
	"u1": {ir.I32, 1, func(b []byte) float64 { return float64(b[0]) }},
	"i2": {ir.I32, 2, func(b []byte) float64 { return float64(int16(binary.LittleEndian.Uint16(b))) }},
	"u2": {ir.I32, 2, func(b []byte) float64 { return float64(binary.LittleEndian.Uint16(b)) }},
	"i4": {ir.I32, 4, nil},
	"u4": {ir.I64, 4, func(b []byte) float64 { return float64(binary.LittleEndian.Uint32(b)) }},
	"i8": {ir.I64, 8, nil},
	"u8": {ir.I64, 8, nil},
	"b1": {ir.Bool, 1, nil},
}

// parseNPY decodes a .npy file (versions 1 to 3).
func parseNPY(data []byte) (*tensor.Tensor, error) {
	if len(data) < 10 {
		return nil, fmt.Errorf("truncated header")
	}
	major := data[6]
	var hlen, off int
	switch major {
	case 1:
		hlen, off = int(binary.LittleEndian.Uint16(data[8:])), 10
	case 2, 3:
		if len(data) < 12 {
			return nil, fmt.Errorf("truncated header")
		}
		hlen, off = int(binary.LittleEndian.Uint32(data[8:])), 12
	default:
		return nil, fmt.Errorf("format version %d.%d is not supported (1 to 3 are)", major, data[7])
	}
	if hlen < 0 || len(data)-off < hlen {
		return nil, fmt.Errorf("truncated header (%d bytes announced)", hlen)
	}
	header := string(data[off : off+hlen])
	body := data[off+hlen:]
	descr, err := npyField(header, "descr")
	if err != nil {
		return nil, err
	}
	descr = strings.Trim(descr, `'"`)
	order, err := npyField(header, "fortran_order")
	if err != nil {
		return nil, err
	}
	if order != "False" {
		return nil, fmt.Errorf("fortran_order %s: only C-order arrays are supported (save with np.ascontiguousarray)", order)
	}
	shapeText, err := npyField(header, "shape")
	if err != nil {
		return nil, err
	}
	var dims []int64
	for _, p := range strings.Split(strings.Trim(shapeText, "() "), ",") {
		if p = strings.TrimSpace(p); p == "" {
			continue
		}
		d, err := strconv.ParseInt(strings.TrimSuffix(p, "L"), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("bad shape %s", shapeText)
		}
		dims = append(dims, d)
	}
	shape, err := checkShape(dims)
	if err != nil {
		return nil, err
	}
	if len(descr) < 2 {
		return nil, fmt.Errorf("bad dtype %q", descr)
	}
	endian, code := descr[0], descr[1:]
	nt, ok := npyTypes[code]
	if !ok || endian == '>' && nt.size > 1 {
		return nil, fmt.Errorf("dtype %q is not supported (little-endian or single-byte f2, f4, f8, i1, i2, i4, i8, u1, u2, u4, u8, b1 are)", descr)
	}
	n := tensor.NumElements(shape)
	if len(body) != n*nt.size {
		return nil, fmt.Errorf("a %s array of shape %v needs %d bytes of data, the file holds %d (truncated or corrupt)", descr, dims, n*nt.size, len(body))
	}
	return decodeElems(nt, shape, body), nil
}

// decodeElems turns little-endian elements into a tensor.
func decodeElems(nt npyType, shape []int, body []byte) *tensor.Tensor {
	out := tensor.New(nt.dt, shape)
	if nt.read == nil {
		copy(out.Data, body)
		if nt.dt == ir.Bool {
			for i := range out.Data {
				out.Data[i] &= 1
			}
		}
		return out
	}
	for i := range out.NumElements() {
		out.SetFloat64At(i, nt.read(body[i*nt.size:]))
	}
	return out
}

// npyField returns the text of a key's value in a .npy header, a Python
// dict literal such as {'descr': '<f4', 'fortran_order': False, 'shape': (1, 3), }.
func npyField(header, key string) (string, error) {
	i := strings.Index(header, "'"+key+"'")
	if i < 0 {
		i = strings.Index(header, `"`+key+`"`)
	}
	if i < 0 {
		return "", fmt.Errorf("header %q has no %s", strings.TrimSpace(header), key)
	}
	rest := strings.TrimLeft(header[i+len(key)+2:], " ")
	if !strings.HasPrefix(rest, ":") {
		return "", fmt.Errorf("header %q: bad %s", strings.TrimSpace(header), key)
	}
	rest = strings.TrimLeft(rest[1:], " ")
	if strings.HasPrefix(rest, "(") {
		if j := strings.Index(rest, ")"); j >= 0 {
			return rest[:j+1], nil
		}
		return "", fmt.Errorf("header %q: bad %s", strings.TrimSpace(header), key)
	}
	if j := strings.IndexAny(rest, ",}"); j >= 0 {
		return strings.TrimSpace(rest[:j]), nil
	}
	return "", fmt.Errorf("header %q: bad %s", strings.TrimSpace(header), key)
}

// WriteNPY writes t as a .npy file (version 1.0; f16 as <f2, bf16 widened
// to <f4, bool as |b1).
func WriteNPY(w io.Writer, t *tensor.Tensor) error {
	descr, data := "", t.Data
	switch t.DType {
	case ir.F32:
		descr = "<f4"
	case ir.F16:
		descr = "<f2"
	case ir.BF16:
		descr, data = "<f4", t.Convert(ir.F32).Data
	case ir.I32:
		descr = "<i4"
	case ir.I64:
		descr = "<i8"
	case ir.Bool:
		descr = "|b1"
	default:
		return fmt.Errorf("cannot write a %s tensor as .npy", t.DType)
	}
	dims := make([]string, len(t.Shape))
	for i, d := range t.Shape {
		dims[i] = strconv.Itoa(d)
	}
	shape := strings.Join(dims, ", ")
	if len(dims) == 1 {
		shape += ","
	}
	header := fmt.Sprintf("{'descr': '%s', 'fortran_order': False, 'shape': (%s), }", descr, shape)
	// Pad with spaces and a newline so the data starts at a multiple of 64.
	pad := 64 - (10+len(header)+1)%64
	if pad == 64 {
		pad = 0
	}
	header += strings.Repeat(" ", pad) + "\n"
	var head bytes.Buffer
	head.Write(npyMagic)
	head.Write([]byte{1, 0})
	binary.Write(&head, binary.LittleEndian, uint16(len(header)))
	head.WriteString(header)
	if _, err := w.Write(head.Bytes()); err != nil {
		return err
	}
	_, err := w.Write(data)
	return err
}

// WriteNPYFile writes t as a .npy file at path, atomically.
func WriteNPYFile(path string, t *tensor.Tensor) error {
	var buf bytes.Buffer
	if err := WriteNPY(&buf, t); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return atomicfile.WriteFile(path, buf.Bytes())
}

// The ONNX element types a TensorProto input may have, read from raw_data.
var protoTypes = map[onnxpb.TensorProto_DataType]npyType{
	onnxpb.TensorProto_FLOAT:   npyTypes["f4"],
	onnxpb.TensorProto_FLOAT16: npyTypes["f2"],
	onnxpb.TensorProto_DOUBLE:  npyTypes["f8"],
	onnxpb.TensorProto_INT8:    npyTypes["i1"],
	onnxpb.TensorProto_UINT8:   npyTypes["u1"],
	onnxpb.TensorProto_INT16:   npyTypes["i2"],
	onnxpb.TensorProto_UINT16:  npyTypes["u2"],
	onnxpb.TensorProto_INT32:   npyTypes["i4"],
	onnxpb.TensorProto_UINT32:  npyTypes["u4"],
	onnxpb.TensorProto_INT64:   npyTypes["i8"],
	onnxpb.TensorProto_UINT64:  npyTypes["u8"],
	onnxpb.TensorProto_BOOL:    npyTypes["b1"],
}

// parseTensorProto decodes an ONNX TensorProto holding its data inline
// (raw_data or the typed fields).
func parseTensorProto(data []byte) (*tensor.Tensor, error) {
	tp := &onnxpb.TensorProto{}
	if err := proto.Unmarshal(data, tp); err != nil {
		return nil, fmt.Errorf("not a valid TensorProto (protobuf: %v)", err)
	}
	et := onnxpb.TensorProto_DataType(tp.GetDataType())
	nt, ok := protoTypes[et]
	if !ok {
		return nil, fmt.Errorf("element type %s is not supported", et)
	}
	if tp.GetDataLocation() == onnxpb.TensorProto_EXTERNAL || tp.GetSegment() != nil {
		return nil, fmt.Errorf("tensors with external or segmented data are not supported")
	}
	shape, err := checkShape(tp.GetDims())
	if err != nil {
		return nil, err
	}
	n := tensor.NumElements(shape)
	if raw := tp.GetRawData(); raw != nil {
		if len(raw) != n*nt.size {
			return nil, fmt.Errorf("%s%v needs %d bytes of raw data, the file holds %d (truncated or corrupt)", et, tp.GetDims(), n*nt.size, len(raw))
		}
		return decodeElems(nt, shape, raw), nil
	}
	out := tensor.New(nt.dt, shape)
	var have int
	var at func(i int) float64
	switch et {
	case onnxpb.TensorProto_FLOAT:
		d := tp.GetFloatData()
		have, at = len(d), func(i int) float64 { return float64(d[i]) }
	case onnxpb.TensorProto_DOUBLE:
		d := tp.GetDoubleData()
		have, at = len(d), func(i int) float64 { return d[i] }
	case onnxpb.TensorProto_INT64:
		d := tp.GetInt64Data()
		have, at = len(d), func(i int) float64 { return float64(d[i]) }
	case onnxpb.TensorProto_UINT32, onnxpb.TensorProto_UINT64:
		d := tp.GetUint64Data()
		have, at = len(d), func(i int) float64 { return float64(d[i]) }
	case onnxpb.TensorProto_FLOAT16: // the bits, in int32_data
		d := tp.GetInt32Data()
		if len(d) != n {
			return nil, fmt.Errorf("%s%v needs %d elements, the file holds %d", et, tp.GetDims(), n, len(d))
		}
		for i, v := range d {
			binary.LittleEndian.PutUint16(out.Data[2*i:], uint16(v))
		}
		return out, nil
	default: // the narrow integers and bool, in int32_data
		d := tp.GetInt32Data()
		have, at = len(d), func(i int) float64 { return float64(d[i]) }
	}
	if have != n {
		return nil, fmt.Errorf("%s%v needs %d elements, the file holds %d", et, tp.GetDims(), n, have)
	}
	for i := range n {
		if nt.dt == ir.I64 && et == onnxpb.TensorProto_INT64 {
			binary.LittleEndian.PutUint64(out.Data[8*i:], uint64(tp.GetInt64Data()[i]))
			continue
		}
		out.SetFloat64At(i, at(i))
	}
	return out, nil
}

// InputSet is one set of inputs of a model that is not a language model,
// by input name (see Arguments), with a name for messages and manifests.
type InputSet struct {
	Name   string
	Inputs map[string]Input
}

// ReadInputSets reads the input sets in dir: one subfolder per set, in
// name order, holding one file per input, named after it (NAME.npy,
// NAME.pb, or raw values in a file of any other extension); an ONNX
// TensorProto's own name, when it has one, names its input, and
// input_<k> stands for the k-th input (the layout of the ONNX model zoo's
// test_data_set_<n> folders). Files with a shape are read now; raw ones
// when the input's type is known.
func ReadInputSets(dir string) ([]InputSet, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var sets []InputSet
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		set, err := readInputSet(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		sets = append(sets, InputSet{Name: e.Name(), Inputs: set})
	}
	if len(sets) == 0 {
		return nil, fmt.Errorf("%s: no input sets (want one folder per set, each with a file per input)", dir)
	}
	return sets, nil
}

func readInputSet(dir string) (map[string]Input, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	set := map[string]Input{}
	for _, e := range entries {
		if e.IsDir() || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		path := filepath.Join(dir, e.Name())
		name := strings.TrimSuffix(e.Name(), filepath.Ext(e.Name()))
		in := Input{File: path}
		if HasShape(path) {
			data, err := safeio.ReadFile(path, safeio.MaxTensor)
			if err != nil {
				return nil, err
			}
			if in.Tensor, err = parseTensorFile(path, data); err != nil {
				return nil, err
			}
			if strings.EqualFold(filepath.Ext(path), ".pb") {
				tp := &onnxpb.TensorProto{}
				if proto.Unmarshal(data, tp) == nil && tp.GetName() != "" {
					name = tp.GetName()
				}
			}
		}
		if prev, dup := set[name]; dup {
			return nil, fmt.Errorf("%s: %s and %s are both input %q", dir, filepath.Base(prev.File), e.Name(), name)
		}
		set[name] = in
	}
	if len(set) == 0 {
		return nil, fmt.Errorf("%s: an input set folder with no input files", dir)
	}
	return set, nil
}

// ParseValue reads a value written on a command line: a number, true,
// false, or a list [a, b, ...] of numbers (a scalar, or a vector for a
// list); integers are i64, other numbers f32, true and false bool. ok is
// false for anything else (a file name, say).
func ParseValue(s string) (t *tensor.Tensor, ok bool) {
	s = strings.TrimSpace(s)
	switch s {
	case "true", "false":
		t := tensor.New(ir.Bool, nil)
		if s == "true" {
			t.Data[0] = 1
		}
		return t, true
	}
	list := strings.HasPrefix(s, "[") && strings.HasSuffix(s, "]")
	items := []string{s}
	if list {
		items = strings.Split(s[1:len(s)-1], ",")
	}
	if len(items) > maxValueItems {
		return nil, false
	}
	vals := make([]float64, len(items))
	integer := true
	for i, it := range items {
		it = strings.TrimSpace(it)
		v, err := strconv.ParseFloat(it, 64)
		if err != nil {
			return nil, false
		}
		if _, err := strconv.ParseInt(it, 10, 64); err != nil {
			integer = false
		}
		vals[i] = v
	}
	var shape []int
	if list {
		shape = []int{len(vals)}
	}
	dt := ir.F32
	if integer {
		dt = ir.I64
	}
	t = tensor.New(dt, shape)
	for i, v := range vals {
		if dt == ir.I64 {
			n, _ := strconv.ParseInt(strings.TrimSpace(items[i]), 10, 64)
			binary.LittleEndian.PutUint64(t.Data[8*i:], uint64(n))
			continue
		}
		t.SetFloat64At(i, v)
	}
	return t, true
}

// maxValueItems bounds the elements of a value written on a command line.
const maxValueItems = 1 << 16
