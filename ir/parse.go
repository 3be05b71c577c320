package ir

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"
)

// ParseError is a syntax or type error in IR text, with its position.
type ParseError struct {
	File      string
	Line, Col int
	Msg       string
}

func (e *ParseError) Error() string {
	return fmt.Sprintf("%s:%d:%d: %s", e.File, e.Line, e.Col, e.Msg)
}

// Parse reads a module from its text form. file names the source in errors.
// The result is verified; weights have no Source until the caller attaches
// one (see Module.AttachWeights).
func Parse(file, text string) (*Module, error) {
	p := &parser{lex: lexer{file: file, src: text, line: 1, col: 1}, ids: map[int]string{}, ws: map[string]*Weight{}}
	p.advance()
	m, err := p.module()
	if err != nil {
		return nil, err
	}
	if err := Verify(m); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	return m, nil
}

// ParseType parses a type in the text form's syntax, such as "f32[seq, 8]"
// or "i32[]". The type is validated (see Type.Validate).
func ParseType(s string) (Type, error) {
	p := &parser{lex: lexer{file: "type", src: s, line: 1, col: 1}}
	p.advance()
	t := p.typ()
	if p.err == nil && p.tok.kind != tEOF {
		p.fail("unexpected %s after the type", p.tok)
	}
	if p.err != nil {
		msg := p.err.Error()
		if pe, ok := p.err.(*ParseError); ok {
			msg = fmt.Sprintf("col %d: %s", pe.Col, pe.Msg)
		}
		return Type{}, fmt.Errorf("type %q: %s", s, msg)
	}
	return t, nil
}

type tokKind int

const (
	tEOF    tokKind = iota
	tIdent          // module, f32, seq, true, ...
	tLocal          // %name
	tGlobal         // @name
	tHash           // #12
	tString         // "..."
	tNumber         // 12, -1.5e3
	tPunct          // ( ) { } [ ] , : = ->
)

type token struct {
	kind      tokKind
	text      string // identifier, name, unquoted string, number, or punctuation
	line, col int
}

func (t token) String() string {
	switch t.kind {
	case tEOF:
		return "end of file"
	case tLocal, tGlobal:
		return refText(t)
	case tHash:
		return "#" + t.text
	case tString:
		return strconv.Quote(t.text)
	}
	return strconv.Quote(t.text)
}

type lexer struct {
	file      string
	src       string
	pos       int
	line, col int
}

func (l *lexer) errorf(line, col int, format string, args ...any) error {
	return &ParseError{File: l.file, Line: line, Col: col, Msg: fmt.Sprintf(format, args...)}
}

func (l *lexer) bump(n int) {
	for i := 0; i < n; i++ {
		if l.src[l.pos] == '\n' {
			l.line++
			l.col = 1
		} else {
			l.col++
		}
		l.pos++
	}
}

func (l *lexer) next() (token, error) {
	for l.pos < len(l.src) {
		c := l.src[l.pos]
		if c == ' ' || c == '\t' || c == '\n' || c == '\r' {
			l.bump(1)
		} else if strings.HasPrefix(l.src[l.pos:], "//") {
			for l.pos < len(l.src) && l.src[l.pos] != '\n' {
				l.bump(1)
			}
		} else {
			break
		}
	}
	t := token{line: l.line, col: l.col}
	if l.pos >= len(l.src) {
		return t, nil
	}
	c := l.src[l.pos]
	switch {
	case c == '%' || c == '@':
		l.bump(1)
		name, err := l.name()
		if err != nil {
			return t, err
		}
		t.kind, t.text = tLocal, name
		if c == '@' {
			t.kind = tGlobal
		}
	case c == '#':
		l.bump(1)
		start := l.pos
		for l.pos < len(l.src) && l.src[l.pos] >= '0' && l.src[l.pos] <= '9' {
			l.bump(1)
		}
		if start == l.pos {
			return t, l.errorf(t.line, t.col, "expected a node id after '#'")
		}
		t.kind, t.text = tHash, l.src[start:l.pos]
	case c == '"':
		s, err := l.quoted()
		if err != nil {
			return t, err
		}
		t.kind, t.text = tString, s
	case c == '-' && strings.HasPrefix(l.src[l.pos:], "->"):
		l.bump(2)
		t.kind, t.text = tPunct, "->"
	case c == '-' || c == '+' || c >= '0' && c <= '9':
		start := l.pos
		l.bump(1)
		for l.pos < len(l.src) {
			d := l.src[l.pos]
			if d >= '0' && d <= '9' || d == '.' || d == 'e' || d == 'E' || d >= 'a' && d <= 'z' ||
				(d == '-' || d == '+') && (l.src[l.pos-1] == 'e' || l.src[l.pos-1] == 'E') {
				l.bump(1)
			} else {
				break
			}
		}
		t.kind, t.text = tNumber, l.src[start:l.pos]
	case c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_':
		start := l.pos
		for l.pos < len(l.src) && (isIdentByte(l.src[l.pos]) && l.src[l.pos] != '-') {
			l.bump(1)
		}
		t.kind, t.text = tIdent, l.src[start:l.pos]
	case strings.IndexByte("(){}[],:=", c) >= 0:
		l.bump(1)
		t.kind, t.text = tPunct, string(c)
	default:
		r, _ := utf8.DecodeRuneInString(l.src[l.pos:])
		if r == utf8.RuneError {
			return t, l.errorf(t.line, t.col, "unexpected byte %#02x", c)
		}
		return t, l.errorf(t.line, t.col, "unexpected character %q", r)
	}
	return t, nil
}

func (l *lexer) name() (string, error) {
	if l.pos < len(l.src) && l.src[l.pos] == '"' {
		return l.quoted()
	}
	start := l.pos
	for l.pos < len(l.src) && isIdentByte(l.src[l.pos]) {
		l.bump(1)
	}
	if start == l.pos {
		return "", l.errorf(l.line, l.col, "expected a name")
	}
	return l.src[start:l.pos], nil
}

func (l *lexer) quoted() (string, error) {
	line, col := l.line, l.col
	end := l.pos + 1
	for end < len(l.src) && l.src[end] != '"' && l.src[end] != '\n' {
		if l.src[end] == '\\' && end+1 < len(l.src) && l.src[end+1] != '\n' {
			end++ // skip the escaped byte (a quote, say), never a newline
		}
		end++
	}
	if end >= len(l.src) || l.src[end] != '"' {
		return "", l.errorf(line, col, "unterminated string")
	}
	s, err := strconv.Unquote(l.src[l.pos : end+1])
	if err != nil {
		return "", l.errorf(line, col, "bad string %s", l.src[l.pos:end+1])
	}
	l.bump(end + 1 - l.pos)
	return s, nil
}

type parser struct {
	lex lexer
	tok token
	err error
	m   *Module
	ids map[int]string // node id -> the function that uses it
	ws  map[string]*Weight
}

// weight returns the declared weight of that name, or nil.
func (p *parser) weight(name string) *Weight { return p.ws[name] }

func (p *parser) advance() {
	if p.err != nil {
		return
	}
	t, err := p.lex.next()
	if err != nil {
		p.err = err
		p.tok = token{kind: tEOF, line: t.line, col: t.col}
		return
	}
	p.tok = t
}

func (p *parser) fail(format string, args ...any) error {
	if p.err != nil {
		return p.err
	}
	p.err = p.lex.errorf(p.tok.line, p.tok.col, format, args...)
	return p.err
}

func (p *parser) failAt(t token, format string, args ...any) error {
	if p.err != nil {
		return p.err
	}
	p.err = p.lex.errorf(t.line, t.col, format, args...)
	return p.err
}

func (p *parser) is(kind tokKind, text string) bool {
	return p.err == nil && p.tok.kind == kind && (text == "" || p.tok.text == text)
}

func (p *parser) expect(kind tokKind, text, what string) (token, error) {
	if p.err != nil {
		return token{}, p.err
	}
	if !p.is(kind, text) {
		return token{}, p.fail("expected %s, found %s", what, p.tok)
	}
	t := p.tok
	p.advance()
	return t, p.err
}

func (p *parser) punct(s string) error {
	_, err := p.expect(tPunct, s, "'"+s+"'")
	return err
}

func (p *parser) module() (*Module, error) {
	if _, err := p.expect(tIdent, "module", "'module'"); err != nil {
		return nil, err
	}
	name, err := p.expect(tString, "", "a quoted module name")
	if err != nil {
		return nil, err
	}
	p.m = NewModule(name.text)
	if err := p.punct("{"); err != nil {
		return nil, err
	}
	for !p.is(tPunct, "}") {
		if p.err != nil {
			return nil, p.err
		}
		switch {
		case p.is(tIdent, "meta"):
			p.advance()
			k, _ := p.expect(tString, "", "a quoted meta key")
			p.punct("=")
			v, _ := p.expect(tString, "", "a quoted meta value")
			if p.err == nil {
				if _, dup := p.m.Meta[k.text]; dup {
					return nil, p.failAt(k, "meta %s given twice", strconv.Quote(k.text))
				}
				p.m.Meta[k.text] = v.text
			}
		case p.is(tIdent, "weight"):
			p.advance()
			at := p.tok
			name, _ := p.expect(tGlobal, "", "a weight name (@name)")
			p.punct(":")
			t := p.typ()
			if p.err == nil {
				if p.weight(name.text) != nil {
					return nil, p.failAt(at, "weight @%s declared twice", quoteIdent(name.text))
				}
				if !t.Shape.IsStatic() {
					return nil, p.failAt(at, "weight @%s must have a static shape, got %s", quoteIdent(name.text), t.Shape)
				}
				p.ws[name.text] = p.m.AddWeight(name.text, t, nil).Weight
			}
		case p.is(tIdent, "func"):
			p.function()
		default:
			return nil, p.fail("expected 'meta', 'weight', 'func' or '}', found %s", p.tok)
		}
	}
	p.punct("}")
	if p.err == nil && p.tok.kind != tEOF {
		p.fail("unexpected %s after the module", p.tok)
	}
	return p.m, p.err
}

func (p *parser) typ() Type {
	at := p.tok
	dt, err := p.expect(tIdent, "", "a dtype (f32, i32, ...)")
	if err != nil {
		return Type{}
	}
	d, perr := ParseDType(dt.text)
	if perr != nil {
		p.failAt(at, "%v", perr)
		return Type{}
	}
	shape := p.shape()
	if p.err != nil {
		return Type{}
	}
	t := T(d, shape)
	if err := t.Validate(); err != nil {
		p.failAt(at, "%v", err)
		return Type{}
	}
	return t
}

func (p *parser) shape() Shape {
	if p.punct("[") != nil {
		return nil
	}
	s := Shape{}
	for !p.is(tPunct, "]") && p.err == nil {
		if len(s) > 0 {
			p.punct(",")
		}
		switch {
		case p.is(tNumber, ""):
			n, err := strconv.ParseInt(p.tok.text, 10, 64)
			if err != nil || n < 0 {
				p.fail("bad dim %s", p.tok.text)
				return nil
			}
			s = append(s, D(n))
			p.advance()
		case p.is(tIdent, ""):
			s = append(s, Sym(p.tok.text))
			p.advance()
		default:
			p.fail("expected a dim (a size or a symbol), found %s", p.tok)
			return nil
		}
	}
	p.punct("]")
	return s
}

func (p *parser) function() {
	p.advance()
	name, _ := p.expect(tGlobal, "", "a function name (@name)")
	if p.err != nil {
		return
	}
	if p.m.Func(name.text) != nil {
		p.failAt(name, "func @%s declared twice", quoteIdent(name.text))
		return
	}
	fn := "func @" + quoteIdent(name.text)
	f := &Function{Name: name.text}
	scope := map[string]*Value{}
	p.punct("(")
	for !p.is(tPunct, ")") && p.err == nil {
		if len(f.Params) > 0 {
			p.punct(",")
		}
		at := p.tok
		pn, _ := p.expect(tLocal, "", "a parameter (%name)")
		p.punct(":")
		t := p.typ()
		if p.err != nil {
			return
		}
		if scope[pn.text] != nil {
			p.failAt(at, "parameter %%%s defined twice", quoteIdent(pn.text))
			return
		}
		v := &Value{Name: pn.text, Type: t}
		scope[pn.text] = v
		f.Params = append(f.Params, v)
	}
	p.punct(")")
	p.punct("->")
	p.punct("(")
	var resultToks []token
	for !p.is(tPunct, ")") && p.err == nil {
		if len(resultToks) > 0 {
			p.punct(",")
		}
		if p.is(tGlobal, "") {
			resultToks = append(resultToks, p.tok)
			p.advance()
			continue
		}
		t, _ := p.expect(tLocal, "", "a result (%name or @weight)")
		resultToks = append(resultToks, t)
	}
	p.punct(")")
	p.punct("{")
	for p.err == nil && !p.is(tIdent, "return") {
		p.node(f, scope)
	}
	p.expect(tIdent, "return", "'return'")
	var returned []token
	if p.is(tLocal, "") || p.is(tGlobal, "") {
		returned = append(returned, p.tok)
		p.advance()
		for p.is(tPunct, ",") {
			p.advance()
			if p.is(tGlobal, "") {
				returned = append(returned, p.tok)
				p.advance()
				continue
			}
			t, _ := p.expect(tLocal, "", "a returned value (%name or @weight)")
			returned = append(returned, t)
		}
	}
	p.punct("}")
	if p.err != nil {
		return
	}
	if len(returned) != len(resultToks) {
		p.failAt(name, "%s declares %d results but returns %d", fn, len(resultToks), len(returned))
		return
	}
	for i, rt := range resultToks {
		if returned[i].kind != rt.kind || returned[i].text != rt.text {
			p.failAt(returned[i], "return %s does not match declared result %s", refText(returned[i]), refText(rt))
			return
		}
		if rt.kind == tGlobal {
			w := p.weight(rt.text)
			if w == nil {
				p.failAt(rt, "result %s is not a declared weight", refText(rt))
				return
			}
			f.Results = append(f.Results, w.Value())
			continue
		}
		v := scope[rt.text]
		if v == nil {
			p.failAt(rt, "result %s is not defined in %s", refText(rt), fn)
			return
		}
		f.Results = append(f.Results, v)
	}
	p.m.Funcs = append(p.m.Funcs, f)
}

func (p *parser) node(f *Function, scope map[string]*Value) {
	start := p.tok
	var outs []token
	for {
		t, err := p.expect(tLocal, "", "a node's output (%name) or 'return'")
		if err != nil {
			return
		}
		outs = append(outs, t)
		if !p.is(tPunct, ",") {
			break
		}
		p.advance()
	}
	p.punct("=")
	opTok, _ := p.expect(tIdent, "", "an op name")
	if p.err != nil {
		return
	}
	op, ok := OpNamed(opTok.text)
	if !ok {
		p.failAt(opTok, "unknown op %q", opTok.text)
		return
	}
	p.punct("(")
	var inputs []*Value
	for !p.is(tPunct, ")") && p.err == nil {
		if len(inputs) > 0 {
			p.punct(",")
		}
		at := p.tok
		switch {
		case p.is(tLocal, ""):
			v := scope[p.tok.text]
			if v == nil {
				p.failAt(at, "%s is not defined (before this node)", refText(at))
				return
			}
			inputs = append(inputs, v)
		case p.is(tGlobal, ""):
			w := p.weight(p.tok.text)
			if w == nil {
				p.failAt(at, "%s is not a declared weight", refText(at))
				return
			}
			inputs = append(inputs, w.Value())
		default:
			p.fail("expected an input (%%name or @weight), found %s", p.tok)
			return
		}
		p.advance()
	}
	p.punct(")")
	attrs := Attrs{}
	if p.is(tPunct, "{") {
		p.advance()
		for !p.is(tPunct, "}") && p.err == nil {
			if len(attrs) > 0 {
				p.punct(",")
			}
			k := p.tok
			if p.is(tString, "") {
				p.advance()
			} else {
				p.expect(tIdent, "", "an attribute name")
			}
			p.punct("=")
			v := p.attrValue()
			if p.err != nil {
				return
			}
			if _, dup := attrs[k.text]; dup {
				p.failAt(k, "attribute %q given twice", k.text)
				return
			}
			attrs[k.text] = v
		}
		p.punct("}")
	}
	p.punct(":")
	var types []Type
	for p.err == nil {
		types = append(types, p.typ())
		if !p.is(tPunct, ",") {
			break
		}
		p.advance()
	}
	idTok, _ := p.expect(tHash, "", "a node id (#N)")
	if p.err != nil {
		return
	}
	id, err := strconv.Atoi(idTok.text)
	if err != nil || id <= 0 {
		p.failAt(idTok, "bad node id #%s", idTok.text)
		return
	}
	if prev, dup := p.ids[id]; dup {
		p.failAt(idTok, "node id #%d already used in func @%s", id, quoteIdent(prev))
		return
	}
	n := &Node{ID: id, Op: op, Inputs: inputs}
	if p.is(tIdent, "loc") {
		p.advance()
		p.punct("(")
		s, _ := p.expect(tString, "", "a quoted provenance")
		p.punct(")")
		n.Prov = s.text
	}
	if p.is(tIdent, "on") {
		p.advance()
		p.punct("(")
		s, _ := p.expect(tIdent, "", "a placement (source or target)")
		if p.err == nil && s.text != "source" && s.text != "target" {
			p.failAt(s, "placement %q is neither source nor target", s.text)
			return
		}
		p.punct(")")
		n.Place = s.text
	}
	if p.err != nil {
		return
	}
	if len(types) != len(outs) {
		p.failAt(start, "%d outputs but %d types", len(outs), len(types))
		return
	}
	inTypes := make([]Type, len(inputs))
	for i, in := range inputs {
		inTypes[i] = in.Type
	}
	want, na, err := InferTypes(n.Op, inTypes, attrs)
	if err != nil {
		p.failAt(opTok, "%v", err)
		return
	}
	if len(want) != len(outs) {
		p.failAt(start, "op %s has %d outputs, %d given", n.Op, len(want), len(outs))
		return
	}
	n.Attrs = na
	for i, o := range outs {
		if !types[i].Equal(want[i]) {
			p.failAt(o, "%s is declared %s, but %s infers %s", refText(o), types[i], n.Op, want[i])
			return
		}
		if scope[o.text] != nil {
			p.failAt(o, "%s defined twice", refText(o))
			return
		}
		v := &Value{Name: o.text, Type: types[i], Def: n}
		scope[o.text] = v
		n.Outputs = append(n.Outputs, v)
	}
	f.Nodes = append(f.Nodes, n)
	p.ids[id] = f.Name
	if id > p.m.nextID {
		p.m.nextID = id
	}
}

// refText writes a %name or @name token as the text form does.
func refText(t token) string {
	if t.kind == tGlobal {
		return "@" + quoteIdent(t.text)
	}
	return "%" + quoteIdent(t.text)
}

func (p *parser) attrValue() Attr {
	t := p.tok
	switch {
	case p.is(tNumber, ""):
		p.advance()
		return p.number(t)
	case p.is(tString, ""):
		p.advance()
		return StringAttr(t.text)
	case p.is(tIdent, ""):
		p.advance()
		switch t.text {
		case "true", "false":
			return BoolAttr(t.text == "true")
		case "inf", "nan":
			return p.number(t)
		}
		if d, err := ParseDType(t.text); err == nil {
			return DTypeAttr(d)
		}
		p.failAt(t, "bad attribute value %s", t)
		return Attr{}
	case p.is(tPunct, "["):
		p.advance()
		var items []Attr
		var syms []token
		for !p.is(tPunct, "]") && p.err == nil {
			if len(items) > 0 {
				p.punct(",")
			}
			it := p.tok
			switch {
			case p.is(tNumber, ""), p.is(tIdent, "inf"), p.is(tIdent, "nan"):
				p.advance()
				items = append(items, p.number(it))
			case p.is(tIdent, ""):
				p.advance()
				items = append(items, StringAttr(it.text))
				syms = append(syms, it)
			default:
				p.fail("expected a number or a dim symbol in a list, found %s", p.tok)
			}
		}
		p.punct("]")
		return p.list(t, items, len(syms) > 0)
	}
	p.fail("expected an attribute value, found %s", p.tok)
	return Attr{}
}

// list turns parsed list items into ints, floats or a shape.
func (p *parser) list(at token, items []Attr, hasSym bool) Attr {
	if hasSym {
		s := make(Shape, len(items))
		for i, it := range items {
			switch it.Kind {
			case AttrString:
				s[i] = Sym(it.Str)
			case AttrInt:
				s[i] = D(it.Int)
			default:
				p.failAt(at, "a shape holds sizes and symbols only")
				return Attr{}
			}
		}
		return ShapeAttr(s)
	}
	floats := false
	for _, it := range items {
		floats = floats || it.Kind == AttrFloat
	}
	if floats {
		fs := make([]float64, len(items))
		for i, it := range items {
			fs[i] = it.Float
			if it.Kind == AttrInt {
				fs[i] = float64(it.Int)
			}
		}
		return FloatsAttr(fs...)
	}
	is := make([]int64, len(items))
	for i, it := range items {
		is[i] = it.Int
	}
	return IntsAttr(is...)
}

func (p *parser) number(t token) Attr {
	s := t.text
	switch s {
	case "inf", "+inf":
		return FloatAttr(math.Inf(1))
	case "-inf":
		return FloatAttr(math.Inf(-1))
	case "nan":
		return FloatAttr(math.NaN())
	}
	if !strings.ContainsAny(s, ".eEin") {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			p.failAt(t, "bad integer %s", s)
			return Attr{}
		}
		return IntAttr(n)
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		p.failAt(t, "bad number %s", s)
		return Attr{}
	}
	return FloatAttr(f)
}
