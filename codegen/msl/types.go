package msl

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// This file types the syntax tree of parse.go: it resolves names, gives
// every expression its WGSL type (abstract integer literals take the type
// their context gives them and are evaluated), and finds the locals that
// are never read (emit.go leaves them out: -Wall rejects unused locals).

type typKind int

const (
	tyBool typKind = iota
	tyI32
	tyU32
	tyF32
	tyAbsInt // an integer literal without suffix, or a constant expression of them
	tyVec
	tyArray
)

// typ is a WGSL type of the subset.
type typ struct {
	kind typKind
	elem *typ // vec and array
	n    int  // vec width; array length (0: runtime-sized)
}

var (
	tBool   = &typ{kind: tyBool}
	tI32    = &typ{kind: tyI32}
	tU32    = &typ{kind: tyU32}
	tF32    = &typ{kind: tyF32}
	tAbsInt = &typ{kind: tyAbsInt}
)

var scalarTypes = map[string]*typ{"bool": tBool, "i32": tI32, "u32": tU32, "f32": tF32}

func vecOf(elem *typ, n int) *typ { return &typ{kind: tyVec, elem: elem, n: n} }

func (t *typ) scalar() bool  { return t.kind <= tyAbsInt }
func (t *typ) integer() bool { return t.kind == tyI32 || t.kind == tyU32 || t.kind == tyAbsInt }

// scalarOf is the scalar of a scalar or vector type.
func (t *typ) scalarOf() *typ {
	if t.kind == tyVec {
		return t.elem
	}
	return t
}

func (t *typ) eq(u *typ) bool {
	return t.kind == u.kind && t.n == u.n && (t.elem == nil || t.elem.eq(u.elem))
}

// size is the bytes of a value of the type.
func (t *typ) size() int {
	if t.kind == tyVec || t.kind == tyArray {
		return t.n * t.elem.size()
	}
	return 4
}

func (t *typ) String() string {
	switch t.kind {
	case tyVec:
		return fmt.Sprintf("vec%d<%s>", t.n, t.elem)
	case tyArray:
		if t.n == 0 {
			return fmt.Sprintf("array<%s>", t.elem)
		}
		return fmt.Sprintf("array<%s, %d>", t.elem, t.n)
	}
	return [...]string{"bool", "i32", "u32", "f32", "abstract-int"}[t.kind]
}

// concrete is the type an abstract type takes where nothing else decides.
func concrete(t *typ) *typ {
	if t.kind == tyAbsInt {
		return tI32
	}
	return t
}

// constVal is the value of an integer constant expression.
type constVal struct{ i int64 }

// checker types one module.
type checker struct {
	globals map[string]*decl
	fns     map[string]*fn
	scopes  []map[string]*decl
	cur     *fn
	tables  bool // typing a var<private> initializer: array constructors allowed
}

// check resolves and types m, and marks the locals never read.
func check(m *module) {
	c := &checker{globals: map[string]*decl{}, fns: map[string]*fn{}}
	for _, it := range m.items {
		switch {
		case it.decl != nil && c.globals[it.decl.name] == nil && c.fns[it.decl.name] == nil:
			c.globals[it.decl.name] = it.decl
		case it.fn != nil && c.globals[it.fn.name] == nil && c.fns[it.fn.name] == nil:
			c.fns[it.fn.name] = it.fn
		case it.decl != nil:
			failf(it.decl.line, "%s is declared twice", it.decl.name)
		case it.fn != nil:
			failf(it.fn.line, "%s is declared twice", it.fn.name)
		}
	}
	for _, it := range m.items {
		if it.decl != nil {
			c.global(it.decl)
		}
	}
	for _, it := range m.items {
		if f := it.fn; f != nil {
			c.cur = f
			c.scopes = []map[string]*decl{{}}
			for _, p := range f.params {
				if p.kind == declBuiltin != f.entry {
					failf(p.line, "parameter %s: the entry point takes @builtin parameters, and only those", p.name)
				}
				p.declared = true
				c.scopes[0][p.name] = p
			}
			c.stmts(f.body)
			markDead(f.body)
		}
	}
}

func (c *checker) global(d *decl) {
	switch d.kind {
	case declConst, declPrivate:
		if d.init == nil {
			failf(d.line, "%s: a module-scope const or var<private> needs an initializer", d.name)
		}
		c.tables = d.kind == declPrivate
		c.init(d)
		c.tables = false
		if d.kind == declConst {
			if !d.typ.scalar() {
				failf(d.line, "const %s is not a scalar", d.name)
			}
			d.val = constValue(d.init)
		}
	case declWorkgroup:
		if d.init != nil || d.typ == nil || d.typ.kind != tyArray || d.typ.n == 0 {
			failf(d.line, "var<workgroup> %s must be a fixed-size array without initializer", d.name)
		}
	case declStorage:
		if d.init != nil || d.typ == nil || d.typ.kind != tyArray || d.typ.n != 0 || d.access != "read" && d.access != "read_write" {
			failf(d.line, "storage buffer %s must be a runtime-sized array, read or read_write", d.name)
		}
	}
	d.declared = true
}

// init types a declaration's initializer, which gives the declaration its
// type when it has none.
func (c *checker) init(d *decl) {
	t := c.expr(d.init)
	if d.typ == nil {
		d.typ = concrete(t)
	}
	c.assignable(d.init, d.typ)
}

// assignable settles x (an abstract x takes type t) and checks that it is
// of type t.
func (c *checker) assignable(x *expr, t *typ) {
	settle(x, t)
	if !x.t.eq(t) {
		failf(x.line, "%s where %s is needed", x.t, t)
	}
}

func (c *checker) lookup(name string) *decl {
	for i := len(c.scopes) - 1; i >= 0; i-- {
		if d := c.scopes[i][name]; d != nil {
			return d
		}
	}
	return c.globals[name]
}

func (c *checker) stmts(body []*stmt) {
	c.scopes = append(c.scopes, map[string]*decl{})
	for _, s := range body {
		c.stmt(s)
	}
	c.scopes = c.scopes[:len(c.scopes)-1]
}

func (c *checker) stmt(s *stmt) {
	switch s.kind {
	case stmtDecl:
		d := s.decl
		if d.init != nil {
			c.init(d)
		}
		switch {
		case d.typ == nil:
			failf(s.line, "var %s has neither type nor initializer", d.name)
		case d.typ.kind == tyArray && (d.init != nil || d.kind != declVar):
			failf(s.line, "%s: a local array must be a var without initializer", d.name)
		case c.scopes[len(c.scopes)-1][d.name] != nil:
			failf(s.line, "%s is declared twice in one scope", d.name)
		}
		d.declared = true
		c.scopes[len(c.scopes)-1][d.name] = d
	case stmtAssign:
		lt := c.lvalue(s.lhs)
		t := c.expr(s.x)
		if s.op != "=" {
			binaryType(s.line, strings.TrimSuffix(s.op, "="), lt, t)
		}
		c.assignable(s.x, lt)
	case stmtIncDec:
		if lt := c.lvalue(s.lhs); lt.kind != tyI32 && lt.kind != tyU32 {
			failf(s.line, "%s on %s", s.op, lt)
		}
	case stmtBarrier:
		if !c.cur.entry {
			failf(s.line, "workgroupBarrier outside the entry point")
		}
	case stmtIf:
		c.cond(s.x)
		c.stmts(s.body)
		c.stmts(s.els)
	case stmtFor:
		c.scopes = append(c.scopes, map[string]*decl{})
		if s.init != nil {
			c.stmt(s.init)
		}
		if s.x != nil {
			c.cond(s.x)
		}
		if s.post != nil {
			c.stmt(s.post)
		}
		c.stmts(s.body)
		c.scopes = c.scopes[:len(c.scopes)-1]
	case stmtBlock:
		c.stmts(s.body)
	case stmtReturn:
		switch ret := c.cur.ret; {
		case (s.x == nil) != (ret == nil):
			failf(s.line, "return does not match the function's result")
		case s.x != nil:
			c.expr(s.x)
			c.assignable(s.x, ret)
		}
	}
}

func (c *checker) cond(e *expr) {
	if t := c.expr(e); t.kind != tyBool {
		failf(e.line, "condition is %s, not bool", t)
	}
}

// lvalue types the target of an assignment: a var, a workgroup array, a
// read_write buffer, or an element or component of one.
func (c *checker) lvalue(e *expr) *typ {
	root := e
	for root.kind == exprIndex || root.kind == exprMember {
		root = root.args[0]
	}
	if root.kind != exprIdent {
		failf(e.line, "cannot assign to %s", e)
	}
	t := c.expr(e)
	if d := root.ref; d.kind != declVar && d.kind != declWorkgroup && (d.kind != declStorage || d.access != "read_write") {
		failf(e.line, "%s cannot be assigned", d.name)
	}
	if root == e {
		root.ref.reads-- // x = ... and x += ... do not read x, for -Wall
	}
	return t
}

// expr types e and what it contains.
func (c *checker) expr(e *expr) *typ {
	e.t = c.exprType(e)
	return e.t
}

func (c *checker) exprType(e *expr) *typ {
	switch e.kind {
	case exprLit:
		return litType(e)
	case exprIdent:
		d := c.lookup(e.text)
		switch {
		case d == nil || !d.declared:
			failf(e.line, "%s is not declared", e.text)
		case d.kind == declWorkgroup && !c.cur.entry:
			failf(e.line, "helper functions cannot use workgroup memory (%s)", e.text)
		}
		e.ref = d
		d.reads++
		return d.typ
	case exprParen:
		return c.expr(e.args[0])
	case exprUnary:
		t := c.expr(e.args[0])
		if e.text == "!" && t.kind == tyBool || e.text == "-" && t.scalarOf().kind != tyU32 && t.kind != tyBool {
			return t
		}
		failf(e.line, "%s on %s", e.text, t)
	case exprBinary:
		x, y := c.expr(e.args[0]), c.expr(e.args[1])
		t := binaryType(e.line, e.text, x, y)
		// Abstract operands take the other's type (the shift amount is
		// u32).
		switch {
		case e.text == "<<" || e.text == ">>":
			settle(e.args[1], tU32)
		case x.kind == tyAbsInt:
			settle(e.args[0], concrete(y.scalarOf()))
		case y.kind == tyAbsInt:
			settle(e.args[1], x.scalarOf())
		}
		if (e.text == "==" || e.text == "!=") && x.scalarOf().kind != tyF32 && e.args[0].String() == e.args[1].String() {
			// Integer x == x is true: emit.go writes that, so x is not
			// read there.
			unread(e.args[0])
			unread(e.args[1])
		}
		return t
	case exprIndex:
		x, i := c.expr(e.args[0]), c.expr(e.args[1])
		if !i.integer() || x.kind != tyArray && x.kind != tyVec {
			failf(e.line, "%s indexed by %s", x, i)
		}
		settle(e.args[1], concrete(i))
		return x.elem
	case exprMember:
		x := c.expr(e.args[0])
		if x.kind != tyVec || len(e.text) != 1 || !strings.Contains("xyzw"[:x.n], e.text) {
			failf(e.line, ".%s of %s", e.text, x)
		}
		return x.elem
	case exprCall:
		return c.call(e)
	}
	panic("unreachable")
}

// litType is the type of a literal: i32, u32 or f32 by its suffix, or
// abstract.
func litType(e *expr) *typ {
	s := e.text
	hex := strings.HasPrefix(s, "0x")
	switch {
	case !hex && strings.HasSuffix(s, "f"):
		if _, err := strconv.ParseFloat(s[:len(s)-1], 32); err == nil {
			return tF32
		}
	case strings.ContainsAny(s, ".eE") && !hex:
		failf(e.line, "float literal %s without suffix is outside the subset", s)
	case strings.HasSuffix(s, "u"):
		if _, err := strconv.ParseUint(s[:len(s)-1], 0, 32); err == nil {
			return tU32
		}
	case strings.HasSuffix(s, "i"):
		if _, err := strconv.ParseInt(s[:len(s)-1], 0, 32); err == nil {
			return tI32
		}
	default:
		if _, err := strconv.ParseInt(s, 0, 64); err == nil {
			return tAbsInt
		}
	}
	failf(e.line, "bad literal %s", s)
	return nil
}

// binaryType is the type of x op y: the operands have one scalar type,
// once an abstract one takes the other's; arithmetic may also combine a
// vector with its element type or a vector of the same type.
func binaryType(line int, op string, x, y *typ) *typ {
	xs, ys := x.scalarOf(), y.scalarOf()
	s := xs
	if xs.kind == tyAbsInt && ys.kind != tyBool {
		s = ys
	}
	vec := x.kind == tyVec || y.kind == tyVec
	ok := s.eq(ys) || ys.kind == tyAbsInt && s.kind != tyBool
	switch op {
	case "&&", "||":
		ok = x.kind == tyBool && y.kind == tyBool
	case "<<", ">>":
		ok = x.integer() && y.integer() && y.kind != tyI32 && !vec
		s = x
	case "==", "!=", "<", ">", "<=", ">=":
		ok = ok && !vec && (s.kind != tyBool || op == "==" || op == "!=")
		s = tBool
	case "+", "-", "*", "/":
		ok = ok && s.kind != tyBool && (!vec || s.kind == tyF32 && (x.eq(y) || x.scalar() || y.scalar()))
	case "%":
		ok = ok && s.integer() && !vec
	default:
		ok = false
	}
	if !ok {
		failf(line, "%s %s %s is outside the subset", x, op, y)
	}
	switch {
	case x.kind == tyVec:
		return x
	case y.kind == tyVec:
		return y
	}
	return s
}

// builtins are the WGSL functions of the subset and how many arguments
// they take; float ones take f32 or vectors of it. All return their
// arguments' type but dot (the element type).
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

func (c *checker) call(e *expr) *typ {
	args := make([]*typ, len(e.args))
	for i, a := range e.args {
		args[i] = c.expr(a)
	}
	bad := func() { failf(e.line, "%s of %v is outside the subset", e.text, args) }
	// Conversions, constructors, bitcasts.
	if t := scalarTypes[e.text]; t != nil || e.tmpl != nil {
		if e.tmpl != nil {
			t = e.tmpl
		}
		switch {
		case len(args) == 0:
			bad()
		case e.text == "bitcast":
			// Only u32 to f32 or i32 is needed.
			settle(e.args[0], tU32)
			if len(args) != 1 || e.args[0].t.kind != tyU32 || t.kind != tyF32 && t.kind != tyI32 {
				bad()
			}
		case t.scalar():
			if len(args) != 1 || !args[0].scalar() {
				bad()
			}
			settle(e.args[0], t) // a conversion of an abstract value is that value of t
		case t.kind == tyArray && !c.tables:
			failf(e.line, "array constructors are only for var<private> tables")
		case len(args) != t.n && (t.kind != tyVec || len(args) != 1):
			failf(e.line, "%s from %d values", t, len(args))
		default:
			for _, a := range e.args {
				c.assignable(a, t.elem)
			}
		}
		return t
	}
	if f := c.fns[e.text]; f != nil {
		if f.entry || f.ret == nil || len(args) != len(f.params) {
			failf(e.line, "call of %s: not a helper function with a result and %d parameters", f.name, len(args))
		}
		for i, p := range f.params {
			c.assignable(e.args[i], p.typ)
		}
		e.call = f
		return f.ret
	}
	b, ok := builtins[e.text]
	if !ok {
		failf(e.line, "function %s is outside the subset", e.text)
	}
	// The value arguments have one type (select's condition is apart).
	vals := e.args
	if len(args) != b.args {
		bad()
	}
	if e.text == "select" {
		if args[2].kind != tyBool {
			bad()
		}
		vals = e.args[:2]
	}
	t := concrete(vals[0].t)
	for _, v := range vals {
		if v.t.kind != tyAbsInt {
			t = v.t
		}
	}
	for _, v := range vals {
		c.assignable(v, t)
	}
	switch {
	case t.kind == tyArray, t.kind == tyBool && e.text != "select", b.float && t.scalarOf().kind != tyF32:
		bad()
	case (e.text == "max" || e.text == "min") && t.kind == tyVec && t.elem.kind == tyF32:
		failf(e.line, "%s of float vectors is outside the subset", e.text)
	case e.text == "dot":
		if t.kind != tyVec {
			bad()
		}
		return t.elem
	}
	return t
}

// settle gives an abstract expression the concrete type its context
// decides (of t, or of t's elements), evaluating it: the printer writes
// it as one literal. Concrete expressions are left as they are.
func settle(e *expr, t *typ) {
	if e.t.kind != tyAbsInt {
		return
	}
	if t.kind == tyVec || t.kind == tyArray {
		t = t.elem
	}
	v := constValue(e)
	switch {
	case v == nil:
		failf(e.line, "cannot evaluate %s", e)
	case t.kind == tyI32 && (v.i < math.MinInt32 || v.i > math.MaxInt32),
		t.kind == tyU32 && (v.i < 0 || v.i > math.MaxUint32),
		t.kind == tyBool || t.kind == tyAbsInt:
		failf(e.line, "%s does not fit %s", e, t)
	}
	e.t, e.val = t, v
}

// constValue evaluates an integer expression of literals, module-scope
// consts, parentheses and + - * /, or returns nil.
func constValue(e *expr) *constVal {
	switch e.kind {
	case exprLit:
		if i, err := strconv.ParseInt(strings.TrimRight(e.text, "iu"), 0, 64); err == nil {
			return &constVal{i}
		}
	case exprParen:
		return constValue(e.args[0])
	case exprIdent:
		if e.ref != nil && e.ref.kind == declConst {
			return e.ref.val
		}
	case exprUnary:
		if x := constValue(e.args[0]); x != nil && e.text == "-" {
			return &constVal{-x.i}
		}
	case exprBinary:
		x, y := constValue(e.args[0]), constValue(e.args[1])
		switch {
		case x == nil || y == nil:
		case e.text == "+":
			return &constVal{x.i + y.i}
		case e.text == "-":
			return &constVal{x.i - y.i}
		case e.text == "*":
			return &constVal{x.i * y.i}
		case e.text == "/" && y.i != 0:
			return &constVal{x.i / y.i}
		}
	}
	return nil
}

// markDead marks the locals never read, the assignments to them, and the
// lets only those read, until none is left: emit.go leaves them out.
func markDead(body []*stmt) {
	for changed := true; changed; {
		changed = false
		walkStmts(body, func(s *stmt) {
			switch {
			case s.kind == stmtDecl && !s.decl.dead && s.decl.reads <= 0:
				s.decl.dead = true
				if s.decl.init != nil {
					unread(s.decl.init)
				}
				changed = true
			case (s.kind == stmtAssign || s.kind == stmtIncDec) && !s.dead && s.lhs.kind == exprIdent && s.lhs.ref.dead:
				s.dead = true
				if s.x != nil {
					unread(s.x)
				}
				changed = true
			}
		})
	}
}

// unread takes back the reads of the names in e.
func unread(e *expr) {
	if e.kind == exprIdent {
		e.ref.reads--
	}
	for _, a := range e.args {
		unread(a)
	}
}

// walkStmts calls f on every statement of body, nested ones included.
func walkStmts(body []*stmt, f func(*stmt)) {
	for _, s := range body {
		f(s)
		for _, t := range []*stmt{s.init, s.post} {
			if t != nil {
				walkStmts([]*stmt{t}, f)
			}
		}
		walkStmts(s.body, f)
		walkStmts(s.els, f)
	}
}
