package passes

import "github.com/tapml/tapml/ir"

// fuseRopeKV folds a decode step's four small nodes before attention into
// one rope_kv_write: rope of q, rope of k, kv_write of the rotated k and
// kv_write of v (four dispatches of a few KB each on a GPU, one after it).
// It starts from an attention node and takes the four only when they are
// what attention reads: q rotated by a rope, the k cache written by a
// kv_write of a rope that only it reads (same attributes, position and
// freqs table as q's), the v cache written by a kv_write of another cache,
// all at attention's position, on one placement, one row each (a decode
// step; prefill's rows stay as they are). Any other shape is left alone.
//
// The fused node takes the place of the last of the four, keeping its id,
// so every input is defined before it; the four are fused only when no
// other node reads their outputs before that place. Each output keeps its
// value (the caches, then q), so readers follow; the provenances are
// joined with '+', so a carved case of the node names every op it covers.
func fuseRopeKV(m *ir.Module, _ Options) error {
	for _, f := range m.Funcs {
		producer := map[*ir.Value]*ir.Node{}
		at := map[*ir.Node]int{}
		readers := map[*ir.Value]int{}
		for i, n := range f.Nodes {
			at[n] = i
			for _, v := range n.Outputs {
				producer[v] = n
			}
			for _, v := range n.Inputs {
				readers[v]++
			}
		}
		results := resultSet(f)
		dead := map[*ir.Node]bool{}
		for _, a := range f.Nodes {
			if a.Op != ir.OpAttention {
				continue
			}
			g := ropeKVGroup(a, producer, readers, results)
			if g == nil || dead[g.rq] || dead[g.rk] || dead[g.wk] || dead[g.wv] || !g.readersFollow(f, at) {
				continue
			}
			last := g.last(at)
			in := []*ir.Value{g.wk.Inputs[0], g.wv.Inputs[0], g.rq.Inputs[0], g.rk.Inputs[0], g.wv.Inputs[1], g.pos}
			in = append(in, g.rq.Inputs[2:]...)
			outs := []*ir.Value{g.wk.Output(), g.wv.Output(), g.rq.Output()}
			for _, y := range outs {
				y.Def = last
			}
			attrs, prov := g.rq.Attrs, joinProv(g.rq.Prov, g.rk.Prov, g.wk.Prov, g.wv.Prov)
			for _, n := range []*ir.Node{g.rq, g.rk, g.wk, g.wv} {
				if n != last {
					dead[n] = true
				}
			}
			last.Op, last.Inputs, last.Outputs, last.Attrs, last.Prov = ir.OpRopeKVWrite, in, outs, attrs, prov
		}
		if len(dead) > 0 {
			substitute(f, nil, dead)
		}
	}
	return nil
}

// ropeKVNodes are the four nodes fuseRopeKV folds: the ropes of q and k,
// the kv_writes of k and v, at position pos.
type ropeKVNodes struct {
	rq, rk, wk, wv *ir.Node
	pos            *ir.Value
}

// ropeKVGroup returns the four nodes attention a reads through, or nil
// when they are not the shape fuseRopeKV folds.
func ropeKVGroup(a *ir.Node, producer map[*ir.Value]*ir.Node, readers map[*ir.Value]int, results map[*ir.Value]bool) *ropeKVNodes {
	if len(a.Inputs) != 4 {
		return nil
	}
	pos := a.Inputs[3]
	g := &ropeKVNodes{rq: producer[a.Inputs[0]], wk: producer[a.Inputs[1]], wv: producer[a.Inputs[2]], pos: pos}
	isRope := func(n *ir.Node) bool {
		return n != nil && n.Op == ir.OpRope && n.Inputs[1] == pos && n.Place == a.Place && oneToken(n.Inputs[0])
	}
	isWrite := func(n *ir.Node) bool {
		return n != nil && n.Op == ir.OpKVWrite && n.Inputs[2] == pos && n.Place == a.Place && oneToken(n.Inputs[1])
	}
	if !isRope(g.rq) || !isWrite(g.wk) || !isWrite(g.wv) || g.wk == g.wv || g.wk.Inputs[0] == g.wv.Inputs[0] {
		return nil
	}
	g.rk = producer[g.wk.Inputs[1]]
	if !isRope(g.rk) || g.rk == g.rq || readers[g.rk.Output()] != 1 || results[g.rk.Output()] || !g.rk.Attrs.Equal(g.rq.Attrs) ||
		len(g.rk.Inputs) != len(g.rq.Inputs) || len(g.rq.Inputs) == 3 && g.rk.Inputs[2] != g.rq.Inputs[2] {
		return nil
	}
	return g
}

// oneToken reports whether x[S, heads, Dh] has one row: a decode step's.
func oneToken(x *ir.Value) bool {
	s := x.Type.Shape
	return s.Rank() == 3 && s[0].IsStatic() && s[0].Size == 1
}

// last returns the one of the four that comes last in the function.
func (g *ropeKVNodes) last(at map[*ir.Node]int) *ir.Node {
	l := g.rq
	for _, n := range []*ir.Node{g.rk, g.wk, g.wv} {
		if at[n] > at[l] {
			l = n
		}
	}
	return l
}

// readersFollow reports whether no node other than the four reads q's
// rotation or an updated cache before the last of the four, where the
// fused node will compute them.
func (g *ropeKVNodes) readersFollow(f *ir.Function, at map[*ir.Node]int) bool {
	last := at[g.last(at)]
	outs := map[*ir.Value]bool{g.rq.Output(): true, g.wk.Output(): true, g.wv.Output(): true}
	for _, n := range f.Nodes[:last] {
		for _, v := range n.Inputs {
			if outs[v] {
				return false
			}
		}
	}
	return true
}
