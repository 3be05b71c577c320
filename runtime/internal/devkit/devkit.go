package devkit

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/tapml/tapml/ir"
	"github.com/tapml/tapml/tensor"
)

// TypeSig is the key of a list of concrete types.
func TypeSig(ts []ir.Type) string {
	var b strings.Builder
	for _, t := range ts {
		b.WriteString(t.DType.String())
		for _, dim := range t.Shape {
			b.WriteByte(',')
			b.WriteString(strconv.FormatInt(dim.Size, 10))
		}
		b.WriteByte(';')
	}
	return b.String()
}

// CheckTensor checks that t's data holds exactly its elements (for a
// block format, its blocks), so kernels can index it without bounds
// failures.
func CheckTensor(t *tensor.Tensor) error {
	if t.DType.Size() == 0 && !t.DType.IsBlock() {
		return fmt.Errorf("tensor has invalid dtype %s", t.DType)
	}
	for _, s := range t.Shape {
		if s < 0 {
			return fmt.Errorf("tensor %s has a negative dim", t)
		}
	}
	n := tensor.ByteSize(t.DType, t.Shape)
	if n < 0 {
		return fmt.Errorf("tensor %s: its last dim is not whole blocks of %s", t, t.DType)
	}
	if len(t.Data) != n {
		return fmt.Errorf("tensor %s holds %d bytes, its shape needs %d", t, len(t.Data), n)
	}
	return nil
}

// CheckGPUTensor checks a tensor uploaded to a GPU device (webgpu, metal,
// remote): f32 and i32 tensors, and the storage dtypes weights keep (f16,
// bf16, block formats: raw bytes that kernels decode), of exactly their
// size.
func CheckGPUTensor(t *tensor.Tensor) error {
	if t.DType != ir.F32 && t.DType != ir.I32 && !slices.Contains(ir.StorageDTypes, t.DType) {
		return fmt.Errorf("%s: only f32 and i32 tensors, and weights in %s, are supported", t, strings.Join(dtypeNames(ir.StorageDTypes), ", "))
	}
	if err := CheckTensor(t); err != nil {
		return fmt.Errorf("%s: %w", t, err)
	}
	return nil
}

func dtypeNames(ds []ir.DType) []string {
	s := make([]string, len(ds))
	for i, d := range ds {
		s[i] = d.String()
	}
	return s
}

// StaticInputs returns the declared input types of n and whether they and
// the declared output types are all static, so that a device's Prepare can
// compile the node's kernel ahead (nodes with symbolic shapes compile at
// their first launch). Outputs count too: iota's output length comes from
// a symbolic shape attribute, not from its static input.
func StaticInputs(n *ir.Node) ([]ir.Type, bool) {
	in := make([]ir.Type, len(n.Inputs))
	static := true
	for i, v := range n.Inputs {
		in[i] = v.Type
		static = static && v.Type.Shape.IsStatic()
	}
	for _, v := range n.Outputs {
		static = static && v.Type.Shape.IsStatic()
	}
	return in, static
}
