package gguf

import (
	"encoding/binary"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// ValueType is the type tag of a metadata value.
type ValueType uint32

// The GGUF metadata value types.
const (
	TypeUint8 ValueType = iota
	TypeInt8
	TypeUint16
	TypeInt16
	TypeUint32
	TypeInt32
	TypeFloat32
	TypeBool
	TypeString
	TypeArray
	TypeUint64
	TypeInt64
	TypeFloat64
)

var valueTypeNames = [...]string{"uint8", "int8", "uint16", "int16", "uint32", "int32", "float32", "bool", "string", "array", "uint64", "int64", "float64"}

func (t ValueType) String() string {
	if int(t) < len(valueTypeNames) {
		return valueTypeNames[t]
	}
	return fmt.Sprintf("valuetype(%d)", uint32(t))
}

// minSize is the fewest bytes a value of type t takes (its size for fixed
// types); 0 for an unknown type.
func (t ValueType) minSize() int {
	switch t {
	case TypeUint8, TypeInt8, TypeBool:
		return 1
	case TypeUint16, TypeInt16:
		return 2
	case TypeUint32, TypeInt32, TypeFloat32:
		return 4
	case TypeUint64, TypeInt64, TypeFloat64, TypeString:
		return 8
	case TypeArray:
		return 12
	}
	return 0
}

func (t ValueType) isInt() bool {
	return t <= TypeInt32 || t == TypeUint64 || t == TypeInt64
}

func (t ValueType) isSigned() bool {
	return t == TypeInt8 || t == TypeInt16 || t == TypeInt32 || t == TypeInt64
}

// Value is one metadata value.
type Value struct {
	Type ValueType
	bits uint64 // integers (signed ones sign-extended), bools, float64 bits of floats
	str  string
	arr  *Array
}

// Int returns an integer value of any integer type, if it fits an int64.
func (v Value) Int() (int64, bool) {
	if !v.Type.isInt() {
		return 0, false
	}
	if !v.Type.isSigned() && v.bits > math.MaxInt64 {
		return 0, false
	}
	return int64(v.bits), true
}

// Float returns a float32 or float64 value.
func (v Value) Float() (float64, bool) {
	if v.Type != TypeFloat32 && v.Type != TypeFloat64 {
		return 0, false
	}
	return math.Float64frombits(v.bits), true
}

// Bool returns a bool value.
func (v Value) Bool() (bool, bool) { return v.bits != 0, v.Type == TypeBool }

// Str returns a string value.
func (v Value) Str() (string, bool) { return v.str, v.Type == TypeString }

// Array returns an array value.
func (v Value) Array() (*Array, bool) { return v.arr, v.Type == TypeArray }

// String formats the value for messages; long arrays are abbreviated.
func (v Value) String() string {
	switch v.Type {
	case TypeString:
		s := v.str
		if len(s) > 80 {
			s = s[:80] + "..."
		}
		return strconv.Quote(s)
	case TypeBool:
		return strconv.FormatBool(v.bits != 0)
	case TypeFloat32:
		return strconv.FormatFloat(math.Float64frombits(v.bits), 'g', -1, 32)
	case TypeFloat64:
		return strconv.FormatFloat(math.Float64frombits(v.bits), 'g', -1, 64)
	case TypeArray:
		return v.arr.String()
	}
	if v.Type.isSigned() {
		return strconv.FormatInt(int64(v.bits), 10)
	}
	return strconv.FormatUint(v.bits, 10)
}

// Array is an array value: elements of one type (arrays may nest).
type Array struct {
	Elem ValueType
	n    int
	raw  []byte // fixed-size elements, little-endian
	strs []string
	arrs []*Array
}

// Len is the number of elements.
func (a *Array) Len() int { return a.n }

// At returns element i (0 <= i < Len).
func (a *Array) At(i int) Value {
	v := Value{Type: a.Elem}
	switch a.Elem {
	case TypeString:
		v.str = a.strs[i]
		return v
	case TypeArray:
		v.arr = a.arrs[i]
		return v
	}
	sz := a.Elem.minSize()
	p := a.raw[i*sz : (i+1)*sz]
	switch a.Elem {
	case TypeUint8, TypeBool:
		v.bits = uint64(p[0])
	case TypeInt8:
		v.bits = uint64(int64(int8(p[0])))
	case TypeUint16:
		v.bits = uint64(binary.LittleEndian.Uint16(p))
	case TypeInt16:
		v.bits = uint64(int64(int16(binary.LittleEndian.Uint16(p))))
	case TypeUint32:
		v.bits = uint64(binary.LittleEndian.Uint32(p))
	case TypeInt32:
		v.bits = uint64(int64(int32(binary.LittleEndian.Uint32(p))))
	case TypeFloat32:
		v.bits = math.Float64bits(float64(math.Float32frombits(binary.LittleEndian.Uint32(p))))
	default: // 64-bit types
		v.bits = binary.LittleEndian.Uint64(p)
	}
	return v
}

// Strings returns the elements of a string array.
func (a *Array) Strings() ([]string, bool) {
	if a.Elem != TypeString {
		return nil, false
	}
	return a.strs, true
}

// Floats returns the elements of a float32 or float64 array.
func (a *Array) Floats() ([]float64, bool) {
	if a.Elem != TypeFloat32 && a.Elem != TypeFloat64 {
		return nil, false
	}
	out := make([]float64, a.n)
	for i := range out {
		out[i], _ = a.At(i).Float()
	}
	return out, true
}

// Ints returns the elements of an integer array, if all fit an int64.
func (a *Array) Ints() ([]int64, bool) {
	if !a.Elem.isInt() {
		return nil, false
	}
	out := make([]int64, a.n)
	for i := range out {
		x, ok := a.At(i).Int()
		if !ok {
			return nil, false
		}
		out[i] = x
	}
	return out, true
}

// String formats the array for messages, showing at most 8 elements.
func (a *Array) String() string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "[%d x %s:", a.n, a.Elem)
	for i := 0; i < a.n && i < 8; i++ {
		sb.WriteString(" ")
		sb.WriteString(a.At(i).String())
	}
	if a.n > 8 {
		sb.WriteString(" ...")
	}
	sb.WriteString("]")
	return sb.String()
}
