// Package msl generates Metal Shading Language compute kernels for the
// nodes of tapml's IR.
//
// The kernels are codegen/wgsl's, translated: Generate asks codegen/wgsl for
// the node's WGSL kernel (under the Metal limits, with the same tuning and
// faults) and translates that WGSL into MSL (translate.go: tapml's WGSL
// front end, codegen/wgslfront, parses and types it, with clear errors on
// anything outside its dialect, and emit.go prints the tree). So every
// kernel algorithm, and every tuning of it, exists once, and results agree
// with the WebGPU target up to f32 rounding. Where C++ or Metal leave undefined what WGSL defines (integer
// overflow and division by zero), the MSL does what WGSL does; where WGSL
// leaves a float result to the implementation (NaN in max and min), the MSL
// does what the CPU reference does: i32 arithmetic wraps around, maximum,
// minimum and relu propagate NaN. See translate.go.
//
// The result is a codegen.Kernel: MSL source specialised on the node's
// shapes, its bindings (`device` buffer arguments `[[buffer(i)]]`, inputs
// then outputs, ascending, as WGSL's @binding(i)), the threadgroup size and
// the grid of threadgroups to dispatch (Metal's
// dispatchThreadgroups:threadsPerThreadgroup:). Every kernel is one `kernel
// void tapml_main(...)` in its own source (one MTLLibrary per kernel); its
// parameters are the buffers, then the WGSL entry point's builtins under
// their WGSL names: wid (threadgroup_position_in_grid), lid
// (thread_position_in_threadgroup) and li (thread_index_in_threadgroup).
// Threadgroup memory is declared at the top of the kernel and synchronised
// with threadgroup_barrier(mem_flags::mem_threadgroup). Arithmetic is f32;
// ids, positions and argmax results are i32 (int); other dtypes are
// rejected with an error. The dialect's f16 is half, its subgroup
// operations Metal's SIMD-group functions (Options.Features allows them;
// no generator writes them yet).
//
// The kernels need IEEE semantics (NaN tests, no reassociation): compile
// them with fast math off (MTLCompileOptions.fastMathEnabled = NO, or
// `xcrun metal -fno-fast-math`). runtime/metal does.
//
// No Metal compiler exists on Linux. Check runs the approximate check that
// CI uses: clang-14 parses a kernel as C++ for OpenCL against a stub
// metal_stdlib (stub/metal_stdlib) that declares only the Metal API the
// kernels use, so an undeclared name, a type error or a misspelt attribute
// is an error. Real checks need macOS.
//
// Options.Fault injects a deliberate bug into the kernel (for tests of the
// carving and migration tools): codegen/wgsl's faults, the same names in
// the same places.
package msl

import (
	"fmt"

	"github.com/tapml/tapml/codegen"
	"github.com/tapml/tapml/codegen/wgsl"
	"github.com/tapml/tapml/ir"
)

// Language is the codegen.Kernel language of MSL kernels.
const Language = "msl"

// Entry is the name of every generated kernel function. (Metal forbids
// `main`.)
const Entry = "tapml_main"

// Limits are the device limits a kernel must respect. A zero field takes
// the default (DefaultLimits).
type Limits struct {
	// MaxThreadsPerThreadgroup bounds the threads of one threadgroup.
	// Apple GPUs allow 1024, but a pipeline may allow fewer
	// (maxTotalThreadsPerThreadgroup); kernels use at most 256.
	MaxThreadsPerThreadgroup int
	// MaxThreadgroupMemory is the threadgroup memory of one threadgroup, in
	// bytes (32 KiB on every Apple GPU).
	MaxThreadgroupMemory int
	// MaxThreadgroupsPerDimension bounds each dimension of the grid; a
	// larger grid is folded into more dimensions.
	MaxThreadgroupsPerDimension int
	// MaxBuffers is the number of buffer arguments of a kernel (31).
	MaxBuffers int
}

// DefaultLimits are limits every Metal GPU supports.
func DefaultLimits() Limits {
	return Limits{MaxThreadsPerThreadgroup: 256, MaxThreadgroupMemory: 32768, MaxThreadgroupsPerDimension: 65535, MaxBuffers: 31}
}

func (l Limits) withDefaults() Limits {
	d := DefaultLimits()
	set := func(v *int, def int) {
		if *v <= 0 {
			*v = def
		}
	}
	set(&l.MaxThreadsPerThreadgroup, d.MaxThreadsPerThreadgroup)
	set(&l.MaxThreadgroupMemory, d.MaxThreadgroupMemory)
	set(&l.MaxThreadgroupsPerDimension, d.MaxThreadgroupsPerDimension)
	set(&l.MaxBuffers, d.MaxBuffers)
	return l
}

// wgsl is l as the WGSL generator's limits.
func (l Limits) wgsl() wgsl.Limits {
	t := l.MaxThreadsPerThreadgroup
	return wgsl.Limits{
		MaxInvocationsPerWorkgroup: t, MaxWorkgroupSizeX: t, MaxWorkgroupSizeY: t, MaxWorkgroupSizeZ: t,
		MaxWorkgroupStorageSize:         l.MaxThreadgroupMemory,
		MaxWorkgroupsPerDimension:       l.MaxThreadgroupsPerDimension,
		MaxStorageBuffersPerShaderStage: l.MaxBuffers,
	}
}

// Options control code generation.
type Options struct {
	Limits Limits
	// Tuning selects kernel variants, as for the WGSL kernels (the zero
	// value chooses automatically).
	Tuning wgsl.Tuning
	// Features are the dialect's extensions the kernels may use (half and
	// SIMD-group functions in MSL); none by default.
	Features wgsl.Features
	// Fault, when set, injects a deliberate bug into the kernel. It is for
	// tests only; the WGSL generator's faults (codegen/fault's table).
	Fault string
	// Compute and Accumulate are the WGSL generator's precision options
	// (f16 storage of float tensors, f16 accumulators).
	Compute, Accumulate ir.DType
}

// Supports reports whether op has an MSL kernel: whether it has a WGSL one.
func Supports(op ir.Op) bool { return wgsl.Supports(op) }

// Generate returns the MSL kernel of node n for the concrete input types in
// and output types out (every shape static; out may be nil, and is then
// inferred).
func Generate(n *ir.Node, in, out []ir.Type, opts Options) (*codegen.Kernel, error) {
	if n == nil {
		return nil, fmt.Errorf("msl: nil node")
	}
	fail := func(err error) (*codegen.Kernel, error) {
		return nil, fmt.Errorf("msl: node %s: %w", n, err)
	}
	lim := opts.Limits.withDefaults()
	k, err := wgsl.Generate(n, in, out, wgsl.Options{Limits: lim.wgsl(), Tuning: opts.Tuning, Features: opts.Features, Fault: opts.Fault,
		Compute: opts.Compute, Accumulate: opts.Accumulate})
	if err != nil {
		return nil, fmt.Errorf("msl: %w", err)
	}
	src, m, err := translate(string(k.Source))
	if err != nil {
		return fail(fmt.Errorf("translating its WGSL kernel: %w", err))
	}
	if m.WorkgroupSize != k.WorkgroupSize {
		return fail(fmt.Errorf("the WGSL kernel's @workgroup_size %v is not its workgroup size %v", m.WorkgroupSize, k.WorkgroupSize))
	}
	if m.SharedBytes > lim.MaxThreadgroupMemory {
		return fail(fmt.Errorf("kernel needs %d bytes of threadgroup memory, the device allows %d", m.SharedBytes, lim.MaxThreadgroupMemory))
	}
	k.Source = []byte(fmt.Sprintf("// tapml MSL kernel: %s (node %d), translated from WGSL\n#include <metal_stdlib>\n%s", n.Op, n.ID, src))
	k.Language = Language
	k.Entry = Entry
	return k, nil
}
