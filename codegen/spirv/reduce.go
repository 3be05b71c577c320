package spirv

import (
	"fmt"

	"github.com/tapml/tapml/ir"
)

// Row reductions (rms_norm, layer_norm, softmax, argmax) run one workgroup
// per row: each invocation folds a strided part of the row, then a tree in
// workgroup memory combines the partial results. Rows beyond the last (the
// slack of a folded grid) compute on the last row and write nothing, so
// every invocation reaches every barrier.

// rowThreads picks the workgroup size of a row reduction of length d.
func (k *kern) rowThreads(d int) int { return k.threads(min(max(d, 1), 256)) }

// sumRow returns Σ f(j) over j = tid, tid+wgx, ... < d, per invocation.
func (k *kern) sumRow(tid Value, d, wgx int, f func(j Value) Value) Value {
	b := k.b
	acc := b.NewVar(k.m.F32, b.F(0))
	b.For(tid, b.U(d), wgx, func(j Value) {
		b.Set(acc, k.ov(b.Add(b.Get(acc), f(j))))
	})
	return b.Get(acc)
}

// genNorm generates rms_norm and layer_norm over the last axis.
func genNorm(k *kern) error {
	k.bindAll()
	b := k.b
	shape := sizes(k.in[0])
	d := shape[len(shape)-1]
	rows := prod(shape[:len(shape)-1])
	if d == 0 {
		rows = 0
	}
	eps := float32(k.attrs.Float("eps"))
	if k.faultIs(FaultWrongConstant) {
		eps = eps*1000 + 1e-3
	}
	wrongIndex := k.faultIs(FaultWrongIndex)
	wgx := k.rowThreads(d)
	red := k.m.Workgroup(k.m.F32, wgx, "red")
	x, out := k.ins[0], k.outs[0]
	add := func(a, c Value) Value { return k.ov(b.Add(a, c)) }
	k.rowwise(rows, wgx, func(row, valid, tid Value) {
		base := b.MulU(row, d)
		// xr reads x[row, j] in the reductions (one further under the
		// wrong_index fault).
		xr := func(j Value) Value {
			if wrongIndex {
				j = b.MinU(b.AddU(j, 1), max(d-1, 0))
			}
			return b.Load(x, b.Add(base, j))
		}
		fd := b.F(float32(d))
		if k.op == ir.OpRMSNorm {
			ss := k.sumRow(tid, d, wgx, func(j Value) Value { v := xr(j); return b.Mul(v, v) })
			ss = k.reduce(red, tid, wgx, ss, add)
			inv := b.Div(b.F(1), b.Ext(glslSqrt, b.Add(b.Div(ss, fd), b.F(eps))))
			b.For(tid, b.U(d), wgx, func(j Value) {
				b.If(valid, func() {
					v := b.Load(x, b.Add(base, j))
					b.Store(out, b.Add(base, j), b.Mul(b.Load(k.ins[1], j), b.Mul(inv, v)))
				})
			})
			return
		}
		sum := k.reduce(red, tid, wgx, k.sumRow(tid, d, wgx, xr), add)
		mean := b.Div(sum, fd)
		vs := k.sumRow(tid, d, wgx, func(j Value) Value { dv := b.Sub(xr(j), mean); return b.Mul(dv, dv) })
		vs = k.reduce(red, tid, wgx, vs, add)
		inv := b.Div(b.F(1), b.Ext(glslSqrt, b.Add(b.Div(vs, fd), b.F(eps))))
		b.For(tid, b.U(d), wgx, func(j Value) {
			b.If(valid, func() {
				v := b.Load(x, b.Add(base, j))
				y := b.Mul(b.Mul(b.Sub(v, mean), inv), b.Load(k.ins[1], j))
				b.Store(out, b.Add(base, j), b.Add(y, b.Load(k.ins[2], j)))
			})
		})
	})
	return nil
}

// axisRows describes a reduction along axis: rows = outer·inner rows of
// dim elements each, element j of row r at base(r) + j·inner.
func axisRows(shape []int, axis int64) (rows, dim, inner int) {
	a := ir.NormAxis(axis, len(shape))
	outer, dim, inner := outerInner(shape, a)
	return outer * inner, dim, inner
}

// rowBase is the offset of element 0 of row r along an axis.
func (k *kern) rowBase(row Value, dim, inner int) Value {
	b := k.b
	return b.Add(b.MulU(b.DivU(row, inner), dim*inner), b.RemU(row, inner))
}

// genSoftmax generates softmax along any axis (run.c's: subtract the max,
// exponentiate, sum, divide).
func genSoftmax(k *kern) error {
	k.bindAll()
	b := k.b
	rows, dim, inner := axisRows(sizes(k.in[0]), k.attrs.Int("axis"))
	if dim == 0 {
		rows = 0
	}
	wrongIndex := k.faultIs(FaultWrongIndex)
	wgx := k.rowThreads(dim)
	red := k.m.Workgroup(k.m.F32, wgx, "red")
	x, out := k.ins[0], k.outs[0]
	k.rowwise(rows, wgx, func(row, valid, tid Value) {
		base := k.rowBase(row, dim, inner)
		at := func(j Value) Value { return b.Add(base, b.MulU(j, inner)) }
		xr := func(j Value) Value {
			if wrongIndex {
				j = b.MinU(b.AddU(j, 1), max(dim-1, 0))
			}
			return b.Load(x, at(j))
		}
		// The max starts at element 0, so a row of -inf gives NaN as the
		// reference does, and NaN elements are skipped unless first.
		mx := b.NewVar(k.m.F32, xr(b.U(0)))
		b.For(tid, b.U(dim), wgx, func(j Value) {
			v := xr(j)
			b.Set(mx, b.Select(b.Gt(v, b.Get(mx)), v, b.Get(mx)))
		})
		m := k.reduce(red, tid, wgx, b.Get(mx), func(a, c Value) Value { return b.Select(b.Gt(c, a), c, a) })
		s := k.sumRow(tid, dim, wgx, func(j Value) Value { return b.Ext(glslExp, b.Sub(xr(j), m)) })
		s = k.reduce(red, tid, wgx, s, func(a, c Value) Value { return k.ov(b.Add(a, c)) })
		b.For(tid, b.U(dim), wgx, func(j Value) {
			b.If(valid, func() {
				e := b.Ext(glslExp, b.Sub(b.Load(x, at(j)), m))
				b.Store(out, at(j), b.Div(e, s))
			})
		})
	})
	return nil
}

// genArgmax generates argmax along any axis: the first maximum wins (a
// strictly greater element replaces), as in run.c's sample_argmax.
func genArgmax(k *kern) error {
	k.bindAll()
	b := k.b
	rows, dim, inner := axisRows(sizes(k.in[0]), k.attrs.Int("axis"))
	if dim == 0 && rows > 0 {
		return fmt.Errorf("argmax over an empty axis")
	}
	wrongIndex := k.faultIs(FaultWrongIndex)
	start := 0
	if wrongIndex {
		start = min(1, dim-1)
	}
	wgx := k.rowThreads(dim)
	et := k.elemType(k.in[0].DType)
	redV := k.m.Workgroup(et, wgx, "redv")
	redI := k.m.Workgroup(k.m.U32, wgx, "redi")
	x, out := k.ins[0], k.outs[0]
	k.rowwise(rows, wgx, func(row, valid, tid Value) {
		base := k.rowBase(row, dim, inner)
		at := func(j Value) Value { return b.Add(base, b.MulU(j, inner)) }
		best := b.NewVar(et, b.Load(x, at(b.U(start))))
		bi := b.NewVar(k.m.U32, b.U(start))
		b.For(tid, b.U(dim), wgx, func(j Value) {
			v := b.Load(x, at(j))
			better := b.Gt(v, b.Get(best))
			if start > 0 {
				better = b.And(b.Ge(j, b.U(start)), better)
			}
			b.If(better, func() {
				b.Set(best, v)
				b.Set(bi, j)
			})
		})
		r := k.reduceN([]Array{redV, redI}, tid, wgx, []Value{b.Get(best), b.Get(bi)}, func(a, c []Value) []Value {
			take := b.Or(b.Gt(c[0], a[0]), b.And(b.Eq(c[0], a[0]), b.Lt(c[1], a[1])))
			return []Value{b.Select(take, c[0], a[0]), b.Select(take, c[1], a[1])}
		})
		b.If(b.And(valid, b.Eq(tid, b.U(0))), func() {
			b.Store(out, row, b.Bitcast(k.m.I32, r[1]))
		})
	})
	return nil
}
