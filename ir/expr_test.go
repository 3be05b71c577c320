package ir

import (
	"math"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func TestParseExpr(t *testing.T) {
	in := func(i int) *Expr { return &Expr{Input: i} }
	c := func(v float64) *Expr { return &Expr{Input: -1, Const: v} }
	op := func(name Op, args ...*Expr) *Expr { return &Expr{Op: name, Input: -1, Args: args} }
	tests := []struct {
		src   string
		want  *Expr
		print string
		max   int
	}{
		{"$0", in(0), "$0", 0},
		{"  $12 ", in(12), "$12", 12},
		{"$007", in(7), "$7", 7},
		{"2.5", c(2.5), "2.5", -1},
		{"-0", c(math.Copysign(0, -1)), "-0", -1},
		{"1e300", c(1e300), "1e+300", -1},
		{"inf", c(math.Inf(1)), "+Inf", -1},
		{"-Inf", c(math.Inf(-1)), "-Inf", -1},
		{"mul(silu($0), $1)", op(OpMul, op(OpSilu, in(0)), in(1)), "mul(silu($0), $1)", 1},
		{"add( $0 ,\t$2\n)", op(OpAdd, in(0), in(2)), "add($0, $2)", 2},
		{"pow($1,-0.5)", op(OpPow, in(1), c(-0.5)), "pow($1, -0.5)", 1},
		{"neg(neg(neg($3)))", op(OpNeg, op(OpNeg, op(OpNeg, in(3)))), "neg(neg(neg($3)))", 3},
	}
	for _, tc := range tests {
		e, err := ParseExpr(tc.src)
		if err != nil {
			t.Errorf("ParseExpr(%q): %v", tc.src, err)
			continue
		}
		if d := cmp.Diff(tc.want, e, cmpopts.EquateNaNs()); d != "" {
			t.Errorf("ParseExpr(%q) (-want +got):\n%s", tc.src, d)
		}
		if e.String() != tc.print || e.MaxInput() != tc.max {
			t.Errorf("ParseExpr(%q): prints %q, max input %d; want %q, %d", tc.src, e.String(), e.MaxInput(), tc.print, tc.max)
		}
		if e.IsInput() == e.IsConst() && e.Op == OpNone {
			t.Errorf("%q: leaf is both or neither input and constant", tc.src)
		}
	}
}

func TestParseExprErrors(t *testing.T) {
	tests := []struct{ src, want string }{
		{"", `expr "": unexpected end`},
		{"   ", `expr "   ": unexpected end`},
		{"$", `expr "$": bad input reference "$" at offset 0`},
		{"$-1", `expr "$-1": bad input reference "$" at offset 0`},
		{"$99999", `expr "$99999": bad input reference "$99999" at offset 0`},
		{"$99999999999999999999999", `bad input reference`},
		{"frob($0)", `expr "frob($0)": "frob" is not an elementwise op`},
		{"softmax($0)", `"softmax" is not an elementwise op`},
		{"add($0)", `expr "add($0)": add takes 2 operands: expected ',' at offset 6`},
		{"neg($0, $1)", `expr "neg($0, $1)": neg takes 1 operand: expected ')' at offset 6`},
		{"add($0, $1", `add takes 2 operands: expected ')' at offset 10`},
		{"add(", `expr "add(": unexpected end`},
		{"add(,$0)", `expr "add(,$0)": expected an operand at offset 4, found ','`},
		{"x", `expr "x": bad constant "x" at offset 0 (want a number, $N or op(...))`},
		{"$0 $1", `expr "$0 $1": unexpected "$1" at offset 3`},
		{"$0)", `unexpected ")" at offset 2`},
		{"foo$0", `bad constant "foo" at offset 0`},
		{strings.Repeat("neg(", 100) + "$0" + strings.Repeat(")", 100), "nested too deeply"},
	}
	for _, tc := range tests {
		_, err := ParseExpr(tc.src)
		if err == nil {
			t.Errorf("ParseExpr(%q) succeeded", tc.src)
			continue
		}
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseExpr(%q): %v; want %q", tc.src, err, tc.want)
		}
	}
	// 64 levels are fine.
	if _, err := ParseExpr(strings.Repeat("neg(", 64) + "$0" + strings.Repeat(")", 64)); err != nil {
		t.Error(err)
	}
}
