package ir

import (
	"fmt"
	"math"
	"slices"
)

// The ops of vision and general ONNX models: position ids (iota), 2-D
// convolutions, pooling, resizing and reductions over axes. Everything else
// an importer meets (batch norm, clip, gemm, flatten, ...) decomposes into
// the primitives of ops.go. Spatial ops take NCHW tensors; their spatial
// attributes follow ONNX: pads are [top, left, bottom, right], strides and
// dilations [h, w].

// ResizeCoordModes are the coordinate transformations of resize, as ONNX
// Resize defines them (x_out is an output index, in the input length of the
// axis, scale the axis's scale: size/in, or the scales attribute; out the
// output length: size, or in·scale when scales is given, as a real number):
//
//	half_pixel          x_in = (x_out + 0.5) / scale - 0.5
//	pytorch_half_pixel  x_in = out > 1 ? (x_out + 0.5) / scale - 0.5 : 0
//	align_corners       x_in = out > 1 ? x_out · (in - 1) / (out - 1) : 0
//	asymmetric          x_in = x_out / scale
//	tf_half_pixel_for_nn x_in = (x_out + 0.5) / scale
var ResizeCoordModes = []string{"half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric", "tf_half_pixel_for_nn"}

// ResizeNearestModes are the roundings of x_in in resize's nearest mode.
var ResizeNearestModes = []string{"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"}

// ReduceOps are the reductions over a set of axes.
var ReduceOps = []Op{OpReduceSum, OpReduceMean, OpReduceMax}

var reduceDocs = map[Op]string{
	OpReduceSum:  "sum of the elements over axes (f32, summed in row-major order of the reduced elements)",
	OpReduceMean: "reduce_sum / (number of reduced elements)",
	OpReduceMax:  "largest element over axes (NaN if any is NaN on the CPU reference; GPUs may drop NaNs)",
}

func init() {
	conv := sumFacts
	conv.SumLength, conv.Cost = sumConv, costConv
	convTranspose := sumFacts
	convTranspose.SumLength, convTranspose.Cost = sumConvTranspose, costConvTranspose
	pool := sumFacts
	pool.Numerics = byMode("avg: sum; max: selects", map[string]Numerics{"avg": Sum}, Selects)
	pool.SumLength, pool.Cost = sumPool, costPool
	resize := sumFacts
	resize.Numerics = byMode("linear: coordinate; nearest: exact", map[string]Numerics{"linear": Coordinate}, Exact)
	resize.SumLength = sumResize
	reduce := sumFacts
	reduce.SumLength = sumReduce
	reduceMax := sumFacts
	reduceMax.Numerics = always(Selects)
	register(&OpDef{Op: OpIota, Kind: KindData, MinInputs: 1, MaxInputs: 1, Outputs: 1,
		Doc: "start i32[]: an i32 tensor of the given shape (which may be symbolic, e.g. [seq]) whose element " +
			"at index (i0, ..., ir) is start + i_axis (GPT-2's position ids are iota(pos) {shape = [seq]})",
		Attrs: []AttrSpec{
			{Name: "shape", Kind: AttrShape},
			{Name: "axis", Kind: AttrInt, Default: ptr(IntAttr(0))},
		},
		Infer: inferIota, Facts: moveFacts})
	convAttrs := []AttrSpec{
		{Name: "strides", Kind: AttrInts, Default: ptr(IntsAttr(1, 1)), Doc: "[sh, sw], >= 1"},
		{Name: "pads", Kind: AttrInts, Default: ptr(IntsAttr(0, 0, 0, 0)), Doc: "[top, left, bottom, right], >= 0"},
		{Name: "dilations", Kind: AttrInts, Default: ptr(IntsAttr(1, 1)), Doc: "[dh, dw], >= 1"},
		{Name: "groups", Kind: AttrInt, Default: ptr(IntAttr(1)), Doc: "channels split into groups that convolve separately"},
	}
	register(&OpDef{Op: OpConv2D, Kind: KindContraction, MinInputs: 2, MaxInputs: 3, Outputs: 1,
		Doc: "x[N, C, H, W], w[O, C/groups, kh, kw], optional b[O] -> [N, O, Ho, Wo] with " +
			"Ho = (H + top + bottom - dh·(kh-1) - 1) / sh + 1 (floor), Wo likewise. " +
			"out[n, o, y, x] = b[o] + Σ_{c, i, j} x[n, g·C/groups + c, y·sh - top + i·dh, x·sw - left + j·dw] · w[o, c, i, j] " +
			"where g = o / (O/groups) and positions outside x read 0; the sum is one f32 dot product over (c, i, j), " +
			"the bias added after it",
		Attrs: convAttrs,
		Infer: inferConv, Facts: conv})
	register(&OpDef{Op: OpConvTranspose2D, Kind: KindContraction, MinInputs: 2, MaxInputs: 3, Outputs: 1,
		Doc: "the gradient of conv2d (ONNX ConvTranspose): x[N, C, H, W], w[C, O/groups, kh, kw], optional b[O] -> " +
			"[N, O, Ho, Wo] with Ho = sh·(H-1) + output_padding[0] + dh·(kh-1) + 1 - top - bottom, Wo likewise. " +
			"out[n, o, y, x] = b[o] + Σ x[n, c, iy, ix] · w[c, o - g·O/groups, i, j] over the c of o's group g and " +
			"the (iy, ix, i, j) with iy·sh - top + i·dh = y and ix·sw - left + j·dw = x; summed in f32 over (c, i, j)",
		Attrs: append(slices.Clone(convAttrs),
			AttrSpec{Name: "output_padding", Kind: AttrInts, Default: ptr(IntsAttr(0, 0)), Doc: "[h, w] added to the end of the output, < stride or dilation"}),
		Infer: inferConvTranspose, Facts: convTranspose})
	register(&OpDef{Op: OpPool2D, Kind: KindReduction, MinInputs: 1, MaxInputs: 1, Outputs: 1,
		Doc: "x[N, C, H, W] -> [N, C, Ho, Wo]: the max (mode max) or mean (mode avg) of each kernel window " +
			"(rows y·sh - top + i·dh, i < kh; columns likewise). Ho = (H + top + bottom - dh·(kh-1) - 1) / sh + 1, " +
			"rounded up with ceil_mode, where a last window that starts in the bottom/right padding is dropped. " +
			"max ignores positions outside x. avg sums the positions inside x (f32, row-major) and divides by their " +
			"count, or with count_include_pad by the number of positions inside the padded input " +
			"[-top, H + bottom) × [-left, W + right). dilations apply to max only (avg needs 1)",
		Attrs: []AttrSpec{
			{Name: "mode", Kind: AttrString, Default: ptr(StringAttr("max")), Doc: "max or avg"},
			{Name: "kernel", Kind: AttrInts, Doc: "[kh, kw], >= 1"},
			{Name: "strides", Kind: AttrInts, Default: ptr(IntsAttr(1, 1))},
			{Name: "pads", Kind: AttrInts, Default: ptr(IntsAttr(0, 0, 0, 0)), Doc: "[top, left, bottom, right], each < its kernel dim"},
			{Name: "dilations", Kind: AttrInts, Default: ptr(IntsAttr(1, 1))},
			{Name: "ceil_mode", Kind: AttrBool, Default: ptr(BoolAttr(false))},
			{Name: "count_include_pad", Kind: AttrBool, Default: ptr(BoolAttr(false))},
		},
		Infer: inferPool, Facts: pool})
	register(&OpDef{Op: OpResize, Kind: KindData, MinInputs: 1, MaxInputs: 1, Outputs: 1,
		Doc: "x[N, C, H, W] -> [N, C, size[0], size[1]] as ONNX Resize over the last two axes. For each output " +
			"index the input coordinate x_in follows coord (see ir.ResizeCoordModes) with scale = scales[k] when " +
			"scales is given, else out/in (computed in f32). mode nearest rounds x_in by nearest " +
			"(round_prefer_floor, round_prefer_ceil, floor, ceil) and clamps it to [0, in-1]; mode linear clamps x_in " +
			"to [0, in-1], takes x0 = floor(x_in), x1 = min(x0+1, in-1), l = x_in - x0 and interpolates " +
			"rows then columns: v = a + l·(b - a) in f32",
		Attrs: []AttrSpec{
			{Name: "size", Kind: AttrInts, Doc: "[Ho, Wo], >= 1"},
			{Name: "mode", Kind: AttrString, Default: ptr(StringAttr("nearest")), Doc: "nearest or linear"},
			{Name: "coord", Kind: AttrString, Default: ptr(StringAttr("half_pixel")), Doc: "coordinate transformation"},
			{Name: "nearest", Kind: AttrString, Default: ptr(StringAttr("round_prefer_floor")), Doc: "rounding of nearest"},
			{Name: "scales", Kind: AttrFloats, Default: ptr(FloatsAttr()), Doc: "[sh, sw] > 0, or empty for size/in"},
		},
		Infer: inferResize, Facts: resize})
	for _, name := range ReduceOps {
		reduceFacts := reduce
		if name == OpReduceMax {
			reduceFacts = reduceMax
		}
		register(&OpDef{Op: name, Doc: reduceDocs[name] + "; axes are distinct (negative counts from the end), " +
			"an empty list reduces nothing; keepdims leaves the reduced axes as 1, else removes them",
			Kind: KindReduction, MinInputs: 1, MaxInputs: 1, Outputs: 1,
			Attrs: []AttrSpec{
				{Name: "axes", Kind: AttrInts},
				{Name: "keepdims", Kind: AttrBool, Default: ptr(BoolAttr(true))},
			},
			Infer: inferReduce, Facts: reduceFacts})
	}
}

func inferIota(in []Type, a Attrs) ([]Type, error) {
	if in[0].DType != I32 || in[0].Shape.Rank() != 0 {
		return nil, fmt.Errorf("start must be an i32 scalar (i32[]), got %s", in[0])
	}
	s := a.Shape("shape")
	for _, d := range s {
		if d.IsStatic() && d.Size < 0 {
			return nil, fmt.Errorf("shape %s has a negative dim", s)
		}
	}
	if _, err := normAxis(a.Int("axis"), s.Rank()); err != nil {
		return nil, err
	}
	return []Type{T(I32, s.Clone())}, nil
}

// Spatial2D holds the spatial attributes of conv2d, conv_transpose2d and
// pool2d, checked: strides and dilations [h, w] >= 1, pads [top, left,
// bottom, right] >= 0.
type Spatial2D struct {
	Strides, Dilations [2]int64
	Pads               [4]int64
}

// Spatial returns the checked spatial attributes of a node's attrs.
func Spatial(a Attrs) (Spatial2D, error) {
	var s Spatial2D
	st, pd, dl := a.Ints("strides"), a.Ints("pads"), a.Ints("dilations")
	if len(st) != 2 || st[0] < 1 || st[1] < 1 || st[0] > math.MaxInt32 || st[1] > math.MaxInt32 {
		return s, fmt.Errorf("strides %v must be 2 values >= 1", st)
	}
	if len(dl) != 2 || dl[0] < 1 || dl[1] < 1 || dl[0] > math.MaxInt32 || dl[1] > math.MaxInt32 {
		return s, fmt.Errorf("dilations %v must be 2 values >= 1", dl)
	}
	if len(pd) != 4 {
		return s, fmt.Errorf("pads %v must be 4 values [top, left, bottom, right]", pd)
	}
	for _, p := range pd {
		if p < 0 || p > math.MaxInt32 {
			return s, fmt.Errorf("pads %v must be >= 0", pd)
		}
	}
	copy(s.Strides[:], st)
	copy(s.Dilations[:], dl)
	copy(s.Pads[:], pd)
	return s, nil
}

// OutSize is the length of a conv/pool output axis k (0 for H, 1 for W)
// over an input axis of length n with a kernel of length kn; with ceil the
// division rounds up (a last window starting in the end padding is
// dropped). It is < 1 when the kernel does not fit.
func (s Spatial2D) OutSize(k int, n, kn int64, ceil bool) int64 {
	span := n + s.Pads[k] + s.Pads[k+2] - s.Dilations[k]*(kn-1) - 1
	if span < 0 {
		return 0
	}
	o := span/s.Strides[k] + 1
	if ceil && span%s.Strides[k] != 0 {
		o++
		// The last window must start inside the input or the start padding.
		if (o-1)*s.Strides[k] >= n+s.Pads[k] {
			o--
		}
	}
	return o
}

// static4 checks that x is a float tensor [N, C, H, W] with C, H and W
// static (N may be symbolic).
func static4(name string, x Type) error {
	if x.Shape.Rank() != 4 || !x.DType.IsFloat() {
		return fmt.Errorf("%s must be a float tensor [N, C, H, W], got %s", name, x)
	}
	for _, d := range x.Shape[1:] {
		if !d.IsStatic() {
			return fmt.Errorf("%s must have static C, H and W, got %s", name, x)
		}
	}
	return nil
}

// spatialOut computes the spatial output dims of a conv or pool.
func spatialOut(x Type, s Spatial2D, kh, kw int64, ceil bool) (Dim, Dim, error) {
	h, w := x.Shape[2].Size, x.Shape[3].Size
	ho, wo := s.OutSize(0, h, kh, ceil), s.OutSize(1, w, kw, ceil)
	if ho < 1 || wo < 1 {
		return Dim{}, Dim{}, fmt.Errorf("the kernel %dx%d (dilations %v) does not fit the padded input %dx%d (pads %v)", kh, kw, s.Dilations, h, w, s.Pads)
	}
	return D(ho), D(wo), nil
}

// convCommon checks x, w and the optional bias of a conv; wc is the axis of
// w that holds the channels of x (1 for conv2d, 0 for conv_transpose2d).
func convCommon(in []Type, a Attrs) (s Spatial2D, groups int64, err error) {
	x, w := in[0], in[1]
	if err := static4("x", x); err != nil {
		return s, 0, err
	}
	if w.Shape.Rank() != 4 || !w.Shape.IsStatic() || w.DType != x.DType {
		return s, 0, fmt.Errorf("w must be a static %s tensor of rank 4, got %s", x.DType, w)
	}
	if s, err = Spatial(a); err != nil {
		return s, 0, err
	}
	groups = a.Int("groups")
	if groups < 1 {
		return s, 0, fmt.Errorf("groups must be >= 1, got %d", groups)
	}
	// At most 2^31-1 (as pool2d's kernel), so that dilation·(k-1) cannot
	// overflow.
	if kh, kw := w.Shape[2].Size, w.Shape[3].Size; kh < 1 || kw < 1 || kh > math.MaxInt32 || kw > math.MaxInt32 {
		return s, 0, fmt.Errorf("kernel %dx%d must be at least 1x1 and at most 2^31-1 on a side", kh, kw)
	}
	return s, groups, nil
}

func checkBias(in []Type, o int64) error {
	if len(in) < 3 {
		return nil
	}
	if b := in[2]; b.DType != in[0].DType || b.Shape.Rank() != 1 || b.Shape[0] != D(o) {
		return fmt.Errorf("b must be %s[%d], got %s", in[0].DType, o, b)
	}
	return nil
}

func inferConv(in []Type, a Attrs) ([]Type, error) {
	s, groups, err := convCommon(in, a)
	if err != nil {
		return nil, err
	}
	x, w := in[0], in[1]
	c, o := x.Shape[1].Size, w.Shape[0].Size
	if c%groups != 0 || o%groups != 0 || w.Shape[1].Size != c/groups {
		return nil, fmt.Errorf("x has %d channels and w is %s: with %d groups w must be [O, %d, kh, kw] with O a multiple of %d", c, w.Shape, groups, c/groups, groups)
	}
	if err := checkBias(in, o); err != nil {
		return nil, err
	}
	ho, wo, err := spatialOut(x, s, w.Shape[2].Size, w.Shape[3].Size, false)
	if err != nil {
		return nil, err
	}
	return []Type{T(x.DType, Shape{x.Shape[0], D(o), ho, wo})}, nil
}

func inferConvTranspose(in []Type, a Attrs) ([]Type, error) {
	s, groups, err := convCommon(in, a)
	if err != nil {
		return nil, err
	}
	x, w := in[0], in[1]
	c := x.Shape[1].Size
	if w.Shape[0].Size != c || c%groups != 0 {
		return nil, fmt.Errorf("x has %d channels and w is %s: w must be [%d, O/groups, kh, kw] with %d groups", c, w.Shape, c, groups)
	}
	if w.Shape[1].Size > math.MaxInt64/groups {
		return nil, fmt.Errorf("w %s: output channels overflow", w.Shape)
	}
	o := w.Shape[1].Size * groups
	if err := checkBias(in, o); err != nil {
		return nil, err
	}
	op := a.Ints("output_padding")
	if len(op) != 2 {
		return nil, fmt.Errorf("output_padding %v must be 2 values", op)
	}
	var out [2]int64
	for k := 0; k < 2; k++ {
		if op[k] < 0 || (op[k] >= s.Strides[k] && op[k] >= s.Dilations[k]) {
			return nil, fmt.Errorf("output_padding %v must be >= 0 and less than the stride or the dilation", op)
		}
		n, kn := x.Shape[2+k].Size, w.Shape[2+k].Size
		if n < 1 {
			return nil, fmt.Errorf("x %s has an empty spatial dim", x.Shape)
		}
		if n > math.MaxInt32 || kn > math.MaxInt32 {
			return nil, fmt.Errorf("x %s or w %s is too large", x.Shape, w.Shape)
		}
		out[k] = s.Strides[k]*(n-1) + op[k] + s.Dilations[k]*(kn-1) + 1 - s.Pads[k] - s.Pads[k+2]
		if out[k] < 1 {
			return nil, fmt.Errorf("pads %v leave no output (size %d)", s.Pads, out[k])
		}
	}
	return []Type{T(x.DType, Shape{x.Shape[0], D(o), D(out[0]), D(out[1])})}, nil
}

func inferPool(in []Type, a Attrs) ([]Type, error) {
	x := in[0]
	if err := static4("x", x); err != nil {
		return nil, err
	}
	s, err := Spatial(a)
	if err != nil {
		return nil, err
	}
	k := a.Ints("kernel")
	if len(k) != 2 || k[0] < 1 || k[1] < 1 || k[0] > math.MaxInt32 || k[1] > math.MaxInt32 {
		return nil, fmt.Errorf("kernel %v must be 2 values >= 1", k)
	}
	switch a.String("mode") {
	case "max":
	case "avg":
		if s.Dilations != [2]int64{1, 1} {
			return nil, fmt.Errorf("avg pooling needs dilations [1 1], got %v", s.Dilations)
		}
	default:
		return nil, fmt.Errorf("mode must be max or avg, got %q", a.String("mode"))
	}
	for i, p := range s.Pads {
		if p >= k[i%2]*s.Dilations[i%2] {
			return nil, fmt.Errorf("pads %v must be smaller than the kernel %v", s.Pads, k)
		}
	}
	ho, wo, err := spatialOut(x, s, k[0], k[1], a.Bool("ceil_mode"))
	if err != nil {
		return nil, err
	}
	return []Type{T(x.DType, Shape{x.Shape[0], x.Shape[1], ho, wo})}, nil
}

func inferResize(in []Type, a Attrs) ([]Type, error) {
	x := in[0]
	if err := static4("x", x); err != nil {
		return nil, err
	}
	size := a.Ints("size")
	if len(size) != 2 || size[0] < 1 || size[1] < 1 || size[0] > math.MaxInt32 || size[1] > math.MaxInt32 {
		return nil, fmt.Errorf("size %v must be 2 values >= 1", size)
	}
	if x.Shape[2].Size < 1 || x.Shape[3].Size < 1 {
		return nil, fmt.Errorf("x %s has an empty spatial dim", x)
	}
	if m := a.String("mode"); m != "nearest" && m != "linear" {
		return nil, fmt.Errorf("mode must be nearest or linear, got %q", m)
	}
	if c := a.String("coord"); !slices.Contains(ResizeCoordModes, c) {
		return nil, fmt.Errorf("coord %q is not one of %v", c, ResizeCoordModes)
	}
	if n := a.String("nearest"); !slices.Contains(ResizeNearestModes, n) {
		return nil, fmt.Errorf("nearest %q is not one of %v", n, ResizeNearestModes)
	}
	if sc := a.Floats("scales"); len(sc) != 0 {
		if len(sc) != 2 || !(sc[0] > 0) || !(sc[1] > 0) || math.IsInf(sc[0], 0) || math.IsInf(sc[1], 0) {
			return nil, fmt.Errorf("scales %v must be empty or 2 positive finite values", sc)
		}
	}
	return []Type{T(x.DType, Shape{x.Shape[0], x.Shape[1], D(size[0]), D(size[1])})}, nil
}

// ReduceAxes returns the sorted, normalized axes of a reduction over a
// tensor of rank r, checking that they are distinct and in range.
func ReduceAxes(axes []int64, r int) ([]int, error) {
	out := make([]int, 0, len(axes))
	for _, ax := range axes {
		n, err := normAxis(ax, r)
		if err != nil {
			return nil, err
		}
		if slices.Contains(out, n) {
			return nil, fmt.Errorf("axes %v repeat axis %d", axes, n)
		}
		out = append(out, n)
	}
	slices.Sort(out)
	return out, nil
}

func inferReduce(in []Type, a Attrs) ([]Type, error) {
	x := in[0]
	if !x.DType.IsFloat() {
		return nil, fmt.Errorf("x must be float, got %s", x.DType)
	}
	axes, err := ReduceAxes(a.Ints("axes"), x.Shape.Rank())
	if err != nil {
		return nil, err
	}
	var s Shape
	for i, d := range x.Shape {
		switch {
		case !slices.Contains(axes, i):
			s = append(s, d)
		case a.Bool("keepdims"):
			s = append(s, D(1))
		}
	}
	return []Type{T(x.DType, s)}, nil
}

// ResizeAxis is resize's sampling of one spatial axis (k = 0 for H, 1 for
// W) of in input elements resized to out: for each output index the source
// index i0 and, in linear mode, the second source i1 and the weight l of
// i1, so that out = x[i0] + l·(x[i1] - x[i0]); in nearest mode i1 and l are
// unused. The input coordinate is computed in f32 as ONNX Runtime does,
// from the scale (the scales attribute, else out/in) and, for
// align_corners, the output length (in·scale when scales is given, else
// out). The CPU reference and the code generators that sample on the host
// all use this one definition; a kernel computing it inline must agree.
func ResizeAxis(a Attrs, k, in, out int) (i0, i1 []int, l []float32) {
	scale, length := float32(out)/float32(in), float32(out)
	if sc := a.Floats("scales"); len(sc) == 2 {
		scale = float32(sc[k])
		length = float32(in) * scale
	}
	coord, nearest := a.String("coord"), a.String("nearest")
	linear := a.String("mode") == "linear"
	i0, i1, l = make([]int, out), make([]int, out), make([]float32, out)
	for xo := 0; xo < out; xo++ {
		x := ResizeCoord(coord, xo, in, length, scale)
		if !linear {
			i0[xo] = resizeNearest(nearest, x, in)
			continue
		}
		x = min(max(x, 0), float32(in-1))
		if x != x {
			x = 0
		}
		f := float32(math.Floor(float64(x)))
		i0[xo] = int(f)
		i1[xo] = min(int(f)+1, in-1)
		l[xo] = x - f
	}
	return i0, i1, l
}

// ResizeCoord is resize's input coordinate of output index xo on an axis of
// in elements with output length out and scale, in f32.
func ResizeCoord(mode string, xo, in int, out, scale float32) float32 {
	x := float32(xo)
	switch mode {
	case "half_pixel":
		return (x+0.5)/scale - 0.5
	case "pytorch_half_pixel":
		if out > 1 {
			return (x+0.5)/scale - 0.5
		}
		return 0
	case "align_corners":
		if out > 1 {
			return float32(xo*(in-1)) / (out - 1)
		}
		return 0
	case "asymmetric":
		return x / scale
	case "tf_half_pixel_for_nn":
		return (x + 0.5) / scale
	}
	return float32(math.NaN())
}

// resizeNearest rounds an input coordinate by a nearest mode and clamps it
// to the axis (NaN to 0).
func resizeNearest(mode string, x float32, in int) int {
	f := float32(math.Floor(float64(x)))
	var r float32
	switch {
	case mode == "floor":
		r = f
	case mode == "ceil":
		r = float32(math.Ceil(float64(x)))
	case x-f == 0.5 && mode == "round_prefer_floor":
		r = f
	case x-f == 0.5: // round_prefer_ceil
		r = f + 1
	default:
		r = float32(math.Round(float64(x)))
	}
	if !(r >= 0) {
		return 0
	}
	return min(int(r), in-1)
}
