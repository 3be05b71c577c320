package wgsl

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/tapml/tapml/codegen"
	"github.com/tapml/tapml/ir"
)

// elementwise generates the body of a one-thread-per-output-element kernel:
// body writes the statements that compute element i of out0 (i is in range).
func (g *gen) elementwise(n int, body func()) *codegen.Kernel {
	wgx := g.threads(256)
	grid, gid := g.fold(ceilDiv(n, wgx))
	if n == 0 {
		grid = [3]int{0, 1, 1}
	}
	g.entry([3]int{wgx, 1, 1})
	g.p("  let i = %s * %du + li;", gid, wgx)
	g.p("  if (i >= %du) { return; }", n)
	body()
	g.p("}")
	return g.kernel([3]int{wgx, 1, 1}, grid)
}

// coords emits the coordinates of linear index idx in shape (row-major) as
// c0..c{r-1} and returns their names.
func (g *gen) coords(shape []int, idx string) []string {
	names := make([]string, len(shape))
	if len(shape) == 0 {
		return names
	}
	g.p("  var r_ = %s;", idx)
	for d := len(shape) - 1; d >= 0; d-- {
		names[d] = "c" + strconv.Itoa(d)
		if d == 0 {
			g.p("  let %s = r_;", names[d])
		} else {
			g.p("  let %s = r_ %% %du; r_ = r_ / %du;", names[d], shape[d], shape[d])
		}
	}
	return names
}

// strides returns the row-major strides of a shape.
func strides(shape []int) []int {
	s := make([]int, len(shape))
	acc := 1
	for d := len(shape) - 1; d >= 0; d-- {
		s[d] = acc
		acc *= shape[d]
	}
	return s
}

// broadcastOffset is the offset into an input of shape in for the output
// element at coords (output shape out; numpy broadcasting, right-aligned).
func broadcastOffset(out, in []int, coords []string) string {
	st := strides(in)
	var terms []string
	for d := range in {
		od := len(out) - len(in) + d
		if in[d] == 1 {
			continue
		}
		if st[d] == 1 {
			terms = append(terms, coords[od])
		} else {
			terms = append(terms, fmt.Sprintf("%s * %du", coords[od], st[d]))
		}
	}
	if len(terms) == 0 {
		return "0u"
	}
	return strings.Join(terms, " + ")
}

// inputOffsets returns, for each input, the WGSL expression of the offset
// that feeds output element i; it emits coordinates when some input
// broadcasts.
func (g *gen) inputOffsets() []string {
	out := sizes(g.out[0])
	offs := make([]string, len(g.in))
	var coords []string
	for j, t := range g.in {
		s := sizes(t)
		switch {
		case slices.Equal(s, out):
			offs[j] = "i"
		case prod(s) == 1:
			offs[j] = "0u"
		default:
			if coords == nil {
				coords = g.coords(out, "i")
			}
			offs[j] = broadcastOffset(out, s, coords)
		}
	}
	return offs
}

// genElementwise generates unary, binary and fused_elementwise kernels:
// each term of the expression is its op's formula, spliced (formulas.go),
// and bound to a let.
func genElementwise(g *gen) (*codegen.Kernel, error) {
	dt := g.in[0].DType
	var expr *ir.Expr
	if g.op == ir.OpFusedElementwise {
		var err error
		if expr, err = ir.ParseExpr(g.attrs.String("expr")); err != nil {
			return nil, err
		}
	} else {
		expr = &ir.Expr{Op: g.op, Input: -1}
		for j := range g.in {
			expr.Args = append(expr.Args, &ir.Expr{Input: j})
		}
	}
	if dt == ir.I32 && g.op == ir.OpFusedElementwise {
		return nil, fmt.Errorf("fused_elementwise on i32 is not supported")
	}
	g.bindAll()
	g.f16Helper()
	n := numel(g.out[0])
	ty := wgslType(dt)
	var genErr error
	k := g.elementwise(n, func() {
		offs := g.inputOffsets()
		if g.faultIs(FaultWrongIndex) {
			offs[0] = "(" + offs[0] + ") + 1u"
		}
		for j := range g.in {
			if usesInput(expr, j) {
				g.p("  let x%d: %s = in%d[%s];", j, ty, j, offs[j])
			}
		}
		tmp := 0
		var walk func(e *ir.Expr) (string, error)
		walk = func(e *ir.Expr) (string, error) {
			switch {
			case e.IsInput():
				return "x" + strconv.Itoa(e.Input), nil
			case e.IsConst() && dt == ir.I32:
				return i32Lit(int64(e.Const)), nil
			case e.IsConst():
				v, _ := g.perturb(e.Const)
				return f32Lit(v), nil
			}
			args := make([]string, len(e.Args))
			for k, a := range e.Args {
				s, err := walk(a)
				if err != nil {
					return "", err
				}
				args[k] = s
			}
			f, vars, err := Formula(e.Op, dt == ir.I32)
			if err != nil {
				return "", err
			}
			s := g.splice(f, vars, args)
			if dt == ir.F32 {
				s = g.ov(s)
			}
			name := "t" + strconv.Itoa(tmp)
			tmp++
			g.p("  let %s: %s = %s;", name, ty, s)
			return name, nil
		}
		res, err := walk(expr)
		if err != nil {
			genErr = err
			return
		}
		g.p("  out0[i] = %s;", res)
	})
	if genErr != nil {
		return nil, genErr
	}
	return k, nil
}

func usesInput(e *ir.Expr, j int) bool {
	if e.IsInput() {
		return e.Input == j
	}
	for _, a := range e.Args {
		if usesInput(a, j) {
			return true
		}
	}
	return false
}

// genConstant fills its output with the node's values.
func genConstant(g *gen) (*codegen.Kernel, error) {
	g.bindAll()
	vals := g.attrs.Floats("value")
	dt := g.out[0].DType
	n := numel(g.out[0])
	lit := func(v float64) string {
		if g.faultIs(FaultWrongConstant) {
			v++
		}
		if dt == ir.I32 {
			return i32Lit(int64(v))
		}
		return f32Lit(v)
	}
	ty := wgslType(dt)
	if len(vals) == 1 {
		v := lit(vals[0])
		if g.fault == FaultWrongIndex {
			return nil, fmt.Errorf("wrong_index needs a constant with more than one value")
		}
		return g.elementwise(n, func() { g.p("  out0[i] = %s;", v) }), nil
	}
	parts := make([]string, len(vals))
	for i, v := range vals {
		parts[i] = lit(v)
	}
	g.p("var<private> vals: array<%s, %d> = array<%s, %d>(%s);", ty, len(vals), ty, len(vals), strings.Join(parts, ", "))
	return g.elementwise(n, func() {
		if g.faultIs(FaultWrongIndex) {
			g.p("  out0[i] = vals[min(i + 1u, %du)];", len(vals)-1)
			return
		}
		g.p("  out0[i] = vals[i];")
	}), nil
}

// genCast converts between f32 and i32 (float to int truncates toward
// zero, saturating at the i32 range; NaN gives 0).
func genCast(g *gen) (*codegen.Kernel, error) {
	g.bindAll()
	from, to := g.in[0].DType, g.out[0].DType
	src := "in0[i]"
	if g.faultIs(FaultWrongIndex) {
		src = "in0[i + 1u]"
	}
	var conv string
	switch {
	case from == to:
		conv = src
	case from == ir.F32 && to == ir.I32:
		// Clamp first: WGSL leaves out-of-range conversions to the driver.
		conv = "select(i32(clamp(x, -2147483648.0f, 2147483520.0f)), 0i, x != x)"
	case from == ir.I32 && to == ir.F32:
		conv = "f32(" + src + ")"
	}
	return g.elementwise(numel(g.out[0]), func() {
		if from == ir.F32 && to == ir.I32 {
			g.p("  let x = %s;", src)
		}
		g.p("  out0[i] = %s;", conv)
	}), nil
}

// genCopy copies its input (reshape, probe, transfer).
func genCopy(g *gen) (*codegen.Kernel, error) {
	g.bindAll()
	src := "in0[i]"
	if g.faultIs(FaultWrongIndex) {
		src = "in0[i + 1u]"
	}
	return g.elementwise(numel(g.out[0]), func() { g.p("  out0[i] = %s;", src) }), nil
}

// genTranspose permutes dims: output dim d is input dim perm[d].
func genTranspose(g *gen) (*codegen.Kernel, error) {
	g.bindAll()
	perm := g.attrs.Ints("perm")
	in, out := sizes(g.in[0]), sizes(g.out[0])
	ist := strides(in)
	return g.elementwise(numel(g.out[0]), func() {
		c := g.coords(out, "i")
		var terms []string
		for d := range out {
			if out[d] == 1 {
				continue
			}
			terms = append(terms, fmt.Sprintf("%s * %du", c[d], ist[perm[d]]))
		}
		off := "0u"
		if len(terms) > 0 {
			off = strings.Join(terms, " + ")
		}
		if g.faultIs(FaultWrongIndex) {
			off += " + 1u"
		}
		g.p("  out0[i] = in0[%s];", off)
	}), nil
}

// outerInner splits shape around axis: the product of the dims before it,
// the dim itself and the product of the dims after it.
func outerInner(shape []int, axis int) (outer, dim, inner int) {
	return prod(shape[:axis]), shape[axis], prod(shape[axis+1:])
}

// genSlice takes start, start+step, ... along axis.
func genSlice(g *gen) (*codegen.Kernel, error) {
	g.bindAll()
	in := sizes(g.in[0])
	axis := ir.NormAxis(g.attrs.Int("axis"), len(in))
	first, _ := ir.SliceBounds(g.attrs.Int("start"), g.attrs.Int("end"), g.attrs.Int("step"), int64(in[axis]))
	step := g.attrs.Int("step")
	_, dout, inner := outerInner(sizes(g.out[0]), axis)
	din := in[axis]
	return g.elementwise(numel(g.out[0]), func() {
		g.p("  let c = i %% %du;", inner)
		g.p("  let j = (i / %du) %% %du;", inner, max(dout, 1))
		g.p("  let o = i / %du;", inner*max(dout, 1))
		off := fmt.Sprintf("(o * %du + %du + j * %du) * %du + c", din, first, step, inner)
		if g.faultIs(FaultWrongIndex) {
			off += " + 1u"
		}
		g.p("  out0[i] = in0[%s];", off)
	}), nil
}

// genConcat joins its inputs along axis.
func genConcat(g *gen) (*codegen.Kernel, error) {
	g.bindAll()
	out := sizes(g.out[0])
	axis := ir.NormAxis(g.attrs.Int("axis"), len(out))
	_, dout, inner := outerInner(out, axis)
	return g.elementwise(numel(g.out[0]), func() {
		g.p("  let c = i %% %du;", inner)
		g.p("  let j = (i / %du) %% %du;", inner, max(dout, 1))
		g.p("  let o = i / %du;", inner*max(dout, 1))
		bump := ""
		if g.faultIs(FaultWrongIndex) {
			bump = " + 1u"
		}
		start := 0
		first := true
		for k, t := range g.in {
			dk := sizes(t)[axis]
			if dk == 0 {
				continue
			}
			cond := fmt.Sprintf("j < %du", start+dk)
			kw := "} else if"
			if first {
				kw = "if"
				first = false
			}
			g.p("  %s (%s) {", kw, cond)
			g.p("    out0[i] = in%d[(o * %du + j - %du) * %du + c%s];", k, dk, start, inner, bump)
			start += dk
		}
		if !first {
			g.p("  }")
		}
	}), nil
}

// genGather looks up rows of a table by integer ids. An id out of range
// gives NaN (f32 tables) or 0 (i32 tables): the GPU cannot raise the
// run-time error the op defines.
func genGather(g *gen) (*codegen.Kernel, error) {
	if isStored(g.in[0].DType) {
		return gatherStored(g)
	}
	g.bindAll()
	table := sizes(g.in[0])
	axis := ir.NormAxis(g.attrs.Int("axis"), len(table))
	_, v, inner := outerInner(table, axis)
	nid := numel(g.in[1])
	bad := "f32_bits(0x7fc00000u)"
	if g.in[0].DType == ir.I32 {
		bad = "0i"
	}
	return g.elementwise(numel(g.out[0]), func() {
		g.p("  let c = i %% %du;", inner)
		g.p("  let j = (i / %du) %% %du;", inner, max(nid, 1))
		g.p("  let o = i / %du;", inner*max(nid, 1))
		id := "in1[j]"
		if g.faultIs(FaultWrongIndex) {
			id = "(in1[j] + 1i)"
		}
		g.p("  let id = %s;", id)
		g.p("  if (id < 0i || id >= %di) { out0[i] = %s; return; }", v, bad)
		g.p("  out0[i] = in0[(o * %du + u32(id)) * %du + c];", v, inner)
	}), nil
}
