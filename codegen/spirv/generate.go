// Package spirv generates SPIR-V compute kernels for the nodes of tapml's
// IR, as binaries assembled in Go (no glslang, no text).
//
// Generate turns one node, with the concrete types of its inputs and
// outputs, into a codegen.Kernel whose Source is a SPIR-V 1.3 module
// (little-endian words) for Vulkan 1.1: sizes are baked in as constants,
// values that change between calls of the same shapes (the position of a
// decode step) are read from their buffers. Bindings are storage buffers of
// descriptor set 0, inputs then outputs in ascending order; each is a Block
// struct wrapping a runtime array (so a bound buffer may be larger than the
// tensor), read-only inputs are NonWritable. kv_write is the one in-place
// kernel: its cache is a single read-write binding that carries input 0 and
// output 0. Arithmetic is f32; ids, positions and argmax results are i32;
// other dtypes are rejected with an error.
//
// The modules use only what naga's SPIR-V front end (wgpu v0.19) accepts:
// the Shader capability, GLSL.std.450, structured control flow in the shape
// glslang emits, function variables instead of phi nodes, finite constants.
// Every module passes `spirv-val --target-env vulkan1.1` (a test checks it).
//
// The module builder (Module) and the structured function builder
// (Builder) are exported for other SPIR-V producers in tapml.
//
// Options.Fault injects a deliberate bug (for tests of the carving and
// migration tools); see Faults.
package spirv

import (
	"fmt"
	"strings"

	"github.com/tapml/tapml/codegen"
	"github.com/tapml/tapml/ir"
)

// Limits are the device limits a kernel must respect. A zero field takes
// the WebGPU default (DefaultLimits). The fields are those of wgsl.Limits,
// in the same order, so one converts to the other: spirv.Limits(l).
type Limits struct {
	MaxInvocationsPerWorkgroup      int // maxComputeInvocationsPerWorkgroup
	MaxWorkgroupSizeX               int // maxComputeWorkgroupSizeX
	MaxWorkgroupSizeY               int // maxComputeWorkgroupSizeY (kernels are one-dimensional)
	MaxWorkgroupSizeZ               int // maxComputeWorkgroupSizeZ (kernels are one-dimensional)
	MaxWorkgroupStorageSize         int // maxComputeWorkgroupStorageSize, bytes
	MaxWorkgroupsPerDimension       int // maxComputeWorkgroupsPerDimension
	MaxStorageBuffersPerShaderStage int // maxStorageBuffersPerShaderStage
}

// DefaultLimits are WebGPU's default limits, which every adapter supports.
func DefaultLimits() Limits {
	return Limits{MaxInvocationsPerWorkgroup: 256, MaxWorkgroupSizeX: 256, MaxWorkgroupSizeY: 256, MaxWorkgroupSizeZ: 64,
		MaxWorkgroupStorageSize: 16384, MaxWorkgroupsPerDimension: 65535, MaxStorageBuffersPerShaderStage: 8}
}

func (l Limits) withDefaults() Limits {
	d := DefaultLimits()
	set := func(v *int, def int) {
		if *v <= 0 {
			*v = def
		}
	}
	set(&l.MaxInvocationsPerWorkgroup, d.MaxInvocationsPerWorkgroup)
	set(&l.MaxWorkgroupSizeX, d.MaxWorkgroupSizeX)
	set(&l.MaxWorkgroupSizeY, d.MaxWorkgroupSizeY)
	set(&l.MaxWorkgroupSizeZ, d.MaxWorkgroupSizeZ)
	set(&l.MaxWorkgroupStorageSize, d.MaxWorkgroupStorageSize)
	set(&l.MaxWorkgroupsPerDimension, d.MaxWorkgroupsPerDimension)
	set(&l.MaxStorageBuffersPerShaderStage, d.MaxStorageBuffersPerShaderStage)
	return l
}

// Tuning selects among kernel variants; the zero value is the default.
type Tuning struct {
	// GEMVLanes is the number of invocations that share one output of the
	// transpose_b matmul with M ≤ 4 (a power of two up to 64; default 32).
	// 1 selects the register-tiled kernel, which has no barriers (better
	// on CPU drivers such as lavapipe).
	GEMVLanes int
}

// Options control code generation.
type Options struct {
	Limits Limits
	Tuning Tuning
	// Fault, when set, injects a deliberate bug into the kernel. It is for
	// tests only; see Faults for the names and what each does.
	Fault string
}

// Entry is the entry point of every generated kernel.
// PendingTranslation lists ops added after the SPIR-V generators stopped
// growing: their vulkan kernels come from their WGSL once codegen/spirv
// translates WGSL to SPIR-V (the lead merges that work); until then the
// vulkan target runs them nowhere, and a migration to vulkan keeps them on
// the source. The tests that require a kernel for every op exempt them.
var PendingTranslation = []ir.Op{ir.OpCompare, ir.OpWhere}

const Entry = "main"

// Language is the codegen.Kernel language of SPIR-V kernels.
const Language = "spirv"

type generator func(k *kern) error

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
		ir.OpConstant:         genConstant,
		ir.OpCast:             genCast,
		ir.OpGather:           genGather,
		ir.OpMatmul:           genMatmul,
		ir.OpRMSNorm:          genNorm,
		ir.OpLayerNorm:        genNorm,
		ir.OpSoftmax:          genSoftmax,
		ir.OpArgmax:           genArgmax,
		ir.OpRope:             genRope,
		ir.OpKVWrite:          genKVWrite,
		ir.OpAttention:        genAttention,
		ir.OpReshape:          genCopy,
		ir.OpProbe:            genCopy,
		ir.OpTransfer:         genCopy,
		ir.OpTranspose:        genTranspose,
		ir.OpSlice:            genSlice,
		ir.OpConcat:           genConcat,
	} {
		generators[op] = fn
	}
}

// Supports reports whether op has a SPIR-V kernel.
func Supports(op ir.Op) bool { return generators[op] != nil }

// Generate returns the SPIR-V kernel of node n for the concrete input types
// in and output types out (every shape static; out may be nil, and is then
// inferred).
func Generate(n *ir.Node, in, out []ir.Type, opts Options) (*codegen.Kernel, error) {
	if n == nil {
		return nil, fmt.Errorf("spirv: nil node")
	}
	fail := func(err error) (*codegen.Kernel, error) {
		return nil, fmt.Errorf("spirv: node %s: %w", n, err)
	}
	if ir.LookupOp(n.Op) == nil {
		return fail(fmt.Errorf("unknown op %q", n.Op))
	}
	gen := generators[n.Op]
	if gen == nil {
		return fail(fmt.Errorf("no SPIR-V kernel for op %s", n.Op))
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
	want, attrs, err := ir.InferTypes(n.Op, in, boundAttrs(n, in, out))
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
	all := append(append([]ir.Type{}, in...), out...)
	for i, t := range all {
		if t.DType != ir.F32 && t.DType != ir.I32 {
			what := fmt.Sprintf("input %d", i)
			if i >= len(in) {
				what = fmt.Sprintf("output %d", i-len(in))
			}
			return fail(fmt.Errorf("%s is %s; SPIR-V kernels support f32 and i32 tensors", what, t))
		}
		if t.Shape.NumElements() > 1<<31-1 {
			return fail(fmt.Errorf("%s has more than 2^31-1 elements", t))
		}
	}
	k := &kern{op: n.Op, attrs: attrs, in: in, out: out, lim: opts.Limits.withDefaults(), tune: opts.Tuning, fault: opts.Fault}
	k.m = NewModule()
	k.b = k.m.NewFunction(Entry)
	if err := gen(k); err != nil {
		return fail(err)
	}
	if k.fault != "" && !k.faultApplied {
		return fail(fmt.Errorf("fault %q does not apply to op %s", k.fault, n.Op))
	}
	if nb := len(k.bindings); nb > k.lim.MaxStorageBuffersPerShaderStage {
		return fail(fmt.Errorf("kernel needs %d storage buffers, the device allows %d", nb, k.lim.MaxStorageBuffersPerShaderStage))
	}
	for i, c := range k.grid {
		if c > k.lim.MaxWorkgroupsPerDimension {
			return fail(fmt.Errorf("grid %v exceeds %d workgroups in dimension %d", k.grid, k.lim.MaxWorkgroupsPerDimension, i))
		}
	}
	k.b.Finish()
	k.m.EntryPoint(k.b.Func(), Entry, k.wg)
	return &codegen.Kernel{
		Language:      Language,
		Op:            n.Op,
		NodeID:        n.ID,
		Source:        Bytes(k.m.Words()),
		Entry:         Entry,
		Bindings:      k.bindings,
		WorkgroupSize: k.wg,
		Grid:          k.grid,
	}, nil
}

// boundAttrs returns n's attributes with the symbols of shape attributes
// (reshape's [seq, 8, 8] in a prefill function) bound to their sizes in
// this call, found by matching the node's declared input and output types
// with the concrete ones. It returns n.Attrs itself when nothing is
// symbolic.
func boundAttrs(n *ir.Node, in, out []ir.Type) ir.Attrs {
	symbolic := false
	for _, v := range n.Attrs {
		symbolic = symbolic || (v.Kind == ir.AttrShape && !v.Shape.IsStatic())
	}
	if !symbolic {
		return n.Attrs
	}
	env := map[string]int64{}
	bind := func(vals []*ir.Value, concrete []ir.Type) {
		for i, v := range vals {
			if v == nil || i >= len(concrete) || v.Type.Shape.Rank() != concrete[i].Shape.Rank() {
				continue
			}
			for j, d := range v.Type.Shape {
				if c := concrete[i].Shape[j]; !d.IsStatic() && c.IsStatic() {
					env[d.Sym] = c.Size
				}
			}
		}
	}
	bind(n.Inputs, in)
	bind(n.Outputs, out)
	a := n.Attrs.Clone()
	for name, v := range a {
		if v.Kind == ir.AttrShape && !v.Shape.IsStatic() {
			v.Shape = v.Shape.Bind(env)
			a[name] = v
		}
	}
	return a
}

// kern is the state of generating one kernel.
type kern struct {
	op    ir.Op
	attrs ir.Attrs
	in    []ir.Type
	out   []ir.Type
	lim   Limits
	tune  Tuning

	fault        string
	faultApplied bool
	barrierFault bool // the missing_barrier fault has dropped its barrier

	m        *Module
	b        *Builder
	bindings []codegen.Binding
	ins      []Array
	outs     []Array
	wg       [3]int
	grid     [3]int

	wid, lid Value // builtins, loaded by entry
}

// faultIs reports whether the kernel should inject fault f, and records
// that it did.
func (k *kern) faultIs(f string) bool {
	if k.fault == f {
		k.faultApplied = true
		return true
	}
	return false
}

// elemType is the SPIR-V scalar type of a dtype.
func (k *kern) elemType(dt ir.DType) Type {
	if dt == ir.I32 {
		return k.m.I32
	}
	return k.m.F32
}

// bind declares the next storage binding.
func (k *kern) bind(name string, access codegen.Access, t ir.Type, input, output int) Array {
	idx := len(k.bindings)
	arr := k.m.StorageBuffer(idx, k.elemType(t.DType), access == codegen.Read, name)
	k.bindings = append(k.bindings, codegen.Binding{Index: idx, Name: name, Access: access, Type: t, Input: input, Output: output})
	return arr
}

// bindAll declares every input as in0.. and every output as out0...
func (k *kern) bindAll() {
	for i, t := range k.in {
		k.ins = append(k.ins, k.bind(fmt.Sprintf("in%d", i), codegen.Read, t, i, -1))
	}
	for i, t := range k.out {
		k.outs = append(k.outs, k.bind(fmt.Sprintf("out%d", i), codegen.Write, t, -1, i))
	}
}

// threads is the largest power of two <= want that the limits allow for a
// one-dimensional workgroup.
func (k *kern) threads(want int) int {
	want = min(want, k.lim.MaxInvocationsPerWorkgroup, k.lim.MaxWorkgroupSizeX)
	t := 1
	for t*2 <= want {
		t *= 2
	}
	return t
}

// entry sets the workgroup size and grid (groups workgroups folded into
// two dimensions when they exceed the per-dimension limit), loads the
// builtins and returns the linear workgroup index, which may exceed
// groups-1 in the slack of a folded grid (callers guard).
func (k *kern) entry(wgx, groups int) Value {
	k.wg = [3]int{wgx, 1, 1}
	b := k.b
	widV := k.m.BuiltinInput(builtInWorkgroupID, "wid")
	lidV := k.m.BuiltinInput(builtInLocalInvocationID, "lid")
	k.wid = b.LoadVar(k.m.UVec3, widV)
	k.lid = b.LoadVar(k.m.UVec3, lidV)
	wx := b.Extract(k.m.U32, k.wid, 0)
	lim := k.lim.MaxWorkgroupsPerDimension
	if groups <= lim { // zero groups: nothing to do, nothing dispatched
		k.grid = [3]int{groups, 1, 1}
		return wx
	}
	gy := ceilDiv(groups, lim)
	gx := ceilDiv(groups, gy)
	k.grid = [3]int{gx, gy, 1}
	wy := b.Extract(k.m.U32, k.wid, 1)
	return b.Add(wx, b.MulU(wy, gx))
}

// tid is the invocation's index in its (one-dimensional) workgroup.
func (k *kern) tid() Value { return k.b.Extract(k.m.U32, k.lid, 0) }

// elementwise generates a one-invocation-per-element kernel over n
// elements: body computes element i (a u32 value, i < n).
func (k *kern) elementwise(n int, body func(i Value)) {
	wgx := k.threads(256)
	g := k.entry(wgx, ceilDiv(n, wgx))
	b := k.b
	i := b.Add(b.MulU(g, wgx), k.tid())
	b.If(b.Lt(i, b.U(n)), func() { body(i) })
}

// rowwise generates a one-workgroup-per-row kernel: rows rows, wgx
// invocations each. body gets the row (clamped to the last row, so that
// the slack of a folded grid computes a valid row), whether the row is
// real (writes must be guarded by it) and the invocation index. Every
// invocation of a workgroup runs body, so body may use barriers.
func (k *kern) rowwise(rows, wgx int, body func(row, valid, tid Value)) {
	g := k.entry(wgx, rows)
	b := k.b
	valid := b.Lt(g, b.U(rows))
	row := b.MinU(g, max(rows-1, 0))
	body(row, valid, k.tid())
}

// barrier emits a workgroup barrier; the missing_barrier fault drops the
// first droppable one of the kernel.
func (k *kern) barrier(droppable bool) {
	if droppable && !k.barrierFault && k.faultIs(FaultMissingBarrier) {
		k.barrierFault = true
		return
	}
	k.b.Barrier()
}

// reduce combines v over the workgroup's wgx invocations through red (a
// workgroup array of at least wgx elements) with a tree of barriers, and
// returns the result to every invocation. It ends with a barrier, so red
// may be reused at once.
func (k *kern) reduce(red Array, tid Value, wgx int, v Value, combine func(a, c Value) Value) Value {
	r := k.reduceN([]Array{red}, tid, wgx, []Value{v}, func(a, c []Value) []Value {
		return []Value{combine(a[0], c[0])}
	})
	return r[0]
}

// reduceN is reduce over several arrays at once (argmax's value and
// index).
func (k *kern) reduceN(reds []Array, tid Value, wgx int, vs []Value, combine func(a, c []Value) []Value) []Value {
	b := k.b
	for j, red := range reds {
		b.Store(red, tid, vs[j])
	}
	k.barrier(true)
	for s := wgx / 2; s >= 1; s /= 2 {
		b.If(b.Lt(tid, b.U(s)), func() {
			other := b.AddU(tid, s)
			a := make([]Value, len(reds))
			c := make([]Value, len(reds))
			for j, red := range reds {
				a[j] = b.Load(red, tid)
				c[j] = b.Load(red, other)
			}
			res := combine(a, c)
			for j, red := range reds {
				b.Store(red, tid, res[j])
			}
		})
		k.barrier(false)
	}
	// The results go through function variables: the stores pin the loads
	// before the barrier. (naga 0.19's SPIR-V reader emits the expressions
	// pending before an OpControlBarrier after the barrier, which would
	// move these loads past it and race with the next reduction's stores.)
	vars := make([]Var, len(reds))
	for j, red := range reds {
		vars[j] = b.NewVar(red.Elem, b.Load(red, b.U(0)))
	}
	k.barrier(false)
	out := make([]Value, len(reds))
	for j := range vars {
		out[j] = b.Get(vars[j])
	}
	return out
}

// ov applies the f16_overflow fault to a float intermediate: a magnitude
// above 65504 (the largest f16) becomes ±inf.
func (k *kern) ov(v Value) Value {
	if !k.faultIs(FaultF16Overflow) {
		return v
	}
	b := k.b
	big := b.Gt(b.Ext(glslFAbs, v), b.F(65504))
	// v·2^127·2^127 overflows to ±inf at run time (no infinite constant).
	inf := b.Mul(b.Mul(v, b.F(1.7014118e38)), b.F(1.7014118e38))
	return b.Select(big, inf, v)
}

// nan returns a quiet NaN made at run time (naga rejects non-finite
// constants).
func (k *kern) nan() Value {
	return k.b.Bitcast(k.m.F32, k.b.U(0x7fc00000))
}

func ceilDiv(a, b int) int { return (a + b - 1) / b }

// sizes returns the static sizes of a type.
func sizes(t ir.Type) []int { return t.Shape.Sizes() }

func numel(t ir.Type) int { return int(t.Shape.NumElements()) }

func prod(s []int) int {
	n := 1
	for _, d := range s {
		n *= d
	}
	return n
}

// strides returns the row-major strides of a shape.
func strides(shape []int) []int {
	s := make([]int, len(shape))
	acc := 1
	for d := len(shape) - 1; d >= 0; d-- {
		s[d] = acc
		acc *= shape[d]
	}
	return s
}

// outerInner splits shape around axis.
func outerInner(shape []int, axis int) (outer, dim, inner int) {
	return prod(shape[:axis]), shape[axis], prod(shape[axis+1:])
}

// coords returns the coordinates of linear index idx in shape.
func (k *kern) coords(shape []int, idx Value) []Value {
	b := k.b
	c := make([]Value, len(shape))
	r := idx
	for d := len(shape) - 1; d >= 0; d-- {
		if d == 0 {
			c[d] = r
			break
		}
		c[d] = b.RemU(r, shape[d])
		r = b.DivU(r, shape[d])
	}
	return c
}

// broadcastOffset is the offset into an input of shape in for the output
// element at coords of shape out (numpy broadcasting, right-aligned).
func (k *kern) broadcastOffset(out, in []int, coords []Value) Value {
	b := k.b
	st := strides(in)
	off := b.U(0)
	first := true
	for d := range in {
		od := len(out) - len(in) + d
		if in[d] == 1 {
			continue
		}
		t := b.MulU(coords[od], st[d])
		if first {
			off, first = t, false
		} else {
			off = b.Add(off, t)
		}
	}
	return off
}
