package cpu

import (
	"fmt"
	"math"

	"github.com/tapml/tapml/ir"
	"github.com/tapml/tapml/tensor"
)

// The spatial ops of ir/ops_nn.go: conv2d, conv_transpose2d, pool2d and
// resize, on NCHW f32 tensors (f16/bf16 through f32).
//
// Both convolutions gather, for a block of output pixels, the K = C/groups·
// kh·kw input values each one reads (zero where the window leaves the input,
// or, for conv_transpose2d, where no input pixel maps to that tap) into a
// row of a matrix, and multiply it by the weights with matmul's kernel
// (transpose_b): every output element is one f32 dot product over K in the
// order (c, i, j), computed by gonum's serial dot, then the bias is added.
// An element's bits depend only on its own window, never on the blocking.

// convBlock is the number of output pixels gathered at a time.
const convBlock = 1024

// convGeom is the geometry of one convolution call.
type convGeom struct {
	n, c, h, w     int // input
	o, ho, wo      int // output channels and size
	kh, kw, groups int
	cg, og         int // channels per group, in and out
	sp             ir.Spatial2D
	transpose      bool
}

// tap returns, for output pixel (y, x) and tap (i, j), the input pixel it
// reads, or ok false when it reads nothing.
func (g *convGeom) tap(y, x, i, j int) (iy, ix int, ok bool) {
	sh, sw := int(g.sp.Strides[0]), int(g.sp.Strides[1])
	dh, dw := int(g.sp.Dilations[0]), int(g.sp.Dilations[1])
	top, left := int(g.sp.Pads[0]), int(g.sp.Pads[1])
	if !g.transpose {
		iy, ix = y*sh-top+i*dh, x*sw-left+j*dw
		return iy, ix, iy >= 0 && iy < g.h && ix >= 0 && ix < g.w
	}
	ty, tx := y+top-i*dh, x+left-j*dw
	if ty < 0 || tx < 0 || ty%sh != 0 || tx%sw != 0 {
		return 0, 0, false
	}
	iy, ix = ty/sh, tx/sw
	return iy, ix, iy < g.h && ix < g.w
}

func convKernel(d *Device, c *call) ([]*tensor.Tensor, error) {
	x, w := c.in[0], c.in[1]
	if err := checkF32("input", c.in...); err != nil {
		return nil, err
	}
	types := make([]ir.Type, len(c.in))
	for i, t := range c.in {
		types[i] = t.Type()
	}
	outs, _, err := ir.InferTypes(c.op, types, c.attrs)
	if err != nil {
		return nil, err
	}
	sp, _ := ir.Spatial(c.attrs)
	os := outs[0].Shape.Sizes()
	g := &convGeom{n: x.Shape[0], c: x.Shape[1], h: x.Shape[2], w: x.Shape[3], o: os[1], ho: os[2], wo: os[3],
		kh: w.Shape[2], kw: w.Shape[3], groups: int(c.attrs.Int("groups")), sp: sp, transpose: c.op == ir.OpConvTranspose2D}
	g.cg, g.og = g.c/g.groups, g.o/g.groups
	out := tensor.New(ir.F32, os)
	if out.NumElements() == 0 {
		return []*tensor.Tensor{out}, nil
	}
	k := g.cg * g.kh * g.kw
	// Weights as [groups][og][K] rows in (c, i, j) order.
	wt := w.Float32s()
	wr := make([]float32, g.groups*g.og*k)
	for gi := 0; gi < g.groups; gi++ {
		for ol := 0; ol < g.og; ol++ {
			row := wr[(gi*g.og+ol)*k:]
			for ci := 0; ci < g.cg; ci++ {
				for i := 0; i < g.kh; i++ {
					for j := 0; j < g.kw; j++ {
						var v float32
						if g.transpose { // w[C, O/groups, kh, kw]
							v = wt[(((gi*g.cg+ci)*g.og+ol)*g.kh+i)*g.kw+j]
						} else { // w[O, C/groups, kh, kw]
							v = wt[(((gi*g.og+ol)*g.cg+ci)*g.kh+i)*g.kw+j]
						}
						row[(ci*g.kh+i)*g.kw+j] = v
					}
				}
			}
		}
	}
	wr = aligned16(wr)
	var bias []float32
	if len(c.in) > 2 {
		bias = c.in[2].Float32s()
	}
	xd, od := x.Float32s(), out.Float32s()
	p := g.ho * g.wo
	col := make([]float32, min(convBlock, p)*k)
	res := make([]float32, min(convBlock, p)*g.og)
	for n := 0; n < g.n; n++ {
		for gi := 0; gi < g.groups; gi++ {
			for p0 := 0; p0 < p; p0 += convBlock {
				pc := min(convBlock, p-p0)
				d.parallel(pc, pc*k, func(lo, hi int) {
					for pi := lo; pi < hi; pi++ {
						y, xx := (p0+pi)/g.wo, (p0+pi)%g.wo
						row := col[pi*k : (pi+1)*k]
						for i := 0; i < g.kh; i++ {
							for j := 0; j < g.kw; j++ {
								iy, ix, ok := g.tap(y, xx, i, j)
								for ci := 0; ci < g.cg; ci++ {
									v := float32(0)
									if ok {
										v = xd[((n*g.c+gi*g.cg+ci)*g.h+iy)*g.w+ix]
									}
									row[(ci*g.kh+i)*g.kw+j] = v
								}
							}
						}
					}
				})
				mm := &matmul{a: col, b: wr[gi*g.og*k : (gi+1)*g.og*k], c: res, m: pc, k: k, n: g.og, transB: true}
				mm.run(d, 0, 0, 0)
				for ol := 0; ol < g.og; ol++ {
					o := gi*g.og + ol
					dst := od[(n*g.o+o)*p+p0 : (n*g.o+o)*p+p0+pc]
					var b float32
					if bias != nil {
						b = bias[o]
					}
					for pi := range dst {
						dst[pi] = res[pi*g.og+ol] + b
					}
				}
			}
		}
	}
	return []*tensor.Tensor{out}, nil
}

// poolKernel is pool2d: the max or mean of each window (see ir's doc).
// max starts from -Inf and takes a value when it is greater (so NaNs are
// never taken, as in ONNX Runtime); avg sums the inside
// positions in f32, rows then columns, and divides by the count once.
func poolKernel(d *Device, c *call) ([]*tensor.Tensor, error) {
	x := c.in[0]
	if err := checkF32("input", x); err != nil {
		return nil, err
	}
	outs, _, err := ir.InferTypes(c.op, []ir.Type{x.Type()}, c.attrs)
	if err != nil {
		return nil, err
	}
	sp, _ := ir.Spatial(c.attrs)
	os := outs[0].Shape.Sizes()
	kern := c.attrs.Ints("kernel")
	kh, kw := int(kern[0]), int(kern[1])
	sh, sw := int(sp.Strides[0]), int(sp.Strides[1])
	dh, dw := int(sp.Dilations[0]), int(sp.Dilations[1])
	top, left, bottom, right := int(sp.Pads[0]), int(sp.Pads[1]), int(sp.Pads[2]), int(sp.Pads[3])
	h, w, ho, wo := x.Shape[2], x.Shape[3], os[2], os[3]
	avg := c.attrs.String("mode") == "avg"
	incl := c.attrs.Bool("count_include_pad")
	out := tensor.New(ir.F32, os)
	xd, od := x.Float32s(), out.Float32s()
	planes := os[0] * os[1]
	d.parallel(planes, planes*ho*wo*kh*kw, func(lo, hi int) {
		for pl := lo; pl < hi; pl++ {
			src := xd[pl*h*w : (pl+1)*h*w]
			dst := od[pl*ho*wo : (pl+1)*ho*wo]
			for y := 0; y < ho; y++ {
				for xx := 0; xx < wo; xx++ {
					y0, x0 := y*sh-top, xx*sw-left
					if !avg {
						m := float32(math.Inf(-1))
						for i := 0; i < kh; i++ {
							iy := y0 + i*dh
							if iy < 0 || iy >= h {
								continue
							}
							for j := 0; j < kw; j++ {
								ix := x0 + j*dw
								if ix >= 0 && ix < w && src[iy*w+ix] > m {
									m = src[iy*w+ix]
								}
							}
						}
						dst[y*wo+xx] = m
						continue
					}
					var s float32
					cnt := 0
					for i := 0; i < kh; i++ {
						iy := y0 + i
						if iy < 0 || iy >= h {
							continue
						}
						for j := 0; j < kw; j++ {
							if ix := x0 + j; ix >= 0 && ix < w {
								s += src[iy*w+ix]
								cnt++
							}
						}
					}
					if incl {
						cnt = (min(y0+kh, h+bottom) - y0) * (min(x0+kw, w+right) - x0)
					}
					dst[y*wo+xx] = s / float32(cnt)
				}
			}
		}
	})
	return []*tensor.Tensor{out}, nil
}

// resizeAxis is the precomputed sampling of one axis: for nearest the
// source index i0; for linear i0, i1 and the weight l of i1.
type resizeAxis struct {
	i0, i1 []int
	l      []float32
}

func newResizeAxis(c *call, k, in, out int) resizeAxis {
	i0, i1, l := ir.ResizeAxis(c.attrs, k, in, out)
	return resizeAxis{i0: i0, i1: i1, l: l}
}

// lerp is a + l·(b - a) with each step rounded to f32.
func lerp(a, b, l float32) float32 { return a + float32(l*(b-a)) }

func resizeKernel(d *Device, c *call) ([]*tensor.Tensor, error) {
	x := c.in[0]
	if err := checkF32("input", x); err != nil {
		return nil, err
	}
	outs, _, err := ir.InferTypes(c.op, []ir.Type{x.Type()}, c.attrs)
	if err != nil {
		return nil, err
	}
	os := outs[0].Shape.Sizes()
	h, w, ho, wo := x.Shape[2], x.Shape[3], os[2], os[3]
	ay, ax := newResizeAxis(c, 0, h, ho), newResizeAxis(c, 1, w, wo)
	linear := c.attrs.String("mode") == "linear"
	out := tensor.New(ir.F32, os)
	xd, od := x.Float32s(), out.Float32s()
	planes := os[0] * os[1]
	d.parallel(planes, planes*ho*wo*4, func(lo, hi int) {
		for pl := lo; pl < hi; pl++ {
			src := xd[pl*h*w : (pl+1)*h*w]
			dst := od[pl*ho*wo : (pl+1)*ho*wo]
			for y := 0; y < ho; y++ {
				r0, r1, ly := src[ay.i0[y]*w:], src[ay.i1[y]*w:], ay.l[y]
				for xx := 0; xx < wo; xx++ {
					c0 := ax.i0[xx]
					if !linear {
						dst[y*wo+xx] = r0[c0]
						continue
					}
					c1, lx := ax.i1[xx], ax.l[xx]
					top := lerp(r0[c0], r0[c1], lx)
					bot := lerp(r1[c0], r1[c1], lx)
					dst[y*wo+xx] = lerp(top, bot, ly)
				}
			}
		}
	})
	return []*tensor.Tensor{out}, nil
}

// iotaKernel is iota: start + the index along axis, over the expected
// output shape (or the shape attribute when it is static).
func iotaKernel(_ *Device, c *call) ([]*tensor.Tensor, error) {
	start, err := scalarPos(c.in[0])
	if err != nil {
		return nil, fmt.Errorf("start: %w", err)
	}
	shape := c.outShape(0)
	if shape == nil {
		s := c.attrs.Shape("shape")
		if !s.IsStatic() {
			return nil, fmt.Errorf("shape %s has symbolic dims; pass the output type", s)
		}
		shape = s.Sizes()
	}
	_, dim, inner, err := axisLayout(shape, c.attrs.Int("axis"))
	if err != nil {
		return nil, err
	}
	out := tensor.New(ir.I32, shape)
	o := out.Int32s()
	for i := range o {
		o[i] = int32(start + (i/inner)%dim)
	}
	return []*tensor.Tensor{out}, nil
}

// reduceKernel is reduce_sum, reduce_mean and reduce_max: each output
// element folds its input elements in row-major order, in f32 (mean: the
// f32 sum divided by the count; max: NaN if any element is NaN, -Inf over
// no elements).
func reduceKernel(_ *Device, c *call) ([]*tensor.Tensor, error) {
	x := c.in[0]
	if err := checkF32("input", x); err != nil {
		return nil, err
	}
	axes, err := ir.ReduceAxes(c.attrs.Ints("axes"), len(x.Shape))
	if err != nil {
		return nil, err
	}
	r := len(x.Shape)
	reduced := make([]bool, r)
	for _, a := range axes {
		reduced[a] = true
	}
	var shape []int
	ostr := make([]int, r) // output stride of each input dim (0 when reduced)
	count := 1
	for i, n := range x.Shape {
		if reduced[i] {
			count *= n
			if c.attrs.Bool("keepdims") {
				shape = append(shape, 1)
			}
		} else {
			shape = append(shape, n)
		}
	}
	acc := 1
	for i := r - 1; i >= 0; i-- {
		if !reduced[i] {
			ostr[i] = acc
			acc *= x.Shape[i]
		}
	}
	out := tensor.New(ir.F32, shape)
	o := out.Float32s()
	isMax := c.op == ir.OpReduceMax
	if isMax {
		for i := range o {
			o[i] = float32(math.Inf(-1))
		}
	}
	xd := x.Float32s()
	if len(xd) > 0 {
		idx := make([]int, r)
		off := 0
		for _, v := range xd {
			if isMax {
				if v > o[off] || v != v {
					o[off] = v
				}
			} else {
				o[off] += v
			}
			for k := r - 1; k >= 0; k-- {
				idx[k]++
				off += ostr[k]
				if idx[k] < x.Shape[k] {
					break
				}
				off -= ostr[k] * x.Shape[k]
				idx[k] = 0
			}
		}
	}
	if c.op == ir.OpReduceMean {
		n := float32(count)
		for i := range o {
			o[i] /= n
		}
	}
	return []*tensor.Tensor{out}, nil
}

func init() {
	for op, k := range map[ir.Op]kernel{
		ir.OpConv2D: convKernel, ir.OpConvTranspose2D: convKernel, ir.OpPool2D: poolKernel, ir.OpResize: resizeKernel,
		ir.OpReduceSum: reduceKernel, ir.OpReduceMean: reduceKernel, ir.OpReduceMax: reduceKernel,
	} {
		kernels[op] = k
	}
	kernels[ir.OpIota] = iotaKernel
}
