// Package safetensors reads and writes the safetensors format: an 8-byte
// little-endian header length N, N bytes of JSON mapping each tensor name to
// {"dtype", "shape", "data_offsets": [begin, end]} (offsets relative to the
// data section) plus an optional "__metadata__" object of strings, then the
// data section, in which the tensors lie back to back.
//
// Reading validates every field: known dtypes (F32, F16, BF16, I32, I64,
// BOOL, and, as tapml's extension for weights kept quantized, ggml's block
// formats by their ggml names Q4_0 ... Q6_K: the logical shape, whose last
// dim is whole blocks, and ggml's blocks as the data), non-negative shapes
// whose element count in the dtype's bytes is the tensor's byte length, offsets inside the data section, tensors contiguous
// and non-overlapping and covering the whole data section. Errors name the
// file and the tensor. Reading is lazy: Open reads the header only; Tensor
// reads one tensor. Write is atomic (a temporary file beside the target,
// renamed into place).
package safetensors

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/bits"
	"os"
	"sort"
	"strconv"

	"github.com/tapml/tapml/internal/atomicfile"
	"github.com/tapml/tapml/ir"
	"github.com/tapml/tapml/tensor"
)

// MaxHeaderSize bounds the JSON header (as the reference implementation
// does), so a corrupt length cannot make a reader allocate gigabytes.
const MaxHeaderSize = 100 << 20

const metadataKey = "__metadata__"

var dtypeNames = []struct {
	name string
	dt   ir.DType
}{{"F32", ir.F32}, {"F16", ir.F16}, {"BF16", ir.BF16}, {"I32", ir.I32}, {"I64", ir.I64}, {"BOOL", ir.Bool},
	{"Q4_0", ir.Q4_0}, {"Q4_1", ir.Q4_1}, {"Q5_0", ir.Q5_0}, {"Q5_1", ir.Q5_1}, {"Q8_0", ir.Q8_0},
	{"Q2_K", ir.Q2_K}, {"Q3_K", ir.Q3_K}, {"Q4_K", ir.Q4_K}, {"Q5_K", ir.Q5_K}, {"Q6_K", ir.Q6_K}}

// DTypeName returns the safetensors name of a dtype ("F32", ...).
func DTypeName(dt ir.DType) (string, bool) {
	for _, d := range dtypeNames {
		if d.dt == dt {
			return d.name, true
		}
	}
	return "", false
}

// ParseDType returns the dtype of a safetensors dtype name.
func ParseDType(name string) (ir.DType, bool) {
	for _, d := range dtypeNames {
		if d.name == name {
			return d.dt, true
		}
	}
	return ir.Invalid, false
}

func supportedNames() string {
	s := ""
	for i, d := range dtypeNames {
		if i > 0 {
			s += ", "
		}
		s += d.name
	}
	return s
}

// Info describes one tensor of a file.
type Info struct {
	Name  string
	DType ir.DType
	Shape []int
	// Begin and End are the tensor's byte range within the data section.
	Begin, End int64
}

// Size is the tensor's length in bytes.
func (i Info) Size() int64 { return i.End - i.Begin }

// File is an open safetensors file whose header has been read and checked.
// Its methods are safe for concurrent use (reads use ReadAt).
type File struct {
	Name     string            // the file's name in errors
	Metadata map[string]string // the __metadata__ entries (empty when absent)
	infos    []Info            // in data order
	byName   map[string]int
	r        io.ReaderAt
	data     int64 // offset of the data section
	closer   io.Closer
}

// Open opens a safetensors file and reads its header.
func Open(path string) (*File, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	sf, err := NewReader(f, st.Size(), path)
	if err != nil {
		f.Close()
		return nil, err
	}
	sf.closer = f
	return sf, nil
}

// Close closes the underlying file (a no-op for NewReader's files).
func (f *File) Close() error {
	if f.closer == nil {
		return nil
	}
	c := f.closer
	f.closer = nil
	return c.Close()
}

func (f *File) errorf(format string, args ...any) error {
	return fmt.Errorf("%s: %s", f.Name, fmt.Sprintf(format, args...))
}

// NewReader reads the header of a safetensors file of size bytes behind r;
// name is used in errors.
func NewReader(r io.ReaderAt, size int64, name string) (*File, error) {
	f := &File{Name: name, Metadata: map[string]string{}, byName: map[string]int{}, r: r}
	if size < 8 {
		return nil, f.errorf("too short for a safetensors file (%d bytes; the header length alone takes 8)", size)
	}
	var lenBuf [8]byte
	if _, err := r.ReadAt(lenBuf[:], 0); err != nil {
		return nil, f.errorf("reading the header length: %v", err)
	}
	n := binary.LittleEndian.Uint64(lenBuf[:])
	if n > MaxHeaderSize {
		return nil, f.errorf("header length %d exceeds the limit of %d bytes", n, MaxHeaderSize)
	}
	if n > uint64(size-8) {
		return nil, f.errorf("header length %d exceeds the file (%d bytes after the length)", n, size-8)
	}
	hdr := make([]byte, n)
	if _, err := r.ReadAt(hdr, 8); err != nil {
		return nil, f.errorf("reading the header: %v", err)
	}
	f.data = 8 + int64(n)
	if err := f.parseHeader(hdr, size-f.data); err != nil {
		return nil, err
	}
	return f, nil
}

type rawEntry struct {
	Dtype       *string  `json:"dtype"`
	Shape       *[]int64 `json:"shape"`
	DataOffsets *[]int64 `json:"data_offsets"`
}

func (f *File) parseHeader(hdr []byte, dataLen int64) error {
	trimmed := bytes.TrimLeft(hdr, " \t\r\n")
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return f.errorf("header is not a JSON object")
	}
	dec := json.NewDecoder(bytes.NewReader(hdr))
	dec.UseNumber()
	if _, err := dec.Token(); err != nil {
		return f.errorf("header JSON: %v", err)
	}
	sawMeta := false
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return f.errorf("header JSON: %v", err)
		}
		key, ok := tok.(string)
		if !ok {
			return f.errorf("header JSON: expected a key, got %v", tok)
		}
		if key == metadataKey {
			if sawMeta {
				return f.errorf("%s given twice", metadataKey)
			}
			sawMeta = true
			if err := f.parseMetadata(dec); err != nil {
				return err
			}
			continue
		}
		if _, dup := f.byName[key]; dup {
			return f.errorf("tensor %q: listed twice in the header", key)
		}
		if key == "" {
			return f.errorf("a tensor has an empty name")
		}
		var e rawEntry
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return f.errorf("tensor %q: header JSON: %v", key, err)
		}
		ed := json.NewDecoder(bytes.NewReader(raw))
		ed.DisallowUnknownFields()
		if err := ed.Decode(&e); err != nil {
			return f.errorf("tensor %q: header entry %s: %v", key, raw, err)
		}
		info, err := checkEntry(key, e, dataLen)
		if err != nil {
			return f.errorf("tensor %q: %v", key, err)
		}
		f.byName[key] = len(f.infos)
		f.infos = append(f.infos, info)
	}
	if _, err := dec.Token(); err != nil {
		return f.errorf("header JSON: %v", err)
	}
	if rest := hdr[dec.InputOffset():]; len(bytes.TrimLeft(rest, " \t\r\n")) > 0 {
		return f.errorf("header has data after the JSON object")
	}
	return f.checkLayout(dataLen)
}

func (f *File) parseMetadata(dec *json.Decoder) error {
	var raw json.RawMessage
	if err := dec.Decode(&raw); err != nil {
		return f.errorf("%s: %v", metadataKey, err)
	}
	if bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		return nil
	}
	md := json.NewDecoder(bytes.NewReader(raw))
	tok, err := md.Token()
	if d, ok := tok.(json.Delim); err != nil || !ok || d != '{' {
		return f.errorf("%s must be an object of strings", metadataKey)
	}
	for md.More() {
		kt, err := md.Token()
		if err != nil {
			return f.errorf("%s: %v", metadataKey, err)
		}
		k, _ := kt.(string)
		vt, err := md.Token()
		if err != nil {
			return f.errorf("%s: %v", metadataKey, err)
		}
		v, ok := vt.(string)
		if !ok {
			return f.errorf("%s: value of %q must be a string, got %v", metadataKey, k, vt)
		}
		if _, dup := f.Metadata[k]; dup {
			return f.errorf("%s: key %q given twice", metadataKey, k)
		}
		f.Metadata[k] = v
	}
	return nil
}

// checkEntry validates one tensor's header entry.
func checkEntry(name string, e rawEntry, dataLen int64) (Info, error) {
	info := Info{Name: name}
	if e.Dtype == nil || e.Shape == nil || e.DataOffsets == nil {
		return info, fmt.Errorf("header entry needs dtype, shape and data_offsets")
	}
	dt, ok := ParseDType(*e.Dtype)
	if !ok {
		return info, fmt.Errorf("unsupported dtype %q (supported: %s)", *e.Dtype, supportedNames())
	}
	info.DType = dt
	elems := uint64(1)
	for _, d := range *e.Shape {
		if d < 0 || d > 1<<40 {
			return info, fmt.Errorf("shape %v has a bad dim %d", *e.Shape, d)
		}
		hi, lo := bits.Mul64(elems, uint64(d))
		if hi != 0 || lo > math.MaxInt64 {
			return info, fmt.Errorf("shape %v is too large", *e.Shape)
		}
		elems = lo
		info.Shape = append(info.Shape, int(d))
	}
	if info.Shape == nil {
		info.Shape = []int{}
	}
	blockElems, blockBytes := dt.Block()
	if blockElems > 1 && (len(info.Shape) == 0 || info.Shape[len(info.Shape)-1]%blockElems != 0) {
		return info, fmt.Errorf("shape %v: a %s tensor's last dim must be whole blocks of %d", *e.Shape, *e.Dtype, blockElems)
	}
	hi, size := bits.Mul64(elems/uint64(blockElems), uint64(blockBytes))
	if hi != 0 || size > math.MaxInt64 {
		return info, fmt.Errorf("shape %v is too large", *e.Shape)
	}
	offs := *e.DataOffsets
	if len(offs) != 2 {
		return info, fmt.Errorf("data_offsets %v must be [begin, end]", offs)
	}
	begin, end := offs[0], offs[1]
	if begin < 0 || end < begin {
		return info, fmt.Errorf("data_offsets %v: need 0 <= begin <= end", offs)
	}
	if end > dataLen {
		return info, fmt.Errorf("data_offsets %v: end is past the data section (%d bytes)", offs, dataLen)
	}
	if uint64(end-begin) != size {
		return info, fmt.Errorf("data_offsets %v hold %d bytes, but %s%v takes %d", offs, end-begin, *e.Dtype, info.Shape, size)
	}
	info.Begin, info.End = begin, end
	return info, nil
}

// checkLayout checks that the tensors tile the data section exactly.
func (f *File) checkLayout(dataLen int64) error {
	order := make([]Info, len(f.infos))
	copy(order, f.infos)
	sort.SliceStable(order, func(i, j int) bool {
		if order[i].Begin != order[j].Begin {
			return order[i].Begin < order[j].Begin
		}
		return order[i].End < order[j].End
	})
	pos := int64(0)
	prev := ""
	for _, in := range order {
		switch {
		case in.Begin > pos && prev == "":
			return f.errorf("tensor %q: starts at %d, leaving bytes 0..%d of the data section unused", in.Name, in.Begin, in.Begin)
		case in.Begin > pos:
			return f.errorf("tensor %q: starts at %d, leaving a gap after tensor %q (which ends at %d)", in.Name, in.Begin, prev, pos)
		case in.Begin < pos:
			return f.errorf("tensor %q: bytes %d..%d overlap tensor %q (which ends at %d)", in.Name, in.Begin, in.End, prev, pos)
		}
		pos, prev = in.End, in.Name
	}
	if pos != dataLen {
		return f.errorf("data section has %d bytes, but the tensors cover %d", dataLen, pos)
	}
	f.infos = order
	for i, in := range order {
		f.byName[in.Name] = i
	}
	return nil
}

// Names returns the tensor names in data order.
func (f *File) Names() []string {
	out := make([]string, len(f.infos))
	for i, in := range f.infos {
		out[i] = in.Name
	}
	return out
}

// Infos returns the tensors' descriptions in data order.
func (f *File) Infos() []Info {
	out := make([]Info, len(f.infos))
	for i, in := range f.infos {
		in.Shape = append([]int{}, in.Shape...)
		out[i] = in
	}
	return out
}

// Info returns the description of the named tensor.
func (f *File) Info(name string) (Info, bool) {
	i, ok := f.byName[name]
	if !ok {
		return Info{}, false
	}
	in := f.infos[i]
	in.Shape = append([]int{}, in.Shape...)
	return in, true
}

// Offset returns the absolute file offset of the named tensor's bytes.
func (f *File) Offset(name string) (int64, bool) {
	i, ok := f.byName[name]
	if !ok {
		return 0, false
	}
	return f.data + f.infos[i].Begin, true
}

// Bytes reads the raw little-endian bytes of the named tensor.
func (f *File) Bytes(name string) ([]byte, error) {
	i, ok := f.byName[name]
	if !ok {
		return nil, f.errorf("no tensor %q", name)
	}
	in := f.infos[i]
	buf := make([]byte, in.Size())
	if len(buf) == 0 {
		return buf, nil
	}
	if _, err := f.r.ReadAt(buf, f.data+in.Begin); err != nil {
		return nil, f.errorf("tensor %q: reading %d bytes: %v", name, len(buf), err)
	}
	return buf, nil
}

// Tensor reads the named tensor.
func (f *File) Tensor(name string) (*tensor.Tensor, error) {
	b, err := f.Bytes(name)
	if err != nil {
		return nil, err
	}
	in := f.infos[f.byName[name]]
	t, err := tensor.FromBytes(in.DType, in.Shape, b)
	if err != nil {
		return nil, f.errorf("tensor %q: %v", name, err)
	}
	return t, nil
}

// ReadFile reads every tensor of a file, with its metadata.
func ReadFile(path string) (map[string]*tensor.Tensor, map[string]string, error) {
	f, err := Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	out := map[string]*tensor.Tensor{}
	for _, in := range f.infos {
		t, err := f.Tensor(in.Name)
		if err != nil {
			return nil, nil, err
		}
		out[in.Name] = t
	}
	return out, f.Metadata, nil
}

// Entry is one tensor to write. Data is called once, while writing, so
// large tensors can come from files rather than memory; it must return
// exactly the tensor's bytes.
type Entry struct {
	Name  string
	DType ir.DType
	Shape []int
	Data  func() ([]byte, error)
}

// TensorEntry makes an entry of an in-memory tensor.
func TensorEntry(name string, t *tensor.Tensor) Entry {
	return Entry{Name: name, DType: t.DType, Shape: t.Shape, Data: func() ([]byte, error) { return t.Data, nil }}
}

// Encode writes a safetensors file of the entries, in order, to w.
func Encode(w io.Writer, entries []Entry, meta map[string]string) error {
	var hdr bytes.Buffer
	hdr.WriteByte('{')
	first := true
	comma := func() {
		if !first {
			hdr.WriteByte(',')
		}
		first = false
	}
	if len(meta) > 0 {
		keys := make([]string, 0, len(meta))
		for k := range meta {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		comma()
		hdr.WriteString(strconv.Quote(metadataKey) + ":{")
		for i, k := range keys {
			if i > 0 {
				hdr.WriteByte(',')
			}
			kb, _ := json.Marshal(k)
			vb, _ := json.Marshal(meta[k])
			hdr.Write(kb)
			hdr.WriteByte(':')
			hdr.Write(vb)
		}
		hdr.WriteByte('}')
	}
	seen := map[string]bool{}
	sizes := make([]int64, len(entries))
	offset := int64(0)
	for i, e := range entries {
		switch {
		case e.Name == "":
			return fmt.Errorf("safetensors: entry %d has an empty name", i)
		case e.Name == metadataKey:
			return fmt.Errorf("safetensors: a tensor cannot be named %s", metadataKey)
		case seen[e.Name]:
			return fmt.Errorf("safetensors: tensor %q given twice", e.Name)
		case e.Data == nil:
			return fmt.Errorf("safetensors: tensor %q has no data", e.Name)
		}
		seen[e.Name] = true
		dn, ok := DTypeName(e.DType)
		if !ok {
			return fmt.Errorf("safetensors: tensor %q: dtype %s cannot be stored (supported: %s)", e.Name, e.DType, supportedNames())
		}
		for _, d := range e.Shape {
			if d < 0 {
				return fmt.Errorf("safetensors: tensor %q: negative dim in shape %v", e.Name, e.Shape)
			}
		}
		size := int64(tensor.ByteSize(e.DType, e.Shape))
		if size < 0 {
			return fmt.Errorf("safetensors: tensor %q: %s%v is not whole blocks", e.Name, e.DType, e.Shape)
		}
		sizes[i] = size
		shape := e.Shape
		if shape == nil {
			shape = []int{}
		}
		nb, _ := json.Marshal(e.Name)
		sb, _ := json.Marshal(shape)
		comma()
		fmt.Fprintf(&hdr, `%s:{"dtype":%q,"shape":%s,"data_offsets":[%d,%d]}`, nb, dn, sb, offset, offset+size)
		offset += size
	}
	hdr.WriteByte('}')
	// Pad with spaces so the data section starts 8-byte aligned.
	for (8+hdr.Len())%8 != 0 {
		hdr.WriteByte(' ')
	}
	var lenBuf [8]byte
	binary.LittleEndian.PutUint64(lenBuf[:], uint64(hdr.Len()))
	if _, err := w.Write(lenBuf[:]); err != nil {
		return err
	}
	if _, err := w.Write(hdr.Bytes()); err != nil {
		return err
	}
	for i, e := range entries {
		b, err := e.Data()
		if err != nil {
			return fmt.Errorf("safetensors: tensor %q: %w", e.Name, err)
		}
		if int64(len(b)) != sizes[i] {
			return fmt.Errorf("safetensors: tensor %q: %s%v needs %d bytes, got %d", e.Name, e.DType, e.Shape, sizes[i], len(b))
		}
		if _, err := w.Write(b); err != nil {
			return err
		}
	}
	return nil
}

// Write writes a safetensors file atomically: to a temporary file in the
// same folder, synced, then renamed over path (mode 0644). On error path is
// untouched.
func Write(path string, entries []Entry, meta map[string]string) error {
	return atomicfile.Write(path, func(w io.Writer) error {
		if err := Encode(w, entries, meta); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		return nil
	})
}

// WriteTensors writes named in-memory tensors (in the order of names).
func WriteTensors(path string, names []string, tensors map[string]*tensor.Tensor, meta map[string]string) error {
	entries := make([]Entry, len(names))
	for i, n := range names {
		t := tensors[n]
		if t == nil {
			return errors.New("safetensors: no tensor " + strconv.Quote(n))
		}
		entries[i] = TensorEntry(n, t)
	}
	return Write(path, entries, meta)
}
