// Package ir is tapml's Go-native intermediate representation: typed SSA
// values, nodes that name an op from one registry, functions and a module
// that refers to its weights by name.
package ir

import "fmt"

// DType is the element type of a tensor, or the block format of a weight
// stored quantized.
type DType uint8

const (
	Invalid DType = iota
	F32
	F16
	BF16
	I32
	I64
	Bool
	// ggml's block formats (frontend/gguf reads them, tensor/quant codes
	// them). A tensor of one has a logical shape like any other; its last
	// dim is a whole number of blocks, each packing a fixed number of
	// elements along that dim into a fixed number of bytes (Block). Only
	// weights have them, and only the op inputs whose Storage fact accepts
	// them read them.
	Q4_0
	Q4_1
	Q5_0
	Q5_1
	Q8_0
	Q2_K
	Q3_K
	Q4_K
	Q5_K
	Q6_K
)

var dtypeNames = [...]string{Invalid: "invalid", F32: "f32", F16: "f16", BF16: "bf16", I32: "i32", I64: "i64", Bool: "bool",
	Q4_0: "q4_0", Q4_1: "q4_1", Q5_0: "q5_0", Q5_1: "q5_1", Q8_0: "q8_0",
	Q2_K: "q2_k", Q3_K: "q3_k", Q4_K: "q4_k", Q5_K: "q5_k", Q6_K: "q6_k"}

// blockLayouts are the block formats' elements and bytes per block, as
// ggml lays them out (ggml-common.h): a 32-element block holds an f16 scale
// (and an f16 minimum for _1) with 4, 5 or 8 bits per element; a K-format
// super-block of 256 elements holds 6- or 8-bit sub-block scales too.
var blockLayouts = map[DType][2]int{
	Q4_0: {32, 18}, Q4_1: {32, 20}, Q5_0: {32, 22}, Q5_1: {32, 24}, Q8_0: {32, 34},
	Q2_K: {256, 84}, Q3_K: {256, 110}, Q4_K: {256, 144}, Q5_K: {256, 176}, Q6_K: {256, 210},
}

// BlockDTypes are the block formats, in ggml's order.
var BlockDTypes = []DType{Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K}

// StorageDTypes are the dtypes a weight may keep from its file to the
// device when the ops that read it compute in f32: f16, bf16 and the
// block formats.
var StorageDTypes = append([]DType{F16, BF16}, BlockDTypes...)

func (d DType) String() string {
	if int(d) < len(dtypeNames) {
		return dtypeNames[d]
	}
	return fmt.Sprintf("dtype(%d)", uint8(d))
}

// Size is the number of bytes one element takes in memory; 0 for the
// block formats, whose elements have no bytes of their own (see Bytes).
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

// IsBlock reports whether d is a block format.
func (d DType) IsBlock() bool { _, ok := blockLayouts[d]; return ok }

// Block returns the elements and bytes of one block of a block format;
// (1, Size) for an element dtype.
func (d DType) Block() (elems, bytes int) {
	if l, ok := blockLayouts[d]; ok {
		return l[0], l[1]
	}
	return 1, d.Size()
}

// Bytes is the size in bytes of n elements of d, or -1 when n is negative
// or, for a block format, not a whole number of blocks.
func (d DType) Bytes(n int64) int64 {
	elems, bytes := d.Block()
	if n < 0 || n%int64(elems) != 0 {
		return -1
	}
	return n / int64(elems) * int64(bytes)
}

// IsFloat reports whether d is a floating-point element type.
func (d DType) IsFloat() bool { return d == F32 || d == F16 || d == BF16 }

// IsInt reports whether d is an integer type.
func (d DType) IsInt() bool { return d == I32 || d == I64 }

// ParseDType parses the textual name of a dtype ("f32", "i32", "q4_0", ...).
func ParseDType(s string) (DType, error) {
	for i, n := range dtypeNames {
		if i != int(Invalid) && n == s {
			return DType(i), nil
		}
	}
	return Invalid, fmt.Errorf("unknown dtype %q", s)
}
