package msl

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/tapml/tapml/codegen"
	"github.com/tapml/tapml/ir"
)

// helpers are MSL functions kernels call; a kernel declares the ones it
// uses before its entry point.
var helpers = map[string]string{
	// ov is the f16_overflow fault's filter.
	"ov": `static inline float ov(float v) { return fabs(v) > 65504.0f ? (v > 0.0f ? INFINITY : -INFINITY) : v; }`,
	// pow_ is the CPU reference's math.Pow on f32: a negative base with an
	// integral exponent is allowed (Metal's pow leaves it undefined).
	"pow_": `static inline float pow_(float a, float b) {
  if (b == 0.0f) { return 1.0f; }
  if (b == 1.0f) { return a; }
  if (b == 2.0f) { return a * a; }
  float p = pow(fabs(a), b);
  if (!(a < 0.0f)) { return p; }
  if (trunc(b) != b) { return NAN; }
  return fmod(b, 2.0f) != 0.0f ? -p : p;
}`,
	// max_ and min_ propagate NaN and order -0 below +0, as the CPU
	// reference (math.Max, math.Min) does; Metal's fmax drops NaNs.
	"max_": `static inline float max_(float a, float b) {
  if (isnan(a) || isnan(b)) { return a + b; }
  if (a > b) { return a; }
  if (b > a) { return b; }
  return signbit(a) ? b : a;
}`,
	"min_": `static inline float min_(float a, float b) {
  if (isnan(a) || isnan(b)) { return a + b; }
  if (a < b) { return a; }
  if (b < a) { return b; }
  return signbit(a) ? a : b;
}`,
}

// elementwise generates a one-thread-per-output-element kernel: body
// writes the statements that compute element i of out0 (i is in range).
func (g *gen) elementwise(n int, body func()) *codegen.Kernel {
	wgx := g.threads(256)
	grid, gid := g.fold(ceilDiv(n, wgx))
	if n == 0 {
		grid = [3]int{0, 1, 1}
	}
	g.entry()
	g.p("  const uint i = %s * %du + li;", gid, wgx)
	g.p("  if (i >= %du) { return; }", n)
	body()
	g.p("}")
	return g.kernel([3]int{wgx, 1, 1}, grid)
}

// coords returns the MSL expressions of the coordinates of linear index
// idx in shape (row-major), one per dim. They are expressions, not
// variables, so that unused ones cost nothing (the compiler shares the
// divisions).
func (g *gen) coords(shape []int, idx string) []string {
	names := make([]string, len(shape))
	st := strides(shape)
	for d := range shape {
		switch {
		case len(shape) == 1:
			names[d] = idx
		case d == 0:
			names[d] = fmt.Sprintf("(%s / %du)", idx, max(st[d], 1))
		case st[d] == 1:
			names[d] = fmt.Sprintf("(%s %% %du)", idx, max(shape[d], 1))
		default:
			names[d] = fmt.Sprintf("((%s / %du) %% %du)", idx, max(st[d], 1), max(shape[d], 1))
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

// inputOffsets returns, for each input, the MSL expression of the offset
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

// unaryF32 is the MSL expression of a unary op on float x.
func (g *gen) unaryF32(op, x string) (string, error) {
	switch op {
	case "neg":
		return "(-" + x + ")", nil
	case "exp", "log", "sqrt", "tanh":
		return op + "(" + x + ")", nil
	case "abs":
		return "fabs(" + x + ")", nil
	case "rsqrt":
		return "(1.0f / sqrt(" + x + "))", nil
	case "silu":
		return "(" + x + " / (1.0f + exp(-" + x + ")))", nil
	case "sigmoid":
		return "(1.0f / (1.0f + exp(-" + x + ")))", nil
	case "relu": // NaN stays NaN
		return "(" + x + " < 0.0f ? 0.0f : " + x + ")", nil
	case "gelu":
		c := 0.044715
		if g.faultIs(FaultWrongConstant) {
			c = 0.05
		}
		return fmt.Sprintf("(0.5f * %s * (1.0f + tanh(0.7978845608028654f * (%s + %s * %s * %s * %s))))", x, x, f32Lit(c), x, x, x), nil
	}
	return "", fmt.Errorf("unknown unary op %s", op)
}

// binaryF32 is the MSL expression of a binary op on float a and b.
func (g *gen) binaryF32(op, a, b string) (string, error) {
	switch op {
	case "add":
		return "(" + a + " + " + b + ")", nil
	case "sub":
		return "(" + a + " - " + b + ")", nil
	case "mul":
		return "(" + a + " * " + b + ")", nil
	case "div":
		return "(" + a + " / " + b + ")", nil
	case "pow":
		g.useHelper("pow_")
		return "pow_(" + a + ", " + b + ")", nil
	case "maximum":
		g.useHelper("max_")
		return "max_(" + a + ", " + b + ")", nil
	case "minimum":
		g.useHelper("min_")
		return "min_(" + a + ", " + b + ")", nil
	}
	return "", fmt.Errorf("unknown binary op %s", op)
}

// intOp is the MSL expression of an elementwise op on int operands. add,
// sub, mul and neg wrap around (computed in uint: signed overflow is
// undefined in MSL as in C++).
func intOp(op string, args []string) (string, error) {
	wrap := func(sym string) string {
		return "int(uint(" + args[0] + ") " + sym + " uint(" + args[1] + "))"
	}
	switch op {
	case "neg":
		return "int(0u - uint(" + args[0] + "))", nil
	case "abs":
		return "(" + args[0] + " < 0 ? int(0u - uint(" + args[0] + ")) : " + args[0] + ")", nil
	case "relu":
		return "max(" + args[0] + ", 0)", nil
	case "add":
		return wrap("+"), nil
	case "sub":
		return wrap("-"), nil
	case "mul":
		return wrap("*"), nil
	case "div":
		// Truncates toward zero; x/0 is 0 and INT_MIN/-1 wraps to INT_MIN
		// (both undefined in MSL).
		return "(" + args[1] + " == 0 ? 0 : (" + args[1] + " == -1 ? int(0u - uint(" + args[0] + ")) : " + args[0] + " / " + args[1] + "))", nil
	case "maximum":
		return "max(" + args[0] + ", " + args[1] + ")", nil
	case "minimum":
		return "min(" + args[0] + ", " + args[1] + ")", nil
	}
	return "", fmt.Errorf("op %s has no i32 kernel (only neg, abs, relu, add, sub, mul, div, maximum, minimum)", op)
}

// genElementwise generates unary, binary and fused_elementwise kernels.
func genElementwise(g *gen) (*codegen.Kernel, error) {
	dt := g.in[0].DType
	var expr *ir.Expr
	if g.op == "fused_elementwise" {
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
	if dt == ir.I32 && g.op == "fused_elementwise" {
		return nil, fmt.Errorf("fused_elementwise on i32 is not supported")
	}
	g.bindAll()
	g.f16Helper()
	n := numel(g.out[0])
	ty := mslType(dt)
	var genErr error
	k := g.elementwise(n, func() {
		offs := g.inputOffsets()
		if g.faultIs(FaultWrongIndex) {
			offs[0] = "(" + offs[0] + ") + 1u"
		}
		for j := range g.in {
			if usesInput(expr, j) {
				g.p("  const %s x%d = in%d[%s];", ty, j, j, offs[j])
			}
		}
		tmp := 0
		constFault := g.op == "fused_elementwise" && g.fault == FaultWrongConstant
		var walk func(e *ir.Expr) (string, error)
		walk = func(e *ir.Expr) (string, error) {
			switch {
			case e.IsInput():
				return "x" + strconv.Itoa(e.Input), nil
			case e.IsConst():
				v := e.Const
				if constFault && g.faultIs(FaultWrongConstant) {
					v *= 1.1
					constFault = false
				}
				if dt == ir.I32 {
					return i32Lit(int64(v)), nil
				}
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
			var s string
			var err error
			switch {
			case dt == ir.I32:
				s, err = intOp(e.Op, args)
			case len(args) == 1:
				s, err = g.unaryF32(e.Op, args[0])
			default:
				s, err = g.binaryF32(e.Op, args[0], args[1])
			}
			if err != nil {
				return "", err
			}
			if dt == ir.F32 {
				s = g.ov(s)
			}
			name := "t" + strconv.Itoa(tmp)
			tmp++
			g.p("  const %s %s = %s;", ty, name, s)
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
	ty := mslType(dt)
	if len(vals) == 1 {
		if g.fault == FaultWrongIndex {
			return nil, fmt.Errorf("wrong_index needs a constant with more than one value")
		}
		v := lit(vals[0])
		return g.elementwise(n, func() { g.p("  out0[i] = %s;", v) }), nil
	}
	parts := make([]string, len(vals))
	for i, v := range vals {
		parts[i] = lit(v)
	}
	g.p("constant %s vals[%d] = {%s};", ty, max(len(vals), 1), strings.Join(parts, ", "))
	return g.elementwise(n, func() {
		if g.faultIs(FaultWrongIndex) {
			g.p("  out0[i] = vals[min(i + 1u, %du)];", max(len(vals)-1, 0))
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
		// Clamp first: an out-of-range conversion is undefined in MSL.
		conv = "(isnan(x) ? 0 : int(clamp(x, -2147483648.0f, 2147483520.0f)))"
	case from == ir.I32 && to == ir.F32:
		conv = "float(" + src + ")"
	}
	return g.elementwise(numel(g.out[0]), func() {
		if from == ir.F32 && to == ir.I32 {
			g.p("  const float x = %s;", src)
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
		g.p("  const uint c = i %% %du;", max(inner, 1))
		g.p("  const uint j = (i / %du) %% %du;", max(inner, 1), max(dout, 1))
		g.p("  const uint o = i / %du;", max(inner*dout, 1))
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
		g.p("  const uint c = i %% %du;", max(inner, 1))
		g.p("  const uint j = (i / %du) %% %du;", max(inner, 1), max(dout, 1))
		g.p("  const uint o = i / %du;", max(inner*dout, 1))
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
			kw := "} else if"
			if first {
				kw = "if"
				first = false
			}
			g.p("  %s (j < %du) {", kw, start+dk)
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
	g.bindAll()
	table := sizes(g.in[0])
	axis := ir.NormAxis(g.attrs.Int("axis"), len(table))
	_, v, inner := outerInner(table, axis)
	nid := numel(g.in[1])
	bad := "NAN"
	if g.in[0].DType == ir.I32 {
		bad = "0"
	}
	return g.elementwise(numel(g.out[0]), func() {
		g.p("  const uint c = i %% %du;", max(inner, 1))
		g.p("  const uint j = (i / %du) %% %du;", max(inner, 1), max(nid, 1))
		g.p("  const uint o = i / %du;", max(inner*nid, 1))
		id := "in1[j]"
		if g.faultIs(FaultWrongIndex) {
			id = "(in1[j] + 1)"
		}
		g.p("  const int id = %s;", id)
		g.p("  if (id < 0 || id >= %d) { out0[i] = %s; return; }", v, bad)
		g.p("  out0[i] = in0[(o * %du + uint(id)) * %du + c];", v, inner)
	}), nil
}
