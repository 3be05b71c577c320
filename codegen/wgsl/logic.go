package wgsl

import (
	"fmt"

	"github.com/tapml/tapml/codegen"
	"github.com/tapml/tapml/ir"
)

func init() {
	generators[ir.OpCompare] = genCompare
	generators[ir.OpWhere] = genWhere
}

// wgslComparisons are compare's comparisons as WGSL operators.
var wgslComparisons = map[string]string{"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}

// genCompare writes 1i where in0 cmp in1 holds, else 0i (broadcasting).
func genCompare(g *gen) (*codegen.Kernel, error) {
	op, ok := wgslComparisons[g.attrs.String("cmp")]
	if !ok {
		return nil, fmt.Errorf("unknown comparison %q", g.attrs.String("cmp"))
	}
	g.bindAll()
	return g.elementwise(numel(g.out[0]), func() {
		offs := g.inputOffsets()
		g.p("  out0[i] = select(0i, 1i, in0[%s] %s in1[%s]);", offs[0], op, offs[1])
	}), nil
}

// genWhere takes in1 where in0 is nonzero, else in2 (broadcasting).
func genWhere(g *gen) (*codegen.Kernel, error) {
	g.bindAll()
	return g.elementwise(numel(g.out[0]), func() {
		offs := g.inputOffsets()
		g.p("  out0[i] = select(in2[%s], in1[%s], in0[%s] != 0i);", offs[2], offs[1], offs[0])
	}), nil
}
