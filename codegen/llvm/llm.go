package llvm

import (
	"fmt"

	"github.com/llir/llvm/ir/enum"
	"github.com/llir/llvm/ir/types"
	"github.com/llir/llvm/ir/value"

	"github.com/tapml/tapml/codegen"
)

// maxScoreRows bounds the attention scores kept on the native stack
// (4 bytes each); longer caches recompute the scores instead.
const maxScoreRows = 1 << 16

// pos loads a pos binding (an i32 scalar) as an i64.
func (g *gen) pos(b int) value.Value {
	return g.cur.NewSExt(g.ld(b, c64(0)), types.I64)
}

// genRope: an item is one row s of x[S, H, Dh]. For each pair i, the angle
// p·freq_i (p = pos+s, f32) is computed once, its cos and sin in double and
// rounded to f32, times the attention factor, and applied to every head.
// freq_i = 1/powf(theta, 2i/dims) is computed here exactly as the
// reference does and baked, or read from the row of the freqs input (a
// third input) for the length pos+S the call reaches.
func genRope(g *gen) error {
	if err := checkFloat(g.in[0], g.out[0]); err != nil {
		return err
	}
	g.bindAll()
	out := len(g.in) // the output's binding
	xs := sizes(g.in[0])
	s, h, dh := int64(xs[0]), int64(xs[1]), int64(xs[2])
	rr := g.ropeRotation(s, dh, 1)
	g.setItems(s)
	if s*h*dh == 0 {
		g.setItems(0)
	}
	g.loop(g.lo, g.hi, func(r value.Value) {
		base := g.muli(r, h*dh)
		g.rotateRow(rr, r, h, 0, out, base, base)
	})
	g.finish()
	return nil
}

// genKVWrite copies new[S, KH, Dh] into rows pos..pos+S-1 of the cache, in
// place: binding 0 is the cache (ReadWrite: input 0 and output 0), 1 is new,
// 2 is pos. An item is one row of new. Rows that do not fit return
// StatusPosRange before anything is written.
func genKVWrite(g *gen) error {
	cache, nw := g.in[0], g.in[1]
	if g.out[0].DType != cache.DType {
		return fmt.Errorf("output is %s, the cache %s", g.out[0].DType, cache.DType)
	}
	g.bind("cache", codegen.ReadWrite, cache, 0, 0)
	g.bind("in1", codegen.Read, nw, 1, -1)
	g.bind("in2", codegen.Read, g.in[2], 2, -1)
	cs, ns := sizes(cache), sizes(nw)
	t, s, row := int64(cs[0]), int64(ns[0]), int64(cs[1]*cs[2])
	g.setItems(s)
	pos := g.pos(2)
	g.failIf(g.cur.NewOr(g.icmp(enum.IPredSLT, pos, c64(0)), g.icmp(enum.IPredSGT, g.addi(pos, s), c64(t))), StatusPosRange)
	shift := g.faultOnce(FaultWrongIndex)
	g.loop(g.lo, g.hi, func(r value.Value) {
		dst := g.add(pos, r)
		if shift {
			dst = g.wrapNext(dst, t)
		}
		db, sb := g.muli(dst, row), g.muli(r, row)
		g.loop(c64(0), c64(row), func(j value.Value) {
			g.st(0, g.add(db, j), g.ld(1, g.add(sb, j)))
		})
	})
	g.finish()
	return nil
}

// genAttention: an item is one (query row, head) pair, as in the reference:
// score[t] = (q·k[t])·scale in f32 (the dot product's adds reassociated, so
// that LLVM vectorises it; the products are rounded as in the reference),
// soft-capped with tanh in double when softcap > 0, for t ≤ pos+s (causal)
// or t < pos+S, from t > pos+s-window with a window, softmax,
// out = Σ_t p[t]·v[t] accumulated in order of t.
// Scores live on the stack (a [T x float] alloca) up to maxScoreRows rows;
// beyond that they are recomputed in each pass.
func genAttention(g *gen) error {
	if err := checkFloat(g.in[0], g.in[1], g.in[2], g.out[0]); err != nil {
		return err
	}
	g.bindAll()
	qs, ks := sizes(g.in[0]), sizes(g.in[1])
	s, h, dh := int64(qs[0]), int64(qs[1]), int64(qs[2])
	t, kh := int64(ks[0]), int64(ks[1])
	group := h / kh
	scale := float32(g.attrs.Float("scale"))
	if g.faultOnce(FaultWrongConstant) {
		scale *= 1.1
	}
	causal := g.attrs.Bool("causal")
	softcap := float32(g.attrs.Float("softcap"))
	window := g.attrs.Int("window")
	shift := g.faultOnce(FaultWrongIndex)
	g.setItems(s * h)
	if s*h*dh == 0 {
		g.setItems(0)
	}
	pos := g.pos(3)
	g.failIf(g.cur.NewOr(g.icmp(enum.IPredSLT, pos, c64(0)), g.icmp(enum.IPredSGT, g.addi(pos, s), c64(t))), StatusPosRange)
	stored := t <= maxScoreRows
	var att, acc value.Value
	if stored && t > 0 {
		a := g.entry.NewAlloca(types.NewArray(uint64(t), types.Float))
		a.Align = 16
		att = g.entry.NewBitCast(a, types.NewPointer(types.Float))
	}
	if dh > 0 {
		a := g.entry.NewAlloca(types.NewArray(uint64(dh), types.Float))
		a.Align = 16
		acc = g.entry.NewBitCast(a, types.NewPointer(types.Float))
	}
	slot := func(p value.Value, i value.Value) value.Value {
		e := g.cur.NewGetElementPtr(types.Float, p, i)
		e.InBounds = true
		return e
	}
	g.loop(g.lo, g.hi, func(task value.Value) {
		r, hh := g.divi(task, h), g.remi(task, h)
		kvh := g.divi(hh, group)
		var n value.Value = g.addi(pos, s)
		if causal {
			n = g.add(g.addi(pos, 1), r)
		}
		var first value.Value = c64(0) // the first row the window keeps
		if window > 0 {
			f := g.add(g.addi(pos, 1-window), r)
			first = g.sel(g.icmp(enum.IPredSLT, f, c64(0)), c64(0), f)
		}
		qBase := g.muli(task, dh)
		score := func(j value.Value) value.Value {
			kj := j
			if shift {
				kj = g.wrapNext(j, t)
			}
			kBase := g.muli(g.add(g.muli(kj, kh), kvh), dh)
			dot := g.loopAcc(c64(0), c64(dh), []value.Value{cf(0)}, func(i value.Value, a []value.Value) []value.Value {
				p := g.fmul(g.ldF(0, g.add(qBase, i)), g.ldF(1, g.add(kBase, i)))
				return []value.Value{g.ov(g.faddReassoc(a[0], p))}
			})[0]
			sc := g.fmul(dot, cf(scale))
			if softcap > 0 {
				sc = g.fmul(g.viaDouble("tanh", g.fdiv(sc, cf(softcap))), cf(softcap))
			}
			return sc
		}
		if stored {
			g.loop(first, n, func(j value.Value) {
				g.cur.NewStore(score(j), slot(att, j))
			})
		}
		sc := func(j value.Value) value.Value {
			if stored {
				return g.cur.NewLoad(types.Float, slot(att, j))
			}
			return score(j)
		}
		mx := g.loopAcc(g.addi(first, 1), n, []value.Value{sc(first)}, func(j value.Value, a []value.Value) []value.Value {
			v := sc(j)
			return []value.Value{g.sel(g.fcmp(enum.FPredOGT, v, a[0]), v, a[0])}
		})[0]
		sum := g.loopAcc(first, n, []value.Value{cf(0)}, func(j value.Value, a []value.Value) []value.Value {
			e := g.viaDouble("exp", g.fsub(sc(j), mx))
			if stored {
				g.cur.NewStore(e, slot(att, j))
			}
			return []value.Value{g.ov(g.fadd(a[0], e))}
		})[0]
		g.loop(c64(0), c64(dh), func(i value.Value) {
			g.cur.NewStore(cf(0), slot(acc, i))
		})
		g.loop(first, n, func(j value.Value) {
			var e value.Value
			if stored {
				e = g.cur.NewLoad(types.Float, slot(att, j))
			} else {
				e = g.viaDouble("exp", g.fsub(score(j), mx))
			}
			p := g.fdiv(e, sum)
			vBase := g.muli(g.add(g.muli(j, kh), kvh), dh)
			g.loop(c64(0), c64(dh), func(i value.Value) {
				a := slot(acc, i)
				v := g.fadd(g.cur.NewLoad(types.Float, a), g.fmul(p, g.ldF(2, g.add(vBase, i))))
				g.cur.NewStore(g.ov(v), a)
			})
		})
		g.loop(c64(0), c64(dh), func(i value.Value) {
			g.stF(4, g.add(qBase, i), g.cur.NewLoad(types.Float, slot(acc, i)))
		})
	})
	g.finish()
	return nil
}
