package cpu

import (
	"fmt"
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/tapml/tapml/ir"
	"github.com/tapml/tapml/tensor"
)

var unaryShapes = [][]int{{}, {1}, {7}, {3, 5}, {2, 3, 4}, {0, 3}, {3, 1500}}

// positive lists the ops tested on positive inputs only.
var positive = map[ir.Op]bool{ir.OpLog: true, ir.OpSqrt: true, ir.OpRsqrt: true, ir.OpPow: true}

func TestUnary(t *testing.T) {
	d := New()
	r := newRand(1)
	for _, op := range ir.UnaryOps {
		for _, shape := range unaryShapes {
			x := randF32(r, shape...)
			for i, v := range x.Float32s() {
				v *= 6 // cover the tails of exp, tanh, gelu
				if positive[op] {
					v = float32(math.Abs(float64(v))) + 0.01
				}
				x.Float32s()[i] = v
			}
			got := launch(t, d, op, nil, x)
			shape, want := naiveElementwise(func(a []float64) float64 { return naiveUnary(op, a[0]) }, x)
			checkShape(t, op.String(), got, shape)
			approx(t, fmt.Sprintf("%s%v", op, x.Shape), want, f64s(got), 1e-5, 1e-6)
		}
	}
}

var binaryShapes = [][2][]int{
	{{}, {}}, {{5}, {5}}, {{3, 4}, {4}}, {{4}, {3, 4}}, {{2, 1, 5}, {3, 1}}, {{}, {2, 3}},
	{{4, 1}, {1, 6}}, {{1}, {7}}, {{2, 3, 1, 5}, {3, 4, 1}}, {{0, 3}, {3}}, {{3, 1}, {1}},
	{{2, 2500}, {2500}}, {{2, 1, 3}, {2, 5, 1}},
}

func TestBinary(t *testing.T) {
	d := New()
	r := newRand(2)
	for _, op := range ir.BinaryOps {
		for _, sh := range binaryShapes {
			a, b := randF32(r, sh[0]...), randF32(r, sh[1]...)
			if positive[op] {
				for i, v := range a.Float32s() {
					a.Float32s()[i] = float32(math.Abs(float64(v))) + 0.01
				}
				for i, v := range b.Float32s() {
					b.Float32s()[i] = 3 * v
				}
			}
			got := launch(t, d, op, nil, a, b)
			shape, want := naiveElementwise(func(x []float64) float64 { return naiveBinary(op, x[0], x[1]) }, a, b)
			checkShape(t, op.String(), got, shape)
			approx(t, fmt.Sprintf("%s%v%v", op, a.Shape, b.Shape), want, f64s(got), 1e-5, 1e-6)
		}
	}
}

func TestSpecialValues(t *testing.T) {
	d := New()
	nan := float32(math.NaN())
	x := tensor.FromFloat32([]int{4}, []float32{nan, -1, 0, 2})
	y := tensor.FromFloat32([]int{4}, []float32{1, nan, -3, 5})
	cases := []struct {
		op   ir.Op
		in   []*tensor.Tensor
		want []float64
	}{
		{ir.OpRelu, []*tensor.Tensor{x}, []float64{math.NaN(), 0, 0, 2}},
		{ir.OpMaximum, []*tensor.Tensor{x, y}, []float64{math.NaN(), math.NaN(), 0, 5}},
		{ir.OpMinimum, []*tensor.Tensor{x, y}, []float64{math.NaN(), math.NaN(), -3, 2}},
		{ir.OpAbs, []*tensor.Tensor{x}, []float64{math.NaN(), 1, 0, 2}},
		{ir.OpDiv, []*tensor.Tensor{y, x}, []float64{math.NaN(), math.NaN(), math.Inf(-1), 2.5}},
	}
	for _, c := range cases {
		approx(t, c.op.String(), c.want, f64s(launch(t, d, c.op, nil, c.in...)), 0, 0)
	}
}

func intTensor(dt ir.DType, shape []int, vals ...int64) *tensor.Tensor {
	x := tensor.New(dt, shape)
	for i, v := range vals {
		x.SetFloat64At(i, float64(v))
	}
	return x
}

func TestIntegerElementwise(t *testing.T) {
	d := New()
	for _, dt := range []ir.DType{ir.I32, ir.I64} {
		a := intTensor(dt, []int{2, 3}, -3, 0, 7, 2, -8, 5)
		b := intTensor(dt, []int{3}, 4, -2, 7)
		for _, op := range []ir.Op{ir.OpAdd, ir.OpSub, ir.OpMul, ir.OpMaximum, ir.OpMinimum} {
			got := launch(t, d, op, nil, a, b)
			shape, want := naiveElementwise(func(x []float64) float64 { return naiveBinary(op, x[0], x[1]) }, a, b)
			checkShape(t, op.String(), got, shape)
			if got.DType != dt {
				t.Errorf("%s on %s gave %s", op, dt, got.DType)
			}
			approx(t, op.String()+" "+dt.String(), want, f64s(got), 0, 0)
		}
		for _, op := range []ir.Op{ir.OpNeg, ir.OpAbs, ir.OpRelu} {
			got := launch(t, d, op, nil, a)
			_, want := naiveElementwise(func(x []float64) float64 { return naiveUnary(op, x[0]) }, a)
			approx(t, op.String()+" "+dt.String(), want, f64s(got), 0, 0)
		}
		for _, op := range []ir.Op{ir.OpDiv, ir.OpExp} {
			in := []*tensor.Tensor{a, a}[:ir.LookupOp(op).MinInputs]
			if err := launchRaw(d, op, nil, in...); err == nil {
				t.Errorf("%s on %s: no error", op, dt)
			}
		}
	}
}

// evalExpr evaluates an expression in float64 at one element.
func evalExpr(e *ir.Expr, args []float64) float64 {
	switch {
	case e.IsInput():
		return args[e.Input]
	case e.IsConst():
		return e.Const
	case len(e.Args) == 1:
		return naiveUnary(e.Op, evalExpr(e.Args[0], args))
	}
	return naiveBinary(e.Op, evalExpr(e.Args[0], args), evalExpr(e.Args[1], args))
}

func TestFused(t *testing.T) {
	d := New()
	r := newRand(3)
	cases := []struct {
		expr   string
		shapes [][]int
	}{
		{"mul(silu($0), $1)", [][]int{{3, 5}, {3, 5}}},
		{"add($0, mul($1, 0.5))", [][]int{{2, 3, 4}, {4}}},
		{"exp(sub($0, $1))", [][]int{{4, 1}, {1, 6}}},
		{"$0", [][]int{{3}}},
		{"add(2, $0)", [][]int{{2, 2}}},
		{"maximum(neg($1), tanh($0))", [][]int{{2, 1, 3}, {5, 1}}},
		{"div(gelu($0), add(sigmoid($1), add(abs($2), 1)))", [][]int{{3, 2100}, {2100}, {3, 1}}},
		{"mul($0, $0)", [][]int{{}}},
		{"sub($1, $0)", [][]int{{1}, {0, 2}}},
	}
	for _, c := range cases {
		ins := make([]*tensor.Tensor, len(c.shapes))
		for i, s := range c.shapes {
			ins[i] = randF32(r, s...)
		}
		got := launch(t, d, ir.OpFusedElementwise, ir.Attrs{"expr": ir.StringAttr(c.expr)}, ins...)
		e, err := ir.ParseExpr(c.expr)
		if err != nil {
			t.Fatal(err)
		}
		shape, want := naiveElementwise(func(a []float64) float64 { return evalExpr(e, a) }, ins...)
		checkShape(t, c.expr, got, shape)
		approx(t, c.expr, want, f64s(got), 1e-5, 1e-6)
	}
	if len(d.exprs) != len(cases) {
		t.Errorf("device caches %d compiled expressions, want %d (one per distinct expr)", len(d.exprs), len(cases))
	}
}

// A fused chain gives exactly the bits of its ops run one by one.
func TestFusedMatchesUnfused(t *testing.T) {
	d := New()
	r := newRand(4)
	g, u := randF32(r, 4, 172), randF32(r, 4, 172)
	fused := launch(t, d, ir.OpFusedElementwise, ir.Attrs{"expr": ir.StringAttr("mul(silu($0), $1)")}, g, u)
	unfused := launch(t, d, ir.OpMul, nil, launch(t, d, ir.OpSilu, nil, g), u)
	if diff := cmp.Diff(unfused.Float32s(), fused.Float32s()); diff != "" {
		t.Errorf("fused differs from unfused:\n%s", diff)
	}
}

// f16 and bf16 compute in f32 and round the result once.
func TestHalfPrecision(t *testing.T) {
	d := New()
	r := newRand(5)
	for _, dt := range []ir.DType{ir.F16, ir.BF16} {
		a, b := randF32(r, 3, 4).Convert(dt), randF32(r, 4).Convert(dt)
		got := launch(t, d, ir.OpMul, nil, a, b)
		want := launch(t, d, ir.OpMul, nil, a.Convert(ir.F32), b.Convert(ir.F32)).Convert(dt)
		if got.DType != dt {
			t.Fatalf("mul on %s gave %s", dt, got.DType)
		}
		approx(t, "mul "+dt.String(), f64s(want), f64s(got), 0, 0)
		x, w := randF32(r, 3, 8).Convert(dt), randF32(r, 5, 8).Convert(dt)
		mm := launch(t, d, ir.OpMatmul, ir.Attrs{"transpose_b": ir.BoolAttr(true)}, x, w)
		mw := launch(t, d, ir.OpMatmul, ir.Attrs{"transpose_b": ir.BoolAttr(true)}, x.Convert(ir.F32), w.Convert(ir.F32)).Convert(dt)
		approx(t, "matmul "+dt.String(), f64s(mw), f64s(mm), 0, 0)
		am := launch(t, d, ir.OpArgmax, nil, x)
		if am.DType != ir.I32 {
			t.Errorf("argmax on %s gave %s", dt, am.DType)
		}
	}
}
