package onnx

import (
	"fmt"

	"github.com/tapml/tapml/frontend/onnx/onnxpb"
	"github.com/tapml/tapml/ir"
	"github.com/tapml/tapml/tensor"
)

// Control flow. The IR has no control flow: If, Loop and Scan are
// flattened at import.
//
//   - If: a condition known at import (a constant, a shape computation, an
//     input fixed with Options.Constants) imports the branch it selects
//     alone. A condition known only at run time imports both branches and
//     selects each output with where; the branches must give their outputs
//     the same type (both are computed: they have no side effects).
//   - Loop: unrolled. The trip count must be known at import, or the
//     condition must become false at import (it may depend on the
//     iteration number, which is a constant of each unrolled iteration);
//     a condition that depends on run-time values cannot be unrolled.
//     Carried values flow from iteration to iteration; scan outputs are
//     stacked along a new first axis.
//   - Scan (opset 9 on): unrolled over the scan axis, which is static.
//
// A subgraph reads the values of the graphs around it by name; it is
// imported in a scope of its own, and its nodes' provenance is their path
// ("Loop_0/body[2]/Add_1": iteration 2 of the body of node Loop_0).

func init() {
	handlers["If"] = h(ifOp)
	handlers["Loop"] = h(loopOp)
	handlers["Scan"] = handler{fn: scanOp, since: 9}
}

// maxUnrolled bounds the iterations of a loop unrolled at import, and
// maxUnrolledNodes the nodes of the whole function (nested loops multiply).
const (
	maxUnrolled      = 4096
	maxUnrolledNodes = 1 << 20
)

// scope maps the value names visible to the nodes being imported: a
// subgraph's own names, then those of the graphs around it.
type scope struct {
	names  map[string]*val
	parent *scope
}

func newScope(parent *scope) *scope { return &scope{names: map[string]*val{}, parent: parent} }

func (s *scope) get(name string) *val {
	for ; s != nil; s = s.parent {
		if v, ok := s.names[name]; ok {
			return v
		}
	}
	return nil
}

func (s *scope) set(name string, v *val) { s.names[name] = v }

// fixedInput is the constant a graph input is fixed to (Options.Constants):
// its element type the input's, its shape the input's where static.
func fixedInput(in *onnxpb.ValueInfoProto, c *tensor.Tensor) (*val, error) {
	name := in.GetName()
	tt := in.GetType().GetTensorType()
	dt, ok := hostDType(tt.GetElemType())
	if tt == nil || !ok {
		return nil, fmt.Errorf("Options.Constants[%q]: the input is not a tensor of a supported type", name)
	}
	dims := tt.GetShape().GetDim()
	if tt.GetShape() != nil && len(dims) != len(c.Shape) && !(len(dims) <= 1 && c.NumElements() == 1) {
		return nil, fmt.Errorf("Options.Constants[%q]: a value of shape %v for an input of rank %d", name, c.Shape, len(dims))
	}
	if len(dims) == len(c.Shape) {
		for i, d := range dims {
			if d.GetDimValue() > 0 && d.GetDimValue() != int64(c.Shape[i]) {
				return nil, fmt.Errorf("Options.Constants[%q]: a value of shape %v, but dim %d of the input is %d", name, c.Shape, i, d.GetDimValue())
			}
		}
	} else if len(dims) == 1 {
		c = reshaped(c, []int{1})
	} else {
		c = reshaped(c, nil)
	}
	return &val{name: name, c: c.Convert(dt)}, nil
}

// reshaped returns t with another shape of as many elements.
func reshaped(t *tensor.Tensor, shape []int) *tensor.Tensor {
	out := t.Clone()
	out.Shape = shape
	return out
}

// truth reads a condition known at import: whether its first element is
// nonzero.
func truth(v *val) (bool, error) {
	if v.c.NumElements() == 0 {
		return false, fmt.Errorf("an empty condition")
	}
	return v.c.Float64At(0) != 0, nil
}

// subgraph returns the graph attribute name of node n.
func subgraph(n *onnxpb.NodeProto, name string) (*onnxpb.GraphProto, error) {
	a := attr(n, name)
	if a == nil || a.GetG() == nil {
		return nil, fmt.Errorf("no %s graph", name)
	}
	return a.GetG(), nil
}

// body imports subgraph g of the node being imported in a scope of its
// own, its inputs bound to args (nil for an input left out), its nodes'
// provenance prefixed with where ("body[2]"). It returns g's outputs.
func (im *importer) body(g *onnxpb.GraphProto, where string, args []*val) ([]*val, error) {
	if len(args) > len(g.GetInput()) {
		return nil, fmt.Errorf("%s: %d values for a subgraph of %d inputs", where, len(args), len(g.GetInput()))
	}
	if len(im.b.F.Nodes) > maxUnrolledNodes {
		return nil, fmt.Errorf("%s: the unrolled graph has more than %d nodes", where, maxUnrolledNodes)
	}
	n, prefix, outer := im.node, im.prefix, im.vals
	im.vals, im.prefix = newScope(outer), prefix+nodeName(n)+"/"+where+"/"
	defer func() { im.node, im.prefix, im.vals = n, prefix, outer }()
	for _, t := range g.GetInitializer() {
		c, err := decodeTensor(t, im.dir)
		if err != nil {
			return nil, fmt.Errorf("%s: initializer: %w", where, err)
		}
		im.vals.set(t.GetName(), &val{name: t.GetName(), c: c, weight: true})
	}
	for i, in := range g.GetInput() {
		if i < len(args) && args[i] != nil {
			a := *args[i]
			im.vals.set(in.GetName(), &a)
		}
	}
	if err := im.nodes(g); err != nil {
		return nil, err
	}
	outs := make([]*val, len(g.GetOutput()))
	for i, o := range g.GetOutput() {
		if outs[i] = im.vals.get(o.GetName()); outs[i] == nil {
			return nil, fmt.Errorf("%s: output %q is not computed", where, o.GetName())
		}
	}
	return outs, nil
}

// ifOp imports the branch a condition known at import selects, or both
// branches joined by where.
func ifOp(im *importer, n *onnxpb.NodeProto, in []*val) ([]*val, error) {
	cond, err := arg(in, 0, "cond")
	if err != nil {
		return nil, err
	}
	thenG, err := subgraph(n, "then_branch")
	if err != nil {
		return nil, err
	}
	elseG, err := subgraph(n, "else_branch")
	if err != nil {
		return nil, err
	}
	if cond.isConst() {
		yes, err := truth(cond)
		if err != nil {
			return nil, err
		}
		if yes {
			return im.body(thenG, "then_branch", nil)
		}
		return im.body(elseG, "else_branch", nil)
	}
	if cond.dtype() != ir.I32 || len(cond.shape()) > 1 || (len(cond.shape()) == 1 && cond.shape()[0] != 1) {
		return nil, fmt.Errorf("the condition is %s%v; want one boolean", cond.dtype(), cond.shape())
	}
	then, err := im.body(thenG, "then_branch", nil)
	if err != nil {
		return nil, err
	}
	els, err := im.body(elseG, "else_branch", nil)
	if err != nil {
		return nil, err
	}
	if len(then) != len(els) {
		return nil, fmt.Errorf("the branches have %d and %d outputs", len(then), len(els))
	}
	outs := make([]*val, len(then))
	for i := range then {
		a, b, err := align(then[i], els[i])
		if err != nil {
			return nil, fmt.Errorf("output %d: %w", i, err)
		}
		if fmt.Sprint(a.shape()) != fmt.Sprint(b.shape()) {
			return nil, fmt.Errorf("output %d is %v in then_branch and %v in else_branch: with a condition known only at run time, the branches must agree in shape (fix the condition's input to fold it)", i, a.shape(), b.shape())
		}
		if outs[i], err = im.op(ir.OpWhere, nil, im.asCond(cond), a, b); err != nil {
			return nil, err
		}
	}
	return outs, nil
}

// asCond is a boolean value as where's i32 condition (a host bool
// constant converted).
func (im *importer) asCond(v *val) *val {
	if v.isConst() && v.c.DType != ir.I32 {
		c, err := toI32(v.c)
		if err == nil {
			return &val{name: v.name, c: c}
		}
	}
	return v
}

// loopOp unrolls a Loop (see the top of the file).
func loopOp(im *importer, n *onnxpb.NodeProto, in []*val) ([]*val, error) {
	g, err := subgraph(n, "body")
	if err != nil {
		return nil, err
	}
	trips := int64(-1)
	if m := opt(in, 0); m != nil {
		v, err := constInts(m, "the trip count M")
		if err != nil {
			return nil, fmt.Errorf("%w: tapml unrolls loops at import", err)
		}
		if len(v) != 1 || v[0] < 0 {
			return nil, fmt.Errorf("trip count %v: want one count >= 0", v)
		}
		trips = v[0]
	}
	cond := opt(in, 1)
	if cond == nil {
		cond = &val{c: tensor.New(ir.Bool, nil)}
		cond.c.Data[0] = 1
	}
	var carried []*val
	if len(in) > 2 {
		carried = in[2:]
	}
	if trips < 0 && opt(in, 1) == nil {
		return nil, fmt.Errorf("a loop without a trip count or a condition never ends")
	}
	nOut := len(g.GetOutput()) - 1 - len(carried)
	if nOut < 0 {
		return nil, fmt.Errorf("the body has %d outputs for %d carried values", len(g.GetOutput()), len(carried))
	}
	scans := make([][]*val, nOut)
	for i := int64(0); trips < 0 || i < trips; i++ {
		if !cond.isConst() {
			return nil, fmt.Errorf("its condition depends on values known only at run time: tapml unrolls loops at import and needs the trip count, or a condition computed from constants and the iteration number")
		}
		if more, err := truth(cond); err != nil || !more {
			break
		}
		if i >= maxUnrolled {
			return nil, fmt.Errorf("more than %d iterations: too many to unroll", maxUnrolled)
		}
		args := append([]*val{{c: i64Tensor(nil, []int64{i})}, cond}, carried...)
		outs, err := im.body(g, fmt.Sprintf("body[%d]", i), args)
		if err != nil {
			return nil, err
		}
		cond, carried = outs[0], outs[1:1+len(carried)]
		for k, o := range outs[1+len(carried):] {
			scans[k] = append(scans[k], o)
		}
	}
	res := append([]*val{}, carried...)
	for k, s := range scans {
		if len(s) == 0 {
			return nil, fmt.Errorf("scan output %d of a loop that ran no iteration has no known shape", k)
		}
		st, err := im.stack(s, 0)
		if err != nil {
			return nil, fmt.Errorf("scan output %d: %w", k, err)
		}
		res = append(res, st)
	}
	return res, nil
}

// stack joins values of one shape along a new axis.
func (im *importer) stack(vs []*val, axis int) (*val, error) {
	parts := make([]*val, len(vs))
	for i, v := range vs {
		s := v.shape()
		if axis > len(s) {
			return nil, fmt.Errorf("axis %d out of range for rank %d", axis, len(s))
		}
		ns := append(append(append([]int{}, s[:axis]...), 1), s[axis:]...)
		var err error
		if parts[i], err = im.reshape(v, ns); err != nil {
			return nil, err
		}
	}
	if len(parts) == 1 {
		return parts[0], nil
	}
	return im.op(ir.OpConcat, ir.Attrs{"axis": ir.IntAttr(int64(axis))}, parts...)
}

// take is element t of v along axis, the axis removed.
func (im *importer) take(v *val, axis, t int) (*val, error) {
	s, err := im.op(ir.OpSlice, ir.Attrs{"axis": ir.IntAttr(int64(axis)), "start": ir.IntAttr(int64(t)), "end": ir.IntAttr(int64(t + 1))}, v)
	if err != nil {
		return nil, err
	}
	shape := append(append([]int{}, v.shape()[:axis]...), v.shape()[axis+1:]...)
	return im.reshape(s, shape)
}

// scanOp unrolls a Scan (opset 9 on) over its scan axis.
func scanOp(im *importer, n *onnxpb.NodeProto, in []*val) ([]*val, error) {
	g, err := subgraph(n, "body")
	if err != nil {
		return nil, err
	}
	m := int(attrInt(n, "num_scan_inputs", 0))
	if m < 1 || m > len(in) {
		return nil, fmt.Errorf("num_scan_inputs %d for %d inputs", m, len(in))
	}
	for k, v := range in {
		if v == nil {
			return nil, fmt.Errorf("input %d is missing", k)
		}
	}
	states, xs := in[:len(in)-m], in[len(in)-m:]
	inAxes := attrInts(n, "scan_input_axes", make([]int64, m))
	inDirs := attrInts(n, "scan_input_directions", make([]int64, m))
	k := len(g.GetOutput()) - len(states)
	outAxes := attrInts(n, "scan_output_axes", make([]int64, max(k, 0)))
	outDirs := attrInts(n, "scan_output_directions", make([]int64, max(k, 0)))
	if k < 0 || len(inAxes) != m || len(inDirs) != m || len(outAxes) != k || len(outDirs) != k {
		return nil, fmt.Errorf("scan attributes do not match %d scan inputs and %d scan outputs", m, k)
	}
	length := -1
	axes := make([]int, m)
	for j, x := range xs {
		if axes[j], err = normAxis(inAxes[j], len(x.shape())); err != nil {
			return nil, fmt.Errorf("scan input %d: %w", j, err)
		}
		l := x.shape()[axes[j]]
		if length >= 0 && l != length {
			return nil, fmt.Errorf("scan inputs of %d and %d steps", length, l)
		}
		length = l
	}
	if length > maxUnrolled {
		return nil, fmt.Errorf("%d steps: too many to unroll", length)
	}
	scans := make([][]*val, k)
	for t := 0; t < length; t++ {
		args := append([]*val{}, states...)
		for j, x := range xs {
			at := t
			if inDirs[j] != 0 {
				at = length - 1 - t
			}
			s, err := im.take(x, axes[j], at)
			if err != nil {
				return nil, err
			}
			args = append(args, s)
		}
		outs, err := im.body(g, fmt.Sprintf("body[%d]", t), args)
		if err != nil {
			return nil, err
		}
		states = outs[:len(states)]
		for j, o := range outs[len(states):] {
			scans[j] = append(scans[j], o)
		}
	}
	res := append([]*val{}, states...)
	for j, s := range scans {
		if len(s) == 0 {
			return nil, fmt.Errorf("scan output %d of a scan of no step has no known shape", j)
		}
		if outDirs[j] != 0 {
			for a, b := 0, len(s)-1; a < b; a, b = a+1, b-1 {
				s[a], s[b] = s[b], s[a]
			}
		}
		ax, err := normAxis(outAxes[j], len(s[0].shape())+1)
		if err != nil {
			return nil, fmt.Errorf("scan output %d: %w", j, err)
		}
		st, err := im.stack(s, ax)
		if err != nil {
			return nil, fmt.Errorf("scan output %d: %w", j, err)
		}
		res = append(res, st)
	}
	return res, nil
}
