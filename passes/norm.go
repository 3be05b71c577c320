package passes

import "github.com/tapml/tapml/ir"

// fuseNorm folds an rms_norm into the matmuls that read it, as
// rms_norm_matmul nodes: each product normalizes its row itself, so the
// norm is one kernel fewer (a decode step's attention norm feeds q, k and
// v, its MLP norm gate and up, the final norm the classifier). It takes a
// norm whose rows are statically one token (a decode step: the products
// are GEMVs, which read the weight once whatever they compute first) and
// whose every reader is a matmul with transpose_b that multiplies it by
// another value (not an addend, not a function result), on the norm's
// placement. Each matmul keeps its id and output; the provenances are
// joined with '+', so a carved case of the node names both ops.
func fuseNorm(m *ir.Module, _ Options) error {
	for _, f := range m.Funcs {
		readers := map[*ir.Value][]*ir.Node{}
		for _, n := range f.Nodes {
			for _, v := range n.Inputs {
				readers[v] = append(readers[v], n)
			}
		}
		results := resultSet(f)
		dead := map[*ir.Node]bool{}
		for _, n := range f.Nodes {
			y := n.Output()
			if n.Op != ir.OpRMSNorm || results[y] || !oneRow(y.Type) || !allNormedProducts(n, readers[y]) {
				continue
			}
			for _, r := range readers[y] {
				r.Op = ir.OpRMSNormMatmul
				r.Inputs = []*ir.Value{n.Inputs[0], n.Inputs[1], r.Inputs[1]}
				r.Attrs = ir.Attrs{}
				if eps, ok := n.Attrs["eps"]; ok {
					r.Attrs["eps"] = eps
				}
				r.Prov = joinProv(n.Prov, r.Prov)
			}
			dead[n] = true
		}
		if len(dead) > 0 {
			substitute(f, nil, dead)
		}
	}
	return nil
}

// oneRow reports whether a tensor's rows (all dims but the last) are
// statically one.
func oneRow(t ir.Type) bool {
	r := t.Shape.Rank()
	if r < 2 {
		return false
	}
	for _, d := range t.Shape[:r-1] {
		if !d.IsStatic() || d.Size != 1 {
			return false
		}
	}
	return true
}

// allNormedProducts reports whether every reader of norm's output is a
// plain transposed matmul of it on norm's placement.
func allNormedProducts(norm *ir.Node, readers []*ir.Node) bool {
	y := norm.Output()
	for _, r := range readers {
		if r.Op != ir.OpMatmul || !r.Attrs.Bool("transpose_b") || len(r.Inputs) != 2 || r.Inputs[0] != y ||
			r.Inputs[1] == y || r.Place != norm.Place || r.Inputs[1].Type.Shape.Rank() != 2 {
			return false
		}
	}
	return len(readers) > 0
}
