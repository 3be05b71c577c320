package onnx

import (
	"fmt"
	"math"
	"slices"

	"github.com/tapml/tapml/frontend/onnx/onnxpb"
	"github.com/tapml/tapml/ir"
	"github.com/tapml/tapml/tensor"
)

// Comparisons, logic and the shape ops around control flow. Booleans are
// i32 0/1 at run time (ir.OpCompare writes them, ir.OpWhere reads them);
// the logical ops become compare and where on them, exactly. Pad, Expand
// and Tile become gathers of constant indices and concats of constants:
// data movement, exact on every target.

func init() {
	for k, v := range map[string]handler{
		"Equal": h(compareOp("eq")), "Greater": h(compareOp("gt")), "Less": h(compareOp("lt")),
		"GreaterOrEqual": {compareOp("ge"), 12}, "LessOrEqual": {compareOp("le"), 12},
		"Not": h(notOp), "And": h(logical("and")), "Or": h(logical("or")), "Xor": h(logical("xor")),
		"Where": {whereOp, 9}, "ConstantOfShape": {constantOfShape, 9}, "Pad": h(padOp),
		"Expand": {expandOp, 8}, "Tile": h(tileOp), "Range": {rangeOp, 11}, "Size": h(sizeOp),
	} {
		handlers[k] = v
	}
}

func compareOp(c string) func(im *importer, n *onnxpb.NodeProto, in []*val) ([]*val, error) {
	return func(im *importer, n *onnxpb.NodeProto, in []*val) ([]*val, error) { return im.compare(in, c) }
}

// compare is a comparison of inputs 0 and 1, of one dtype after align.
func (im *importer) compare(in []*val, c string) ([]*val, error) {
	ab, err := args(in, "A", "B")
	if err != nil {
		return nil, err
	}
	a, b, err := align(im.asCond(ab[0]), im.asCond(ab[1]))
	if err != nil {
		return nil, err
	}
	return one(im.op(ir.OpCompare, ir.Attrs{"cmp": ir.StringAttr(c)}, a, b))
}

// args returns the inputs in (in order) that must be given, named for
// errors.
func args(in []*val, names ...string) ([]*val, error) {
	out := make([]*val, len(names))
	for k, name := range names {
		v, err := arg(in, k, name)
		if err != nil {
			return nil, err
		}
		out[k] = v
	}
	return out, nil
}

// zero and oneI32 are the i32 scalars logic compares and selects with.
func zero() *val   { return &val{c: tensor.FromInt32(nil, []int32{0})} }
func oneI32() *val { return &val{c: tensor.FromInt32(nil, []int32{1})} }

func notOp(im *importer, n *onnxpb.NodeProto, in []*val) ([]*val, error) {
	x, err := arg(in, 0, "X")
	if err != nil {
		return nil, err
	}
	return one(im.op(ir.OpCompare, ir.Attrs{"cmp": ir.StringAttr("eq")}, im.asCond(x), zero()))
}

// logical: on 0/1 values, a and b = where(a, b, 0), a or b = where(a, 1,
// b), a xor b = a != b.
func logical(kind string) func(im *importer, n *onnxpb.NodeProto, in []*val) ([]*val, error) {
	return func(im *importer, n *onnxpb.NodeProto, in []*val) ([]*val, error) {
		ab, err := args(in, "A", "B")
		if err != nil {
			return nil, err
		}
		a, b := im.asCond(ab[0]), im.asCond(ab[1])
		switch kind {
		case "and":
			return one(im.op(ir.OpWhere, nil, a, b, zero()))
		case "or":
			return one(im.op(ir.OpWhere, nil, a, oneI32(), b))
		}
		return one(im.op(ir.OpCompare, ir.Attrs{"cmp": ir.StringAttr("ne")}, a, b))
	}
}

func whereOp(im *importer, n *onnxpb.NodeProto, in []*val) ([]*val, error) {
	cxy, err := args(in, "condition", "X", "Y")
	if err != nil {
		return nil, err
	}
	x, y, err := align(cxy[1], cxy[2])
	if err != nil {
		return nil, err
	}
	return one(im.op(ir.OpWhere, nil, im.asCond(cxy[0]), x, y))
}

// constantOfShape is a constant tensor of the (constant) shape input,
// filled with the value attribute's one element (f32 0 by default).
func constantOfShape(im *importer, n *onnxpb.NodeProto, in []*val) ([]*val, error) {
	s, err := arg(in, 0, "input")
	if err != nil {
		return nil, err
	}
	dims, err := constInts(s, "the shape")
	if err != nil {
		return nil, err
	}
	shape, err := checkDims(dims)
	if err != nil {
		return nil, err
	}
	if tensor.NumElements(shape) > maxFolded {
		return nil, fmt.Errorf("a constant of shape %v is too large (more than %d elements)", shape, maxFolded)
	}
	fill := tensor.FromFloat32(nil, []float32{0})
	if a := attr(n, "value"); a != nil {
		if fill, err = decodeTensor(a.GetT(), im.dir); err != nil {
			return nil, err
		}
		if fill.NumElements() != 1 {
			return nil, fmt.Errorf("value has %d elements, want 1", fill.NumElements())
		}
	}
	out := tensor.New(fill.DType, shape)
	size := fill.DType.Size()
	for i := 0; i < out.NumElements(); i++ {
		copy(out.Data[i*size:], fill.Data[:size])
	}
	return []*val{{c: out}}, nil
}

// gatherIdx gathers the constant indices idx of x along axis.
func (im *importer) gatherIdx(x *val, axis int, idx []int64) (*val, error) {
	return im.op(ir.OpGather, ir.Attrs{"axis": ir.IntAttr(int64(axis))}, x, &val{c: i64Tensor([]int{len(idx)}, idx)})
}

// padOp: pads an attribute before opset 11, an input (with the constant
// value, and from opset 18 the axes) from it. Negative pads crop. Modes
// constant (concats of constant blocks), reflect, edge and wrap (a gather
// of the source index of every output position).
func padOp(im *importer, n *onnxpb.NodeProto, in []*val) ([]*val, error) {
	x, err := arg(in, 0, "data")
	if err != nil {
		return nil, err
	}
	r := len(x.shape())
	pads := attrInts(n, "pads", nil)
	value := attrFloat(n, "value", 0)
	var axes []int64
	if im.opset >= 11 {
		p, err := arg(in, 1, "pads")
		if err != nil {
			return nil, err
		}
		if pads, err = constInts(p, "pads"); err != nil {
			return nil, err
		}
		if c := opt(in, 2); c != nil {
			v, err := constFloats(c, "constant_value")
			if err != nil {
				return nil, err
			}
			if len(v) > 0 {
				value = v[0]
			}
		}
		if a := opt(in, 3); a != nil {
			if axes, err = constInts(a, "axes"); err != nil {
				return nil, err
			}
		}
	}
	if axes == nil {
		for i := range r {
			axes = append(axes, int64(i))
		}
	}
	if len(pads) != 2*len(axes) {
		return nil, fmt.Errorf("%d pads for %d axes", len(pads), len(axes))
	}
	mode := attrString(n, "mode", "constant")
	y := x
	for i, a := range axes {
		ax, err := normAxis(a, r)
		if err != nil {
			return nil, err
		}
		if y, err = im.padAxis(y, ax, pads[i], pads[i+len(axes)], mode, value); err != nil {
			return nil, err
		}
	}
	return []*val{y}, nil
}

// padAxis pads (or, negative, crops) one axis at its start and end.
func (im *importer) padAxis(x *val, ax int, before, after int64, mode string, value float64) (*val, error) {
	d := int64(x.shape()[ax])
	if before < 0 || after < 0 {
		start, end := max(-before, 0), d-max(-after, 0)
		if end < start {
			return nil, fmt.Errorf("pads crop all of axis %d", ax)
		}
		var err error
		if x, err = im.op(ir.OpSlice, ir.Attrs{"axis": ir.IntAttr(int64(ax)), "start": ir.IntAttr(start), "end": ir.IntAttr(end)}, x); err != nil {
			return nil, err
		}
		d, before, after = end-start, max(before, 0), max(after, 0)
	}
	if before == 0 && after == 0 {
		return x, nil
	}
	if before+after > maxFolded {
		return nil, fmt.Errorf("pads of %d elements: too many", before+after)
	}
	if mode == "constant" {
		parts := []*val{}
		block := func(k int64) error {
			s := slices.Clone(x.shape())
			s[ax] = int(k)
			if tensor.NumElements(s) > maxFolded {
				return fmt.Errorf("a pad of shape %v is too large", s)
			}
			c := tensor.New(x.dtype(), s)
			for i := 0; i < c.NumElements(); i++ {
				c.SetFloat64At(i, value)
			}
			parts = append(parts, &val{c: c})
			return nil
		}
		if before > 0 {
			if err := block(before); err != nil {
				return nil, err
			}
		}
		parts = append(parts, x)
		if after > 0 {
			if err := block(after); err != nil {
				return nil, err
			}
		}
		return im.op(ir.OpConcat, ir.Attrs{"axis": ir.IntAttr(int64(ax))}, parts...)
	}
	if d == 0 {
		return nil, fmt.Errorf("%s padding of an empty axis", mode)
	}
	idx := make([]int64, 0, before+d+after)
	for o := -before; o < d+after; o++ {
		var src int64
		switch mode {
		case "edge":
			src = min(max(o, 0), d-1)
		case "wrap":
			src = ((o % d) + d) % d
		case "reflect":
			if d == 1 {
				src = 0
				break
			}
			period := 2 * (d - 1)
			m := ((o % period) + period) % period
			src = min(m, period-m)
		default:
			return nil, fmt.Errorf("mode %q is not supported (constant, reflect, edge, wrap are)", mode)
		}
		idx = append(idx, src)
	}
	return im.gatherIdx(x, ax, idx)
}

// expandOp broadcasts x to a (constant) shape: each axis broadcast from 1
// is a gather of index 0 repeated.
func expandOp(im *importer, n *onnxpb.NodeProto, in []*val) ([]*val, error) {
	xs0, err := args(in, "input", "shape")
	if err != nil {
		return nil, err
	}
	x := xs0[0]
	dims, err := constInts(xs0[1], "the shape")
	if err != nil {
		return nil, err
	}
	xs := x.shape()
	r := max(len(xs), len(dims))
	lead := append(slices.Repeat([]int{1}, r-len(xs)), xs...)
	out := make([]int64, r)
	for i := range out {
		d := int64(1)
		if j := i - (r - len(dims)); j >= 0 {
			d = dims[j]
		}
		switch {
		case int64(lead[i]) == d || d == 1:
			out[i] = int64(lead[i])
		case lead[i] == 1:
			out[i] = d
		default:
			return nil, fmt.Errorf("cannot expand %v to %v", xs, dims)
		}
	}
	y, err := im.reshape(x, lead)
	if err != nil {
		return nil, err
	}
	for i := range out {
		if int64(lead[i]) != out[i] {
			if y, err = im.gatherIdx(y, i, make([]int64, out[i])); err != nil {
				return nil, err
			}
		}
	}
	return []*val{y}, nil
}

// tileOp repeats x along each axis: a gather of the axis' indices,
// repeated.
func tileOp(im *importer, n *onnxpb.NodeProto, in []*val) ([]*val, error) {
	xr, err := args(in, "input", "repeats")
	if err != nil {
		return nil, err
	}
	x := xr[0]
	reps, err := constInts(xr[1], "repeats")
	if err != nil {
		return nil, err
	}
	xs := x.shape()
	if len(reps) != len(xs) {
		return nil, fmt.Errorf("%d repeats for rank %d", len(reps), len(xs))
	}
	y := x
	for ax, k := range reps {
		if k < 0 || int64(xs[ax])*k > maxFolded {
			return nil, fmt.Errorf("repeats %v: want counts >= 0 of a size that fits", reps)
		}
		if k == 1 {
			continue
		}
		var idx []int64
		for range k {
			for i := range int64(xs[ax]) {
				idx = append(idx, i)
			}
		}
		if y, err = im.gatherIdx(y, ax, idx); err != nil {
			return nil, err
		}
	}
	return []*val{y}, nil
}

// rangeOp computes start, start+delta, ... below limit at import.
func rangeOp(im *importer, n *onnxpb.NodeProto, in []*val) ([]*val, error) {
	var v [3]float64
	for k, name := range []string{"start", "limit", "delta"} {
		a, err := arg(in, k, name)
		if err != nil {
			return nil, err
		}
		f, err := constFloats(a, name)
		if err != nil {
			return nil, fmt.Errorf("%w: the length of a Range must be known at import", err)
		}
		if len(f) != 1 {
			return nil, fmt.Errorf("%s has %d elements, want 1", name, len(f))
		}
		v[k] = f[0]
	}
	if v[2] == 0 {
		return nil, fmt.Errorf("delta 0")
	}
	count := max(math.Ceil((v[1]-v[0])/v[2]), 0)
	if count > maxFolded {
		return nil, fmt.Errorf("a range of %g elements is too long", count)
	}
	out := tensor.New(in[0].c.DType, []int{int(count)})
	for i := range int(count) {
		if out.DType == ir.I64 {
			out = i64Set(out, i, int64(v[0])+int64(i)*int64(v[2]))
		} else {
			out.SetFloat64At(i, v[0]+float64(i)*v[2])
		}
	}
	return []*val{{c: out}}, nil
}

// i64Set sets element i of an i64 tensor exactly.
func i64Set(t *tensor.Tensor, i int, v int64) *tensor.Tensor {
	for b := range 8 {
		t.Data[8*i+b] = byte(uint64(v) >> (8 * b))
	}
	return t
}

// sizeOp is the number of elements, known at import.
func sizeOp(im *importer, n *onnxpb.NodeProto, in []*val) ([]*val, error) {
	x, err := arg(in, 0, "data")
	if err != nil {
		return nil, err
	}
	return []*val{{c: i64Tensor(nil, []int64{int64(tensor.NumElements(x.shape()))})}}, nil
}
