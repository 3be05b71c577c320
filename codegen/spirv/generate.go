// Package spirv generates SPIR-V compute kernels for the nodes of tapml's
// IR, as binaries assembled in Go (no glslang, no text).
//
// The kernels are codegen/wgsl's, translated: Generate asks codegen/wgsl
// for the node's WGSL kernel (under the same limits, tuning, features and
// fault) and translates that WGSL into SPIR-V (Translate: the front end of
// codegen/wgslfront, then translate.go). So every kernel algorithm, and
// every tuning of it, exists once, and results agree with the webgpu
// target up to the rounding of the drivers' math functions.
//
// The result is a codegen.Kernel whose Source is a SPIR-V 1.3 module
// (little-endian words) for Vulkan 1.1, specialised on the node's shapes.
// Bindings are storage buffers of descriptor set 0, inputs then outputs in
// ascending order (the WGSL's @binding(i)); each is a Block struct
// wrapping a runtime array (so a bound buffer may be larger than the
// tensor), read-only inputs are NonWritable. kv_write is the one in-place
// kernel: its cache is a single read-write binding that carries input 0
// and output 0.
//
// The modules keep to a conservative subset that every Vulkan 1.1 driver
// takes: the Shader capability (plus Float16, StorageBuffer16BitAccess and
// subgroup capabilities where the WGSL uses the dialect's f16 and subgroup
// operations; runtime/vulkan enables those where the device has them),
// GLSL.std.450, structured control flow in the shape glslang emits,
// function variables instead of phi nodes, finite constants. Every kernel
// passes `spirv-val --target-env vulkan1.1` (a test checks them all), and
// the vulkan target (runtime/vulkan) runs them.
//
// Options.Fault injects one of the WGSL generator's deliberate bugs (for
// tests of the carving and migration tools; codegen/fault's table): the
// vulkan target's faults are the WGSL generator's.
package spirv

import (
	"fmt"

	"github.com/tapml/tapml/codegen"
	"github.com/tapml/tapml/codegen/wgsl"
	"github.com/tapml/tapml/ir"
)

// Limits are the device limits a kernel must respect: the WGSL
// generator's (a zero field takes WebGPU's default).
type Limits = wgsl.Limits

// Options control code generation: the WGSL generator's, whose kernels are
// translated.
type Options = wgsl.Options

// Entry is the entry point of every generated kernel.

const Entry = "main"

// Language is the codegen.Kernel language of SPIR-V kernels.
const Language = "spirv"

// Supports reports whether op has a SPIR-V kernel: whether it has a WGSL
// one.
func Supports(op ir.Op) bool { return wgsl.Supports(op) }

// Generate returns the SPIR-V kernel of node n for the concrete input types
// in and output types out (every shape static; out may be nil, and is then
// inferred).
func Generate(n *ir.Node, in, out []ir.Type, opts Options) (*codegen.Kernel, error) {
	if n == nil {
		return nil, fmt.Errorf("spirv: nil node")
	}
	k, err := wgsl.Generate(n, in, out, opts)
	if err != nil {
		return nil, fmt.Errorf("spirv: %w", err)
	}
	code, m, err := Translate(string(k.Source))
	if err != nil {
		return nil, fmt.Errorf("spirv: node %s: translating its WGSL kernel: %w", n, err)
	}
	if m.WorkgroupSize != k.WorkgroupSize {
		return nil, fmt.Errorf("spirv: node %s: the WGSL kernel's @workgroup_size %v is not its workgroup size %v", n, m.WorkgroupSize, k.WorkgroupSize)
	}
	k.Source, k.Language, k.Entry = code, Language, Entry
	return k, nil
}
