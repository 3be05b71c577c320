package passes

import "github.com/tapml/tapml/ir"

// fuseQKV folds three rms_norm_matmul products of the same row, norm and
// eps on one placement (fuse_norm's q, k and v of a decode step) into one
// rms_norm_qkv node with their three outputs: one kernel instead of three.
// A group of any other size is left alone (after fuse_swiglu, a decode
// step's attention norm has exactly its q, k and v), and so is a product
// whose weight is computed by a node (the fused node takes the first
// product's place, which may come before that node). The first product
// becomes the fused node, keeping its id; each output keeps its value, so
// readers follow; the provenances are joined with '+', so a carved case of
// the node names every op it covers.
func fuseQKV(m *ir.Module, _ Options) error {
	for _, f := range m.Funcs {
		type key struct {
			x, g  *ir.Value
			eps   float64
			place string
		}
		groups := map[key][]*ir.Node{}
		for _, n := range f.Nodes {
			if n.Op == ir.OpRMSNormMatmul && n.Inputs[2].Def == nil {
				k := key{n.Inputs[0], n.Inputs[1], eps(n), n.Place}
				groups[k] = append(groups[k], n)
			}
		}
		dead := map[*ir.Node]bool{}
		for k, g := range groups {
			if len(g) != 3 {
				continue
			}
			first := g[0]
			in := []*ir.Value{k.x, k.g}
			var outs []*ir.Value
			var provs []string
			for _, p := range g {
				in = append(in, p.Inputs[2])
				outs = append(outs, p.Output())
				provs = append(provs, p.Prov)
				if p != first {
					dead[p] = true
				}
			}
			for _, y := range outs {
				y.Def = first
			}
			first.Op, first.Inputs, first.Outputs, first.Prov = ir.OpRMSNormQKV, in, outs, joinProv(provs...)
		}
		if len(dead) > 0 {
			substitute(f, nil, dead)
		}
	}
	return nil
}
