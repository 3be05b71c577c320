package llvm

import (
	"math"
	"slices"

	"github.com/llir/llvm/ir/constant"
	"github.com/llir/llvm/ir/enum"
	"github.com/llir/llvm/ir/types"
	"github.com/llir/llvm/ir/value"

	"github.com/tapml/tapml/ir"
)

// The ops of vision and general ONNX models (ir/ops_nn.go): iota, the
// reductions over axes, pool2d, conv2d, conv_transpose2d and resize.

// genIota: out[i0, ..., ir] = start + i_axis. An item is an element.
func genIota(g *gen) error {
	g.bindAll()
	os := sizes(g.out[0])
	ax := ir.NormAxis(g.attrs.Int("axis"), len(os))
	_, dim, inner := axisLayout(os, ax)
	n := prod(os)
	g.setItems(n)
	start := g.ld(0, c64(0))
	shift := g.faultOnce(FaultWrongIndex)
	g.loop(g.lo, g.hi, func(i value.Value) {
		at := i
		if shift {
			at = g.wrapNext(i, n)
		}
		v := g.cur.NewTrunc(g.remi(g.divi(at, inner), dim), types.I32)
		g.st(1, i, g.cur.NewAdd(start, v))
	})
	g.finish()
	return nil
}

// offsets returns, for the dims dims (of a row-major tensor with strides
// str), the element offset of row-major index i over those dims.
func (g *gen) offsets(i value.Value, dims []int, str []int64) value.Value {
	off := value.Value(c64(0))
	div := int64(1)
	for d := len(dims) - 1; d >= 0; d-- {
		c := i
		if d > 0 {
			c = g.remi(g.divi(i, div), int64(dims[d]))
		} else {
			c = g.divi(i, div)
		}
		off = g.add(off, g.muli(c, str[d]))
		div *= int64(dims[d])
	}
	return off
}

func rowStrides(s []int) []int64 {
	st := make([]int64, len(s))
	acc := int64(1)
	for j := len(s) - 1; j >= 0; j-- {
		st[j] = acc
		acc *= int64(s[j])
	}
	return st
}

// genReduce: reduce_sum, reduce_mean, reduce_max over axes. An item is an
// output element; its reduced elements are visited in row-major order,
// summed in f32 in that order.
func genReduce(g *gen) error {
	if err := checkFloat(g.in[0], g.out[0]); err != nil {
		return err
	}
	g.bindAll()
	xs := sizes(g.in[0])
	axes, err := ir.ReduceAxes(g.attrs.Ints("axes"), len(xs))
	if err != nil {
		return err
	}
	str := rowStrides(xs)
	var kept, red []int
	var keptStr, redStr []int64
	for i, d := range xs {
		if slices.Contains(axes, i) {
			red, redStr = append(red, d), append(redStr, str[i])
		} else {
			kept, keptStr = append(kept, d), append(keptStr, str[i])
		}
	}
	nOut, nRed := prod(kept), prod(red)
	// the reduced elements are contiguous when they are the trailing dims
	trailing := len(axes) == 0 || axes[0] == len(xs)-len(axes)
	nIn := prod(xs)
	g.setItems(nOut)
	shift := g.faultOnce(FaultWrongIndex)
	isMax := g.op == ir.OpReduceMax
	g.loop(g.lo, g.hi, func(o value.Value) {
		base := g.offsets(o, kept, keptStr)
		load := func(r value.Value) value.Value {
			var off value.Value
			if trailing {
				off = g.add(base, r)
			} else {
				off = g.add(base, g.offsets(r, red, redStr))
			}
			if shift {
				off = g.wrapNext(off, nIn)
			}
			return g.ldF(0, off)
		}
		var res value.Value
		if isMax {
			res = g.loopAcc(c64(0), c64(nRed), []value.Value{cf(float32(math.Inf(-1)))}, func(r value.Value, acc []value.Value) []value.Value {
				v := load(r)
				take := g.cur.NewOr(g.fcmp(enum.FPredOGT, v, acc[0]), g.fcmp(enum.FPredUNO, v, v))
				return []value.Value{g.sel(take, v, acc[0])}
			})[0]
		} else {
			res = g.loopAcc(c64(0), c64(nRed), []value.Value{cf(0)}, func(r value.Value, acc []value.Value) []value.Value {
				return []value.Value{g.ov(g.fadd(acc[0], load(r)))}
			})[0]
			if g.op == ir.OpReduceMean {
				res = g.fdiv(res, cf(float32(nRed)))
			}
		}
		g.stF(1, o, res)
	})
	g.finish()
	return nil
}

// clampIdx clamps an index into [0, n-1] (for loads whose value a select
// discards when the index is out of range).
func (g *gen) clampIdx(i value.Value, n int64) value.Value {
	i = g.sel(g.icmp(enum.IPredSLT, i, c64(0)), c64(0), i)
	return g.sel(g.icmp(enum.IPredSGT, i, c64(n-1)), c64(n-1), i)
}

func (g *gen) inRange(i value.Value, lo, hi int64) value.Value {
	return g.cur.NewAnd(g.icmp(enum.IPredSGE, i, c64(lo)), g.icmp(enum.IPredSLT, i, c64(hi)))
}

// genPool: pool2d. An item is one output row (n, c, y); each output element
// visits its window in row-major order (i, then j).
func genPool(g *gen) error {
	if err := checkFloat(g.in[0], g.out[0]); err != nil {
		return err
	}
	g.bindAll()
	sp, err := ir.Spatial(g.attrs)
	if err != nil {
		return err
	}
	xs, os := sizes(g.in[0]), sizes(g.out[0])
	c, h, w := int64(xs[1]), int64(xs[2]), int64(xs[3])
	ho, wo := int64(os[2]), int64(os[3])
	k := g.attrs.Ints("kernel")
	kh, kw := k[0], k[1]
	sh, sw, dh, dw := sp.Strides[0], sp.Strides[1], sp.Dilations[0], sp.Dilations[1]
	top, left, bottom, right := sp.Pads[0], sp.Pads[1], sp.Pads[2], sp.Pads[3]
	isMax := g.attrs.String("mode") == "max"
	inclPad := g.attrs.Bool("count_include_pad")
	g.setItems(int64(os[0]) * c * ho)
	shift := g.faultOnce(FaultWrongIndex)
	g.loop(g.lo, g.hi, func(it value.Value) {
		plane, y := g.divi(it, ho), g.remi(it, ho) // plane = n·C + c
		pBase := g.muli(plane, h*w)
		oBase := g.muli(it, wo)
		g.loop(c64(0), c64(wo), func(x value.Value) {
			init := []value.Value{cf(0), c64(0), c64(0)}
			if isMax {
				init[0] = cf(float32(math.Inf(-1)))
			}
			acc := g.loopAcc(c64(0), c64(kh), init, func(i value.Value, a []value.Value) []value.Value {
				iy := g.add(g.addi(g.muli(y, sh), -top), g.muli(i, dh))
				rowOK := g.inRange(iy, 0, h)
				rowPad := g.inRange(iy, -top, h+bottom)
				rBase := g.add(pBase, g.muli(g.clampIdx(iy, h), w))
				return g.loopAcc(c64(0), c64(kw), a, func(j value.Value, a []value.Value) []value.Value {
					ix := g.add(g.addi(g.muli(x, sw), -left), g.muli(j, dw))
					ok := g.cur.NewAnd(rowOK, g.inRange(ix, 0, w))
					at := g.add(rBase, g.clampIdx(ix, w))
					if shift {
						at = g.wrapNext(at, prod(xs))
					}
					v := g.ldF(0, at)
					var next value.Value
					if isMax { // NaNs are never taken (as the reference and ONNX Runtime)
						take := g.cur.NewAnd(ok, g.fcmp(enum.FPredOGT, v, a[0]))
						next = g.sel(take, v, a[0])
					} else {
						next = g.sel(ok, g.ov(g.fadd(a[0], v)), a[0])
					}
					cnt := g.sel(ok, g.addi(a[1], 1), a[1])
					padOK := g.cur.NewAnd(rowPad, g.inRange(ix, -left, w+right))
					cntPad := g.sel(padOK, g.addi(a[2], 1), a[2])
					return []value.Value{next, cnt, cntPad}
				})
			})
			res := acc[0]
			if !isMax {
				cnt := acc[1]
				if inclPad {
					cnt = acc[2]
				}
				res = g.fdiv(res, g.cur.NewSIToFP(cnt, types.Float))
			}
			g.stF(1, g.add(oBase, x), res)
		})
	})
	g.finish()
	return nil
}

// i64Table adds a constant i64 array and returns a function loading
// element i of it.
func (g *gen) i64Table(name string, vals []int64) func(i value.Value) value.Value {
	elems := make([]constant.Constant, len(vals))
	for i, v := range vals {
		elems[i] = c64(v)
	}
	p := g.global(name, types.I64, elems)
	return func(i value.Value) value.Value {
		e := g.cur.NewGetElementPtr(types.I64, p, i)
		e.InBounds = true
		return g.cur.NewLoad(types.I64, e)
	}
}

// floorDiv and ceilDiv divide rounding toward -inf and +inf.
func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}

func ceilDiv(a, b int64) int64 { return -floorDiv(-a, b) }

// convShapes holds the sizes of a conv or conv_transpose node.
type convShapes struct {
	n, c, h, w     int64 // x
	o, ho, wo      int64 // out
	kh, kw, groups int64
	sh, sw, dh, dw int64
	top, left      int64
}

func (g *gen) convShapes() (convShapes, error) {
	sp, err := ir.Spatial(g.attrs)
	if err != nil {
		return convShapes{}, err
	}
	xs, ws, os := sizes(g.in[0]), sizes(g.in[1]), sizes(g.out[0])
	return convShapes{
		n: int64(xs[0]), c: int64(xs[1]), h: int64(xs[2]), w: int64(xs[3]),
		o: int64(os[1]), ho: int64(os[2]), wo: int64(os[3]),
		kh: int64(ws[2]), kw: int64(ws[3]), groups: g.attrs.Int("groups"),
		sh: sp.Strides[0], sw: sp.Strides[1], dh: sp.Dilations[0], dw: sp.Dilations[1],
		top: sp.Pads[0], left: sp.Pads[1],
	}, nil
}

// genConv emits conv2d and conv_transpose2d. An item is one output row
// (n, o, y), accumulated in a stack row of Wo floats: for each (c, i, j) in
// order, every output element of the row that (c, i, j) reaches gets x·w
// added, so each element is summed over (c, i, j) in order, in f32; the
// bias is added last. The column range that each j reaches is computed
// here and baked.
func genConv(g *gen) error {
	if err := checkFloat(append(append([]ir.Type{}, g.in...), g.out...)...); err != nil {
		return err
	}
	g.bindAll()
	s, err := g.convShapes()
	if err != nil {
		return err
	}
	transposed := g.op == ir.OpConvTranspose2D
	hasBias := len(g.in) == 3
	ob := g.outBinding(0)
	og, cg := s.o/s.groups, s.c/s.groups
	// For each j: the range [lo, hi] of the loop index (the output column
	// in conv2d, the input column in conv_transpose2d) whose pair
	// (output x, input ix) is in bounds.
	los, his := make([]int64, s.kw), make([]int64, s.kw)
	for j := int64(0); j < s.kw; j++ {
		off := -s.left + j*s.dw // ix = x·sw + off (conv), x = ix·sw + off (transpose)
		if !transposed {
			los[j] = max(0, ceilDiv(-off, s.sw))
			his[j] = min(s.wo-1, floorDiv(s.w-1-off, s.sw))
		} else {
			los[j] = max(0, ceilDiv(-off, s.sw))
			his[j] = min(s.w-1, floorDiv(s.wo-1-off, s.sw))
		}
	}
	loT, hiT := g.i64Table("lo", los), g.i64Table("hi", his)
	shift := g.faultOnce(FaultWrongIndex)
	wN := numel(g.in[1])
	g.setItems(s.n * s.o * s.ho)
	if s.wo == 0 {
		g.setItems(0)
	}
	acc := g.entry.NewAlloca(types.NewArray(uint64(max(s.wo, 1)), types.Float))
	acc.Align = 16
	row := g.entry.NewBitCast(acc, types.NewPointer(types.Float))
	slot := func(x value.Value) value.Value {
		e := g.cur.NewGetElementPtr(types.Float, row, x)
		e.InBounds = true
		return e
	}
	g.loop(g.lo, g.hi, func(it value.Value) {
		y := g.remi(it, s.ho)
		no := g.divi(it, s.ho) // n·O + o
		n, o := g.divi(no, s.o), g.remi(no, s.o)
		grp := g.divi(o, og)
		g.loop(c64(0), c64(s.wo), func(x value.Value) { g.cur.NewStore(cf(0), slot(x)) })
		g.loop(c64(0), c64(cg), func(c value.Value) {
			ch := g.add(g.muli(grp, cg), c)
			plane := g.muli(g.add(g.muli(n, s.c), ch), s.h*s.w)
			g.loop(c64(0), c64(s.kh), func(i value.Value) {
				var iy, ok value.Value
				if !transposed {
					iy = g.add(g.addi(g.muli(y, s.sh), -s.top), g.muli(i, s.dh))
					ok = g.inRange(iy, 0, s.h)
				} else {
					t := g.sub(g.addi(y, s.top), g.muli(i, s.dh))
					ok = g.inRange(t, 0, s.sh*(s.h-1)+1)
					if s.sh > 1 {
						ok = g.cur.NewAnd(ok, g.icmp(enum.IPredEQ, g.cur.NewSRem(t, c64(s.sh)), c64(0)))
					}
					iy = g.divi(t, s.sh)
				}
				g.ifThen(ok, func() {
					xRow := g.add(plane, g.muli(iy, s.w))
					g.loop(c64(0), c64(s.kw), func(j value.Value) {
						var wAt value.Value
						if !transposed { // w[o, c, i, j]
							wAt = g.add(g.muli(g.add(g.muli(g.add(g.muli(o, cg), c), s.kh), i), s.kw), j)
						} else { // w[ch, o - g·og, i, j]
							oo := g.sub(o, g.muli(grp, og))
							wAt = g.add(g.muli(g.add(g.muli(g.add(g.muli(ch, og), oo), s.kh), i), s.kw), j)
						}
						if shift {
							wAt = g.wrapNext(wAt, wN)
						}
						wv := g.ldF(1, wAt)
						off := g.add(c64(-s.left), g.muli(j, s.dw))
						g.loop(loT(j), g.addi(hiT(j), 1), func(q value.Value) {
							var x, ix value.Value
							if !transposed {
								x, ix = q, g.add(g.muli(q, s.sw), off)
							} else {
								ix, x = q, g.add(g.muli(q, s.sw), off)
							}
							p := slot(x)
							v := g.fma(g.cur.NewLoad(types.Float, p), g.ldF(0, g.add(xRow, ix)), wv)
							g.cur.NewStore(g.ov(v), p)
						})
					})
				})
			})
		})
		oRow := g.muli(it, s.wo)
		g.loop(c64(0), c64(s.wo), func(x value.Value) {
			var v value.Value = g.cur.NewLoad(types.Float, slot(x))
			if hasBias {
				v = g.fadd(v, g.ldF(2, o))
			}
			g.stF(ob, g.add(oRow, x), v)
		})
	})
	g.finish()
	return nil
}

// resizeAxis is ir.ResizeAxis with int64 indices.
func resizeAxis(a ir.Attrs, k int, in, out int64) (i0, i1 []int64, l []float32) {
	s0, s1, l := ir.ResizeAxis(a, k, int(in), int(out))
	i0, i1 = make([]int64, len(s0)), make([]int64, len(s1))
	for i := range s0 {
		i0[i], i1[i] = int64(s0[i]), int64(s1[i])
	}
	return i0, i1, l
}

// genResize: the coordinate tables of both axes are computed here and
// baked; an item is one output row (n, c, y).
func genResize(g *gen) error {
	if err := checkFloat(g.in[0], g.out[0]); err != nil {
		return err
	}
	g.bindAll()
	xs, os := sizes(g.in[0]), sizes(g.out[0])
	h, w, ho, wo := int64(xs[2]), int64(xs[3]), int64(os[2]), int64(os[3])
	y0, y1, ly := resizeAxis(g.attrs, 0, h, ho)
	x0, x1, lx := resizeAxis(g.attrs, 1, w, wo)
	shift := g.faultOnce(FaultWrongIndex)
	if shift { // read the next input column
		for i := range x0 {
			x0[i] = (x0[i] + 1) % w
			x1[i] = (x1[i] + 1) % w
		}
	}
	fTable := func(name string, v []float32) func(value.Value) value.Value {
		elems := make([]constant.Constant, len(v))
		for i, f := range v {
			elems[i] = cf(f)
		}
		p := g.global(name, types.Float, elems)
		return func(i value.Value) value.Value {
			e := g.cur.NewGetElementPtr(types.Float, p, i)
			e.InBounds = true
			return g.cur.NewLoad(types.Float, e)
		}
	}
	Y0, X0 := g.i64Table("y0", y0), g.i64Table("x0", x0)
	var Y1, X1, LY, LX func(value.Value) value.Value
	linear := g.attrs.String("mode") == "linear"
	if linear {
		Y1, X1 = g.i64Table("y1", y1), g.i64Table("x1", x1)
		LY, LX = fTable("ly", ly), fTable("lx", lx)
	}
	g.setItems(int64(os[0]) * int64(os[1]) * ho)
	lerp := func(a, b, l value.Value) value.Value { return g.fadd(a, g.fmul(l, g.fsub(b, a))) }
	g.loop(g.lo, g.hi, func(it value.Value) {
		plane, y := g.divi(it, ho), g.remi(it, ho)
		pBase := g.muli(plane, h*w)
		oRow := g.muli(it, wo)
		r0 := g.add(pBase, g.muli(Y0(y), w))
		var r1, wy value.Value
		if linear {
			r1, wy = g.add(pBase, g.muli(Y1(y), w)), LY(y)
		}
		g.loop(c64(0), c64(wo), func(x value.Value) {
			if !linear {
				g.stF(1, g.add(oRow, x), g.ldF(0, g.add(r0, X0(x))))
				return
			}
			c0, c1, wx := X0(x), X1(x), LX(x)
			// within rows y0 and y1 first (along x), then between them
			top := lerp(g.ldF(0, g.add(r0, c0)), g.ldF(0, g.add(r0, c1)), wx)
			bot := lerp(g.ldF(0, g.add(r1, c0)), g.ldF(0, g.add(r1, c1)), wx)
			g.stF(1, g.add(oRow, x), lerp(top, bot, wy))
		})
	})
	g.finish()
	return nil
}
