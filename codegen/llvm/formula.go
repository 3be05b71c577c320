package llvm

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/llir/llvm/ir/constant"
	"github.com/llir/llvm/ir/enum"
	"github.com/llir/llvm/ir/types"
	"github.com/llir/llvm/ir/value"

	"github.com/tapml/tapml/codegen/fault"
	"github.com/tapml/tapml/codegen/wgsl"
	"github.com/tapml/tapml/codegen/wgslfront"
	"github.com/tapml/tapml/ir"
)

// Elementwise formulas. What an elementwise op computes is written once,
// as a WGSL expression in codegen/wgsl's table (wgsl.Formula); here the
// tree that codegen/wgslfront types becomes LLVM IR:
//
//   - f32 arithmetic, comparisons and select are LLVM's instructions, each
//     correctly rounded and in the formula's order, as runtime/cpu computes;
//     max and min are Go's math.Max and Min (NaN if either is, -0 below +0),
//     as the SPIR-V and MSL translations do.
//   - the transcendental builtins (exp, exp2, log, log2, tanh, sin, cos) and
//     codegen/wgsl's helper functions (tanh_, pow_: wgsl.HelperLibm names
//     the C function of each) are computed in double with the C library and
//     rounded to f32, as runtime/cpu computes them with Go's math; sqrt is
//     llvm.sqrt.f32 (correctly rounded).
//   - an i32 formula computes on the kernel's integer type (i32, or i64 for
//     i64 tensors) with WGSL's semantics: +, -, * and negation wrap; the
//     bitwise & | ^ of sign-extended values are the i32 results extended; a
//     division by zero gives the dividend and a remainder by zero 0; MIN / -1
//     is MIN (the divisor becomes 1 in those cases, where LLVM's would be
//     undefined).
//
// A construct outside this list (conversions, vectors, shifts, other
// builtins) is an error naming it, never a panic.

// formulaEnv is what one formula is emitted with.
type formulaEnv struct {
	vars []string      // the formula's variables
	vals []value.Value // their values
	ints types.Type    // the type of the formula's i32 values
}

// formula emits e, a formula of codegen/wgsl, over env.
func (g *gen) formula(e *wgslfront.Expr, env formulaEnv) (value.Value, error) {
	v, err := g.expr(e, env)
	if err != nil {
		return nil, fmt.Errorf("formula %s: %w", e, err)
	}
	return v, nil
}

// opOn emits the f32 formula of the elementwise op on vals, rounded as
// genElementwise rounds each op of a fused expression.
func (g *gen) opOn(op ir.Op, vals ...value.Value) (value.Value, error) {
	f, vars, err := wgsl.Formula(op, false)
	if err != nil {
		return nil, err
	}
	v, err := g.formula(f, formulaEnv{vars: vars, vals: vals, ints: types.I32})
	if err != nil {
		return nil, err
	}
	return g.ov(v), nil
}

// outside is the error of a construct formula does not compile.
func outside(what string, args ...any) error {
	return fmt.Errorf("%s is outside what codegen/llvm compiles", fmt.Sprintf(what, args...))
}

// expr emits e, a subexpression of a formula.
func (g *gen) expr(e *wgslfront.Expr, env formulaEnv) (value.Value, error) {
	args := make([]value.Value, len(e.Args))
	for i, a := range e.Args {
		v, err := g.expr(a, env)
		if err != nil {
			return nil, err
		}
		args[i] = v
	}
	switch e.Kind {
	case wgslfront.ExprParen:
		return args[0], nil
	case wgslfront.ExprIdent:
		if i := slices.Index(env.vars, e.Text); i >= 0 && e.Ref != nil && e.Ref.Kind == wgslfront.DeclParam {
			return env.vals[i], nil
		}
		return nil, outside("the name %s", e.Text)
	case wgslfront.ExprLit:
		return g.literal(e, env)
	case wgslfront.ExprUnary:
		switch {
		case e.Text == "-" && e.Type.Kind == wgslfront.F32:
			return g.cur.NewFNeg(args[0]), nil
		case e.Text == "-" && e.Type.Kind == wgslfront.I32:
			return g.cur.NewSub(constant.NewInt(env.ints.(*types.IntType), 0), args[0]), nil
		case e.Text == "!" && e.Type.Kind == wgslfront.Bool:
			return g.cur.NewXor(args[0], constant.True), nil
		}
	case wgslfront.ExprBinary:
		switch e.Args[0].Type.Kind {
		case wgslfront.F32:
			return g.floatBinary(e.Text, args[0], args[1])
		case wgslfront.I32:
			return g.intBinary(e.Text, args[0], args[1])
		case wgslfront.Bool:
			switch e.Text {
			case "&&":
				return g.cur.NewAnd(args[0], args[1]), nil
			case "||":
				return g.cur.NewOr(args[0], args[1]), nil
			}
		}
	case wgslfront.ExprCall:
		return g.call1(e, args)
	}
	return nil, outside("%s of %s", e, e.Type)
}

// literal emits a literal (or an evaluated constant expression); the first
// f32 one that wrong_constant can change is perturbed.
func (g *gen) literal(e *wgslfront.Expr, env formulaEnv) (value.Value, error) {
	switch {
	case e.Type.Kind == wgslfront.I32:
		v, ok := wgslfront.ConstValue(e)
		if !ok {
			return nil, fmt.Errorf("literal %s: no value", e)
		}
		return constant.NewInt(env.ints.(*types.IntType), v), nil
	case e.Type.Kind == wgslfront.F32:
		v, err := strconv.ParseFloat(strings.TrimSuffix(e.Text, "f"), 32)
		if err != nil {
			return nil, fmt.Errorf("literal %s: %v", e, err)
		}
		return cf(float32(g.perturb(v))), nil
	}
	return nil, outside("the literal %s of %s", e, e.Type)
}

// perturb returns what wrong_constant makes of the float constant v when
// it is the first the kernel evaluates that the fault can change (finite
// and nonzero), marking the fault applied; v otherwise.
func (g *gen) perturb(v float64) float64 {
	if g.fault != fault.WrongConstant || g.faultApplied || !fault.Perturbable(v) {
		return v
	}
	g.faultApplied = true
	return fault.Perturbed(v)
}

// floatPreds are the predicates of WGSL's float comparisons: false when an
// operand is NaN, but != (true).
var floatPreds = map[string]enum.FPred{"==": enum.FPredOEQ, "!=": enum.FPredUNE, "<": enum.FPredOLT,
	"<=": enum.FPredOLE, ">": enum.FPredOGT, ">=": enum.FPredOGE}

// intPreds are the predicates of WGSL's i32 comparisons.
var intPreds = map[string]enum.IPred{"==": enum.IPredEQ, "!=": enum.IPredNE, "<": enum.IPredSLT,
	"<=": enum.IPredSLE, ">": enum.IPredSGT, ">=": enum.IPredSGE}

func (g *gen) floatBinary(op string, x, y value.Value) (value.Value, error) {
	switch op {
	case "+":
		return g.fadd(x, y), nil
	case "-":
		return g.fsub(x, y), nil
	case "*":
		return g.fmul(x, y), nil
	case "/":
		return g.fdiv(x, y), nil
	}
	if p, ok := floatPreds[op]; ok {
		return g.fcmp(p, x, y), nil
	}
	return nil, outside("f32 %s", op)
}

func (g *gen) intBinary(op string, x, y value.Value) (value.Value, error) {
	switch op {
	case "+":
		return g.cur.NewAdd(x, y), nil
	case "-":
		return g.cur.NewSub(x, y), nil
	case "*":
		return g.cur.NewMul(x, y), nil
	case "&":
		return g.cur.NewAnd(x, y), nil
	case "|":
		return g.cur.NewOr(x, y), nil
	case "^":
		return g.cur.NewXor(x, y), nil
	case "/", "%":
		// WGSL's results where LLVM's are undefined: the divisor becomes 1
		// when it is 0 (x / 0 = x, x % 0 = 0) or when MIN is divided by -1
		// (MIN / -1 = MIN, MIN % -1 = 0).
		it := x.Type().(*types.IntType)
		minInt := constant.NewInt(it, math.MinInt64>>(64-it.BitSize))
		ovf := g.cur.NewAnd(g.icmp(enum.IPredEQ, x, minInt), g.icmp(enum.IPredEQ, y, constant.NewInt(it, -1)))
		d := g.sel(g.cur.NewOr(g.icmp(enum.IPredEQ, y, constant.NewInt(it, 0)), ovf), constant.NewInt(it, 1), y)
		if op == "/" {
			return g.cur.NewSDiv(x, d), nil
		}
		return g.cur.NewSRem(x, d), nil
	}
	if p, ok := intPreds[op]; ok {
		return g.icmp(p, x, y), nil
	}
	return nil, outside("i32 %s", op)
}

// libmBuiltins are the WGSL float builtins computed through the C library
// in double, and the C function of each.
var libmBuiltins = map[string]string{"exp": "exp", "exp2": "exp2", "log": "log", "log2": "log2",
	"tanh": "tanh", "sin": "sin", "cos": "cos"}

// call1 emits a call of a builtin or of a helper function of codegen/wgsl.
func (g *gen) call1(e *wgslfront.Expr, args []value.Value) (value.Value, error) {
	f32 := e.Type.Kind == wgslfront.F32
	if e.Func != nil {
		fn, ok := wgsl.HelperLibm(e.Func.Name)
		if !ok || !f32 {
			return nil, fmt.Errorf("helper %s has no C library function (wgsl.HelperLibm)", e.Func.Name)
		}
		return g.viaDouble(fn, args...), nil
	}
	if fn, ok := libmBuiltins[e.Text]; ok && f32 {
		return g.viaDouble(fn, args...), nil
	}
	x := args[0]
	switch e.Text {
	case "select": // select(f, t, cond)
		return g.sel(args[2], args[1], args[0]), nil
	case "sqrt":
		if f32 {
			return g.sqrtf(x), nil
		}
	case "inverseSqrt":
		if f32 {
			return g.fdiv(cf(1), g.sqrtf(x)), nil
		}
	case "abs":
		if f32 {
			return g.call("llvm.fabs.f32", types.Float, x), nil
		}
		if e.Type.Kind == wgslfront.I32 { // wraps: abs(MIN) is MIN
			zero := constant.NewInt(x.Type().(*types.IntType), 0)
			return g.sel(g.icmp(enum.IPredSLT, x, zero), g.cur.NewSub(zero, x), x), nil
		}
	case "max", "min":
		if f32 {
			return g.maxMin(e.Text == "max", x, args[1]), nil
		}
		if e.Type.Kind == wgslfront.I32 {
			p := enum.IPredSGT
			if e.Text == "min" {
				p = enum.IPredSLT
			}
			return g.sel(g.icmp(p, x, args[1]), x, args[1]), nil
		}
	}
	return nil, outside("%s of %s", e.Text, e.Type)
}
