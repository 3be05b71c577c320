package ir

import (
	"math"
	"strings"
	"testing"
)

// Round-trip rows for the ops of ops_nn.go: each sets every attribute to a
// value other than its default.
func init() {
	x4 := func(c *opCtx) *Value { return c.b.Reshape(c.x, Shape{Sym("seq"), D(2), D(2), D(2)}) }
	opCases["iota"] = func(c *opCtx) {
		c.b.Op("iota", []*Value{c.pos}, Attrs{"shape": ShapeAttr(Shape{Sym("seq"), D(3)}), "axis": IntAttr(-1)})
	}
	opCases["conv2d"] = func(c *opCtx) {
		w := c.b.M.AddWeight("conv.w", T(F32, S(4, 1, 2, 1)), nil)
		b := c.b.M.AddWeight("conv.b", T(F32, S(4)), nil)
		c.b.Op("conv2d", []*Value{x4(c), w, b}, Attrs{"strides": IntsAttr(2, 1), "pads": IntsAttr(1, 0, 1, 2),
			"dilations": IntsAttr(1, 2), "groups": IntAttr(2)})
	}
	opCases["conv_transpose2d"] = func(c *opCtx) {
		w := c.b.M.AddWeight("deconv.w", T(F32, S(2, 2, 2, 2)), nil)
		c.b.Op("conv_transpose2d", []*Value{x4(c), w}, Attrs{"strides": IntsAttr(2, 1), "pads": IntsAttr(0, 1, 1, 0),
			"dilations": IntsAttr(1, 2), "groups": IntAttr(2), "output_padding": IntsAttr(1, 0)})
	}
	opCases["pool2d"] = func(c *opCtx) {
		x := x4(c)
		c.b.Op("pool2d", []*Value{x}, Attrs{"mode": StringAttr("avg"), "kernel": IntsAttr(2, 2), "strides": IntsAttr(2, 1),
			"pads": IntsAttr(1, 0, 0, 1), "ceil_mode": BoolAttr(true), "count_include_pad": BoolAttr(true)})
		c.b.Op("pool2d", []*Value{x}, Attrs{"kernel": IntsAttr(2, 1), "pads": IntsAttr(1, 0, 1, 0), "dilations": IntsAttr(2, 1)})
	}
	opCases["resize"] = func(c *opCtx) {
		c.b.Op("resize", []*Value{x4(c)}, Attrs{"size": IntsAttr(3, 5), "mode": StringAttr("linear"),
			"coord": StringAttr("align_corners"), "nearest": StringAttr("floor"), "scales": FloatsAttr(1.5, 2.5)})
	}
	for _, op := range ReduceOps {
		opCases[op] = func(c *opCtx) {
			c.b.Op(op, []*Value{c.q}, Attrs{"axes": IntsAttr(-1, 0), "keepdims": BoolAttr(false)})
		}
	}
}

// TestInferNN is the shape-inference table of the ops of ops_nn.go.
func TestInferNN(t *testing.T) {
	type tc struct {
		op    string
		in    []string
		attrs Attrs
		want  string
	}
	sp := func(kv ...any) Attrs {
		a := Attrs{}
		for i := 0; i < len(kv); i += 2 {
			switch v := kv[i+1].(type) {
			case []int64:
				a[kv[i].(string)] = IntsAttr(v...)
			case int:
				a[kv[i].(string)] = IntAttr(int64(v))
			case string:
				a[kv[i].(string)] = StringAttr(v)
			case bool:
				a[kv[i].(string)] = BoolAttr(v)
			case []float64:
				a[kv[i].(string)] = FloatsAttr(v...)
			case Shape:
				a[kv[i].(string)] = ShapeAttr(v)
			}
		}
		return a
	}
	ints := func(v ...int64) []int64 { return v }
	tests := []tc{
		{"iota", []string{"i32[]"}, sp("shape", Shape{Sym("seq")}), "i32[seq]"},
		{"iota", []string{"i32[]"}, sp("shape", S(2, 3), "axis", 1), "i32[2, 3]"},
		{"iota", []string{"i32[]"}, sp("shape", S()), "error: axis 0 out of range for rank 0"},
		{"iota", []string{"i64[]"}, sp("shape", S(2)), "error: start must be an i32 scalar"},
		{"iota", []string{"i32[1]"}, sp("shape", S(2)), "error: start must be an i32 scalar"},
		{"iota", []string{"i32[]"}, sp("shape", S(-1)), "error: negative dim"},

		{"conv2d", []string{"f32[1, 1, 28, 28]", "f32[8, 1, 5, 5]"}, sp("pads", ints(2, 2, 2, 2)), "f32[1, 8, 28, 28]"},
		{"conv2d", []string{"f32[n, 3, 32, 32]", "f32[16, 3, 3, 3]", "f32[16]"}, sp("strides", ints(2, 2), "pads", ints(1, 1, 1, 1)), "f32[n, 16, 16, 16]"},
		{"conv2d", []string{"f32[1, 8, 9, 9]", "f32[8, 1, 3, 3]"}, sp("groups", 8, "dilations", ints(2, 2)), "f32[1, 8, 5, 5]"},
		{"conv2d", []string{"f32[1, 8, 9, 9]", "f32[8, 2, 3, 3]"}, sp("groups", 8), "error: with 8 groups w must be [O, 1, kh, kw]"},
		{"conv2d", []string{"f32[1, 3, 4, 4]", "f32[8, 3, 5, 5]"}, nil, "error: does not fit"},
		{"conv2d", []string{"f32[1, 3, 4, 4]", "f32[8, 3, 1, 1]", "f32[4]"}, nil, "error: b must be f32[8]"},
		{"conv2d", []string{"f32[1, 3, 4, 4]", "f32[8, 3, 1, 1]"}, sp("strides", ints(0, 1)), "error: strides [0 1] must be 2 values >= 1"},
		{"conv2d", []string{"f32[1, 3, 4, 4]", "f32[8, 3, 1, 1]"}, sp("pads", ints(1, 1)), "error: pads [1 1] must be 4 values"},
		{"conv2d", []string{"f32[1, 3, 4, 4]", "f32[8, 3, 1, 1]"}, sp("pads", ints(0, 0, 0, -1)), "error: must be >= 0"},
		{"conv2d", []string{"f32[1, 3, 4, 4]", "f32[8, 3, 1, 1]"}, sp("groups", 0), "error: groups must be >= 1"},
		{"conv2d", []string{"f32[1, 3, h, 4]", "f32[8, 3, 1, 1]"}, nil, "error: static C, H and W"},
		{"conv2d", []string{"f32[3, 4, 4]", "f32[8, 3, 1, 1]"}, nil, "error: x must be a float tensor [N, C, H, W]"},
		{"conv2d", []string{"f32[1, 3, 4, 4]", "f16[8, 3, 1, 1]"}, nil, "error: w must be a static f32 tensor"},
		// dh·(kh-1) = 2^31·2^33 wraps to 0 in int64: the kernel still does not fit.
		{"conv2d", []string{"f32[1, 1, 8, 8]", "f32[1, 1, 8589934593, 1]"}, sp("dilations", ints(1<<31-1, 1)), "error: kernel"},
		{"conv2d", []string{"f32[1, 1, 8, 8]", "f32[1, 1, 8589934593, 1]"}, nil, "error: kernel"},

		{"conv_transpose2d", []string{"f32[1, 4, 5, 5]", "f32[4, 2, 3, 3]"}, sp("strides", ints(2, 2), "pads", ints(1, 1, 1, 1), "output_padding", ints(1, 1)), "f32[1, 2, 10, 10]"},
		{"conv_transpose2d", []string{"f32[1, 4, 5, 5]", "f32[4, 2, 2, 2]", "f32[4]"}, sp("strides", ints(2, 2), "groups", 2), "f32[1, 4, 10, 10]"},
		{"conv_transpose2d", []string{"f32[1, 4, 5, 5]", "f32[3, 2, 2, 2]"}, nil, "error: w must be [4, O/groups, kh, kw]"},
		{"conv_transpose2d", []string{"f32[1, 4, 5, 5]", "f32[4, 2, 2, 2]"}, sp("output_padding", ints(1, 0)), "error: output_padding [1 0] must be >= 0 and less than"},
		{"conv_transpose2d", []string{"f32[1, 4, 1, 1]", "f32[4, 2, 1, 1]"}, sp("pads", ints(1, 0, 0, 0)), "error: leave no output"},

		{"pool2d", []string{"f32[1, 8, 28, 28]"}, sp("kernel", ints(2, 2), "strides", ints(2, 2)), "f32[1, 8, 14, 14]"},
		{"pool2d", []string{"f32[1, 1, 5, 5]"}, sp("kernel", ints(2, 2), "strides", ints(2, 2), "ceil_mode", true), "f32[1, 1, 3, 3]"},
		{"pool2d", []string{"f32[1, 1, 4, 4]"}, sp("kernel", ints(3, 3), "strides", ints(2, 2), "pads", ints(1, 1, 1, 1), "ceil_mode", true), "f32[1, 1, 3, 3]"},
		{"pool2d", []string{"f32[1, 1, 5, 5]"}, sp("kernel", ints(3, 3), "pads", ints(1, 1, 1, 1), "mode", "avg"), "f32[1, 1, 5, 5]"},
		{"pool2d", []string{"f32[1, 1, 5, 5]"}, sp("kernel", ints(2, 2), "mode", "min"), `error: mode must be max or avg, got "min"`},
		{"pool2d", []string{"f32[1, 1, 5, 5]"}, sp("kernel", ints(2, 2), "mode", "avg", "dilations", ints(2, 2)), "error: avg pooling needs dilations"},
		{"pool2d", []string{"f32[1, 1, 5, 5]"}, sp("kernel", ints(2, 2), "pads", ints(2, 0, 0, 0)), "error: must be smaller than the kernel"},
		{"pool2d", []string{"f32[1, 1, 5, 5]"}, sp("kernel", ints(2)), "error: kernel [2] must be 2 values >= 1"},
		{"pool2d", []string{"f32[1, 1, 5, 5]"}, nil, `error: missing required attribute "kernel"`},

		{"resize", []string{"f32[1, 3, 4, 5]"}, sp("size", ints(8, 10)), "f32[1, 3, 8, 10]"},
		{"resize", []string{"f32[n, 3, 4, 5]"}, sp("size", ints(2, 3), "mode", "linear", "coord", "pytorch_half_pixel", "scales", []float64{0.5, 0.6}), "f32[n, 3, 2, 3]"},
		{"resize", []string{"f32[1, 3, 4, 5]"}, sp("size", ints(8, 10), "mode", "cubic"), `error: mode must be nearest or linear, got "cubic"`},
		{"resize", []string{"f32[1, 3, 4, 5]"}, sp("size", ints(8, 10), "coord", "tf_crop_and_resize"), `error: coord "tf_crop_and_resize" is not one of`},
		{"resize", []string{"f32[1, 3, 4, 5]"}, sp("size", ints(8, 10), "nearest", "round"), `error: nearest "round" is not one of`},
		{"resize", []string{"f32[1, 3, 4, 5]"}, sp("size", ints(8, 0)), "error: size [8 0] must be 2 values >= 1"},
		{"resize", []string{"f32[1, 3, 4, 5]"}, sp("size", ints(8, 10), "scales", []float64{2}), "error: scales [2] must be empty or 2 positive finite values"},
		{"resize", []string{"f32[1, 3, 0, 5]"}, sp("size", ints(8, 10)), "error: empty spatial dim"},

		{"reduce_mean", []string{"f32[seq, 8]"}, sp("axes", ints(-1)), "f32[seq, 1]"},
		{"reduce_sum", []string{"f32[2, 3, 4]"}, sp("axes", ints(2, 0), "keepdims", false), "f32[3]"},
		{"reduce_max", []string{"f32[seq, 8]"}, sp("axes", ints(0), "keepdims", false), "f32[8]"},
		{"reduce_max", []string{"f32[2, 3]"}, sp("axes", ints()), "f32[2, 3]"},
		{"reduce_sum", []string{"f32[2, 3]"}, sp("axes", ints(0, 0)), "error: axes [0 0] repeat axis 0"},
		{"reduce_sum", []string{"f32[2, 3]"}, sp("axes", ints(2)), "error: axis 2 out of range for rank 2"},
		{"reduce_sum", []string{"i32[2, 3]"}, sp("axes", ints(0)), "error: x must be float"},
	}
	for _, tc := range tests {
		t.Run(tc.op+"("+strings.Join(tc.in, ", ")+")"+formatAttrs(tc.attrs), func(t *testing.T) {
			in := make([]Type, len(tc.in))
			for i, s := range tc.in {
				in[i] = ty(t, s)
			}
			out, _, err := InferTypes(tc.op, in, tc.attrs)
			if want, ok := strings.CutPrefix(tc.want, "error: "); ok {
				if err == nil || !strings.Contains(err.Error(), want) {
					t.Fatalf("got %v, %v; want an error with %q", out, err, want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(out) != 1 || out[0].String() != tc.want {
				t.Fatalf("got %v, want %s", out, tc.want)
			}
		})
	}
}

func TestSpatialOutSize(t *testing.T) {
	s := Spatial2D{Strides: [2]int64{2, 3}, Dilations: [2]int64{1, 2}, Pads: [4]int64{1, 0, 1, 2}}
	tests := []struct {
		k     int
		n, kn int64
		ceil  bool
		want  int64
	}{
		{0, 5, 3, false, 3}, {0, 6, 3, false, 3}, {0, 6, 3, true, 4}, {1, 7, 2, false, 3}, {1, 7, 2, true, 3},
		{0, 1, 5, false, 0}, {0, math.MaxInt32, 1, false, 1<<30 + 1},
	}
	for _, tc := range tests {
		if got := s.OutSize(tc.k, tc.n, tc.kn, tc.ceil); got != tc.want {
			t.Errorf("OutSize(%d, %d, %d, %v) = %d, want %d", tc.k, tc.n, tc.kn, tc.ceil, got, tc.want)
		}
	}
}
