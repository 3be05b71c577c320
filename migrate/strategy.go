package migrate

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/tapml/tapml/ir"
)

// kindOrder is the order in which incremental migration moves op kinds:
// data movement first (no arithmetic: the easiest kernels to get right),
// then elementwise arithmetic, reductions, and long contractions last.
var kindOrder = []ir.OpKind{ir.KindData, ir.KindElementwise, ir.KindReduction, ir.KindContraction}

// Step is one group of nodes that incremental migration moves together.
type Step struct {
	Label string
	Nodes []*ir.Node
}

// OpSteps groups nodes by op in incremental migration's order: op kinds
// data, elementwise, reduction, contraction (then any other kind), and
// within a kind op names alphabetically.
func OpSteps(nodes []*ir.Node) []Step {
	byOp := map[ir.Op][]*ir.Node{}
	for _, n := range nodes {
		byOp[n.Op] = append(byOp[n.Op], n)
	}
	rank := func(op ir.Op) int {
		if d := ir.LookupOp(op); d != nil {
			for i, k := range kindOrder {
				if d.Kind == k {
					return i
				}
			}
		}
		return len(kindOrder)
	}
	ops := make([]ir.Op, 0, len(byOp))
	for op := range byOp {
		ops = append(ops, op)
	}
	sort.Slice(ops, func(i, j int) bool {
		if ri, rj := rank(ops[i]), rank(ops[j]); ri != rj {
			return ri < rj
		}
		return ops[i].String() < ops[j].String()
	})
	steps := make([]Step, len(ops))
	for i, op := range ops {
		steps[i] = Step{Label: "op " + op.String(), Nodes: byOp[op]}
	}
	return steps
}

// LayerSteps groups nodes by the transformer layer of their provenance
// (layers.N.), in order: the nodes before the first layer (embedding),
// layer 0, 1, ..., then the nodes after the last (final norm, head). A
// node without a layer counts as "before" when it comes before every
// layered node of its function, "after" otherwise. Order within a group
// is the input order.
func LayerSteps(nodes []*ir.Node, funcOf func(id int) string) []Step {
	firstLayered := map[string]int{} // function -> index of its first layered node
	for i, n := range nodes {
		if _, ok := nodeLayer(n.Prov); ok {
			if _, seen := firstLayered[funcOf(n.ID)]; !seen {
				firstLayered[funcOf(n.ID)] = i
			}
		}
	}
	const before, after = -1, 1 << 30
	groups := map[int][]*ir.Node{}
	for i, n := range nodes {
		l, ok := nodeLayer(n.Prov)
		if !ok {
			l = after
			if f, seen := firstLayered[funcOf(n.ID)]; !seen || i < f {
				l = before
			}
		}
		groups[l] = append(groups[l], n)
	}
	keys := make([]int, 0, len(groups))
	for k := range groups {
		keys = append(keys, k)
	}
	sort.Ints(keys)
	steps := make([]Step, len(keys))
	for i, k := range keys {
		label := "layer " + strconv.Itoa(k)
		switch k {
		case before:
			label = "before the layers"
		case after:
			label = "after the layers"
		}
		steps[i] = Step{Label: label, Nodes: groups[k]}
	}
	return steps
}

// nodeLayer returns the first layer number named in a provenance.
func nodeLayer(prov string) (int, bool) {
	for _, part := range strings.FieldsFunc(prov, func(r rune) bool { return r == '+' }) {
		rest, ok := strings.CutPrefix(part, "layers.")
		if !ok {
			if i := strings.Index(part, ".layers."); i >= 0 {
				rest, ok = part[i+len(".layers."):], true
			}
		}
		if !ok {
			continue
		}
		num, _, _ := strings.Cut(rest, ".")
		if l, err := strconv.Atoi(num); err == nil && l >= 0 {
			return l, true
		}
	}
	return 0, false
}

// Localisation is the smallest set of nodes found whose move to the target
// (on top of a base placement that agrees with the reference) makes the
// output diverge.
type Localisation struct {
	Base      []int      // nodes already on the target, known good
	Set       []*ir.Node // the culprit set, in order; the last one completes it
	Single    bool       // the set is one node
	Divergent []int      // the placement that diverges: Base plus Set
	Good      []int      // the largest placement on the search path that agrees
	Searched  int        // candidate nodes searched
	Runs      int        // mixed runs the search took
	Complete  bool       // false when MaxRuns cut the search short
}

// localise searches cands (in order) for the smallest set whose move to the
// target, with base already there, diverges. base must agree with the
// reference and base plus all of cands must diverge (the caller has run
// both). It first binary-searches the shortest diverging prefix, whose last
// node c is the culprit; then checks c alone on top of base; when that
// agrees (the divergence needs several nodes) it binary-searches the
// latest start of a diverging window ending at c. Runs: about log2(len)
// + 1, or 2·log2(len) + 1 for a window. It assumes divergence is monotone
// in the prefix (more nodes on the target never repair an error), which a
// faulty kernel satisfies.
func (d *Driver) localise(base []int, cands []*ir.Node, phase string, points *[]Point) (*Localisation, error) {
	loc := &Localisation{Base: base, Complete: true, Searched: len(cands)}
	startRuns := d.runs
	eval := func(label string, set []*ir.Node) (bool, error) {
		p, err := d.Eval(label, phase, union(base, ids(set)))
		if err != nil {
			return false, err
		}
		*points = append(*points, p)
		return p.Divergent, nil
	}
	budget := func() bool { return d.runs-startRuns < d.Opts.MaxRuns }
	lo, hi := 0, len(cands) // prefix lo agrees, prefix hi diverges
	for hi-lo > 1 && budget() {
		mid := (lo + hi) / 2
		div, err := eval(fmt.Sprintf("first %d of %d", mid, len(cands)), cands[:mid])
		if err != nil {
			return nil, err
		}
		if div {
			hi = mid
		} else {
			lo = mid
		}
	}
	loc.Good = union(base, ids(cands[:lo]))
	if hi-lo > 1 {
		loc.Complete = false
		loc.Set = cands[lo:hi]
		loc.Divergent = union(base, ids(cands[:hi]))
		loc.Runs = d.runs - startRuns
		return loc, nil
	}
	c := cands[hi-1]
	loc.Set, loc.Single = []*ir.Node{c}, true
	loc.Divergent = union(base, []int{c.ID})
	if hi == 1 {
		// The prefix of one is c alone: already known to diverge.
		loc.Runs = d.runs - startRuns
		return loc, nil
	}
	if !budget() {
		loc.Complete = false
		loc.Set, loc.Single = cands[:hi], false
		loc.Divergent = union(base, ids(cands[:hi]))
		loc.Runs = d.runs - startRuns
		return loc, nil
	}
	div, err := eval(fmt.Sprintf("node %d alone", c.ID), []*ir.Node{c})
	if err != nil {
		return nil, err
	}
	if div {
		loc.Runs = d.runs - startRuns
		return loc, nil
	}
	// c needs earlier nodes: window [j, hi) diverges for j = 0, not for
	// j = hi-1. Find the largest diverging j.
	lo2, hi2 := 0, hi-1
	for hi2-lo2 > 1 && budget() {
		mid := (lo2 + hi2) / 2
		div, err := eval(fmt.Sprintf("window %d..%d", mid, hi-1), cands[mid:hi])
		if err != nil {
			return nil, err
		}
		if div {
			lo2 = mid
		} else {
			hi2 = mid
		}
	}
	loc.Complete = hi2-lo2 <= 1
	loc.Set, loc.Single = cands[lo2:hi], false
	loc.Divergent = union(base, ids(cands[lo2:hi]))
	loc.Runs = d.runs - startRuns
	return loc, nil
}

// RunBisect runs the bisect strategy: all candidate nodes on the target
// first; when that diverges, localise over the whole topological order
// (prefill's nodes, then decode's).
func (d *Driver) RunBisect() (*Report, error) {
	rep := d.newReport(Bisect)
	all := ids(d.order)
	p, err := d.Eval("all on target", "final", all)
	if err != nil {
		return nil, err
	}
	rep.Points = append(rep.Points, p)
	rep.Final = p
	if p.Divergent && len(d.order) > 0 {
		loc, err := d.localise(nil, d.order, "search", &rep.Points)
		if err != nil {
			return nil, err
		}
		rep.Localisation = loc
	}
	return d.finish(rep)
}

// RunIncremental runs the incremental strategy: op groups (OpSteps) move to
// the target one after another, each followed by an end-to-end comparison.
// At the first diverging group, its nodes move again layer by layer
// (LayerSteps) on top of the earlier groups; the first diverging layer is
// then localised by bisection within it. The migration stops there; when no
// group diverges, the last step has every candidate on the target.
func (d *Driver) RunIncremental() (*Report, error) {
	rep := d.newReport(Incremental)
	var base []int
	steps := OpSteps(d.order)
	for i, st := range steps {
		placed := union(base, ids(st.Nodes))
		phase := "op"
		if i == len(steps)-1 {
			phase = "final"
		}
		p, err := d.Eval(st.Label, phase, placed)
		if err != nil {
			return nil, err
		}
		rep.Points = append(rep.Points, p)
		if !p.Divergent {
			base = placed
			rep.Final = p
			continue
		}
		rep.Final = p
		layers := LayerSteps(st.Nodes, d.Func)
		inner := base
		var culprits []*ir.Node
		for j, ls := range layers {
			next := union(inner, ids(ls.Nodes))
			var lp Point
			if j == len(layers)-1 {
				// Every layer of the group is on: that is the group's point.
				lp = p
			} else {
				lp, err = d.Eval(st.Label+", "+ls.Label, "layer", next)
				if err != nil {
					return nil, err
				}
				rep.Points = append(rep.Points, lp)
			}
			if lp.Divergent {
				culprits = ls.Nodes
				break
			}
			inner = next
		}
		if len(culprits) == 1 {
			rep.Localisation = &Localisation{Base: inner, Set: culprits, Single: true, Divergent: union(inner, ids(culprits)), Good: inner, Complete: true, Searched: 1}
		} else {
			loc, err := d.localise(inner, culprits, "search", &rep.Points)
			if err != nil {
				return nil, err
			}
			rep.Localisation = loc
		}
		break
	}
	return d.finish(rep)
}

// Run runs the named strategy.
func (d *Driver) Run(strategy string) (*Report, error) {
	switch strategy {
	case Incremental, "":
		return d.RunIncremental()
	case Bisect:
		return d.RunBisect()
	}
	return nil, fmt.Errorf("unknown strategy %q (want %s or %s)", strategy, Incremental, Bisect)
}
