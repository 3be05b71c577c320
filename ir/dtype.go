// Package ir is tapml's Go-native intermediate representation: typed SSA
// values, nodes that name an op from one registry, functions and a module
// that refers to its weights by name.
package ir

import "fmt"

// DType is the element type of a tensor.
type DType uint8

const (
	Invalid DType = iota
	F32
	F16
	BF16
	I32
	I64
	Bool
)

var dtypeNames = [...]string{Invalid: "invalid", F32: "f32", F16: "f16", BF16: "bf16", I32: "i32", I64: "i64", Bool: "bool"}

func (d DType) String() string {
	if int(d) < len(dtypeNames) {
		return dtypeNames[d]
	}
	return fmt.Sprintf("dtype(%d)", uint8(d))
}

// Size is the number of bytes one element takes in memory.
func (d DType) Size() int {
	switch d {
	case F32, I32:
		return 4
	case F16, BF16:
		return 2
	case I64:
		return 8
	case Bool:
		return 1
	}
	return 0
}

// IsFloat reports whether d is a floating-point type.
func (d DType) IsFloat() bool { return d == F32 || d == F16 || d == BF16 }

// IsInt reports whether d is an integer type.
func (d DType) IsInt() bool { return d == I32 || d == I64 }

// ParseDType parses the textual name of a dtype ("f32", "i32", ...).
func ParseDType(s string) (DType, error) {
	for i, n := range dtypeNames {
		if i != int(Invalid) && n == s {
			return DType(i), nil
		}
	}
	return Invalid, fmt.Errorf("unknown dtype %q", s)
}
