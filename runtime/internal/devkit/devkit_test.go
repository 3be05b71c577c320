package devkit

import (
	"testing"

	"github.com/tapml/tapml/ir"
)

// A node is compiled ahead only when every declared type is static: iota
// takes a static position but its length is the symbolic prompt length.
func TestStaticInputs(t *testing.T) {
	m := ir.NewModule("m")
	b := ir.NewFunction(m, "f")
	pos := b.Param("pos", ir.T(ir.I32, ir.S()))
	x := b.Param("x", ir.T(ir.F32, ir.S(4)))
	iota := b.Iota(pos, ir.Shape{ir.Sym("seq")})
	neg := b.Unary(ir.OpNeg, x)
	b.Return(iota, neg)
	if err := b.Err(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		node   *ir.Node
		static bool
	}{{iota.Def, false}, {neg.Def, true}} {
		in, static := StaticInputs(c.node)
		if static != c.static || len(in) != 1 {
			t.Errorf("%s: static %v with %d input types, want %v", c.node, static, len(in), c.static)
		}
	}
}
