package passes

import (
	"slices"
	"strings"

	"github.com/tapml/tapml/ir"
)

// fusable reports whether a node is an elementwise op fusion can express in
// a fused_elementwise expression (not cast, rope: they are not in the expr
// language) on floats (expressions compute in floats, and the GPU
// generators have no integer form: an id shifted and clamped stays apart).
func fusable(n *ir.Node) bool {
	if len(n.Outputs) != 1 || !n.Output().Type.DType.IsFloat() {
		return false
	}
	return n.Op == ir.OpFusedElementwise || slices.Contains(ir.UnaryOps, n.Op) || slices.Contains(ir.BinaryOps, n.Op)
}

// nodeExpr returns n's computation as an expression over its inputs.
func nodeExpr(n *ir.Node) (*ir.Expr, error) {
	if n.Op == ir.OpFusedElementwise {
		return ir.ParseExpr(n.Attrs.String("expr"))
	}
	e := &ir.Expr{Op: n.Op, Input: -1}
	for i := range n.Inputs {
		e.Args = append(e.Args, &ir.Expr{Input: i})
	}
	return e, nil
}

// countInput counts the leaves of e that read input k.
func countInput(e *ir.Expr, k int) int {
	if e.IsInput() {
		if e.Input == k {
			return 1
		}
		return 0
	}
	n := 0
	for _, a := range e.Args {
		n += countInput(a, k)
	}
	return n
}

// orderInputs renumbers the inputs of e in the order the expression first
// reads them (so "mul(silu($0), $1)" reads left to right) and drops inputs
// it does not read.
func orderInputs(e *ir.Expr, inputs []*ir.Value) (*ir.Expr, []*ir.Value) {
	newIndex := map[int]int{}
	var order []*ir.Value
	var walk func(e *ir.Expr)
	walk = func(e *ir.Expr) {
		if e.IsInput() {
			if _, ok := newIndex[e.Input]; !ok {
				newIndex[e.Input] = len(order)
				order = append(order, inputs[e.Input])
			}
			return
		}
		for _, a := range e.Args {
			walk(a)
		}
	}
	walk(e)
	return remap(e, func(i int) *ir.Expr { return &ir.Expr{Input: newIndex[i]} }), order
}

func exprDepth(e *ir.Expr) int {
	d := 0
	for _, a := range e.Args {
		d = max(d, exprDepth(a))
	}
	return d + 1
}

// remap returns a copy of e with input i replaced by sub[i].
func remap(e *ir.Expr, sub func(i int) *ir.Expr) *ir.Expr {
	if e.IsInput() {
		return sub(e.Input)
	}
	c := &ir.Expr{Op: e.Op, Input: e.Input, Const: e.Const}
	for _, a := range e.Args {
		c.Args = append(c.Args, remap(a, sub))
	}
	return c
}

// joinProv joins provenances with '+', each once, in order.
func joinProv(provs ...string) string {
	var parts []string
	for _, p := range provs {
		for _, s := range strings.Split(p, "+") {
			if s != "" && !slices.Contains(parts, s) {
				parts = append(parts, s)
			}
		}
	}
	return strings.Join(parts, "+")
}

// fusion merges producer→consumer chains of elementwise ops. Walking each
// function in order, a fusable consumer absorbs a fusable producer of one
// of its inputs when that input has no other use (node or result), both
// sit on the same placement, the producer's output has the consumer's
// output type (unless allow_broadcast), and the merged node stays within
// max_inputs and max_depth. The consumer becomes a fused_elementwise node
// (keeping its id and output) whose expr substitutes the producer's expr
// for that input; inputs are deduplicated. Since elementwise ops commute
// with broadcasting, the merged node computes the same elements. A scalar
// f32 constant input (a scale, GELU's 0.5) becomes a constant of the
// expression, rounded to f32 as the constant tensor was.
func fusion(m *ir.Module, o Options) error {
	maxInputs, maxDepth := int(o.Int("max_inputs")), int(o.Int("max_depth"))
	broadcast := o.Bool("allow_broadcast")
	for _, f := range m.Funcs {
		uses := useCounts(f)
		dead := map[*ir.Node]bool{}
		for _, c := range f.Nodes {
			if !fusable(c) {
				continue
			}
			for {
				if err := inlineConstants(c, uses, dead); err != nil {
					return funcErr(f, "inlining constants into %s: %v", c, err)
				}
				merged := false
				for k, v := range c.Inputs {
					p := v.Def
					if p == nil || dead[p] || !fusable(p) || uses[v] != 1 || p.Place != c.Place {
						continue
					}
					if !broadcast && !v.Type.Equal(c.Output().Type) {
						continue
					}
					ok, err := fuseInto(c, k, p, maxInputs, maxDepth, uses)
					if err != nil {
						return funcErr(f, "fusing %s into %s: %v", p, c, err)
					}
					if ok {
						dead[p] = true
						merged = true
						break
					}
				}
				if !merged {
					break
				}
			}
		}
		if len(dead) > 0 {
			substitute(f, nil, dead)
		}
	}
	return nil
}

// fuseInto substitutes producer p for input k of consumer c when the
// result respects the limits; it updates uses.
func fuseInto(c *ir.Node, k int, p *ir.Node, maxInputs, maxDepth int, uses map[*ir.Value]int) (bool, error) {
	ce, err := nodeExpr(c)
	if err != nil {
		return false, err
	}
	if countInput(ce, k) != 1 {
		return false, nil // the producer would be computed more than once
	}
	pe, err := nodeExpr(p)
	if err != nil {
		return false, err
	}
	// The new inputs: c's, without input k, then p's; each value once.
	var inputs []*ir.Value
	index := func(v *ir.Value) int {
		if i := slices.Index(inputs, v); i >= 0 {
			return i
		}
		inputs = append(inputs, v)
		return len(inputs) - 1
	}
	cmap := make([]int, len(c.Inputs))
	for i, v := range c.Inputs {
		if i != k {
			cmap[i] = index(v)
		}
	}
	pmap := make([]int, len(p.Inputs))
	for i, v := range p.Inputs {
		pmap[i] = index(v)
	}
	if len(inputs) > maxInputs {
		return false, nil
	}
	pe = remap(pe, func(i int) *ir.Expr { return &ir.Expr{Input: pmap[i]} })
	e := remap(ce, func(i int) *ir.Expr {
		if i == k {
			return pe
		}
		return &ir.Expr{Input: cmap[i]}
	})
	if exprDepth(e) > maxDepth {
		return false, nil
	}
	e, inputs = orderInputs(e, inputs)
	// fused_elementwise's result has input 0's dtype; all inputs of
	// elementwise ops share it, so any order keeps the type. Check anyway.
	if inputs[0].Type.DType != c.Output().Type.DType {
		return false, nil
	}
	for _, v := range c.Inputs {
		uses[v]--
	}
	for _, v := range p.Inputs {
		uses[v]--
	}
	for _, v := range inputs {
		uses[v]++
	}
	c.Op = ir.OpFusedElementwise
	c.Inputs = inputs
	c.Attrs = ir.Attrs{"expr": ir.StringAttr(e.String())}
	c.Prov = joinProv(p.Prov, c.Prov)
	return true, nil
}

// inlineConstants makes each scalar f32 constant input of c a constant of
// its expression (a scalar broadcasts, so c's output is unchanged), unless
// nothing else would be left as input; a constant node left unused is
// marked dead.
func inlineConstants(c *ir.Node, uses map[*ir.Value]int, dead map[*ir.Node]bool) error {
	out := c.Output().Type
	consts := map[int]float64{}
	for i, v := range c.Inputs {
		p := v.Def
		if out.DType == ir.F32 && p != nil && p.Op == ir.OpConstant && v.Type.DType == ir.F32 &&
			v.Type.Shape.IsStatic() && v.Type.Shape.NumElements() == 1 && v.Type.Shape.Rank() <= out.Shape.Rank() {
			consts[i] = float64(float32(p.Attrs.Floats("value")[0]))
		}
	}
	if len(consts) == 0 || len(consts) == len(c.Inputs) {
		return nil
	}
	e, err := nodeExpr(c)
	if err != nil {
		return err
	}
	e = remap(e, func(i int) *ir.Expr {
		if v, ok := consts[i]; ok {
			return &ir.Expr{Input: -1, Const: v}
		}
		return &ir.Expr{Input: i}
	})
	e, inputs := orderInputs(e, c.Inputs)
	if inputs[0].Type.DType != out.DType {
		return nil
	}
	for i := range consts {
		v := c.Inputs[i]
		if uses[v]--; uses[v] == 0 {
			dead[v.Def] = true
		}
	}
	c.Op = ir.OpFusedElementwise
	c.Inputs = inputs
	c.Attrs = ir.Attrs{"expr": ir.StringAttr(e.String())}
	return nil
}
