package passes

import "github.com/tapml/tapml/ir"

// fuseResidual folds the add of a residual connection (x + attention's or
// the MLP's output projection) into the matmul that computes the
// projection, as matmul's addend c: one kernel instead of two, and the
// projection's result never goes through memory on its own. The add is
// taken when one of its inputs is a matmul's result that nothing else
// reads (no other node, not a function result), the other input and the
// add's output have that result's f32 type (no broadcasting: c is an
// element of the output), and both nodes sit on the same placement. The
// add node becomes the matmul, keeping its id and output; the provenances
// are joined with '+' as fusion joins them, so a carved case of the node
// names both ops of the model.
func fuseResidual(m *ir.Module, _ Options) error {
	for _, f := range m.Funcs {
		uses := useCounts(f)
		dead := map[*ir.Node]bool{}
		for _, n := range f.Nodes {
			if n.Op != ir.OpAdd {
				continue
			}
			for k, v := range n.Inputs {
				p, other := v.Def, n.Inputs[1-k]
				if p == nil || dead[p] || p.Op != ir.OpMatmul || len(p.Inputs) != 2 || uses[v] != 1 ||
					p.Place != n.Place || other == v || !residualTypes(v.Type, other.Type, n.Output().Type) {
					continue
				}
				n.Op, n.Attrs = ir.OpMatmul, p.Attrs
				n.Inputs = []*ir.Value{p.Inputs[0], p.Inputs[1], other}
				n.Prov = joinProv(p.Prov, n.Prov)
				dead[p] = true
				break
			}
		}
		if len(dead) > 0 {
			substitute(f, nil, dead)
		}
	}
	return nil
}

// residualTypes reports whether a product, the other addend and the sum
// all have the same f32 type.
func residualTypes(product, other, sum ir.Type) bool {
	return product.DType == ir.F32 && product.Equal(other) && product.Equal(sum)
}
