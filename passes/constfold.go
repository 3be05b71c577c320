package passes

import (
	"math"
	"strconv"

	"github.com/tapml/tapml/ir"
	"github.com/tapml/tapml/runtime/cpu"
	"github.com/tapml/tapml/tensor"
)

// constantFolding evaluates, on the CPU reference device, every node whose
// inputs are all constant nodes (or weights, with fold_weights) and whose
// outputs have static shapes of at most max_bytes. A result of at most
// max_inline_elements elements turns the node into a constant node (same
// id, output and provenance); a larger one becomes a new weight
// "folded.<id>" whose readers read it directly. Ops with side effects and
// meta ops are never folded; a node whose evaluation fails (an index out of
// range, say) is left for run time to report.
func constantFolding(m *ir.Module, o Options) error {
	dev := cpu.New()
	defer dev.Close()
	maxInline, maxBytes := o.Int("max_inline_elements"), o.Int("max_bytes")
	foldWeights := o.Bool("fold_weights")
	for _, f := range m.Funcs {
		results := resultSet(f)
		subst := map[*ir.Value]*ir.Value{}
		dead := map[*ir.Node]bool{}
		for _, n := range f.Nodes {
			for i, in := range n.Inputs {
				if s, ok := subst[in]; ok {
					n.Inputs[i] = s
				}
			}
			if !foldable(n, foldWeights, maxBytes) {
				continue
			}
			outs, err := evaluate(dev, n)
			if err != nil {
				continue // left for run time
			}
			if len(outs) != 1 {
				continue
			}
			t := outs[0]
			if int64(t.NumElements()) <= maxInline && exactAsFloat64(t) {
				vals := make([]float64, t.NumElements())
				for i := range vals {
					vals[i] = t.Float64At(i)
				}
				if len(vals) > 0 && allSame(vals) {
					vals = vals[:1]
				}
				if len(vals) == 0 {
					vals = []float64{0} // an empty constant holds one (unused) element
				}
				out := n.Output()
				n.Op = ir.OpConstant
				n.Inputs = nil
				n.Attrs = ir.Attrs{
					"dtype": ir.DTypeAttr(out.Type.DType),
					"shape": ir.ShapeAttr(out.Type.Shape.Clone()),
					"value": ir.FloatsAttr(vals...),
				}
				continue
			}
			if results[n.Output()] {
				continue // results stay computed values
			}
			name := freshWeightName(m, "folded."+strconv.Itoa(n.ID))
			w := m.AddWeight(name, n.Output().Type, ir.BytesSource(t.Data))
			subst[n.Output()] = w
			dead[n] = true
		}
		substitute(f, subst, dead)
	}
	return nil
}

func foldable(n *ir.Node, foldWeights bool, maxBytes int64) bool {
	d := n.Def()
	// dequantize keeps a weight in its storage dtype on the device (a
	// folded one would be the f32 weight).
	if d == nil || d.Kind == ir.KindMeta || d.Effects == ir.SideEffects || n.Op == ir.OpConstant || n.Op == ir.OpDequantize ||
		len(n.Inputs) == 0 || len(n.Outputs) != 1 {
		return false
	}
	for _, in := range n.Inputs {
		switch {
		case in.IsWeight():
			if !foldWeights || in.Weight.Source == nil {
				return false
			}
		case in.Def == nil || in.Def.Op != ir.OpConstant:
			return false
		}
	}
	b := n.Output().Type.Bytes()
	return b >= 0 && b <= maxBytes
}

// evaluate computes n from its inputs: constant nodes (evaluated first)
// and, with fold_weights, weights.
func evaluate(dev *cpu.Device, n *ir.Node) ([]*tensor.Tensor, error) {
	in := make([]*tensor.Tensor, len(n.Inputs))
	for i, v := range n.Inputs {
		if v.IsWeight() {
			raw, err := v.Weight.Source.Bytes()
			if err != nil {
				return nil, err
			}
			// A copy: kernels must never see the weight's own bytes as
			// something they may write.
			if in[i], err = tensor.FromBytes(v.Type.DType, v.Type.Shape.Sizes(), append([]byte(nil), raw...)); err != nil {
				return nil, err
			}
			continue
		}
		outs, err := dev.Evaluate(v.Def, nil, []ir.Type{v.Type})
		if err != nil {
			return nil, err
		}
		in[i] = outs[0]
	}
	types := make([]ir.Type, len(n.Outputs))
	for i, o := range n.Outputs {
		types[i] = o.Type
	}
	return dev.Evaluate(n, in, types)
}

// exactAsFloat64 reports whether every element survives the trip through a
// float64 constant attribute (i64 beyond 2^53 does not).
func exactAsFloat64(t *tensor.Tensor) bool {
	if t.DType != ir.I64 {
		return true
	}
	for i := 0; i < t.NumElements(); i++ {
		if math.Abs(t.Float64At(i)) > 1<<53 {
			return false
		}
	}
	return true
}

func allSame(vals []float64) bool {
	for _, v := range vals[1:] {
		if math.Float64bits(v) != math.Float64bits(vals[0]) {
			return false
		}
	}
	return true
}

func freshWeightName(m *ir.Module, base string) string {
	name := base
	for k := 1; m.Weight(name) != nil; k++ {
		name = base + "." + strconv.Itoa(k)
	}
	return name
}
