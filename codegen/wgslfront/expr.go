package wgslfront

// Expressions alone: an elementwise op's formula is one expression of the
// dialect (codegen/wgsl's table), which the WGSL generator splices into
// its kernels and codegen/llvm compiles from the typed tree ParseExpr
// returns. The helper functions formulas call (tanh_, pow_) come from a
// library, a module of helper functions alone.

// ParseLibrary parses and type-checks src, a module of the dialect that
// declares helper functions only (and `enable` directives): no entry
// point, constant, table or buffer. The error is an *Error.
func ParseLibrary(src string) (*Module, error) {
	var m *Module
	if err := guard(src, func() {
		m = parse(src)
		c := declare(m)
		for _, it := range m.Items {
			switch {
			case it.Decl != nil:
				failf(it.Decl.Pos, "%s: a library declares helper functions only", it.Decl.Name)
			case it.Fn != nil && it.Fn.Entry:
				failf(it.Fn.Pos, "%s: a library has no entry point", it.Fn.Name)
			}
		}
		c.bodies()
	}); err != nil {
		return nil, err
	}
	return m, nil
}

// Var is a variable that an expression given to ParseExpr reads: its name
// and a scalar type of the dialect (bool, i32, u32, f32, f16).
type Var struct{ Name, Type string }

// ParseExpr parses and type-checks src, one expression of the dialect over
// the variables vars, which may call the helper functions of lib (nil: no
// library). In the typed tree a variable's identifier has Ref of kind
// DeclParam, named as in vars, and a call of a helper has Func, a function
// of lib; an abstract expression is settled as i32. The error is an *Error
// at a position in src.
func ParseExpr(src string, vars []Var, lib *Module) (*Expr, error) {
	if lib == nil {
		lib = &Module{}
	}
	var e *Expr
	if err := guard(src, func() {
		p := &parser{lx: &lexer{src: src, line: 1, col: 1}, f16: lib.F16}
		p.tok = p.lx.next()
		e = p.expr()
		if t := p.peek(); t.kind != tokEOF {
			failf(t.pos, "want the end of the expression, found %s", describe(t))
		}
		c := &checker{m: lib, globals: map[string]*Decl{}, fns: map[string]*Fn{}}
		for _, it := range lib.Items {
			if it.Fn != nil {
				c.fns[it.Fn.Name] = it.Fn
			}
		}
		scope := map[string]*Decl{}
		for _, v := range vars {
			t := scalarTypes[v.Type]
			switch {
			case t == nil || t.Kind == F16 && !lib.F16:
				failf(Pos{1, 1}, "variable %s: %s is not a scalar type here", v.Name, v.Type)
			case scope[v.Name] != nil || reservedNames[v.Name] || c.fns[v.Name] != nil:
				failf(Pos{1, 1}, "variable %s is declared twice or is a type or function name", v.Name)
			}
			scope[v.Name] = &Decl{Kind: DeclParam, Name: v.Name, Type: t, declared: true}
		}
		c.scopes = []map[string]*Decl{scope}
		c.expr(e)
		settle(e, concrete(e.Type))
	}); err != nil {
		return nil, err
	}
	return e, nil
}

// Print prints e as WGSL, writing sub's text in place of each
// subexpression x for which sub(x) reports true (nil: none); a caller
// substitutes variables or literals so.
func (e *Expr) Print(sub func(x *Expr) (string, bool)) string {
	if sub != nil {
		if s, ok := sub(e); ok {
			return s
		}
	}
	p := func(x *Expr) string { return x.Print(sub) }
	switch e.Kind {
	case ExprLit, ExprIdent:
		return e.Text
	case ExprParen:
		return "(" + p(e.Args[0]) + ")"
	case ExprUnary:
		x := p(e.Args[0])
		if x != "" && x[0] == e.Text[0] {
			return e.Text + " " + x // - -x, not the token --
		}
		return e.Text + x
	case ExprBinary:
		return p(e.Args[0]) + " " + e.Text + " " + p(e.Args[1])
	case ExprIndex:
		return p(e.Args[0]) + "[" + p(e.Args[1]) + "]"
	case ExprMember:
		return p(e.Args[0]) + "." + e.Text
	}
	s := e.Text
	if e.Tmpl != nil {
		s = e.Tmpl.String()
		if e.Text == "bitcast" || e.Text == "subgroupMatrixLoad" {
			s = e.Text + "<" + s + ">"
		}
	}
	s += "("
	for i, a := range e.Args {
		if i > 0 {
			s += ", "
		}
		s += p(a)
	}
	return s + ")"
}
