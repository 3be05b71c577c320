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
	opCases[OpIota] = func(c *opCtx) {
		c.b.Op(OpIota, []*Value{c.pos}, Attrs{"shape": ShapeAttr(Shape{Sym("seq"), D(3)}), "axis": IntAttr(-1)})
	}
	opCases[OpConv2D] = func(c *opCtx) {
		w := c.b.M.AddWeight("conv.w", T(F32, S(4, 1, 2, 1)), nil)
		b := c.b.M.AddWeight("conv.b", T(F32, S(4)), nil)
		c.b.Op(OpConv2D, []*Value{x4(c), w, b}, Attrs{"strides": IntsAttr(2, 1), "pads": IntsAttr(1, 0, 1, 2),
			"dilations": IntsAttr(1, 2), "groups": IntAttr(2)})
	}
	opCases[OpConvTranspose2D] = func(c *opCtx) {
		w := c.b.M.AddWeight("deconv.w", T(F32, S(2, 2, 2, 2)), nil)
		c.b.Op(OpConvTranspose2D, []*Value{x4(c), w}, Attrs{"strides": IntsAttr(2, 1), "pads": IntsAttr(0, 1, 1, 0),
			"dilations": IntsAttr(1, 2), "groups": IntAttr(2), "output_padding": IntsAttr(1, 0)})
	}
	opCases[OpPool2D] = func(c *opCtx) {
		x := x4(c)
		c.b.Op(OpPool2D, []*Value{x}, Attrs{"mode": StringAttr("avg"), "kernel": IntsAttr(2, 2), "strides": IntsAttr(2, 1),
			"pads": IntsAttr(1, 0, 0, 1), "ceil_mode": BoolAttr(true), "count_include_pad": BoolAttr(true)})
		c.b.Op(OpPool2D, []*Value{x}, Attrs{"kernel": IntsAttr(2, 1), "pads": IntsAttr(1, 0, 1, 0), "dilations": IntsAttr(2, 1)})
	}
	opCases[OpResize] = func(c *opCtx) {
		c.b.Op(OpResize, []*Value{x4(c)}, Attrs{"size": IntsAttr(3, 5), "mode": StringAttr("linear"),
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
		op    Op
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
		{OpIota, []string{"i32[]"}, sp("shape", Shape{Sym("seq")}), "i32[seq]"},
		{OpIota, []string{"i32[]"}, sp("shape", S(2, 3), "axis", 1), "i32[2, 3]"},
		{OpIota, []string{"i32[]"}, sp("shape", S()), "error: axis 0 out of range for rank 0"},
		{OpIota, []string{"i64[]"}, sp("shape", S(2)), "error: start must be an i32 scalar"},
		{OpIota, []string{"i32[1]"}, sp("shape", S(2)), "error: start must be an i32 scalar"},
		{OpIota, []string{"i32[]"}, sp("shape", S(-1)), "error: negative dim"},

		{OpConv2D, []string{"f32[1, 1, 28, 28]", "f32[8, 1, 5, 5]"}, sp("pads", ints(2, 2, 2, 2)), "f32[1, 8, 28, 28]"},
		{OpConv2D, []string{"f32[n, 3, 32, 32]", "f32[16, 3, 3, 3]", "f32[16]"}, sp("strides", ints(2, 2), "pads", ints(1, 1, 1, 1)), "f32[n, 16, 16, 16]"},
		{OpConv2D, []string{"f32[1, 8, 9, 9]", "f32[8, 1, 3, 3]"}, sp("groups", 8, "dilations", ints(2, 2)), "f32[1, 8, 5, 5]"},
		{OpConv2D, []string{"f32[1, 8, 9, 9]", "f32[8, 2, 3, 3]"}, sp("groups", 8), "error: with 8 groups w must be [O, 1, kh, kw]"},
		{OpConv2D, []string{"f32[1, 3, 4, 4]", "f32[8, 3, 5, 5]"}, nil, "error: does not fit"},
		{OpConv2D, []string{"f32[1, 3, 4, 4]", "f32[8, 3, 1, 1]", "f32[4]"}, nil, "error: b must be f32[8]"},
		{OpConv2D, []string{"f32[1, 3, 4, 4]", "f32[8, 3, 1, 1]"}, sp("strides", ints(0, 1)), "error: strides [0 1] must be 2 values >= 1"},
		{OpConv2D, []string{"f32[1, 3, 4, 4]", "f32[8, 3, 1, 1]"}, sp("pads", ints(1, 1)), "error: pads [1 1] must be 4 values"},
		{OpConv2D, []string{"f32[1, 3, 4, 4]", "f32[8, 3, 1, 1]"}, sp("pads", ints(0, 0, 0, -1)), "error: must be >= 0"},
		{OpConv2D, []string{"f32[1, 3, 4, 4]", "f32[8, 3, 1, 1]"}, sp("groups", 0), "error: groups must be >= 1"},
		{OpConv2D, []string{"f32[1, 3, h, 4]", "f32[8, 3, 1, 1]"}, nil, "error: static C, H and W"},
		{OpConv2D, []string{"f32[3, 4, 4]", "f32[8, 3, 1, 1]"}, nil, "error: x must be a float tensor [N, C, H, W]"},
		{OpConv2D, []string{"f32[1, 3, 4, 4]", "f16[8, 3, 1, 1]"}, nil, "error: w must be a static f32 tensor"},
		// dh·(kh-1) = 2^31·2^33 wraps to 0 in int64: the kernel still does not fit.
		{OpConv2D, []string{"f32[1, 1, 8, 8]", "f32[1, 1, 8589934593, 1]"}, sp("dilations", ints(1<<31-1, 1)), "error: kernel"},
		{OpConv2D, []string{"f32[1, 1, 8, 8]", "f32[1, 1, 8589934593, 1]"}, nil, "error: kernel"},

		{OpConvTranspose2D, []string{"f32[1, 4, 5, 5]", "f32[4, 2, 3, 3]"}, sp("strides", ints(2, 2), "pads", ints(1, 1, 1, 1), "output_padding", ints(1, 1)), "f32[1, 2, 10, 10]"},
		{OpConvTranspose2D, []string{"f32[1, 4, 5, 5]", "f32[4, 2, 2, 2]", "f32[4]"}, sp("strides", ints(2, 2), "groups", 2), "f32[1, 4, 10, 10]"},
		{OpConvTranspose2D, []string{"f32[1, 4, 5, 5]", "f32[3, 2, 2, 2]"}, nil, "error: w must be [4, O/groups, kh, kw]"},
		{OpConvTranspose2D, []string{"f32[1, 4, 5, 5]", "f32[4, 2, 2, 2]"}, sp("output_padding", ints(1, 0)), "error: output_padding [1 0] must be >= 0 and less than"},
		{OpConvTranspose2D, []string{"f32[1, 4, 1, 1]", "f32[4, 2, 1, 1]"}, sp("pads", ints(1, 0, 0, 0)), "error: leave no output"},

		{OpPool2D, []string{"f32[1, 8, 28, 28]"}, sp("kernel", ints(2, 2), "strides", ints(2, 2)), "f32[1, 8, 14, 14]"},
		{OpPool2D, []string{"f32[1, 1, 5, 5]"}, sp("kernel", ints(2, 2), "strides", ints(2, 2), "ceil_mode", true), "f32[1, 1, 3, 3]"},
		{OpPool2D, []string{"f32[1, 1, 4, 4]"}, sp("kernel", ints(3, 3), "strides", ints(2, 2), "pads", ints(1, 1, 1, 1), "ceil_mode", true), "f32[1, 1, 3, 3]"},
		{OpPool2D, []string{"f32[1, 1, 5, 5]"}, sp("kernel", ints(3, 3), "pads", ints(1, 1, 1, 1), "mode", "avg"), "f32[1, 1, 5, 5]"},
		{OpPool2D, []string{"f32[1, 1, 5, 5]"}, sp("kernel", ints(2, 2), "mode", "min"), `error: mode must be max or avg, got "min"`},
		{OpPool2D, []string{"f32[1, 1, 5, 5]"}, sp("kernel", ints(2, 2), "mode", "avg", "dilations", ints(2, 2)), "error: avg pooling needs dilations"},
		{OpPool2D, []string{"f32[1, 1, 5, 5]"}, sp("kernel", ints(2, 2), "pads", ints(2, 0, 0, 0)), "error: must be smaller than the kernel"},
		{OpPool2D, []string{"f32[1, 1, 5, 5]"}, sp("kernel", ints(2)), "error: kernel [2] must be 2 values >= 1"},
		{OpPool2D, []string{"f32[1, 1, 5, 5]"}, nil, `error: missing required attribute "kernel"`},

		{OpResize, []string{"f32[1, 3, 4, 5]"}, sp("size", ints(8, 10)), "f32[1, 3, 8, 10]"},
		{OpResize, []string{"f32[n, 3, 4, 5]"}, sp("size", ints(2, 3), "mode", "linear", "coord", "pytorch_half_pixel", "scales", []float64{0.5, 0.6}), "f32[n, 3, 2, 3]"},
		{OpResize, []string{"f32[1, 3, 4, 5]"}, sp("size", ints(8, 10), "mode", "cubic"), `error: mode must be nearest or linear, got "cubic"`},
		{OpResize, []string{"f32[1, 3, 4, 5]"}, sp("size", ints(8, 10), "coord", "tf_crop_and_resize"), `error: coord "tf_crop_and_resize" is not one of`},
		{OpResize, []string{"f32[1, 3, 4, 5]"}, sp("size", ints(8, 10), "nearest", "round"), `error: nearest "round" is not one of`},
		{OpResize, []string{"f32[1, 3, 4, 5]"}, sp("size", ints(8, 0)), "error: size [8 0] must be 2 values >= 1"},
		{OpResize, []string{"f32[1, 3, 4, 5]"}, sp("size", ints(8, 10), "scales", []float64{2}), "error: scales [2] must be empty or 2 positive finite values"},
		{OpResize, []string{"f32[1, 3, 0, 5]"}, sp("size", ints(8, 10)), "error: empty spatial dim"},

		{OpReduceMean, []string{"f32[seq, 8]"}, sp("axes", ints(-1)), "f32[seq, 1]"},
		{OpReduceSum, []string{"f32[2, 3, 4]"}, sp("axes", ints(2, 0), "keepdims", false), "f32[3]"},
		{OpReduceMax, []string{"f32[seq, 8]"}, sp("axes", ints(0), "keepdims", false), "f32[8]"},
		{OpReduceMax, []string{"f32[2, 3]"}, sp("axes", ints()), "f32[2, 3]"},
		{OpReduceSum, []string{"f32[2, 3]"}, sp("axes", ints(0, 0)), "error: axes [0 0] repeat axis 0"},
		{OpReduceSum, []string{"f32[2, 3]"}, sp("axes", ints(2)), "error: axis 2 out of range for rank 2"},
		{OpReduceSum, []string{"i32[2, 3]"}, sp("axes", ints(0)), "error: x must be float"},
	}
	for _, tc := range tests {
		t.Run(tc.op.String()+"("+strings.Join(tc.in, ", ")+")"+formatAttrs(tc.attrs), func(t *testing.T) {
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
