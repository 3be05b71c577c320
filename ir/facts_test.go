package ir

import (
	"slices"
	"strings"
	"testing"
)

// Every op declares every fact, so that no caller meets an undeclared one.
func TestEveryOpDeclaresItsFacts(t *testing.T) {
	for _, d := range Ops() {
		if m := d.missingFacts(); len(m) > 0 {
			t.Errorf("op %s does not declare %s (see ir.Facts)", d.Name, strings.Join(m, ", "))
		}
	}
	want := []string{"Effects", "InPlace", "Routing", "Compute", "Numerics", "ChainLength", "Transcendentals", "SumLength", "Cost", "Storage"}
	if got := (&OpDef{}).missingFacts(); !slices.Equal(got, want) {
		t.Errorf("a row without facts misses %v, want %v", got, want)
	}
}

// The facts that used to live beside their callers, op by op.
func TestFactsOfOps(t *testing.T) {
	// how many leading inputs each op updates in place
	inPlace := map[Op]int{OpKVWrite: 1, OpCausalConv1D: 1, OpWKV: 1, OpSelectiveScan: 1, OpRopeKVWrite: 2}
	sideEffects := []Op{OpProbe}
	for op := range inPlace {
		sideEffects = append(sideEffects, op)
	}
	f32Compute := []Op{OpMatmul, OpRMSNorm, OpRMSNormMatmul, OpRMSNormSwiGLU, OpRMSNormQKV, OpLayerNorm, OpSoftmax, OpArgmax, OpRope, OpRopeKVWrite, OpAttention, OpFusedElementwise,
		OpConv2D, OpConvTranspose2D, OpPool2D, OpResize, OpReduceSum, OpReduceMean, OpReduceMax,
		OpTopK, OpExpertMatmul, OpCausalConv1D, OpWKV, OpSelectiveScan}
	f32Compute = append(append(f32Compute, UnaryOps...), BinaryOps...)
	intCompute := []Op{OpArgmax}
	transcendental := []Op{OpSoftmax, OpAttention, OpRope, OpRopeKVWrite, OpSelectiveScan, OpRMSNormSwiGLU}
	// The unary and binary ops' facts follow from their rows.
	for op, e := range elementwise {
		if e.ints {
			intCompute = append(intCompute, op)
		}
		if e.transcendental {
			transcendental = append(transcendental, op)
		}
	}
	for _, d := range Ops() {
		if got := d.Effects == SideEffects; got != slices.Contains(sideEffects, d.Op) {
			t.Errorf("%s: side effects %v", d.Name, got)
		}
		if got := d.InPlace.Count(); got != inPlace[d.Op] {
			t.Errorf("%s: updates %d inputs in place, want %d", d.Name, got, inPlace[d.Op])
		}
		if got := d.Compute != ComputeStored; got != slices.Contains(f32Compute, d.Op) {
			t.Errorf("%s: computes in f32: %v", d.Name, got)
		}
		if got := d.Compute == ComputeF32OrInt; got != slices.Contains(intCompute, d.Op) {
			t.Errorf("%s: computes on integers: %v", d.Name, got)
		}
		if r, ok := d.Routing.Input(); ok != (d.Op == OpExpertMatmul) || ok && r != 2 {
			t.Errorf("%s: routed by input %d: %v", d.Name, r, ok)
		}
		if got := d.Transcendentals.Of(Call{}); d.Op == OpWKV { // four exponentials per row
			if got != 4 {
				t.Errorf("%s: %d transcendentals", d.Name, got)
			}
		} else if got != 0 && d.Op != OpFusedElementwise && !slices.Contains(transcendental, d.Op) ||
			got != 1 && slices.Contains(transcendental, d.Op) {
			t.Errorf("%s: %d transcendentals", d.Name, got)
		}
	}
}

func TestCallDependentFacts(t *testing.T) {
	expr := func(s string) Attrs { return Attrs{"expr": StringAttr(s)} }
	mode := func(m string) Attrs { return Attrs{"mode": StringAttr(m), "kernel": IntsAttr(2, 2)} }
	for _, tc := range []struct {
		op                     Op
		attrs                  Attrs
		numerics               Numerics
		chain, transcendentals int
	}{
		{OpAdd, nil, Chain, 1, 0},
		{OpGelu, nil, Chain, 1, 1},
		{OpFusedElementwise, expr("mul(silu($0), exp(add($1, 2)))"), Chain, 4, 2},
		{OpFusedElementwise, expr("not an expression"), Chain, 1, 0},
		{OpCast, Attrs{"to": DTypeAttr(F16)}, OneRounding, 1, 0},
		{OpRope, nil, Angle, 1, 1},
		{OpSoftmax, nil, Sum, 0, 1},
		{OpArgmax, nil, Exact, 0, 0},
		{OpReduceMax, nil, Selects, 0, 0},
		{OpPool2D, mode("max"), Selects, 0, 0},
		{OpPool2D, mode("avg"), Sum, 0, 0},
		{OpResize, mode("nearest"), Exact, 0, 0},
		{OpResize, mode("linear"), Coordinate, 0, 0},
		{OpKVWrite, nil, Exact, 0, 0},
		{OpTopK, nil, Selects, 0, 0},
		{OpExpertMatmul, nil, Sum, 0, 0},
		{OpTokenShift, nil, Exact, 0, 0},
		{OpCausalConv1D, nil, Sum, 0, 0},
		{OpWKV, nil, Sum, 0, 4},
		{OpSelectiveScan, nil, Sum, 0, 1},
	} {
		d, c := LookupOp(tc.op), Call{In: []Type{f32(4)}, Attrs: tc.attrs}
		if got := d.Numerics.Of(c); got != tc.numerics {
			t.Errorf("%s %v: numerics %s, want %s", tc.op, tc.attrs, got, tc.numerics)
		}
		if got := d.ChainLength.Of(c); got != tc.chain {
			t.Errorf("%s %v: chain of %d, want %d", tc.op, tc.attrs, got, tc.chain)
		}
		if got := d.Transcendentals.Of(c); got != tc.transcendentals {
			t.Errorf("%s %v: %d transcendentals, want %d", tc.op, tc.attrs, got, tc.transcendentals)
		}
	}
}

func TestSumLength(t *testing.T) {
	for _, tc := range []struct {
		op    Op
		attrs Attrs
		in    []Type
		pos   int
		want  int
	}{
		{OpMatmul, nil, []Type{f32(5, 7), f32(7, 3)}, 0, 7},
		{OpRMSNorm, nil, []Type{f32(5, 64), f32(64)}, 0, 64},
		{OpSoftmax, Attrs{"axis": IntAttr(-1)}, []Type{f32(2, 9)}, 0, 9},
		{OpSoftmax, Attrs{"axis": IntAttr(0)}, []Type{f32(2, 9)}, 0, 2},
		{OpSoftmax, Attrs{"axis": IntAttr(0)}, []Type{T(F32, Shape{Sym("seq"), D(9)})}, 0, 1},
		{OpAttention, nil, []Type{f32(1, 8, 16), f32(64, 8, 16), f32(64, 8, 16), T(I32, nil)}, 20, 16 + 20 + 1},
		{OpAdd, nil, []Type{f32(4), f32(4)}, 0, 1},
		{OpConv2D, Attrs{"groups": IntAttr(1)}, []Type{f32(1, 32, 8, 8), f32(16, 32, 3, 3), f32(16)}, 0, 32 * 9},
		{OpConv2D, Attrs{"groups": IntAttr(32)}, []Type{f32(1, 32, 8, 8), f32(32, 1, 5, 5)}, 0, 25},
		{OpConvTranspose2D, Attrs{"groups": IntAttr(1), "strides": IntsAttr(2, 2), "dilations": IntsAttr(1, 1)},
			[]Type{f32(1, 64, 8, 8), f32(64, 16, 2, 2)}, 0, 64},
		{OpConvTranspose2D, Attrs{"groups": IntAttr(2), "strides": IntsAttr(2, 2), "dilations": IntsAttr(1, 1)},
			[]Type{f32(1, 8, 8, 8), f32(8, 4, 3, 3)}, 0, 4 * 2 * 2},
		{OpConvTranspose2D, Attrs{"groups": IntAttr(1), "strides": IntsAttr(1, 1), "dilations": IntsAttr(1, 1)},
			[]Type{f32(1, 4, 8, 8), f32(4, 4, 3, 3)}, 0, 36},
		{OpPool2D, Attrs{"mode": StringAttr("avg"), "kernel": IntsAttr(3, 2)}, []Type{f32(1, 4, 8, 8)}, 0, 6},
		{OpPool2D, Attrs{"mode": StringAttr("max"), "kernel": IntsAttr(3, 3)}, []Type{f32(1, 4, 8, 8)}, 0, 1},
		{OpReduceSum, Attrs{"axes": IntsAttr(-1, 1)}, []Type{f32(2, 3, 4, 5)}, 0, 15},
		{OpReduceMean, Attrs{"axes": IntsAttr(2, 3)}, []Type{f32(1, 8, 6, 7)}, 0, 42},
		{OpReduceMax, Attrs{"axes": IntsAttr(1)}, []Type{f32(2, 9)}, 0, 1},
		{OpResize, Attrs{"mode": StringAttr("linear")}, []Type{f32(1, 3, 8, 8)}, 0, 4},
		{OpResize, Attrs{"mode": StringAttr("nearest")}, []Type{f32(1, 3, 8, 8)}, 0, 1},
		{OpIota, nil, []Type{T(I32, nil)}, 0, 1},
	} {
		c := Call{In: tc.in, Attrs: tc.attrs, Pos: tc.pos}
		if got := LookupOp(tc.op).SumLength.Of(c); got != tc.want {
			t.Errorf("%s %v: K = %d, want %d", tc.op, tc.in, got, tc.want)
		}
	}
}

func TestCost(t *testing.T) {
	for _, tc := range []struct {
		op      Op
		attrs   Attrs
		in, out []Type
		want    int64
	}{
		{OpAdd, nil, []Type{f32(3, 4), f32(4)}, []Type{f32(3, 4)}, 12 + 4 + 12},
		{OpSqrt, nil, []Type{f32(10)}, []Type{f32(10)}, 20},
		{OpExp, nil, []Type{f32(10)}, []Type{f32(10)}, 16 * 20},
		{OpMatmul, nil, []Type{f32(5, 7), f32(7, 3)}, []Type{f32(5, 3)}, 15 * 7},
		{OpMatmul, nil, []Type{f32(5, 7), f32(7, 3), f32(5, 3)}, []Type{f32(5, 3)}, 15 * 7}, // with the addend c
		{OpRMSNormMatmul, nil, []Type{f32(2, 7), f32(7), f32(3, 7)}, []Type{f32(2, 3)}, 6*7 + 2*14},
		{OpRMSNormSwiGLU, nil, []Type{f32(2, 7), f32(7), f32(3, 7), f32(3, 7)}, []Type{f32(2, 3)}, 2*6*7 + 2*14 + 16*6},
		{OpAttention, nil, []Type{f32(2, 4, 8), f32(32, 2, 8), f32(32, 2, 8), T(I32, nil)}, []Type{f32(2, 4, 8)}, 2 * 64 * 32},
		{OpConv2D, nil, []Type{f32(1, 3, 8, 8), f32(16, 3, 3, 3)}, []Type{f32(1, 16, 6, 6)}, 16 * 36 * 27},
		{OpConvTranspose2D, nil, []Type{f32(1, 8, 5, 5), f32(8, 4, 2, 2)}, []Type{f32(1, 4, 10, 10)}, 200 * 16},
		{OpPool2D, Attrs{"kernel": IntsAttr(3, 2)}, []Type{f32(1, 2, 8, 8)}, []Type{f32(1, 2, 6, 7)}, 84 * 6},
		{OpReshape, nil, []Type{f32(2, 6)}, []Type{f32(3, 4)}, 24},
	} {
		c := Call{In: tc.in, Out: tc.out, Attrs: tc.attrs}
		if got := LookupOp(tc.op).Cost.Of(c); got != tc.want {
			t.Errorf("%s: cost %d, want %d", tc.op, got, tc.want)
		}
	}
}

// f32 is the f32 tensor type of the given static shape.
func f32(s ...int64) Type { return T(F32, S(s...)) }
