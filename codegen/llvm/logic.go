package llvm

import (
	"fmt"

	"github.com/llir/llvm/ir/enum"
	"github.com/llir/llvm/ir/types"
	"github.com/llir/llvm/ir/value"

	"github.com/tapml/tapml/ir"
)

func init() {
	generators[ir.OpCompare] = genCompare
	generators[ir.OpWhere] = genWhere
}

// cmpOperator is the WGSL operator of each of compare's comparisons, whose
// predicates (floatPreds, intPreds: ordered for floats, false with a NaN,
// but ne, true with a NaN, as IEEE 754 has it) the formulas share.
var cmpOperator = map[string]string{"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}

// genCompare writes 1 where in0 cmp in1 holds, else 0, as i32.
func genCompare(g *gen) error {
	cmp := g.attrs.String("cmp")
	dt := g.in[0].DType
	isInt := dt == ir.I32 || dt == ir.I64
	if _, ok := intPreds[cmpOperator[cmp]]; !ok {
		return fmt.Errorf("unknown comparison %q", cmp)
	}
	if !isInt && !dt.IsFloat() {
		return fmt.Errorf("compare of %s is not supported", dt)
	}
	g.bindAll()
	b := planBroadcast(sizes(g.out[0]), [][]int{sizes(g.in[0]), sizes(g.in[1])})
	ob := g.outBinding(0)
	g.broadcastLoop(b, func(idx []value.Value, o value.Value) {
		var holds value.Value
		if isInt {
			holds = g.icmp(intPreds[cmpOperator[cmp]], g.ld(0, idx[0]), g.ld(1, idx[1]))
		} else {
			holds = g.cur.NewFCmp(floatPreds[cmpOperator[cmp]], g.ldF(0, idx[0]), g.ldF(1, idx[1]))
		}
		g.st(ob, o, g.cur.NewZExt(holds, types.I32))
	})
	g.finish()
	return nil
}

// genWhere copies in1's element where in0 is nonzero, else in2's.
func genWhere(g *gen) error {
	g.bindAll()
	shapes := make([][]int, len(g.in))
	for i, t := range g.in {
		shapes[i] = sizes(t)
	}
	b := planBroadcast(sizes(g.out[0]), shapes)
	ob := g.outBinding(0)
	g.broadcastLoop(b, func(idx []value.Value, o value.Value) {
		c := g.icmp(enum.IPredNE, g.ld(0, idx[0]), c32(0))
		g.st(ob, o, g.sel(c, g.ld(1, idx[1]), g.ld(2, idx[2])))
	})
	g.finish()
	return nil
}
