// Package llvm generates native CPU kernels for the nodes of tapml's IR as
// LLVM IR (LLVM 14 text, typed pointers), built with github.com/llir/llvm.
// runtime/llvm compiles them with clang-14 into a shared object and calls
// them through purego.
//
// # ABI
//
// Every kernel is one function with the C signature
//
//	int32_t entry(void **bufs, int64_t lo, int64_t hi);
//
// bufs[i] is the address of binding i (codegen.Binding.Index: inputs in the
// node's input order, then outputs; kv_write's cache is one ReadWrite
// binding that is both input 0 and output 0). Each buffer holds its
// tensor's elements row-major, little-endian, in the tensor's dtype, and is
// aligned to its element size. Shapes are baked into the code; the position
// of rope, kv_write and attention is read from its i32 buffer at run time.
//
// A kernel's work is a range of independent items, [0, Grid[0]) of the
// Kernel: a call computes items lo..hi-1 and nothing else. Every output
// element is written by exactly one item, with the same code whatever the
// split, so a caller may split [0, Grid[0]) into chunks and run them on
// several threads at once (runtime/llvm does, on goroutines) and get the
// same bits as one call over the whole range. What an item is depends on
// the op: an output element or row (elementwise ops, norms, softmax, argmax,
// copies), a tile of 4 output columns over all rows (matmul with
// transpose_b), a register tile of up to 4 rows by 16 columns (matmul
// without transpose_b; 64 columns when M < 4), one (query row, head) pair
// (attention), one row of x (rope), one new row (kv_write), one id (gather).
//
// The return value is 0 on success, or a Status code: a run-time error that
// the IR defines (an id out of range in gather, rows beyond the cache in
// kv_write and attention). Kernels check before they index, so a bad id or
// position never reads or writes out of bounds.
//
// Arithmetic is f32, like runtime/cpu: f16 and bf16 elements are widened on
// load and rounded once on store. Transcendentals are computed in double
// (libm) and rounded to f32, as the CPU reference does. Sums run in order
// in f32 (norms, softmax, attention's weighted sum of v), matching the
// reference's order, except dot products: matmul's (reassociated, or in
// order with fused multiply-adds, so that LLVM vectorises them) and
// attention's q·k (reassociated adds of rounded products).
//
// The module's target triple and data layout are those of the host (x86-64
// or arm64 on Linux or macOS; Options.Triple overrides), so clang's -O3
// vectorises the loops for -march=native.
package llvm

import (
	"fmt"
	goruntime "runtime"
	"strings"

	lir "github.com/llir/llvm/ir"

	"github.com/tapml/tapml/codegen"
	"github.com/tapml/tapml/codegen/fault"
	"github.com/tapml/tapml/ir"
)

// Options control code generation.
type Options struct {
	// Fault, when set, injects a deliberate bug into the kernel. It is for
	// tests only; codegen/fault has the names and what each does.
	Fault string
	// Triple and DataLayout set the module's target; empty means the host's.
	Triple, DataLayout string
}

// Status codes a kernel returns.
const (
	StatusOK         = 0
	StatusIDRange    = 1 // gather, expert_matmul: an id is outside the table or the experts
	StatusPosRange   = 2 // kv_write, attention: rows pos..pos+S-1 do not fit the cache
	StatusEmptyArgmx = 3 // argmax over an empty axis
)

// StatusError describes a kernel's non-zero return value.
func StatusError(op ir.Op, status int32) error {
	switch status {
	case StatusOK:
		return nil
	case StatusIDRange:
		return fmt.Errorf("%s: an id is out of range of the table (or of the experts)", op)
	case StatusPosRange:
		return fmt.Errorf("%s: rows pos..pos+S-1 do not fit the cache (or pos is negative)", op)
	case StatusEmptyArgmx:
		return fmt.Errorf("%s: argmax over an empty axis", op)
	}
	return fmt.Errorf("%s: kernel returned status %d", op, status)
}

// Options.Fault plants one of the test-only faults of codegen/fault in the
// kernel: that package's table says what each does and which ops' kernels
// take it (LLVM kernels keep an off-by-one index in bounds, wrapping
// around). Generate returns an error when the fault does not apply to the
// node's op. The generators name the faults by these aliases of the
// table's names.
const (
	FaultWrongIndex    = fault.WrongIndex
	FaultWrongConstant = fault.WrongConstant
	FaultF16Overflow   = fault.F16Overflow
)

// Supports reports whether op has an LLVM kernel.
func Supports(op ir.Op) bool { return generators[op] != nil }

// EntryName is the name of node n's kernel function: tapml_<op>_<id>
// (unique in a module whose nodes have distinct ids).
func EntryName(n *ir.Node) string {
	id := fmt.Sprint(n.ID)
	id = strings.ReplaceAll(id, "-", "m")
	return "tapml_" + n.Op.String() + "_" + id
}

// Generate returns the LLVM kernel of node n for the concrete input types
// in and output types out (nil: inferred; required when a shape attribute
// is symbolic, as reshape's [seq, ...] in prefill: out binds its symbols). Source is a complete module (IR
// text) holding the kernel function Entry and what it calls.
func Generate(n *ir.Node, in, out []ir.Type, opts Options) (*codegen.Kernel, error) {
	b := NewModule(opts)
	k, err := b.Add(n, in, out, opts)
	if err != nil {
		return nil, err
	}
	k.Source = b.Source()
	return k, nil
}

// Module collects the kernels of many nodes into one LLVM module, so that
// clang compiles them in one run.
type Module struct {
	m       *lir.Module
	decls   map[string]*lir.Func
	entries map[string]bool
}

// NewModule returns an empty module for the target in opts.
func NewModule(opts Options) *Module {
	m := lir.NewModule()
	m.TargetTriple, m.DataLayout = opts.Triple, opts.DataLayout
	if m.TargetTriple == "" {
		m.TargetTriple, m.DataLayout = HostTarget()
	}
	return &Module{m: m, decls: map[string]*lir.Func{}, entries: map[string]bool{}}
}

// HostTarget returns the target triple and data layout of the machine
// running the program.
func HostTarget() (triple, layout string) {
	switch goruntime.GOOS + "/" + goruntime.GOARCH {
	case "linux/amd64":
		return "x86_64-pc-linux-gnu", "e-m:e-p270:32:32-p271:32:32-p272:64:64-i64:64-f80:128-n8:16:32:64-S128"
	case "linux/arm64":
		return "aarch64-unknown-linux-gnu", "e-m:e-i8:8:32-i16:16:32-i64:64-i128:128-n32:64-S128"
	case "darwin/arm64":
		return "arm64-apple-macosx11.0.0", "e-m:o-i64:64-i128:128-n32:64-S128"
	case "darwin/amd64":
		return "x86_64-apple-macosx10.15.0", "e-m:o-i64:64-f80:128-n8:16:32:64-S128"
	}
	return "", ""
}

// Source returns the module's IR text.
func (b *Module) Source() []byte { return []byte(b.m.String()) }

// Len is the number of kernels in the module.
func (b *Module) Len() int { return len(b.entries) }

// Add generates node n's kernel into the module and returns it (its Source
// is nil: the code is the module's). A node whose kernel is already in the
// module (same entry name) is an error.
func (b *Module) Add(n *ir.Node, in, out []ir.Type, opts Options) (*codegen.Kernel, error) {
	if n == nil {
		return nil, fmt.Errorf("llvm: nil node")
	}
	fail := func(err error) (*codegen.Kernel, error) {
		return nil, fmt.Errorf("llvm: node %s: %w", n, err)
	}
	def := ir.LookupOp(n.Op)
	if def == nil {
		return fail(fmt.Errorf("unknown op %q", n.Op))
	}
	gen := generators[n.Op]
	if gen == nil {
		return fail(fmt.Errorf("no LLVM kernel for op %s", n.Op))
	}
	if opts.Fault != "" {
		if err := fault.Check(fault.LLVM, opts.Fault); err != nil {
			return fail(err)
		}
	}
	if len(in) != len(n.Inputs) {
		return fail(fmt.Errorf("%d input types for %d inputs", len(in), len(n.Inputs)))
	}
	for i, t := range in {
		if !t.Shape.IsStatic() {
			return fail(fmt.Errorf("input %d has a symbolic shape %s; kernels need concrete shapes", i, t.Shape))
		}
		if t.DType.Size() == 0 && !t.DType.IsBlock() {
			return fail(fmt.Errorf("input %d has invalid dtype %s", i, t.DType))
		}
	}
	want, attrs, err := ir.InferTypes(n.Op, in, n.BoundAttrs(in, out))
	if err != nil {
		return fail(err)
	}
	if out == nil {
		out = want
	}
	if len(out) != len(want) {
		return fail(fmt.Errorf("%d output types, op %s has %d outputs", len(out), n.Op, len(want)))
	}
	for i := range out {
		if !out[i].Shape.IsStatic() || !out[i].Equal(want[i]) {
			return fail(fmt.Errorf("output %d is given as %s, the inputs give %s", i, out[i], want[i]))
		}
	}
	entry := EntryName(n)
	if b.entries[entry] {
		return fail(fmt.Errorf("the module already has kernel %s", entry))
	}
	// Generate into a scratch module, then move the function (and its
	// globals) over: a failure leaves the module untouched.
	g := newGen(n, attrs, in, out, opts.Fault, entry)
	if err := gen(g); err != nil {
		return fail(err)
	}
	if g.fault != "" && !g.faultApplied {
		return fail(fmt.Errorf("fault %q does not apply to op %s", g.fault, n.Op))
	}
	for _, gl := range g.m.Globals {
		b.m.Globals = append(b.m.Globals, gl)
	}
	for _, f := range g.m.Funcs {
		if len(f.Blocks) == 0 { // a declaration
			if _, ok := b.decls[f.Name()]; !ok {
				b.decls[f.Name()] = f
				b.m.Funcs = append(b.m.Funcs, f)
			}
			continue
		}
		b.m.Funcs = append(b.m.Funcs, f)
	}
	b.entries[entry] = true
	k := &codegen.Kernel{
		Language:      "llvm",
		Op:            n.Op,
		NodeID:        n.ID,
		Entry:         entry,
		Bindings:      g.bindings,
		WorkgroupSize: [3]int{1, 1, 1},
		Grid:          [3]int{int(g.items), 1, 1},
	}
	return k, nil
}

type generator func(g *gen) error

var generators = map[ir.Op]generator{}

func init() {
	for _, op := range ir.UnaryOps {
		generators[op] = genElementwise
	}
	for _, op := range ir.BinaryOps {
		generators[op] = genElementwise
	}
	for op, fn := range map[ir.Op]generator{
		ir.OpFusedElementwise: genElementwise,
		ir.OpCast:             genCast,
		ir.OpConstant:         genConstant,
		ir.OpGather:           genGather,
		ir.OpDequantize:       genDequantize,
		ir.OpMatmul:           genMatmul,
		ir.OpRMSNorm:          genNorm,
		ir.OpRMSNormMatmul:    genRMSNormMatmul,
		ir.OpRMSNormQKV:       genRMSNormMatmul,
		ir.OpRMSNormSwiGLU:    genRMSNormMatmul,
		ir.OpLayerNorm:        genNorm,
		ir.OpSoftmax:          genSoftmax,
		ir.OpArgmax:           genArgmax,
		ir.OpRope:             genRope,
		ir.OpRopeKVWrite:      genRopeKVWrite,
		ir.OpKVWrite:          genKVWrite,
		ir.OpAttention:        genAttention,
		ir.OpReshape:          genCopy,
		ir.OpProbe:            genCopy,
		ir.OpTransfer:         genCopy,
		ir.OpTranspose:        genTranspose,
		ir.OpSlice:            genSlice,
		ir.OpConcat:           genConcat,
		ir.OpIota:             genIota,
		ir.OpReduceSum:        genReduce,
		ir.OpReduceMean:       genReduce,
		ir.OpReduceMax:        genReduce,
		ir.OpPool2D:           genPool,
		ir.OpConv2D:           genConv,
		ir.OpConvTranspose2D:  genConv,
		ir.OpResize:           genResize,
		ir.OpTopK:             genTopK,
		ir.OpExpertMatmul:     genExpertMatmul,
		ir.OpTokenShift:       genTokenShift,
		ir.OpCausalConv1D:     genCausalConv1D,
		ir.OpWKV:              genWKV,
		ir.OpSelectiveScan:    genSelectiveScan,
	} {
		generators[op] = fn
	}
}
