package wgsl

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/tapml/tapml/codegen/fault"
	"github.com/tapml/tapml/codegen/wgslfront"
	"github.com/tapml/tapml/ir"
)

// Formulas: what an elementwise op computes on one element, written once,
// as a WGSL expression of tapml's dialect over x (a unary op) or a and b
// (a binary op). They are the one source of elementwise arithmetic for
// every generated target: genElementwise splices them into WGSL kernels
// (translated to SPIR-V and MSL from there), fused_elementwise splices one
// per term, and codegen/llvm compiles the tree that codegen/wgslfront
// types (Formula). The CPU reference is written apart (runtime/cpu): it is
// the oracle the formulas are tested against.
//
// The table lives here rather than in ir's registry: ir describes what an
// op means, for every package; the formulas are WGSL and call this
// package's helper functions, so they stay beside the code that declares
// those helpers.
//
// Each f32 formula rounds to f32 where runtime/cpu does and in its order
// (silu is x·(1/(1+e^-x)), as llama2.c's run.c), so that a target that
// computes the transcendentals as the CPU does (codegen/llvm: through
// double) gives the CPU's bits. The i32 formulas keep tapml's integer
// semantics: wrapping, and division by zero gives 0 (WGSL's would give a).
//
// softplus is PyTorch's, log1p(exp(β·x)) with β = 1, and x itself above
// the threshold 20; β is written out so that wrong_constant changes a
// constant that shows (a changed threshold would not: both branches agree
// there).
var formulas = map[ir.Op]struct{ f32, i32 string }{
	ir.OpNeg:      {"-x", "-x"},
	ir.OpExp:      {"exp(x)", ""},
	ir.OpLog:      {"log(x)", ""},
	ir.OpSqrt:     {"sqrt(x)", ""},
	ir.OpRsqrt:    {"1.0f / sqrt(x)", ""},
	ir.OpAbs:      {"abs(x)", "abs(x)"},
	ir.OpSilu:     {"x * (1.0f / (1.0f + exp(-x)))", ""},
	ir.OpSigmoid:  {"1.0f / (1.0f + exp(-x))", ""},
	ir.OpTanh:     {"tanh_(x)", ""},
	ir.OpRelu:     {"select(x, 0.0f, x < 0.0f)", "max(x, 0i)"}, // NaN and -0 stay
	ir.OpGelu:     {"0.5f * x * (1.0f + tanh_(0.7978845608028654f * (x + 0.044715f * x * x * x)))", ""},
	ir.OpErf:      {"erf_(x)", ""},
	ir.OpSoftplus: {"select(log1p_(exp(1.0f * x)), x, x > 20.0f)", ""}, // PyTorch's, β = 1 written out (see above)
	ir.OpAdd:      {"a + b", "a + b"},
	ir.OpSub:      {"a - b", "a - b"},
	ir.OpMul:      {"a * b", "a * b"},
	ir.OpDiv:      {"a / b", "select(a / b, 0i, b == 0i)"},
	ir.OpPow:      {"pow_(a, b)", ""},
	ir.OpMaximum:  {"max(a, b)", "max(a, b)"},
	ir.OpMinimum:  {"min(a, b)", "min(a, b)"},
}

// helpers are the WGSL functions kernels call; a kernel declares those it
// uses. libm names the C library function of doubles that computes the
// same function, which codegen/llvm calls instead (rounding its double
// result to f32, as runtime/cpu computes it with Go's math); "" when there
// is none.
//
// f32_bits makes NaN and infinities: Chrome's Tint evaluates
// f32_bits(0x7fc00000u) at shader creation and rejects it ("value nan
// cannot be represented as 'f32'"), while a call of a user function is
// never a constant expression. A kernel declares it whenever its source
// calls it.
var helpers = map[string]struct{ src, libm string }{
	"f32_bits": {src: `fn f32_bits(b: u32) -> f32 { return bitcast<f32>(b); }`},
	// tanh from exp(-2|x|), which cannot overflow.
	"tanh_": {libm: "tanh", src: `fn tanh_(x: f32) -> f32 {
  let e = exp(-2.0f * abs(x));
  let t = (1.0f - e) / (1.0f + e);
  return select(t, -t, x < 0.0f);
}`},
	// erf_: for |x| < 0.5 the Maclaurin series of erf to x^15 (its next term
	// is below 1e-10 there); above, 1 - erfc(|x|) with the Chebyshev fit of
	// erfc from Numerical Recipes (erfcc, fractional error < 1.2e-7). In f32
	// the result is within 2e-7 absolute, 6 ulp relative, of erf.
	"erf_": {libm: "erf", src: `fn erf_(x: f32) -> f32 {
  let a = abs(x);
  if (a < 0.5f) {
    let z = x * x;
    let p = 1.0f + z * (-0.33333333f + z * (0.1f + z * (-0.023809524f + z * (0.0046296296f + z * (-0.00075757576f + z * (0.00010683761f + z * -0.000013227513f))))));
    return 1.1283791670955126f * x * p;
  }
  let t = 1.0f / (1.0f + 0.5f * a);
  let q = -1.26551223f + t * (1.00002368f + t * (0.37409196f + t * (0.09678418f + t * (-0.18628806f + t * (0.27886807f + t * (-1.13520398f + t * (1.48851587f + t * (-0.82215223f + t * 0.17087277f))))))));
  let r = 1.0f - t * exp(q - a * a);
  return select(r, -r, x < 0.0f);
}`},
	// log1p_: ln(1+x) as ln(u)·x/(u-1) with u = 1+x rounded (Goldberg's
	// trick: accurate where 1+x rounds); x itself when u rounds to 1.
	"log1p_": {libm: "log1p", src: `fn log1p_(x: f32) -> f32 {
  let u = 1.0f + x;
  return select(log(u) * (x / (u - 1.0f)), x, u == 1.0f);
}`},
	// pow with C's (and Go's) special cases: WGSL's pow is undefined for
	// a negative base.
	"pow_": {libm: "pow", src: `fn pow_(a: f32, b: f32) -> f32 {
  if (b == 0.0f) { return 1.0f; }
  if (b == 1.0f) { return a; }
  if (b == 2.0f) { return a * a; }
  if (a == 0.0f) { return select(f32_bits(0x7f800000u), 0.0f, b > 0.0f); }
  let p = exp2(b * log2(abs(a)));
  if (a > 0.0f) { return p; }
  if (fract(b) != 0.0f) { return f32_bits(0x7fc00000u); }
  return select(p, -p, fract(b * 0.5f) != 0.0f);
}`},
}

// HelperLibm returns the C library function of doubles that codegen/llvm
// calls for the helper function name (see helpers).
func HelperLibm(name string) (string, bool) {
	h, ok := helpers[name]
	return h.libm, ok && h.libm != ""
}

// parsed holds the formulas typed by codegen/wgslfront, made once.
var parsed = sync.OnceValue(func() map[formulaKey]parsedFormula {
	var lib strings.Builder
	for _, name := range slices.Sorted(maps.Keys(helpers)) {
		lib.WriteString(helpers[name].src + "\n")
	}
	m, libErr := wgslfront.ParseLibrary(lib.String())
	out := map[formulaKey]parsedFormula{}
	for op, f := range formulas {
		vars := formulaVars(op)
		for _, k := range []struct {
			integer bool
			src     string
		}{{false, f.f32}, {true, f.i32}} {
			if k.src == "" {
				continue
			}
			scalar := map[bool]string{false: "f32", true: "i32"}[k.integer]
			p := parsedFormula{vars: vars, err: libErr}
			if libErr == nil {
				vs := make([]wgslfront.Var, len(vars))
				for i, v := range vars {
					vs[i] = wgslfront.Var{Name: v, Type: scalar}
				}
				p.expr, p.err = wgslfront.ParseExpr(k.src, vs, m)
				if p.err == nil && p.expr.Type.String() != scalar {
					p.err = fmt.Errorf("the formula is %s, not %s", p.expr.Type, scalar)
				}
			}
			if p.err != nil {
				p.err = fmt.Errorf("the %s formula of %s %q: %w", scalar, op, k.src, p.err)
			}
			out[formulaKey{op, k.integer}] = p
		}
	}
	return out
})

type formulaKey struct {
	op      ir.Op
	integer bool
}

type parsedFormula struct {
	expr *wgslfront.Expr
	vars []string
	err  error
}

// formulaVars are the names a formula of op reads: x, or a and b.
func formulaVars(op ir.Op) []string {
	if d := ir.LookupOp(op); d != nil && d.MinInputs == 2 {
		return []string{"a", "b"}
	}
	return []string{"x"}
}

// Formula returns op's formula on f32 operands (integer false) or on i32
// ones, as the tree that codegen/wgslfront types, and the names of the
// variables it reads in operand order (x, or a and b). The tree is shared:
// callers only read it. An op without a formula for the type is an error.
func Formula(op ir.Op, integer bool) (*wgslfront.Expr, []string, error) {
	p, ok := parsed()[formulaKey{op, integer}]
	switch {
	case !ok && integer:
		var with []string
		for o, f := range formulas {
			if f.i32 != "" {
				with = append(with, o.String())
			}
		}
		slices.Sort(with)
		return nil, nil, fmt.Errorf("op %s has no i32 kernel (only %s have an i32 formula)", op, strings.Join(with, ", "))
	case !ok:
		return nil, nil, fmt.Errorf("op %s has no formula (codegen/wgsl/formulas.go)", op)
	}
	return p.expr, p.vars, p.err
}

// HasConstant reports whether op's f32 formula has a literal that the
// wrong_constant fault can change (finite and nonzero): the rule by which
// that fault reaches elementwise ops (codegen/fault).
func HasConstant(op ir.Op) bool {
	f, _, err := Formula(op, false)
	return err == nil && hasConstant(f)
}

func hasConstant(e *wgslfront.Expr) bool {
	if e.Kind == wgslfront.ExprLit && e.Type.Kind == wgslfront.F32 {
		v, err := strconv.ParseFloat(strings.TrimSuffix(e.Text, "f"), 32)
		return err == nil && fault.Perturbable(v)
	}
	return slices.ContainsFunc(e.Args, hasConstant)
}

// perturb returns the value wrong_constant makes of the float constant v
// when this is the first one the kernel evaluates that the fault can
// change (finite and nonzero), marking the fault applied.
func (g *gen) perturb(v float64) (float64, bool) {
	if g.fault != fault.WrongConstant || g.faultApplied || !fault.Perturbable(v) {
		return v, false
	}
	g.faultApplied = true
	return fault.Perturbed(v), true
}

// useHelper makes the kernel declare a helper function (once, at the end
// of the module).
func (g *gen) useHelper(name string) {
	if !slices.Contains(g.helpers, name) {
		g.helpers = append(g.helpers, name)
	}
}

// splice writes formula f with its variables (vars) replaced by the WGSL
// values args, declaring the helper functions it calls and planting
// wrong_constant in its first literal that the fault can change.
func (g *gen) splice(f *wgslfront.Expr, vars, args []string) string {
	return "(" + f.Print(func(x *wgslfront.Expr) (string, bool) {
		switch {
		case x.Kind == wgslfront.ExprIdent && x.Ref.Kind == wgslfront.DeclParam:
			return args[slices.Index(vars, x.Text)], true
		case x.Kind == wgslfront.ExprCall && x.Func != nil:
			g.useHelper(x.Func.Name)
		case x.Kind == wgslfront.ExprLit && x.Type.Float():
			v, err := strconv.ParseFloat(strings.TrimSuffix(x.Text, "f"), 32)
			if err != nil {
				return "", false
			}
			if v, ok := g.perturb(v); ok {
				return f32Lit(v), true
			}
		}
		return "", false
	}) + ")"
}
