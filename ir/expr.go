package ir

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Expr is the body of a fused_elementwise node: a term over the node's
// inputs ($0, $1, ... up to $65536), float constants (anything
// strconv.ParseFloat reads: 2, -0.5, 1e-6, inf, nan) and the ops of
// UnaryOps and BinaryOps, such as "mul(silu($0), $1)". Whitespace between
// tokens is ignored; nesting is limited to 64 levels. Code generators walk
// it to emit one kernel. Note that the zero Expr is the input leaf $0.
type Expr struct {
	Op    Op      // an op of UnaryOps or BinaryOps; OpNone for a leaf
	Args  []*Expr // the op's operands
	Input int     // for an input leaf: its index; -1 otherwise
	Const float64 // for a constant leaf (Op == OpNone and Input < 0)
}

// IsInput reports whether e is an input leaf.
func (e *Expr) IsInput() bool { return e.Op == OpNone && e.Input >= 0 }

// IsConst reports whether e is a constant leaf.
func (e *Expr) IsConst() bool { return e.Op == OpNone && e.Input < 0 }

// MaxInput returns the largest input index used, or -1.
func (e *Expr) MaxInput() int {
	if e.IsInput() {
		return e.Input
	}
	m := -1
	for _, a := range e.Args {
		m = max(m, a.MaxInput())
	}
	return m
}

func (e *Expr) String() string {
	switch {
	case e.IsInput():
		return "$" + strconv.Itoa(e.Input)
	case e.IsConst():
		return strconv.FormatFloat(e.Const, 'g', -1, 64)
	}
	parts := make([]string, len(e.Args))
	for i, a := range e.Args {
		parts[i] = a.String()
	}
	return e.Op.String() + "(" + strings.Join(parts, ", ") + ")"
}

// ParseExpr parses the expression syntax of fused_elementwise.
func ParseExpr(s string) (*Expr, error) {
	p := &exprParser{s: s}
	e, err := p.expr(0)
	if err != nil {
		return nil, fmt.Errorf("expr %q: %w", s, err)
	}
	p.space()
	if p.i != len(p.s) {
		return nil, fmt.Errorf("expr %q: unexpected %q at offset %d", s, p.s[p.i:], p.i)
	}
	return e, nil
}

type exprParser struct {
	s string
	i int
}

func isExprSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func (p *exprParser) space() {
	for p.i < len(p.s) && isExprSpace(p.s[p.i]) {
		p.i++
	}
}

func (p *exprParser) expr(depth int) (*Expr, error) {
	if depth > 64 {
		return nil, fmt.Errorf("nested too deeply")
	}
	p.space()
	if p.i >= len(p.s) {
		return nil, fmt.Errorf("unexpected end")
	}
	start := p.i
	if p.s[p.i] == '$' {
		p.i++
		for p.i < len(p.s) && p.s[p.i] >= '0' && p.s[p.i] <= '9' {
			p.i++
		}
		n, err := strconv.Atoi(p.s[start+1 : p.i])
		if err != nil || n > 1<<16 {
			return nil, fmt.Errorf("bad input reference %q at offset %d", p.s[start:p.i], start)
		}
		return &Expr{Input: n}, nil
	}
	for p.i < len(p.s) && strings.IndexByte("(),$", p.s[p.i]) < 0 && !isExprSpace(p.s[p.i]) {
		p.i++
	}
	word := p.s[start:p.i]
	if word == "" {
		if p.i < len(p.s) {
			return nil, fmt.Errorf("expected an operand at offset %d, found %q", p.i, p.s[p.i])
		}
		return nil, fmt.Errorf("unexpected end")
	}
	if p.i < len(p.s) && p.s[p.i] == '(' {
		arity := 0
		op, _ := OpNamed(word)
		if slices.Contains(UnaryOps, op) {
			arity = 1
		} else if slices.Contains(BinaryOps, op) {
			arity = 2
		} else {
			return nil, fmt.Errorf("%q is not an elementwise op", word)
		}
		p.i++
		e := &Expr{Op: op, Input: -1}
		for k := 0; k < arity; k++ {
			if k > 0 {
				p.space()
				if p.i >= len(p.s) || p.s[p.i] != ',' {
					return nil, fmt.Errorf("%s takes %s: expected ',' at offset %d", word, operands(arity), p.i)
				}
				p.i++
			}
			a, err := p.expr(depth + 1)
			if err != nil {
				return nil, err
			}
			e.Args = append(e.Args, a)
		}
		p.space()
		if p.i >= len(p.s) || p.s[p.i] != ')' {
			return nil, fmt.Errorf("%s takes %s: expected ')' at offset %d", word, operands(arity), p.i)
		}
		p.i++
		return e, nil
	}
	v, err := strconv.ParseFloat(word, 64)
	if err != nil {
		return nil, fmt.Errorf("bad constant %q at offset %d (want a number, $N or op(...))", word, start)
	}
	return &Expr{Input: -1, Const: v}, nil
}

func operands(n int) string {
	if n == 1 {
		return "1 operand"
	}
	return strconv.Itoa(n) + " operands"
}
