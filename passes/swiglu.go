package passes

import "github.com/tapml/tapml/ir"

// fuseSwiGLU folds a decode step's gated feed-forward into one node: a
// fused_elementwise mul(silu($0), $1) whose inputs are two rms_norm_matmul
// products of the same row, norm and eps (fuse_norm's gate and up) becomes
// an rms_norm_swiglu reading both weights, one kernel instead of three. It
// takes the products only when the elementwise node is their one reader
// (not a function result), all three share a placement and the output has
// the products' type (no broadcast). The elementwise node keeps its id and
// output; the provenances are joined with '+', so a carved case of the
// node names every op it covers.
func fuseSwiGLU(m *ir.Module, _ Options) error {
	for _, f := range m.Funcs {
		readers := map[*ir.Value]int{}
		producer := map[*ir.Value]*ir.Node{}
		for _, n := range f.Nodes {
			for _, v := range n.Inputs {
				readers[v]++
			}
			for _, v := range n.Outputs {
				producer[v] = n
			}
		}
		results := resultSet(f)
		dead := map[*ir.Node]bool{}
		for _, n := range f.Nodes {
			if n.Op != ir.OpFusedElementwise || n.Attrs.String("expr") != ir.SwiGLUExpr || len(n.Inputs) != 2 {
				continue
			}
			gate, up := producer[n.Inputs[0]], producer[n.Inputs[1]]
			if !fusableProduct(n, gate, readers, results) || !fusableProduct(n, up, readers, results) || gate == up ||
				gate.Inputs[0] != up.Inputs[0] || gate.Inputs[1] != up.Inputs[1] || eps(gate) != eps(up) {
				continue
			}
			n.Op = ir.OpRMSNormSwiGLU
			n.Inputs = []*ir.Value{gate.Inputs[0], gate.Inputs[1], gate.Inputs[2], up.Inputs[2]}
			n.Attrs = ir.Attrs{}
			if e, ok := gate.Attrs["eps"]; ok {
				n.Attrs["eps"] = e
			}
			n.Prov = joinProv(gate.Prov, up.Prov, n.Prov)
			dead[gate], dead[up] = true, true
		}
		if len(dead) > 0 {
			substitute(f, nil, dead)
		}
	}
	return nil
}

// fusableProduct reports whether p is an rms_norm_matmul whose output only
// n reads, on n's placement and of n's output type.
func fusableProduct(n, p *ir.Node, readers map[*ir.Value]int, results map[*ir.Value]bool) bool {
	if p == nil || p.Op != ir.OpRMSNormMatmul || p.Place != n.Place {
		return false
	}
	y := p.Output()
	return readers[y] == 1 && !results[y] && y.Type.Equal(n.Output().Type)
}

// eps is an rms_norm_matmul's eps, the registry's default when unset.
func eps(n *ir.Node) float64 {
	if e, ok := n.Attrs["eps"]; ok {
		return e.Float
	}
	return n.Def().Attr("eps").Default.Float
}
