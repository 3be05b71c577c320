package passes

import (
	"fmt"
	"slices"
	"strconv"

	"github.com/tapml/tapml/ir"
)

// The split_weights pass: a weight larger than what a device can hold in
// one buffer, or bind to one kernel, is cut along its outer dim into
// shards that each fit, and its readers are rewritten to read the shards:
//
//   - matmul(x, W) with transpose_b (W[N, K], the classifier) becomes a
//     matmul per shard, concatenated along the last axis;
//   - gather(W, ids) along axis 0 (W[V, D], the embedding) becomes, per
//     shard of rows lo..hi-1, a gather of the ids shifted by -lo and
//     clamped into the shard, selected (where) for the ids that fall in it;
//   - rms_norm_matmul splits as matmul; rms_norm_swiglu (a lowered build
//     split again) comes apart into its gate and up rms_norm_matmul and
//     their fused_elementwise silu·mul, the product reading the weight
//     split as above (its other weight, if also too large, splits in turn);
//     rms_norm_qkv comes apart into its three rms_norm_matmul likewise,
//     each defining its output.
//
// Kernels stay as they are: the new nodes are ops every target has. Each
// new node keeps the provenance of the node it replaces, and the last one
// defines the replaced node's output value, so probes, carving and
// partition policies see the same value under the same provenance.
// Shards are views of the weight's bytes (no copy in host memory) and
// together hold exactly its bytes on the device. A block format's blocks
// lie along the last dim, so whole rows are whole blocks.

// maxConcatInputs bounds the inputs of one concat node: WebGPU guarantees 8
// storage buffers per shader stage, the output takes one. More shards are
// joined by a tree of concats.
const maxConcatInputs = 7

// SplitStats says what SplitWeights did.
type SplitStats struct {
	Weights int // weights split
	Shards  int // shards they became
	Readers int // nodes rewritten
}

// SplitWeights cuts every weight of m larger than maxBytes (> 0) along its
// outer dim into shards of at most maxBytes each and rewrites its readers
// (see above). A weight over the limit that some other op reads, or whose
// single row exceeds the limit, is an error naming it.
func SplitWeights(m *ir.Module, maxBytes int64) (SplitStats, error) {
	var st SplitStats
	if maxBytes <= 0 {
		return st, fmt.Errorf("split_weights: the byte limit must be positive, got %d", maxBytes)
	}
	var keep []*ir.Weight
	for _, w := range m.Weights {
		if w.Type.Bytes() <= maxBytes {
			keep = append(keep, w)
			continue
		}
		if err := checkReaders(m, w, maxBytes); err != nil {
			return st, err
		}
		shards, err := shardWeight(m, w, maxBytes)
		if err != nil {
			return st, err
		}
		for _, f := range m.Funcs {
			n, err := rewriteReaders(m, f, w, shards)
			if err != nil {
				return st, err
			}
			st.Readers += n
		}
		for _, s := range shards {
			keep = append(keep, s.w)
		}
		st.Weights++
		st.Shards += len(shards)
	}
	m.Weights = keep
	return st, nil
}

// splitPass is the pass's entry in the registry.
func splitPass(m *ir.Module, o Options) error {
	if o.Int("max_bytes") == 0 {
		return nil
	}
	_, err := SplitWeights(m, o.Int("max_bytes"))
	return err
}

// shard is rows lo..hi-1 of a split weight.
type shard struct {
	w      *ir.Weight
	lo, hi int64
}

// checkReaders fails unless every reader of w is one the pass rewrites.
func checkReaders(m *ir.Module, w *ir.Weight, maxBytes int64) error {
	for _, f := range m.Funcs {
		for _, n := range f.Nodes {
			for i, in := range n.Inputs {
				if in.Weight != w {
					continue
				}
				if !splittable(n, i) {
					return fmt.Errorf("weight @%s (%s, %d bytes) exceeds the device's buffer limit of %d bytes, and node %s reads it as input %d, which split_weights cannot shard (it shards gather's table along axis 0 and the [N, K] weights of matmul, rms_norm_matmul, rms_norm_swiglu and rms_norm_qkv)",
						w.Name, w.Type, w.Type.Bytes(), maxBytes, n, i)
				}
			}
		}
	}
	return nil
}

// splittable reports whether input i of n may be replaced by row shards.
func splittable(n *ir.Node, i int) bool {
	switch n.Op {
	case ir.OpGather:
		return i == 0 && n.Attrs.Int("axis") == 0 && n.Inputs[0].Type.Shape.Rank() >= 2
	case ir.OpMatmul:
		return i == 1 && n.Attrs.Bool("transpose_b") && n.Inputs[1].Type.Shape.Rank() == 2
	case ir.OpRMSNormMatmul: // fuse_norm's: x, the norm's scale, the [N, K] weight
		return i == 2 && n.Inputs[2].Type.Shape.Rank() == 2
	case ir.OpRMSNormSwiGLU: // fuse_swiglu's: x, the norm's scale, the [N, K] gate and up weights
		return (i == 2 || i == 3) && n.Inputs[i].Type.Shape.Rank() == 2
	case ir.OpRMSNormQKV: // fuse_qkv's: x, the norm's scale, the [N, K] q, k and v weights
		return i >= 2 && n.Inputs[i].Type.Shape.Rank() == 2
	}
	return false
}

// shardWeight cuts w into the fewest shards of at most maxBytes, of equal
// row counts but for the last.
func shardWeight(m *ir.Module, w *ir.Weight, maxBytes int64) ([]shard, error) {
	rows := w.Type.Shape[0].Size
	rowBytes := w.Type.Bytes() / rows
	if rowBytes > maxBytes {
		return nil, fmt.Errorf("weight @%s (%s): one row is %d bytes, more than the device's buffer limit of %d bytes, so it cannot be split along its rows",
			w.Name, w.Type, rowBytes, maxBytes)
	}
	per := maxBytes / rowBytes
	k := (rows + per - 1) / per
	per = (rows + k - 1) / k // balance the shards
	var out []shard
	for lo := int64(0); lo < rows; lo += per {
		hi := min(lo+per, rows)
		s := w.Type.Shape.Clone()
		s[0] = ir.D(hi - lo)
		name := w.Name + ".rows" + strconv.FormatInt(lo, 10)
		for m.Weight(name) != nil { // a name the model already uses
			name += "_"
		}
		src := rowView{of: w.Source, off: lo * rowBytes, n: (hi - lo) * rowBytes, dt: w.Type.DType}
		out = append(out, shard{w: &ir.Weight{Name: name, Type: ir.T(w.Type.DType, s), Source: src}, lo: lo, hi: hi})
	}
	return out, nil
}

// rowView is bytes off..off+n-1 of another weight's source: a view, no copy.
type rowView struct {
	of     ir.WeightSource
	off, n int64
	dt     ir.DType
}

// RangeSource is a WeightSource that reads part of its bytes without the
// rest (a weight in a file: artifact's build folders), so that a shard
// costs its own bytes only.
type RangeSource interface {
	ir.WeightSource
	BytesAt(off, n int64) ([]byte, error)
}

func (r rowView) DType() ir.DType { return r.dt }

func (r rowView) Bytes() ([]byte, error) {
	if r.of == nil {
		return nil, fmt.Errorf("the split weight has no data attached")
	}
	if rs, ok := r.of.(RangeSource); ok {
		return rs.BytesAt(r.off, r.n)
	}
	b, err := r.of.Bytes()
	if err != nil {
		return nil, err
	}
	if int64(len(b)) < r.off+r.n {
		return nil, fmt.Errorf("a shard wants bytes %d..%d of a weight of %d bytes", r.off, r.off+r.n-1, len(b))
	}
	return b[r.off : r.off+r.n : r.off+r.n], nil
}

// rewriteReaders replaces every reader of w in f by nodes over the shards
// and returns how many it replaced.
func rewriteReaders(m *ir.Module, f *ir.Function, w *ir.Weight, shards []shard) (int, error) {
	var out []*ir.Node
	count := 0
	names := newNamer(f)
	for _, n := range f.Nodes {
		reads := false
		for _, in := range n.Inputs {
			reads = reads || in.Weight == w
		}
		if !reads {
			out = append(out, n)
			continue
		}
		e := &emitter{m: m, f: f, prov: n.Prov, names: names, base: n.Output().Name}
		switch n.Op {
		case ir.OpGather:
			e.gather(n, shards)
		case ir.OpMatmul:
			e.matmul(n, 1, shards)
		case ir.OpRMSNormMatmul:
			e.matmul(n, 2, shards)
		case ir.OpRMSNormSwiGLU:
			e.swiglu(n, w, shards)
		case ir.OpRMSNormQKV:
			for j, y := range n.Outputs {
				e.normProduct(n, 2+j, y, w, shards)
			}
		}
		if e.err != nil {
			return 0, funcErr(f, "splitting @%s for node %s: %v", w.Name, n, e.err)
		}
		out = append(out, e.nodes...)
		count++
	}
	f.Nodes = out
	return count, nil
}

// emitter builds the nodes that replace one node.
type emitter struct {
	m     *ir.Module
	f     *ir.Function
	prov  string
	names *namer
	base  string
	nodes []*ir.Node
	err   error

	scalars map[int64]*ir.Value
}

// op appends a node of op and returns its output; into, when set, becomes
// that output (the replaced node's value, so that its readers follow).
func (e *emitter) op(op ir.Op, in []*ir.Value, attrs ir.Attrs, into *ir.Value) *ir.Value {
	if e.err != nil {
		return invalid
	}
	types := make([]ir.Type, len(in))
	for i, v := range in {
		types[i] = v.Type
	}
	outs, na, err := ir.InferTypes(op, types, attrs)
	if err != nil {
		e.err = err
		return invalid
	}
	n := &ir.Node{ID: e.m.NewID(), Op: op, Inputs: in, Attrs: na, Prov: e.prov}
	v := into
	if v == nil {
		v = &ir.Value{Name: e.names.fresh(e.base, ".split"), Type: outs[0]}
	}
	v.Def = n
	n.Outputs = []*ir.Value{v}
	e.nodes = append(e.nodes, n)
	return v
}

// invalid stands for the output of a node not made after an error.
var invalid = &ir.Value{Name: "invalid", Type: ir.T(ir.Invalid, nil)}

// scalar is a constant i32 of one value, made once per replaced node.
func (e *emitter) scalar(x int64) *ir.Value {
	if v, ok := e.scalars[x]; ok {
		return v
	}
	v := e.op(ir.OpConstant, nil, ir.Attrs{"dtype": ir.DTypeAttr(ir.I32), "value": ir.FloatsAttr(float64(x))}, nil)
	if e.scalars == nil {
		e.scalars = map[int64]*ir.Value{}
	}
	e.scalars[x] = v
	return v
}

// matmul: n (a matmul or rms_norm_matmul, whose input w is the [N, K]
// weight) per shard of the weight, joined along the last axis.
func (e *emitter) matmul(n *ir.Node, w int, shards []shard) {
	axis := int64(n.Output().Type.Shape.Rank() - 1)
	parts := make([]*ir.Value, len(shards))
	for i, s := range shards {
		in := slices.Clone(n.Inputs)
		in[w] = s.w.Value()
		if n.Op == ir.OpMatmul && len(in) == 3 { // fuse_residual's addend: the shard's columns of it
			in[2] = e.op(ir.OpSlice, []*ir.Value{in[2]}, ir.Attrs{"axis": ir.IntAttr(axis), "start": ir.IntAttr(s.lo),
				"end": ir.IntAttr(s.hi), "step": ir.IntAttr(1)}, nil)
		}
		parts[i] = e.op(n.Op, in, n.Attrs, nil)
	}
	for len(parts) > maxConcatInputs {
		var next []*ir.Value
		for i := 0; i < len(parts); i += maxConcatInputs {
			group := parts[i:min(i+maxConcatInputs, len(parts))]
			if len(group) == 1 {
				next = append(next, group[0])
				continue
			}
			next = append(next, e.op(ir.OpConcat, group, ir.Attrs{"axis": ir.IntAttr(axis)}, nil))
		}
		parts = next
	}
	e.op(ir.OpConcat, parts, ir.Attrs{"axis": ir.IntAttr(axis)}, n.Output())
}

// swiglu: n (an rms_norm_swiglu) as its gate and up rms_norm_matmul and
// their silu·mul.
func (e *emitter) swiglu(n *ir.Node, w *ir.Weight, shards []shard) {
	prods := make([]*ir.Value, 2)
	for j := range prods {
		prods[j] = &ir.Value{Name: e.names.fresh(e.base, ".split"), Type: n.Output().Type}
		e.normProduct(n, 2+j, prods[j], w, shards)
	}
	e.op(ir.OpFusedElementwise, prods, ir.Attrs{"expr": ir.StringAttr(ir.SwiGLUExpr)}, n.Output())
}

// normProduct emits the rms_norm_matmul of n's row and norm (inputs 0 and
// 1) with its input wi into y, split as matmul splits when that input is w.
func (e *emitter) normProduct(n *ir.Node, wi int, y *ir.Value, w *ir.Weight, shards []shard) {
	in := []*ir.Value{n.Inputs[0], n.Inputs[1], n.Inputs[wi]}
	if n.Inputs[wi].Weight != w {
		e.op(ir.OpRMSNormMatmul, in, n.Attrs, y)
		return
	}
	e.matmul(&ir.Node{Op: ir.OpRMSNormMatmul, Inputs: in, Attrs: n.Attrs, Outputs: []*ir.Value{y}}, 2, shards)
}

// gather: each shard gathers the ids shifted into it and clamped to its
// rows; where picks, for each id, the row of the shard that holds it. The
// first shard's ids are not clamped below and the last's not above, so an
// id out of the table's range still fails at run time as gather's does.
// Clamping selects (where) rather than chaining integer min and max, so
// that fusion finds no integer chain to fuse.
func (e *emitter) gather(n *ir.Node, shards []shard) {
	ids := n.Inputs[1]
	if ids.Type.DType != ir.I32 {
		ids = e.op(ir.OpCast, []*ir.Value{ids}, ir.Attrs{"to": ir.DTypeAttr(ir.I32)}, nil)
	}
	// The mask of a shard has ids' shape with a 1 for each dim of a row,
	// so that it broadcasts over the rows.
	maskShape := ids.Type.Shape.Clone()
	for range n.Inputs[0].Type.Shape.Rank() - 1 {
		maskShape = append(maskShape, ir.D(1))
	}
	cmp := func(c string, x int64) *ir.Value {
		return e.op(ir.OpCompare, []*ir.Value{ids, e.scalar(x)}, ir.Attrs{"cmp": ir.StringAttr(c)}, nil)
	}
	var acc *ir.Value
	for i, s := range shards {
		last := i == len(shards)-1
		local := ids
		var below *ir.Value // ids before the shard's first row
		if i > 0 {
			below = cmp("lt", s.lo)
			local = e.op(ir.OpSub, []*ir.Value{ids, e.scalar(s.lo)}, nil, nil)
			local = e.op(ir.OpWhere, []*ir.Value{below, e.scalar(0), local}, nil, nil)
		}
		if !last {
			local = e.op(ir.OpWhere, []*ir.Value{cmp("ge", s.hi), e.scalar(s.hi - s.lo - 1), local}, nil, nil)
		}
		rows := e.op(ir.OpGather, []*ir.Value{s.w.Value(), local}, n.Attrs, nil)
		if i == 0 {
			acc = rows
			continue
		}
		// Shards come in order of their rows, so the last shard whose
		// first row is at or below an id holds it.
		var into *ir.Value
		if last {
			into = n.Output()
		}
		mask := e.op(ir.OpReshape, []*ir.Value{below}, ir.Attrs{"shape": ir.ShapeAttr(maskShape)}, nil)
		acc = e.op(ir.OpWhere, []*ir.Value{mask, acc, rows}, nil, into)
	}
}
