package msl

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/tapml/tapml/codegen/wgslfront"
)

// This file prints a typed syntax tree of codegen/wgslfront as MSL.

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
	"max_f16": "static inline half max_f16(half a, half b) { return (isnan(a) || isnan(b)) ? a + b : (a > b ? a : (b > a ? b : (signbit(a) ? b : a))); }",
	"min_f16": "static inline half min_f16(half a, half b) { return (isnan(a) || isnan(b)) ? a + b : (a < b ? a : (b < a ? b : (signbit(a) ? a : b))); }",
}

// subgroupFuncs are Metal's SIMD-group functions for WGSL's subgroup
// operations.
var subgroupFuncs = map[string]string{
	"subgroupAdd": "simd_sum", "subgroupMax": "simd_max", "subgroupMin": "simd_min",
	"subgroupBroadcast": "simd_broadcast", "subgroupBroadcastFirst": "simd_broadcast_first",
	"subgroupShuffle": "simd_shuffle", "subgroupShuffleXor": "simd_shuffle_xor",
	"subgroupShuffleUp": "simd_shuffle_up", "subgroupShuffleDown": "simd_shuffle_down",
}

type emitter struct {
	helpers map[string]bool // mslHelpers used
	names   map[any]string  // the MSL names of declarations (*Decl) and functions (*Fn)
	calls   []*wgslfront.Fn // helper functions called by what was printed
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
		// A backslash could splice the next line into the comment.
		b.WriteString("// " + strings.ReplaceAll(strings.ReplaceAll(comment, `\`, "/"), "??", "? ?"))
	}
	b.WriteByte('\n')
}

// mslType is the MSL name of a scalar or vector type.
func mslType(t *wgslfront.Type) string {
	switch t.Kind {
	case wgslfront.Bool:
		return "bool"
	case wgslfront.I32, wgslfront.AbstractInt:
		return "int"
	case wgslfront.U32:
		return "uint"
	case wgslfront.F16:
		return "half"
	case wgslfront.Vector:
		return mslType(t.Elem) + strconv.Itoa(t.N)
	}
	return "float"
}

// declarator declares name of type t: `T name` or `T name[N]`.
func declarator(t *wgslfront.Type, name string) string {
	if t.Kind == wgslfront.Array {
		return fmt.Sprintf("%s %s[%d]", mslType(t.Elem), name, t.N)
	}
	return mslType(t) + " " + name
}

// zero is the zero value of a type, for a var without initializer.
func zero(t *wgslfront.Type) string {
	switch t.Kind {
	case wgslfront.Bool:
		return "false"
	case wgslfront.I32:
		return "0"
	case wgslfront.U32:
		return "0u"
	case wgslfront.F32:
		return "0.0f"
	case wgslfront.F16:
		return "0.0h"
	case wgslfront.Vector:
		return mslType(t) + "(" + zero(t.Elem) + ")"
	}
	return "{}"
}

func (w *emitter) stmts(b *strings.Builder, body []*wgslfront.Stmt) {
	for _, s := range body {
		w.stmt(b, s)
	}
}

func (w *emitter) block(b *strings.Builder, head string, body []*wgslfront.Stmt, comment string) {
	if head == "" {
		w.line(b, "{", comment)
	} else {
		w.line(b, head+" {", comment)
	}
	w.indent++
	w.stmts(b, body)
	w.indent--
}

func (w *emitter) stmt(b *strings.Builder, s *wgslfront.Stmt) {
	switch s.Kind {
	case wgslfront.StmtComment:
		w.line(b, "", s.Comment)
	case wgslfront.StmtIf:
		head := "if (" + w.cond(s.X) + ")"
		for {
			w.block(b, head, s.Body, s.Comment)
			if len(s.Else) == 1 && s.Else[0].Kind == wgslfront.StmtIf {
				s = s.Else[0]
				head = "} else if (" + w.cond(s.X) + ")"
				continue
			}
			if len(s.Else) > 0 {
				w.block(b, "} else", s.Else, "")
			}
			break
		}
		w.line(b, "}", "")
	case wgslfront.StmtFor:
		init, post, cond := "", "", ""
		if s.Init != nil {
			init = w.simple(s.Init)
		}
		if s.X != nil {
			cond = w.cond(s.X)
		}
		if s.Post != nil {
			post = w.simple(s.Post)
		}
		w.block(b, fmt.Sprintf("for (%s; %s; %s)", init, cond, post), s.Body, s.Comment)
		w.line(b, "}", "")
	case wgslfront.StmtBlock:
		w.block(b, "", s.Body, s.Comment)
		w.line(b, "}", "")
	case wgslfront.StmtReturn:
		if s.X == nil {
			w.line(b, "return;", s.Comment)
		} else {
			w.line(b, "return "+w.expr(s.X)+";", s.Comment)
		}
	case wgslfront.StmtBreak:
		w.line(b, "break;", s.Comment)
	case wgslfront.StmtContinue:
		w.line(b, "continue;", s.Comment)
	default:
		if code := w.simple(s); code != "" {
			w.line(b, code+";", s.Comment)
		}
	}
}

// simple prints a declaration, assignment, increment or barrier without its
// ';', or "" when it is left out.
func (w *emitter) simple(s *wgslfront.Stmt) string {
	if s.Unused || s.Kind == wgslfront.StmtDecl && s.Decl.Unused {
		return ""
	}
	switch s.Kind {
	case wgslfront.StmtDecl:
		d := s.Decl
		init := zero(d.Type)
		if d.Init != nil {
			init = w.expr(d.Init)
		}
		if d.Kind == wgslfront.DeclLet {
			return "const " + declarator(d.Type, w.names[d]) + " = " + init
		}
		return declarator(d.Type, w.names[d]) + " = " + init
	case wgslfront.StmtIncDec:
		if s.LHS.Type.Kind == wgslfront.I32 {
			x := w.expr(s.LHS)
			return fmt.Sprintf("%s = int(uint(%s) %s 1u)", x, x, s.Op[:1])
		}
		return w.expr(s.LHS) + s.Op
	case wgslfront.StmtAssign:
		if s.Op == "=" {
			return w.expr(s.LHS) + " = " + w.expr(s.X)
		}
		// x op= y is x = x op y where the operator needs more than C's.
		op := strings.TrimSuffix(s.Op, "=")
		y := s.X
		if y.Kind == wgslfront.ExprBinary {
			y = &wgslfront.Expr{Kind: wgslfront.ExprParen, Args: []*wgslfront.Expr{y}, Type: y.Type, Pos: y.Pos}
		}
		bin := &wgslfront.Expr{Kind: wgslfront.ExprBinary, Text: op, Args: []*wgslfront.Expr{s.LHS, y}, Type: s.LHS.Type, Pos: s.Pos}
		if full := w.expr(bin); full != w.expr(s.LHS)+" "+op+" "+w.expr(y) {
			return w.expr(s.LHS) + " = " + full
		}
		return w.expr(s.LHS) + " " + s.Op + " " + w.expr(s.X)
	case wgslfront.StmtBarrier:
		return "threadgroup_barrier(mem_flags::mem_threadgroup)"
	}
	panic(fmt.Sprintf("msl: statement kind %d", s.Kind))
}

// cond prints a condition without the parentheses WGSL wrote around it
// (clang warns about doubled ones).
func (w *emitter) cond(e *wgslfront.Expr) string {
	if e.Kind == wgslfront.ExprParen && e.Const == nil {
		e = e.Args[0]
	}
	return w.expr(e)
}

func (w *emitter) use(helper string) string {
	w.helpers[helper] = true
	return helper
}

func (w *emitter) expr(e *wgslfront.Expr) string {
	if e.Const != nil {
		return constLit(*e.Const, e.Type)
	}
	switch e.Kind {
	case wgslfront.ExprLit:
		return litText(e)
	case wgslfront.ExprIdent:
		return w.names[e.Ref]
	case wgslfront.ExprParen:
		return "(" + w.expr(e.Args[0]) + ")"
	case wgslfront.ExprUnary:
		x := e.Args[0]
		if e.Text == "-" && e.Type.Kind == wgslfront.I32 && !isLit(x) {
			return "int(0u - " + w.wrapping(x) + ")"
		}
		s := w.expr(x)
		if strings.HasPrefix(s, e.Text) {
			s = " " + s // not -- or !!
		}
		return e.Text + s
	case wgslfront.ExprBinary:
		return w.binary(e)
	case wgslfront.ExprIndex:
		return w.expr(e.Args[0]) + "[" + w.expr(e.Args[1]) + "]"
	case wgslfront.ExprMember:
		return w.expr(e.Args[0]) + "." + e.Text
	case wgslfront.ExprCall:
		return w.call(e)
	}
	panic(fmt.Sprintf("msl: expression kind %d", e.Kind))
}

func isLit(e *wgslfront.Expr) bool { return e.Kind == wgslfront.ExprLit || e.Const != nil }

// wrapping is an i32 expression of +, - and * computed in uint, so that it
// wraps around as WGSL's does: operands that are not such arithmetic are
// converted to uint (the caller converts the result back to int).
func (w *emitter) wrapping(e *wgslfront.Expr) string {
	if e.Const != nil {
		return fmt.Sprintf("%du", uint32(*e.Const))
	}
	wraps := func(e *wgslfront.Expr) bool {
		return e.Type.Kind == wgslfront.I32 && e.Const == nil &&
			(e.Kind == wgslfront.ExprBinary && (e.Text == "+" || e.Text == "-" || e.Text == "*") || e.Kind == wgslfront.ExprUnary && e.Text == "-")
	}
	switch {
	case wraps(e) && e.Kind == wgslfront.ExprBinary:
		return w.wrapping(e.Args[0]) + " " + e.Text + " " + w.wrapping(e.Args[1])
	case wraps(e):
		return "(0u - " + w.wrapping(e.Args[0]) + ")"
	case e.Kind == wgslfront.ExprParen && wraps(e.Args[0]):
		return "(" + w.wrapping(e.Args[0]) + ")"
	case e.Kind == wgslfront.ExprLit:
		v, _ := strconv.ParseInt(strings.TrimSuffix(e.Text, "i"), 0, 64)
		return fmt.Sprintf("%du", uint32(v))
	case e.Kind == wgslfront.ExprCall && e.Text == "i32" && e.Args[0].Type.Kind == wgslfront.U32:
		// uint(int(x)) is x.
		if x := e.Args[0]; x.Kind == wgslfront.ExprBinary || x.Kind == wgslfront.ExprUnary {
			return "(" + w.expr(x) + ")"
		}
		return w.expr(e.Args[0])
	}
	return "uint(" + w.expr(e) + ")"
}

// scalarOf is the scalar of a scalar or vector type.
func scalarOf(t *wgslfront.Type) *wgslfront.Type {
	if t.Kind == wgslfront.Vector {
		return t.Elem
	}
	return t
}

func (w *emitter) binary(e *wgslfront.Expr) string {
	x, y := e.Args[0], e.Args[1]
	s := scalarOf(x.Type)
	if y.Type.Kind == wgslfront.Vector {
		s = scalarOf(y.Type)
	}
	switch e.Text {
	case "+", "-", "*":
		if e.Type.Kind == wgslfront.I32 {
			return "int(" + w.wrapping(e) + ")"
		}
	case "/", "%":
		if s.Integer() {
			v, ok := wgslfront.ConstValue(y)
			if !ok || v == 0 || v == -1 && s.Kind == wgslfront.I32 {
				name := map[string]string{"/": "div_", "%": "rem_"}[e.Text] + s.String()
				return w.use(name) + "(" + w.expr(x) + ", " + w.expr(y) + ")"
			}
		}
	case "==", "!=":
		if e.Same {
			if s.Float() {
				if e.Text == "==" {
					return "!isnan(" + w.expr(x) + ")"
				}
				return "isnan(" + w.expr(x) + ")"
			}
			return strconv.FormatBool(e.Text == "==")
		}
	case "<<", ">>":
		amount := w.expr(y)
		if v, ok := wgslfront.ConstValue(y); !ok || v < 0 || v >= 32 {
			amount = "(" + amount + " & 31u)"
		}
		if e.Text == "<<" && s.Kind == wgslfront.I32 {
			return "int(uint(" + w.expr(x) + ") << " + amount + ")"
		}
		return w.expr(x) + " " + e.Text + " " + amount
	}
	return w.expr(x) + " " + e.Text + " " + w.expr(y)
}

func (w *emitter) call(e *wgslfront.Expr) string {
	args := make([]string, len(e.Args))
	for i, a := range e.Args {
		args[i] = w.expr(a)
	}
	list := strings.Join(args, ", ")
	t := e.Type
	switch {
	case e.Text == "bitcast":
		return "as_type<" + mslType(t) + ">(" + list + ")"
	case t.Kind == wgslfront.Array && e.Tmpl != nil:
		return "{" + list + "}"
	case t.Kind == wgslfront.Vector && e.Tmpl != nil:
		return mslType(t) + "(" + list + ")"
	case e.Conversion():
		if e.Args[0].Type.Eq(t) {
			return args[0]
		}
		return mslType(t) + "(" + list + ")"
	case e.Func != nil:
		w.calls = append(w.calls, e.Func)
		return w.names[e.Func] + "(" + list + ")"
	case subgroupFuncs[e.Text] != "":
		return subgroupFuncs[e.Text] + "(" + list + ")"
	}
	switch s := scalarOf(t); e.Text {
	case "select":
		return "(" + w.cond(e.Args[2]) + " ? " + args[1] + " : " + args[0] + ")"
	case "max", "min":
		if s.Float() {
			return w.use(e.Text+"_"+s.String()) + "(" + list + ")"
		}
	case "abs":
		switch s.Kind {
		case wgslfront.I32:
			return w.use("abs_i32") + "(" + list + ")"
		case wgslfront.U32:
			return args[0]
		}
	case "round":
		return "rint(" + list + ")"
	case "inverseSqrt":
		return "rsqrt(" + list + ")"
	}
	return e.Text + "(" + list + ")"
}

// litText is a concrete literal in MSL: i32's suffix dropped, and f32's
// and f16's digits given a point where they have none.
func litText(e *wgslfront.Expr) string {
	s := e.Text
	switch e.Type.Kind {
	case wgslfront.I32:
		return strings.TrimSuffix(s, "i")
	case wgslfront.F32, wgslfront.F16:
		body := s[:len(s)-1]
		if !strings.ContainsAny(body, ".eE") {
			body += ".0"
		}
		return body + s[len(s)-1:]
	}
	return s
}

// constLit is an evaluated constant of type t as an MSL literal.
func constLit(v int64, t *wgslfront.Type) string {
	switch t.Kind {
	case wgslfront.I32:
		switch {
		case v == math.MinInt32:
			return "(-2147483647 - 1)"
		case v < 0:
			return "(" + strconv.FormatInt(v, 10) + ")"
		}
		return strconv.FormatInt(v, 10)
	case wgslfront.U32:
		return strconv.FormatInt(v, 10) + "u"
	}
	suffix := "f"
	if t.Kind == wgslfront.F16 {
		suffix = "h"
	}
	s := strconv.FormatFloat(float64(float32(v)), 'g', -1, 32)
	if !strings.ContainsAny(s, ".e") {
		s += ".0"
	}
	if v < 0 {
		return "(" + s + suffix + ")"
	}
	return s + suffix
}
