package llvm

import (
	"github.com/llir/llvm/ir/enum"
	"github.com/llir/llvm/ir/types"
	"github.com/llir/llvm/ir/value"

	"github.com/tapml/tapml/ir"
)

// genTopK: an item is one row along the axis. Pass j scans the row for the
// best element ranked below pass j-1's pick (NaN above numbers, then by
// value, then the lower index first), as the WGSL kernel does; the CPU
// reference sorts, and the two orders are the same.
func genTopK(g *gen) error {
	if err := checkFloat(g.in[0], g.out[0]); err != nil {
		return err
	}
	g.bindAll()
	xs := sizes(g.in[0])
	ax := ir.NormAxis(g.attrs.Int("axis"), len(xs))
	outer, n, inner := axisLayout(xs, ax)
	k := g.attrs.Int("k")
	g.setItems(outer * inner)
	first := int64(0)
	if g.faultOnce(FaultWrongIndex) {
		first = 1 % n
	}
	isNaN := func(v value.Value) value.Value { return g.fcmp(enum.FPredUNO, v, v) }
	not := func(b value.Value) value.Value { return g.cur.NewXor(b, trueI1) }
	above := func(a, b value.Value) value.Value { // a ranks above b by value
		return g.cur.NewOr(g.cur.NewAnd(isNaN(a), not(isNaN(b))), g.fcmp(enum.FPredOGT, a, b))
	}
	same := func(a, b value.Value) value.Value {
		return g.cur.NewOr(g.cur.NewAnd(isNaN(a), isNaN(b)), g.fcmp(enum.FPredOEQ, a, b))
	}
	g.loop(g.lo, g.hi, func(r value.Value) {
		base := g.add(g.muli(g.divi(r, inner), n*inner), g.remi(r, inner))
		obase := g.add(g.muli(g.divi(r, inner), k*inner), g.remi(r, inner))
		g.loopAcc(c64(0), c64(k), []value.Value{cf(0), c64(-1)}, func(j value.Value, prev []value.Value) []value.Value {
			pv, pi := prev[0], prev[1]
			best := g.loopAcc(c64(first), c64(n), []value.Value{cf(0), c64(-1)}, func(t value.Value, b []value.Value) []value.Value {
				v := g.ldF(0, g.add(base, g.muli(t, inner)))
				below := g.cur.NewOr(g.cur.NewOr(g.icmp(enum.IPredSLT, pi, c64(0)), above(pv, v)),
					g.cur.NewAnd(same(v, pv), g.icmp(enum.IPredSGT, t, pi)))
				take := g.cur.NewAnd(below, g.cur.NewOr(g.icmp(enum.IPredSLT, b[1], c64(0)), above(v, b[0])))
				return []value.Value{g.sel(take, v, b[0]), g.sel(take, t, b[1])}
			})
			o := g.add(obase, g.muli(j, inner))
			g.stF(1, o, best[0])
			g.st(2, o, g.cur.NewTrunc(best[1], i32t))
			return best
		})
	})
	g.finish()
	return nil
}

// genExpertMatmul: an item is one output (pair p, row o): the dot product
// of x's row with expert ids[p]'s row o, its products rounded and its adds
// reassociated so that LLVM vectorises it (as attention's scores). An id
// out of range returns StatusIDRange.
func genExpertMatmul(g *gen) error {
	if err := checkFloat(g.in[0], g.in[1], g.out[0]); err != nil {
		return err
	}
	g.bindAll()
	ws, ids := sizes(g.in[1]), sizes(g.in[2])
	e, n, kk := int64(ws[0]), int64(ws[1]), int64(ws[2])
	pairs, perToken := int64(ids[0]*ids[1]), int64(ids[1])
	if len(sizes(g.in[0])) == 3 {
		perToken = 1
	}
	g.setItems(pairs * n)
	shift := g.faultOnce(FaultWrongIndex)
	g.loop(g.lo, g.hi, func(it value.Value) {
		p, o := g.divi(it, n), g.remi(it, n)
		var id value.Value = g.cur.NewSExt(g.ld(2, p), types.I64)
		g.failIf(g.cur.NewOr(g.icmp(enum.IPredSLT, id, c64(0)), g.icmp(enum.IPredSGE, id, c64(e))), StatusIDRange)
		if shift {
			id = g.wrapNext(id, e)
		}
		xb := g.muli(g.divi(p, perToken), kk)
		wb := g.muli(g.add(g.muli(id, n), o), kk)
		dot := g.loopAcc(c64(0), c64(kk), []value.Value{cf(0)}, func(m value.Value, a []value.Value) []value.Value {
			prod := g.fmul(g.ldF(0, g.add(xb, m)), g.ldF(1, g.add(wb, m)))
			return []value.Value{g.ov(g.faddReassoc(a[0], prod))}
		})[0]
		g.stF(3, it, dot)
	})
	g.finish()
	return nil
}
