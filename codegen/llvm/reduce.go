package llvm

import (
	"fmt"

	"github.com/llir/llvm/ir/enum"
	"github.com/llir/llvm/ir/value"

	"github.com/tapml/tapml/ir"
)

// The reductions follow runtime/cpu (llama2.c's run.c): sums run in order,
// in f32, and are not reassociated, so they match the reference closely.

func checkFloat(ts ...ir.Type) error {
	for _, t := range ts {
		if !t.DType.IsFloat() {
			return fmt.Errorf("this op computes on f32, f16 and bf16, got %s", t)
		}
	}
	return nil
}

// genNorm emits rms_norm and layer_norm over the last axis; an item is a row.
//
//	rms_norm:   ss = Σx², ss = 1/sqrt(ss/D + eps), out = w·(ss·x)
//	layer_norm: mean = Σx/D, var = Σ(x-mean)²/D, inv = 1/sqrt(var+eps),
//	            out = ((x-mean)·inv)·w + b
func genNorm(g *gen) error {
	if err := checkFloat(append(append([]ir.Type{}, g.in...), g.out...)...); err != nil {
		return err
	}
	g.bindAll()
	xs := sizes(g.in[0])
	d := int64(xs[len(xs)-1])
	rows := int64(0)
	if d > 0 {
		rows = prod(xs) / d
	}
	g.setItems(rows)
	eps := float32(g.attrs.Float("eps"))
	if g.faultOnce(FaultWrongConstant) {
		eps = eps*1000 + 1e-3
	}
	shift := g.faultOnce(FaultWrongIndex)
	ob := g.outBinding(0)
	rms := g.op == ir.OpRMSNorm
	g.loop(g.lo, g.hi, func(r value.Value) {
		base := g.muli(r, d)
		x := func(j value.Value) value.Value { return g.ldF(0, g.add(base, j)) }
		xr := func(j value.Value) value.Value { // the reduction's read
			if shift {
				j = g.wrapNext(j, d)
			}
			return x(j)
		}
		if rms {
			ss := g.loopAcc(c64(0), c64(d), []value.Value{cf(0)}, func(j value.Value, acc []value.Value) []value.Value {
				v := xr(j)
				return []value.Value{g.ov(g.fadd(acc[0], g.fmul(v, v)))}
			})[0]
			ss = g.fdiv(ss, cf(float32(d)))
			ss = g.fadd(ss, cf(eps))
			ss = g.fdiv(cf(1), g.sqrtf(ss))
			g.loop(c64(0), c64(d), func(j value.Value) {
				g.stF(ob, g.add(base, j), g.fmul(g.ldF(1, j), g.fmul(ss, x(j))))
			})
			return
		}
		sum := g.loopAcc(c64(0), c64(d), []value.Value{cf(0)}, func(j value.Value, acc []value.Value) []value.Value {
			return []value.Value{g.ov(g.fadd(acc[0], xr(j)))}
		})[0]
		mean := g.fdiv(sum, cf(float32(d)))
		vs := g.loopAcc(c64(0), c64(d), []value.Value{cf(0)}, func(j value.Value, acc []value.Value) []value.Value {
			dv := g.fsub(xr(j), mean)
			return []value.Value{g.ov(g.fadd(acc[0], g.fmul(dv, dv)))}
		})[0]
		inv := g.fdiv(cf(1), g.sqrtf(g.fadd(g.fdiv(vs, cf(float32(d))), cf(eps))))
		g.loop(c64(0), c64(d), func(j value.Value) {
			v := g.fmul(g.fmul(g.fsub(x(j), mean), inv), g.ldF(1, j))
			if len(g.in) == 3 {
				v = g.fadd(v, g.ldF(2, j))
			}
			g.stF(ob, g.add(base, j), v)
		})
	})
	g.finish()
	return nil
}

// axisLayout splits a shape around axis: outer × dim × inner.
func axisLayout(shape []int, axis int) (outer, dim, inner int64) {
	return prod(shape[:axis]), int64(shape[axis]), prod(shape[axis+1:])
}

// genSoftmax: an item is one line along the axis (outer × inner lines):
// subtract the max, exponentiate, sum in f32, divide.
func genSoftmax(g *gen) error {
	if err := checkFloat(g.in[0], g.out[0]); err != nil {
		return err
	}
	g.bindAll()
	xs := sizes(g.in[0])
	ax := ir.NormAxis(g.attrs.Int("axis"), len(xs))
	outer, dim, inner := axisLayout(xs, ax)
	g.setItems(outer * inner)
	if dim == 0 {
		g.setItems(0)
	}
	shift := g.faultOnce(FaultWrongIndex)
	g.loop(g.lo, g.hi, func(r value.Value) {
		base := g.add(g.muli(g.divi(r, inner), dim*inner), g.remi(r, inner))
		at := func(i value.Value) value.Value { return g.add(base, g.muli(i, inner)) }
		mx := g.loopAcc(c64(1), c64(dim), []value.Value{g.ldF(0, base)}, func(i value.Value, acc []value.Value) []value.Value {
			v := g.ldF(0, at(i))
			return []value.Value{g.sel(g.fcmp(enum.FPredOGT, v, acc[0]), v, acc[0])}
		})[0]
		exp := func(i value.Value) value.Value {
			if shift {
				i = g.wrapNext(i, dim)
			}
			return g.viaDouble("exp", g.fsub(g.ldF(0, at(i)), mx))
		}
		// An f32 output holds e^(x-max) between the passes; a narrower one
		// would round it, so then the exponentials are computed again.
		keep := g.out[0].DType == ir.F32
		sum := g.loopAcc(c64(0), c64(dim), []value.Value{cf(0)}, func(i value.Value, acc []value.Value) []value.Value {
			e := exp(i)
			if keep {
				g.stF(1, at(i), e)
			}
			return []value.Value{g.ov(g.fadd(acc[0], e))}
		})[0]
		g.loop(c64(0), c64(dim), func(i value.Value) {
			var e value.Value
			if keep {
				e = g.ldF(1, at(i))
			} else {
				e = exp(i)
			}
			g.stF(1, at(i), g.fdiv(e, sum))
		})
	})
	g.finish()
	return nil
}

// genArgmax: an item is one line along the axis; strictly greater replaces,
// so the first maximum wins and a NaN is chosen only when it comes first.
func genArgmax(g *gen) error {
	dt := g.in[0].DType
	if !dt.IsFloat() && dt != ir.I32 && dt != ir.I64 {
		return fmt.Errorf("argmax is not supported on %s (f32, f16, bf16, i32, i64 are)", dt)
	}
	g.bindAll()
	xs := sizes(g.in[0])
	ax := ir.NormAxis(g.attrs.Int("axis"), len(xs))
	outer, dim, inner := axisLayout(xs, ax)
	if outer*inner > 0 && dim == 0 {
		return fmt.Errorf("argmax over an empty axis")
	}
	g.setItems(outer * inner)
	first := int64(0)
	if g.faultOnce(FaultWrongIndex) {
		first = 1 % dim
	}
	g.loop(g.lo, g.hi, func(r value.Value) {
		base := g.add(g.muli(g.divi(r, inner), dim*inner), g.remi(r, inner))
		ld := func(i value.Value) value.Value {
			if dt.IsFloat() {
				return g.ldF(0, g.add(base, g.muli(i, inner)))
			}
			return g.ld(0, g.add(base, g.muli(i, inner)))
		}
		res := g.loopAcc(c64(first+1), c64(dim), []value.Value{ld(c64(first)), c64(first)}, func(i value.Value, acc []value.Value) []value.Value {
			v := ld(i)
			var gt value.Value
			if dt.IsFloat() {
				gt = g.fcmp(enum.FPredOGT, v, acc[0])
			} else {
				gt = g.icmp(enum.IPredSGT, v, acc[0])
			}
			return []value.Value{g.sel(gt, v, acc[0]), g.sel(gt, i, acc[1])}
		})
		g.st(1, r, g.cur.NewTrunc(res[1], i32t))
	})
	g.finish()
	return nil
}
