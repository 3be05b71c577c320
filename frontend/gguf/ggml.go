package gguf

import (
	"fmt"

	"github.com/tapml/tapml/ir"
)

// GGMLType is the element type of a tensor (ggml's enum ggml_type).
type GGMLType uint32

// The ggml tensor types known by name. F32, F16, BF16 and the types of
// quantFormats can be loaded.
const (
	GGMLF32     GGMLType = 0
	GGMLF16     GGMLType = 1
	GGMLQ4_0    GGMLType = 2
	GGMLQ4_1    GGMLType = 3
	GGMLQ5_0    GGMLType = 6
	GGMLQ5_1    GGMLType = 7
	GGMLQ8_0    GGMLType = 8
	GGMLQ8_1    GGMLType = 9
	GGMLQ2_K    GGMLType = 10
	GGMLQ3_K    GGMLType = 11
	GGMLQ4_K    GGMLType = 12
	GGMLQ5_K    GGMLType = 13
	GGMLQ6_K    GGMLType = 14
	GGMLQ8_K    GGMLType = 15
	GGMLIQ2_XXS GGMLType = 16
	GGMLIQ2_XS  GGMLType = 17
	GGMLIQ3_XXS GGMLType = 18
	GGMLIQ1_S   GGMLType = 19
	GGMLIQ4_NL  GGMLType = 20
	GGMLIQ3_S   GGMLType = 21
	GGMLIQ2_S   GGMLType = 22
	GGMLIQ4_XS  GGMLType = 23
	GGMLI8      GGMLType = 24
	GGMLI16     GGMLType = 25
	GGMLI32     GGMLType = 26
	GGMLI64     GGMLType = 27
	GGMLF64     GGMLType = 28
	GGMLIQ1_M   GGMLType = 29
	GGMLBF16    GGMLType = 30
	GGMLTQ1_0   GGMLType = 34
	GGMLTQ2_0   GGMLType = 35
	GGMLMXFP4   GGMLType = 39
)

var ggmlNames = map[GGMLType]string{
	GGMLF32: "F32", GGMLF16: "F16", GGMLQ4_0: "Q4_0", GGMLQ4_1: "Q4_1", 4: "Q4_2", 5: "Q4_3",
	GGMLQ5_0: "Q5_0", GGMLQ5_1: "Q5_1", GGMLQ8_0: "Q8_0", GGMLQ8_1: "Q8_1",
	GGMLQ2_K: "Q2_K", GGMLQ3_K: "Q3_K", GGMLQ4_K: "Q4_K", GGMLQ5_K: "Q5_K", GGMLQ6_K: "Q6_K", GGMLQ8_K: "Q8_K",
	GGMLIQ2_XXS: "IQ2_XXS", GGMLIQ2_XS: "IQ2_XS", GGMLIQ3_XXS: "IQ3_XXS", GGMLIQ1_S: "IQ1_S",
	GGMLIQ4_NL: "IQ4_NL", GGMLIQ3_S: "IQ3_S", GGMLIQ2_S: "IQ2_S", GGMLIQ4_XS: "IQ4_XS",
	GGMLI8: "I8", GGMLI16: "I16", GGMLI32: "I32", GGMLI64: "I64", GGMLF64: "F64", GGMLIQ1_M: "IQ1_M",
	GGMLBF16: "BF16", 31: "Q4_0_4_4", 32: "Q4_0_4_8", 33: "Q4_0_8_8", GGMLTQ1_0: "TQ1_0", GGMLTQ2_0: "TQ2_0",
	36: "IQ4_NL_4_4", 37: "IQ4_NL_4_8", 38: "IQ4_NL_8_8", GGMLMXFP4: "MXFP4",
}

func (t GGMLType) String() string {
	if s, ok := ggmlNames[t]; ok {
		return s
	}
	return fmt.Sprintf("unknown type %d", uint32(t))
}

// irTypes are the ggml types a model's weights may have, as the IR dtypes
// they keep from the file to the device.
var irTypes = map[GGMLType]ir.DType{
	GGMLF32: ir.F32, GGMLF16: ir.F16, GGMLBF16: ir.BF16,
	GGMLQ4_0: ir.Q4_0, GGMLQ4_1: ir.Q4_1, GGMLQ5_0: ir.Q5_0, GGMLQ5_1: ir.Q5_1, GGMLQ8_0: ir.Q8_0,
	GGMLQ2_K: ir.Q2_K, GGMLQ3_K: ir.Q3_K, GGMLQ4_K: ir.Q4_K, GGMLQ5_K: ir.Q5_K, GGMLQ6_K: ir.Q6_K,
}

// quantTypes are the block-quantized types tapml loads, in ggml's order.
var quantTypes = []GGMLType{GGMLQ4_0, GGMLQ4_1, GGMLQ5_0, GGMLQ5_1, GGMLQ8_0, GGMLQ2_K, GGMLQ3_K, GGMLQ4_K, GGMLQ5_K, GGMLQ6_K}

// quantized reports whether t is a block-quantized type tapml loads.
func (t GGMLType) quantized() bool { return irTypes[t].IsBlock() }

// blockLayout returns the elements per block and bytes per block of the
// types whose layout this package knows (plain element types and the
// quantized types it loads); 0, 0 for the others, whose data bounds are
// then not checked at parse time.
func (t GGMLType) blockLayout() (elems, bytes int) {
	if dt, ok := irTypes[t]; ok {
		return dt.Block()
	}
	switch t {
	case GGMLF32, GGMLI32:
		return 1, 4
	case GGMLF16, GGMLBF16, GGMLI16:
		return 1, 2
	case GGMLI8:
		return 1, 1
	case GGMLI64, GGMLF64:
		return 1, 8
	}
	return 0, 0
}

// supportedTypes are the tensor types Load reads.
var supportedTypes = append([]GGMLType{GGMLF32, GGMLF16, GGMLBF16}, quantTypes...)

func supported(t GGMLType) bool {
	for _, s := range supportedTypes {
		if s == t {
			return true
		}
	}
	return false
}

func supportedList() string {
	s := ""
	for i, t := range supportedTypes {
		if i > 0 {
			s += ", "
		}
		s += fmt.Sprintf("%s (%d)", t, uint32(t))
	}
	return s
}
