package arch

import (
	"fmt"

	"github.com/tapml/tapml/ir"
)

// storeWeights gives each weight the dtype its source holds
// (ir.SourceDType: f16, bf16 or a block format; Build first makes every
// weight f32) and keeps each function valid: an input whose op reads that
// storage dtype (the registry's Storage fact: matmul's transposed weight,
// gather's table) reads the weight itself; any other reader (a norm's
// scale, a bias) gets an explicit dequantize node, one per weight and
// function.
func storeWeights(m *ir.Module) error {
	stored := false
	for _, w := range m.Weights {
		if dt := ir.SourceDType(w.Source); dt != ir.F32 {
			w.Type = ir.T(dt, w.Type.Shape)
			w.Value().Type = w.Type
			stored = true
		}
	}
	if !stored {
		return nil
	}
	for _, f := range m.Funcs {
		if err := storeIn(m, f); err != nil {
			return fmt.Errorf("func @%s: %w", f.Name, err)
		}
	}
	return nil
}

// storeIn rewrites the nodes of f for the stored weights.
func storeIn(m *ir.Module, f *ir.Function) error {
	names := f.ValueNames()
	// dequantize returns the f32 value of w in f, made by a node appended
	// to nodes before w's first reader that needs it.
	dequantized := map[*ir.Weight]*ir.Value{}
	var nodes []*ir.Node
	dequantize := func(w *ir.Weight) (*ir.Value, error) {
		if v := dequantized[w]; v != nil {
			return v, nil
		}
		outs, attrs, err := ir.InferTypes(ir.OpDequantize, []ir.Type{w.Type}, nil)
		if err != nil {
			return nil, fmt.Errorf("weight @%s: %w", w.Name, err)
		}
		name := w.Name + ".f32"
		for i := 2; names[name]; i++ {
			name = fmt.Sprintf("%s.f32.%d", w.Name, i)
		}
		names[name] = true
		n := &ir.Node{ID: m.NewID(), Op: ir.OpDequantize, Inputs: []*ir.Value{w.Value()}, Attrs: attrs, Prov: w.Name}
		n.Outputs = []*ir.Value{{Name: name, Type: outs[0], Def: n}}
		nodes = append(nodes, n)
		dequantized[w] = n.Output()
		return n.Output(), nil
	}
	for _, n := range f.Nodes {
		in := make([]ir.Type, len(n.Inputs))
		for i, v := range n.Inputs {
			in[i] = v.Type
		}
		st := n.Def().Storage.Of(ir.Call{In: in, Attrs: n.Attrs})
		for i, v := range n.Inputs {
			if !v.IsWeight() || v.Type.DType == ir.F32 || st.Accepts(i, v.Type.DType) {
				continue
			}
			d, err := dequantize(v.Weight)
			if err != nil {
				return err
			}
			n.Inputs[i], in[i] = d, d.Type
		}
		outs, _, err := ir.InferTypes(n.Op, in, n.Attrs)
		if err != nil {
			return fmt.Errorf("node %s: %w", n, err)
		}
		for j, o := range n.Outputs {
			if !o.Type.Equal(outs[j]) {
				return fmt.Errorf("node %s: output %d is %s with stored weights, %s without", n, j, outs[j], o.Type)
			}
		}
		nodes = append(nodes, n)
	}
	f.Nodes = nodes
	return nil
}
