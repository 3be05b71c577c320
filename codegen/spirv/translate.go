package spirv

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/tapml/tapml/codegen/wgsl"
	"github.com/tapml/tapml/codegen/wgslfront"
	"github.com/x448/float16"
)

// Translate translates a WGSL compute module of tapml's dialect
// (codegen/wgslfront says what it is) whose entry point is wgsl.Entry into
// a SPIR-V module (little-endian words) whose entry point is Entry, and
// returns the checked WGSL module with it.
//
// The translation is straightforward, so that the kernels stay as their
// WGSL was tuned: a let is an SSA value and a var a function variable; an
// element of a buffer, workgroup array or var is one OpAccessChain and one
// OpLoad or OpStore; loops stay loops, in glslang's shape; workgroup
// memory, barriers and helper functions are kept as written. No bounds
// checks are added: the kernels index correctly by construction.
//
// Where SPIR-V leaves undefined what WGSL defines, the module does what
// WGSL does: i32 +, -, * and negation wrap around (SPIR-V's do); integer
// division by zero gives the dividend and remainder by zero 0, and i32 MIN
// / -1 is MIN (the divisor is replaced by 1 in those cases, unless it is a
// constant that needs nothing); shifts take the amount modulo 32; abs of
// the most negative i32 is itself. Where WGSL leaves a float result to the
// implementation, the module gives the CPU reference's (runtime/cpu), as
// codegen/msl does: f32 and f16 max and min propagate NaN and order -0
// below +0; round is round-half-to-even; x != x is a NaN test (OpIsNan)
// and integer x == x is true; != on floats is unordered (true for NaN).
// && and || evaluate both sides (the front end guarantees that
// expressions have no side effects). Float to integer conversions are the
// driver's outside the integer range (the kernels clamp first).
//
// f16 adds the Float16 capability, and StorageBuffer16BitAccess when a
// buffer holds f16; subgroup operations add GroupNonUniform and the
// capability of their class (Arithmetic, Ballot, Shuffle,
// ShuffleRelative): all core in SPIR-V 1.3. Such modules need the device
// features that go with them (shaderFloat16, storageBuffer16BitAccess,
// subgroup operations in compute); kernels without them use only the
// Shader capability. Subgroup matrices add CooperativeMatrixNV and
// SPV_NV_cooperative_matrix (see matrix.go), which need the device's
// VK_NV_cooperative_matrix.
func Translate(src string) (code []byte, m *wgslfront.Module, err error) {
	m, err = wgslfront.Parse(src, wgsl.Entry)
	if err != nil {
		return nil, nil, err
	}
	defer func() {
		if r := recover(); r != nil {
			f, ok := r.(failure)
			if !ok { // a bug; an error, so that no kernel takes the process down
				f.err = fmt.Errorf("internal error: %v", r)
			}
			code, err = nil, f.err
		}
	}()
	t := &translator{m: newModule(), src: m, vals: map[*wgslfront.Decl]uint32{}, ptrs: map[*wgslfront.Decl]uint32{},
		consts: map[*wgslfront.Decl]uint32{}, fns: map[*wgslfront.Fn]uint32{}}
	t.module()
	return t.m.bytes(), m, nil
}

// failure is how the translator gives up on a module the front end
// accepted but SPIR-V cannot encode (a table longer than one instruction,
// a constant that is not finite); Translate recovers it as its error.
type failure struct{ err error }

func failf(pos wgslfront.Pos, format string, args ...any) {
	panic(failure{fmt.Errorf("%s: %s", pos, fmt.Sprintf(format, args...))})
}

type translator struct {
	m      *module
	src    *wgslfront.Module
	b      *builder                   // of the function being translated
	vals   map[*wgslfront.Decl]uint32 // lets, parameters and builtins: their values
	ptrs   map[*wgslfront.Decl]uint32 // vars, buffers, workgroup arrays, tables: their variables
	consts map[*wgslfront.Decl]uint32 // module-scope consts: their constants
	fns    map[*wgslfront.Fn]uint32   // helper functions called: their ids
	queue  []*wgslfront.Fn            // helpers called but not yet translated
	loops  []loopLabels               // of the loops around the statement being translated, innermost last
}

type loopLabels struct{ brk, cont uint32 }

// module translates the whole module: buffers, workgroup arrays, the
// entry point, then the helper functions it calls.
func (t *translator) module() {
	m := t.m
	if t.src.SubgroupMatrix {
		m.capability(capCooperativeMatrixNV)
		m.extension("SPV_NV_cooperative_matrix")
	}
	for _, d := range t.src.Buffers {
		elem := d.Type.Elem
		if scalarOf(elem).Kind == wgslfront.F16 {
			m.capability(capStorageBuffer16BitAccess)
		}
		t.ptrs[d] = m.storageBuffer(d.Binding, t.typ(elem), d.Type.Stride(), d.Access == "read", d.Name)
	}
	for _, d := range t.src.Workgroup {
		t.ptrs[d] = m.variable(m.typePointer(scWorkgroup, t.typ(d.Type)), scWorkgroup, 0, d.Name)
	}
	main := t.src.Entry
	fn := m.id()
	m.name(fn, Entry)
	t.b, _ = m.newBuilder(fn, m.typeVoid(), m.typeFunction(m.typeVoid()), nil)
	for _, p := range main.Params {
		ty := t.typ(p.Type)
		v := m.builtinInput(builtins[p.Builtin], ty, p.Name)
		if strings.HasPrefix(p.Builtin, "subgroup") {
			m.capability(capGroupNonUniform)
		}
		t.vals[p] = t.b.load(ty, v)
	}
	t.stmts(main.Body)
	t.b.finish(true)
	m.entryPoint(fn, Entry, t.src.WorkgroupSize)
	for len(t.queue) > 0 {
		f := t.queue[0]
		t.queue = t.queue[1:]
		t.helper(f)
	}
}

// builtins are the SPIR-V builtins of the entry point's parameters.
var builtins = map[string]uint32{
	"workgroup_id": 26, "local_invocation_id": 27, "local_invocation_index": 29, "global_invocation_id": 28,
	"num_workgroups": 24, "subgroup_size": 36, "subgroup_invocation_id": 41,
}

// helper translates a helper function.
func (t *translator) helper(f *wgslfront.Fn) {
	m := t.m
	ret := t.typ(f.Result)
	params := make([]uint32, len(f.Params))
	for i, p := range f.Params {
		params[i] = t.typ(p.Type)
	}
	var ids []uint32
	t.b, ids = m.newBuilder(t.fns[f], ret, m.typeFunction(ret, params...), params)
	m.name(t.fns[f], f.Name)
	for i, p := range f.Params {
		t.vals[p] = ids[i]
		m.name(ids[i], p.Name)
	}
	t.stmts(f.Body)
	t.b.finish(false)
}

// fnID returns the id of helper f, queueing its translation.
func (t *translator) fnID(f *wgslfront.Fn) uint32 {
	if id, ok := t.fns[f]; ok {
		return id
	}
	id := t.m.id()
	t.fns[f] = id
	t.queue = append(t.queue, f)
	return id
}

// typ is the SPIR-V type of a type of the dialect (arrays: fixed-size).
func (t *translator) typ(ty *wgslfront.Type) uint32 {
	m := t.m
	switch ty.Kind {
	case wgslfront.Bool:
		return m.typeBool()
	case wgslfront.I32:
		return m.typeInt(true)
	case wgslfront.U32:
		return m.typeInt(false)
	case wgslfront.F32:
		return m.typeFloat(32)
	case wgslfront.F16:
		return m.typeFloat(16)
	case wgslfront.Vector:
		return m.typeVector(t.typ(ty.Elem), ty.N)
	case wgslfront.Array:
		return m.typeArray(t.typ(ty.Elem), ty.N)
	case wgslfront.Matrix:
		return m.typeCooperativeMatrix(t.typ(ty.Elem), ty.Rows, ty.Cols)
	}
	panic(fmt.Sprintf("spirv: type %s", ty))
}

// scalarOf is the scalar of a scalar, vector or array type.
func scalarOf(ty *wgslfront.Type) *wgslfront.Type {
	for ty.Kind == wgslfront.Vector || ty.Kind == wgslfront.Array {
		ty = ty.Elem
	}
	return ty
}

// Statements.

func (t *translator) stmts(body []*wgslfront.Stmt) {
	for _, s := range body {
		if t.b.terminated {
			return // after a return, break or continue: unreachable
		}
		t.stmt(s)
	}
}

func (t *translator) stmt(s *wgslfront.Stmt) {
	b := t.b
	switch s.Kind {
	case wgslfront.StmtDecl:
		d := s.Decl
		if d.Unused {
			return
		}
		if d.Kind == wgslfront.DeclLet {
			t.vals[d] = t.expr(d.Init)
			return
		}
		ty := t.typ(d.Type)
		v := b.local(ty, d.Name)
		t.ptrs[d] = v
		if d.Init != nil {
			b.store(v, t.expr(d.Init))
		} else {
			b.store(v, t.zero(d.Type)) // WGSL zero-initialises
		}
	case wgslfront.StmtAssign:
		if s.Unused {
			return
		}
		p := t.ref(s.LHS)
		if s.Op == "=" {
			b.store(p, t.expr(s.X))
			return
		}
		op := strings.TrimSuffix(s.Op, "=")
		x := b.load(t.typ(s.LHS.Type), p)
		b.store(p, t.arith(op, s.LHS.Type, x, s.X, t.expr(s.X), s.LHS.Type))
	case wgslfront.StmtIncDec:
		if s.Unused {
			return
		}
		p := t.ref(s.LHS)
		ty := t.typ(s.LHS.Type)
		op := uint32(opIAdd)
		if s.Op == "--" {
			op = opISub
		}
		b.store(p, b.op(op, ty, b.load(ty, p), t.m.constant(ty, 1)))
	case wgslfront.StmtBarrier:
		b.barrier()
	case wgslfront.StmtCall:
		t.matrixStore(s.X)
	case wgslfront.StmtIf:
		var els func()
		if len(s.Else) > 0 {
			els = func() { t.stmts(s.Else) }
		}
		b.ifElse(t.expr(s.X), func() { t.stmts(s.Body) }, els)
	case wgslfront.StmtFor:
		if s.Init != nil {
			t.stmt(s.Init)
		}
		var cond func() uint32
		if s.X != nil {
			cond = func() uint32 { return t.expr(s.X) }
		}
		b.loop(cond, func(brk, cont uint32) {
			t.loops = append(t.loops, loopLabels{brk, cont})
			t.stmts(s.Body)
			t.loops = t.loops[:len(t.loops)-1]
		}, func() {
			if s.Post != nil {
				t.stmt(s.Post)
			}
		})
	case wgslfront.StmtBlock:
		t.stmts(s.Body)
	case wgslfront.StmtReturn:
		if s.X == nil {
			b.terminate(opReturn)
		} else {
			b.terminate(opReturnValue, t.expr(s.X))
		}
	case wgslfront.StmtBreak:
		b.branch(t.loops[len(t.loops)-1].brk)
	case wgslfront.StmtContinue:
		b.branch(t.loops[len(t.loops)-1].cont)
	}
}

// zero is the zero value of a type.
func (t *translator) zero(ty *wgslfront.Type) uint32 {
	if ty.Scalar() {
		return t.constOf(ty, 0, 0)
	}
	return t.m.constNull(t.typ(ty))
}

// ref returns a pointer to the memory e names (a var, buffer, workgroup
// array or table, or an element or component of one) with one
// OpAccessChain, or 0 when e is not memory (a let, a parameter, a value).
func (t *translator) ref(e *wgslfront.Expr) uint32 {
	root := e
	var chain []*wgslfront.Expr // from e down to the root
	for root.Kind == wgslfront.ExprIndex || root.Kind == wgslfront.ExprMember {
		chain = append(chain, root)
		root = root.Args[0]
	}
	if root.Kind != wgslfront.ExprIdent {
		return 0
	}
	base, sc, indices := t.memory(root.Ref)
	if base == 0 {
		return 0
	}
	if len(chain) == 0 {
		return base
	}
	for i := len(chain) - 1; i >= 0; i-- {
		if c := chain[i]; c.Kind == wgslfront.ExprMember {
			indices = append(indices, t.m.constU32(uint32(strings.Index("xyzw", c.Text))))
		} else {
			indices = append(indices, t.expr(c.Args[1]))
		}
	}
	ptr := t.m.typePointer(sc, t.typ(e.Type))
	return t.b.op(opAccessChain, ptr, append([]uint32{base}, indices...)...)
}

// memory returns the variable of d (a var, buffer, workgroup array or
// table), its storage class and the indices that lead from it to its
// value (a buffer's Block member); base is 0 when d is not memory.
func (t *translator) memory(d *wgslfront.Decl) (base, sc uint32, indices []uint32) {
	switch d.Kind {
	case wgslfront.DeclVar:
		sc = scFunction
	case wgslfront.DeclStorage:
		sc, indices = scStorageBuffer, []uint32{t.m.constU32(0)} // the Block's member
	case wgslfront.DeclWorkgroup:
		sc = scWorkgroup
	case wgslfront.DeclPrivate:
		sc = scPrivate
		t.table(d)
	default:
		return 0, 0, nil
	}
	return t.ptrs[d], sc, indices
}

// table declares a var<private> table (once): a Private variable
// initialised with a constant.
func (t *translator) table(d *wgslfront.Decl) {
	if t.ptrs[d] != 0 {
		return
	}
	elem := d.Type.Elem
	if len(d.Init.Args)+3 > maxWords {
		failf(d.Pos, "table %s has %d elements; a SPIR-V constant holds at most %d", d.Name, len(d.Init.Args), maxWords-3)
	}
	parts := make([]uint32, len(d.Init.Args))
	for i, a := range d.Init.Args {
		parts[i] = t.constant(a, elem)
	}
	ty := t.typ(d.Type)
	init := t.m.constComposite(ty, parts)
	t.ptrs[d] = t.m.variable(t.m.typePointer(scPrivate, ty), scPrivate, init, d.Name)
}

// Expressions.

// expr returns the value of e.
func (t *translator) expr(e *wgslfront.Expr) uint32 {
	b := t.b
	if foldable(e) {
		return t.constant(e, e.Type)
	}
	switch e.Kind {
	case wgslfront.ExprParen:
		return t.expr(e.Args[0])
	case wgslfront.ExprIdent:
		switch d := e.Ref; d.Kind {
		case wgslfront.DeclLet, wgslfront.DeclParam, wgslfront.DeclBuiltin:
			return t.vals[d]
		case wgslfront.DeclConst:
			if t.consts[d] == 0 {
				t.consts[d] = t.constant(d.Init, d.Type)
			}
			return t.consts[d]
		}
		return b.load(t.typ(e.Type), t.ref(e))
	case wgslfront.ExprUnary:
		x := t.expr(e.Args[0])
		switch {
		case e.Text == "!":
			return b.op(opLogicalNot, t.typ(e.Type), x)
		case scalarOf(e.Type).Float():
			return b.op(opFNegate, t.typ(e.Type), x)
		}
		return b.op(opSNegate, t.typ(e.Type), x)
	case wgslfront.ExprBinary:
		return t.binary(e)
	case wgslfront.ExprIndex, wgslfront.ExprMember:
		if p := t.ref(e); p != 0 {
			return b.load(t.typ(e.Type), p)
		}
		// A component of a vector value.
		v := t.expr(e.Args[0])
		if e.Kind == wgslfront.ExprMember {
			return b.op(opCompositeExtract, t.typ(e.Type), v, uint32(strings.Index("xyzw", e.Text)))
		}
		if i, ok := wgslfront.ConstValue(e.Args[1]); ok {
			return b.op(opCompositeExtract, t.typ(e.Type), v, uint32(i))
		}
		return b.op(opVectorExtractDynamic, t.typ(e.Type), v, t.expr(e.Args[1]))
	case wgslfront.ExprCall:
		return t.call(e)
	}
	panic(fmt.Sprintf("spirv: expression kind %d", e.Kind))
}

func (t *translator) binary(e *wgslfront.Expr) uint32 {
	b := t.b
	x, y := e.Args[0], e.Args[1]
	switch {
	case e.Text == "&&":
		return b.op(opLogicalAnd, t.typ(e.Type), t.expr(x), t.expr(y))
	case e.Text == "||":
		return b.op(opLogicalOr, t.typ(e.Type), t.expr(x), t.expr(y))
	case e.Same && !scalarOf(x.Type).Float():
		return t.m.constBool(e.Text == "==")
	case x.Type.Kind == wgslfront.Matrix && e.Text == "*":
		// A matrix times a scalar (the checker allows no other product).
		return b.op(opMatrixTimesScalar, t.typ(e.Type), t.expr(x), t.expr(y))
	case x.Type.Kind == wgslfront.Matrix:
		// Element by element (the checker allows +, - and / of one
		// float matrix type).
		return b.op(arithOps[e.Text][0], t.typ(e.Type), t.expr(x), t.expr(y))
	case e.Same:
		nan := b.op(opIsNan, t.typ(e.Type), t.expr(x))
		if e.Text == "==" {
			return b.op(opLogicalNot, t.typ(e.Type), nan)
		}
		return nan
	}
	return t.arith(e.Text, x.Type, t.expr(x), y, t.expr(y), e.Type)
}

// Instructions of the operators: float, signed and unsigned.
var arithOps = map[string][3]uint32{
	"+": {opFAdd, opIAdd, opIAdd}, "-": {opFSub, opISub, opISub}, "*": {opFMul, opIMul, opIMul},
	"/": {opFDiv, opSDiv, opUDiv}, "%": {0, opSRem, opUMod},
	"<": {opFOrdLessThan, opSLessThan, opULessThan}, ">": {opFOrdGreaterThan, opSGreaterThan, opUGreaterThan},
	"<=": {opFOrdLessThanEqual, opSLessThanEqual, opULessThanEqual}, ">=": {opFOrdGreaterThanEqual, opSGreaterThanEqual, opUGreaterThanEqual},
	"==": {opFOrdEqual, opIEqual, opIEqual}, "!=": {opFUnordNotEqual, opINotEqual, opINotEqual},
	"<<": {0, opShiftLeftLogical, opShiftLeftLogical}, ">>": {0, opShiftRightArithmetic, opShiftRightLogical},
	"&": {0, opBitwiseAnd, opBitwiseAnd}, "|": {0, opBitwiseOr, opBitwiseOr}, "^": {0, opBitwiseXor, opBitwiseXor},
}

// arith applies a binary operator (not && or ||) to x (of type xt) and y
// (the expression, and its value yv), giving a value of type rt.
func (t *translator) arith(op string, xt *wgslfront.Type, xv uint32, y *wgslfront.Expr, yv uint32, rt *wgslfront.Type) uint32 {
	b := t.b
	yt := y.Type
	s := scalarOf(xt)
	res := t.typ(rt)
	if s.Kind == wgslfront.Bool {
		code := uint32(opLogicalEqual)
		if op == "!=" {
			code = opLogicalNotEqual
		}
		return b.op(code, res, xv, yv)
	}
	kind := 2 // unsigned
	switch {
	case s.Float():
		kind = 0
	case s.Kind == wgslfront.I32:
		kind = 1
	}
	code := arithOps[op][kind]
	switch op {
	case "*":
		// A float vector times a scalar has its own instruction.
		if xt.Kind == wgslfront.Vector && yt.Scalar() {
			return b.op(opVectorTimesScalar, res, xv, yv)
		}
		if yt.Kind == wgslfront.Vector && xt.Scalar() {
			return b.op(opVectorTimesScalar, res, yv, xv)
		}
	case "+", "-", "/":
		if xt.Kind == wgslfront.Vector && yt.Scalar() {
			yv = t.splat(rt, yv)
		}
		if yt.Kind == wgslfront.Vector && xt.Scalar() {
			xv = t.splat(rt, xv)
		}
	case "<<", ">>":
		if v, ok := wgslfront.ConstValue(y); !ok || v < 0 || v >= 32 {
			u32 := t.m.typeInt(false)
			yv = b.op(opBitwiseAnd, u32, yv, t.m.constU32(31))
		}
	}
	if (op == "/" || op == "%") && kind > 0 {
		return t.intDiv(op, code, s, xv, y, yv)
	}
	return b.op(code, res, xv, yv)
}

// intDiv divides integers as WGSL does: by zero, / gives the dividend and
// % gives 0; i32 MIN / -1 is MIN and MIN % -1 is 0. The divisor becomes 1
// in those cases (in SPIR-V they are undefined).
func (t *translator) intDiv(op string, code uint32, s *wgslfront.Type, x uint32, y *wgslfront.Expr, yv uint32) uint32 {
	b, m := t.b, t.m
	ty := t.typ(s)
	signed := s.Kind == wgslfront.I32
	if v, ok := wgslfront.ConstValue(y); ok {
		switch {
		case v == 0 && op == "/":
			return x
		case v == 0 || v == -1 && signed && op == "%":
			return t.constOf(s, 0, 0)
		case v == -1 && signed:
			return b.op(opSNegate, ty, x) // wraps: -MIN is MIN
		}
		return b.op(code, ty, x, yv)
	}
	boolT := m.typeBool()
	bad := b.op(opIEqual, boolT, yv, t.constOf(s, 0, 0))
	if signed {
		ovf := b.op(opLogicalAnd, boolT, b.op(opIEqual, boolT, x, t.constOf(s, math.MinInt32, 0)),
			b.op(opIEqual, boolT, yv, t.constOf(s, -1, 0)))
		bad = b.op(opLogicalOr, boolT, bad, ovf)
	}
	d := b.op(opSelect, ty, bad, t.constOf(s, 1, 0), yv)
	return b.op(code, ty, x, d)
}

// splat makes a vector of type vt whose components are all v.
func (t *translator) splat(vt *wgslfront.Type, v uint32) uint32 {
	parts := make([]uint32, vt.N)
	for i := range parts {
		parts[i] = v
	}
	return t.b.op(opCompositeConstruct, t.typ(vt), parts...)
}

// glslFloat are the GLSL.std.450 instructions of the float builtins that
// map one to one.
var glslFloat = map[string]uint32{
	"exp": glslExp, "exp2": glslExp2, "log": glslLog, "log2": glslLog2, "sqrt": glslSqrt,
	"inverseSqrt": glslInverseSqrt, "floor": glslFloor, "ceil": glslCeil, "trunc": glslTrunc,
	"round": glslRoundEven, "fract": glslFract, "sign": glslFSign, "sin": glslSin, "cos": glslCos,
	"tanh": glslTanh, "fma": glslFma,
}

func (t *translator) call(e *wgslfront.Expr) uint32 {
	b := t.b
	ty := t.typ(e.Type)
	if e.Type.Kind == wgslfront.Matrix {
		return t.matrix(e, ty)
	}
	args := make([]uint32, len(e.Args))
	for i, a := range e.Args {
		args[i] = t.expr(a)
	}
	switch {
	case e.Text == "bitcast":
		return b.op(opBitcast, ty, args[0])
	case e.Tmpl != nil: // a vector constructor (array constructors are only in tables)
		if len(args) == 1 {
			return t.splat(e.Type, args[0])
		}
		return b.op(opCompositeConstruct, ty, args...)
	case e.Conversion():
		return t.convert(args[0], e.Args[0].Type, e.Type)
	case e.Func != nil:
		return b.op(opFunctionCall, ty, append([]uint32{t.fnID(e.Func)}, args...)...)
	case strings.HasPrefix(e.Text, "subgroup"):
		return t.subgroup(e, ty, args)
	}
	s := scalarOf(e.Type)
	if op, ok := glslFloat[e.Text]; ok {
		return b.ext(ty, op, args...)
	}
	switch e.Text {
	case "abs":
		switch s.Kind {
		case wgslfront.U32:
			return args[0]
		case wgslfront.I32:
			// Negation wraps, so abs(MIN) is MIN, as in WGSL.
			neg := b.op(opSLessThan, t.boolLike(e.Type), args[0], t.zero(e.Type))
			return b.op(opSelect, ty, neg, b.op(opSNegate, ty, args[0]), args[0])
		}
		return b.ext(ty, glslFAbs, args...)
	case "max", "min":
		if s.Float() {
			return t.minMax(e.Text, e.Type, args[0], args[1])
		}
		op := map[string][2]uint32{"max": {glslSMax, glslUMax}, "min": {glslSMin, glslUMin}}[e.Text]
		if s.Kind == wgslfront.U32 {
			return b.ext(ty, op[1], args...)
		}
		return b.ext(ty, op[0], args...)
	case "clamp":
		switch s.Kind {
		case wgslfront.I32:
			return b.ext(ty, glslSClamp, args...)
		case wgslfront.U32:
			return b.ext(ty, glslUClamp, args...)
		}
		return b.ext(ty, glslFClamp, args...)
	case "select":
		cond := args[2]
		if e.Type.Kind == wgslfront.Vector {
			cond = t.splat(&wgslfront.Type{Kind: wgslfront.Vector, Elem: e.Args[2].Type, N: e.Type.N}, cond)
		}
		return b.op(opSelect, ty, cond, args[1], args[0])
	case "dot":
		return b.op(opDot, ty, args...)
	}
	panic(fmt.Sprintf("spirv: function %s", e.Text))
}

// boolLike is the bool type with the shape of ty (bool or a vector of
// bools).
func (t *translator) boolLike(ty *wgslfront.Type) uint32 {
	if ty.Kind == wgslfront.Vector {
		return t.m.typeVector(t.m.typeBool(), ty.N)
	}
	return t.m.typeBool()
}

// minMax is max or min of two floats (scalars) as the CPU reference
// computes them: NaN if either is NaN, and -0 below +0.
func (t *translator) minMax(name string, ty *wgslfront.Type, x, y uint32) uint32 {
	b := t.b
	f, boolT := t.typ(ty), t.m.typeBool()
	// max: x > y ? x : (y > x ? y : tie), and min with <; on a tie (equal
	// values, -0 and +0 included) max takes y when x is -0, min takes x.
	before, neg := uint32(opFOrdGreaterThan), t.signbit(ty, x)
	tie := b.op(opSelect, f, neg, y, x)
	if name == "min" {
		before, tie = opFOrdLessThan, b.op(opSelect, f, neg, x, y)
	}
	r := b.op(opSelect, f, b.op(before, boolT, y, x), y, tie)
	r = b.op(opSelect, f, b.op(before, boolT, x, y), x, r)
	nan := b.op(opLogicalOr, boolT, b.op(opIsNan, boolT, x), b.op(opIsNan, boolT, y))
	return b.op(opSelect, f, nan, b.op(opFAdd, f, x, y), r)
}

// signbit reports whether a float's sign bit is set (-0 included).
func (t *translator) signbit(ty *wgslfront.Type, x uint32) uint32 {
	b := t.b
	if ty.Kind == wgslfront.F16 {
		x = b.op(opFConvert, t.m.typeFloat(32), x) // keeps the sign of zeros
	}
	i32 := t.m.typeInt(true)
	return b.op(opSLessThan, t.m.typeBool(), b.op(opBitcast, i32, x), t.m.constant(i32, 0))
}

// convert converts a scalar value v of type from to type to.
func (t *translator) convert(v uint32, from, to *wgslfront.Type) uint32 {
	b := t.b
	ty := t.typ(to)
	if from.Eq(to) {
		return v
	}
	if from.Kind == wgslfront.Bool {
		return b.op(opSelect, ty, v, t.constOf(to, 1, 1), t.constOf(to, 0, 0))
	}
	switch {
	case to.Kind == wgslfront.Bool && from.Float():
		return b.op(opFUnordNotEqual, ty, v, t.constOf(from, 0, 0))
	case to.Kind == wgslfront.Bool:
		return b.op(opINotEqual, ty, v, t.constOf(from, 0, 0))
	case to.Float() && from.Float():
		return b.op(opFConvert, ty, v)
	case to.Float() && from.Kind == wgslfront.I32:
		return b.op(opConvertSToF, ty, v)
	case to.Float():
		return b.op(opConvertUToF, ty, v)
	case from.Float() && to.Kind == wgslfront.I32:
		return b.op(opConvertFToS, ty, v)
	case from.Float():
		return b.op(opConvertFToU, ty, v)
	}
	return b.op(opBitcast, ty, v) // i32 and u32
}

// subgroup emits a subgroup operation.
func (t *translator) subgroup(e *wgslfront.Expr, ty uint32, args []uint32) uint32 {
	b, m := t.b, t.m
	m.capability(capGroupNonUniform)
	scope := m.constU32(scopeSubgroup)
	s := scalarOf(e.Type)
	kind := 2
	switch {
	case s.Float():
		kind = 0
	case s.Kind == wgslfront.I32:
		kind = 1
	}
	reduce := map[string][3]uint32{
		"subgroupAdd": {opGroupNonUniformFAdd, opGroupNonUniformIAdd, opGroupNonUniformIAdd},
		"subgroupMax": {opGroupNonUniformFMax, opGroupNonUniformSMax, opGroupNonUniformUMax},
		"subgroupMin": {opGroupNonUniformFMin, opGroupNonUniformSMin, opGroupNonUniformUMin},
	}
	if ops, ok := reduce[e.Text]; ok {
		m.capability(capGroupNonUniformArithmetic)
		return b.op(ops[kind], ty, scope, groupReduce, args[0])
	}
	switch e.Text {
	case "subgroupBroadcast":
		m.capability(capGroupNonUniformBallot)
		lane, _ := wgslfront.ConstValue(e.Args[1])
		return b.op(opGroupNonUniformBroadcast, ty, scope, args[0], m.constU32(uint32(lane)))
	case "subgroupBroadcastFirst":
		m.capability(capGroupNonUniformBallot)
		return b.op(opGroupNonUniformBcFirst, ty, scope, args[0])
	}
	op := map[string]uint32{"subgroupShuffle": opGroupNonUniformShuffle, "subgroupShuffleXor": opGroupNonUniformShufXor,
		"subgroupShuffleUp": opGroupNonUniformShufUp, "subgroupShuffleDown": opGroupNonUniformShufDown}[e.Text]
	if op == opGroupNonUniformShuffle || op == opGroupNonUniformShufXor {
		m.capability(capGroupNonUniformShuffle)
	} else {
		m.capability(capGroupNonUniformShuffleRel)
	}
	return b.op(op, ty, scope, args[0], args[1])
}

// Constants.

// constant evaluates e, a constant expression of the dialect (a literal,
// an evaluated integer expression, a const, a negation or a conversion of
// one), and returns it as a constant of type ty.
func (t *translator) constant(e *wgslfront.Expr, ty *wgslfront.Type) uint32 {
	i, f := t.fold(e)
	return t.constOf(ty, i, f)
}

// foldable reports whether e is a constant expression that fold
// evaluates (a literal, an evaluated integer expression, a const, or a
// negation or conversion of one): it becomes a constant, not
// instructions.
func foldable(e *wgslfront.Expr) bool {
	if _, ok := wgslfront.ConstValue(e); ok {
		return true // an integer constant expression
	}
	switch {
	case e.Const != nil || e.Kind == wgslfront.ExprLit:
		return true
	case e.Kind == wgslfront.ExprIdent:
		return e.Ref.Kind == wgslfront.DeclConst
	case e.Kind == wgslfront.ExprParen:
		return foldable(e.Args[0])
	case e.Kind == wgslfront.ExprUnary:
		return e.Text == "-" && foldable(e.Args[0])
	case e.Conversion():
		return e.Type.Kind != wgslfront.Bool && e.Args[0].Type.Kind != wgslfront.Bool && foldable(e.Args[0])
	}
	return false
}

// fold evaluates a constant expression of a number type: an integer's
// value is i, a float's f, rounded to the expression's type as the GPU
// would (integers wrap, floats round to f32 or f16, which must stay
// finite: naga takes no infinite constants).
func (t *translator) fold(e *wgslfront.Expr) (i int64, f float64) {
	v, integer := wgslfront.ConstValue(e)
	switch {
	case e.Const != nil:
		i, f = *e.Const, float64(*e.Const)
	case integer:
		i = v
	case e.Kind == wgslfront.ExprLit && e.Type.Float():
		v, err := strconv.ParseFloat(e.Text[:len(e.Text)-1], 64)
		if err != nil {
			failf(e.Pos, "bad literal %s", e.Text)
		}
		f = v
	case e.Kind == wgslfront.ExprLit:
		v, err := strconv.ParseInt(strings.TrimRight(e.Text, "iu"), 0, 64)
		if err != nil {
			failf(e.Pos, "bad literal %s", e.Text)
		}
		i = v
	case e.Kind == wgslfront.ExprParen:
		i, f = t.fold(e.Args[0])
	case e.Kind == wgslfront.ExprIdent && e.Ref.Kind == wgslfront.DeclConst:
		i, f = t.fold(e.Ref.Init)
	case e.Kind == wgslfront.ExprUnary && e.Text == "-":
		i, f = t.fold(e.Args[0])
		i, f = -i, -f
	case e.Conversion():
		a := e.Args[0].Type
		i, f = t.fold(e.Args[0])
		switch {
		case a.Float() && !e.Type.Float(): // saturating, as WGSL's conversion
			lo, hi := float64(math.MinInt32), float64(math.MaxInt32)
			if e.Type.Kind == wgslfront.U32 {
				lo, hi = 0, math.MaxUint32
			}
			i = int64(max(lo, min(hi, math.Trunc(f))))
		case !a.Float() && e.Type.Float():
			f = float64(i)
		}
	default:
		failf(e.Pos, "%s is not a constant expression", e)
	}
	switch e.Type.Kind {
	case wgslfront.I32:
		i = int64(int32(i))
	case wgslfront.U32:
		i = int64(uint32(i))
	case wgslfront.F32:
		f = float64(float32(f))
	case wgslfront.F16:
		f = float64(float16.Fromfloat32(float32(f)).Float32())
	}
	if math.IsInf(f, 0) || math.IsNaN(f) {
		failf(e.Pos, "%s is not a finite %s", e, e.Type)
	}
	return i, f
}

// constOf is the constant of scalar type ty with value i (integers,
// bools) or f (floats).
func (t *translator) constOf(ty *wgslfront.Type, i int64, f float64) uint32 {
	m := t.m
	switch ty.Kind {
	case wgslfront.Bool:
		return m.constBool(i != 0)
	case wgslfront.I32:
		return m.constant(t.typ(ty), uint32(int32(i)))
	case wgslfront.U32:
		return m.constant(t.typ(ty), uint32(i))
	case wgslfront.F16:
		return m.constant(t.typ(ty), uint32(float16.Fromfloat32(float32(f)).Bits()))
	case wgslfront.F32:
		return m.constant(t.typ(ty), math.Float32bits(float32(f)))
	}
	panic(fmt.Sprintf("spirv: constant of type %s", ty))
}
