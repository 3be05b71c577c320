package passes

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/tapml/tapml/ir"
)

// Placements.
const (
	Source = "source"
	Target = "target"
)

var layerRE = regexp.MustCompile(`(?:^|[+.])layers\.(\d+)\.`)

// parseRanges parses "0-3,7" into the set {0,1,2,3,7}.
func parseRanges(s string) (map[int]bool, error) {
	set := map[int]bool{}
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(strings.TrimSpace(lo))
		if err != nil || a < 0 {
			return nil, fmt.Errorf("bad layer %q in %q (want N or N-M, comma separated)", part, s)
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(strings.TrimSpace(hi)); err != nil || b < a {
				return nil, fmt.Errorf("bad layer range %q in %q (want N-M with N <= M)", part, s)
			}
		}
		if b-a > 1<<20 {
			return nil, fmt.Errorf("layer range %q is too large", part)
		}
		for l := a; l <= b; l++ {
			set[l] = true
		}
	}
	return set, nil
}

// nodeLayers returns the layer numbers of a provenance ("layers.3.attn.wq"
// is layer 3; a joined provenance may name several).
func nodeLayers(prov string) []int {
	var out []int
	for _, m := range layerRE.FindAllStringSubmatch(prov, -1) {
		if l, err := strconv.Atoi(m[1]); err == nil {
			out = append(out, l)
		}
	}
	return out
}

// partition places every node and inserts transfers. Existing transfers
// are removed first, so partitioning again replaces the old placement.
// The policy picks the nodes that go to target; the others go to source.
// Meta ops follow their data: a probe sits with the node it observes. A
// constant node sits with its first reader. Parameters live on source;
// weights are uploaded to whichever device reads them, so they need no
// transfer. A value read on the other side gets one transfer per
// destination, inserted before its first reader there.
func partition(m *ir.Module, o Options) error {
	policy := o.String("policy")
	var layers map[int]bool
	if policy == "layers" {
		var err error
		if layers, err = parseRanges(o.String("layers")); err != nil {
			return err
		}
	}
	ops, ids, k := o.Strings("ops"), o.Ints("nodes"), o.Int("k")
	for _, f := range m.Funcs {
		removeTransfers(f)
		count := int64(0)
		onTarget := func(n *ir.Node) bool {
			switch policy {
			case "all_source":
				return false
			case "all_target":
				return true
			case "nodes":
				return slices.Contains(ids, int64(n.ID))
			case "ops":
				return slices.Contains(ops, n.Op.String())
			case "layers":
				for _, l := range nodeLayers(n.Prov) {
					if layers[l] {
						return true
					}
				}
				return false
			case "first_k":
				count++
				return count <= k
			}
			return false
		}
		// Place ordinary nodes by the policy, in order.
		for _, n := range f.Nodes {
			if n.Op == ir.OpProbe || n.Op == ir.OpConstant {
				continue
			}
			n.Place = Source
			if onTarget(n) {
				n.Place = Target
			}
		}
		// Constants go with their first reader, probes with what they observe.
		uses := map[*ir.Value][]*ir.Node{}
		for _, n := range f.Nodes {
			for _, in := range n.Inputs {
				uses[in] = append(uses[in], n)
			}
		}
		for i := len(f.Nodes) - 1; i >= 0; i-- {
			if n := f.Nodes[i]; n.Op == ir.OpConstant {
				n.Place = Source
				if rs := uses[n.Output()]; len(rs) > 0 && rs[0].Place != "" {
					n.Place = rs[0].Place
				}
			}
		}
		for _, n := range f.Nodes {
			if n.Op == ir.OpProbe {
				n.Place = Source
				if d := n.Inputs[0].Def; d != nil {
					n.Place = d.Place
				}
			}
		}
		insertTransfers(m, f)
	}
	return nil
}

// removeTransfers deletes transfer nodes, rewiring their readers to the
// transferred value.
func removeTransfers(f *ir.Function) {
	subst := map[*ir.Value]*ir.Value{}
	dead := map[*ir.Node]bool{}
	for _, n := range f.Nodes {
		if n.Op == ir.OpTransfer {
			subst[n.Output()] = n.Inputs[0]
			dead[n] = true
		}
	}
	if len(dead) > 0 {
		substitute(f, subst, dead)
	}
}

// placeOf is where a value lives: its node's placement, source for params.
func placeOf(v *ir.Value) string {
	if v.Def != nil && v.Def.Place != "" {
		return v.Def.Place
	}
	return Source
}

func insertTransfers(m *ir.Module, f *ir.Function) {
	type key struct {
		v  *ir.Value
		to string
	}
	moved := map[key]*ir.Value{}
	names := newNamer(f)
	var nodes []*ir.Node
	for _, n := range f.Nodes {
		for i, in := range n.Inputs {
			if in.IsWeight() || placeOf(in) == n.Place {
				continue
			}
			k := key{in, n.Place}
			tv, ok := moved[k]
			if !ok {
				from := placeOf(in)
				t := &ir.Node{
					ID:     m.NewID(),
					Op:     ir.OpTransfer,
					Inputs: []*ir.Value{in},
					Attrs:  ir.Attrs{"from": ir.StringAttr(from), "to": ir.StringAttr(n.Place)},
					Place:  n.Place,
				}
				if in.Def != nil {
					t.Prov = in.Def.Prov
				}
				tv = &ir.Value{Name: names.fresh(in.Name, ".to_"+n.Place), Type: in.Type, Def: t}
				t.Outputs = []*ir.Value{tv}
				moved[k] = tv
				nodes = append(nodes, t)
			}
			n.Inputs[i] = tv
		}
		nodes = append(nodes, n)
	}
	f.Nodes = nodes
}
