// Package msl generates Metal Shading Language compute kernels for the
// nodes of tapml's IR.
//
// Generate turns one node, with the concrete types of its inputs and
// outputs, into a codegen.Kernel: MSL source specialised on those shapes
// (sizes are baked in as constants), its bindings (`device` buffer
// arguments `[[buffer(i)]]`, inputs then outputs, ascending), the
// threadgroup size and the grid of threadgroups to dispatch (Metal's
// dispatchThreadgroups:threadsPerThreadgroup:). Values that change between
// calls of the same shapes (the position of a decode step) are read from
// their i32 buffers, never baked in.
//
// Every kernel is one `kernel void tapml_main(...)` in its own source (one
// MTLLibrary per kernel); its parameters are the buffers, then the
// position attributes thread_position_in_grid (gid),
// threadgroup_position_in_grid (wid), thread_position_in_threadgroup (lid)
// and thread_index_in_threadgroup (li). Threadgroup memory is declared at
// the top of the kernel and synchronised with
// threadgroup_barrier(mem_flags::mem_threadgroup).
//
// The kernels follow the algorithms of codegen/wgsl (one thread per
// element; one threadgroup per row for reductions; tiled and GEMV
// matmuls; online-softmax attention), so results agree with the WebGPU
// target up to f32 rounding. Arithmetic is f32; ids, positions and argmax
// results are i32 (int); other dtypes are rejected with an error. Integer
// add, sub, mul and neg wrap (they compute in uint), as the CPU reference
// does.
//
// The kernels need IEEE semantics (NaN tests, no reassociation): compile
// them with fast math off (MTLCompileOptions.fastMathEnabled = NO, or
// `xcrun metal -fno-fast-math`). runtime/metal does.
//
// No Metal compiler exists on Linux. Check runs the approximate check that
// CI uses: clang-14 parses a kernel as C++ for OpenCL against a stub
// metal_stdlib (stub/metal_stdlib) that declares only the Metal API the
// generator uses, so an undeclared name, a type error or a misspelt
// attribute is an error. Real checks need macOS.
//
// Options.Fault injects a deliberate bug into the kernel (for tests of the
// carving and migration tools); see Faults.
package msl

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/tapml/tapml/codegen"
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

// Options control code generation.
type Options struct {
	Limits Limits
	// Fault, when set, injects a deliberate bug into the kernel. It is for
	// tests only; see Faults for the names and what each does.
	Fault string
}

type generator func(g *gen) (*codegen.Kernel, error)

var generators = map[string]generator{}

func init() {
	for _, op := range ir.UnaryOps {
		generators[op] = genElementwise
	}
	for _, op := range ir.BinaryOps {
		generators[op] = genElementwise
	}
	for op, fn := range map[string]generator{
		"fused_elementwise": genElementwise,
		"constant":          genConstant,
		"cast":              genCast,
		"gather":            genGather,
		"matmul":            genMatmul,
		"rms_norm":          genNorm,
		"layer_norm":        genNorm,
		"softmax":           genSoftmax,
		"argmax":            genArgmax,
		"rope":              genRope,
		"kv_write":          genKVWrite,
		"attention":         genAttention,
		"reshape":           genCopy,
		"probe":             genCopy,
		"transfer":          genCopy,
		"transpose":         genTranspose,
		"slice":             genSlice,
		"concat":            genConcat,
	} {
		generators[op] = fn
	}
}

// Supports reports whether op has an MSL kernel.
func Supports(op string) bool { return generators[op] != nil }

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
	if ir.LookupOp(n.Op) == nil {
		return fail(fmt.Errorf("unknown op %q", n.Op))
	}
	genFn := generators[n.Op]
	if genFn == nil {
		return fail(fmt.Errorf("no MSL kernel for op %s", n.Op))
	}
	if opts.Fault != "" && !knownFault(opts.Fault) {
		return fail(fmt.Errorf("unknown fault %q (known: %s)", opts.Fault, strings.Join(FaultNames(), ", ")))
	}
	if len(n.Inputs) > 0 && len(in) != len(n.Inputs) {
		return fail(fmt.Errorf("%d input types for %d inputs", len(in), len(n.Inputs)))
	}
	for i, t := range in {
		if !t.Shape.IsStatic() {
			return fail(fmt.Errorf("input %d has a symbolic shape %s; kernels need concrete shapes", i, t.Shape))
		}
	}
	want, attrs, err := ir.InferTypes(n.Op, in, BoundAttrs(n, in, out))
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
	for i, t := range append(append([]ir.Type{}, in...), out...) {
		what := fmt.Sprintf("input %d", i)
		if i >= len(in) {
			what = fmt.Sprintf("output %d", i-len(in))
		}
		if t.DType != ir.F32 && t.DType != ir.I32 {
			return fail(fmt.Errorf("%s is %s; MSL kernels support f32 and i32 tensors", what, t))
		}
		if t.Shape.NumElements() > math.MaxUint32 {
			return fail(fmt.Errorf("%s has more than 2^32-1 elements", what))
		}
	}
	g := &gen{node: n, op: n.Op, attrs: attrs, in: in, out: out, lim: opts.Limits.withDefaults(), fault: opts.Fault}
	k, err := genFn(g)
	if err != nil {
		return fail(err)
	}
	if g.fault != "" && !g.faultApplied {
		return fail(fmt.Errorf("fault %q does not apply to op %s", g.fault, n.Op))
	}
	if nb := len(k.Bindings); nb > g.lim.MaxBuffers {
		return fail(fmt.Errorf("kernel needs %d buffers, the device allows %d", nb, g.lim.MaxBuffers))
	}
	for i, c := range k.Grid {
		if c > g.lim.MaxThreadgroupsPerDimension {
			return fail(fmt.Errorf("grid %v exceeds %d threadgroups in dimension %d", k.Grid, g.lim.MaxThreadgroupsPerDimension, i))
		}
	}
	if g.sharedBytes > g.lim.MaxThreadgroupMemory {
		return fail(fmt.Errorf("kernel needs %d bytes of threadgroup memory, the device allows %d", g.sharedBytes, g.lim.MaxThreadgroupMemory))
	}
	k.Language = Language
	k.Op = n.Op
	k.NodeID = n.ID
	k.Entry = Entry
	return k, nil
}

// BoundAttrs returns n's attributes with the symbols of shape attributes
// (reshape's [seq, 8, 8] in a prefill function) replaced by their sizes in
// this call, found by matching the node's declared input and output types
// against the concrete ones (in, and out when given). It returns n.Attrs
// itself when no attribute is symbolic.
func BoundAttrs(n *ir.Node, in, out []ir.Type) ir.Attrs {
	symbolic := false
	for _, v := range n.Attrs {
		if v.Kind == ir.AttrShape && !v.Shape.IsStatic() {
			symbolic = true
		}
	}
	if !symbolic {
		return n.Attrs
	}
	env := map[string]int64{}
	match := func(vals []*ir.Value, concrete []ir.Type) {
		for i, v := range vals {
			if v == nil || i >= len(concrete) || v.Type.Shape.Rank() != concrete[i].Shape.Rank() {
				continue
			}
			for j, d := range v.Type.Shape {
				if !d.IsStatic() && concrete[i].Shape[j].IsStatic() {
					env[d.Sym] = concrete[i].Shape[j].Size
				}
			}
		}
	}
	match(n.Inputs, in)
	match(n.Outputs, out)
	a := n.Attrs.Clone()
	for k, v := range a {
		if v.Kind == ir.AttrShape && !v.Shape.IsStatic() {
			v.Shape = v.Shape.Bind(env)
			a[k] = v
		}
	}
	return a
}

// param is one buffer argument of the kernel.
type param struct {
	decl string // "device const float* in0"
}

// gen holds the state of generating one kernel.
type gen struct {
	node  *ir.Node
	op    string
	attrs ir.Attrs
	in    []ir.Type
	out   []ir.Type
	lim   Limits

	fault        string
	faultApplied bool

	src         strings.Builder // program-scope declarations, then the kernel
	params      []param
	bindings    []codegen.Binding
	shared      []string // threadgroup declarations, emitted at the top of the kernel
	sharedBytes int
	helpers     []string // names of helper functions to declare
}

// faultIs reports whether the kernel should inject fault f, and records that
// it did.
func (g *gen) faultIs(f string) bool {
	if g.fault == f {
		g.faultApplied = true
		return true
	}
	return false
}

func (g *gen) p(format string, args ...any) {
	fmt.Fprintf(&g.src, format, args...)
	g.src.WriteByte('\n')
}

// mslType is the MSL scalar type of a dtype.
func mslType(dt ir.DType) string {
	if dt == ir.I32 {
		return "int"
	}
	return "float"
}

// bind declares a buffer argument; elem is the element type it is viewed
// as ("float", "int", "float4").
func (g *gen) bind(name string, access codegen.Access, t ir.Type, elem string, input, output int) {
	idx := len(g.bindings)
	cst := "const "
	if access != codegen.Read {
		cst = ""
	}
	g.params = append(g.params, param{decl: fmt.Sprintf("device %s%s* %s [[buffer(%d)]]", cst, elem, name, idx)})
	g.bindings = append(g.bindings, codegen.Binding{Index: idx, Name: name, Access: access, Type: t, Input: input, Output: output})
}

// bindAll declares every input as in0.. and every output as out0.., with
// their scalar element types.
func (g *gen) bindAll() {
	for i, t := range g.in {
		g.bind("in"+strconv.Itoa(i), codegen.Read, t, mslType(t.DType), i, -1)
	}
	for i, t := range g.out {
		g.bind("out"+strconv.Itoa(i), codegen.Write, t, mslType(t.DType), -1, i)
	}
}

// share declares a threadgroup array of n elements of elem (4 bytes).
func (g *gen) share(elem, name string, n int) {
	g.shared = append(g.shared, fmt.Sprintf("threadgroup %s %s[%d];", elem, name, max(n, 1)))
	g.sharedBytes += 4 * max(n, 1)
}

// entry writes the kernel's signature: the buffers, then the position
// attributes gid (thread_position_in_grid), wid
// (threadgroup_position_in_grid), lid (thread_position_in_threadgroup) and
// li (thread_index_in_threadgroup); then the threadgroup declarations.
func (g *gen) entry() {
	g.p("kernel void %s(", Entry)
	for _, p := range g.params {
		g.p("    %s,", p.decl)
	}
	g.p("    uint3 gid [[thread_position_in_grid]],")
	g.p("    uint3 wid [[threadgroup_position_in_grid]],")
	g.p("    uint3 lid [[thread_position_in_threadgroup]],")
	g.p("    uint li [[thread_index_in_threadgroup]]) {")
	for _, s := range g.shared {
		g.p("  %s", s)
	}
}

// kernel finishes the kernel with the source written so far: the header
// and the helpers the kernel uses go first.
func (g *gen) kernel(wg, grid [3]int) *codegen.Kernel {
	var b strings.Builder
	fmt.Fprintf(&b, "// tapml MSL kernel: %s (node %d)\n", g.op, g.node.ID)
	b.WriteString("#include <metal_stdlib>\nusing namespace metal;\n")
	for _, h := range g.helpers {
		b.WriteString(helpers[h])
		b.WriteByte('\n')
	}
	b.WriteString(g.src.String())
	return &codegen.Kernel{Source: []byte(b.String()), Bindings: g.bindings, WorkgroupSize: wg, Grid: grid}
}

// useHelper makes the kernel declare a helper function (once, before the
// kernel).
func (g *gen) useHelper(name string) {
	if !slices.Contains(g.helpers, name) {
		g.helpers = append(g.helpers, name)
	}
}

// fold spreads groups threadgroups over a grid whose dimensions stay
// within the limit (x, then y, then z), returning the grid and the MSL
// expression of the linear threadgroup index, which may exceed groups-1 in
// the slack of the last row: kernels guard it.
func (g *gen) fold(groups int) ([3]int, string) { return g.foldDims(groups, 3) }

// foldDims folds into at most dims grid dimensions (2 leaves wid.z to the
// caller); a grid that does not fit is left oversized for Generate to
// report.
func (g *gen) foldDims(groups, dims int) ([3]int, string) {
	m := g.lim.MaxThreadgroupsPerDimension
	if groups <= m {
		return [3]int{groups, 1, 1}, "wid.x"
	}
	if groups <= m*m || dims < 3 {
		gy := ceilDiv(groups, m)
		gx := ceilDiv(groups, gy)
		return [3]int{gx, gy, 1}, fmt.Sprintf("(wid.x + wid.y * %du)", gx)
	}
	gz := ceilDiv(groups, m*m)
	rest := ceilDiv(groups, gz)
	gy := ceilDiv(rest, m)
	gx := ceilDiv(rest, gy)
	return [3]int{gx, gy, gz}, fmt.Sprintf("(wid.x + wid.y * %du + wid.z * %du)", gx, gx*gy)
}

// threads is the largest power of two <= want that the limits allow for a
// one-dimensional threadgroup.
func (g *gen) threads(want int) int {
	want = min(want, g.lim.MaxThreadsPerThreadgroup)
	t := 1
	for t*2 <= want {
		t *= 2
	}
	return t
}

// barrier emits a threadgroup barrier; the missing_barrier fault drops the
// first droppable one of the kernel.
func (g *gen) barrier(droppable bool) { g.barrierIndent("  ", droppable) }

func (g *gen) barrierIndent(indent string, droppable bool) {
	if droppable && g.faultIs(FaultMissingBarrier) {
		g.p("%s// fault missing_barrier: threadgroup_barrier dropped here", indent)
		return
	}
	g.p("%sthreadgroup_barrier(mem_flags::mem_threadgroup);", indent)
}

func ceilDiv(a, b int) int { return (a + b - 1) / b }

// f32Lit is an MSL float literal for v (rounded to f32).
func f32Lit(v float64) string {
	f := float32(v)
	switch {
	case math.IsNaN(float64(f)):
		return "NAN"
	case math.IsInf(float64(f), 1):
		return "INFINITY"
	case math.IsInf(float64(f), -1):
		return "(-INFINITY)"
	}
	s := strconv.FormatFloat(float64(f), 'e', -1, 32)
	if f < 0 || (f == 0 && math.Signbit(float64(f))) {
		return "(" + s + "f)"
	}
	return s + "f"
}

// i32Lit is an MSL int literal.
func i32Lit(v int64) string {
	if v <= math.MinInt32 {
		return "(-2147483647 - 1)"
	}
	if v > math.MaxInt32 {
		v = math.MaxInt32
	}
	if v < 0 {
		return "(" + strconv.FormatInt(v, 10) + ")"
	}
	return strconv.FormatInt(v, 10)
}

// sizes returns the static sizes of a type.
func sizes(t ir.Type) []int { return t.Shape.Sizes() }

func numel(t ir.Type) int { return int(t.Shape.NumElements()) }

// prod multiplies sizes.
func prod(s []int) int {
	n := 1
	for _, d := range s {
		n *= d
	}
	return n
}
