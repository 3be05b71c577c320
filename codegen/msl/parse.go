package msl

import (
	"fmt"
	"strconv"
	"strings"
)

// This file parses the WGSL subset that codegen/wgsl writes (translate.go
// says what it is) into a syntax tree. types.go types the tree and emit.go
// prints it as MSL.

// failure is how parse, check and emit give up: failf panics with one and
// translate recovers it as its error.
type failure struct{ err error }

func failf(line int, format string, args ...any) {
	panic(failure{fmt.Errorf("line %d: %s", line, fmt.Sprintf(format, args...))})
}

// A token of WGSL source.
type token struct {
	kind     tokKind
	text     string
	line     int
	trailing bool // a comment that follows code on its line
}

type tokKind int

const (
	tokEOF tokKind = iota
	tokIdent
	tokNum
	tokPunct
	tokComment
)

// puncts are the operators and punctuation of the subset, longest first.
var puncts = strings.Fields(`-> && || == != <= >= << >> += -= *= /= %= ++ --
	+ - * / % < > = ! ( ) [ ] { } , ; : . @`)

// lex splits src into tokens. Line comments are tokens (the printer keeps
// them); block comments are not part of the subset.
func lex(src string) []token {
	var toks []token
	line, code := 1, false // code: the line has a token before the next comment
	for i := 0; i < len(src); {
		c, rest := src[i], src[i:]
		start := i
		switch {
		case c == '\n':
			line, code = line+1, false
			i++
			continue
		case c == ' ' || c == '\t' || c == '\r':
			i++
			continue
		case strings.HasPrefix(rest, "//"):
			end := strings.IndexByte(rest, '\n')
			if end < 0 {
				end = len(rest)
			}
			toks = append(toks, token{tokComment, strings.TrimSpace(rest[2:end]), line, code})
			i += end
			continue
		case strings.HasPrefix(rest, "/*"):
			failf(line, "block comments are outside the subset")
		case isLetter(c):
			for i++; i < len(src) && (isLetter(src[i]) || isDigit(src[i])); i++ {
			}
			toks = append(toks, token{kind: tokIdent, text: src[start:i], line: line})
		case isDigit(c):
			// Digits, a point, an exponent, hex digits and a suffix.
			for i++; i < len(src) && (isLetter(src[i]) || isDigit(src[i]) || src[i] == '.' ||
				(src[i] == '+' || src[i] == '-') && (src[i-1] == 'e' || src[i-1] == 'E') && !strings.HasPrefix(src[start:], "0x")); i++ {
			}
			toks = append(toks, token{kind: tokNum, text: src[start:i], line: line})
		default:
			for _, p := range puncts {
				if strings.HasPrefix(rest, p) {
					toks = append(toks, token{kind: tokPunct, text: p, line: line})
					i += len(p)
					break
				}
			}
			if i == start {
				failf(line, "unexpected character %q", c)
			}
		}
		code = true
	}
	return append(toks, token{kind: tokEOF, line: line})
}

func isLetter(c byte) bool { return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }
func isDigit(c byte) bool  { return c >= '0' && c <= '9' }

// The syntax tree.

// module is a parsed WGSL module: its declarations in source order.
type module struct{ items []*item }

// item is one module-scope declaration, or a comment between them.
type item struct {
	comment string
	decl    *decl // const, var<private>, var<workgroup>, var<storage>
	fn      *fn
}

// declKind says what a name stands for.
type declKind int

const (
	declLet declKind = iota
	declVar
	declConst     // module-scope const
	declPrivate   // var<private> with an initializer: a constant table
	declWorkgroup // var<workgroup>
	declStorage   // @group(0) @binding(i) var<storage, ...>
	declParam     // a helper function's parameter
	declBuiltin   // an entry point parameter with @builtin(...)
)

// decl is a declared name.
type decl struct {
	kind    declKind
	name    string // in WGSL
	out     string // in MSL (renamed where MSL reserves the name)
	typ     *typ   // declared, or the initializer's (set by the checker)
	init    *expr
	line    int
	comment string // trailing comment

	binding  int    // storage
	access   string // storage: "read" or "read_write"
	builtin  string
	val      *constVal // a module-scope const's value (set by the checker)
	reads    int       // uses, other than as the target of an assignment
	dead     bool      // a local never read: not printed
	declared bool      // in scope yet (the checker's)
}

// fn is a function: a helper, or the entry point.
type fn struct {
	name, out string
	params    []*decl
	ret       *typ // nil: none
	body      []*stmt
	entry     bool
	wgSize    []int // the entry point's @workgroup_size
	line      int
}

type stmtKind int

const (
	stmtComment stmtKind = iota
	stmtDecl             // let or var
	stmtAssign           // lhs op x, op one of = += -= ...
	stmtIncDec           // lhs++ or lhs--
	stmtBarrier          // workgroupBarrier()
	stmtIf               // if x body else els (an else if is one if in els)
	stmtFor              // for (init; x; post) body
	stmtBlock            // { body }
	stmtReturn           // return x (x may be nil)
	stmtBreak
	stmtContinue
)

type stmt struct {
	kind       stmtKind
	line       int
	comment    string // a comment statement's text, or a trailing comment
	decl       *decl
	op         string
	lhs, x     *expr
	init, post *stmt
	body, els  []*stmt
	dead       bool // an assignment to a local never read
}

type exprKind int

const (
	exprLit    exprKind = iota // text: the literal as written
	exprIdent                  // text: the name
	exprUnary                  // text: the operator; args[0]
	exprBinary                 // text: the operator; args[0], args[1]
	exprCall                   // text: the function or type; tmpl: the type of vecN<T>(...), array<T, N>(...), bitcast<T>(...)
	exprIndex                  // args[0][args[1]]
	exprMember                 // args[0].text
	exprParen                  // (args[0])
)

type expr struct {
	kind exprKind
	text string
	tmpl *typ
	args []*expr
	line int

	// set by the checker
	t    *typ
	ref  *decl     // an identifier's declaration
	call *fn       // the helper function called
	val  *constVal // an abstract expression, evaluated
}

// The parser: recursive descent; it fails (failf) at the first error.
type parser struct {
	toks []token
	pos  int
}

// parse parses WGSL source of the subset.
func parse(src string) *module {
	p := &parser{toks: lex(src)}
	m := &module{}
	for {
		if c, ok := p.comment(); ok {
			m.items = append(m.items, &item{comment: c})
		} else if p.peek().kind == tokEOF {
			return m
		} else {
			m.items = append(m.items, p.item())
		}
	}
}

// peek returns the next token that is not a comment (comments inside
// statements and expressions are dropped).
func (p *parser) peek() token {
	for p.toks[p.pos].kind == tokComment {
		p.pos++
	}
	return p.toks[p.pos]
}

func (p *parser) next() token {
	t := p.peek()
	if t.kind != tokEOF {
		p.pos++
	}
	return t
}

func (p *parser) failf(format string, args ...any) { failf(p.peek().line, format, args...) }

// comment takes a comment that stands on its own line.
func (p *parser) comment() (string, bool) {
	if t := p.toks[p.pos]; t.kind == tokComment && !t.trailing {
		p.pos++
		return t.text, true
	}
	return "", false
}

// trailing takes a comment that ends the line of the last token.
func (p *parser) trailing() string {
	if t := p.toks[p.pos]; t.kind == tokComment && t.trailing {
		p.pos++
		return t.text
	}
	return ""
}

func (p *parser) is(text string) bool {
	t := p.peek()
	return t.kind != tokNum && t.kind != tokEOF && t.text == text
}

func (p *parser) accept(text string) bool {
	if p.is(text) {
		p.pos++
		return true
	}
	return false
}

func (p *parser) expect(text string) {
	if !p.accept(text) {
		p.failf("want %q, found %q", text, p.peek().text)
	}
}

// closeAngle takes the '>' that closes a template list, splitting '>>'.
func (p *parser) closeAngle() {
	if p.is(">>") {
		p.toks[p.pos].text = ">"
		return
	}
	p.expect(">")
}

func (p *parser) ident() string {
	if p.peek().kind != tokIdent {
		p.failf("want a name, found %q", p.peek().text)
	}
	return p.next().text
}

func (p *parser) intLit() int {
	t := p.next()
	v, err := strconv.Atoi(strings.TrimRight(t.text, "iu"))
	if t.kind != tokNum || err != nil {
		failf(t.line, "want an integer, found %q", t.text)
	}
	return v
}

// attrs parses attributes: @name, @name(int, ...) or @builtin(name).
func (p *parser) attrs() map[string][]int {
	as := map[string][]int{}
	for p.accept("@") {
		name := p.ident()
		as[name] = nil
		if p.accept("(") {
			for !p.accept(")") {
				if name == "builtin" {
					as["builtin:"+p.ident()] = nil
				} else {
					as[name] = append(as[name], p.intLit())
				}
				p.accept(",")
			}
		}
	}
	return as
}

func (p *parser) item() *item {
	line := p.peek().line
	as := p.attrs()
	switch {
	case p.accept("const"):
		return &item{decl: p.decl(declConst, line)}
	case p.accept("fn"):
		f := p.fn(line)
		if _, ok := as["compute"]; ok {
			f.entry, f.wgSize = true, as["workgroup_size"]
		}
		return &item{fn: f}
	case p.accept("var"):
		kind, access := declPrivate, ""
		if p.accept("<") {
			switch space := p.ident(); space {
			case "private":
			case "workgroup":
				kind = declWorkgroup
			case "storage":
				kind, access = declStorage, "read"
				if p.accept(",") {
					access = p.ident()
				}
			default:
				failf(line, "var<%s> is outside the subset", space)
			}
			p.closeAngle()
		}
		d := p.decl(kind, line)
		d.access = access
		if kind == declStorage {
			b, g := as["binding"], as["group"]
			if len(b) != 1 || len(g) != 1 || g[0] != 0 {
				failf(line, "storage buffer %s needs @group(0) @binding(i)", d.name)
			}
			d.binding = b[0]
		}
		return &item{decl: d}
	}
	p.failf("want a declaration, found %q", p.peek().text)
	return nil
}

// decl parses `name (: type)? (= expr)? ;` after let, var or const, with
// its trailing comment.
func (p *parser) decl(kind declKind, line int) *decl {
	d := p.declNoSemi(kind, line)
	p.expect(";")
	d.comment = p.trailing()
	return d
}

func (p *parser) declNoSemi(kind declKind, line int) *decl {
	d := &decl{kind: kind, name: p.ident(), line: line}
	if p.accept(":") {
		d.typ = p.typ()
	}
	if p.accept("=") {
		d.init = p.expr()
	}
	return d
}

func (p *parser) fn(line int) *fn {
	f := &fn{name: p.ident(), line: line}
	p.expect("(")
	for !p.accept(")") {
		as := p.attrs()
		d := &decl{kind: declParam, name: p.ident(), line: p.peek().line}
		p.expect(":")
		d.typ = p.typ()
		for a := range as {
			if b, ok := strings.CutPrefix(a, "builtin:"); ok {
				d.kind, d.builtin = declBuiltin, b
			}
		}
		f.params = append(f.params, d)
		p.accept(",")
	}
	if p.accept("->") {
		f.ret = p.typ()
	}
	f.body = p.block()
	return f
}

// typ parses a type: a scalar, vecN<T>, array<T> or array<T, N>.
func (p *parser) typ() *typ { return p.typRest(p.ident()) }

func (p *parser) typRest(name string) *typ {
	if t := scalarTypes[name]; t != nil {
		return t
	}
	if name != "array" && name != "vec2" && name != "vec3" && name != "vec4" {
		p.failf("type %s is outside the subset", name)
	}
	p.expect("<")
	t := &typ{kind: tyArray, elem: p.typ()}
	if name != "array" {
		t.kind, t.n = tyVec, int(name[3]-'0')
		if !t.elem.scalar() || t.elem.kind == tyBool {
			p.failf("%s is outside the subset", t)
		}
	} else if p.accept(",") {
		if t.n = p.intLit(); t.n <= 0 {
			p.failf("array length %d", t.n)
		}
	}
	p.closeAngle()
	return t
}

// block parses { statements }.
func (p *parser) block() []*stmt {
	p.expect("{")
	var body []*stmt
	for {
		if c, ok := p.comment(); ok {
			body = append(body, &stmt{kind: stmtComment, comment: c})
		} else if p.accept("}") {
			return body
		} else if p.peek().kind == tokEOF {
			p.failf("unterminated block")
		} else {
			body = append(body, p.stmt())
		}
	}
}

func (p *parser) stmt() *stmt {
	s := &stmt{line: p.peek().line}
	switch {
	case p.is("{"):
		s.kind, s.body = stmtBlock, p.block()
		return s
	case p.accept("if"):
		s.kind, s.x, s.body = stmtIf, p.expr(), p.block()
		if p.accept("else") {
			if p.is("if") {
				s.els = []*stmt{p.stmt()}
			} else {
				s.els = p.block()
			}
		}
		return s
	case p.accept("for"):
		s.kind = stmtFor
		p.expect("(")
		if !p.is(";") {
			s.init = p.simple()
		}
		p.expect(";")
		if !p.is(";") {
			s.x = p.expr()
		}
		p.expect(";")
		if !p.is(")") {
			s.post = p.simple()
		}
		p.expect(")")
		s.body = p.block()
		return s
	case p.accept("return"):
		s.kind = stmtReturn
		if !p.is(";") {
			s.x = p.expr()
		}
	case p.accept("break"):
		s.kind = stmtBreak
	case p.accept("continue"):
		s.kind = stmtContinue
	default:
		s = p.simple()
	}
	p.expect(";")
	s.comment = p.trailing()
	return s
}

// simple parses a declaration, an assignment, an increment or a barrier,
// without the ';' (for loops have them in their headers).
func (p *parser) simple() *stmt {
	line := p.peek().line
	switch {
	case p.accept("let"):
		s := &stmt{kind: stmtDecl, decl: p.declNoSemi(declLet, line), line: line}
		if s.decl.init == nil {
			failf(line, "let %s has no initializer", s.decl.name)
		}
		return s
	case p.accept("var"):
		return &stmt{kind: stmtDecl, decl: p.declNoSemi(declVar, line), line: line}
	case p.accept("workgroupBarrier"):
		p.expect("(")
		p.expect(")")
		return &stmt{kind: stmtBarrier, line: line}
	}
	s := &stmt{lhs: p.postfix(), line: line}
	switch op := p.next(); op.text {
	case "++", "--":
		s.kind, s.op = stmtIncDec, op.text
	case "=", "+=", "-=", "*=", "/=", "%=":
		s.kind, s.op, s.x = stmtAssign, op.text, p.expr()
	default:
		failf(line, "want a statement, found %q", op.text)
	}
	return s
}

// Expressions, by WGSL's precedence (which is C's for the operators of the
// subset).

var binaryLevels = [][]string{{"||"}, {"&&"}, {"==", "!="}, {"<", ">", "<=", ">="}, {"<<", ">>"}, {"+", "-"}, {"*", "/", "%"}}

func (p *parser) expr() *expr { return p.binary(0) }

func (p *parser) binary(level int) *expr {
	if level == len(binaryLevels) {
		return p.unary()
	}
	x := p.binary(level + 1)
	for {
		t := p.peek()
		if t.kind != tokPunct || !contains(binaryLevels[level], t.text) {
			return x
		}
		p.pos++
		x = &expr{kind: exprBinary, text: t.text, args: []*expr{x, p.binary(level + 1)}, line: t.line}
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func (p *parser) unary() *expr {
	if t := p.peek(); t.kind == tokPunct && (t.text == "-" || t.text == "!") {
		p.pos++
		return &expr{kind: exprUnary, text: t.text, args: []*expr{p.unary()}, line: t.line}
	}
	return p.postfix()
}

func (p *parser) postfix() *expr {
	x := p.primary()
	for {
		switch {
		case p.accept("["):
			x = &expr{kind: exprIndex, args: []*expr{x, p.expr()}, line: x.line}
			p.expect("]")
		case p.accept("."):
			x = &expr{kind: exprMember, text: p.ident(), args: []*expr{x}, line: x.line}
		default:
			return x
		}
	}
}

func (p *parser) primary() *expr {
	t := p.next()
	e := &expr{text: t.text, line: t.line}
	switch {
	case t.kind == tokNum:
		e.kind = exprLit
		return e
	case t.kind == tokPunct && t.text == "(":
		e.kind, e.args = exprParen, []*expr{p.expr()}
		p.expect(")")
		return e
	case t.kind != tokIdent:
		failf(t.line, "want an expression, found %q", t.text)
	}
	e.kind = exprIdent
	if p.is("<") && (t.text == "bitcast" || t.text == "array" || strings.HasPrefix(t.text, "vec")) {
		if t.text == "bitcast" {
			p.pos++
			e.tmpl = p.typ()
			p.closeAngle()
		} else {
			e.tmpl = p.typRest(t.text)
		}
		if !p.is("(") {
			p.failf("%s without arguments", t.text)
		}
	}
	if p.accept("(") {
		e.kind = exprCall
		for !p.accept(")") {
			e.args = append(e.args, p.expr())
			if !p.accept(",") && !p.is(")") {
				p.failf("want ',' or ')' in the arguments of %s", t.text)
			}
		}
	}
	return e
}
