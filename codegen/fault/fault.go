// Package fault is the one table of tapml's test-only faults: deliberate
// bugs a code generator plants in one kernel when its Options.Fault names
// one, so that the tests of the carving and migration tools can plant a
// known culprit in one node and check that the tools find it (`tapmlc
// migrate --inject op=KIND,fault=NAME`). Each row says what the fault does,
// which ops' kernels take it, per generator, and so on which targets.
//
// Two generators take faults: codegen/wgsl, whose kernels the webgpu and
// remote: targets run as WGSL, the vulkan target as SPIR-V and the metal
// target as MSL (translations keep the fault), and codegen/llvm (the llvm
// target). A generator's Generate returns an error when the fault does not
// apply to the node's op, or to the kernel variant its shapes and tuning
// select; the tests of both generators check that the ops each row lists
// are exactly those whose test cases take the fault.
package fault

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/tapml/tapml/ir"
)

// The faults' names.
const (
	WrongIndex     = "wrong_index"
	WrongConstant  = "wrong_constant"
	MissingBarrier = "missing_barrier"
	F16Overflow    = "f16_overflow"
)

// Generator names a code generator that takes faults.
type Generator string

const (
	WGSL Generator = "wgsl" // codegen/wgsl (and the SPIR-V and MSL translated from it)
	LLVM Generator = "llvm" // codegen/llvm
)

// Targets are the targets whose kernels each generator writes and whose
// devices take injected faults (`--inject`); an entry ending in ':' names
// every target with that prefix. The metal target's kernels are WGSL's
// too, but `--inject` is not offered there until its device has run on
// Apple hardware.
var Targets = map[Generator][]string{
	WGSL: {"webgpu", "vulkan", "remote:"},
	LLVM: {"llvm"},
}

// GeneratorOf returns the generator of target's kernels when that target
// takes injected faults.
func GeneratorOf(target string) (Generator, bool) {
	for _, g := range []Generator{WGSL, LLVM} {
		for _, t := range Targets[g] {
			if t == target || strings.HasSuffix(t, ":") && strings.HasPrefix(target, t) {
				return g, true
			}
		}
	}
	return "", false
}

// InjectableTargets lists the targets that take injected faults.
func InjectableTargets() []string { return slices.Concat(Targets[WGSL], Targets[LLVM]) }

// Fault is a row of the table.
type Fault struct {
	Name string
	// Does says what the planted bug is, op by op.
	Does string
	// Elementwise says which unary and binary ops (ir.UnaryOps,
	// ir.BinaryOps) take the fault on every generator: a rule, so that a
	// new elementwise op needs no row here.
	Elementwise Reach
	// Ops are the other ops whose kernels take the fault, per generator:
	// some only in some kernel variants or dtypes, as Does says.
	Ops map[Generator][]ir.Op
}

// Reach is which unary and binary ops a fault reaches.
type Reach int

const (
	NoElementwise  Reach = iota
	AllElementwise       // every one (some dtypes only, as Does says)
	WithConstant         // those whose formula has a finite nonzero f32 literal (codegen/wgsl's formulas)
)

// Table is every fault, by name.
var Table = []Fault{
	{
		Name: WrongIndex,
		Does: "an off-by-one in an index: elementwise ops, fused_elementwise, cast and copies (reshape, probe, transfer), " +
			"transpose, slice and concat read the source element after the right one; constant shifts its values by " +
			"one (with more than one value); gather reads the row of id+1; dequantize decodes the next element (of a block " +
			"format, the next unit of four); matmul reads b one k further; rms_norm, " +
			"layer_norm and softmax read x[i+1] in their reductions; argmax scans from element 1 (never returning 0); " +
			"rope (and rope_kv_write) rotates pair i by the angle of pair i+1; kv_write writes rows pos+1..; attention reads key row t+1; " +
			"conv2d and conv_transpose2d read a weight one tap further; pool2d shifts its windows by one column; " +
			"topk scans from element 1; expert_matmul reads expert id+1; token_shift reads the next element (wgsl) or " +
			"x's own row (llvm); causal_conv1d reads tap j+1, wkv k of the next row, selective_scan B[n+1]; " +
			"llvm also: iota, resize and reduce_* read the next element. WGSL kernels read past the end at the last " +
			"element (and get WGSL's bounds-checked value); LLVM kernels wrap around to stay in bounds",
		Elementwise: AllElementwise,
		Ops: map[Generator][]ir.Op{
			WGSL: {ir.OpArgmax, ir.OpAttention, ir.OpCast, ir.OpCausalConv1D, ir.OpConcat, ir.OpConstant, ir.OpConv2D,
				ir.OpConvTranspose2D, ir.OpDequantize, ir.OpExpertMatmul, ir.OpFusedElementwise, ir.OpGather, ir.OpKVWrite,
				ir.OpLayerNorm, ir.OpMatmul, ir.OpPool2D, ir.OpProbe, ir.OpReshape, ir.OpRMSNorm, ir.OpRMSNormMatmul, ir.OpRMSNormQKV, ir.OpRMSNormSwiGLU,
				ir.OpRope, ir.OpRopeKVWrite, ir.OpSelectiveScan, ir.OpSlice, ir.OpSoftmax, ir.OpTokenShift, ir.OpTopK, ir.OpTransfer,
				ir.OpTranspose, ir.OpWKV},
			LLVM: {ir.OpArgmax, ir.OpAttention, ir.OpCast, ir.OpCausalConv1D, ir.OpConcat, ir.OpConstant, ir.OpConv2D,
				ir.OpConvTranspose2D, ir.OpDequantize, ir.OpExpertMatmul, ir.OpFusedElementwise, ir.OpGather, ir.OpIota, ir.OpKVWrite,
				ir.OpLayerNorm, ir.OpMatmul, ir.OpPool2D, ir.OpProbe, ir.OpReduceMax, ir.OpReduceMean, ir.OpReduceSum,
				ir.OpReshape, ir.OpResize, ir.OpRMSNorm, ir.OpRMSNormMatmul, ir.OpRMSNormQKV, ir.OpRMSNormSwiGLU, ir.OpRope, ir.OpRopeKVWrite, ir.OpSelectiveScan, ir.OpSlice,
				ir.OpSoftmax, ir.OpTokenShift, ir.OpTopK, ir.OpTransfer, ir.OpTranspose, ir.OpWKV},
		},
	},
	{
		Name: WrongConstant,
		Does: "a constant perturbed: rms_norm and layer_norm use eps·1000 (plus 1e-3); rope and rope_kv_write use theta·1.1; attention " +
			"uses scale·1.1; constant adds 1 to its values; an elementwise kernel multiplies the first finite " +
			"nonzero float constant it evaluates by 1.1: a literal of its op's formula (gelu's 0.5, silu's 1) or a " +
			"constant of fused_elementwise's expression (on llvm also rms_norm_swiglu's silu); ops without one (exp, relu) do not " +
			"take it",
		Elementwise: WithConstant,
		Ops: map[Generator][]ir.Op{
			WGSL: {ir.OpAttention, ir.OpConstant, ir.OpFusedElementwise, ir.OpLayerNorm, ir.OpRMSNorm, ir.OpRope, ir.OpRopeKVWrite},
			LLVM: {ir.OpAttention, ir.OpConstant, ir.OpFusedElementwise, ir.OpLayerNorm, ir.OpRMSNorm, ir.OpRMSNormSwiGLU,
				ir.OpRope, ir.OpRopeKVWrite},
		},
	},
	{
		Name: MissingBarrier,
		Does: "drops a workgroupBarrier() in kernels that share workgroup memory: the one after the tiles are loaded " +
			"(tiled matmul), after the scores are written (attention), after the partial results are written, before " +
			"each tree reduction (GEMV and expert_matmul when they reduce across lanes, rms_norm, layer_norm, " +
			"softmax, argmax). The result is then a data race: wrong on most devices (lavapipe too, in the tests), " +
			"but it may happen to be right where a workgroup's invocations run in lockstep. LLVM kernels have no " +
			"barriers",
		Ops: map[Generator][]ir.Op{
			WGSL: {ir.OpArgmax, ir.OpAttention, ir.OpExpertMatmul, ir.OpLayerNorm, ir.OpMatmul, ir.OpRMSNorm, ir.OpRMSNormMatmul, ir.OpRMSNormQKV, ir.OpRMSNormSwiGLU,
				ir.OpSoftmax},
		},
	},
	{
		Name: F16Overflow,
		Does: "every float intermediate whose magnitude exceeds 65504 (the largest f16) becomes ±inf, as it would in an " +
			"f16 kernel: elementwise results (f32 only), matmul and attention accumulators, norm sums of squares, " +
			"softmax sums, rope outputs, convolution sums and reduce_sum/reduce_mean sums, expert_matmul accumulators, " +
			"causal_conv1d sums, wkv's outputs and state, selective_scan's state and sums; llvm also pool2d's",
		Elementwise: AllElementwise,
		Ops: map[Generator][]ir.Op{
			WGSL: {ir.OpAttention, ir.OpCausalConv1D, ir.OpConv2D, ir.OpConvTranspose2D, ir.OpExpertMatmul,
				ir.OpFusedElementwise, ir.OpLayerNorm, ir.OpMatmul, ir.OpReduceMean, ir.OpReduceSum, ir.OpRMSNorm,
				ir.OpRMSNormMatmul, ir.OpRMSNormQKV, ir.OpRMSNormSwiGLU, ir.OpRope, ir.OpRopeKVWrite, ir.OpSelectiveScan, ir.OpSoftmax, ir.OpWKV},
			LLVM: {ir.OpAttention, ir.OpCausalConv1D, ir.OpConv2D, ir.OpConvTranspose2D, ir.OpExpertMatmul,
				ir.OpFusedElementwise, ir.OpLayerNorm, ir.OpMatmul, ir.OpPool2D, ir.OpReduceMean, ir.OpReduceSum,
				ir.OpRMSNorm, ir.OpRMSNormMatmul, ir.OpRMSNormQKV, ir.OpRMSNormSwiGLU, ir.OpRope, ir.OpRopeKVWrite, ir.OpSelectiveScan, ir.OpSoftmax, ir.OpWKV},
		},
	},
}

// Reaches lists the ops whose kernels of generator g take fault f: its Ops
// and the elementwise ops of its rule, sorted; constant says whether an
// op's formula has a literal that wrong_constant can change
// (wgsl.HasConstant, which this package cannot import).
func (f Fault) Reaches(g Generator, constant func(ir.Op) bool) []ir.Op {
	ops := slices.Clone(f.Ops[g])
	for _, op := range slices.Concat(ir.UnaryOps, ir.BinaryOps) {
		if f.Elementwise == AllElementwise || f.Elementwise == WithConstant && constant(op) {
			ops = append(ops, op)
		}
	}
	slices.Sort(ops)
	return ops
}

// Names lists the faults' names, sorted.
func Names() []string {
	var n []string
	for _, f := range Table {
		n = append(n, f.Name)
	}
	slices.Sort(n)
	return n
}

// Of returns the names of the faults that generator g takes, sorted.
func Of(g Generator) []string {
	var n []string
	for _, f := range Table {
		if len(f.Ops[g]) > 0 || f.Elementwise != NoElementwise {
			n = append(n, f.Name)
		}
	}
	slices.Sort(n)
	return n
}

// Check returns an error unless name is a fault that generator g takes.
func Check(g Generator, name string) error {
	if !slices.Contains(Of(g), name) {
		return fmt.Errorf("unknown fault %q (known: %s)", name, strings.Join(Of(g), ", "))
	}
	return nil
}

// Perturbable reports whether wrong_constant can change an elementwise
// kernel's float constant v: whether it is finite and nonzero.
func Perturbable(v float64) bool { return v != 0 && !math.IsInf(v, 0) && !math.IsNaN(v) }

// Perturbed is what wrong_constant makes of an elementwise kernel's
// constant.
func Perturbed(v float64) float64 { return v * 1.1 }

// Help documents the faults for --help texts, from the table: each
// fault, the targets that take it and what it does, wrapped to 80 columns.
func Help() string {
	var b strings.Builder
	for _, f := range Table {
		var targets []string
		for _, g := range []Generator{WGSL, LLVM} {
			if slices.Contains(Of(g), f.Name) {
				targets = append(targets, Targets[g]...)
			}
		}
		line := "  "
		for i, w := range strings.Fields(fmt.Sprintf("%s (%s): %s.", f.Name, strings.Join(targets, ", "), f.Does)) {
			if i > 0 && len(line)+1+len(w) > 80 {
				b.WriteString(line + "\n")
				line = "      "
			} else if i > 0 {
				line += " "
			}
			line += w
		}
		b.WriteString(line + "\n")
	}
	return b.String()
}
