package passes

import (
	"fmt"
	"regexp"
	"slices"

	"github.com/tapml/tapml/ir"
)

// ProbeTag is the tag of the probe that observes output i of node n.
func ProbeTag(n *ir.Node, i int) string { return fmt.Sprintf("n%d:%d", n.ID, i) }

// probe inserts, after every selected node, one probe per output; every
// reader of the output (nodes and results) then reads the probe instead.
// Meta ops (probe, transfer) are never probed, nor an output some probe
// already observes, so running the pass twice changes nothing. A probe
// takes its node's provenance and placement.
func probe(m *ir.Module, o Options) error {
	var provRE *regexp.Regexp
	if s := o.String("prov"); s != "" {
		re, err := regexp.Compile(s)
		if err != nil {
			return fmt.Errorf("option prov: %w", err)
		}
		provRE = re
	}
	ops, kinds, ids := o.Strings("ops"), o.Strings("kinds"), o.Ints("nodes")
	selected := func(n *ir.Node) bool {
		d := n.Def()
		if d == nil || d.Kind == ir.KindMeta {
			return false
		}
		return (len(ops) == 0 || slices.Contains(ops, n.Op.String())) &&
			(len(kinds) == 0 || slices.Contains(kinds, string(d.Kind))) &&
			(len(ids) == 0 || slices.Contains(ids, int64(n.ID))) &&
			(provRE == nil || provRE.MatchString(n.Prov))
	}
	for _, f := range m.Funcs {
		observed := map[*ir.Value]bool{}
		for _, n := range f.Nodes {
			if n.Op == ir.OpProbe {
				observed[n.Inputs[0]] = true
			}
		}
		names := newNamer(f)
		subst := map[*ir.Value]*ir.Value{}
		var nodes []*ir.Node
		for _, n := range f.Nodes {
			// Readers of a probed value read the probe (inputs defined
			// earlier in the walk are already substituted).
			for i, in := range n.Inputs {
				if s, ok := subst[in]; ok && n.Op != ir.OpProbe {
					n.Inputs[i] = s
				}
			}
			nodes = append(nodes, n)
			if !selected(n) {
				continue
			}
			for i, out := range n.Outputs {
				if observed[out] {
					continue
				}
				p := &ir.Node{
					ID:     m.NewID(),
					Op:     ir.OpProbe,
					Inputs: []*ir.Value{out},
					Attrs:  ir.Attrs{"tag": ir.StringAttr(ProbeTag(n, i))},
					Prov:   n.Prov,
					Place:  n.Place,
				}
				pv := &ir.Value{Name: names.fresh(out.Name, ".probe"), Type: out.Type, Def: p}
				p.Outputs = []*ir.Value{pv}
				subst[out] = pv
				observed[out] = true
				nodes = append(nodes, p)
			}
		}
		f.Nodes = nodes
		for i, r := range f.Results {
			if s, ok := subst[r]; ok {
				f.Results[i] = s
			}
		}
	}
	return nil
}
