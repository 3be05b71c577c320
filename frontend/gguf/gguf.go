// Package gguf reads GGUF model files (llama.cpp's format, versions 2 and
// 3): a header of typed metadata and tensor descriptions followed by an
// aligned data section. Open memory-maps a file and parses it; Load turns
// a file of a supported architecture (families, load.go: llama.cpp's
// architectures onto the families of frontend/arch, one file each) into
// an ir.Module and its embedded vocabulary into a tokenizer.
//
// Every length, count and offset read from a file is checked against the
// bytes that remain before anything is allocated for it, so a corrupt or
// hostile header yields an error, never a panic or a huge allocation.
package gguf

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"os"

	"github.com/tapml/tapml/frontend/internal/mmap"
)

// Magic is the first four bytes of every GGUF file.
const Magic = "GGUF"

// DefaultAlignment is the data alignment when general.alignment is absent.
const DefaultAlignment = 32

// MaxDims is the largest number of dims a tensor may have (GGML_MAX_DIMS).
const MaxDims = 4

// maxNesting bounds how deeply arrays may nest inside arrays.
const maxNesting = 16

// Sniff reports whether header (the first bytes of a file) starts like a
// GGUF file. It checks the magic only, so that Load can explain what is
// wrong with a file of an unsupported version or byte order.
func Sniff(header []byte) bool {
	return len(header) >= len(Magic) && string(header[:len(Magic)]) == Magic
}

// File is a parsed GGUF file. Metadata and tensor descriptions are decoded
// (and copied) at parse time; tensor data stays in the file's bytes.
type File struct {
	Path       string // the name given to Open or Parse, used in every error
	Version    uint32
	Alignment  int64 // general.alignment, or DefaultAlignment
	Metadata   []KV  // in file order; keys are unique
	Tensors    []TensorInfo
	DataOffset int64 // where the data section starts in the file

	data    []byte       // the whole file
	unmap   func() error // releases the mapping of data (Open's files)
	keys    map[string]int
	tensors map[string]int
}

// KV is one metadata entry.
type KV struct {
	Key   string
	Value Value
}

// TensorInfo describes one tensor of the file.
type TensorInfo struct {
	Name   string
	Dims   []uint64 // GGML order: Dims[0] is the innermost (fastest varying) dim
	Type   GGMLType
	Offset uint64 // relative to the data section
	Size   int64  // bytes of data; -1 when Type's layout is not known here
}

// Shape returns the row-major shape (Dims reversed), as tapml writes it.
func (t *TensorInfo) Shape() []int {
	s := make([]int, len(t.Dims))
	for i, d := range t.Dims {
		s[len(t.Dims)-1-i] = int(d)
	}
	return s
}

// Elements is the number of elements (the product of Dims).
func (t *TensorInfo) Elements() int64 {
	n := int64(1)
	for _, d := range t.Dims {
		n *= int64(d)
	}
	return n
}

// Error is a problem with a GGUF file: its name, where in the file (when
// it is about a byte position, else -1) and what is wrong.
type Error struct {
	File   string
	Offset int64
	Msg    string
}

func (e *Error) Error() string {
	if e.Offset >= 0 {
		return fmt.Sprintf("%s: gguf: at byte %d: %s", e.File, e.Offset, e.Msg)
	}
	return fmt.Sprintf("%s: gguf: %s", e.File, e.Msg)
}

func (f *File) errorf(format string, args ...any) error {
	return &Error{File: f.Path, Offset: -1, Msg: fmt.Sprintf(format, args...)}
}

// Open memory-maps the file at path read-only and parses it. The mapping
// stays valid until Close; slices returned by TensorData point into it.
func Open(path string) (*File, error) {
	fd, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer fd.Close()
	st, err := fd.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, &Error{File: path, Offset: -1, Msg: "not a regular file"}
	}
	size := st.Size()
	if size < 8 {
		return nil, &Error{File: path, Offset: -1, Msg: fmt.Sprintf("file is %d bytes, too short for a GGUF header", size)}
	}
	if size != int64(int(size)) {
		return nil, &Error{File: path, Offset: -1, Msg: fmt.Sprintf("file of %d bytes is too large to map", size)}
	}
	data, unmap, err := mmap.Map(fd, size)
	if err != nil {
		return nil, &Error{File: path, Offset: -1, Msg: err.Error()}
	}
	f, err := Parse(path, data)
	if err != nil {
		unmap()
		return nil, err
	}
	f.unmap = unmap
	return f, nil
}

// Close unmaps a file opened with Open. Data obtained from it must not be
// used afterwards. It does nothing for a file from Parse.
func (f *File) Close() error {
	if f.unmap == nil {
		return nil
	}
	err := f.unmap()
	f.data, f.unmap = nil, nil
	return err
}

// Parse parses a whole GGUF file held in data; name is used in errors. The
// File refers to data for tensor contents (it does not copy them).
func Parse(name string, data []byte) (*File, error) {
	f := &File{Path: name, data: data, Alignment: DefaultAlignment, keys: map[string]int{}, tensors: map[string]int{}}
	r := &reader{f: f, b: data}
	if len(data) < 8 {
		return nil, r.fail(0, "file is %d bytes, too short for a GGUF header", len(data))
	}
	if !Sniff(data) {
		return nil, r.fail(0, "bad magic %q: not a GGUF file (want %q)", data[:4], Magic)
	}
	r.off = 4
	f.Version = r.u32()
	switch {
	case f.Version == 2 || f.Version == 3:
	case f.Version == 1:
		return nil, r.fail(4, "GGUF version 1 is not supported (supported: 2, 3); re-convert the model with a current llama.cpp")
	case bytes.Equal(data[4:8], []byte{0, 0, 0, 2}) || bytes.Equal(data[4:8], []byte{0, 0, 0, 3}):
		return nil, r.fail(4, "big-endian GGUF files are not supported")
	default:
		return nil, r.fail(4, "unsupported GGUF version %d (supported: 2, 3)", f.Version)
	}
	nTensors := r.u64()
	nKV := r.u64()
	if r.err != nil {
		return nil, r.err
	}
	// The smallest metadata entry is a key length, a type and one byte;
	// the smallest tensor info is a name length, n_dims, type and offset.
	const minKV, minTensor = 8 + 4 + 1, 8 + 4 + 4 + 8
	if nKV > uint64(r.left()/minKV) {
		return nil, r.fail(16, "metadata count %d cannot fit in the %d bytes that follow", nKV, r.left())
	}
	if nTensors > uint64(r.left()/minTensor) {
		return nil, r.fail(8, "tensor count %d cannot fit in the %d bytes that follow", nTensors, r.left())
	}
	f.Metadata = make([]KV, 0, nKV)
	for i := uint64(0); i < nKV; i++ {
		at := int64(r.off)
		key := r.str(label{what: "a metadata key"})
		vt := ValueType(r.u32())
		if r.err != nil {
			return nil, r.err
		}
		v, err := r.value(vt, 0, key)
		if err != nil {
			return nil, err
		}
		if _, dup := f.keys[key]; dup {
			return nil, r.fail(at, "metadata key %s appears twice", quoteKey(key))
		}
		f.keys[key] = len(f.Metadata)
		f.Metadata = append(f.Metadata, KV{Key: key, Value: v})
	}
	if v, ok := f.Get("general.alignment"); ok {
		a, ok := v.Int()
		if !ok || a <= 0 || a&(a-1) != 0 || a > 1<<20 {
			return nil, f.errorf("general.alignment %s must be a power of two integer (at most 2^20)", v)
		}
		f.Alignment = a
	}
	f.Tensors = make([]TensorInfo, 0, nTensors)
	for i := uint64(0); i < nTensors; i++ {
		at := int64(r.off)
		t := TensorInfo{Name: r.str(label{what: "a tensor name"})}
		nd := r.u32()
		if r.err != nil {
			return nil, r.err
		}
		if nd == 0 || nd > MaxDims {
			return nil, r.fail(at, "tensor %q has %d dims (want 1 to %d)", t.Name, nd, MaxDims)
		}
		t.Dims = make([]uint64, nd)
		elems := uint64(1)
		for j := range t.Dims {
			d := r.u64()
			if r.err != nil {
				return nil, r.err
			}
			if d == 0 || d > math.MaxInt32 {
				return nil, r.fail(at, "tensor %q has dim %d = %d (want 1 to 2^31-1)", t.Name, j, d)
			}
			if elems > math.MaxInt64/d {
				return nil, r.fail(at, "tensor %q: element count overflows", t.Name)
			}
			elems *= d
			t.Dims[j] = d
		}
		t.Type = GGMLType(r.u32())
		t.Offset = r.u64()
		if r.err != nil {
			return nil, r.err
		}
		if _, dup := f.tensors[t.Name]; dup {
			return nil, r.fail(at, "tensor %q appears twice", t.Name)
		}
		t.Size = -1
		if bs, ts := t.Type.blockLayout(); bs > 0 {
			if t.Dims[0]%uint64(bs) != 0 {
				return nil, r.fail(at, "tensor %q of type %s: innermost dim %d is not a multiple of the block size %d", t.Name, t.Type, t.Dims[0], bs)
			}
			blocks := elems / uint64(bs)
			if blocks > math.MaxInt64/uint64(ts) {
				return nil, r.fail(at, "tensor %q: byte size overflows", t.Name)
			}
			t.Size = int64(blocks * uint64(ts))
		}
		if t.Offset%uint64(f.Alignment) != 0 {
			return nil, r.fail(at, "tensor %q: data offset %d is not a multiple of the alignment %d", t.Name, t.Offset, f.Alignment)
		}
		f.tensors[t.Name] = len(f.Tensors)
		f.Tensors = append(f.Tensors, t)
	}
	f.DataOffset = (int64(r.off) + f.Alignment - 1) / f.Alignment * f.Alignment
	if len(f.Tensors) > 0 && f.DataOffset > int64(len(data)) {
		return nil, r.fail(int64(r.off), "file ends before the data section (which starts at byte %d)", f.DataOffset)
	}
	dataLen := uint64(int64(len(data)) - min(f.DataOffset, int64(len(data))))
	for i := range f.Tensors {
		t := &f.Tensors[i]
		size := uint64(max(t.Size, 0))
		if t.Offset > dataLen || size > dataLen-t.Offset {
			return nil, f.errorf("tensor %q: data [%d, +%d) lies outside the data section of %d bytes (file truncated?)", t.Name, t.Offset, size, dataLen)
		}
	}
	return f, nil
}

// Get returns the metadata value of key.
func (f *File) Get(key string) (Value, bool) {
	i, ok := f.keys[key]
	if !ok {
		return Value{}, false
	}
	return f.Metadata[i].Value, true
}

// Tensor returns the description of the named tensor.
func (f *File) Tensor(name string) (*TensorInfo, bool) {
	i, ok := f.tensors[name]
	if !ok {
		return nil, false
	}
	return &f.Tensors[i], true
}

// TensorData returns the bytes of a tensor, as stored (a slice of the
// file, not a copy). Its type's layout must be known.
func (f *File) TensorData(t *TensorInfo) ([]byte, error) {
	if t.Size < 0 {
		return nil, f.errorf("tensor %q: the size of type %s is not known", t.Name, t.Type)
	}
	if f.data == nil {
		return nil, f.errorf("tensor %q: file is closed", t.Name)
	}
	start := f.DataOffset + int64(t.Offset)
	return f.data[start : start+t.Size : start+t.Size], nil
}

// reader decodes little-endian values, checking bounds.
type reader struct {
	f   *File
	b   []byte
	off int
	err error
}

func (r *reader) left() int { return len(r.b) - r.off }

func (r *reader) fail(at int64, format string, args ...any) error {
	if r.err == nil {
		r.err = &Error{File: r.f.Path, Offset: at, Msg: fmt.Sprintf(format, args...)}
	}
	return r.err
}

// label says what is being read, for messages; it is formatted only when
// there is an error (keys can be long, and arrays have many elements).
type label struct {
	what string // "a metadata key", "metadata"
	key  string // the metadata key, if any
	idx  int    // the array element, if >= 1 (one-based)
}

func (l label) String() string {
	s := l.what
	if l.key != "" {
		s += " " + quoteKey(l.key)
	}
	if l.idx > 0 {
		s += fmt.Sprintf(" element %d", l.idx-1)
	}
	return s
}

// quoteKey quotes a key for messages, shortening very long ones.
func quoteKey(k string) string {
	if len(k) > 64 {
		k = k[:64] + "..."
	}
	return fmt.Sprintf("%q", k)
}

func (r *reader) take(n int, what label) []byte {
	if r.err != nil {
		return nil
	}
	if n < 0 || n > r.left() {
		r.fail(int64(r.off), "file ends inside %s (needs %d bytes, %d left)", what, n, r.left())
		return nil
	}
	p := r.b[r.off : r.off+n]
	r.off += n
	return p
}

func (r *reader) u8() uint8 {
	if p := r.take(1, label{what: "a value"}); p != nil {
		return p[0]
	}
	return 0
}

func (r *reader) u16() uint16 {
	if p := r.take(2, label{what: "a value"}); p != nil {
		return binary.LittleEndian.Uint16(p)
	}
	return 0
}

func (r *reader) u32() uint32 {
	if p := r.take(4, label{what: "a value"}); p != nil {
		return binary.LittleEndian.Uint32(p)
	}
	return 0
}

func (r *reader) u64() uint64 {
	if p := r.take(8, label{what: "a value"}); p != nil {
		return binary.LittleEndian.Uint64(p)
	}
	return 0
}

func (r *reader) str(what label) string {
	at := int64(r.off)
	n := r.u64()
	if r.err != nil {
		return ""
	}
	if n > uint64(r.left()) {
		r.fail(int64(at), "%s: string length %d exceeds the %d bytes left", what, n, r.left())
		return ""
	}
	return string(r.take(int(n), what))
}

// value decodes one value of type vt; key names it in errors.
func (r *reader) value(vt ValueType, depth int, key string) (Value, error) {
	at := int64(r.off)
	v := Value{Type: vt}
	switch vt {
	case TypeUint8:
		v.bits = uint64(r.u8())
	case TypeInt8:
		v.bits = uint64(int64(int8(r.u8())))
	case TypeUint16:
		v.bits = uint64(r.u16())
	case TypeInt16:
		v.bits = uint64(int64(int16(r.u16())))
	case TypeUint32:
		v.bits = uint64(r.u32())
	case TypeInt32:
		v.bits = uint64(int64(int32(r.u32())))
	case TypeUint64, TypeInt64:
		v.bits = r.u64()
	case TypeFloat32:
		v.bits = math.Float64bits(float64(math.Float32frombits(r.u32())))
	case TypeFloat64:
		v.bits = r.u64()
	case TypeBool:
		b := r.u8()
		if r.err == nil && b > 1 {
			return v, r.fail(at, "metadata %s: bool byte is %d (want 0 or 1)", quoteKey(key), b)
		}
		v.bits = uint64(b)
	case TypeString:
		v.str = r.str(label{what: "metadata", key: key})
	case TypeArray:
		if depth >= maxNesting {
			return v, r.fail(at, "metadata %s: arrays nested deeper than %d", quoteKey(key), maxNesting)
		}
		et := ValueType(r.u32())
		n := r.u64()
		if r.err != nil {
			return v, r.err
		}
		min := et.minSize()
		if min == 0 {
			return v, r.fail(at, "metadata %s: array of unknown value type %d", quoteKey(key), uint32(et))
		}
		if n > uint64(r.left()/min) {
			return v, r.fail(at, "metadata %s: array of %d %s cannot fit in the %d bytes left", quoteKey(key), n, et, r.left())
		}
		a := &Array{Elem: et, n: int(n)}
		switch {
		case et == TypeString:
			a.strs = make([]string, n)
			for i := range a.strs {
				a.strs[i] = r.str(label{what: "metadata", key: key, idx: i + 1})
				if r.err != nil {
					return v, r.err
				}
			}
		case et == TypeArray:
			a.arrs = make([]*Array, n)
			for i := range a.arrs {
				sub, err := r.value(TypeArray, depth+1, key)
				if err != nil {
					return v, err
				}
				a.arrs[i] = sub.arr
			}
		default:
			raw := r.take(int(n)*min, label{what: "metadata", key: key})
			if r.err != nil {
				return v, r.err
			}
			if et == TypeBool {
				for i, b := range raw {
					if b > 1 {
						return v, r.fail(at, "metadata %s: bool element %d is %d (want 0 or 1)", quoteKey(key), i, b)
					}
				}
			}
			a.raw = bytes.Clone(raw)
		}
		v.arr = a
	default:
		return v, r.fail(at-4, "metadata %s: unknown value type %d", quoteKey(key), uint32(vt))
	}
	return v, r.err
}
