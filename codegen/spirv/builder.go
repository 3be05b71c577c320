package spirv

import "fmt"

// Value is an SSA value of a function: its id and type.
type Value struct {
	ID uint32
	T  Type
}

// Array is an array in memory that kernels index: a storage buffer (the
// runtime array inside its Block struct), a workgroup array or a private
// table.
type Array struct {
	Var     uint32
	Elem    Type
	Len     int // elements, for fixed arrays
	elemPtr Type
	block   bool // the array is member 0 of a Block struct
}

// Var is a function-local variable (Function storage class): kernels keep
// every mutable value in one, so the control flow needs no phi nodes.
type Var struct {
	ID uint32
	T  Type
}

// Builder writes the body of one function with structured control flow:
// If, IfElse and For emit the selection and loop constructs (merge blocks,
// continue targets) in the exact shape the validator and naga expect.
type Builder struct {
	M *Module

	fn    uint32
	vars  []uint32 // OpVariable instructions of the entry block
	body  []uint32
	fence Var // stored to before each barrier
}

// NewFunction starts a void function with no parameters.
func (m *Module) NewFunction(name string) *Builder {
	b := &Builder{M: m, fn: m.ID()}
	m.Name(b.fn, name)
	b.body = inst(b.body, opLabel, m.ID())
	return b
}

// Func returns the id of the function.
func (b *Builder) Func() uint32 { return b.fn }

// Finish ends the function (with a return) and adds it to the module.
func (b *Builder) Finish() {
	b.emit(opReturn)
	m := b.M
	ft := m.FuncType(m.Void)
	m.functions = inst(m.functions, opFunction, m.Void.ID, b.fn, 0, ft.ID)
	// The entry block's label comes first, then its variables.
	m.functions = append(m.functions, b.body[:2]...)
	m.functions = append(m.functions, b.vars...)
	m.functions = append(m.functions, b.body[2:]...)
	m.functions = inst(m.functions, opFunctionEnd)
}

func (b *Builder) emit(op uint32, operands ...uint32) { b.body = inst(b.body, op, operands...) }

// op emits an instruction with a result of type t and returns the result.
func (b *Builder) op(op uint32, t Type, operands ...uint32) Value {
	id := b.M.ID()
	b.emit(op, append([]uint32{t.ID, id}, operands...)...)
	return Value{ID: id, T: t}
}

func (b *Builder) label(id uint32) { b.emit(opLabel, id) }

// Constants.

func (b *Builder) U(v int) Value {
	if v < 0 || v > 0xffffffff {
		panic(fmt.Sprintf("spirv: u32 constant %d out of range", v))
	}
	return Value{ID: b.M.ConstU(uint32(v)), T: b.M.U32}
}
func (b *Builder) I(v int32) Value   { return Value{ID: b.M.ConstI(v), T: b.M.I32} }
func (b *Builder) F(v float32) Value { return Value{ID: b.M.ConstF(v), T: b.M.F32} }
func (b *Builder) True() Value       { return Value{ID: b.M.ConstBool(true), T: b.M.Bool} }

// Zero returns the zero of t's kind.
func (b *Builder) Zero(t Type) Value {
	switch t.Kind {
	case kF32:
		return b.F(0)
	case kI32:
		return b.I(0)
	case kU32:
		return b.U(0)
	}
	panic("spirv: no zero of a non-scalar type")
}

// Arithmetic. Both operands must have the same type; the instruction
// follows the kind (float, signed or unsigned).

func (b *Builder) same(a, c Value, what string) {
	if a.T.ID != c.T.ID {
		panic(fmt.Sprintf("spirv: %s of values of types %d and %d", what, a.T.ID, c.T.ID))
	}
}

func (b *Builder) arith(fop, iop uint32, a, c Value, what string) Value {
	b.same(a, c, what)
	if a.T.Kind == kF32 {
		return b.op(fop, a.T, a.ID, c.ID)
	}
	return b.op(iop, a.T, a.ID, c.ID)
}

func (b *Builder) Add(a, c Value) Value { return b.arith(opFAdd, opIAdd, a, c, "add") }
func (b *Builder) Sub(a, c Value) Value { return b.arith(opFSub, opISub, a, c, "sub") }
func (b *Builder) Mul(a, c Value) Value { return b.arith(opFMul, opIMul, a, c, "mul") }

// Div divides: FDiv, UDiv or SDiv.
func (b *Builder) Div(a, c Value) Value {
	b.same(a, c, "div")
	switch a.T.Kind {
	case kF32:
		return b.op(opFDiv, a.T, a.ID, c.ID)
	case kI32:
		return b.op(opSDiv, a.T, a.ID, c.ID)
	}
	return b.op(opUDiv, a.T, a.ID, c.ID)
}

// Rem is the unsigned remainder.
func (b *Builder) Rem(a, c Value) Value {
	b.same(a, c, "rem")
	if a.T.Kind != kU32 {
		panic("spirv: Rem of a non-u32 value")
	}
	return b.op(opUMod, a.T, a.ID, c.ID)
}

// Neg negates a float or signed value.
func (b *Builder) Neg(a Value) Value {
	if a.T.Kind == kF32 {
		return b.op(opFNegate, a.T, a.ID)
	}
	return b.op(opSNegate, a.T, a.ID)
}

// AddU, MulU, DivU and RemU take a u32 value and a constant; they fold the
// trivial cases away so index arithmetic stays short.
func (b *Builder) AddU(a Value, c int) Value {
	if c == 0 {
		return a
	}
	return b.Add(a, b.U(c))
}
func (b *Builder) MulU(a Value, c int) Value {
	switch c {
	case 0:
		return b.U(0)
	case 1:
		return a
	}
	return b.Mul(a, b.U(c))
}
func (b *Builder) DivU(a Value, c int) Value {
	if c == 1 {
		return a
	}
	return b.Div(a, b.U(c))
}
func (b *Builder) RemU(a Value, c int) Value {
	if c == 1 {
		return b.U(0)
	}
	return b.Rem(a, b.U(c))
}

// Comparisons return bools.

func (b *Builder) cmp(fop, sop, uop uint32, a, c Value) Value {
	b.same(a, c, "comparison")
	switch a.T.Kind {
	case kF32:
		return b.op(fop, b.M.Bool, a.ID, c.ID)
	case kI32:
		return b.op(sop, b.M.Bool, a.ID, c.ID)
	}
	return b.op(uop, b.M.Bool, a.ID, c.ID)
}

func (b *Builder) Lt(a, c Value) Value {
	return b.cmp(opFOrdLessThan, opSLessThan, opULessThan, a, c)
}
func (b *Builder) Le(a, c Value) Value {
	return b.cmp(opFOrdLessThanEq, opSLessThanEqual, opULessThanEqual, a, c)
}
func (b *Builder) Gt(a, c Value) Value {
	return b.cmp(opFOrdGreaterThan, opSGreaterThan, opUGreaterThan, a, c)
}
func (b *Builder) Ge(a, c Value) Value {
	return b.cmp(opFOrdGreaterThanEq, opSGreaterThanEqual, opUGreaterThanEqual, a, c)
}
func (b *Builder) Eq(a, c Value) Value { return b.cmp(opFOrdEqual, opIEqual, opIEqual, a, c) }
func (b *Builder) Ne(a, c Value) Value { return b.cmp(opFOrdNotEqual, opINotEqual, opINotEqual, a, c) }

// IsNan reports whether a float is NaN, from its bits (exponent all ones,
// mantissa non-zero): robust under drivers' fast math, and expressible in
// every language naga translates to (WGSL has no isNan).
func (b *Builder) IsNan(a Value) Value {
	bits := b.op(opBitwiseAnd, b.M.U32, b.Bitcast(b.M.U32, a).ID, b.U(0x7fffffff).ID)
	return b.Gt(bits, b.U(0x7f800000))
}

func (b *Builder) And(a, c Value) Value { return b.op(opLogicalAnd, b.M.Bool, a.ID, c.ID) }
func (b *Builder) Or(a, c Value) Value  { return b.op(opLogicalOr, b.M.Bool, a.ID, c.ID) }
func (b *Builder) Not(a Value) Value    { return b.op(opLogicalNot, b.M.Bool, a.ID) }

// Select returns cond ? a : c.
func (b *Builder) Select(cond, a, c Value) Value {
	b.same(a, c, "select")
	return b.op(opSelect, a.T, cond.ID, a.ID, c.ID)
}

// Min and Max: GLSL FMin/FMax for floats, a compare and select for
// integers.
func (b *Builder) Min(a, c Value) Value {
	if a.T.Kind == kF32 {
		return b.Ext(glslFMin, a, c)
	}
	return b.Select(b.Lt(c, a), c, a)
}
func (b *Builder) Max(a, c Value) Value {
	if a.T.Kind == kF32 {
		return b.Ext(glslFMax, a, c)
	}
	return b.Select(b.Gt(c, a), c, a)
}

// MinU is min(a, c) for a u32 value and a constant.
func (b *Builder) MinU(a Value, c int) Value { return b.Min(a, b.U(c)) }

// Ext calls a GLSL.std.450 instruction; the result has the first
// argument's type.
func (b *Builder) Ext(instr uint32, args ...Value) Value {
	ops := []uint32{b.M.glsl, instr}
	for _, a := range args {
		ops = append(ops, a.ID)
	}
	return b.op(opExtInst, args[0].T, ops...)
}

// Conversions.

// ToF converts an integer to f32.
func (b *Builder) ToF(a Value) Value {
	switch a.T.Kind {
	case kF32:
		return a
	case kI32:
		return b.op(opConvertSToF, b.M.F32, a.ID)
	}
	return b.op(opConvertUToF, b.M.F32, a.ID)
}

// ToI converts f32 to i32, truncating toward zero.
func (b *Builder) ToI(a Value) Value { return b.op(opConvertFToS, b.M.I32, a.ID) }

// Bitcast reinterprets a's bits as t.
func (b *Builder) Bitcast(t Type, a Value) Value {
	if a.T.ID == t.ID {
		return a
	}
	return b.op(opBitcast, t, a.ID)
}

// Extract returns component i of a composite.
func (b *Builder) Extract(t Type, a Value, i int) Value {
	return b.op(opCompositeExtract, t, a.ID, uint32(i))
}

// Memory.

// Ptr returns a pointer to element idx (a u32 value) of arr.
func (b *Builder) Ptr(arr Array, idx Value) uint32 {
	if arr.block {
		return b.op(opAccessChain, arr.elemPtr, arr.Var, b.U(0).ID, idx.ID).ID
	}
	return b.op(opAccessChain, arr.elemPtr, arr.Var, idx.ID).ID
}

// Load reads arr[idx].
func (b *Builder) Load(arr Array, idx Value) Value {
	return b.op(opLoad, arr.Elem, b.Ptr(arr, idx))
}

// Store writes arr[idx] = v.
func (b *Builder) Store(arr Array, idx, v Value) {
	if v.T.ID != arr.Elem.ID {
		panic(fmt.Sprintf("spirv: store of a value of type %d into an array of %d", v.T.ID, arr.Elem.ID))
	}
	b.emit(opStore, b.Ptr(arr, idx), v.ID)
}

// LoadVar reads a builtin or other global variable of type t.
func (b *Builder) LoadVar(t Type, v uint32) Value { return b.op(opLoad, t, v) }

// NewVar declares a function variable of t and stores init in it (at the
// current point: a variable made inside a loop is re-initialised on every
// iteration).
func (b *Builder) NewVar(t Type, init Value) Var {
	id := b.M.ID()
	b.vars = inst(b.vars, opVariable, b.M.Pointer(scFunction, t).ID, id, scFunction)
	v := Var{ID: id, T: t}
	b.Set(v, init)
	return v
}

// Get reads a variable.
func (b *Builder) Get(v Var) Value { return b.op(opLoad, v.T, v.ID) }

// Set writes a variable.
func (b *Builder) Set(v Var, x Value) {
	if x.T.ID != v.T.ID {
		panic(fmt.Sprintf("spirv: set of a variable of type %d to a value of type %d", v.T.ID, x.T.ID))
	}
	b.emit(opStore, v.ID, x.ID)
}

// Barrier emits OpControlBarrier with workgroup execution and memory scope
// and acquire-release semantics on workgroup memory (WGSL's
// workgroupBarrier). It must be reached by every invocation of the
// workgroup (uniform control flow).
//
// A store to a function variable goes first: naga 0.19's SPIR-V reader
// emits the expressions pending at an OpControlBarrier after the barrier,
// and a store makes it emit them before (so a load written before the
// barrier runs before it).
func (b *Builder) Barrier() {
	if b.fence.ID == 0 {
		b.fence = b.NewVar(b.M.U32, b.U(0))
	} else {
		b.Set(b.fence, b.U(0))
	}
	b.emit(opControlBarrier, b.M.ConstU(scopeWorkgroup), b.M.ConstU(scopeWorkgroup),
		b.M.ConstU(semAcquireRelease|semWorkgroupMemory))
}

// Control flow.

// If runs then when cond holds.
func (b *Builder) If(cond Value, then func()) {
	merge, thenL := b.M.ID(), b.M.ID()
	b.emit(opSelectionMerge, merge, 0)
	b.emit(opBranchConditional, cond.ID, thenL, merge)
	b.label(thenL)
	then()
	b.emit(opBranch, merge)
	b.label(merge)
}

// IfElse runs then when cond holds and els otherwise.
func (b *Builder) IfElse(cond Value, then, els func()) {
	merge, thenL, elseL := b.M.ID(), b.M.ID(), b.M.ID()
	b.emit(opSelectionMerge, merge, 0)
	b.emit(opBranchConditional, cond.ID, thenL, elseL)
	b.label(thenL)
	then()
	b.emit(opBranch, merge)
	b.label(elseL)
	els()
	b.emit(opBranch, merge)
	b.label(merge)
}

// For runs body(i) for i = from; i < to; i += step, over u32 values (to
// must be defined before the loop). The loop is the shape glslang emits: a
// header with OpLoopMerge, a block that tests the condition, the body, and
// a continue block that steps the counter.
func (b *Builder) For(from, to Value, step int, body func(i Value)) {
	i := b.NewVar(b.M.U32, from)
	header, check, bodyL, cont, merge := b.M.ID(), b.M.ID(), b.M.ID(), b.M.ID(), b.M.ID()
	b.emit(opBranch, header)
	b.label(header)
	b.emit(opLoopMerge, merge, cont, 0)
	b.emit(opBranch, check)
	b.label(check)
	b.emit(opBranchConditional, b.Lt(b.Get(i), to).ID, bodyL, merge)
	b.label(bodyL)
	body(b.Get(i))
	b.emit(opBranch, cont)
	b.label(cont)
	b.Set(i, b.AddU(b.Get(i), step))
	b.emit(opBranch, header)
	b.label(merge)
}

// ForN is For from 0 to the constant n.
func (b *Builder) ForN(n int, body func(i Value)) { b.For(b.U(0), b.U(n), 1, body) }
