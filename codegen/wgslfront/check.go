package wgslfront

import (
	"math"
	"math/bits"
	"slices"
	"strconv"
	"strings"
)

// This file types the syntax tree: it resolves names, gives every
// expression its type (abstract integer literals take the type their
// context gives them and are evaluated), checks the rules of the dialect
// and the entry point, and marks the locals that are never read.

// concrete is the type an abstract type takes where nothing else decides.
func concrete(t *Type) *Type {
	if t.Kind == AbstractInt {
		return tI32
	}
	return t
}

// scalarOf is the scalar of a scalar or vector type (an array is itself).
func scalarOf(t *Type) *Type {
	if t.Kind == Vector {
		return t.Elem
	}
	return t
}

// checker types one module.
type checker struct {
	m       *Module
	globals map[string]*Decl
	fns     map[string]*Fn
	scopes  []map[string]*Decl
	cur     *Fn
	locals  []*Decl // the current function's lets and vars
	tables  bool    // typing a var<private> initializer: array constructors allowed
}

// reservedNames are WGSL's names of types and type generators, and the
// literals true and false, which the dialect does not let a declaration
// take.
var reservedNames = map[string]bool{"bool": true, "i32": true, "u32": true, "f32": true, "f16": true,
	"vec2": true, "vec3": true, "vec4": true, "array": true, "bitcast": true, "true": true, "false": true,
	"subgroup_matrix_left": true, "subgroup_matrix_right": true, "subgroup_matrix_result": true}

// check resolves and types m, checks its entry point (named entry) and
// fills in the module's facts.
func check(m *Module, entry string) {
	c := declare(m)
	for _, it := range m.Items {
		if it.Decl != nil {
			c.global(it.Decl)
		}
	}
	c.entryPoint(entry)
	c.bodies()
}

// declare makes the checker of m, with m's module-scope names declared.
func declare(m *Module) *checker {
	c := &checker{m: m, globals: map[string]*Decl{}, fns: map[string]*Fn{}}
	for _, it := range m.Items {
		name, pos := "", Pos{}
		switch {
		case it.Decl != nil:
			name, pos = it.Decl.Name, it.Decl.Pos
		case it.Fn != nil:
			name, pos = it.Fn.Name, it.Fn.Pos
		default:
			continue
		}
		if c.globals[name] != nil || c.fns[name] != nil || reservedNames[name] {
			failf(pos, "%s is declared twice or is a type name", name)
		}
		if it.Decl != nil {
			c.globals[name] = it.Decl
		} else {
			c.fns[name] = it.Fn
		}
	}
	return c
}

// bodies types the functions of the module and checks that none recurses.
func (c *checker) bodies() {
	for _, it := range c.m.Items {
		if f := it.Fn; f != nil {
			c.fn(f)
		}
	}
	for _, it := range c.m.Items {
		if it.Fn != nil {
			noRecursion(it.Fn)
		}
	}
}

func (c *checker) global(d *Decl) {
	switch d.Kind {
	case DeclConst, DeclPrivate:
		if d.Init == nil {
			failf(d.Pos, "%s: a module-scope const or var<private> needs an initializer", d.Name)
		}
		c.tables = d.Kind == DeclPrivate
		c.init(d)
		c.tables = false
		if d.Kind == DeclConst {
			if !d.Type.Scalar() {
				failf(d.Pos, "const %s is not a scalar", d.Name)
			}
			if !constExpr(d.Init) {
				failf(d.Init.Pos, "const %s: the initializer is not a constant expression", d.Name)
			}
			if v, ok := ConstValue(d.Init); ok {
				d.val = &v
			}
		} else {
			if d.Type.Kind != Array || d.Type.N == 0 || d.Init.Kind != ExprCall || d.Init.Tmpl == nil {
				failf(d.Pos, "var<private> %s must be a table: array<T, N>(values)", d.Name)
			}
			for _, a := range d.Init.Args {
				if !constExpr(a) {
					failf(a.Pos, "table %s: %s is not a constant expression", d.Name, a)
				}
			}
		}
	case DeclWorkgroup:
		if d.Init != nil || d.Type == nil || d.Type.Kind != Array || d.Type.N == 0 {
			failf(d.Pos, "var<workgroup> %s must be a fixed-size array without initializer", d.Name)
		}
		c.m.Workgroup = append(c.m.Workgroup, d)
		c.m.SharedBytes += d.Type.Size()
	case DeclStorage:
		if d.Init != nil || d.Type == nil || d.Type.Kind != Array || d.Type.N != 0 || d.Access != "read" && d.Access != "read_write" {
			failf(d.Pos, "storage buffer %s must be a runtime-sized array, read or read_write", d.Name)
		}
		c.m.Buffers = append(c.m.Buffers, d)
	}
	d.declared = true
}

// constExpr reports whether e is a constant expression of the dialect:
// literals, consts, parentheses, unary minus, conversions and integer
// arithmetic of them.
func constExpr(e *Expr) bool {
	switch e.Kind {
	case ExprLit:
		return true
	case ExprIdent:
		return e.Ref.Kind == DeclConst
	case ExprParen, ExprUnary:
		return e.Text != "!" && constExpr(e.Args[0])
	case ExprCall:
		return scalarTypes[e.Text] != nil && len(e.Args) == 1 && constExpr(e.Args[0])
	}
	_, ok := ConstValue(e)
	return ok
}

func (c *checker) fn(f *Fn) {
	c.cur, c.locals = f, nil
	c.scopes = []map[string]*Decl{{}}
	for _, p := range f.Params {
		switch {
		case p.Kind == DeclBuiltin != f.Entry:
			failf(p.Pos, "parameter %s: the entry point takes @builtin parameters, and only those", p.Name)
		case c.scopes[0][p.Name] != nil || reservedNames[p.Name]:
			failf(p.Pos, "parameter %s is declared twice or is a type name", p.Name)
		case !p.Type.Scalar() && p.Type.Kind != Vector:
			failf(p.Pos, "parameter %s is %s; parameters are scalars or vectors", p.Name, p.Type)
		}
		p.declared = true
		c.scopes[0][p.Name] = p
	}
	switch {
	case f.Entry && f.Result != nil:
		failf(f.Pos, "the entry point %s returns a value", f.Name)
	case !f.Entry && (f.Result == nil || !f.Result.Value()):
		failf(f.Pos, "helper function %s must return a scalar or a vector", f.Name)
	}
	c.stmts(f.Body)
	if !f.Entry && !returns(f.Body) {
		failf(f.Pos, "helper function %s may end without returning a value", f.Name)
	}
	markUnused(c.locals)
}

// returns reports whether body always ends in a return.
func returns(body []*Stmt) bool {
	for i := len(body) - 1; i >= 0; i-- {
		switch s := body[i]; s.Kind {
		case StmtComment:
			continue
		case StmtReturn:
			return true
		case StmtBlock:
			return returns(s.Body)
		case StmtIf:
			return returns(s.Body) && returns(s.Else)
		}
		return false
	}
	return false
}

// entryPoint checks the module's one entry point, which must be named
// entry, and the bindings of its buffers.
func (c *checker) entryPoint(entry string) {
	for _, it := range c.m.Items {
		if f := it.Fn; f != nil && f.Entry {
			if c.m.Entry != nil {
				failf(f.Pos, "a second entry point %s", f.Name)
			}
			c.m.Entry = f
		}
	}
	main := c.m.Entry
	switch {
	case main == nil:
		failf(Pos{1, 1}, "no @compute entry point")
	case main.Name != entry:
		failf(main.Pos, "the entry point is %s, not %s", main.Name, entry)
	case len(main.WorkgroupSize) == 0 || len(main.WorkgroupSize) > 3:
		failf(main.Pos, "the entry point needs @workgroup_size(x, y, z)")
	}
	c.m.WorkgroupSize = [3]int{1, 1, 1}
	for i, n := range main.WorkgroupSize {
		if n == 0 {
			failf(main.Pos, "@workgroup_size(%v) has a zero", main.WorkgroupSize)
		}
		c.m.WorkgroupSize[i] = n
	}
	for _, p := range main.Params {
		want, ok := builtinTypes[p.Builtin]
		if !ok || !p.Type.Eq(want) {
			failf(p.Pos, "@builtin(%s) %s is outside the dialect", p.Builtin, p.Type)
		}
		if strings.HasPrefix(p.Builtin, "subgroup") && !c.m.Subgroups {
			failf(p.Pos, "@builtin(%s) needs `enable subgroups;`", p.Builtin)
		}
	}
	slices.SortStableFunc(c.m.Buffers, func(a, b *Decl) int { return a.Binding - b.Binding })
	for i, d := range c.m.Buffers {
		if d.Binding != i {
			failf(d.Pos, "bindings are not 0, 1, ... in order (%s is @binding(%d))", d.Name, d.Binding)
		}
	}
}

// builtinTypes are the entry point's builtins and their types.
var builtinTypes = map[string]*Type{
	"workgroup_id":           vecOf(tU32, 3),
	"local_invocation_id":    vecOf(tU32, 3),
	"local_invocation_index": tU32,
	"global_invocation_id":   vecOf(tU32, 3),
	"num_workgroups":         vecOf(tU32, 3),
	"subgroup_size":          tU32,
	"subgroup_invocation_id": tU32,
}

// noRecursion fails when f calls itself, directly or not (WGSL forbids
// it).
func noRecursion(f *Fn) {
	switch f.visited {
	case 1:
		failf(f.Pos, "function %s calls itself", f.Name)
	case 2:
		return
	}
	f.visited = 1
	for _, g := range f.calls {
		noRecursion(g)
	}
	f.visited = 2
}

// init types a declaration's initializer, which gives the declaration its
// type when it has none.
func (c *checker) init(d *Decl) {
	t := c.anyExpr(d.Init) // arrays: the rules of each kind of declaration decide
	if d.Type == nil {
		d.Type = concrete(t)
	}
	c.assignable(d.Init, d.Type)
}

// assignable settles x (an abstract x takes type t) and checks that it is
// of type t.
func (c *checker) assignable(x *Expr, t *Type) {
	settle(x, t)
	if !x.Type.Eq(t) {
		failf(x.Pos, "%s where %s is needed", x.Type, t)
	}
}

func (c *checker) lookup(name string) *Decl {
	for i := len(c.scopes) - 1; i >= 0; i-- {
		if d := c.scopes[i][name]; d != nil {
			return d
		}
	}
	return c.globals[name]
}

func (c *checker) stmts(body []*Stmt) {
	c.scopes = append(c.scopes, map[string]*Decl{})
	for _, s := range body {
		c.stmt(s)
	}
	c.scopes = c.scopes[:len(c.scopes)-1]
}

func (c *checker) stmt(s *Stmt) {
	switch s.Kind {
	case StmtDecl:
		d := s.Decl
		if reservedNames[d.Name] {
			failf(s.Pos, "%s is a type name", d.Name)
		}
		if d.Init != nil {
			c.init(d)
		}
		switch {
		case d.Type == nil:
			failf(s.Pos, "var %s has neither type nor initializer", d.Name)
		case d.Type.Kind == Array && (d.Init != nil || d.Kind != DeclVar || d.Type.N == 0):
			failf(s.Pos, "%s: a local array must be a fixed-size var without initializer", d.Name)
		case d.Type.Kind == Matrix && !c.cur.Entry:
			failf(s.Pos, "%s: subgroup matrices live in the entry point only", d.Name)
		case c.scopes[len(c.scopes)-1][d.Name] != nil:
			failf(s.Pos, "%s is declared twice in one scope", d.Name)
		}
		d.declared = true
		c.scopes[len(c.scopes)-1][d.Name] = d
		c.locals = append(c.locals, d)
	case StmtAssign:
		lt := c.lvalue(s)
		if lt.Kind == Array {
			failf(s.Pos, "assignment of a whole array")
		}
		t := c.expr(s.X)
		if s.Op != "=" {
			binaryType(s.Pos, strings.TrimSuffix(s.Op, "="), lt, t)
		}
		c.assignable(s.X, lt)
	case StmtIncDec:
		if lt := c.lvalue(s); lt.Kind != I32 && lt.Kind != U32 {
			failf(s.Pos, "%s on %s", s.Op, lt)
		}
	case StmtCall:
		if _, ok := matrixOps[s.X.Text]; !ok || s.X.Tmpl != nil {
			failf(s.Pos, "a call as a statement: only subgroupMatrixStore is one")
		}
		c.matrixCall(s.X, true)
	case StmtBarrier:
		if !c.cur.Entry {
			failf(s.Pos, "workgroupBarrier outside the entry point")
		}
	case StmtIf:
		c.cond(s.X)
		c.stmts(s.Body)
		c.stmts(s.Else)
	case StmtFor:
		c.scopes = append(c.scopes, map[string]*Decl{})
		if s.Init != nil {
			c.stmt(s.Init)
		}
		if s.X != nil {
			c.cond(s.X)
		}
		if s.Post != nil {
			if s.Post.Kind == StmtDecl {
				failf(s.Post.Pos, "a declaration as a for loop's update")
			}
			c.stmt(s.Post)
		}
		c.stmts(s.Body)
		c.scopes = c.scopes[:len(c.scopes)-1]
	case StmtBlock:
		c.stmts(s.Body)
	case StmtReturn:
		switch ret := c.cur.Result; {
		case (s.X == nil) != (ret == nil):
			failf(s.Pos, "return does not match the function's result")
		case s.X != nil:
			c.expr(s.X)
			c.assignable(s.X, ret)
		}
	}
}

func (c *checker) cond(e *Expr) {
	if t := c.expr(e); t.Kind != Bool {
		failf(e.Pos, "condition is %s, not bool", t)
	}
}

// lvalue types the target of an assignment: a var, a workgroup array, a
// read_write buffer (in the entry point), or an element or component of
// one.
func (c *checker) lvalue(s *Stmt) *Type {
	e := s.LHS
	root := e
	for root.Kind == ExprIndex || root.Kind == ExprMember {
		root = root.Args[0]
	}
	if root.Kind != ExprIdent {
		failf(e.Pos, "cannot assign to %s", e)
	}
	t := c.anyExpr(e)
	d := root.Ref
	switch {
	case d.Kind != DeclVar && d.Kind != DeclWorkgroup && (d.Kind != DeclStorage || d.Access != "read_write"):
		failf(e.Pos, "%s cannot be assigned", d.Name)
	case d.Kind == DeclStorage && !c.cur.Entry:
		failf(e.Pos, "helper functions cannot write buffers (%s)", d.Name)
	}
	if root == e {
		d.reads-- // x = ... and x += ... do not read x, for Unused
		d.assigns = append(d.assigns, s)
	}
	return t
}

// expr types e and what it contains; e is a value (not an array).
func (c *checker) expr(e *Expr) *Type {
	if t := c.anyExpr(e); t.Kind == Array {
		failf(e.Pos, "%s is an array; only its elements are values", e)
	}
	return e.Type
}

// anyExpr is expr where e may be an array (the base of an index).
func (c *checker) anyExpr(e *Expr) *Type {
	e.Type = c.exprType(e)
	return e.Type
}

func (c *checker) exprType(e *Expr) *Type {
	switch e.Kind {
	case ExprLit:
		return c.litType(e)
	case ExprIdent:
		d := c.lookup(e.Text)
		switch {
		case d == nil || !d.declared:
			failf(e.Pos, "%s is not declared", e.Text)
		case d.Kind == DeclWorkgroup && c.cur != nil && !c.cur.Entry:
			failf(e.Pos, "helper functions cannot use workgroup memory (%s)", e.Text)
		}
		e.Ref = d
		d.reads++
		return d.Type
	case ExprParen:
		return c.expr(e.Args[0])
	case ExprUnary:
		if e.Text == "&" {
			failf(e.Pos, "& (an address) is only the first argument of subgroupMatrixLoad and subgroupMatrixStore")
		}
		t := c.expr(e.Args[0])
		if e.Text == "!" && t.Kind == Bool || e.Text == "-" && t.Value() && scalarOf(t).Kind != U32 && t.Kind != Bool {
			return t
		}
		failf(e.Pos, "%s on %s", e.Text, t)
	case ExprBinary:
		x, y := c.expr(e.Args[0]), c.expr(e.Args[1])
		if x.Kind == Matrix || y.Kind == Matrix {
			return matrixArith(e, x, y)
		}
		t := binaryType(e.Pos, e.Text, x, y)
		// Abstract operands take the other's type (the shift amount is
		// u32).
		switch {
		case e.Text == "<<" || e.Text == ">>":
			settle(e.Args[1], tU32)
		case x.Kind == AbstractInt && y.Kind != AbstractInt:
			settle(e.Args[0], scalarOf(y))
		case y.Kind == AbstractInt && x.Kind != AbstractInt:
			settle(e.Args[1], scalarOf(x))
		}
		if e.Text == "&&" || e.Text == "||" {
			if call := subgroupCall(e.Args[1]); call != nil {
				failf(call.Pos, "a subgroup operation on the right of %s", e.Text)
			}
		}
		if (e.Text == "==" || e.Text == "!=") && e.Args[0].String() == e.Args[1].String() {
			e.Same = true
			if !scalarOf(x).Float() {
				// A constant: the printers write it so, and x is not read
				// there.
				unread(e.Args[0])
				unread(e.Args[1])
			}
		}
		return t
	case ExprIndex:
		x, i := c.anyExpr(e.Args[0]), c.expr(e.Args[1])
		if !i.Integer() || x.Kind != Array && x.Kind != Vector {
			failf(e.Pos, "%s indexed by %s", x, i)
		}
		settle(e.Args[1], concrete(i))
		if v, ok := ConstValue(e.Args[1]); ok && (v < 0 || x.N > 0 && v >= int64(x.N)) {
			failf(e.Args[1].Pos, "index %d out of the bounds of %s", v, x)
		}
		return x.Elem
	case ExprMember:
		x := c.expr(e.Args[0])
		if x.Kind != Vector || len(e.Text) != 1 || !strings.Contains("xyzw"[:x.N], e.Text) {
			failf(e.Pos, ".%s of %s", e.Text, x)
		}
		return x.Elem
	case ExprCall:
		return c.call(e)
	}
	panic("unreachable")
}

// subgroupCall returns a call of a subgroup operation (subgroup matrix
// functions included) in e, or nil.
func subgroupCall(e *Expr) *Expr {
	if e.Kind == ExprCall && subgroupOps[e.Text]+matrixOps[e.Text] > 0 && e.Func == nil {
		return e
	}
	for _, a := range e.Args {
		if call := subgroupCall(a); call != nil {
			return call
		}
	}
	return nil
}

// litType is the type of a literal: i32, u32, f32 or f16 by its suffix,
// or abstract.
func (c *checker) litType(e *Expr) *Type {
	s := e.Text
	hex := strings.HasPrefix(s, "0x") || strings.HasPrefix(s, "0X")
	switch {
	case !hex && (strings.HasSuffix(s, "f") || strings.HasSuffix(s, "h")):
		body, half := s[:len(s)-1], s[len(s)-1] == 'h'
		if half && !c.m.F16 {
			failf(e.Pos, "f16 literal %s needs `enable f16;`", s)
		}
		v, err := strconv.ParseFloat(body, 32)
		switch {
		case !decimalFloat(body) || err != nil:
		case half && math.Abs(v) > 65504:
			failf(e.Pos, "%s is out of the range of f16", s)
		case half:
			return tF16
		default:
			return tF32
		}
	case !hex && strings.ContainsAny(s, ".eE"):
		failf(e.Pos, "float literal %s without suffix is outside the dialect", s)
	case strings.HasSuffix(s, "u"):
		if _, ok := intLit(s[:len(s)-1], 32, false); ok {
			return tU32
		}
	case strings.HasSuffix(s, "i"):
		if _, ok := intLit(s[:len(s)-1], 32, true); ok {
			return tI32
		}
	default:
		if _, ok := intLit(s, 64, true); ok {
			return tAbsInt
		}
	}
	failf(e.Pos, "bad literal %s", s)
	return nil
}

// decimalFloat reports whether s is a decimal float of WGSL without its
// suffix: digits with a point or an exponent, or a decimal integer.
func decimalFloat(s string) bool {
	mant, exp, hasExp := strings.Cut(strings.ToLower(s), "e")
	if hasExp {
		exp = strings.TrimLeft(exp, "+-")
		if exp == "" || strings.Trim(exp, "0123456789") != "" || len(exp) > 4 {
			return false
		}
	}
	whole, frac, point := strings.Cut(mant, ".")
	if whole+frac == "" || strings.Trim(whole+frac, "0123456789") != "" {
		return false
	}
	return point || hasExp || whole == "0" || whole[0] != '0'
}

// intLit parses an integer literal without suffix: decimal (no leading
// zero) or hexadecimal, within bits bits, signed or not.
func intLit(s string, bits int, signed bool) (int64, bool) {
	base, digits := 10, s
	if h, ok := strings.CutPrefix(strings.ToLower(s), "0x"); ok {
		base, digits = 16, h
	} else if len(s) > 1 && s[0] == '0' {
		return 0, false
	}
	if digits == "" || strings.ContainsRune(digits, '_') {
		return 0, false
	}
	if signed {
		v, err := strconv.ParseInt(digits, base, bits)
		return v, err == nil
	}
	v, err := strconv.ParseUint(digits, base, bits)
	return int64(v), err == nil
}

// binaryType is the type of x op y: the operands have one scalar type,
// once an abstract one takes the other's; float arithmetic may also
// combine a vector with its element type or a vector of the same type.
func binaryType(pos Pos, op string, x, y *Type) *Type {
	xs, ys := scalarOf(x), scalarOf(y)
	s := xs
	if xs.Kind == AbstractInt && ys.Kind != Bool {
		s = ys
	}
	vec := x.Kind == Vector || y.Kind == Vector
	ok := s.Eq(ys) || ys.Kind == AbstractInt && s.Kind != Bool
	switch op {
	case "&&", "||":
		ok = x.Kind == Bool && y.Kind == Bool
	case "<<", ">>":
		ok = x.Integer() && y.Integer() && y.Kind != I32
		s = x
	case "==", "!=", "<", ">", "<=", ">=":
		ok = ok && !vec && (s.Kind != Bool || op == "==" || op == "!=")
		s = tBool
	case "+", "-", "*", "/":
		ok = ok && s.Kind != Bool && (!vec || s.Float() && (x.Eq(y) || x.Scalar() || y.Scalar()))
	case "%", "&", "|", "^":
		ok = ok && s.Integer() && !vec
	default:
		ok = false
	}
	if !ok || !x.Value() || !y.Value() {
		failf(pos, "%s %s %s is outside the dialect", x, op, y)
	}
	switch {
	case x.Kind == Vector:
		return x
	case y.Kind == Vector:
		return y
	}
	return s
}

// builtins are the WGSL functions of the dialect and how many arguments
// they take; float ones take f32 or f16, or vectors of them. All return
// their arguments' type but dot (the element type).
var builtins = map[string]struct {
	args  int
	float bool
}{
	"abs": {1, false}, "max": {2, false}, "min": {2, false}, "clamp": {3, false}, "select": {3, false},
	"exp": {1, true}, "exp2": {1, true}, "log": {1, true}, "log2": {1, true}, "sqrt": {1, true},
	"inverseSqrt": {1, true}, "floor": {1, true}, "ceil": {1, true}, "trunc": {1, true}, "round": {1, true},
	"fract": {1, true}, "sign": {1, true}, "sin": {1, true}, "cos": {1, true}, "tanh": {1, true},
	"fma": {3, true}, "dot": {2, true},
}

// subgroupOps are the subgroup operations of the dialect and how many
// arguments they take: the value, then a lane, mask or delta (u32; a
// constant for subgroupBroadcast).
var subgroupOps = map[string]int{
	"subgroupAdd": 1, "subgroupMax": 1, "subgroupMin": 1, "subgroupBroadcastFirst": 1,
	"subgroupBroadcast": 2, "subgroupShuffle": 2, "subgroupShuffleXor": 2, "subgroupShuffleUp": 2, "subgroupShuffleDown": 2,
}

func (c *checker) call(e *Expr) *Type {
	if e.Text == "f16" && !c.m.F16 {
		failf(e.Pos, "f16 needs `enable f16;`")
	}
	if _, ctor := matrixTypes[e.Text]; ctor || matrixOps[e.Text] > 0 {
		return c.matrixCall(e, false)
	}
	args := make([]*Type, len(e.Args))
	for i, a := range e.Args {
		if args[i] = c.expr(a); !args[i].Value() {
			failf(a.Pos, "%s of %s is outside the dialect", e.Text, args[i])
		}
	}
	bad := func() { failf(e.Pos, "%s of %v is outside the dialect", e.Text, args) }
	// Conversions, constructors, bitcasts.
	if t := scalarTypes[e.Text]; t != nil || e.Tmpl != nil {
		if e.Tmpl != nil {
			t = e.Tmpl
		}
		switch {
		case len(args) == 0:
			bad()
		case e.Text == "bitcast":
			// u32 to f32 or i32, and f32 to u32 (a float's bits).
			settle(e.Args[0], tU32)
			a := e.Args[0].Type.Kind
			if len(args) != 1 || !(a == U32 && (t.Kind == F32 || t.Kind == I32) || a == F32 && t.Kind == U32) {
				bad()
			}
		case t.Scalar():
			if len(args) != 1 || !args[0].Scalar() {
				bad()
			}
			settle(e.Args[0], t) // a conversion of an abstract value is that value of t
		case t.Kind == Array && !c.tables:
			failf(e.Pos, "array constructors are only for var<private> tables")
		case t.Kind == Array && t.N == 0:
			bad()
		case len(args) != t.N && (t.Kind != Vector || len(args) != 1):
			failf(e.Pos, "%s from %d values", t, len(args))
		default:
			for _, a := range e.Args {
				c.assignable(a, t.Elem)
			}
		}
		return t
	}
	if f := c.fns[e.Text]; f != nil {
		if f.Entry || len(args) != len(f.Params) {
			failf(e.Pos, "call of %s: not a helper function with %d parameters", f.Name, len(args))
		}
		for i, p := range f.Params {
			c.assignable(e.Args[i], p.Type)
		}
		e.Func = f
		if c.cur != nil { // not a module-scope initializer (which must be constant)
			c.cur.calls = append(c.cur.calls, f)
		}
		return f.Result
	}
	if n, ok := subgroupOps[e.Text]; ok {
		switch {
		case !c.m.Subgroups:
			failf(e.Pos, "%s needs `enable subgroups;`", e.Text)
		case c.cur == nil || !c.cur.Entry:
			failf(e.Pos, "%s outside the entry point", e.Text)
		}
		if len(args) != n {
			bad()
		}
		t := concrete(args[0])
		c.assignable(e.Args[0], t)
		if s := scalarOf(t); s.Kind == Bool || t.Kind == Array {
			bad()
		}
		if n == 2 {
			c.assignable(e.Args[1], tU32)
			if _, ok := ConstValue(e.Args[1]); e.Text == "subgroupBroadcast" && !ok {
				failf(e.Args[1].Pos, "the lane of subgroupBroadcast must be a constant")
			}
		}
		return t
	}
	b, ok := builtins[e.Text]
	if !ok {
		failf(e.Pos, "function %s is outside the dialect", e.Text)
	}
	// The value arguments have one type (select's condition is apart).
	vals := e.Args
	if len(args) != b.args {
		bad()
	}
	if e.Text == "select" {
		if args[2].Kind != Bool {
			bad()
		}
		vals = e.Args[:2]
	}
	t := concrete(vals[0].Type)
	for _, v := range vals {
		if v.Type.Kind != AbstractInt {
			t = v.Type
		}
	}
	for _, v := range vals {
		c.assignable(v, t)
	}
	switch {
	case t.Kind == Bool && e.Text != "select", b.float && !scalarOf(t).Float():
		bad()
	case (e.Text == "max" || e.Text == "min") && t.Kind == Vector && t.Elem.Float():
		failf(e.Pos, "%s of float vectors is outside the dialect", e.Text)
	case e.Text == "dot":
		if t.Kind != Vector {
			bad()
		}
		return t.Elem
	}
	return t
}

// settle gives an abstract expression the concrete type its context
// decides (of t, or of t's elements), evaluating it: the printers write it
// as one literal (Expr.Const). Concrete expressions are left as they are.
func settle(e *Expr, t *Type) {
	if e.Type.Kind != AbstractInt {
		return
	}
	if t.Kind == Vector || t.Kind == Array {
		t = t.Elem
	}
	v, ok := ConstValue(e)
	switch {
	case !ok:
		failf(e.Pos, "cannot evaluate %s (is it out of range?)", e)
	case t.Kind == I32 && (v < math.MinInt32 || v > math.MaxInt32),
		t.Kind == U32 && (v < 0 || v > math.MaxUint32),
		t.Kind == F16 && (v < -65504 || v > 65504),
		t.Kind == Bool || t.Kind == AbstractInt:
		failf(e.Pos, "%s does not fit %s", e, t)
	}
	e.Type, e.Const = t, &v
}

// ConstValue evaluates an integer constant expression of literals,
// integer consts, parentheses, unary minus and + - * /. It reports false
// when e is not one, when a division is by zero, or when a step leaves the
// range of its type (int64 for abstract integers): a printer may then not
// rely on the value.
func ConstValue(e *Expr) (int64, bool) {
	if e.Const != nil {
		return *e.Const, true
	}
	var v int64
	switch e.Kind {
	case ExprLit:
		s := strings.TrimRight(e.Text, "iu")
		if s != e.Text && strings.HasSuffix(e.Text, "u") {
			u, ok := intLit(s, 32, false)
			return u, ok
		}
		i, ok := intLit(s, 64, true)
		if !ok {
			return 0, false
		}
		v = i
	case ExprParen:
		return ConstValue(e.Args[0])
	case ExprIdent:
		if e.Ref == nil || e.Ref.Kind != DeclConst || e.Ref.val == nil {
			return 0, false
		}
		v = *e.Ref.val
	case ExprUnary:
		x, ok := ConstValue(e.Args[0])
		if !ok || e.Text != "-" || x == math.MinInt64 {
			return 0, false
		}
		v = -x
	case ExprBinary:
		x, okx := ConstValue(e.Args[0])
		y, oky := ConstValue(e.Args[1])
		if !okx || !oky {
			return 0, false
		}
		var overflow bool
		switch e.Text {
		case "+":
			v = x + y
			overflow = (v > x) != (y > 0)
		case "-":
			v = x - y
			overflow = (v < x) != (y > 0)
		case "*":
			hi, lo := bits.Mul64(uint64(abs64(x)), uint64(abs64(y)))
			overflow = hi != 0 || lo > math.MaxInt64 || x == math.MinInt64 || y == math.MinInt64
			v = x * y
		case "/":
			if y == 0 || x == math.MinInt64 && y == -1 {
				return 0, false
			}
			v = x / y
		case "&":
			v = x & y
		case "|":
			v = x | y
		case "^":
			v = x ^ y
		default:
			return 0, false
		}
		if overflow {
			return 0, false
		}
	default:
		return 0, false
	}
	if t := e.Type; t != nil && (t.Kind == I32 && (v < math.MinInt32 || v > math.MaxInt32) || t.Kind == U32 && (v < 0 || v > math.MaxUint32)) {
		return 0, false
	}
	if t := e.Type; t != nil && t.Kind != I32 && t.Kind != U32 && t.Kind != AbstractInt {
		return 0, false
	}
	return v, true
}

func abs64(x int64) int64 {
	if x < 0 {
		return -x
	}
	return x
}

// markUnused marks the locals never read, the assignments to them, and
// the locals only those read, with a worklist (so it takes time linear in
// the function).
func markUnused(locals []*Decl) {
	var queue []*Decl
	for _, d := range locals {
		if d.reads <= 0 {
			queue = append(queue, d)
		}
	}
	drop := func(e *Expr) {
		unreadFunc(e, func(r *Decl) {
			if r.reads <= 0 && !r.Unused && (r.Kind == DeclLet || r.Kind == DeclVar) {
				queue = append(queue, r)
			}
		})
	}
	for len(queue) > 0 {
		d := queue[len(queue)-1]
		queue = queue[:len(queue)-1]
		if d.Unused {
			continue
		}
		d.Unused = true
		if d.Init != nil {
			drop(d.Init)
		}
		for _, s := range d.assigns {
			s.Unused = true
			if s.X != nil {
				drop(s.X)
			}
		}
	}
}

// unread takes back the reads of the names in e.
func unread(e *Expr) { unreadFunc(e, func(*Decl) {}) }

// unreadFunc takes back the reads of the names in e (not those of an
// integer comparison of an expression with itself, which were taken back
// when it was typed), calling f on each declaration.
func unreadFunc(e *Expr, f func(*Decl)) {
	if e.Same && !scalarOf(e.Args[0].Type).Float() {
		return
	}
	if e.Kind == ExprIdent {
		e.Ref.reads--
		f(e.Ref)
	}
	for _, a := range e.Args {
		unreadFunc(a, f)
	}
}
