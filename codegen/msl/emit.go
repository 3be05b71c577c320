package msl

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// This file prints a typed syntax tree (types.go) as MSL.

// mslHelpers are the functions emitted code may call for WGSL's (or the
// CPU reference's) semantics where MSL's operators and functions differ;
// a kernel declares the ones it uses.
var mslHelpers = map[string]string{
	"div_i32": "static inline int div_i32(int a, int b) { return b == 0 ? a : (b == -1 ? int(0u - uint(a)) : a / b); }",
	"rem_i32": "static inline int rem_i32(int a, int b) { return (b == 0 || b == -1) ? 0 : a % b; }",
	"div_u32": "static inline uint div_u32(uint a, uint b) { return b == 0u ? a : a / b; }",
	"rem_u32": "static inline uint rem_u32(uint a, uint b) { return b == 0u ? 0u : a % b; }",
	"abs_i32": "static inline int abs_i32(int a) { return a < 0 ? int(0u - uint(a)) : a; }",
	"max_f32": "static inline float max_f32(float a, float b) { return (isnan(a) || isnan(b)) ? a + b : (a > b ? a : (b > a ? b : (signbit(a) ? b : a))); }",
	"min_f32": "static inline float min_f32(float a, float b) { return (isnan(a) || isnan(b)) ? a + b : (a < b ? a : (b < a ? b : (signbit(a) ? a : b))); }",
}

type emitter struct {
	helpers map[string]bool // mslHelpers used
	calls   []*fn           // helper functions called by what was printed
	indent  int
}

// line writes one line at the current indentation, with its trailing
// comment (code may be empty: a comment line).
func (w *emitter) line(b *strings.Builder, code, comment string) {
	b.WriteString(strings.Repeat("  ", w.indent))
	b.WriteString(code)
	if comment != "" {
		if code != "" {
			b.WriteString(" ")
		}
		b.WriteString("// " + comment)
	}
	b.WriteByte('\n')
}

// mslType is the MSL name of a scalar or vector type.
func mslType(t *typ) string {
	switch t.kind {
	case tyBool:
		return "bool"
	case tyI32, tyAbsInt:
		return "int"
	case tyU32:
		return "uint"
	case tyVec:
		return mslType(t.elem) + strconv.Itoa(t.n)
	}
	return "float"
}

// declarator declares name of type t: `T name` or `T name[N]`.
func declarator(t *typ, name string) string {
	if t.kind == tyArray {
		return fmt.Sprintf("%s %s[%d]", mslType(t.elem), name, t.n)
	}
	return mslType(t) + " " + name
}

// zero is the zero value of a type, for a var without initializer.
func zero(t *typ) string {
	switch t.kind {
	case tyBool:
		return "false"
	case tyI32:
		return "0"
	case tyU32:
		return "0u"
	case tyF32:
		return "0.0f"
	case tyVec:
		return mslType(t) + "(" + zero(t.elem) + ")"
	}
	return "{}"
}

func (w *emitter) stmts(b *strings.Builder, body []*stmt) {
	for _, s := range body {
		w.stmt(b, s)
	}
}

func (w *emitter) block(b *strings.Builder, head string, body []*stmt, comment string) {
	if head == "" {
		w.line(b, "{", comment)
	} else {
		w.line(b, head+" {", comment)
	}
	w.indent++
	w.stmts(b, body)
	w.indent--
}

func (w *emitter) stmt(b *strings.Builder, s *stmt) {
	switch s.kind {
	case stmtComment:
		w.line(b, "", s.comment)
	case stmtIf:
		head := "if (" + w.cond(s.x) + ")"
		for {
			w.block(b, head, s.body, s.comment)
			if len(s.els) == 1 && s.els[0].kind == stmtIf {
				s = s.els[0]
				head = "} else if (" + w.cond(s.x) + ")"
				continue
			}
			if len(s.els) > 0 {
				w.block(b, "} else", s.els, "")
			}
			break
		}
		w.line(b, "}", "")
	case stmtFor:
		init, post, cond := "", "", ""
		if s.init != nil {
			init = w.simple(s.init)
		}
		if s.x != nil {
			cond = w.cond(s.x)
		}
		if s.post != nil {
			post = w.simple(s.post)
		}
		w.block(b, fmt.Sprintf("for (%s; %s; %s)", init, cond, post), s.body, s.comment)
		w.line(b, "}", "")
	case stmtBlock:
		w.block(b, "", s.body, s.comment)
		w.line(b, "}", "")
	case stmtReturn:
		if s.x == nil {
			w.line(b, "return;", s.comment)
		} else {
			w.line(b, "return "+w.expr(s.x)+";", s.comment)
		}
	case stmtBreak:
		w.line(b, "break;", s.comment)
	case stmtContinue:
		w.line(b, "continue;", s.comment)
	default:
		if code := w.simple(s); code != "" {
			w.line(b, code+";", s.comment)
		}
	}
}

// simple prints a declaration, assignment, increment or barrier without its
// ';', or "" when it is left out.
func (w *emitter) simple(s *stmt) string {
	if s.dead || s.kind == stmtDecl && s.decl.dead {
		return ""
	}
	switch s.kind {
	case stmtDecl:
		d := s.decl
		init := zero(d.typ)
		if d.init != nil {
			init = w.expr(d.init)
		}
		if d.kind == declLet {
			return "const " + declarator(d.typ, d.out) + " = " + init
		}
		return declarator(d.typ, d.out) + " = " + init
	case stmtIncDec:
		if s.lhs.t.kind == tyI32 {
			x := w.expr(s.lhs)
			return fmt.Sprintf("%s = int(uint(%s) %s 1u)", x, x, s.op[:1])
		}
		return w.expr(s.lhs) + s.op
	case stmtAssign:
		if s.op == "=" {
			return w.expr(s.lhs) + " = " + w.expr(s.x)
		}
		// x op= y is x = x op y where the operator needs more than C's.
		op := strings.TrimSuffix(s.op, "=")
		y := s.x
		if y.kind == exprBinary {
			y = &expr{kind: exprParen, args: []*expr{y}, t: y.t, line: y.line}
		}
		bin := &expr{kind: exprBinary, text: op, args: []*expr{s.lhs, y}, t: s.lhs.t, line: s.line}
		if full := w.expr(bin); full != w.expr(s.lhs)+" "+op+" "+w.expr(y) {
			return w.expr(s.lhs) + " = " + full
		}
		return w.expr(s.lhs) + " " + s.op + " " + w.expr(s.x)
	case stmtBarrier:
		return "threadgroup_barrier(mem_flags::mem_threadgroup)"
	}
	panic(fmt.Sprintf("msl: statement kind %d", s.kind))
}

// cond prints a condition without the parentheses WGSL wrote around it
// (clang warns about doubled ones).
func (w *emitter) cond(e *expr) string {
	if e.kind == exprParen && e.val == nil {
		e = e.args[0]
	}
	return w.expr(e)
}

func (w *emitter) use(helper string) string {
	w.helpers[helper] = true
	return helper
}

func (w *emitter) expr(e *expr) string {
	if e.val != nil {
		return constLit(e.val, e.t)
	}
	switch e.kind {
	case exprLit:
		return litText(e)
	case exprIdent:
		return e.ref.out
	case exprParen:
		return "(" + w.expr(e.args[0]) + ")"
	case exprUnary:
		x := e.args[0]
		if e.text == "-" && e.t.kind == tyI32 && !isLit(x) {
			return "int(0u - " + w.wrapping(x) + ")"
		}
		s := w.expr(x)
		if strings.HasPrefix(s, e.text) {
			s = " " + s // not -- or !!
		}
		return e.text + s
	case exprBinary:
		return w.binary(e)
	case exprIndex:
		return w.expr(e.args[0]) + "[" + w.expr(e.args[1]) + "]"
	case exprMember:
		return w.expr(e.args[0]) + "." + e.text
	case exprCall:
		return w.call(e)
	}
	panic(fmt.Sprintf("msl: expression kind %d", e.kind))
}

func isLit(e *expr) bool { return e.kind == exprLit || e.val != nil }

// wrapping is an i32 expression of +, - and * computed in uint, so that it
// wraps around as WGSL's does: operands that are not such arithmetic are
// converted to uint (the caller converts the result back to int).
func (w *emitter) wrapping(e *expr) string {
	if e.val != nil {
		return fmt.Sprintf("%du", uint32(e.val.i))
	}
	wraps := func(e *expr) bool {
		return e.t.kind == tyI32 && e.val == nil &&
			(e.kind == exprBinary && (e.text == "+" || e.text == "-" || e.text == "*") || e.kind == exprUnary && e.text == "-")
	}
	switch {
	case wraps(e) && e.kind == exprBinary:
		return w.wrapping(e.args[0]) + " " + e.text + " " + w.wrapping(e.args[1])
	case wraps(e):
		return "(0u - " + w.wrapping(e.args[0]) + ")"
	case e.kind == exprParen && wraps(e.args[0]):
		return "(" + w.wrapping(e.args[0]) + ")"
	case e.kind == exprLit:
		v, _ := strconv.ParseInt(strings.TrimSuffix(e.text, "i"), 0, 64)
		return fmt.Sprintf("%du", uint32(v))
	case e.kind == exprCall && e.text == "i32" && e.args[0].t.kind == tyU32:
		// uint(int(x)) is x.
		if x := e.args[0]; x.kind == exprBinary || x.kind == exprUnary {
			return "(" + w.expr(x) + ")"
		}
		return w.expr(e.args[0])
	}
	return "uint(" + w.expr(e) + ")"
}

func (w *emitter) binary(e *expr) string {
	x, y := e.args[0], e.args[1]
	s := x.t.scalarOf()
	if y.t.kind == tyVec {
		s = y.t.scalarOf()
	}
	switch e.text {
	case "+", "-", "*":
		if e.t.kind == tyI32 {
			return "int(" + w.wrapping(e) + ")"
		}
	case "/", "%":
		if s.kind == tyI32 || s.kind == tyU32 {
			v := constValue(y)
			if v == nil || v.i == 0 || v.i == -1 && s.kind == tyI32 {
				name := map[string]string{"/": "div_", "%": "rem_"}[e.text] + s.String()
				return w.use(name) + "(" + w.expr(x) + ", " + w.expr(y) + ")"
			}
		}
	case "==", "!=":
		if x.String() == y.String() {
			if s.kind == tyF32 {
				if e.text == "==" {
					return "!isnan(" + w.expr(x) + ")"
				}
				return "isnan(" + w.expr(x) + ")"
			}
			return strconv.FormatBool(e.text == "==")
		}
	case "<<", ">>":
		amount := w.expr(y)
		if v := constValue(y); v == nil || v.i < 0 || v.i >= 32 {
			amount = "(" + amount + " & 31u)"
		}
		if e.text == "<<" && s.kind == tyI32 {
			return "int(uint(" + w.expr(x) + ") << " + amount + ")"
		}
		return w.expr(x) + " " + e.text + " " + amount
	}
	return w.expr(x) + " " + e.text + " " + w.expr(y)
}

func (w *emitter) call(e *expr) string {
	args := make([]string, len(e.args))
	for i, a := range e.args {
		args[i] = w.expr(a)
	}
	list := strings.Join(args, ", ")
	t := e.t
	switch {
	case e.text == "bitcast":
		return "as_type<" + mslType(t) + ">(" + list + ")"
	case t.kind == tyArray && e.tmpl != nil:
		return "{" + list + "}"
	case t.kind == tyVec && e.tmpl != nil:
		return mslType(t) + "(" + list + ")"
	case scalarTypes[e.text] != nil:
		if e.args[0].t.eq(t) {
			return args[0]
		}
		return mslType(t) + "(" + list + ")"
	case e.call != nil:
		w.calls = append(w.calls, e.call)
		return e.call.out + "(" + list + ")"
	}
	switch s := t.scalarOf(); e.text {
	case "select":
		return "(" + w.cond(e.args[2]) + " ? " + args[1] + " : " + args[0] + ")"
	case "max", "min":
		if s.kind == tyF32 {
			return w.use(e.text+"_f32") + "(" + list + ")"
		}
	case "abs":
		switch s.kind {
		case tyI32:
			return w.use("abs_i32") + "(" + list + ")"
		case tyU32:
			return args[0]
		}
	case "round":
		return "rint(" + list + ")"
	case "inverseSqrt":
		return "rsqrt(" + list + ")"
	}
	return e.text + "(" + list + ")"
}

// litText is a concrete literal in MSL: i32's suffix dropped, and f32's
// digits given a point where they have none.
func litText(e *expr) string {
	s := e.text
	switch e.t.kind {
	case tyI32:
		return strings.TrimSuffix(s, "i")
	case tyF32:
		body := strings.TrimSuffix(s, "f")
		if !strings.ContainsAny(body, ".eE") {
			body += ".0"
		}
		return body + "f"
	}
	return s
}

// constLit is an evaluated constant of type t as an MSL literal.
func constLit(v *constVal, t *typ) string {
	switch t.kind {
	case tyI32:
		switch {
		case v.i == math.MinInt32:
			return "(-2147483647 - 1)"
		case v.i < 0:
			return "(" + strconv.FormatInt(v.i, 10) + ")"
		}
		return strconv.FormatInt(v.i, 10)
	case tyU32:
		return strconv.FormatInt(v.i, 10) + "u"
	}
	s := strconv.FormatFloat(float64(float32(v.i)), 'g', -1, 32)
	if !strings.ContainsAny(s, ".e") {
		s += ".0"
	}
	if v.i < 0 {
		return "(" + s + "f)"
	}
	return s + "f"
}

// String prints an expression as WGSL (for comparisons and messages).
func (e *expr) String() string {
	switch e.kind {
	case exprLit, exprIdent:
		return e.text
	case exprParen:
		return "(" + e.args[0].String() + ")"
	case exprUnary:
		return e.text + e.args[0].String()
	case exprBinary:
		return e.args[0].String() + " " + e.text + " " + e.args[1].String()
	case exprIndex:
		return e.args[0].String() + "[" + e.args[1].String() + "]"
	case exprMember:
		return e.args[0].String() + "." + e.text
	}
	var args []string
	for _, a := range e.args {
		args = append(args, a.String())
	}
	name := e.text
	if e.tmpl != nil {
		name = e.tmpl.String()
		if e.text == "bitcast" {
			name = "bitcast<" + name + ">"
		}
	}
	return name + "(" + strings.Join(args, ", ") + ")"
}
