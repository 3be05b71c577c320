package spirv

import (
	"fmt"
	"math"
	"slices"

	"github.com/tapml/tapml/ir"
)

// Kernels of the vision and general ONNX ops: iota, conv2d,
// conv_transpose2d, pool2d, resize and the reductions over axes. One
// invocation per output element; the reductions and convolutions fold
// their elements in the order the CPU reference does (row-major over the
// reduced elements; (c, i, j) for the convolutions).

func init() {
	for op, fn := range map[ir.Op]generator{
		ir.OpIota:            genIota,
		ir.OpConv2D:          genConv,
		ir.OpConvTranspose2D: genConv,
		ir.OpPool2D:          genPool,
		ir.OpResize:          genResize,
		ir.OpReduceSum:       genReduce,
		ir.OpReduceMean:      genReduce,
		ir.OpReduceMax:       genReduce,
	} {
		generators[op] = fn
	}
}

// negInf returns -inf made at run time (naga rejects infinite constants).
func (k *kern) negInf() Value { return k.b.Bitcast(k.m.F32, k.b.U(0xff800000)) }

// genIota: start + the index along axis.
func genIota(k *kern) error {
	k.bindAll()
	b := k.b
	shape := sizes(k.out[0])
	axis := normAxis(k.attrs.Int("axis"), len(shape))
	_, dim, inner := outerInner(shape, axis)
	n := numel(k.out[0])
	k.elementwise(n, func(i Value) {
		j := b.RemU(b.DivU(i, inner), max(dim, 1))
		if k.faultIs(FaultWrongIndex) {
			j = b.AddU(j, 1)
		}
		v := b.Add(b.Load(k.ins[0], b.U(0)), b.Bitcast(k.m.I32, j))
		b.Store(k.outs[0], i, v)
	})
	return nil
}

// normAxis maps a possibly negative axis into [0, rank).
func normAxis(axis int64, rank int) int {
	if axis < 0 {
		axis += int64(rank)
	}
	return int(axis)
}

// spatial holds the checked attributes of conv2d, conv_transpose2d and
// pool2d ([h, w] strides and dilations; [top, left, bottom, right] pads).
type spatial struct {
	sh, sw, dh, dw           int
	top, left, bottom, right int
}

func (k *kern) spatial() (spatial, error) {
	st, dl, pd := k.attrs.Ints("strides"), k.attrs.Ints("dilations"), k.attrs.Ints("pads")
	if len(st) != 2 || len(dl) != 2 || len(pd) != 4 {
		return spatial{}, fmt.Errorf("strides %v, dilations %v, pads %v: want 2, 2 and 4 values", st, dl, pd)
	}
	return spatial{sh: int(st[0]), sw: int(st[1]), dh: int(dl[0]), dw: int(dl[1]),
		top: int(pd[0]), left: int(pd[1]), bottom: int(pd[2]), right: int(pd[3])}, nil
}

// genConv generates conv2d and conv_transpose2d: out[n, o, y, x] = Σ over
// the channels c of o's group and taps (i, j), in that order, of x at the
// tap's input pixel times the weight, plus the bias after the sum.
func genConv(k *kern) error {
	sp, err := k.spatial()
	if err != nil {
		return err
	}
	k.bindAll()
	b := k.b
	xs, ws, os := sizes(k.in[0]), sizes(k.in[1]), sizes(k.out[0])
	c, h, w := xs[1], xs[2], xs[3]
	o, ho, wo := os[1], os[2], os[3]
	kh, kw := ws[2], ws[3]
	groups := int(k.attrs.Int("groups"))
	cg, og := c/groups, o/groups
	transpose := k.op == ir.OpConvTranspose2D
	wrong := k.faultIs(FaultWrongIndex)
	X, W, O := k.ins[0], k.ins[1], k.outs[0]
	k.elementwise(numel(k.out[0]), func(idx Value) {
		xo := b.RemU(idx, wo)
		yo := b.RemU(b.DivU(idx, wo), ho)
		oc := b.RemU(b.DivU(idx, wo*ho), o)
		n := b.DivU(idx, wo*ho*o)
		gi := b.DivU(oc, og)
		ol := b.RemU(oc, og)
		si := func(v Value) Value { return b.Bitcast(k.m.I32, v) }
		yi, xi := si(yo), si(xo)
		acc := b.NewVar(k.m.F32, b.F(0))
		b.ForN(cg, func(ci Value) {
			ch := b.Add(b.MulU(gi, cg), ci) // input channel
			xPlane := b.MulU(b.Add(b.MulU(n, c), ch), h*w)
			var wBase Value // weight offset of (o or c, ...) with i = j = 0
			if transpose {
				wBase = b.MulU(b.Add(b.MulU(ch, og), ol), kh*kw)
			} else {
				wBase = b.MulU(b.Add(b.MulU(oc, cg), ci), kh*kw)
			}
			b.ForN(kh, func(i Value) {
				b.ForN(kw, func(j Value) {
					var iy, ix, ok Value
					ii, jj := si(i), si(j)
					if !transpose {
						iy = b.Add(b.Sub(b.Mul(yi, b.I(int32(sp.sh))), b.I(int32(sp.top))), b.Mul(ii, b.I(int32(sp.dh))))
						ix = b.Add(b.Sub(b.Mul(xi, b.I(int32(sp.sw))), b.I(int32(sp.left))), b.Mul(jj, b.I(int32(sp.dw))))
						ok = b.And(b.And(b.Ge(iy, b.I(0)), b.Lt(iy, b.I(int32(h)))),
							b.And(b.Ge(ix, b.I(0)), b.Lt(ix, b.I(int32(w)))))
					} else {
						ty := b.Sub(b.Add(yi, b.I(int32(sp.top))), b.Mul(ii, b.I(int32(sp.dh))))
						tx := b.Sub(b.Add(xi, b.I(int32(sp.left))), b.Mul(jj, b.I(int32(sp.dw))))
						ok = b.And(b.Ge(ty, b.I(0)), b.Ge(tx, b.I(0)))
						tyu := b.Bitcast(k.m.U32, b.Max(ty, b.I(0)))
						txu := b.Bitcast(k.m.U32, b.Max(tx, b.I(0)))
						ok = b.And(ok, b.And(b.Eq(b.RemU(tyu, sp.sh), b.U(0)), b.Eq(b.RemU(txu, sp.sw), b.U(0))))
						iy, ix = si(b.DivU(tyu, sp.sh)), si(b.DivU(txu, sp.sw))
						ok = b.And(ok, b.And(b.Lt(iy, b.I(int32(h))), b.Lt(ix, b.I(int32(w)))))
					}
					b.If(ok, func() {
						pix := b.Add(b.MulU(b.Bitcast(k.m.U32, iy), w), b.Bitcast(k.m.U32, ix))
						if wrong {
							pix = b.MinU(b.AddU(pix, 1), h*w-1)
						}
						xv := b.Load(X, b.Add(xPlane, pix))
						wv := b.Load(W, b.Add(wBase, b.Add(b.MulU(i, kw), j)))
						b.Set(acc, k.ov(b.Add(b.Get(acc), b.Mul(xv, wv))))
					})
				})
			})
		})
		r := b.Get(acc)
		if len(k.in) > 2 {
			r = b.Add(r, b.Load(k.ins[2], oc))
		}
		b.Store(O, idx, r)
	})
	return nil
}

// genPool generates pool2d: max over the window's inside positions
// (starting from -inf, taking greater values, so NaN is never taken) or
// their f32 sum (rows then columns) divided once by the count.
func genPool(k *kern) error {
	sp, err := k.spatial()
	if err != nil {
		return err
	}
	kern := k.attrs.Ints("kernel")
	if len(kern) != 2 {
		return fmt.Errorf("kernel %v: want 2 values", kern)
	}
	kh, kw := int(kern[0]), int(kern[1])
	avg := k.attrs.String("mode") == "avg"
	incl := k.attrs.Bool("count_include_pad")
	if avg {
		sp.dh, sp.dw = 1, 1 // avg pooling has no dilation
	}
	k.bindAll()
	b := k.b
	xs, os := sizes(k.in[0]), sizes(k.out[0])
	h, w, ho, wo := xs[2], xs[3], os[2], os[3]
	wrong := k.faultIs(FaultWrongIndex)
	X, O := k.ins[0], k.outs[0]
	k.elementwise(numel(k.out[0]), func(idx Value) {
		xo := b.RemU(idx, wo)
		yo := b.RemU(b.DivU(idx, wo), ho)
		plane := b.MulU(b.DivU(idx, wo*ho), h*w)
		y0 := b.Sub(b.Mul(b.Bitcast(k.m.I32, yo), b.I(int32(sp.sh))), b.I(int32(sp.top)))
		x0 := b.Sub(b.Mul(b.Bitcast(k.m.I32, xo), b.I(int32(sp.sw))), b.I(int32(sp.left)))
		acc := b.NewVar(k.m.F32, b.F(0))
		if !avg {
			b.Set(acc, k.negInf())
		}
		cnt := b.NewVar(k.m.I32, b.I(0))
		b.ForN(kh, func(i Value) {
			iy := b.Add(y0, b.Mul(b.Bitcast(k.m.I32, i), b.I(int32(sp.dh))))
			b.If(b.And(b.Ge(iy, b.I(0)), b.Lt(iy, b.I(int32(h)))), func() {
				b.ForN(kw, func(j Value) {
					ix := b.Add(x0, b.Mul(b.Bitcast(k.m.I32, j), b.I(int32(sp.dw))))
					b.If(b.And(b.Ge(ix, b.I(0)), b.Lt(ix, b.I(int32(w)))), func() {
						pix := b.Add(b.MulU(b.Bitcast(k.m.U32, iy), w), b.Bitcast(k.m.U32, ix))
						if wrong {
							pix = b.MinU(b.AddU(pix, 1), h*w-1)
						}
						v := b.Load(X, b.Add(plane, pix))
						if avg {
							b.Set(acc, b.Add(b.Get(acc), v))
							b.Set(cnt, b.Add(b.Get(cnt), b.I(1)))
						} else {
							b.Set(acc, b.Select(b.Gt(v, b.Get(acc)), v, b.Get(acc)))
						}
					})
				})
			})
		})
		r := b.Get(acc)
		if avg {
			n := b.Get(cnt)
			if incl {
				rows := b.Sub(b.Min(b.Add(y0, b.I(int32(kh))), b.I(int32(h+sp.bottom))), y0)
				cols := b.Sub(b.Min(b.Add(x0, b.I(int32(kw))), b.I(int32(w+sp.right))), x0)
				n = b.Mul(rows, cols)
			}
			r = b.Div(r, b.ToF(n))
		}
		b.Store(O, idx, r)
	})
	return nil
}

// resizeTables computes, on the host, the sampling of one axis: source
// indices i0 (and i1 with the weight l of i1 for linear).
func (k *kern) resizeTables(axis, in, out int) (i0, i1, l []uint32) {
	s0, s1, w := ir.ResizeAxis(k.attrs, axis, in, out)
	linear := k.attrs.String("mode") == "linear"
	for xo := range s0 {
		i0 = append(i0, uint32(s0[xo]))
		if linear {
			i1 = append(i1, uint32(s1[xo]))
			l = append(l, math.Float32bits(w[xo]))
		}
	}
	return i0, i1, l
}

// genResize generates resize over the last two axes. The coordinate
// transformation and rounding run on the host (they depend only on the
// shapes and attributes): the kernel reads per-axis tables of source
// indices and weights, so nearest is exact and linear differs from the
// reference only by its last roundings.
func genResize(k *kern) error {
	xs, os := sizes(k.in[0]), sizes(k.out[0])
	h, w, ho, wo := xs[2], xs[3], os[2], os[3]
	if ho > 16384 || wo > 16384 {
		return fmt.Errorf("output %dx%d is too large for baked tables (at most 16384 per axis)", ho, wo)
	}
	k.bindAll()
	b := k.b
	linear := k.attrs.String("mode") == "linear"
	yi0, yi1, yl := k.resizeTables(0, h, ho)
	xi0, xi1, xl := k.resizeTables(1, w, wo)
	if k.faultIs(FaultWrongIndex) {
		for i := range xi0 {
			xi0[i] = uint32(min(int(xi0[i])+1, w-1))
		}
	}
	ty0, tx0 := k.m.Table(k.m.U32, yi0, "y0"), k.m.Table(k.m.U32, xi0, "x0")
	var ty1, tx1, tyl, txl Array
	if linear {
		ty1, tx1 = k.m.Table(k.m.U32, yi1, "y1"), k.m.Table(k.m.U32, xi1, "x1")
		tyl, txl = k.m.Table(k.m.F32, yl, "ly"), k.m.Table(k.m.F32, xl, "lx")
	}
	X, O := k.ins[0], k.outs[0]
	lerp := func(a, c, l Value) Value { return b.Add(a, b.Mul(l, b.Sub(c, a))) }
	k.elementwise(numel(k.out[0]), func(idx Value) {
		xo := b.RemU(idx, wo)
		yo := b.RemU(b.DivU(idx, wo), ho)
		plane := b.MulU(b.DivU(idx, wo*ho), h*w)
		at := func(y, x Value) Value { return b.Load(X, b.Add(plane, b.Add(b.MulU(y, w), x))) }
		y0, x0 := b.Load(ty0, yo), b.Load(tx0, xo)
		if !linear {
			b.Store(O, idx, at(y0, x0))
			return
		}
		y1, x1 := b.Load(ty1, yo), b.Load(tx1, xo)
		ly, lx := b.Load(tyl, yo), b.Load(txl, xo)
		top := lerp(at(y0, x0), at(y0, x1), lx)
		bot := lerp(at(y1, x0), at(y1, x1), lx)
		b.Store(O, idx, lerp(top, bot, ly))
	})
	return nil
}

// genReduce generates reduce_sum, reduce_mean and reduce_max over axes:
// each output element folds its input elements in row-major order (max:
// NaN if any element is NaN, -inf over none; mean: the sum divided by the
// count).
func genReduce(k *kern) error {
	xs := sizes(k.in[0])
	r := len(xs)
	var axes []int
	for _, a := range k.attrs.Ints("axes") {
		n := normAxis(a, r)
		if n < 0 || n >= r || slices.Contains(axes, n) {
			return fmt.Errorf("axes %v are not distinct axes of rank %d", k.attrs.Ints("axes"), r)
		}
		axes = append(axes, n)
	}
	slices.Sort(axes)
	var kept, red []int // dims
	for i := range xs {
		if slices.Contains(axes, i) {
			red = append(red, i)
		} else {
			kept = append(kept, i)
		}
	}
	xst := strides(xs)
	keptShape := make([]int, len(kept))
	for i, d := range kept {
		keptShape[i] = xs[d]
	}
	redShape := make([]int, len(red))
	for i, d := range red {
		redShape[i] = xs[d]
	}
	count := prod(redShape)
	k.bindAll()
	b := k.b
	isMax := k.op == ir.OpReduceMax
	wrong := k.faultIs(FaultWrongIndex)
	X, O := k.ins[0], k.outs[0]
	k.elementwise(numel(k.out[0]), func(idx Value) {
		c := k.coords(keptShape, idx)
		base := b.U(0)
		for i, d := range kept {
			base = b.Add(base, b.MulU(c[i], xst[d]))
		}
		acc := b.NewVar(k.m.F32, b.F(0))
		if isMax {
			b.Set(acc, k.negInf())
		}
		b.ForN(count, func(q Value) {
			rc := k.coords(redShape, q)
			off := base
			for i, d := range red {
				off = b.Add(off, b.MulU(rc[i], xst[d]))
			}
			if wrong { // read the next output's elements
				shift := 1
				if len(kept) > 0 {
					shift = xst[kept[len(kept)-1]]
				}
				off = b.MinU(b.AddU(off, shift), numel(k.in[0])-1)
			}
			v := b.Load(X, off)
			if isMax {
				b.Set(acc, b.Select(b.Or(b.Gt(v, b.Get(acc)), b.IsNan(v)), v, b.Get(acc)))
			} else {
				b.Set(acc, k.ov(b.Add(b.Get(acc), v)))
			}
		})
		res := b.Get(acc)
		if k.op == ir.OpReduceMean {
			res = b.Div(res, b.F(float32(count)))
		}
		b.Store(O, idx, res)
	})
	return nil
}
