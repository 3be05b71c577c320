package passes

import "github.com/tapml/tapml/ir"

// dce removes, from the end of each function backwards, every node whose
// outputs are neither read nor returned and whose op has no side effect
// (kv_write, probe). With the weights option it also drops weights that no
// function reads or returns.
func dce(m *ir.Module, o Options) error {
	for _, f := range m.Funcs {
		live := map[*ir.Value]bool{}
		for _, r := range f.Results {
			live[r] = true
		}
		keep := make([]bool, len(f.Nodes))
		for i := len(f.Nodes) - 1; i >= 0; i-- {
			n := f.Nodes[i]
			used := hasSideEffects(n)
			for _, out := range n.Outputs {
				used = used || live[out]
			}
			if !used {
				continue
			}
			keep[i] = true
			for _, in := range n.Inputs {
				live[in] = true
			}
		}
		kept := f.Nodes[:0]
		for i, n := range f.Nodes {
			if keep[i] {
				kept = append(kept, n)
			}
		}
		for i := len(kept); i < len(f.Nodes); i++ {
			f.Nodes[i] = nil
		}
		f.Nodes = kept
	}
	if o.Bool("weights") {
		read := map[*ir.Weight]bool{}
		for _, f := range m.Funcs {
			for _, n := range f.Nodes {
				for _, in := range n.Inputs {
					if in.IsWeight() {
						read[in.Weight] = true
					}
				}
			}
			for _, r := range f.Results {
				if r.IsWeight() {
					read[r.Weight] = true
				}
			}
		}
		kept := m.Weights[:0:0]
		for _, w := range m.Weights {
			if read[w] {
				kept = append(kept, w)
			}
		}
		m.Weights = kept
	}
	return nil
}
