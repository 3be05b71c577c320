package wgslfront

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// This file lexes and parses the dialect (see the package doc) into the
// syntax tree of tree.go; check.go types it.

// failure is how the lexer, parser and checker give up: failf panics with
// one and Parse recovers it as its error.
type failure struct{ err *Error }

func failf(pos Pos, format string, args ...any) {
	panic(failure{&Error{Pos: pos, Msg: fmt.Sprintf(format, args...)}})
}

// A token of WGSL source.
type token struct {
	kind     tokKind
	text     string
	pos      Pos
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

// puncts are the operators and punctuation of the dialect, longest first.
var puncts = strings.Fields(`-> && || == != <= >= << >> += -= *= /= %= ++ --
	+ - * / % < > = ! & | ^ ( ) [ ] { } , ; : . @`)

// lexer splits source into tokens on demand (the parser holds one at a
// time, so memory stays proportional to the tree, not to the tokens).
type lexer struct {
	src       string
	i         int
	line, col int  // of src[i]
	code      bool // the line has a token before the next comment
}

func (lx *lexer) pos() Pos { return Pos{lx.line, lx.col} }

func (lx *lexer) advance(n int) { lx.i, lx.col = lx.i+n, lx.col+n }

// next returns the next token. Line comments are tokens (the MSL printer
// keeps them); block comments are not part of the dialect.
func (lx *lexer) next() token {
	for lx.i < len(lx.src) {
		c, rest, start := lx.src[lx.i], lx.src[lx.i:], lx.pos()
		switch {
		case c == '\n':
			lx.i, lx.line, lx.col, lx.code = lx.i+1, lx.line+1, 1, false
			continue
		case c == ' ' || c == '\t' || c == '\r':
			lx.advance(1)
			continue
		case strings.HasPrefix(rest, "//"):
			end := strings.IndexByte(rest, '\n')
			if end < 0 {
				end = len(rest)
			}
			raw := strings.TrimSuffix(rest[2:end], "\r") // a CRLF line end
			for j, r := range raw {
				// WGSL ends a line comment at other line breaks too, and
				// C++ at none of them: refuse them, so that every reader
				// of the source sees the same code.
				if r < ' ' && r != '\t' || r == 0x7f || r == 0x85 || r == 0x2028 || r == 0x2029 {
					failf(Pos{start.Line, start.Col + 2 + j}, "control or line-break character %U in a comment", r)
				}
			}
			tok := token{tokComment, strings.TrimSpace(raw), start, lx.code}
			lx.advance(end)
			return tok
		case strings.HasPrefix(rest, "/*"):
			failf(start, "block comments are outside the dialect")
		case isLetter(c):
			n := 1
			for n < len(rest) && (isLetter(rest[n]) || isDigit(rest[n])) {
				n++
			}
			lx.advance(n)
			lx.code = true
			return token{kind: tokIdent, text: rest[:n], pos: start}
		case isDigit(c):
			// Digits, a point, an exponent with its sign, hex digits and a
			// suffix.
			hex := strings.HasPrefix(rest, "0x") || strings.HasPrefix(rest, "0X")
			n := 1
			for n < len(rest) && (isLetter(rest[n]) || isDigit(rest[n]) || rest[n] == '.' ||
				(rest[n] == '+' || rest[n] == '-') && (rest[n-1] == 'e' || rest[n-1] == 'E') && !hex) {
				n++
			}
			lx.advance(n)
			lx.code = true
			return token{kind: tokNum, text: rest[:n], pos: start}
		default:
			for _, p := range puncts {
				if strings.HasPrefix(rest, p) {
					lx.advance(len(p))
					lx.code = true
					return token{kind: tokPunct, text: p, pos: start}
				}
			}
			r, _ := utf8.DecodeRuneInString(rest)
			failf(start, "unexpected character %q", r)
		}
	}
	return token{kind: tokEOF, pos: lx.pos()}
}

func isLetter(c byte) bool { return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }
func isDigit(c byte) bool  { return c >= '0' && c <= '9' }

// The parser: recursive descent, failing (failf) at the first error. Its
// recursion is bounded by MaxNesting.
type parser struct {
	lx    *lexer
	tok   token // the current token; it may be a comment
	depth int   // nesting of blocks and expressions being parsed
	f16   bool  // the module enables f16
	sgm   bool  // the module enables subgroup matrices
}

// parse parses source of the dialect.
func parse(src string) *Module {
	p := &parser{lx: &lexer{src: src, line: 1, col: 1}}
	p.tok = p.lx.next()
	m := &Module{}
	p.directives(m)
	p.f16, p.sgm = m.F16, m.SubgroupMatrix
	for {
		if c, ok := p.comment(); ok {
			m.Items = append(m.Items, &Item{Comment: c})
		} else if p.peek().kind == tokEOF {
			return m
		} else {
			m.Items = append(m.Items, p.item())
		}
	}
}

// directives parses the `enable NAME;` directives that open a module:
// f16, subgroups and subgroup matrices.
func (p *parser) directives(m *Module) {
	for {
		if c, ok := p.comment(); ok {
			m.Items = append(m.Items, &Item{Comment: c})
			continue
		}
		if !p.is("enable") {
			return
		}
		p.next()
		for {
			name := p.peek()
			switch ext := p.ident(); ext {
			case "f16":
				m.F16 = true
			case "subgroups":
				m.Subgroups = true
			case matrixExt:
				m.SubgroupMatrix = true
			default:
				failf(name.pos, "enable %s: the dialect has f16, subgroups and %s", ext, matrixExt)
			}
			if !p.accept(",") {
				break
			}
		}
		p.expect(";")
		if c := p.trailing(); c != "" {
			m.Items = append(m.Items, &Item{Comment: c})
		}
	}
}

// enter counts one more level of nesting (an expression or a block) and
// fails past MaxNesting, so that hostile input cannot exhaust the stack;
// leave undoes it.
func (p *parser) enter() {
	if p.depth++; p.depth > MaxNesting {
		p.failf("nesting deeper than %d", MaxNesting)
	}
}

func (p *parser) leave() { p.depth-- }

// peek returns the next token that is not a comment (comments inside
// statements and expressions are dropped).
func (p *parser) peek() token {
	for p.tok.kind == tokComment {
		p.tok = p.lx.next()
	}
	return p.tok
}

func (p *parser) next() token {
	t := p.peek()
	if t.kind != tokEOF {
		p.tok = p.lx.next()
	}
	return t
}

func (p *parser) failf(format string, args ...any) { failf(p.peek().pos, format, args...) }

// comment takes a comment that stands on its own line.
func (p *parser) comment() (string, bool) {
	if t := p.tok; t.kind == tokComment && !t.trailing {
		p.tok = p.lx.next()
		return t.text, true
	}
	return "", false
}

// trailing takes a comment that ends the line of the last token.
func (p *parser) trailing() string {
	if t := p.tok; t.kind == tokComment && t.trailing {
		p.tok = p.lx.next()
		return t.text
	}
	return ""
}

func (p *parser) is(text string) bool {
	t := p.peek()
	return (t.kind == tokIdent || t.kind == tokPunct) && t.text == text
}

func (p *parser) accept(text string) bool {
	if p.is(text) {
		p.next()
		return true
	}
	return false
}

func (p *parser) expect(text string) {
	if !p.accept(text) {
		p.failf("want %q, found %s", text, describe(p.peek()))
	}
}

// describe names a token in messages.
func describe(t token) string {
	if t.kind == tokEOF {
		return "the end of the source"
	}
	return strconv.Quote(t.text)
}

// closeAngle takes the '>' that closes a template list, splitting '>>'.
func (p *parser) closeAngle() {
	if p.is(">>") {
		p.tok.text, p.tok.pos.Col = ">", p.tok.pos.Col+1
		return
	}
	p.expect(">")
}

func (p *parser) ident() string {
	t := p.peek()
	if t.kind != tokIdent {
		p.failf("want a name, found %s", describe(t))
	}
	if strings.HasPrefix(t.text, "__") || t.text == "_" {
		p.failf("%s is not a WGSL identifier", t.text)
	}
	return p.next().text
}

// intLit parses a small non-negative integer (attribute arguments, array
// lengths).
func (p *parser) intLit(max int) int {
	t := p.next()
	v, err := strconv.Atoi(strings.TrimRight(t.text, "iu"))
	if t.kind != tokNum || err != nil || v < 0 || v > max {
		failf(t.pos, "want an integer from 0 to %d, found %s", max, describe(t))
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
					as[name] = append(as[name], p.intLit(maxAttr))
				}
				if !p.accept(",") && !p.is(")") {
					p.failf("want ',' or ')' in @%s(...)", name)
				}
			}
		}
	}
	return as
}

// maxAttr bounds attribute arguments (bindings, workgroup sizes), and
// maxArray array lengths: far above any device, low enough that sizes in
// bytes never overflow.
const (
	maxAttr  = 1 << 16
	maxArray = 1 << 24
)

func (p *parser) item() *Item {
	pos := p.peek().pos
	as := p.attrs()
	switch {
	case p.accept("const"):
		return &Item{Decl: p.decl(DeclConst, pos)}
	case p.accept("fn"):
		f := p.fn(pos)
		if _, ok := as["compute"]; ok {
			f.Entry, f.WorkgroupSize = true, as["workgroup_size"]
		}
		return &Item{Fn: f}
	case p.accept("var"):
		kind, access := DeclPrivate, ""
		if p.accept("<") {
			switch space := p.ident(); space {
			case "private":
			case "workgroup":
				kind = DeclWorkgroup
			case "storage":
				kind, access = DeclStorage, "read"
				if p.accept(",") {
					access = p.ident()
				}
			default:
				failf(pos, "var<%s> is outside the dialect", space)
			}
			p.closeAngle()
		}
		d := p.decl(kind, pos)
		d.Access = access
		if kind == DeclStorage {
			b, g := as["binding"], as["group"]
			if len(b) != 1 || len(g) != 1 || g[0] != 0 {
				failf(pos, "storage buffer %s needs @group(0) @binding(i)", d.Name)
			}
			d.Binding = b[0]
		}
		return &Item{Decl: d}
	}
	p.failf("want a declaration, found %s", describe(p.peek()))
	return nil
}

// decl parses `name (: type)? (= expr)? ;` after let, var or const, with
// its trailing comment.
func (p *parser) decl(kind DeclKind, pos Pos) *Decl {
	d := p.declNoSemi(kind, pos)
	p.expect(";")
	d.Comment = p.trailing()
	return d
}

func (p *parser) declNoSemi(kind DeclKind, pos Pos) *Decl {
	d := &Decl{Kind: kind, Name: p.ident(), Pos: pos}
	if p.accept(":") {
		d.Type = p.typ()
	}
	if p.accept("=") {
		d.Init = p.expr()
	}
	return d
}

func (p *parser) fn(pos Pos) *Fn {
	f := &Fn{Name: p.ident(), Pos: pos}
	p.expect("(")
	for !p.accept(")") {
		as := p.attrs()
		d := &Decl{Kind: DeclParam, Pos: p.peek().pos}
		d.Name = p.ident()
		p.expect(":")
		d.Type = p.typ()
		for a := range as {
			if b, ok := strings.CutPrefix(a, "builtin:"); ok {
				d.Kind, d.Builtin = DeclBuiltin, b
			}
		}
		f.Params = append(f.Params, d)
		if !p.accept(",") && !p.is(")") {
			p.failf("want ',' or ')' in the parameters of %s", f.Name)
		}
	}
	if p.accept("->") {
		f.Result = p.typ()
	}
	f.Body = p.block()
	return f
}

// typ parses a type: a scalar, vecN<T>, array<T> or array<T, N> of
// scalars or vectors.
func (p *parser) typ() *Type {
	pos := p.peek().pos
	return p.typRest(p.ident(), pos)
}

func (p *parser) typRest(name string, pos Pos) *Type {
	if name == "f16" && !p.f16 {
		failf(pos, "f16 needs `enable f16;`")
	}
	if t := scalarTypes[name]; t != nil {
		return t
	}
	if _, ok := matrixTypes[name]; ok {
		return p.matrixType(name, pos)
	}
	if name != "array" && name != "vec2" && name != "vec3" && name != "vec4" {
		failf(pos, "type %s is outside the dialect", name)
	}
	p.expect("<")
	t := &Type{Kind: Array, Elem: p.typ()}
	if name != "array" {
		t.Kind, t.N = Vector, int(name[3]-'0')
		if !t.Elem.Scalar() || t.Elem.Kind == Bool {
			failf(pos, "%s is outside the dialect", t)
		}
	} else {
		if !t.Elem.Value() || t.Elem.Kind == Bool {
			failf(pos, "%s is outside the dialect (arrays hold numbers or vectors)", t)
		}
		if p.accept(",") {
			if t.N = p.intLit(maxArray); t.N == 0 {
				failf(pos, "array length 0")
			}
		}
	}
	p.closeAngle()
	return t
}

// block parses { statements }.
func (p *parser) block() []*Stmt {
	p.enter()
	defer p.leave()
	p.expect("{")
	var body []*Stmt
	for {
		if c, ok := p.comment(); ok {
			body = append(body, &Stmt{Kind: StmtComment, Comment: c})
		} else if p.accept("}") {
			return body
		} else if p.peek().kind == tokEOF {
			p.failf("unterminated block")
		} else {
			body = append(body, p.stmt())
		}
	}
}

func (p *parser) stmt() *Stmt {
	s := &Stmt{Pos: p.peek().pos}
	switch {
	case p.is("{"):
		s.Kind, s.Body = StmtBlock, p.block()
		return s
	case p.accept("if"):
		s.Kind, s.X, s.Body = StmtIf, p.expr(), p.block()
		if p.accept("else") {
			if p.is("if") {
				p.enter() // an else-if chain nests
				defer p.leave()
				s.Else = []*Stmt{p.stmt()}
			} else {
				s.Else = p.block()
			}
		}
		return s
	case p.accept("for"):
		s.Kind = StmtFor
		p.expect("(")
		if !p.is(";") {
			s.Init = p.simple()
		}
		p.expect(";")
		if !p.is(";") {
			s.X = p.expr()
		}
		p.expect(";")
		if !p.is(")") {
			s.Post = p.simple()
		}
		p.expect(")")
		s.Body = p.block()
		return s
	case p.accept("return"):
		s.Kind = StmtReturn
		if !p.is(";") {
			s.X = p.expr()
		}
	case p.accept("break"):
		s.Kind = StmtBreak
	case p.accept("continue"):
		s.Kind = StmtContinue
	default:
		s = p.simple()
	}
	p.expect(";")
	s.Comment = p.trailing()
	return s
}

// simple parses a declaration, an assignment, an increment or a barrier,
// without the ';' (for loops have them in their headers).
func (p *parser) simple() *Stmt {
	pos := p.peek().pos
	switch {
	case p.accept("let"):
		s := &Stmt{Kind: StmtDecl, Decl: p.declNoSemi(DeclLet, pos), Pos: pos}
		if s.Decl.Init == nil {
			failf(pos, "let %s has no initializer", s.Decl.Name)
		}
		return s
	case p.accept("var"):
		return &Stmt{Kind: StmtDecl, Decl: p.declNoSemi(DeclVar, pos), Pos: pos}
	case p.accept("workgroupBarrier"):
		p.expect("(")
		p.expect(")")
		return &Stmt{Kind: StmtBarrier, Pos: pos}
	}
	s := &Stmt{LHS: p.postfix(), Pos: pos}
	if s.LHS.Kind == ExprCall && (p.is(";") || p.is(")")) {
		s.Kind, s.X, s.LHS = StmtCall, s.LHS, nil // the checker takes subgroupMatrixStore only
		return s
	}
	switch op := p.next(); op.text {
	case "++", "--":
		s.Kind, s.Op = StmtIncDec, op.text
	case "=", "+=", "-=", "*=", "/=", "%=":
		s.Kind, s.Op, s.X = StmtAssign, op.text, p.expr()
	default:
		failf(op.pos, "want a statement, found %s", describe(op))
	}
	return s
}

// Expressions, by WGSL's precedence (which is C's for the operators of the
// dialect). WGSL gives the bitwise operators no precedence against the
// others: an operand of &, | or ^ that is another binary operation must be
// in parentheses, unless it is a chain of the same operator (a & b & c),
// and so must a bitwise operation that is an operand of another operator.
// C's levels for them then parse every valid module as WGSL does.

var binaryLevels = [][]string{{"||"}, {"&&"}, {"|"}, {"^"}, {"&"}, {"==", "!="}, {"<", ">", "<=", ">="}, {"<<", ">>"}, {"+", "-"}, {"*", "/", "%"}}

func isBitwise(op string) bool { return op == "&" || op == "|" || op == "^" }

func (p *parser) expr() *Expr {
	p.enter()
	defer p.leave()
	return p.binary(0)
}

func (p *parser) binary(level int) *Expr {
	if level == len(binaryLevels) {
		return p.unary()
	}
	x := p.binary(level + 1)
	for {
		t := p.peek()
		if t.kind != tokPunct || !contains(binaryLevels[level], t.text) {
			return x
		}
		p.next()
		y := p.binary(level + 1)
		for _, a := range []*Expr{x, y} {
			if a.Kind == ExprBinary && a.Text != t.text && (isBitwise(a.Text) || isBitwise(t.text)) {
				failf(a.Pos, "WGSL needs parentheses around %s as an operand of %s", a.Text, t.text)
			}
		}
		x = p.node(&Expr{Kind: ExprBinary, Text: t.text, Args: []*Expr{x, y}, Pos: t.pos})
	}
}

// node returns e after checking the height of the tree under it: a long
// chain like a + b + c + ... nests without recursing in the parser, but
// the checker and the printers recurse on the tree.
func (p *parser) node(e *Expr) *Expr {
	for _, a := range e.Args {
		e.height = max(e.height, a.height+1)
	}
	if e.height > MaxNesting {
		failf(e.Pos, "expression nested deeper than %d", MaxNesting)
	}
	return e
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func (p *parser) unary() *Expr {
	if t := p.peek(); t.kind == tokPunct && (t.text == "-" || t.text == "!" || t.text == "&") {
		p.next()
		p.enter()
		defer p.leave()
		return p.node(&Expr{Kind: ExprUnary, Text: t.text, Args: []*Expr{p.unary()}, Pos: t.pos})
	}
	return p.postfix()
}

func (p *parser) postfix() *Expr {
	x := p.primary()
	for {
		switch t := p.peek(); {
		case p.accept("["):
			x = p.node(&Expr{Kind: ExprIndex, Args: []*Expr{x, p.expr()}, Pos: t.pos})
			p.expect("]")
		case p.accept("."):
			x = p.node(&Expr{Kind: ExprMember, Text: p.ident(), Args: []*Expr{x}, Pos: t.pos})
		default:
			return x
		}
	}
}

func (p *parser) primary() *Expr {
	t := p.next()
	e := &Expr{Text: t.text, Pos: t.pos}
	switch {
	case t.kind == tokNum:
		e.Kind = ExprLit
		return e
	case t.kind == tokPunct && t.text == "(":
		e.Kind, e.Args = ExprParen, []*Expr{p.expr()}
		p.expect(")")
		return p.node(e)
	case t.kind != tokIdent:
		failf(t.pos, "want an expression, found %s", describe(t))
	case strings.HasPrefix(t.text, "__") || t.text == "_":
		failf(t.pos, "%s is not a WGSL identifier", t.text)
	}
	e.Kind = ExprIdent
	_, matrix := matrixTypes[t.text]
	if p.is("<") && (t.text == "bitcast" || t.text == "array" || strings.HasPrefix(t.text, "vec") || matrix || t.text == "subgroupMatrixLoad") {
		if t.text == "bitcast" || t.text == "subgroupMatrixLoad" {
			p.next()
			e.Tmpl = p.typ()
			p.closeAngle()
		} else {
			e.Tmpl = p.typRest(t.text, t.pos)
		}
		if !p.is("(") {
			p.failf("%s without arguments", t.text)
		}
	}
	if p.accept("(") {
		e.Kind = ExprCall
		for !p.accept(")") {
			e.Args = append(e.Args, p.expr())
			if !p.accept(",") && !p.is(")") {
				p.failf("want ',' or ')' in the arguments of %s", t.text)
			}
		}
	}
	return p.node(e)
}
