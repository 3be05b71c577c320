package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/tapml/tapml/ir"
	"github.com/tapml/tapml/tensor"
)

// nnSamples are valid calls of the ops of ir/ops_nn.go, for the coverage
// test.
func nnSamples(r *rand.Rand) map[ir.Op]sample {
	x4 := randF32(r, 1, 2, 5, 5)
	s := map[ir.Op]sample{
		ir.OpIota:            {ir.Attrs{"shape": ir.ShapeAttr(ir.S(2, 3)), "axis": ir.IntAttr(1)}, []*tensor.Tensor{tensor.ScalarInt32(4)}},
		ir.OpTopK:            {ir.Attrs{"k": ir.IntAttr(2)}, []*tensor.Tensor{randF32(r, 3, 4)}},
		ir.OpExpertMatmul:    {nil, []*tensor.Tensor{randF32(r, 2, 3), randF32(r, 4, 5, 3), tensor.FromInt32([]int{2, 2}, []int32{3, 0, 1, 3})}},
		ir.OpTokenShift:      {nil, []*tensor.Tensor{randF32(r, 3, 4), randF32(r, 1, 4)}},
		ir.OpCausalConv1D:    {nil, []*tensor.Tensor{randF32(r, 2, 4), randF32(r, 3, 4), randF32(r, 4, 3)}},
		ir.OpWKV:             {nil, []*tensor.Tensor{randF32(r, 3, 4), randF32(r, 2, 4), randF32(r, 2, 4), randF32(r, 4), randF32(r, 4)}},
		ir.OpSelectiveScan:   {nil, []*tensor.Tensor{randF32(r, 4, 2), randF32(r, 3, 4), randF32(r, 3, 4), randF32(r, 4, 2), randF32(r, 3, 2), randF32(r, 3, 2)}},
		ir.OpConv2D:          {ir.Attrs{"pads": ir.IntsAttr(1, 1, 1, 1)}, []*tensor.Tensor{x4, randF32(r, 3, 2, 3, 3), randF32(r, 3)}},
		ir.OpConvTranspose2D: {ir.Attrs{"strides": ir.IntsAttr(2, 2)}, []*tensor.Tensor{x4, randF32(r, 2, 3, 2, 2)}},
		ir.OpPool2D:          {ir.Attrs{"kernel": ir.IntsAttr(2, 2)}, []*tensor.Tensor{x4}},
		ir.OpResize:          {ir.Attrs{"size": ir.IntsAttr(10, 10)}, []*tensor.Tensor{x4}},
	}
	for _, op := range ir.ReduceOps {
		s[op] = sample{ir.Attrs{"axes": ir.IntsAttr(-1)}, []*tensor.Tensor{x4}}
	}
	return s
}

type conv2dCase struct {
	x, w         []int
	bias         bool
	strides, dil [2]int64
	pads         [4]int64
	groups       int64
	outPad       [2]int64
	transpose    bool
}

func (c conv2dCase) attrs() ir.Attrs {
	a := ir.Attrs{
		"strides": ir.IntsAttr(c.strides[:]...), "dilations": ir.IntsAttr(c.dil[:]...),
		"pads": ir.IntsAttr(c.pads[:]...), "groups": ir.IntAttr(c.groups),
	}
	if c.transpose {
		a["output_padding"] = ir.IntsAttr(c.outPad[:]...)
	}
	return a
}

// naiveConv2d is the textbook gather loop in float64.
func naiveConv2d(c conv2dCase, x, w, b *tensor.Tensor, os []int) []float64 {
	xv, wv := f64s(x), f64s(w)
	n, ci, h, wd := x.Shape[0], x.Shape[1], x.Shape[2], x.Shape[3]
	o, kh, kw := w.Shape[0], w.Shape[2], w.Shape[3]
	cg, og := ci/int(c.groups), o/int(c.groups)
	out := make([]float64, tensor.NumElements(os))
	for idx := range out {
		q := unravel(idx, os)
		nn, oo, y, xx := q[0], q[1], q[2], q[3]
		g := oo / og
		s := 0.0
		if b != nil {
			s = b.Float64At(oo)
		}
		for cc := 0; cc < cg; cc++ {
			for i := 0; i < kh; i++ {
				for j := 0; j < kw; j++ {
					iy := y*int(c.strides[0]) - int(c.pads[0]) + i*int(c.dil[0])
					ix := xx*int(c.strides[1]) - int(c.pads[1]) + j*int(c.dil[1])
					if iy < 0 || iy >= h || ix < 0 || ix >= wd {
						continue
					}
					s += xv[((nn*ci+g*cg+cc)*h+iy)*wd+ix] * wv[((oo*cg+cc)*kh+i)*kw+j]
				}
			}
		}
		out[idx] = s
	}
	_ = n
	return out
}

// naiveConvTranspose2d scatters every input pixel through the kernel, in
// float64 (the opposite loop order of the kernel's gather).
func naiveConvTranspose2d(c conv2dCase, x, w, b *tensor.Tensor, os []int) []float64 {
	xv, wv := f64s(x), f64s(w)
	n, ci, h, wd := x.Shape[0], x.Shape[1], x.Shape[2], x.Shape[3]
	og, kh, kw := w.Shape[1], w.Shape[2], w.Shape[3]
	cg := ci / int(c.groups)
	o, ho, wo := os[1], os[2], os[3]
	out := make([]float64, tensor.NumElements(os))
	for nn := 0; nn < n; nn++ {
		for oo := 0; oo < o; oo++ {
			for p := 0; p < ho*wo; p++ {
				if b != nil {
					out[(nn*o+oo)*ho*wo+p] = b.Float64At(oo)
				}
			}
		}
		for cc := 0; cc < ci; cc++ {
			g := cc / cg
			for iy := 0; iy < h; iy++ {
				for ix := 0; ix < wd; ix++ {
					v := xv[((nn*ci+cc)*h+iy)*wd+ix]
					for ol := 0; ol < og; ol++ {
						oo := g*og + ol
						for i := 0; i < kh; i++ {
							for j := 0; j < kw; j++ {
								y := iy*int(c.strides[0]) - int(c.pads[0]) + i*int(c.dil[0])
								xx := ix*int(c.strides[1]) - int(c.pads[1]) + j*int(c.dil[1])
								if y < 0 || y >= ho || xx < 0 || xx >= wo {
									continue
								}
								out[((nn*o+oo)*ho+y)*wo+xx] += v * wv[((cc*og+ol)*kh+i)*kw+j]
							}
						}
					}
				}
			}
		}
	}
	return out
}

func TestConv2d(t *testing.T) {
	d := New()
	r := newRand(50)
	one, zero := [2]int64{1, 1}, [4]int64{}
	cases := []conv2dCase{
		{x: []int{1, 1, 28, 28}, w: []int{8, 1, 5, 5}, bias: true, strides: one, dil: one, pads: [4]int64{2, 2, 2, 2}, groups: 1},
		{x: []int{2, 3, 17, 13}, w: []int{16, 3, 3, 3}, bias: true, strides: [2]int64{2, 2}, dil: one, pads: [4]int64{1, 1, 1, 1}, groups: 1},
		{x: []int{1, 8, 9, 11}, w: []int{8, 1, 3, 3}, strides: one, dil: [2]int64{2, 3}, pads: [4]int64{0, 2, 1, 3}, groups: 8},
		{x: []int{1, 6, 7, 7}, w: []int{4, 3, 1, 2}, bias: true, strides: [2]int64{1, 3}, dil: one, pads: zero, groups: 2},
		{x: []int{1, 64, 40, 40}, w: []int{32, 64, 1, 1}, strides: one, dil: one, pads: zero, groups: 1}, // > one block of pixels
		{x: []int{1, 2, 3, 3}, w: []int{3, 2, 3, 3}, strides: [2]int64{5, 5}, dil: one, pads: [4]int64{2, 2, 2, 2}, groups: 1},
	}
	for _, c := range cases {
		x, w := randF32(r, c.x...), randF32(r, c.w...)
		in := []*tensor.Tensor{x, w}
		var b *tensor.Tensor
		if c.bias {
			b = randF32(r, c.w[0])
			in = append(in, b)
		}
		got := launch(t, d, ir.OpConv2D, c.attrs(), in...)
		want := naiveConv2d(c, x, w, b, got.Shape)
		approx(t, fmt.Sprintf("conv2d %+v", c), want, f64s(got), 1e-5, 1e-5)
	}
}

func TestConvTranspose2d(t *testing.T) {
	d := New()
	r := newRand(51)
	one, zero := [2]int64{1, 1}, [4]int64{}
	cases := []conv2dCase{
		{x: []int{1, 4, 5, 5}, w: []int{4, 2, 2, 2}, bias: true, strides: [2]int64{2, 2}, dil: one, pads: zero, groups: 1},
		{x: []int{2, 4, 5, 6}, w: []int{4, 3, 3, 3}, strides: [2]int64{2, 3}, dil: one, pads: [4]int64{1, 0, 1, 2}, groups: 2, outPad: [2]int64{1, 2}},
		{x: []int{1, 3, 4, 4}, w: []int{3, 2, 3, 2}, bias: true, strides: one, dil: [2]int64{2, 3}, pads: [4]int64{0, 1, 2, 0}, groups: 1, outPad: [2]int64{1, 0}},
		{x: []int{1, 8, 20, 20}, w: []int{8, 8, 2, 2}, strides: [2]int64{2, 2}, dil: one, pads: zero, groups: 1},
	}
	for _, c := range cases {
		c.transpose = true
		x, w := randF32(r, c.x...), randF32(r, c.w...)
		in := []*tensor.Tensor{x, w}
		var b *tensor.Tensor
		if c.bias {
			b = randF32(r, c.w[1]*int(c.groups))
			in = append(in, b)
		}
		got := launch(t, d, ir.OpConvTranspose2D, c.attrs(), in...)
		want := naiveConvTranspose2d(c, x, w, b, got.Shape)
		approx(t, fmt.Sprintf("conv_transpose2d %+v", c), want, f64s(got), 1e-5, 1e-5)
	}
}

// naivePool follows the op's definition in float64.
func naivePool(x *tensor.Tensor, a ir.Attrs, os []int) []float64 {
	xv := f64s(x)
	h, w := x.Shape[2], x.Shape[3]
	k, st, pd, dl := a.Ints("kernel"), a.Ints("strides"), a.Ints("pads"), a.Ints("dilations")
	out := make([]float64, tensor.NumElements(os))
	for idx := range out {
		q := unravel(idx, os)
		plane := (q[0]*os[1] + q[1]) * h * w
		y0, x0 := q[2]*int(st[0])-int(pd[0]), q[3]*int(st[1])-int(pd[1])
		m, s, n, padded := math.Inf(-1), 0.0, 0, 0
		for i := 0; i < int(k[0]); i++ {
			for j := 0; j < int(k[1]); j++ {
				iy, ix := y0+i*int(dl[0]), x0+j*int(dl[1])
				if iy >= -int(pd[0]) && iy < h+int(pd[2]) && ix >= -int(pd[1]) && ix < w+int(pd[3]) {
					padded++
				}
				if iy < 0 || iy >= h || ix < 0 || ix >= w {
					continue
				}
				v := xv[plane+iy*w+ix]
				m = math.Max(m, v)
				s += v
				n++
			}
		}
		switch {
		case a.String("mode") == "max":
			out[idx] = m
		case a.Bool("count_include_pad"):
			out[idx] = s / float64(padded)
		default:
			out[idx] = s / float64(n)
		}
	}
	return out
}

func TestPool2d(t *testing.T) {
	d := New()
	r := newRand(52)
	type pc struct {
		shape []int
		attrs ir.Attrs
	}
	ints := ir.IntsAttr
	cases := []pc{
		{[]int{1, 8, 24, 24}, ir.Attrs{"kernel": ints(2, 2), "strides": ints(2, 2)}},
		{[]int{2, 3, 7, 9}, ir.Attrs{"kernel": ints(3, 3), "strides": ints(2, 2), "pads": ints(1, 1, 1, 1)}},
		{[]int{1, 2, 7, 8}, ir.Attrs{"kernel": ints(3, 2), "strides": ints(2, 3), "ceil_mode": ir.BoolAttr(true), "pads": ints(0, 1, 1, 0)}},
		{[]int{1, 2, 9, 9}, ir.Attrs{"kernel": ints(2, 3), "dilations": ints(2, 2), "pads": ints(1, 2, 1, 2)}},
		{[]int{1, 3, 7, 9}, ir.Attrs{"mode": ir.StringAttr("avg"), "kernel": ints(3, 3), "strides": ints(2, 2), "pads": ints(1, 1, 1, 1)}},
		{[]int{1, 3, 7, 9}, ir.Attrs{"mode": ir.StringAttr("avg"), "kernel": ints(3, 3), "strides": ints(2, 2), "pads": ints(1, 1, 1, 1), "count_include_pad": ir.BoolAttr(true)}},
		{[]int{1, 2, 6, 6}, ir.Attrs{"mode": ir.StringAttr("avg"), "kernel": ints(3, 3), "strides": ints(2, 2), "ceil_mode": ir.BoolAttr(true), "count_include_pad": ir.BoolAttr(true), "pads": ints(1, 1, 0, 0)}},
		{[]int{1, 4, 5, 6}, ir.Attrs{"mode": ir.StringAttr("avg"), "kernel": ints(5, 6)}},
	}
	for _, c := range cases {
		x := randF32(r, c.shape...)
		got := launch(t, d, ir.OpPool2D, c.attrs, x)
		_, na, _ := ir.InferTypes(ir.OpPool2D, []ir.Type{x.Type()}, c.attrs)
		approx(t, fmt.Sprintf("pool2d %v %v", c.shape, c.attrs), naivePool(x, na, got.Shape), f64s(got), 1e-6, 1e-6)
	}
}

// naiveResize follows ONNX's reference: the coordinate in float64, linear
// interpolation as weights of the two neighbours.
func naiveResize(x *tensor.Tensor, a ir.Attrs, os []int) []float64 {
	xv := f64s(x)
	h, w := x.Shape[2], x.Shape[3]
	coord := func(k, xo, in, size int) float64 {
		scale, out := float64(size)/float64(in), float64(size)
		if sc := a.Floats("scales"); len(sc) == 2 {
			scale = sc[k]
			out = float64(in) * scale
		}
		xf := float64(xo)
		switch a.String("coord") {
		case "half_pixel":
			return (xf+0.5)/scale - 0.5
		case "pytorch_half_pixel":
			if out > 1 {
				return (xf+0.5)/scale - 0.5
			}
			return 0
		case "align_corners":
			if out > 1 {
				return xf * float64(in-1) / (out - 1)
			}
			return 0
		case "asymmetric":
			return xf / scale
		}
		return (xf + 0.5) / scale
	}
	near := func(v float64, in int) int {
		var r float64
		switch a.String("nearest") {
		case "floor":
			r = math.Floor(v)
		case "ceil":
			r = math.Ceil(v)
		case "round_prefer_floor":
			r = math.Round(v)
			if v-math.Floor(v) == 0.5 {
				r = math.Floor(v)
			}
		default:
			r = math.Round(v)
		}
		return int(math.Min(math.Max(r, 0), float64(in-1)))
	}
	out := make([]float64, tensor.NumElements(os))
	for idx := range out {
		q := unravel(idx, os)
		plane := (q[0]*os[1] + q[1]) * h * w
		cy, cx := coord(0, q[2], h, os[2]), coord(1, q[3], w, os[3])
		if a.String("mode") == "nearest" {
			out[idx] = xv[plane+near(cy, h)*w+near(cx, w)]
			continue
		}
		cy, cx = math.Min(math.Max(cy, 0), float64(h-1)), math.Min(math.Max(cx, 0), float64(w-1))
		y0, x0 := int(cy), int(cx)
		y1, x1 := min(y0+1, h-1), min(x0+1, w-1)
		ly, lx := cy-float64(y0), cx-float64(x0)
		at := func(y, x int) float64 { return xv[plane+y*w+x] }
		out[idx] = (1-ly)*((1-lx)*at(y0, x0)+lx*at(y0, x1)) + ly*((1-lx)*at(y1, x0)+lx*at(y1, x1))
	}
	return out
}

func TestResize(t *testing.T) {
	d := New()
	r := newRand(53)
	x := randF32(r, 1, 3, 4, 5)
	for _, mode := range []string{"nearest", "linear"} {
		for _, coord := range ir.ResizeCoordModes {
			for _, near := range ir.ResizeNearestModes {
				if mode == "linear" && near != "round_prefer_floor" {
					continue
				}
				for _, size := range [][2]int64{{8, 10}, {3, 2}, {1, 7}, {9, 13}} {
					a := ir.Attrs{"size": ir.IntsAttr(size[:]...), "mode": ir.StringAttr(mode), "coord": ir.StringAttr(coord), "nearest": ir.StringAttr(near)}
					if size == [2]int64{9, 13} {
						a["scales"] = ir.FloatsAttr(2.3, 2.7)
					}
					got := launch(t, d, ir.OpResize, a, x)
					_, na, _ := ir.InferTypes(ir.OpResize, []ir.Type{x.Type()}, a)
					approx(t, fmt.Sprintf("resize %v %s %s %s", size, mode, coord, near), naiveResize(x, na, got.Shape), f64s(got), 1e-5, 1e-6)
				}
			}
		}
	}
}

func TestIota(t *testing.T) {
	d := New()
	got := launch(t, d, ir.OpIota, ir.Attrs{"shape": ir.ShapeAttr(ir.S(2, 3)), "axis": ir.IntAttr(-1)}, tensor.ScalarInt32(5))
	want := []int32{5, 6, 7, 5, 6, 7}
	for i, v := range got.Int32s() {
		if v != want[i] {
			t.Fatalf("iota axis -1 = %v, want %v", got.Int32s(), want)
		}
	}
	got = launch(t, d, ir.OpIota, ir.Attrs{"shape": ir.ShapeAttr(ir.S(3, 2))}, tensor.ScalarInt32(-1))
	want = []int32{-1, -1, 0, 0, 1, 1}
	for i, v := range got.Int32s() {
		if v != want[i] {
			t.Fatalf("iota axis 0 = %v, want %v", got.Int32s(), want)
		}
	}
	// A symbolic shape takes its size from the expected output type.
	n := &ir.Node{ID: 1, Op: ir.OpIota, Attrs: ir.Attrs{"shape": ir.ShapeAttr(ir.Shape{ir.Sym("seq")}), "axis": ir.IntAttr(0)}}
	res, err := d.Launch(n, bufs(d, []*tensor.Tensor{tensor.ScalarInt32(3)}), []ir.Type{ir.T(ir.I32, ir.S(4))})
	if err != nil {
		t.Fatal(err)
	}
	if g, _ := Tensor(res[0]); fmt.Sprint(g.Int32s()) != "[3 4 5 6]" {
		t.Errorf("iota [seq=4] from 3 = %v", g.Int32s())
	}
	if _, err := d.Launch(n, bufs(d, []*tensor.Tensor{tensor.ScalarInt32(3)}), nil); err == nil {
		t.Error("iota with a symbolic shape and no output type: no error")
	}
}

func TestReduce(t *testing.T) {
	d := New()
	r := newRand(54)
	x := randF32(r, 3, 4, 5)
	xv := f64s(x)
	for _, op := range ir.ReduceOps {
		for _, axes := range [][]int64{{-1}, {0}, {1}, {0, 2}, {2, 0, 1}, {}} {
			for _, keep := range []bool{true, false} {
				got := launch(t, d, op, ir.Attrs{"axes": ir.IntsAttr(axes...), "keepdims": ir.BoolAttr(keep)}, x)
				red := map[int]bool{}
				for _, a := range axes {
					red[int((a+3)%3)] = true
				}
				// naive: for each output element, scan every input element.
				var kept []int
				for i := 0; i < 3; i++ {
					if !red[i] {
						kept = append(kept, x.Shape[i])
					}
				}
				want := make([]float64, tensor.NumElements(kept))
				for o := range want {
					oq := unravel(o, kept)
					s, m, n := 0.0, math.Inf(-1), 0
					for i, v := range xv {
						q := unravel(i, x.Shape)
						match, k := true, 0
						for j := 0; j < 3; j++ {
							if !red[j] {
								match = match && q[j] == oq[k]
								k++
							}
						}
						if match {
							s, m, n = s+v, math.Max(m, v), n+1
						}
					}
					switch op {
					case ir.OpReduceSum:
						want[o] = s
					case ir.OpReduceMean:
						want[o] = s / float64(n)
					default:
						want[o] = m
					}
				}
				approx(t, fmt.Sprintf("%s %v keepdims=%v", op, axes, keep), want, f64s(got), 1e-5, 1e-6)
			}
		}
	}
	nan := tensor.FromFloat32([]int{3}, []float32{1, float32(math.NaN()), 2})
	if got := launch(t, d, ir.OpReduceMax, ir.Attrs{"axes": ir.IntsAttr(0)}, nan); !math.IsNaN(got.Float64At(0)) {
		t.Errorf("reduce_max over a NaN = %v", got.Float64At(0))
	}
}

// Bad calls give errors.
func TestNNErrors(t *testing.T) {
	d := New()
	r := newRand(55)
	x := randF32(r, 1, 2, 4, 4)
	for _, c := range []struct {
		op    ir.Op
		attrs ir.Attrs
		in    []*tensor.Tensor
		msg   string
	}{
		{ir.OpConv2D, nil, []*tensor.Tensor{x, randF32(r, 3, 3, 1, 1)}, "channels"},
		{ir.OpConv2D, nil, []*tensor.Tensor{x.Convert(ir.I32), randF32(r, 3, 2, 1, 1)}, "f32"},
		{ir.OpPool2D, ir.Attrs{"kernel": ir.IntsAttr(5, 5)}, []*tensor.Tensor{x}, "does not fit"},
		{ir.OpResize, ir.Attrs{"size": ir.IntsAttr(2, 2), "mode": ir.StringAttr("cubic")}, []*tensor.Tensor{x}, "mode"},
		{ir.OpReduceSum, ir.Attrs{"axes": ir.IntsAttr(4)}, []*tensor.Tensor{x}, "out of range"},
		{ir.OpIota, ir.Attrs{"shape": ir.ShapeAttr(ir.S(2))}, []*tensor.Tensor{tensor.FromInt32([]int{1}, []int32{0})}, "i32 scalar"},
	} {
		if err := launchRaw(d, c.op, c.attrs, c.in...); err == nil || !contains(err.Error(), c.msg) {
			t.Errorf("%s %v: error %v, want one with %q", c.op, c.attrs, err, c.msg)
		}
	}
}

func contains(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return true
		}
	}
	return false
}
