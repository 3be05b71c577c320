package llvm

import (
	"fmt"

	"github.com/llir/llvm/ir/constant"
	"github.com/llir/llvm/ir/enum"
	"github.com/llir/llvm/ir/value"

	"github.com/tapml/tapml/codegen"
)

// The recurrent ops: an item is one channel, which runs the rows of the
// call in order with every operation rounded as the CPU reference rounds
// it (no reassociation, no contraction), and updates its part of the state
// (binding 0, ReadWrite: input 0 and output 0) in place.

var trueI1 = constant.True

// bindState binds input 0 as the state updated in place, the other inputs,
// then the other outputs.
func (g *gen) bindState() {
	g.bind("state", codegen.ReadWrite, g.in[0], 0, 0)
	for i := 1; i < len(g.in); i++ {
		g.bind(fmt.Sprintf("in%d", i), codegen.Read, g.in[i], i, -1)
	}
	for i := 1; i < len(g.out); i++ {
		g.bind(fmt.Sprintf("out%d", i), codegen.Write, g.out[i], -1, i)
	}
}

// genTokenShift: an item is one output row: row 0 from prev, row s from
// x's row s-1.
func genTokenShift(g *gen) error {
	g.bindAll()
	xs := sizes(g.in[0])
	s, c := int64(xs[0]), int64(xs[1])
	g.setItems(s)
	back := int64(1)
	if g.faultOnce(FaultWrongIndex) {
		back = 0
	}
	g.loop(g.lo, g.hi, func(r value.Value) {
		first := g.icmp(enum.IPredEQ, r, c64(0))
		src := g.muli(g.sel(first, c64(0), g.sub(r, c64(back))), c)
		g.loop(c64(0), c64(c), func(j value.Value) {
			v := g.sel(first, g.ld(1, j), g.ld(0, g.add(src, j)))
			g.st(2, g.add(g.muli(r, c), j), v)
		})
	})
	g.finish()
	return nil
}

// genCausalConv1D: channel c sums y[s] = Σ_j w[c, j]·u[s+j] in order of j
// (u: the K-1 state rows, then x's), then moves u's last K-1 rows into
// the state.
func genCausalConv1D(g *gen) error {
	if err := checkFloat(g.in...); err != nil {
		return err
	}
	g.bindState()
	xs, ws := sizes(g.in[1]), sizes(g.in[2])
	s, c, k := int64(xs[0]), int64(xs[1]), int64(ws[1])
	g.setItems(c)
	shift := g.faultOnce(FaultWrongIndex)
	g.loop(g.lo, g.hi, func(ch value.Value) {
		u := func(row value.Value) value.Value { // row of the state, then of x
			if k == 1 { // no state rows
				return g.ldF(1, g.add(g.muli(row, c), ch))
			}
			inState := g.icmp(enum.IPredSLT, row, c64(k-1))
			st := g.ldF(0, g.add(g.muli(g.sel(inState, row, c64(0)), c), ch))
			x := g.ldF(1, g.add(g.muli(g.sel(inState, c64(0), g.sub(row, c64(k-1))), c), ch))
			return g.sel(inState, st, x)
		}
		g.loop(c64(0), c64(s), func(r value.Value) {
			acc := g.loopAcc(c64(0), c64(k), []value.Value{cf(0)}, func(j value.Value, a []value.Value) []value.Value {
				tap := j
				if shift {
					tap = g.wrapNext(j, k)
				}
				w := g.ldF(2, g.add(g.muli(ch, k), tap))
				return []value.Value{g.ov(g.fadd(a[0], g.fmul(w, u(g.add(r, j)))))}
			})[0]
			g.stF(3, g.add(g.muli(r, c), ch), acc)
		})
		// Ascending rows read rows at or after their own.
		g.loop(c64(0), c64(k-1), func(r value.Value) {
			g.stF(0, g.add(g.muli(r, c), ch), u(g.addi(r, s)))
		})
	})
	g.finish()
	return nil
}

// genWKV: channel c runs RWKV's WKV recurrence in transformers' order of
// operations; a channel with b = 0 starts from p = -1e38 (no history).
func genWKV(g *gen) error {
	if err := checkFloat(g.in...); err != nil {
		return err
	}
	g.bindState()
	ks := sizes(g.in[1])
	s, c := int64(ks[0]), int64(ks[1])
	if s == 0 {
		g.setItems(0)
		g.finish()
		return nil
	}
	g.setItems(c)
	shift := g.faultOnce(FaultWrongIndex)
	maxNaN := func(a, b value.Value) value.Value { // torch.maximum: NaN wins
		pick := g.sel(g.fcmp(enum.FPredOGT, b, a), b, a)
		return g.sel(g.fcmp(enum.FPredUNO, a, a), a, g.sel(g.fcmp(enum.FPredUNO, b, b), b, pick))
	}
	exp := func(x value.Value) value.Value { return g.viaDouble("exp", x) }
	g.loop(g.lo, g.hi, func(ch value.Value) {
		a0, b0, p0 := g.ldF(0, ch), g.ldF(0, g.addi(ch, c)), g.ldF(0, g.addi(ch, 2*c))
		p0 = g.sel(g.fcmp(enum.FPredOEQ, b0, cf(0)), cf(-1e38), p0)
		w, u := g.ldF(3, ch), g.ldF(4, ch)
		end := g.loopAcc(c64(0), c64(s), []value.Value{a0, b0, p0}, func(r value.Value, st []value.Value) []value.Value {
			a, b, p := st[0], st[1], st[2]
			kr := r
			if shift {
				kr = g.wrapNext(r, s)
			}
			at := g.add(g.muli(r, c), ch)
			k, v := g.ldF(1, g.add(g.muli(kr, c), ch)), g.ldF(2, at)
			uk := g.fadd(u, k)
			q := maxNaN(p, uk)
			e1, e2 := exp(g.fsub(p, q)), exp(g.fsub(uk, q))
			num := g.fadd(g.fmul(e1, a), g.fmul(e2, v))
			den := g.fadd(g.fmul(e1, b), e2)
			g.stF(5, at, g.ov(g.fdiv(num, den)))
			pw := g.fadd(p, w)
			q = maxNaN(pw, k)
			e1, e2 = exp(g.fsub(pw, q)), exp(g.fsub(k, q))
			return []value.Value{g.ov(g.fadd(g.fmul(e1, a), g.fmul(e2, v))), g.ov(g.fadd(g.fmul(e1, b), e2)), q}
		})
		g.stF(0, ch, end[0])
		g.stF(0, g.addi(ch, c), end[1])
		g.stF(0, g.addi(ch, 2*c), end[2])
	})
	g.finish()
	return nil
}

// genSelectiveScan: channel c keeps h[c, :] in the state and runs the rows:
// h = exp(A·dt)·h + (dt·B)·x, y = Σ_n h·Cm in order of n.
func genSelectiveScan(g *gen) error {
	if err := checkFloat(g.in...); err != nil {
		return err
	}
	g.bindState()
	xs, as := sizes(g.in[1]), sizes(g.in[3])
	s, c, n := int64(xs[0]), int64(xs[1]), int64(as[1])
	g.setItems(c)
	shift := g.faultOnce(FaultWrongIndex)
	g.loop(g.lo, g.hi, func(ch value.Value) {
		hb := g.muli(ch, n)
		g.loop(c64(0), c64(s), func(r value.Value) {
			at := g.add(g.muli(r, c), ch)
			dt, x := g.ldF(2, at), g.ldF(1, at)
			y := g.loopAcc(c64(0), c64(n), []value.Value{cf(0)}, func(j value.Value, acc []value.Value) []value.Value {
				bj := j
				if shift {
					bj = g.wrapNext(j, n)
				}
				da := g.viaDouble("exp", g.fmul(g.ldF(3, g.add(hb, j)), dt))
				db := g.fmul(g.fmul(dt, g.ldF(4, g.add(g.muli(r, n), bj))), x)
				h := g.ov(g.fadd(g.fmul(da, g.ldF(0, g.add(hb, j))), db))
				g.stF(0, g.add(hb, j), h)
				return []value.Value{g.ov(g.fadd(acc[0], g.fmul(h, g.ldF(5, g.add(g.muli(r, n), j)))))}
			})[0]
			g.stF(6, at, y)
		})
	})
	g.finish()
	return nil
}
