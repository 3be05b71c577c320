package passes

import (
	"fmt"

	"github.com/tapml/tapml/ir"
)

// shapeInference walks each function in order and sets every node's output
// types to what the op registry infers from its (already re-inferred)
// inputs, with attributes normalized. A reshape's shape attribute gets its
// -1 dim resolved. It checks the structure it relies on itself, so it runs
// on modules that do not verify (wrong declared types are what it fixes).
func shapeInference(m *ir.Module, _ Options) error {
	weights := map[*ir.Weight]bool{}
	for _, w := range m.Weights {
		weights[w] = true
	}
	for _, f := range m.Funcs {
		if f == nil {
			return fmt.Errorf("module has a nil function")
		}
		defined := map[*ir.Value]bool{}
		for _, p := range f.Params {
			if p == nil {
				return funcErr(f, "a parameter is nil")
			}
			defined[p] = true
		}
		for _, n := range f.Nodes {
			if n == nil {
				return funcErr(f, "a node is nil")
			}
			types := make([]ir.Type, len(n.Inputs))
			for i, in := range n.Inputs {
				switch {
				case in == nil:
					return funcErr(f, "node %s: input %d is nil", n, i)
				case in.IsWeight():
					if !weights[in.Weight] {
						return funcErr(f, "node %s: input %d refers to weight %s, which the module does not declare", n, i, in.Ref())
					}
					in.Type = in.Weight.Type
				case !defined[in]:
					return funcErr(f, "node %s: input %d (%s) is not defined before the node", n, i, in.Ref())
				}
				types[i] = in.Type
			}
			outs, attrs, err := ir.InferTypes(n.Op, types, n.Attrs)
			if err != nil {
				return funcErr(f, "node %s: %v", n, err)
			}
			if len(outs) != len(n.Outputs) {
				return funcErr(f, "node %s: has %d outputs, op %s defines %d", n, len(n.Outputs), n.Op, len(outs))
			}
			if n.Op == ir.OpReshape {
				attrs["shape"] = ir.ShapeAttr(outs[0].Shape.Clone())
			}
			n.Attrs = attrs
			for i, o := range n.Outputs {
				if o == nil {
					return funcErr(f, "node %s: output %d is nil", n, i)
				}
				o.Type = outs[i]
				o.Def = n
				defined[o] = true
			}
		}
	}
	return nil
}
