package wgsl

import (
	"strings"
	"testing"

	"github.com/tapml/tapml/ir"
)

// nnGenCases are the generator cases of the ops of ir/ops_nn.go (genCases
// includes them).
func nnGenCases() []genCase {
	ints := ir.IntsAttr
	return []genCase{
		{"iota", "iota", ir.Attrs{"shape": ir.ShapeAttr(ir.S(3, 5)), "axis": ir.IntAttr(1)}, []ir.Type{i32()}},
		{"conv2d", "conv2d", ir.Attrs{"pads": ints(1, 1, 1, 1), "strides": ints(2, 2)}, []ir.Type{f32(1, 3, 17, 19), f32(16, 3, 3, 3), f32(16)}},
		{"conv2d_dw", "conv2d", ir.Attrs{"pads": ints(1, 1, 1, 1), "groups": ir.IntAttr(8)}, []ir.Type{f32(2, 8, 9, 9), f32(8, 1, 3, 3)}},
		{"conv_transpose2d", "conv_transpose2d", ir.Attrs{"strides": ints(2, 2)}, []ir.Type{f32(1, 8, 5, 5), f32(8, 4, 2, 2), f32(4)}},
		{"pool2d", "pool2d", ir.Attrs{"kernel": ints(3, 3), "strides": ints(2, 2), "pads": ints(1, 1, 1, 1)}, []ir.Type{f32(1, 4, 9, 9)}},
		{"pool2d_avg", "pool2d", ir.Attrs{"mode": ir.StringAttr("avg"), "kernel": ints(2, 2), "count_include_pad": ir.BoolAttr(true), "pads": ints(1, 1, 0, 0)}, []ir.Type{f32(1, 4, 9, 9)}},
		{"resize", "resize", ir.Attrs{"size": ints(10, 14)}, []ir.Type{f32(1, 2, 5, 7)}},
		{"resize_linear", "resize", ir.Attrs{"size": ints(3, 4), "mode": ir.StringAttr("linear"), "coord": ir.StringAttr("align_corners")}, []ir.Type{f32(1, 2, 5, 7)}},
		{"reduce_sum", "reduce_sum", ir.Attrs{"axes": ints(0, 2)}, []ir.Type{f32(3, 4, 5)}},
		{"reduce_mean", "reduce_mean", ir.Attrs{"axes": ints(-1)}, []ir.Type{f32(7, 64)}},
		{"reduce_max", "reduce_max", ir.Attrs{"axes": ints(1), "keepdims": ir.BoolAttr(false)}, []ir.Type{f32(2, 9, 3)}},
	}
}

// The convolution kernel blocks channels and pixels; wrong_index applies to
// the convolutions and pool2d only.
func TestNNKernels(t *testing.T) {
	for _, c := range nnGenCases() {
		k, err := Generate(c.node(t), c.in, nil, Options{})
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		src := string(k.Source)
		if c.op == "conv2d" && !strings.Contains(src, "acc0_3") {
			t.Errorf("%s: no 4-pixel register tile in\n%s", c.name, src)
		}
		_, err = Generate(c.node(t), c.in, nil, Options{Fault: FaultWrongIndex})
		applies := c.op == "conv2d" || c.op == "conv_transpose2d" || c.op == "pool2d"
		if (err == nil) != applies {
			t.Errorf("%s: wrong_index: %v (applies: %v)", c.name, err, applies)
		}
	}
}
