package msl

import (
	"strings"
	"testing"

	"github.com/tapml/tapml/ir"
)

// nnGenCases are the generator cases of the ops of ir/ops_nn.go (genCases
// includes them, so every other test covers them too).
func nnGenCases() []genCase {
	ints := ir.IntsAttr
	return []genCase{
		{"iota", "iota", ir.Attrs{"shape": ir.ShapeAttr(ir.S(3, 5)), "axis": ir.IntAttr(1)}, []ir.Type{i32()}},
		{"iota_1d", "iota", ir.Attrs{"shape": ir.ShapeAttr(ir.S(7))}, []ir.Type{i32()}},
		{"conv2d", "conv2d", ir.Attrs{"pads": ints(1, 1, 1, 1), "strides": ints(2, 2)}, []ir.Type{f32(1, 3, 17, 19), f32(16, 3, 3, 3), f32(16)}},
		{"conv2d_dw", "conv2d", ir.Attrs{"pads": ints(1, 1, 1, 1), "groups": ir.IntAttr(8)}, []ir.Type{f32(2, 8, 9, 9), f32(8, 1, 3, 3)}},
		{"conv2d_dilated", "conv2d", ir.Attrs{"dilations": ints(2, 3), "pads": ints(0, 2, 1, 0)}, []ir.Type{f32(1, 5, 11, 10), f32(3, 5, 2, 3), f32(3)}},
		{"conv_transpose2d", "conv_transpose2d", ir.Attrs{"strides": ints(2, 2)}, []ir.Type{f32(1, 8, 5, 5), f32(8, 4, 2, 2), f32(4)}},
		{"conv_transpose2d_groups", "conv_transpose2d", ir.Attrs{"strides": ints(3, 2), "pads": ints(1, 0, 1, 1), "groups": ir.IntAttr(2), "output_padding": ints(1, 1)}, []ir.Type{f32(2, 4, 3, 4), f32(4, 3, 3, 2)}},
		{"pool2d", "pool2d", ir.Attrs{"kernel": ints(3, 3), "strides": ints(2, 2), "pads": ints(1, 1, 1, 1)}, []ir.Type{f32(1, 4, 9, 9)}},
		{"pool2d_ceil_dilated", "pool2d", ir.Attrs{"kernel": ints(2, 3), "dilations": ints(2, 1), "ceil_mode": ir.BoolAttr(true), "strides": ints(2, 2)}, []ir.Type{f32(2, 3, 10, 8)}},
		{"pool2d_avg", "pool2d", ir.Attrs{"mode": ir.StringAttr("avg"), "kernel": ints(2, 2), "count_include_pad": ir.BoolAttr(true), "pads": ints(1, 1, 0, 0)}, []ir.Type{f32(1, 4, 9, 9)}},
		{"pool2d_avg_exclude", "pool2d", ir.Attrs{"mode": ir.StringAttr("avg"), "kernel": ints(3, 3), "pads": ints(1, 1, 1, 1)}, []ir.Type{f32(1, 2, 6, 6)}},
		{"resize", "resize", ir.Attrs{"size": ints(10, 14)}, []ir.Type{f32(1, 2, 5, 7)}},
		{"resize_ceil_asym", "resize", ir.Attrs{"size": ints(4, 9), "nearest": ir.StringAttr("ceil"), "coord": ir.StringAttr("asymmetric"), "scales": ir.FloatsAttr(0.8, 1.3)}, []ir.Type{f32(1, 2, 5, 7)}},
		{"resize_prefer_ceil_tf", "resize", ir.Attrs{"size": ints(3, 3), "nearest": ir.StringAttr("round_prefer_ceil"), "coord": ir.StringAttr("tf_half_pixel_for_nn")}, []ir.Type{f32(1, 1, 6, 6)}},
		{"resize_floor_pytorch", "resize", ir.Attrs{"size": ints(1, 5), "nearest": ir.StringAttr("floor"), "coord": ir.StringAttr("pytorch_half_pixel")}, []ir.Type{f32(1, 1, 6, 6)}},
		{"resize_linear", "resize", ir.Attrs{"size": ints(3, 4), "mode": ir.StringAttr("linear"), "coord": ir.StringAttr("align_corners")}, []ir.Type{f32(1, 2, 5, 7)}},
		{"resize_linear_align_scales", "resize", ir.Attrs{"size": ints(7, 3), "mode": ir.StringAttr("linear"), "coord": ir.StringAttr("align_corners"), "scales": ir.FloatsAttr(1.5, 0.5)}, []ir.Type{f32(1, 2, 5, 7)}},
		{"resize_linear_half", "resize", ir.Attrs{"size": ints(10, 1), "mode": ir.StringAttr("linear")}, []ir.Type{f32(2, 1, 5, 7)}},
		{"reduce_sum", "reduce_sum", ir.Attrs{"axes": ints(0, 2)}, []ir.Type{f32(3, 4, 5)}},
		{"reduce_sum_all", "reduce_sum", ir.Attrs{"axes": ints(0, 1), "keepdims": ir.BoolAttr(false)}, []ir.Type{f32(3, 4)}},
		{"reduce_sum_none", "reduce_sum", ir.Attrs{"axes": ints()}, []ir.Type{f32(3, 4)}},
		{"reduce_mean", "reduce_mean", ir.Attrs{"axes": ints(-1)}, []ir.Type{f32(7, 64)}},
		{"reduce_max", "reduce_max", ir.Attrs{"axes": ints(1), "keepdims": ir.BoolAttr(false)}, []ir.Type{f32(2, 9, 3)}},
	}
}

// The convolution kernel blocks channels and pixels; wrong_index applies to
// the convolutions and pool2d only, f16_overflow to the convolutions and
// the sums.
func TestNNKernels(t *testing.T) {
	for _, c := range nnGenCases() {
		k, err := c.generate(t, Options{})
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		src := string(k.Source)
		if c.name == "conv2d" && !strings.Contains(src, "acc7_3") {
			t.Errorf("%s: no 8×4 register tile in\n%s", c.name, src)
		}
		_, err = c.generate(t, Options{Fault: FaultWrongIndex})
		applies := c.op == "conv2d" || c.op == "conv_transpose2d" || c.op == "pool2d"
		if (err == nil) != applies {
			t.Errorf("%s: wrong_index: %v (applies: %v)", c.name, err, applies)
		}
		_, err = c.generate(t, Options{Fault: FaultF16Overflow})
		applies = c.op == "conv2d" || c.op == "conv_transpose2d" || c.op == "reduce_sum" || c.op == "reduce_mean"
		if (err == nil) != applies {
			t.Errorf("%s: f16_overflow: %v (applies: %v)", c.name, err, applies)
		}
	}
}
