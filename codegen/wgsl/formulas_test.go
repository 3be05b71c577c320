package wgsl

import (
	"slices"
	"strings"
	"testing"

	"github.com/tapml/tapml/codegen/wgslfront"
	"github.com/tapml/tapml/ir"
)

// TestFormulas: every elementwise op of the registry has an f32 formula,
// and an i32 one when the registry says it computes on integers; every
// formula types as its dtype, is an elementwise op's, and calls only
// helpers that codegen/llvm can compute (with a C library function).
func TestFormulas(t *testing.T) {
	ops := slices.Concat(ir.UnaryOps, ir.BinaryOps)
	for _, op := range ops {
		if _, _, err := Formula(op, false); err != nil {
			t.Errorf("%s: %v", op, err)
		}
		_, _, err := Formula(op, true)
		if ints := ir.LookupOp(op).Compute == ir.ComputeF32OrInt; ints && err != nil {
			t.Errorf("%s computes on integers: %v", op, err)
		}
	}
	for op, f := range formulas {
		if !slices.Contains(ops, op) {
			t.Errorf("%s has a formula but is not an elementwise op of the registry", op)
		}
		for _, integer := range []bool{false, true} {
			e, vars, err := Formula(op, integer)
			if err != nil {
				if src := map[bool]string{false: f.f32, true: f.i32}[integer]; src != "" {
					t.Errorf("%s: %v", op, err)
				}
				continue
			}
			if want := ir.LookupOp(op).MinInputs; len(vars) != want {
				t.Errorf("%s: variables %v for %d operands", op, vars, want)
			}
			calls(e, func(name string) {
				if _, ok := HelperLibm(name); !ok {
					t.Errorf("%s calls %s, which has no C library function for codegen/llvm", op, name)
				}
			})
		}
	}
	if _, _, err := Formula(ir.OpMatmul, false); err == nil {
		t.Error("matmul has a formula")
	}
	if _, _, err := Formula(ir.OpExp, true); err == nil {
		t.Error("exp has an i32 formula")
	}
}

// calls calls f with the name of every helper function e calls.
func calls(e *wgslfront.Expr, f func(string)) {
	if e.Kind == wgslfront.ExprCall && e.Func != nil {
		f(e.Func.Name)
	}
	for _, a := range e.Args {
		calls(a, f)
	}
}

// TestWrongConstantInFormulas: wrong_constant perturbs the first finite
// nonzero float constant an elementwise kernel evaluates, in a formula or
// in fused_elementwise's expression, and does not apply where there is
// none.
func TestWrongConstantInFormulas(t *testing.T) {
	f32s := []ir.Type{ir.T(ir.F32, ir.S(4))}
	for _, tc := range []struct {
		op         ir.Op
		expr       string
		want, gone string // a literal the kernel has, one it no longer has
	}{
		{op: ir.OpSilu, want: "x0 * (1.1e+00f / (1.0f + exp(-x0)))"},
		{op: ir.OpGelu, want: "(5.5e-01f * x0 * (1.0f", gone: "(0.5f * x0"},
		{op: ir.OpRsqrt, want: "(1.1e+00f / sqrt(x0))"},
		{op: ir.OpFusedElementwise, expr: "mul(exp($0), 2)", want: "(t0 * 2.2e+00f)"},
		{op: ir.OpFusedElementwise, expr: "add(silu($0), 2)", want: "x0 * (1.1e+00f /", gone: "2.2e+00f"},
		{op: ir.OpFusedElementwise, expr: "add(relu($0), 0)", want: ""},
		{op: ir.OpRelu, want: ""},
		{op: ir.OpExp, want: ""},
	} {
		n := &ir.Node{ID: 1, Op: tc.op, Attrs: ir.Attrs{}}
		if tc.expr != "" {
			n.Attrs["expr"] = ir.StringAttr(tc.expr)
		}
		k, err := Generate(n, f32s, nil, Options{Fault: "wrong_constant"})
		switch {
		case tc.want == "" && err == nil:
			t.Errorf("%s %s: wrong_constant applies", tc.op, tc.expr)
		case tc.want == "":
		case err != nil:
			t.Errorf("%s %s: %v", tc.op, tc.expr, err)
		case !strings.Contains(string(k.Source), tc.want) || tc.gone != "" && strings.Contains(string(k.Source), tc.gone):
			t.Errorf("%s %s: want %q (and not %q) in\n%s", tc.op, tc.expr, tc.want, tc.gone, k.Source)
		}
	}
}
