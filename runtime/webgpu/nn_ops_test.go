package webgpu

import (
	"fmt"
	"math/rand/v2"

	"github.com/tapml/tapml/ir"
	"github.com/tapml/tapml/tensor"
)

// nnOpCases are the kernel tests of the ops of ir/ops_nn.go (opCases
// includes them). Tolerances: the convolutions are f32 dot products over
// K = C/groups·kh·kw in another order than the reference's (mmTol(K));
// avg pooling and reduce_sum/mean sum in the same order as the reference
// but may fuse multiply-adds: 1e-5 relative; pool max, nearest resize and
// iota are exact; linear resize interpolates with possibly fused
// multiply-adds: 1e-6 absolute on inputs in [-1, 1].
func nnOpCases() []opCase {
	var cs []opCase
	ints := ir.IntsAttr
	add := func(c opCase) { cs = append(cs, c) }
	conv := func(name string, op ir.Op, a ir.Attrs, x, w []int, bias int) {
		fs := []func(r *rand.Rand) *tensor.Tensor{f32s(-1, 1, x...), f32s(-1, 1, w...)}
		if bias > 0 {
			fs = append(fs, f32s(-1, 1, bias))
		}
		k := w[1] * w[2] * w[3]
		if op == ir.OpConvTranspose2D {
			k = w[0] * w[2] * w[3]
		}
		add(opCase{name: op.String() + " " + name, op: op, attrs: a, gen: ins(fs...), tol: mmTol(k)})
	}
	conv("mnist 5x5 same", ir.OpConv2D, ir.Attrs{"pads": ints(2, 2, 2, 2)}, []int{1, 1, 28, 28}, []int{8, 1, 5, 5}, 8)
	conv("stride 2", ir.OpConv2D, ir.Attrs{"pads": ints(1, 1, 1, 1), "strides": ints(2, 2)}, []int{1, 3, 33, 31}, []int{16, 3, 3, 3}, 16)
	conv("depthwise dilated", ir.OpConv2D, ir.Attrs{"pads": ints(2, 2, 2, 2), "dilations": ints(2, 2), "groups": ir.IntAttr(12)}, []int{2, 12, 9, 10}, []int{12, 1, 3, 3}, 12)
	conv("grouped odd", ir.OpConv2D, ir.Attrs{"pads": ints(0, 1, 2, 0), "strides": ints(1, 3), "groups": ir.IntAttr(2)}, []int{1, 6, 7, 11}, []int{10, 3, 2, 3}, 0)
	conv("1x1 wide", ir.OpConv2D, nil, []int{1, 64, 12, 12}, []int{24, 64, 1, 1}, 24)
	conv("2x2 s2", ir.OpConvTranspose2D, ir.Attrs{"strides": ints(2, 2)}, []int{1, 16, 8, 8}, []int{16, 8, 2, 2}, 8)
	conv("3x3 pads outpad groups", ir.OpConvTranspose2D, ir.Attrs{"strides": ints(2, 3), "pads": ints(1, 0, 1, 2), "output_padding": ints(1, 2), "groups": ir.IntAttr(2)}, []int{2, 4, 5, 6}, []int{4, 3, 3, 3}, 6)
	conv("dilated", ir.OpConvTranspose2D, ir.Attrs{"dilations": ints(2, 3), "pads": ints(0, 1, 2, 0), "output_padding": ints(1, 0)}, []int{1, 3, 4, 4}, []int{3, 2, 3, 2}, 2)

	pool := func(name string, a ir.Attrs, shape ...int) {
		tl := exact
		if a["mode"].Str == "avg" {
			tl = tol{Abs: 1e-6, Rel: 1e-5}
		}
		add(opCase{name: "pool2d " + name, op: ir.OpPool2D, attrs: a, gen: ins(f32s(-1, 1, shape...)), tol: tl})
	}
	pool("max 2x2", ir.Attrs{"kernel": ints(2, 2), "strides": ints(2, 2)}, 1, 8, 24, 24)
	pool("max 3x3 pads", ir.Attrs{"kernel": ints(3, 3), "strides": ints(2, 2), "pads": ints(1, 1, 1, 1)}, 2, 3, 7, 9)
	pool("max ceil dilated", ir.Attrs{"kernel": ints(2, 3), "strides": ints(2, 1), "dilations": ints(2, 2), "ceil_mode": ir.BoolAttr(true), "pads": ints(1, 2, 1, 2)}, 1, 2, 9, 9)
	pool("avg pads", ir.Attrs{"mode": ir.StringAttr("avg"), "kernel": ints(3, 3), "strides": ints(2, 2), "pads": ints(1, 1, 1, 1)}, 1, 3, 7, 9)
	pool("avg include pad ceil", ir.Attrs{"mode": ir.StringAttr("avg"), "kernel": ints(3, 3), "strides": ints(2, 2), "ceil_mode": ir.BoolAttr(true), "count_include_pad": ir.BoolAttr(true), "pads": ints(1, 1, 0, 0)}, 1, 2, 6, 6)
	pool("avg global", ir.Attrs{"mode": ir.StringAttr("avg"), "kernel": ints(5, 6)}, 1, 4, 5, 6)

	for _, m := range []struct{ mode, coord, near string }{
		{"nearest", "asymmetric", "floor"}, {"nearest", "half_pixel", "round_prefer_floor"}, {"nearest", "align_corners", "round_prefer_ceil"},
		{"nearest", "tf_half_pixel_for_nn", "ceil"}, {"linear", "half_pixel", ""}, {"linear", "align_corners", ""},
		{"linear", "pytorch_half_pixel", ""}, {"linear", "asymmetric", ""},
	} {
		for _, size := range [][2]int64{{10, 14}, {3, 4}, {1, 9}} {
			a := ir.Attrs{"size": ints(size[:]...), "mode": ir.StringAttr(m.mode), "coord": ir.StringAttr(m.coord)}
			if m.near != "" {
				a["nearest"] = ir.StringAttr(m.near)
			}
			tl := exact
			if m.mode == "linear" {
				tl = tol{Abs: 1e-6}
			}
			add(opCase{name: fmt.Sprintf("resize %s %s %s %v", m.mode, m.coord, m.near, size), op: ir.OpResize, attrs: a, gen: ins(f32s(-1, 1, 1, 2, 5, 7)), tol: tl})
		}
	}
	add(opCase{name: "resize scales align_corners", op: ir.OpResize, attrs: ir.Attrs{"size": ints(1, 4), "scales": ir.FloatsAttr(0.6, 0.6), "mode": ir.StringAttr("linear"), "coord": ir.StringAttr("align_corners")}, gen: ins(f32s(-1, 1, 1, 2, 2, 7)), tol: tol{Abs: 1e-6}})
	add(opCase{name: "resize scales", op: ir.OpResize, attrs: ir.Attrs{"size": ints(11, 16), "scales": ir.FloatsAttr(2.3, 2.4), "mode": ir.StringAttr("linear")}, gen: ins(f32s(-1, 1, 1, 2, 5, 7)), tol: tol{Abs: 1e-6}})

	add(opCase{name: "iota", op: ir.OpIota, attrs: ir.Attrs{"shape": ir.ShapeAttr(ir.S(3, 5)), "axis": ir.IntAttr(1)}, gen: ins(scalar(7)), tol: exact})
	add(opCase{name: "iota axis0", op: ir.OpIota, attrs: ir.Attrs{"shape": ir.ShapeAttr(ir.S(9))}, gen: ins(scalar(-3)), tol: exact})
	for _, op := range ir.ReduceOps {
		tl := tol{Abs: 1e-6, Rel: 1e-5}
		if op == ir.OpReduceMax {
			tl = exact
		}
		for _, axes := range [][]int64{{-1}, {0, 2}, {1}, {0, 1, 2}} {
			add(opCase{name: fmt.Sprintf("%s %v", op, axes), op: op, attrs: ir.Attrs{"axes": ints(axes...)}, gen: ins(f32s(-1, 1, 3, 40, 5)), tol: tl})
		}
		add(opCase{name: op.String() + " keepdims false", op: op, attrs: ir.Attrs{"axes": ints(1), "keepdims": ir.BoolAttr(false)}, gen: ins(f32s(-1, 1, 2, 300)), tol: tl})
	}
	return cs
}
