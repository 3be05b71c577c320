package exprfuzz_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/tapml/tapml/ir"
)

func FuzzParseExpr(f *testing.F) {
	for _, s := range []string{
		"$0", "mul(silu($0), $1)", "add($0, -0.5)", "pow($1, 1e-300)", "neg(nan)", "maximum(inf, $3)",
		"gelu(tanh(sigmoid(relu(abs(rsqrt(sqrt(log(exp(neg($0))))))))))", "sub(div($0,$1),minimum($2,2))",
		"add($0)", "$", "", strings.Repeat("neg(", 70) + "$0" + strings.Repeat(")", 70),
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, src string) {
		e, err := ir.ParseExpr(src)
		if err != nil {
			return
		}
		s := e.String()
		e2, err := ir.ParseExpr(s)
		if err != nil {
			t.Fatalf("%q prints as %q, which does not parse: %v", src, s, err)
		}
		if s2 := e2.String(); s2 != s {
			t.Fatalf("%q prints as %q, then as %q", src, s, s2)
		}
		if d := cmp.Diff(e, e2, cmpopts.EquateNaNs()); d != "" {
			t.Fatalf("%q: trees differ after printing:\n%s", src, d)
		}
		if e.MaxInput() > 1<<16 {
			t.Fatalf("%q: input %d", src, e.MaxInput())
		}
	})
}
