package carve

import (
	"math"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/tapml/tapml/ir"
	"github.com/tapml/tapml/tensor"
)

// filled returns an f32 tensor whose largest magnitude is scale.
func filled(shape []int, scale float32) *tensor.Tensor {
	t := tensor.New(ir.F32, shape)
	v := t.Float32s()
	for i := range v {
		v[i] = scale * float32(i%5) / 4
	}
	if len(v) > 0 {
		v[len(v)-1] = -scale
	}
	return t
}

func TestPolicyFormulas(t *testing.T) {
	p := DefaultPolicy()
	eps := 0x1p-23
	attrs := func(op ir.Op, a ir.Attrs) ir.Attrs {
		na, err := ir.LookupOp(op).NormalizeAttrs(a)
		if err != nil {
			t.Fatal(err)
		}
		return na
	}
	f32 := func(shape ...int) *tensor.Tensor { return filled(shape, 1) }
	tests := []struct {
		name      string
		op        ir.Op
		attrs     ir.Attrs
		in        []*tensor.Tensor
		outScale  float32
		outShape  []int
		outDType  ir.DType
		rtol      float64
		atol      float64
		ruleParts []string
	}{
		{"matmul K=64", ir.OpMatmul, ir.Attrs{"transpose_b": ir.BoolAttr(true)}, []*tensor.Tensor{f32(3, 64), f32(16, 64)}, 2, []int{3, 16}, ir.F32,
			8 * 8 * eps, 8 * 8 * eps * 2, []string{"contraction", "K=64"}},
		{"matmul K=32000", ir.OpMatmul, nil, []*tensor.Tensor{f32(1, 32000), f32(32000, 2)}, 1, []int{1, 2}, ir.F32,
			8 * math.Sqrt(32000) * eps, 8 * math.Sqrt(32000) * eps, []string{"K=32000"}},
		{"rms_norm D=288", ir.OpRMSNorm, nil, []*tensor.Tensor{f32(2, 288), f32(288)}, 4, []int{2, 288}, ir.F32,
			8 * math.Sqrt(288) * eps, 8 * math.Sqrt(288) * eps * 4, []string{"reduction", "K=288"}},
		{"softmax axis 0", ir.OpSoftmax, ir.Attrs{"axis": ir.IntAttr(0)}, []*tensor.Tensor{f32(10, 3)}, 1, []int{10, 3}, ir.F32,
			(8*math.Sqrt(10) + 16) * eps, (8*math.Sqrt(10) + 16) * eps, []string{"K=10", "exp"}},
		{"attention Dh=8 pos=5 S=2", ir.OpAttention, ir.Attrs{"scale": ir.FloatAttr(0.35)},
			[]*tensor.Tensor{f32(2, 4, 8), f32(32, 2, 8), f32(32, 2, 8), tensor.ScalarInt32(5)}, 1, []int{2, 4, 8}, ir.F32,
			(8*math.Sqrt(8+5+2) + 16) * eps, (8*math.Sqrt(8+5+2) + 16) * eps, []string{"K=15"}},
		{"add", ir.OpAdd, nil, []*tensor.Tensor{f32(4), f32(4)}, 3, []int{4}, ir.F32, 4 * eps, 4 * eps * 3, []string{"elementwise", "1 ops"}},
		{"silu", ir.OpSilu, nil, []*tensor.Tensor{f32(4)}, 1, []int{4}, ir.F32, (4 + 16) * eps, (4 + 16) * eps, []string{"1 transcendental"}},
		{"fused mul(silu($0), $1)", ir.OpFusedElementwise, ir.Attrs{"expr": ir.StringAttr("mul(silu($0), $1)")},
			[]*tensor.Tensor{f32(4), f32(4)}, 1, []int{4}, ir.F32, (4*2 + 16) * eps, (4*2 + 16) * eps, []string{"2 ops (1 transcendental)"}},
		{"rope at pos 100, 3 rows", ir.OpRope, nil, []*tensor.Tensor{f32(3, 2, 8), tensor.ScalarInt32(100)}, 1, []int{3, 2, 8}, ir.F32,
			(4 + 16) * eps, (4 + 102) * eps, []string{"positions <= 102"}},
		{"f16 matmul", ir.OpMatmul, nil, []*tensor.Tensor{f32(1, 16).Convert(ir.F16), f32(16, 1).Convert(ir.F16)}, 1, []int{1, 1}, ir.F16,
			8 * 4 * 0x1p-10, 8 * 4 * 0x1p-10, nil},
		{"cast to f16", ir.OpCast, ir.Attrs{"to": ir.DTypeAttr(ir.F16)}, []*tensor.Tensor{f32(4)}, 1, []int{4}, ir.F16, 0x1p-10, 0, nil},
		{"gather is exact", ir.OpGather, nil, []*tensor.Tensor{f32(8, 4), tensor.FromInt32([]int{2}, []int32{1, 2})}, 1, []int{2, 4}, ir.F32, 0, 0, []string{"exact"}},
		{"kv_write is exact", ir.OpKVWrite, nil, []*tensor.Tensor{f32(8, 1, 2), f32(1, 1, 2), tensor.ScalarInt32(0)}, 1, []int{8, 1, 2}, ir.F32, 0, 0, []string{"exact"}},
		{"argmax is exact", ir.OpArgmax, nil, []*tensor.Tensor{f32(4, 8)}, 0, []int{4}, ir.I32, 0, 0, []string{"exact"}},
		{"conv2d C=32 3x3", ir.OpConv2D, nil, []*tensor.Tensor{f32(1, 32, 4, 4), f32(8, 32, 3, 3)}, 2, []int{1, 8, 2, 2}, ir.F32,
			8 * math.Sqrt(288) * eps, 8 * math.Sqrt(288) * eps * 2, []string{"contraction", "K=288"}},
		{"avg pool 2x2", ir.OpPool2D, ir.Attrs{"mode": ir.StringAttr("avg"), "kernel": ir.IntsAttr(2, 2)}, []*tensor.Tensor{f32(1, 2, 4, 4)}, 1, []int{1, 2, 3, 3}, ir.F32,
			8 * 2 * eps, 8 * 2 * eps, []string{"reduction", "K=4"}},
		{"max pool is exact", ir.OpPool2D, ir.Attrs{"kernel": ir.IntsAttr(2, 2)}, []*tensor.Tensor{f32(1, 2, 4, 4)}, 1, []int{1, 2, 3, 3}, ir.F32, 0, 0, []string{"exact"}},
		{"reduce_mean over 2x8", ir.OpReduceMean, ir.Attrs{"axes": ir.IntsAttr(0, 1)}, []*tensor.Tensor{f32(2, 8, 3)}, 1, []int{1, 1, 3}, ir.F32,
			8 * 4 * eps, 8 * 4 * eps, []string{"K=16"}},
		{"reduce_max is exact", ir.OpReduceMax, ir.Attrs{"axes": ir.IntsAttr(1)}, []*tensor.Tensor{f32(2, 8)}, 1, []int{2, 1}, ir.F32, 0, 0, []string{"exact"}},
		{"linear resize", ir.OpResize, ir.Attrs{"mode": ir.StringAttr("linear"), "size": ir.IntsAttr(16, 40)}, []*tensor.Tensor{f32(1, 1, 8, 20)}, 1, []int{1, 1, 16, 40}, ir.F32,
			16 * eps, (16 + 40) * eps, []string{"K=4", "axes <= 20"}},
		{"nearest resize is exact", ir.OpResize, ir.Attrs{"size": ir.IntsAttr(16, 40)}, []*tensor.Tensor{f32(1, 1, 8, 20)}, 1, []int{1, 1, 16, 40}, ir.F32, 0, 0, []string{"exact"}},
		{"i32 add is exact", ir.OpAdd, nil, []*tensor.Tensor{tensor.FromInt32([]int{1}, []int32{1}), tensor.FromInt32([]int{1}, []int32{1})}, 0, []int{1}, ir.I32, 0, 0, []string{"exact"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out := filled(tc.outShape, tc.outScale)
			if tc.outDType != ir.F32 {
				out = out.Convert(tc.outDType)
			}
			got := p.For(tc.op, attrs(tc.op, tc.attrs), tc.in, []*tensor.Tensor{out})
			want := Tolerance{ATol: tc.atol, RTol: tc.rtol}
			if diff := cmp.Diff(want, got, cmpopts.IgnoreFields(Tolerance{}, "Rule"), cmpopts.EquateApprox(1e-12, 0)); diff != "" {
				t.Errorf("tolerance (-want +got):\n%s\nrule: %s", diff, got.Rule)
			}
			for _, part := range tc.ruleParts {
				if !strings.Contains(got.Rule, part) {
					t.Errorf("rule %q does not mention %q", got.Rule, part)
				}
			}
		})
	}
}

// TestPolicyF16Compute checks the f16 compute rule: the f32 rule plus one
// f16 ulp (2u, u = 2^-11) relative and 2u·S absolute; exact ops stay
// exact, and f32 compute is For's.
func TestPolicyF16Compute(t *testing.T) {
	p := DefaultPolicy()
	const eps, u = 0x1p-23, 0x1p-11
	mm := func() (ir.Attrs, []*tensor.Tensor) {
		a, _ := ir.LookupOp(ir.OpMatmul).NormalizeAttrs(ir.Attrs{"transpose_b": ir.BoolAttr(true)})
		return a, []*tensor.Tensor{filled([]int{3, 64}, 1), filled([]int{16, 64}, 1)}
	}
	attrs, in := mm()
	out := []*tensor.Tensor{filled([]int{3, 16}, 2)}
	tests := []struct {
		name       string
		op         ir.Op
		in         []*tensor.Tensor
		attrs      ir.Attrs
		compute    ir.DType
		rtol, atol float64
	}{
		{"matmul K=64, f16", ir.OpMatmul, in, attrs, ir.F16, 8*8*eps + 2*u, (8*8*eps + 2*u) * 2},
		{"matmul K=64, f32", ir.OpMatmul, in, attrs, ir.F32, 8 * 8 * eps, 8 * 8 * eps * 2},
		{"reshape stays exact", ir.OpReshape, []*tensor.Tensor{filled([]int{48}, 2)}, ir.Attrs{"shape": ir.IntsAttr(3, 16)}, ir.F16, 0, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := p.ForCompute(tc.op, tc.attrs, tc.in, out, tc.compute)
			want := Tolerance{ATol: tc.atol, RTol: tc.rtol}
			if diff := cmp.Diff(want, got, cmpopts.IgnoreFields(Tolerance{}, "Rule"), cmpopts.EquateApprox(1e-12, 0)); diff != "" {
				t.Errorf("tolerance (-want +got):\n%s\nrule: %s", diff, got.Rule)
			}
			if tc.compute == ir.F16 && tc.rtol > 0 && !strings.Contains(got.Rule, "f16 compute: + one f16 ulp") {
				t.Errorf("rule %q does not state the f16 term", got.Rule)
			}
		})
	}
}

func TestEps(t *testing.T) {
	if Eps(ir.F32) != float64(math.Nextafter32(1, 2)-1) || Eps(ir.F16) != 1.0/1024 || Eps(ir.BF16) != 1.0/128 || Eps(ir.I32) != 0 {
		t.Error("Eps")
	}
}
