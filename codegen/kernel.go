// Package codegen holds what every code generator produces: a Kernel, the
// compiled form of one IR node for one target language. The generators live
// in subpackages. GPU kernels have one source: wgsl writes them, in a WGSL
// dialect that wgslfront parses and type-checks; spirv and msl translate
// that tree to SPIR-V and MSL. llvm writes the native CPU kernels apart,
// but for the arithmetic of elementwise ops, which it compiles from wgsl's
// formulas (one WGSL expression per op). fault is the table of the
// test-only faults the generators plant.
//
// Kernels are specialised on concrete shapes: the sizes of every input and
// output are baked into the code as constants, so the grid is known when the
// kernel is made. Values that change between calls of the same shapes (the
// position of a decode step) are read from input buffers, never baked.
package codegen

import (
	"fmt"

	"github.com/tapml/tapml/ir"
)

// Access says how a kernel uses a binding.
type Access string

const (
	Read      Access = "read"       // an input
	Write     Access = "write"      // an output
	ReadWrite Access = "read_write" // updated in place (kv_write's cache)
)

// Binding is one buffer a kernel reads or writes. Bindings are listed in
// ascending Index order, inputs first (in the node's input order), then
// outputs; a ReadWrite binding stands for both an input and an output.
type Binding struct {
	Index  int
	Name   string // "in0", "out0", ...
	Access Access
	Type   ir.Type // concrete
	// Input and Output map the binding to the node's operands: the index of
	// the input (or -1) and of the output (or -1) that it carries.
	Input, Output int
}

// Kernel is one node's code for one target.
type Kernel struct {
	Language      string // "wgsl", "spirv", "msl", "llvm"
	Op            ir.Op
	NodeID        int
	Source        []byte // text (WGSL, MSL, LLVM IR) or binary (SPIR-V)
	Entry         string
	Bindings      []Binding
	WorkgroupSize [3]int
	Grid          [3]int // workgroups to dispatch
}

// Name is a file-friendly name of the kernel: op_node.
func (k *Kernel) Name() string { return fmt.Sprintf("%s_%d", k.Op, k.NodeID) }
