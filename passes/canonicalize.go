package passes

import (
	"math"

	"github.com/tapml/tapml/ir"
)

// canonicalize applies local rewrites until none applies (or
// max_iterations rounds):
//
//   - identities are removed and their uses read the input: reshape to the
//     input's shape, transpose by the identity permutation, a slice that
//     takes a whole dim, cast to the input's dtype, concat of one input,
//     neg(neg(x)), and x*1, 1*x, x/1, x+0, 0+x, x-0 where the constant is a
//     constant node and the result has x's type;
//   - reshape(reshape(x)) reads x directly, transpose(transpose(x)) becomes
//     one transpose of the composed permutation;
//   - a constant whose elements are all equal keeps one element.
//
// Nodes left unused by the rewrites (the inner reshape, say) stay for dce.
// A result is never replaced by a weight: results must be computed values
// for the executors.
func canonicalize(m *ir.Module, o Options) error {
	for _, f := range m.Funcs {
		for round := int64(0); round < o.Int("max_iterations"); round++ {
			if !canonicalizeOnce(f) {
				break
			}
		}
	}
	return nil
}

func canonicalizeOnce(f *ir.Function) bool {
	subst := map[*ir.Value]*ir.Value{}
	dead := map[*ir.Node]bool{}
	results := resultSet(f)
	changed := false
	for _, n := range f.Nodes {
		for i, in := range n.Inputs {
			if s, ok := subst[in]; ok {
				n.Inputs[i] = s
			}
		}
		if len(n.Outputs) != 1 {
			continue
		}
		out := n.Output()
		if id := identityOf(n); id != nil && !(id.IsWeight() && results[out]) {
			subst[out] = id
			dead[n] = true
			changed = true
			continue
		}
		if rewriteNode(n) {
			changed = true
		}
	}
	if changed {
		substitute(f, subst, dead)
	}
	return changed
}

// identityOf returns the value n's output always equals, or nil.
func identityOf(n *ir.Node) *ir.Value {
	out := n.Output()
	sameType := func(v *ir.Value) bool { return v.Type.Equal(out.Type) }
	switch n.Op {
	case ir.OpReshape, ir.OpCast:
		if sameType(n.Inputs[0]) {
			return n.Inputs[0]
		}
	case ir.OpConcat:
		if len(n.Inputs) == 1 && sameType(n.Inputs[0]) {
			return n.Inputs[0]
		}
	case ir.OpTranspose:
		for i, p := range n.Attrs.Ints("perm") {
			if p != int64(i) {
				return nil
			}
		}
		return n.Inputs[0]
	case ir.OpSlice:
		x := n.Inputs[0]
		if !sameType(x) {
			return nil
		}
		ax := ir.NormAxis(n.Attrs.Int("axis"), x.Type.Shape.Rank())
		d := x.Type.Shape[ax]
		start, step := n.Attrs.Int("start"), n.Attrs.Int("step")
		if !d.IsStatic() {
			// Same type on a symbolic dim: taken whole.
			return x
		}
		first, count := ir.SliceBounds(start, n.Attrs.Int("end"), step, d.Size)
		if first == 0 && count == d.Size && (step == 1 || d.Size <= 1) {
			return x
		}
	case ir.OpNeg:
		if in := n.Inputs[0]; in.Def != nil && in.Def.Op == ir.OpNeg && len(in.Def.Inputs) == 1 {
			return in.Def.Inputs[0]
		}
	case ir.OpMul, ir.OpDiv, ir.OpAdd, ir.OpSub:
		neutral := 0.0
		if n.Op == ir.OpMul || n.Op == ir.OpDiv {
			neutral = 1
		}
		x, c := n.Inputs[0], n.Inputs[1]
		if vals, ok := constantValues(c); ok && allEqual(vals, neutral) && sameType(x) {
			return x
		}
		if n.Op == ir.OpMul || n.Op == ir.OpAdd {
			if vals, ok := constantValues(x); ok && allEqual(vals, neutral) && sameType(c) {
				return c
			}
		}
	}
	return nil
}

// rewriteNode applies the non-removing rewrites to n in place.
func rewriteNode(n *ir.Node) bool {
	switch n.Op {
	case ir.OpReshape:
		in := n.Inputs[0]
		if in.Def != nil && in.Def.Op == ir.OpReshape && in.Def.Place == n.Place {
			n.Inputs[0] = in.Def.Inputs[0]
			return true
		}
	case ir.OpTranspose:
		in := n.Inputs[0]
		if in.Def != nil && in.Def.Op == ir.OpTranspose && in.Def.Place == n.Place {
			inner, outer := in.Def.Attrs.Ints("perm"), n.Attrs.Ints("perm")
			composed := make([]int64, len(outer))
			for i, p := range outer {
				composed[i] = inner[p]
			}
			n.Inputs[0] = in.Def.Inputs[0]
			n.Attrs["perm"] = ir.IntsAttr(composed...)
			return true
		}
	case ir.OpConstant:
		vals := n.Attrs.Floats("value")
		if len(vals) > 1 {
			first := math.Float64bits(vals[0])
			for _, v := range vals[1:] {
				if math.Float64bits(v) != first {
					return false
				}
			}
			n.Attrs["value"] = ir.FloatsAttr(vals[0])
			return true
		}
	}
	return false
}
