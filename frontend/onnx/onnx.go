// Package onnx imports ONNX models (the protobuf format of onnx.proto, IR
// versions 3 and up, default-domain opsets 7 to 21) into tapml's IR.
//
// The model's graph becomes one function, "main", whose parameters are the
// graph inputs that have no initializer and whose results are the graph
// outputs. Initializers and the tensors of Constant nodes become module
// weights (ir.BytesSource) when the run-time graph reads them. Everything
// computable at import is computed at import on the CPU reference device:
// shape computations (Shape → Gather → Concat → Reshape chains), casts of
// constants, batch-norm parameters folded into a per-channel scale and
// shift, and so on; so the function holds only the ops that depend on its
// inputs.
//
// Shapes are static: a dynamic input dim (dim_param or a missing dim_value)
// must be given a size through Options.Shapes or Options.Dims, except a
// leading (batch) dim, which defaults to 1. 64-bit integer tensors that
// reach run time are i32 in the IR (graph inputs included): the GPU targets
// have no 64-bit integers; ONNX uses them for shapes and indices.
//
// Ops are translated into IR primitives (see the table in ops.go); ops
// outside the table are reported together, with their counts, in one error.
package onnx

import (
	"bytes"
	"fmt"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/tapml/tapml/frontend/onnx/onnxpb"
	"github.com/tapml/tapml/internal/safeio"
	"github.com/tapml/tapml/ir"
	"github.com/tapml/tapml/runtime/cpu"
	"github.com/tapml/tapml/tensor"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// Opsets of the default domain this importer reads.
const (
	MinOpset = 7
	MaxOpset = 21
)

// Options fix what the file leaves open.
type Options struct {
	// Shapes gives the shape of graph inputs by name, overriding the
	// file's (it must agree with the file's static dims); input_<k> names
	// the k-th input that is not an initializer, unless an input has that
	// name.
	Shapes map[string][]int64
	// Dims gives sizes to named dynamic dims (an input's dim_param).
	Dims map[string]int64
	// Constants fixes graph inputs to values: each becomes a constant of
	// the import, not a parameter, so that what depends on it folds (an
	// If on a flag, a Loop's trip count). Its shape must fit the input's.
	Constants map[string]*tensor.Tensor
}

// MetaInputs is the module metadata key that records the input shapes an
// import used ("x=1,3,48,320;y=..."), so that a module printed as text can
// find its weights again in the same file (see OptionsFromMeta).
const MetaInputs = "onnx.inputs"

// OptionsFromMeta returns the options that reproduce the import recorded
// in a module's metadata (empty when there is no record).
func OptionsFromMeta(meta map[string]string) Options {
	o := Options{Shapes: map[string][]int64{}}
	for _, part := range strings.Split(meta[MetaInputs], ";") {
		name, dims, ok := strings.Cut(part, "=")
		if !ok {
			continue
		}
		var s []int64
		for _, d := range strings.Split(dims, ",") {
			if d == "" {
				continue
			}
			n, err := strconv.ParseInt(d, 10, 64)
			if err != nil {
				s = nil
				break
			}
			s = append(s, n)
		}
		o.Shapes[name] = s
	}
	return o
}

// Sniff reports whether head, the first bytes of a file, look like an ONNX
// model: a protobuf message whose first fields are fields of ModelProto with
// the right wire types, ir_version (field 1) among them with a value from 1
// to 100.
func Sniff(head []byte) bool {
	wire := map[protowire.Number]protowire.Type{
		1: protowire.VarintType, 2: protowire.BytesType, 3: protowire.BytesType, 4: protowire.BytesType,
		5: protowire.VarintType, 6: protowire.BytesType, 7: protowire.BytesType, 8: protowire.BytesType,
		14: protowire.BytesType, 20: protowire.BytesType, 25: protowire.BytesType,
	}
	sawVersion := false
	for len(head) > 0 {
		num, typ, n := protowire.ConsumeTag(head)
		if n < 0 {
			break
		}
		want, ok := wire[num]
		if !ok || want != typ {
			return false
		}
		head = head[n:]
		switch typ {
		case protowire.VarintType:
			v, m := protowire.ConsumeVarint(head)
			if m < 0 {
				return sawVersion
			}
			if num == 1 {
				if v < 1 || v > 100 {
					return false
				}
				sawVersion = true
			}
			head = head[m:]
		case protowire.BytesType:
			l, m := protowire.ConsumeVarint(head)
			if m < 0 || l > 1<<40 {
				return false
			}
			if uint64(len(head)-m) < l {
				return sawVersion // runs past the head: fine
			}
			head = head[m+int(l):]
		}
	}
	return sawVersion
}

// maxModelFile bounds an ONNX file: protobuf messages end at 2 GiB (larger
// weights live in external data files).
const maxModelFile = 2 << 30

// Load reads the ONNX model at path.
func Load(path string, opts Options) (*ir.Module, error) {
	data, err := safeio.ReadFile(path, maxModelFile)
	if err != nil {
		return nil, err
	}
	m, err := parse(path, filepath.Dir(path), data, opts)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	m.Meta["source"] = filepath.Base(path)
	return m, nil
}

// Parse imports an ONNX model from its bytes; name names it in the module
// and in errors. Tensors in external files cannot be read (use Load).
func Parse(name string, data []byte, opts Options) (*ir.Module, error) {
	m, err := parse(name, "", data, opts)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return m, nil
}

func parse(name, dir string, data []byte, opts Options) (*ir.Module, error) {
	mp := &onnxpb.ModelProto{}
	if err := proto.Unmarshal(data, mp); err != nil {
		return nil, fmt.Errorf("not a valid ONNX model (protobuf: %v)", err)
	}
	if mp.Graph == nil {
		return nil, fmt.Errorf("not a valid ONNX model: no graph (ir_version %d)", mp.GetIrVersion())
	}
	opset := int64(-1)
	for _, o := range mp.GetOpsetImport() {
		if d := o.GetDomain(); d == "" || d == "ai.onnx" {
			opset = o.GetVersion()
		}
	}
	if opset < 0 && mp.GetIrVersion() < 3 {
		opset = 1 // IR versions 1 and 2 have no opset_import: opset 1
	}
	if opset < MinOpset || opset > MaxOpset {
		return nil, fmt.Errorf("opset %d of the default domain is not supported (tapml reads opsets %d to %d)", opset, MinOpset, MaxOpset)
	}
	g := mp.Graph
	if err := checkOps(g, opset); err != nil {
		return nil, err
	}
	modName := strings.TrimSuffix(filepath.Base(name), filepath.Ext(name))
	m := ir.NewModule(modName)
	m.Meta["format"] = "onnx"
	m.Meta["opset"] = fmt.Sprint(opset)
	m.Meta["ir_version"] = fmt.Sprint(mp.GetIrVersion())
	if p := mp.GetProducerName(); p != "" {
		m.Meta["producer"] = strings.TrimSpace(p + " " + mp.GetProducerVersion())
	}
	im := &importer{opset: opset, m: m, b: ir.NewFunction(m, "main"), dev: cpu.New(), vals: newScope(nil),
		weights: map[string]bool{}, dir: dir, opts: opts}
	defer im.dev.Close()
	if err := im.graph(g); err != nil {
		return nil, err
	}
	var shapes []string
	for _, p := range m.Funcs[0].Params {
		shapes = append(shapes, p.Name+"="+strings.Trim(strings.ReplaceAll(p.Type.Shape.String(), " ", ""), "[]"))
	}
	m.Meta[MetaInputs] = strings.Join(shapes, ";")
	if err := ir.Verify(m); err != nil {
		return nil, fmt.Errorf("internal error: the imported module does not verify: %w", err)
	}
	return m, nil
}

// checkOps reports every op of the graph, its subgraphs included (the
// branches of If, the bodies of Loop and Scan), that the importer does not
// translate, in one error: per op type its count and the nodes, by their
// subgraph path ("Loop_3/body/TopK_1").
func checkOps(g *onnxpb.GraphProto, opset int64) error {
	bad := map[string][]string{}
	walkNodes(g, "", func(path string, n *onnxpb.NodeProto) {
		key := n.GetOpType()
		if d := n.GetDomain(); d != "" && d != "ai.onnx" {
			key = d + "." + key
		} else if h := handlers[key]; h.fn != nil && opset >= h.since {
			return
		}
		bad[key] = append(bad[key], path+nodeName(n))
	})
	if len(bad) == 0 {
		return nil
	}
	keys := make([]string, 0, len(bad))
	for k := range bad {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	const shown = 4 // node names shown per op type
	parts := make([]string, len(keys))
	total := 0
	for i, k := range keys {
		nodes := bad[k]
		list := strings.Join(nodes[:min(len(nodes), shown)], ", ")
		if len(nodes) > shown {
			list += fmt.Sprintf(", ... (%d more)", len(nodes)-shown)
		}
		parts[i] = fmt.Sprintf("%s (%d: %s)", k, len(nodes), list)
		total += len(nodes)
	}
	return fmt.Errorf("%d nodes of %d unsupported op types: %s", total, len(keys), strings.Join(parts, "; "))
}

// walkNodes calls fn for every node of g and of its subgraphs, with the
// path of the subgraph it is in ("" at the top, "If_0/then_branch/").
func walkNodes(g *onnxpb.GraphProto, path string, fn func(path string, n *onnxpb.NodeProto)) {
	for _, n := range g.GetNode() {
		fn(path, n)
		for _, a := range n.GetAttribute() {
			sub := path + nodeName(n) + "/" + a.GetName()
			if a.GetG() != nil {
				walkNodes(a.GetG(), sub+"/", fn)
			}
			for i, sg := range a.GetGraphs() {
				walkNodes(sg, fmt.Sprintf("%s[%d]/", sub, i), fn)
			}
		}
	}
}

// val is an ONNX value while importing: a run-time IR value, a constant
// held on the host, or both (a constant already materialized in the IR).
type val struct {
	name   string
	v      *ir.Value
	c      *tensor.Tensor
	weight bool // c is an initializer or a Constant node's tensor
}

func (v *val) isConst() bool { return v != nil && v.c != nil }

// dtype is the value's dtype in the IR (i64 and bool constants
// materialize as i32).
func (v *val) dtype() ir.DType {
	if v.v != nil {
		return v.v.Type.DType
	}
	if v.c.DType == ir.I64 || v.c.DType == ir.Bool {
		return ir.I32
	}
	return v.c.DType
}

// shape is the value's static shape.
func (v *val) shape() []int {
	if v.c != nil {
		return v.c.Shape
	}
	return v.v.Type.Shape.Sizes()
}

// maxFolded bounds the constants computed at import (2^26 elements).
const maxFolded = 1 << 26

type importer struct {
	opset   int64
	m       *ir.Module
	b       *ir.Builder
	dev     *cpu.Device
	vals    *scope
	prefix  string          // the subgraph path of the nodes being imported ("Loop_0/body[2]/"), for provenance
	weights map[string]bool // names taken by weights
	dir     string
	opts    Options
	node    *onnxpb.NodeProto // the node being translated
}

func (im *importer) graph(g *onnxpb.GraphProto) error {
	for _, t := range g.GetInitializer() {
		c, err := decodeTensor(t, im.dir)
		if err != nil {
			return fmt.Errorf("initializer: %w", err)
		}
		im.vals.set(t.GetName(), &val{name: t.GetName(), c: c, weight: true})
	}
	if len(g.GetSparseInitializer()) > 0 {
		return fmt.Errorf("sparse initializers are not supported")
	}
	k := 0
	for _, in := range g.GetInput() {
		if im.vals.get(in.GetName()) != nil {
			continue // an initializer, listed as an input (IR version 3)
		}
		if c, ok := im.opts.Constants[in.GetName()]; ok {
			v, err := fixedInput(in, c)
			if err != nil {
				return err
			}
			im.vals.set(in.GetName(), v)
			k++
			continue
		}
		t, err := im.inputType(in, k)
		k++
		if err != nil {
			return err
		}
		im.vals.set(in.GetName(), &val{name: in.GetName(), v: im.b.Param(in.GetName(), t)})
	}
	for name := range im.opts.Constants {
		if im.vals.get(name) == nil || im.vals.get(name).weight {
			return fmt.Errorf("Options.Constants[%q]: the graph has no input %q", name, name)
		}
	}
	if err := im.b.Err(); err != nil {
		return err
	}
	if err := im.nodes(g); err != nil {
		return err
	}
	if len(g.GetOutput()) == 0 {
		return fmt.Errorf("the graph has no outputs: there is nothing to compute")
	}
	var results []*ir.Value
	for _, out := range g.GetOutput() {
		v := im.vals.get(out.GetName())
		if v == nil {
			return fmt.Errorf("graph output %q is not computed by any node", out.GetName())
		}
		r, err := im.value(v)
		if err != nil {
			return fmt.Errorf("graph output %q: %w", out.GetName(), err)
		}
		if r.IsWeight() || im.b.F.Param(r.Name) == r {
			// A result must be computed: copy weights and parameters.
			r = im.b.At(out.GetName()).Reshape(r, r.Type.Shape.Clone())
		}
		results = append(results, r)
	}
	nameResults(im.b.F, results, g.GetOutput())
	im.b.Return(results...)
	return im.b.Err()
}

// nameResults gives the function's results the names of the graph's
// outputs, so that reports and files say "sigmoid_0.tmp_0", not
// "output0"; a name another value already has, or a value returned twice,
// keeps its own.
func nameResults(f *ir.Function, results []*ir.Value, outs []*onnxpb.ValueInfoProto) {
	taken := f.ValueNames()
	renamed := map[*ir.Value]bool{}
	for i, r := range results {
		name := outs[i].GetName()
		if name == "" || taken[name] || renamed[r] {
			continue
		}
		delete(taken, r.Name)
		r.Name, taken[name], renamed[r] = name, true, true
	}
}

// inputType is the IR type of a graph input: its element type as at run
// time, its dims from the file, Options.Shapes or Options.Dims.
func (im *importer) inputType(in *onnxpb.ValueInfoProto, k int) (ir.Type, error) {
	name := in.GetName()
	shapes := im.opts.Shapes
	if _, ok := shapes[name]; !ok {
		if s, ok := shapes[fmt.Sprintf("input_%d", k)]; ok {
			shapes = map[string][]int64{name: s} // given by position
		}
	}
	tt := in.GetType().GetTensorType()
	if tt == nil {
		return ir.Type{}, fmt.Errorf("graph input %q is not a tensor", name)
	}
	dt, ok := runtimeDType(tt.GetElemType())
	if !ok {
		return ir.Type{}, fmt.Errorf("graph input %q has element type %s, which is not supported", name, typeName(tt.GetElemType()))
	}
	dims := tt.GetShape().GetDim()
	if tt.GetShape() == nil {
		if s, ok := shapes[name]; ok {
			sh, err := checkDims(s)
			if err != nil {
				return ir.Type{}, fmt.Errorf("Options.Shapes[%q]: %w", name, err)
			}
			return ir.T(dt, shapeOf(sh)), nil
		}
		return ir.Type{}, fmt.Errorf("graph input %q has no shape: give one with Options.Shapes", name)
	}
	given, hasGiven := shapes[name]
	if hasGiven && len(given) != len(dims) {
		return ir.Type{}, fmt.Errorf("Options.Shapes[%q] = %v has rank %d, the input has rank %d", name, given, len(given), len(dims))
	}
	sizes := make([]int64, len(dims))
	var open []string
	for i, d := range dims {
		switch {
		case hasGiven:
			if d.GetDimValue() > 0 && given[i] != d.GetDimValue() {
				return ir.Type{}, fmt.Errorf("Options.Shapes[%q] = %v, but dim %d of the input is %d", name, given, i, d.GetDimValue())
			}
			sizes[i] = given[i]
		case d.GetDimParam() == "" && d.GetDimValue() > 0:
			sizes[i] = d.GetDimValue()
		case d.GetDimParam() != "" && im.opts.Dims[d.GetDimParam()] > 0:
			sizes[i] = im.opts.Dims[d.GetDimParam()]
		case i == 0:
			sizes[i] = 1 // the batch
		default:
			label := d.GetDimParam()
			if label == "" {
				label = "?"
			}
			open = append(open, fmt.Sprintf("dim %d (%s)", i, label))
		}
	}
	if len(open) > 0 {
		return ir.Type{}, fmt.Errorf("graph input %q has dynamic %s: give sizes with Options.Shapes or Options.Dims", name, strings.Join(open, ", "))
	}
	sh, err := checkDims(sizes)
	if err != nil {
		return ir.Type{}, fmt.Errorf("graph input %q: %w", name, err)
	}
	return ir.T(dt, shapeOf(sh)), nil
}

func shapeOf(s []int) ir.Shape {
	out := make(ir.Shape, len(s))
	for i, d := range s {
		out[i] = ir.D(int64(d))
	}
	return out
}

// nodes imports the nodes of g in order.
func (im *importer) nodes(g *onnxpb.GraphProto) error {
	for _, n := range g.GetNode() {
		if err := im.translate(n); err != nil {
			return fmt.Errorf("node %q (%s): %w", im.prefix+nodeName(n), n.GetOpType(), err)
		}
	}
	return nil
}

// nodeName is a node's name, or else its first named output's, or else
// its op type.
func nodeName(n *onnxpb.NodeProto) string {
	if n.GetName() != "" {
		return n.GetName()
	}
	for _, o := range n.GetOutput() {
		if o != "" {
			return o
		}
	}
	return n.GetOpType()
}

// translate imports one node.
func (im *importer) translate(n *onnxpb.NodeProto) error {
	im.node = n
	im.b.At(im.prefix + nodeName(n))
	in := make([]*val, len(n.GetInput()))
	for i, name := range n.GetInput() {
		if name == "" {
			continue // an optional input left out
		}
		v := im.vals.get(name)
		if v == nil {
			return fmt.Errorf("input %q is neither a graph input, an initializer nor the output of an earlier node", name)
		}
		in[i] = v
	}
	h := handlers[n.GetOpType()]
	outs, err := h.fn(im, n, in)
	if err != nil {
		return err
	}
	for i, name := range n.GetOutput() {
		if name == "" {
			continue
		}
		if i >= len(outs) || outs[i] == nil {
			return fmt.Errorf("output %d (%q) is not supported", i, name)
		}
		o := *outs[i]
		o.name = name
		im.vals.set(name, &o)
	}
	return nil
}

// op appends an IR node of op; when every input is a constant it is
// evaluated at import on the CPU reference device instead.
func (im *importer) op(op ir.Op, attrs ir.Attrs, in ...*val) (*val, error) {
	constant := true
	for _, v := range in {
		constant = constant && v.isConst()
	}
	if constant && len(in) > 0 {
		t, err := im.fold(op, attrs, in)
		if err != nil {
			return nil, err
		}
		return &val{c: t}, nil
	}
	ins := make([]*ir.Value, len(in))
	for i, v := range in {
		var err error
		if ins[i], err = im.value(v); err != nil {
			return nil, err
		}
	}
	out := im.b.Op(op, ins, attrs)
	if err := im.b.Err(); err != nil {
		return nil, err
	}
	return &val{v: out}, nil
}

// fold evaluates op on constant inputs.
func (im *importer) fold(op ir.Op, attrs ir.Attrs, in []*val) (*tensor.Tensor, error) {
	types := make([]ir.Type, len(in))
	ts := make([]*tensor.Tensor, len(in))
	for i, v := range in {
		types[i], ts[i] = v.c.Type(), v.c
	}
	outs, na, err := ir.InferTypes(op, types, attrs)
	if err != nil {
		return nil, err
	}
	if n := outs[0].Shape.NumElements(); n > maxFolded {
		return nil, fmt.Errorf("a constant %s computed at import is too large (more than %d elements)", outs[0], maxFolded)
	}
	res, err := im.dev.Evaluate(&ir.Node{ID: 1, Op: op, Attrs: na, Prov: "import"}, ts, outs)
	if err != nil {
		return nil, err
	}
	return res[0], nil
}

// value returns v as an IR value, materializing a constant: as a weight
// when it is an initializer or a Constant node's tensor or has more than 16
// elements, as a constant node otherwise. i64 constants become i32.
func (im *importer) value(v *val) (*ir.Value, error) {
	if v.v != nil {
		return v.v, nil
	}
	c := v.c
	if c.DType == ir.I64 || c.DType == ir.Bool {
		var err error
		if c, err = toI32(c); err != nil {
			return nil, fmt.Errorf("constant %q: %w (64-bit integers are i32 at run time)", v.name, err)
		}
	}
	if v.weight || c.NumElements() > 16 {
		name := v.name
		if name == "" {
			name = "const"
		}
		if !v.weight {
			name = "folded." + name
		}
		base := name
		for i := 1; im.weights[name]; i++ {
			name = fmt.Sprintf("%s.%d", base, i)
		}
		im.weights[name] = true
		v.v = im.m.AddWeight(name, c.Type(), ir.BytesSource(bytes.Clone(c.Data)))
		return v.v, nil
	}
	vals := floats(c)
	if len(vals) == 0 {
		vals = []float64{0}
	}
	v.v = im.b.Op(ir.OpConstant, nil, ir.Attrs{"dtype": ir.DTypeAttr(c.DType), "shape": ir.ShapeAttr(shapeOf(c.Shape)), "value": ir.FloatsAttr(vals...)})
	if err := im.b.Err(); err != nil {
		return nil, err
	}
	return v.v, nil
}
