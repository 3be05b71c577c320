package onnx

import (
	"fmt"
	"maps"
	"math"
	"slices"

	"github.com/tapml/tapml/frontend/onnx/onnxpb"
	"github.com/tapml/tapml/ir"
	"github.com/tapml/tapml/tensor"
)

// handler translates one ONNX op (from opset `since` of the default
// domain) into IR ops.
type handler struct {
	fn    func(im *importer, n *onnxpb.NodeProto, in []*val) ([]*val, error)
	since int64
}

// handlers is the op table: every ONNX op the importer reads (the files
// of control flow, comparisons and recurrent ops add theirs).
var handlers = map[string]handler{}

// h is the handler of an op read in every opset.
func h(fn func(im *importer, n *onnxpb.NodeProto, in []*val) ([]*val, error)) handler {
	return handler{fn: fn, since: 1}
}

func init() {
	maps.Copy(handlers, map[string]handler{
		"Conv": h(convOp), "ConvTranspose": h(convOp), "BatchNormalization": h(batchNorm),
		"MatMul": h(matmulOp), "Gemm": h(gemm),
		"Add": h(binaryOp(ir.OpAdd)), "Sub": h(binaryOp(ir.OpSub)), "Mul": h(binaryOp(ir.OpMul)), "Div": h(divOp), "Pow": h(powOp),
		"Max": h(variadic(ir.OpMaximum)), "Min": h(variadic(ir.OpMinimum)), "Sum": h(variadic(ir.OpAdd)),
		"Sqrt": h(unary(ir.OpSqrt)), "Relu": h(unary(ir.OpRelu)), "Sigmoid": h(unary(ir.OpSigmoid)), "Tanh": h(unary(ir.OpTanh)),
		"Erf": h(unary(ir.OpErf)), "Exp": h(unary(ir.OpExp)), "Log": h(unary(ir.OpLog)), "Neg": h(unary(ir.OpNeg)), "Abs": h(unary(ir.OpAbs)),
		"Reciprocal": h(reciprocal), "HardSigmoid": h(hardSigmoid), "HardSwish": {hardSwish, 14},
		"Clip": h(clip), "LeakyRelu": h(leakyRelu), "Softmax": h(softmax),
		"ReduceMean": h(reduce(ir.OpReduceMean)), "ReduceMax": h(reduce(ir.OpReduceMax)), "ReduceSum": h(reduce(ir.OpReduceSum)),
		"Reshape": {reshapeOp, 5}, "Flatten": h(flatten), "Transpose": h(transposeOp),
		"Squeeze": h(squeeze), "Unsqueeze": h(unsqueeze), "Slice": h(sliceOp), "Concat": h(concat),
		"Shape": h(shapeOp), "Cast": h(cast), "Gather": h(gather), "Constant": h(constantOp),
		"Identity": h(identity), "Dropout": h(identity),
		"Resize": {resize, 10}, "Upsample": h(resize),
		"MaxPool": h(pool), "AveragePool": h(pool),
		"GlobalAveragePool": h(globalPool(ir.OpReduceMean)), "GlobalMaxPool": h(globalPool(ir.OpReduceMax)),
		"LayerNormalization": {layerNorm, 17},
	})
}

// SupportedOps lists the ONNX ops the importer translates, sorted.
func SupportedOps() []string {
	out := make([]string, 0, len(handlers))
	for k := range handlers {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// OpInfo is an ONNX op of the default domain the importer translates, and
// the opsets it reads it in.
type OpInfo struct {
	Name         string
	Since, Until int64
}

// Ops lists every ONNX op the importer translates with its opset range
// (within MinOpset to MaxOpset), sorted by name.
func Ops() []OpInfo {
	var out []OpInfo
	for _, name := range SupportedOps() {
		out = append(out, OpInfo{Name: name, Since: max(handlers[name].since, MinOpset), Until: MaxOpset})
	}
	return out
}

// Attribute access.

func attr(n *onnxpb.NodeProto, name string) *onnxpb.AttributeProto {
	for _, a := range n.GetAttribute() {
		if a.GetName() == name {
			return a
		}
	}
	return nil
}

func attrInt(n *onnxpb.NodeProto, name string, def int64) int64 {
	if a := attr(n, name); a != nil {
		return a.GetI()
	}
	return def
}

func attrInts(n *onnxpb.NodeProto, name string, def []int64) []int64 {
	if a := attr(n, name); a != nil {
		return a.GetInts()
	}
	return def
}

func attrFloat(n *onnxpb.NodeProto, name string, def float64) float64 {
	if a := attr(n, name); a != nil {
		return float64(a.GetF())
	}
	return def
}

func attrString(n *onnxpb.NodeProto, name, def string) string {
	if a := attr(n, name); a != nil {
		return string(a.GetS())
	}
	return def
}

// arg returns input k, or an error when it is missing.
func arg(in []*val, k int, what string) (*val, error) {
	if k >= len(in) || in[k] == nil {
		return nil, fmt.Errorf("input %d (%s) is missing", k, what)
	}
	return in[k], nil
}

// opt returns input k or nil.
func opt(in []*val, k int) *val {
	if k < len(in) {
		return in[k]
	}
	return nil
}

func one(v *val, err error) ([]*val, error) {
	if err != nil {
		return nil, err
	}
	return []*val{v}, nil
}

// constInts returns the elements of a constant integer input.
func constInts(v *val, what string) ([]int64, error) {
	if !v.isConst() {
		return nil, fmt.Errorf("%s must be known at import (a constant or computed from shapes), but it depends on the graph inputs", what)
	}
	if v.c.DType.IsFloat() || v.c.DType == ir.Bool {
		return nil, fmt.Errorf("%s must be integers, got %s", what, v.c.DType)
	}
	return ints(v.c), nil
}

func constFloats(v *val, what string) ([]float64, error) {
	if !v.isConst() {
		return nil, fmt.Errorf("%s must be known at import, but it depends on the graph inputs", what)
	}
	return floats(v.c), nil
}

// scalar makes a constant of dtype dt.
func scalar(dt ir.DType, x float64) *val {
	t := tensor.New(dt, nil)
	t.SetFloat64At(0, x)
	return &val{c: t}
}

func (im *importer) reshape(v *val, shape []int) (*val, error) {
	if slices.Equal(v.shape(), shape) {
		return v, nil
	}
	return im.op(ir.OpReshape, ir.Attrs{"shape": ir.ShapeAttr(shapeOf(shape))}, v)
}

// normAxis maps axis into [0, r).
func normAxis(axis int64, r int) (int, error) {
	if axis < 0 {
		axis += int64(r)
	}
	if axis < 0 || axis >= int64(r) {
		return 0, fmt.Errorf("axis %d out of range for rank %d", axis, r)
	}
	return int(axis), nil
}

// align gives a and b the same dtype by converting a constant one to the
// other's (a run-time value's dtype wins; between constants, a float wins).
func align(a, b *val) (*val, *val, error) {
	if a.isConst() && b.isConst() {
		switch {
		case a.c.DType == b.c.DType:
		case b.c.DType.IsFloat() && !a.c.DType.IsFloat():
			a = &val{name: a.name, c: a.c.Convert(b.c.DType)}
		default:
			b = &val{name: b.name, c: b.c.Convert(a.c.DType)}
		}
		return a, b, nil
	}
	da, db := a.dtype(), b.dtype()
	switch {
	case da == db:
	case a.isConst():
		a = &val{name: a.name, c: a.c.Convert(db)}
	case b.isConst():
		b = &val{name: b.name, c: b.c.Convert(da)}
	default:
		return nil, nil, fmt.Errorf("input dtypes differ: %s and %s", da, db)
	}
	return a, b, nil
}

func (im *importer) binop(op ir.Op, a, b *val) (*val, error) {
	a, b, err := align(a, b)
	if err != nil {
		return nil, err
	}
	return im.op(op, nil, a, b)
}

func binaryOp(op ir.Op) func(im *importer, n *onnxpb.NodeProto, in []*val) ([]*val, error) {
	return func(im *importer, n *onnxpb.NodeProto, in []*val) ([]*val, error) {
		if attr(n, "broadcast") != nil || attr(n, "axis") != nil {
			return nil, fmt.Errorf("the legacy broadcast/axis attributes (opset < 7) are not supported")
		}
		a, err := arg(in, 0, "A")
		if err != nil {
			return nil, err
		}
		b, err := arg(in, 1, "B")
		if err != nil {
			return nil, err
		}
		return one(im.binop(op, a, b))
	}
}

// powOp is Pow on floats; an integer exponent (allowed from opset 12) is
// converted to the base's float type.
func powOp(im *importer, n *onnxpb.NodeProto, in []*val) ([]*val, error) {
	a, err := arg(in, 0, "X")
	if err != nil {
		return nil, err
	}
	b, err := arg(in, 1, "Y")
	if err != nil {
		return nil, err
	}
	if !a.dtype().IsFloat() {
		if a.isConst() && b.isConst() {
			return one(im.binop(ir.OpPow, &val{c: a.c.Convert(ir.F32)}, &val{c: b.c.Convert(ir.F32)}))
		}
		return nil, fmt.Errorf("Pow of an integer base at run time is not supported")
	}
	if !b.dtype().IsFloat() && !b.isConst() {
		if b, err = im.op(ir.OpCast, ir.Attrs{"to": ir.DTypeAttr(a.dtype())}, b); err != nil {
			return nil, err
		}
	}
	return one(im.binop(ir.OpPow, a, b))
}

func variadic(op ir.Op) func(im *importer, n *onnxpb.NodeProto, in []*val) ([]*val, error) {
	return func(im *importer, n *onnxpb.NodeProto, in []*val) ([]*val, error) {
		acc, err := arg(in, 0, "data_0")
		if err != nil {
			return nil, err
		}
		for k := 1; k < len(in); k++ {
			x, err := arg(in, k, "data")
			if err != nil {
				return nil, err
			}
			if acc, err = im.binop(op, acc, x); err != nil {
				return nil, err
			}
		}
		return []*val{acc}, nil
	}
}

// divOp is Div; integer constants divide on the host (truncating, as ONNX
// and C do), since the IR's div is defined on floats.
func divOp(im *importer, n *onnxpb.NodeProto, in []*val) ([]*val, error) {
	a, err := arg(in, 0, "A")
	if err != nil {
		return nil, err
	}
	b, err := arg(in, 1, "B")
	if err != nil {
		return nil, err
	}
	if a.isConst() && b.isConst() && !a.c.DType.IsFloat() && !b.c.DType.IsFloat() {
		t, err := hostIntBinary(a.c, b.c, func(x, y int64) (int64, error) {
			if y == 0 {
				return 0, fmt.Errorf("integer division by zero")
			}
			return x / y, nil
		})
		if err != nil {
			return nil, err
		}
		return []*val{{c: t}}, nil
	}
	if !a.dtype().IsFloat() || !b.dtype().IsFloat() {
		return nil, fmt.Errorf("integer Div of values computed at run time is not supported")
	}
	return one(im.binop(ir.OpDiv, a, b))
}

// hostIntBinary applies f over broadcast i64 copies of a and b.
func hostIntBinary(a, b *tensor.Tensor, f func(x, y int64) (int64, error)) (*tensor.Tensor, error) {
	r := max(len(a.Shape), len(b.Shape))
	shape := make([]int, r)
	pad := func(s []int) []int { return append(slices.Repeat([]int{1}, r-len(s)), s...) }
	as, bs := pad(a.Shape), pad(b.Shape)
	for i := range shape {
		switch {
		case as[i] == bs[i] || bs[i] == 1:
			shape[i] = as[i]
		case as[i] == 1:
			shape[i] = bs[i]
		default:
			return nil, fmt.Errorf("shapes %v and %v do not broadcast", a.Shape, b.Shape)
		}
	}
	if n := tensor.NumElements(shape); n > maxFolded {
		return nil, fmt.Errorf("a constant of shape %v computed at import is too large (more than %d elements)", shape, maxFolded)
	}
	av, bv := ints(a), ints(b)
	out := make([]int64, tensor.NumElements(shape))
	idx := make([]int, r)
	for o := range out {
		rem := o
		for i := r - 1; i >= 0; i-- {
			if shape[i] > 0 {
				idx[i] = rem % shape[i]
				rem /= shape[i]
			}
		}
		ai, bi := 0, 0
		for i := 0; i < r; i++ {
			ai = ai*as[i] + min(idx[i], as[i]-1)
			bi = bi*bs[i] + min(idx[i], bs[i]-1)
		}
		v, err := f(av[ai], bv[bi])
		if err != nil {
			return nil, err
		}
		out[o] = v
	}
	return i64Tensor(shape, out), nil
}

func unary(op ir.Op) func(im *importer, n *onnxpb.NodeProto, in []*val) ([]*val, error) {
	return func(im *importer, n *onnxpb.NodeProto, in []*val) ([]*val, error) {
		x, err := arg(in, 0, "X")
		if err != nil {
			return nil, err
		}
		return one(im.op(op, nil, x))
	}
}

func identity(im *importer, n *onnxpb.NodeProto, in []*val) ([]*val, error) {
	x, err := arg(in, 0, "input")
	if err != nil {
		return nil, err
	}
	if n.GetOpType() == "Dropout" && attrInt(n, "is_test", 1) == 0 {
		return nil, fmt.Errorf("Dropout in training mode is not supported")
	}
	if n.GetOpType() == "Dropout" && len(in) > 2 && in[2] != nil {
		if m, err := constInts(in[2], "training_mode"); err != nil || len(m) != 1 || m[0] != 0 {
			return nil, fmt.Errorf("Dropout in training mode is not supported")
		}
	}
	return []*val{x}, nil
}

func reciprocal(im *importer, n *onnxpb.NodeProto, in []*val) ([]*val, error) {
	x, err := arg(in, 0, "X")
	if err != nil {
		return nil, err
	}
	return one(im.binop(ir.OpDiv, scalar(x.dtype(), 1), x))
}

// hardSigmoid is max(0, min(1, alpha·x + beta)).
func hardSigmoid(im *importer, n *onnxpb.NodeProto, in []*val) ([]*val, error) {
	x, err := arg(in, 0, "X")
	if err != nil {
		return nil, err
	}
	return one(im.hardSigmoid(x, attrFloat(n, "alpha", 0.2), attrFloat(n, "beta", 0.5)))
}

func (im *importer) hardSigmoid(x *val, alpha, beta float64) (*val, error) {
	dt := x.dtype()
	y, err := im.binop(ir.OpMul, x, scalar(dt, alpha))
	if err == nil {
		y, err = im.binop(ir.OpAdd, y, scalar(dt, beta))
	}
	if err == nil {
		y, err = im.binop(ir.OpMinimum, y, scalar(dt, 1))
	}
	if err == nil {
		y, err = im.binop(ir.OpMaximum, y, scalar(dt, 0))
	}
	return y, err
}

// hardSwish is x · hardsigmoid(x) with alpha 1/6, beta 0.5.
func hardSwish(im *importer, n *onnxpb.NodeProto, in []*val) ([]*val, error) {
	x, err := arg(in, 0, "X")
	if err != nil {
		return nil, err
	}
	y, err := im.hardSigmoid(x, 1.0/6, 0.5)
	if err != nil {
		return nil, err
	}
	return one(im.binop(ir.OpMul, x, y))
}

// clip is minimum(maximum(x, min), max), with the bounds as attributes
// before opset 11 and as optional inputs from it.
func clip(im *importer, n *onnxpb.NodeProto, in []*val) ([]*val, error) {
	x, err := arg(in, 0, "input")
	if err != nil {
		return nil, err
	}
	var lo, hi *val
	if im.opset < 11 {
		if a := attr(n, "min"); a != nil {
			lo = scalar(x.dtype(), float64(a.GetF()))
		}
		if a := attr(n, "max"); a != nil {
			hi = scalar(x.dtype(), float64(a.GetF()))
		}
	} else {
		lo, hi = opt(in, 1), opt(in, 2)
	}
	y := x
	if lo != nil {
		if y, err = im.binop(ir.OpMaximum, y, lo); err != nil {
			return nil, err
		}
	}
	if hi != nil {
		if y, err = im.binop(ir.OpMinimum, y, hi); err != nil {
			return nil, err
		}
	}
	return []*val{y}, nil
}

// leakyRelu is max(x, alpha·x) for 0 <= alpha <= 1, else relu(x) -
// alpha·relu(-x).
func leakyRelu(im *importer, n *onnxpb.NodeProto, in []*val) ([]*val, error) {
	x, err := arg(in, 0, "X")
	if err != nil {
		return nil, err
	}
	alpha := attrFloat(n, "alpha", 0.01)
	ax, err := im.binop(ir.OpMul, x, scalar(x.dtype(), alpha))
	if err != nil {
		return nil, err
	}
	if alpha >= 0 && alpha <= 1 {
		return one(im.binop(ir.OpMaximum, x, ax))
	}
	neg, err := im.op(ir.OpNeg, nil, x)
	if err != nil {
		return nil, err
	}
	rn, err := im.op(ir.OpRelu, nil, neg)
	if err != nil {
		return nil, err
	}
	arn, err := im.binop(ir.OpMul, rn, scalar(x.dtype(), alpha))
	if err != nil {
		return nil, err
	}
	rx, err := im.op(ir.OpRelu, nil, x)
	if err != nil {
		return nil, err
	}
	return one(im.binop(ir.OpSub, rx, arn))
}

// softmax: from opset 13 along axis (default -1); before, over the input
// flattened to 2-D at axis (default 1).
func softmax(im *importer, n *onnxpb.NodeProto, in []*val) ([]*val, error) {
	x, err := arg(in, 0, "input")
	if err != nil {
		return nil, err
	}
	xs := x.shape()
	def := int64(-1)
	if im.opset < 13 {
		def = 1
	}
	ax, err := normAxis(attrInt(n, "axis", def), len(xs))
	if err != nil {
		return nil, err
	}
	if im.opset >= 13 || ax == len(xs)-1 {
		return one(im.op(ir.OpSoftmax, ir.Attrs{"axis": ir.IntAttr(int64(ax))}, x))
	}
	flat, err := im.reshape(x, []int{tensor.NumElements(xs[:ax]), tensor.NumElements(xs[ax:])})
	if err != nil {
		return nil, err
	}
	y, err := im.op(ir.OpSoftmax, ir.Attrs{"axis": ir.IntAttr(-1)}, flat)
	if err != nil {
		return nil, err
	}
	return one(im.reshape(y, xs))
}

// reduce: axes as an attribute (ReduceSum before opset 13, the others
// before 18) or as the second input; no axes reduce all of them unless
// noop_with_empty_axes.
func reduce(op ir.Op) func(im *importer, n *onnxpb.NodeProto, in []*val) ([]*val, error) {
	return func(im *importer, n *onnxpb.NodeProto, in []*val) ([]*val, error) {
		x, err := arg(in, 0, "data")
		if err != nil {
			return nil, err
		}
		if !x.dtype().IsFloat() {
			return nil, fmt.Errorf("%s on %s is not supported (floats are)", n.GetOpType(), x.dtype())
		}
		axes := attrInts(n, "axes", nil)
		if a := opt(in, 1); a != nil {
			if axes, err = constInts(a, "axes"); err != nil {
				return nil, err
			}
		}
		r := len(x.shape())
		if len(axes) == 0 {
			if attrInt(n, "noop_with_empty_axes", 0) != 0 {
				return []*val{x}, nil
			}
			for i := 0; i < r; i++ {
				axes = append(axes, int64(i))
			}
		}
		return one(im.op(op, ir.Attrs{"axes": ir.IntsAttr(axes...), "keepdims": ir.BoolAttr(attrInt(n, "keepdims", 1) != 0)}, x))
	}
}

// reshapeOp: a 0 in the shape copies the input dim (unless allowzero), one
// -1 takes the rest.
func reshapeOp(im *importer, n *onnxpb.NodeProto, in []*val) ([]*val, error) {
	x, err := arg(in, 0, "data")
	if err != nil {
		return nil, err
	}
	sv, err := arg(in, 1, "shape")
	if err != nil {
		return nil, err
	}
	s, err := constInts(sv, "the shape input")
	if err != nil {
		return nil, err
	}
	xs := x.shape()
	allowZero := attrInt(n, "allowzero", 0) != 0
	out := make([]int, len(s))
	infer, known := -1, 1
	for i, d := range s {
		switch {
		case d == 0 && !allowZero:
			if i >= len(xs) {
				return nil, fmt.Errorf("shape %v copies dim %d, the input %v has rank %d", s, i, xs, len(xs))
			}
			out[i] = xs[i]
		case d == -1 && infer < 0:
			infer = i
			continue
		case d < 0 || d > maxElements:
			return nil, fmt.Errorf("bad shape %v", s)
		default:
			out[i] = int(d)
		}
		known *= out[i]
		if known > maxElements {
			return nil, fmt.Errorf("bad shape %v", s)
		}
	}
	total := tensor.NumElements(xs)
	if infer >= 0 {
		if known == 0 || total%known != 0 {
			return nil, fmt.Errorf("cannot reshape %v to %v", xs, s)
		}
		out[infer] = total / known
	}
	if tensor.NumElements(out) != total {
		return nil, fmt.Errorf("cannot reshape %v to %v: element counts differ", xs, s)
	}
	return one(im.reshape(x, out))
}

func flatten(im *importer, n *onnxpb.NodeProto, in []*val) ([]*val, error) {
	x, err := arg(in, 0, "input")
	if err != nil {
		return nil, err
	}
	xs := x.shape()
	ax := attrInt(n, "axis", 1)
	if ax < 0 {
		ax += int64(len(xs))
	}
	if ax < 0 || ax > int64(len(xs)) {
		return nil, fmt.Errorf("axis %d out of range for rank %d", attrInt(n, "axis", 1), len(xs))
	}
	return one(im.reshape(x, []int{tensor.NumElements(xs[:ax]), tensor.NumElements(xs[ax:])}))
}

func transposeOp(im *importer, n *onnxpb.NodeProto, in []*val) ([]*val, error) {
	x, err := arg(in, 0, "data")
	if err != nil {
		return nil, err
	}
	r := len(x.shape())
	perm := attrInts(n, "perm", nil)
	if perm == nil {
		for i := r - 1; i >= 0; i-- {
			perm = append(perm, int64(i))
		}
	}
	return one(im.op(ir.OpTranspose, ir.Attrs{"perm": ir.IntsAttr(perm...)}, x))
}

// axesArg reads the axes of Squeeze/Unsqueeze: an attribute before opset
// 13, the optional second input from it.
func (im *importer) axesArg(n *onnxpb.NodeProto, in []*val) ([]int64, error) {
	if im.opset < 13 {
		return attrInts(n, "axes", nil), nil
	}
	if a := opt(in, 1); a != nil {
		return constInts(a, "axes")
	}
	return nil, nil
}

func squeeze(im *importer, n *onnxpb.NodeProto, in []*val) ([]*val, error) {
	x, err := arg(in, 0, "data")
	if err != nil {
		return nil, err
	}
	axes, err := im.axesArg(n, in)
	if err != nil {
		return nil, err
	}
	xs := x.shape()
	drop := make([]bool, len(xs))
	for _, a := range axes {
		k, err := normAxis(a, len(xs))
		if err != nil {
			return nil, err
		}
		if xs[k] != 1 {
			return nil, fmt.Errorf("cannot squeeze dim %d of %v: it is not 1", k, xs)
		}
		drop[k] = true
	}
	var out []int
	for i, d := range xs {
		if !(drop[i] || len(axes) == 0 && d == 1) {
			out = append(out, d)
		}
	}
	return one(im.reshape(x, out))
}

func unsqueeze(im *importer, n *onnxpb.NodeProto, in []*val) ([]*val, error) {
	x, err := arg(in, 0, "data")
	if err != nil {
		return nil, err
	}
	axes, err := im.axesArg(n, in)
	if err != nil {
		return nil, err
	}
	if len(axes) == 0 {
		return nil, fmt.Errorf("no axes")
	}
	xs := x.shape()
	r := len(xs) + len(axes)
	ins := make([]bool, r)
	for _, a := range axes {
		k, err := normAxis(a, r)
		if err != nil {
			return nil, err
		}
		if ins[k] {
			return nil, fmt.Errorf("axes %v repeat an axis", axes)
		}
		ins[k] = true
	}
	out := make([]int, 0, r)
	j := 0
	for i := 0; i < r; i++ {
		if ins[i] {
			out = append(out, 1)
		} else {
			out = append(out, xs[j])
			j++
		}
	}
	return one(im.reshape(x, out))
}

// sliceOp: starts, ends, axes (and steps from opset 10) as attributes
// before opset 10 and inputs from it. Positive steps become slice ops, one
// per axis; negative steps a gather of the indices.
func sliceOp(im *importer, n *onnxpb.NodeProto, in []*val) ([]*val, error) {
	x, err := arg(in, 0, "data")
	if err != nil {
		return nil, err
	}
	var starts, ends, axes, steps []int64
	if im.opset < 10 {
		starts, ends, axes = attrInts(n, "starts", nil), attrInts(n, "ends", nil), attrInts(n, "axes", nil)
	} else {
		get := func(k int, what string) ([]int64, error) {
			if v := opt(in, k); v != nil {
				return constInts(v, what)
			}
			return nil, nil
		}
		if starts, err = get(1, "starts"); err != nil {
			return nil, err
		}
		if ends, err = get(2, "ends"); err != nil {
			return nil, err
		}
		if axes, err = get(3, "axes"); err != nil {
			return nil, err
		}
		if steps, err = get(4, "steps"); err != nil {
			return nil, err
		}
	}
	xs := x.shape()
	if len(starts) != len(ends) {
		return nil, fmt.Errorf("%d starts and %d ends", len(starts), len(ends))
	}
	if axes == nil {
		for i := range starts {
			axes = append(axes, int64(i))
		}
	}
	if steps == nil {
		steps = slices.Repeat([]int64{1}, len(starts))
	}
	if len(axes) != len(starts) || len(steps) != len(starts) {
		return nil, fmt.Errorf("starts, ends, axes and steps have different lengths")
	}
	y := x
	for i := range starts {
		ax, err := normAxis(axes[i], len(xs))
		if err != nil {
			return nil, err
		}
		dim := int64(xs[ax])
		st, en, step := starts[i], ends[i], steps[i]
		switch {
		case step == 0:
			return nil, fmt.Errorf("step 0")
		case step > 0:
			first, count := ir.SliceBounds(st, en, step, dim)
			if first == 0 && count == dim {
				continue
			}
			y, err = im.op(ir.OpSlice, ir.Attrs{"axis": ir.IntAttr(int64(ax)), "start": ir.IntAttr(first),
				"end": ir.IntAttr(first + (count-1)*step + 1), "step": ir.IntAttr(step)}, y)
		default:
			// ONNX: start clamps to [0, dim-1], end to [-1, dim-1].
			if st < 0 {
				st += dim
			}
			if en < 0 {
				en += dim
			}
			st = min(max(st, 0), dim-1)
			en = min(max(en, -1), dim-1)
			var idx []int64
			if st > en && (st-en-1)/(-step)+1 > maxFolded {
				return nil, fmt.Errorf("slice of %d elements with a negative step: too long", (st-en-1)/(-step)+1)
			}
			for k := st; k > en; k += step {
				idx = append(idx, k)
			}
			y, err = im.gather(ax, y, &val{c: i64Tensor([]int{len(idx)}, idx)})
		}
		if err != nil {
			return nil, err
		}
	}
	return []*val{y}, nil
}

func concat(im *importer, n *onnxpb.NodeProto, in []*val) ([]*val, error) {
	if len(in) == 0 {
		return nil, fmt.Errorf("no inputs")
	}
	for k := range in {
		if in[k] == nil {
			return nil, fmt.Errorf("input %d is missing", k)
		}
	}
	ax, err := normAxis(attrInt(n, "axis", 0), len(in[0].shape()))
	if err != nil {
		return nil, err
	}
	// One dtype: a run-time input's, else the first's.
	ref := in[0]
	for _, v := range in {
		if !v.isConst() {
			ref = v
			break
		}
	}
	args := make([]*val, len(in))
	for k, v := range in {
		if _, args[k], err = align(ref, v); err != nil {
			return nil, err
		}
	}
	return one(im.op(ir.OpConcat, ir.Attrs{"axis": ir.IntAttr(int64(ax))}, args...))
}

func shapeOp(im *importer, n *onnxpb.NodeProto, in []*val) ([]*val, error) {
	x, err := arg(in, 0, "data")
	if err != nil {
		return nil, err
	}
	xs := x.shape()
	r := int64(len(xs))
	start, end := attrInt(n, "start", 0), attrInt(n, "end", r)
	if start < 0 {
		start += r
	}
	if end < 0 {
		end += r
	}
	start, end = min(max(start, 0), r), min(max(end, 0), r)
	var s []int64
	for i := start; i < end; i++ {
		s = append(s, int64(xs[i]))
	}
	return []*val{{c: i64Tensor([]int{len(s)}, s)}}, nil
}

func cast(im *importer, n *onnxpb.NodeProto, in []*val) ([]*val, error) {
	x, err := arg(in, 0, "input")
	if err != nil {
		return nil, err
	}
	to := int32(attrInt(n, "to", 0))
	if x.isConst() {
		dt, ok := hostDType(to)
		if !ok {
			return nil, fmt.Errorf("cast to %s is not supported", typeName(to))
		}
		return []*val{{c: x.c.Convert(dt)}}, nil
	}
	dt, ok := runtimeDType(to)
	if !ok {
		return nil, fmt.Errorf("cast to %s is not supported", typeName(to))
	}
	if onnxpb.TensorProto_DataType(to) == onnxpb.TensorProto_BOOL {
		// A boolean is 0 or 1 at run time: x != 0 (a cast would truncate).
		z := &val{c: tensor.New(x.dtype(), nil)}
		return one(im.op(ir.OpCompare, ir.Attrs{"cmp": ir.StringAttr("ne")}, x, z))
	}
	if dt == x.dtype() {
		return []*val{x}, nil
	}
	return one(im.op(ir.OpCast, ir.Attrs{"to": ir.DTypeAttr(dt)}, x))
}

// gather: negative constant indices count from the end of the axis.
func gather(im *importer, n *onnxpb.NodeProto, in []*val) ([]*val, error) {
	x, err := arg(in, 0, "data")
	if err != nil {
		return nil, err
	}
	idx, err := arg(in, 1, "indices")
	if err != nil {
		return nil, err
	}
	xs := x.shape()
	ax, err := normAxis(attrInt(n, "axis", 0), len(xs))
	if err != nil {
		return nil, err
	}
	if idx.isConst() {
		v, err := constInts(idx, "indices")
		if err != nil {
			return nil, err
		}
		for i := range v {
			if v[i] < 0 {
				v[i] += int64(xs[ax])
			}
			if v[i] < 0 || v[i] >= int64(xs[ax]) {
				return nil, fmt.Errorf("index %d out of range for axis %d of %v", v[i], ax, xs)
			}
		}
		idx = &val{c: i64Tensor(idx.c.Shape, v)}
	} else if !idx.dtype().IsInt() {
		return nil, fmt.Errorf("indices are %s", idx.dtype())
	}
	return one(im.gather(ax, x, idx))
}

// gather is ONNX's Gather: its output has the data's dtype, also where
// tapml's gather reads an f16 or bf16 table as f32 (a storage dtype),
// which a cast then rounds back exactly.
func (im *importer) gather(ax int, x, idx *val) (*val, error) {
	y, err := im.op(ir.OpGather, ir.Attrs{"axis": ir.IntAttr(int64(ax))}, x, idx)
	if err != nil || y.dtype() == x.dtype() {
		return y, err
	}
	return im.op(ir.OpCast, ir.Attrs{"to": ir.DTypeAttr(x.dtype())}, y)
}

func constantOp(im *importer, n *onnxpb.NodeProto, in []*val) ([]*val, error) {
	var t *tensor.Tensor
	var err error
	switch {
	case attr(n, "value") != nil:
		t, err = decodeTensor(attr(n, "value").GetT(), im.dir)
	case attr(n, "value_float") != nil:
		t = tensor.FromFloat32(nil, []float32{attr(n, "value_float").GetF()})
	case attr(n, "value_floats") != nil:
		f := attr(n, "value_floats").GetFloats()
		t = tensor.FromFloat32([]int{len(f)}, f)
	case attr(n, "value_int") != nil:
		t = i64Tensor(nil, []int64{attr(n, "value_int").GetI()})
	case attr(n, "value_ints") != nil:
		v := attr(n, "value_ints").GetInts()
		t = i64Tensor([]int{len(v)}, v)
	default:
		return nil, fmt.Errorf("only tensor, float(s) and int(s) values are supported")
	}
	if err != nil {
		return nil, err
	}
	return []*val{{c: t, weight: true}}, nil
}

// spatial holds the spatial attributes of a conv or pool, 2-D.
type spatial struct {
	kernel, strides, dil [2]int64
	pads                 [4]int64
}

// spatialAttrs reads kernel (from kernelShape when given, else the
// kernel_shape attribute), strides, dilations and pads (auto_pad
// resolved) of a node over a 1-D or 2-D input of spatial size in.
func spatialAttrs(n *onnxpb.NodeProto, in []int, kernelShape []int) (spatial, error) {
	var s spatial
	d := len(in)
	k := attrInts(n, "kernel_shape", nil)
	if kernelShape != nil {
		if k != nil && !slices.Equal(k, toInt64(kernelShape)) {
			return s, fmt.Errorf("kernel_shape %v differs from the weights' %v", k, kernelShape)
		}
		k = toInt64(kernelShape)
	}
	st := attrInts(n, "strides", slices.Repeat([]int64{1}, d))
	dl := attrInts(n, "dilations", slices.Repeat([]int64{1}, d))
	pd := attrInts(n, "pads", make([]int64, 2*d))
	if len(k) != d || len(st) != d || len(dl) != d || len(pd) != 2*d {
		return s, fmt.Errorf("kernel %v, strides %v, dilations %v, pads %v do not fit %d spatial dims", k, st, dl, pd, d)
	}
	for i := 0; i < d; i++ {
		if st[i] < 1 || dl[i] < 1 || k[i] < 1 || k[i] > math.MaxInt32 || st[i] > math.MaxInt32 || dl[i] > math.MaxInt32 {
			return s, fmt.Errorf("kernel %v, strides %v, dilations %v must be >= 1", k, st, dl)
		}
	}
	switch ap := attrString(n, "auto_pad", "NOTSET"); ap {
	case "NOTSET":
	case "VALID":
		pd = make([]int64, 2*d)
	case "SAME_UPPER", "SAME_LOWER":
		if n.GetOpType() == "ConvTranspose" {
			break // resolved with the output shape
		}
		for i := 0; i < d; i++ {
			out := (int64(in[i]) + st[i] - 1) / st[i]
			total := max(0, (out-1)*st[i]+(k[i]-1)*dl[i]+1-int64(in[i]))
			pd[i], pd[i+d] = total/2, total-total/2
			if ap == "SAME_LOWER" {
				pd[i], pd[i+d] = total-total/2, total/2
			}
		}
	default:
		return s, fmt.Errorf("auto_pad %q is not supported", ap)
	}
	// 1-D becomes 2-D with a height of 1.
	if d == 1 {
		s.kernel, s.strides, s.dil = [2]int64{1, k[0]}, [2]int64{1, st[0]}, [2]int64{1, dl[0]}
		s.pads = [4]int64{0, pd[0], 0, pd[1]}
		return s, nil
	}
	copy(s.kernel[:], k)
	copy(s.strides[:], st)
	copy(s.dil[:], dl)
	copy(s.pads[:], pd)
	return s, nil
}

func toInt64(v []int) []int64 {
	out := make([]int64, len(v))
	for i, x := range v {
		out[i] = int64(x)
	}
	return out
}

// to2D reshapes an [N, C, L] tensor to [N, C, 1, L]; 4-D passes.
func (im *importer) to2D(x *val) (*val, error) {
	s := x.shape()
	switch len(s) {
	case 3:
		return im.reshape(x, []int{s[0], s[1], 1, s[2]})
	case 4:
		return x, nil
	}
	return nil, fmt.Errorf("input %v: only 1-D and 2-D spatial inputs ([N, C, L] or [N, C, H, W]) are supported", s)
}

// convOp is Conv and ConvTranspose.
func convOp(im *importer, n *onnxpb.NodeProto, in []*val) ([]*val, error) {
	x, err := arg(in, 0, "X")
	if err != nil {
		return nil, err
	}
	w, err := arg(in, 1, "W")
	if err != nil {
		return nil, err
	}
	b := opt(in, 2)
	xs, ws := x.shape(), w.shape()
	if len(xs) != len(ws) || len(xs) < 3 || len(xs) > 4 {
		return nil, fmt.Errorf("X %v and W %v: only 1-D and 2-D convolutions are supported", xs, ws)
	}
	sp, err := spatialAttrs(n, xs[2:], ws[2:])
	if err != nil {
		return nil, err
	}
	transpose := n.GetOpType() == "ConvTranspose"
	attrs := ir.Attrs{
		"strides": ir.IntsAttr(sp.strides[:]...), "dilations": ir.IntsAttr(sp.dil[:]...),
		"groups": ir.IntAttr(attrInt(n, "group", 1)),
	}
	op := ir.OpConv2D
	if transpose {
		op = ir.OpConvTranspose2D
		d := len(xs) - 2
		outPad := slices.Clone(attrInts(n, "output_padding", make([]int64, d)))
		outShape := attrInts(n, "output_shape", nil)
		ap := attrString(n, "auto_pad", "NOTSET")
		if len(outPad) != d {
			return nil, fmt.Errorf("output_padding %v does not fit %d spatial dims", outPad, d)
		}
		if len(outShape) > d {
			outShape = outShape[len(outShape)-d:]
		}
		if outShape == nil && (ap == "SAME_UPPER" || ap == "SAME_LOWER") {
			for i := 0; i < d; i++ {
				outShape = append(outShape, int64(xs[2+i])*attrInts(n, "strides", slices.Repeat([]int64{1}, d))[i])
			}
		}
		if outShape != nil {
			if len(outShape) != d {
				return nil, fmt.Errorf("output_shape %v does not fit %d spatial dims", attrInts(n, "output_shape", nil), d)
			}
			pads := make([]int64, 2*d)
			for i := 0; i < d; i++ {
				j := i + 2 - d // index into the 2-D attributes
				total := sp.strides[j]*int64(xs[2+i]-1) + outPad[i] + (int64(ws[2+i])-1)*sp.dil[j] + 1 - outShape[i]
				if total < 0 {
					// Larger than the full output: as ONNX Runtime, the
					// extra rows/columns at the end (bias only).
					outPad[i] -= total
					total = 0
				}
				pads[i], pads[i+d] = total-total/2, total/2
				if ap == "SAME_UPPER" {
					pads[i], pads[i+d] = total/2, total-total/2
				}
			}
			if d == 1 {
				sp.pads = [4]int64{0, pads[0], 0, pads[1]}
			} else {
				copy(sp.pads[:], pads)
			}
		}
		op2 := [2]int64{}
		copy(op2[2-d:], outPad)
		attrs["output_padding"] = ir.IntsAttr(op2[:]...)
	}
	attrs["pads"] = ir.IntsAttr(sp.pads[:]...)
	x2, err := im.to2D(x)
	if err != nil {
		return nil, err
	}
	w2, err := im.to2D(w)
	if err != nil {
		return nil, err
	}
	args := []*val{x2, w2}
	if b != nil {
		args = append(args, b)
	}
	if x2.dtype() != w2.dtype() {
		return nil, fmt.Errorf("X is %s, W is %s", x2.dtype(), w2.dtype())
	}
	y, err := im.op(op, attrs, args...)
	if err != nil || len(xs) == 4 {
		return one(y, err)
	}
	ys := y.shape()
	return one(im.reshape(y, []int{ys[0], ys[1], ys[3]}))
}

// batchNorm folds the inference-mode normalization into y = x·a + c with
// a = scale / sqrt(var + eps) and c = B - mean·a per channel (computed at
// import when the parameters are constants, as ONNX Runtime computes them).
func batchNorm(im *importer, n *onnxpb.NodeProto, in []*val) ([]*val, error) {
	if attrInt(n, "spatial", 1) != 1 || attrInt(n, "training_mode", 0) != 0 {
		return nil, fmt.Errorf("only inference mode with spatial = 1 is supported")
	}
	names := []string{"X", "scale", "B", "mean", "var"}
	args := make([]*val, 5)
	for k := range args {
		var err error
		if args[k], err = arg(in, k, names[k]); err != nil {
			return nil, err
		}
	}
	x := args[0]
	xs := x.shape()
	if len(xs) < 2 {
		return nil, fmt.Errorf("X %v must have a channel dim", xs)
	}
	cshape := append([]int{xs[1]}, slices.Repeat([]int{1}, len(xs)-2)...)
	for k := 1; k < 5; k++ {
		if tensor.NumElements(args[k].shape()) != xs[1] {
			return nil, fmt.Errorf("%s is %v, X has %d channels", names[k], args[k].shape(), xs[1])
		}
		var err error
		if args[k], err = im.reshape(args[k], cshape); err != nil {
			return nil, err
		}
	}
	dt := x.dtype()
	eps := scalar(dt, attrFloat(n, "epsilon", 1e-5))
	v, err := im.binop(ir.OpAdd, args[4], eps)
	if err == nil {
		v, err = im.op(ir.OpSqrt, nil, v)
	}
	var a, c *val
	if err == nil {
		a, err = im.binop(ir.OpDiv, args[1], v)
	}
	if err == nil {
		c, err = im.binop(ir.OpMul, args[3], a)
	}
	if err == nil {
		c, err = im.binop(ir.OpSub, args[2], c)
	}
	var y *val
	if err == nil {
		y, err = im.binop(ir.OpMul, x, a)
	}
	if err == nil {
		y, err = im.binop(ir.OpAdd, y, c)
	}
	return one(y, err)
}

// matmulOp follows numpy: a 1-D operand gains a dim of 1 that the result
// loses.
func matmulOp(im *importer, n *onnxpb.NodeProto, in []*val) ([]*val, error) {
	a, err := arg(in, 0, "A")
	if err != nil {
		return nil, err
	}
	b, err := arg(in, 1, "B")
	if err != nil {
		return nil, err
	}
	as, bs := a.shape(), b.shape()
	if len(as) == 0 || len(bs) == 0 {
		return nil, fmt.Errorf("MatMul of a scalar")
	}
	if len(as) == 1 {
		if a, err = im.reshape(a, []int{1, as[0]}); err != nil {
			return nil, err
		}
	}
	if len(bs) == 1 {
		if b, err = im.reshape(b, []int{bs[0], 1}); err != nil {
			return nil, err
		}
	}
	if a, b, err = align(a, b); err != nil {
		return nil, err
	}
	y, err := im.op(ir.OpMatmul, nil, a, b)
	if err != nil || (len(as) > 1 && len(bs) > 1) {
		return one(y, err)
	}
	ys := y.shape()
	out := append([]int{}, ys[:len(ys)-2]...)
	if len(as) > 1 {
		out = append(out, ys[len(ys)-2])
	}
	if len(bs) > 1 {
		out = append(out, ys[len(ys)-1])
	}
	return one(im.reshape(y, out))
}

// gemm is alpha·A'·B' + beta·C.
func gemm(im *importer, n *onnxpb.NodeProto, in []*val) ([]*val, error) {
	a, err := arg(in, 0, "A")
	if err != nil {
		return nil, err
	}
	b, err := arg(in, 1, "B")
	if err != nil {
		return nil, err
	}
	if len(a.shape()) != 2 || len(b.shape()) != 2 {
		return nil, fmt.Errorf("A %v and B %v must be matrices", a.shape(), b.shape())
	}
	if attrInt(n, "transA", 0) != 0 {
		if a, err = im.op(ir.OpTranspose, ir.Attrs{"perm": ir.IntsAttr(1, 0)}, a); err != nil {
			return nil, err
		}
	}
	if a, b, err = align(a, b); err != nil {
		return nil, err
	}
	y, err := im.op(ir.OpMatmul, ir.Attrs{"transpose_b": ir.BoolAttr(attrInt(n, "transB", 0) != 0)}, a, b)
	if err != nil {
		return nil, err
	}
	if alpha := attrFloat(n, "alpha", 1); alpha != 1 {
		if y, err = im.binop(ir.OpMul, y, scalar(y.dtype(), alpha)); err != nil {
			return nil, err
		}
	}
	if c := opt(in, 2); c != nil {
		if beta := attrFloat(n, "beta", 1); beta != 1 {
			if c, err = im.binop(ir.OpMul, c, scalar(y.dtype(), beta)); err != nil {
				return nil, err
			}
		}
		if y, err = im.binop(ir.OpAdd, y, c); err != nil {
			return nil, err
		}
	}
	return []*val{y}, nil
}

// resize is Resize (opset 10: X, scales; 11+: X, roi, scales, sizes) and
// Upsample (opset 7: a scales attribute; 9: input), over the last two axes
// of a 4-D input.
func resize(im *importer, n *onnxpb.NodeProto, in []*val) ([]*val, error) {
	x, err := arg(in, 0, "X")
	if err != nil {
		return nil, err
	}
	xs := x.shape()
	if len(xs) != 4 {
		return nil, fmt.Errorf("X %v: only 4-D inputs are supported", xs)
	}
	var scales []float64
	var sizes []int64
	modern := n.GetOpType() == "Resize" && im.opset >= 11
	switch {
	case n.GetOpType() == "Upsample" && im.opset < 9:
		scales = nil
		for _, f := range attr(n, "scales").GetFloats() {
			scales = append(scales, float64(f))
		}
	case !modern:
		sv, err := arg(in, 1, "scales")
		if err != nil {
			return nil, err
		}
		if scales, err = constFloats(sv, "scales"); err != nil {
			return nil, err
		}
	default:
		if v := opt(in, 2); v != nil && tensor.NumElements(v.shape()) > 0 {
			if scales, err = constFloats(v, "scales"); err != nil {
				return nil, err
			}
		}
		if v := opt(in, 3); v != nil && tensor.NumElements(v.shape()) > 0 {
			if sizes, err = constInts(v, "sizes"); err != nil {
				return nil, err
			}
		}
		if axes := attrInts(n, "axes", nil); axes != nil {
			return nil, fmt.Errorf("the axes attribute is not supported")
		}
		if attrInt(n, "antialias", 0) != 0 {
			return nil, fmt.Errorf("antialias is not supported")
		}
		if p := attrString(n, "keep_aspect_ratio_policy", "stretch"); p != "stretch" {
			return nil, fmt.Errorf("keep_aspect_ratio_policy %q is not supported", p)
		}
	}
	mode := attrString(n, "mode", "nearest")
	switch mode {
	case "nearest":
	case "linear", "bilinear":
		mode = "linear"
	default:
		return nil, fmt.Errorf("mode %q is not supported (nearest and linear are)", mode)
	}
	a := ir.Attrs{"mode": ir.StringAttr(mode)}
	var size [2]int64
	switch {
	case sizes != nil:
		if len(sizes) != 4 || sizes[0] != int64(xs[0]) || sizes[1] != int64(xs[1]) {
			return nil, fmt.Errorf("sizes %v: only the last two axes of %v can be resized", sizes, xs)
		}
		size = [2]int64{sizes[2], sizes[3]}
	case scales != nil:
		if len(scales) != 4 || scales[0] != 1 || scales[1] != 1 {
			return nil, fmt.Errorf("scales %v: only the last two axes can be resized", scales)
		}
		for k := 0; k < 2; k++ {
			if !(scales[2+k] > 0) || scales[2+k] > maxElements {
				return nil, fmt.Errorf("bad scales %v", scales)
			}
			size[k] = int64(math.Floor(float64(xs[2+k]) * scales[2+k]))
		}
		a["scales"] = ir.FloatsAttr(scales[2], scales[3])
	default:
		return nil, fmt.Errorf("neither scales nor sizes given")
	}
	a["size"] = ir.IntsAttr(size[:]...)
	if !modern {
		// Resize-10 and Upsample: asymmetric coordinates; nearest takes
		// the floor when enlarging (ONNX Runtime's "simple" rounding).
		a["coord"] = ir.StringAttr("asymmetric")
		a["nearest"] = ir.StringAttr("floor")
		if scales != nil && (scales[2] < 1 || scales[3] < 1) {
			a["nearest"] = ir.StringAttr("ceil")
		}
		return one(im.op(ir.OpResize, a, x))
	}
	coord := attrString(n, "coordinate_transformation_mode", "half_pixel")
	if !slices.Contains(ir.ResizeCoordModes, coord) {
		return nil, fmt.Errorf("coordinate_transformation_mode %q is not supported", coord)
	}
	a["coord"] = ir.StringAttr(coord)
	near := attrString(n, "nearest_mode", "round_prefer_floor")
	if !slices.Contains(ir.ResizeNearestModes, near) {
		return nil, fmt.Errorf("nearest_mode %q is not supported", near)
	}
	a["nearest"] = ir.StringAttr(near)
	return one(im.op(ir.OpResize, a, x))
}

// pool is MaxPool and AveragePool.
func pool(im *importer, n *onnxpb.NodeProto, in []*val) ([]*val, error) {
	x, err := arg(in, 0, "X")
	if err != nil {
		return nil, err
	}
	if len(n.GetOutput()) > 1 && n.GetOutput()[1] != "" {
		return nil, fmt.Errorf("the Indices output is not supported")
	}
	xs := x.shape()
	if len(xs) < 3 || len(xs) > 4 {
		return nil, fmt.Errorf("X %v: only 1-D and 2-D pooling is supported", xs)
	}
	sp, err := spatialAttrs(n, xs[2:], nil)
	if err != nil {
		return nil, err
	}
	mode := "max"
	if n.GetOpType() == "AveragePool" {
		mode = "avg"
	}
	a := ir.Attrs{
		"mode": ir.StringAttr(mode), "kernel": ir.IntsAttr(sp.kernel[:]...), "strides": ir.IntsAttr(sp.strides[:]...),
		"pads": ir.IntsAttr(sp.pads[:]...), "dilations": ir.IntsAttr(sp.dil[:]...),
		"ceil_mode": ir.BoolAttr(attrInt(n, "ceil_mode", 0) != 0), "count_include_pad": ir.BoolAttr(attrInt(n, "count_include_pad", 0) != 0),
	}
	x2, err := im.to2D(x)
	if err != nil {
		return nil, err
	}
	y, err := im.op(ir.OpPool2D, a, x2)
	if err != nil || len(xs) == 4 {
		return one(y, err)
	}
	ys := y.shape()
	return one(im.reshape(y, []int{ys[0], ys[1], ys[3]}))
}

func globalPool(op ir.Op) func(im *importer, n *onnxpb.NodeProto, in []*val) ([]*val, error) {
	return func(im *importer, n *onnxpb.NodeProto, in []*val) ([]*val, error) {
		x, err := arg(in, 0, "X")
		if err != nil {
			return nil, err
		}
		r := len(x.shape())
		if r < 3 {
			return nil, fmt.Errorf("X %v has no spatial dims", x.shape())
		}
		var axes []int64
		for i := 2; i < r; i++ {
			axes = append(axes, int64(i))
		}
		return one(im.op(op, ir.Attrs{"axes": ir.IntsAttr(axes...), "keepdims": ir.BoolAttr(true)}, x))
	}
}

// layerNorm normalizes over the dims from axis on (flattened into one when
// there are several).
func layerNorm(im *importer, n *onnxpb.NodeProto, in []*val) ([]*val, error) {
	x, err := arg(in, 0, "X")
	if err != nil {
		return nil, err
	}
	w, err := arg(in, 1, "Scale")
	if err != nil {
		return nil, err
	}
	xs := x.shape()
	ax, err := normAxis(attrInt(n, "axis", -1), len(xs))
	if err != nil {
		return nil, err
	}
	d := tensor.NumElements(xs[ax:])
	flat := append(append([]int{}, xs[:ax]...), d)
	args := []*val{x, w}
	if b := opt(in, 2); b != nil {
		args = append(args, b)
	}
	for k, v := range args {
		if k > 0 && tensor.NumElements(v.shape()) != d {
			return nil, fmt.Errorf("Scale/B is %v, the normalized dims %v", v.shape(), xs[ax:])
		}
		s := []int{d}
		if k == 0 {
			s = flat
		}
		if args[k], err = im.reshape(v, s); err != nil {
			return nil, err
		}
	}
	eps := attrFloat(n, "epsilon", 1e-5)
	y, err := im.op(ir.OpLayerNorm, ir.Attrs{"eps": ir.FloatAttr(eps)}, args...)
	if err != nil {
		return nil, err
	}
	if y, err = im.reshape(y, xs); err != nil {
		return nil, err
	}
	outs := []*val{y}
	if len(n.GetOutput()) > 1 && (n.GetOutput()[1] != "" || len(n.GetOutput()) > 2 && n.GetOutput()[2] != "") {
		// Mean and InvStdDev, over the normalized dims, kept as 1s.
		var axes []int64
		for i := ax; i < len(xs); i++ {
			axes = append(axes, int64(i))
		}
		red := ir.Attrs{"axes": ir.IntsAttr(axes...), "keepdims": ir.BoolAttr(true)}
		mean, err := im.op(ir.OpReduceMean, red, x)
		if err != nil {
			return nil, err
		}
		dev, err := im.binop(ir.OpSub, x, mean)
		if err == nil {
			dev, err = im.binop(ir.OpMul, dev, dev)
		}
		if err == nil {
			dev, err = im.op(ir.OpReduceMean, red, dev)
		}
		if err == nil {
			dev, err = im.binop(ir.OpAdd, dev, scalar(dev.dtype(), eps))
		}
		if err == nil {
			dev, err = im.op(ir.OpRsqrt, nil, dev)
		}
		if err != nil {
			return nil, err
		}
		outs = append(outs, mean, dev)
	}
	return outs, nil
}
