package carve

import (
	"math"
	"strings"
	"testing"

	"github.com/tapml/tapml/ir"
	"github.com/tapml/tapml/tensor"
)

func TestAttrsRoundTrip(t *testing.T) {
	tests := []struct {
		op    ir.Op
		attrs ir.Attrs
	}{
		{ir.OpMatmul, ir.Attrs{"transpose_b": ir.BoolAttr(true)}},
		{ir.OpRMSNorm, ir.Attrs{"eps": ir.FloatAttr(1e-5)}},
		{ir.OpRope, ir.Attrs{"theta": ir.FloatAttr(500000), "style": ir.StringAttr("half"), "dims": ir.IntAttr(64)}},
		{ir.OpAttention, ir.Attrs{"scale": ir.FloatAttr(1 / math.Sqrt(48)), "causal": ir.BoolAttr(false)}},
		{ir.OpReshape, ir.Attrs{"shape": ir.ShapeAttr(ir.S(1, 8, 8))}},
		{ir.OpReshape, ir.Attrs{"shape": ir.ShapeAttr(ir.Shape{ir.Sym("seq"), ir.D(-1)})}},
		{ir.OpTranspose, ir.Attrs{"perm": ir.IntsAttr(2, 0, 1)}},
		{ir.OpConstant, ir.Attrs{"dtype": ir.DTypeAttr(ir.I32), "shape": ir.ShapeAttr(ir.S(3)), "value": ir.FloatsAttr(0.1, math.Inf(-1), math.NaN())}},
		{ir.OpConstant, ir.Attrs{"shape": ir.ShapeAttr(ir.Shape{}), "value": ir.FloatsAttr(-0.0)}},
		{ir.OpSlice, ir.Attrs{"axis": ir.IntAttr(-1), "start": ir.IntAttr(-3), "end": ir.IntAttr(math.MaxInt64)}},
		{ir.OpFusedElementwise, ir.Attrs{"expr": ir.StringAttr(`mul(silu($0), $1)`)}},
		{ir.OpProbe, ir.Attrs{"tag": ir.StringAttr(`with "quotes", [brackets] and: colons`)}},
	}
	for _, tc := range tests {
		want, err := ir.LookupOp(tc.op).NormalizeAttrs(tc.attrs)
		if err != nil {
			t.Fatal(err)
		}
		got, err := DecodeAttrs(tc.op.String(), EncodeAttrs(want))
		if err != nil {
			t.Errorf("%s %v: %v", tc.op, EncodeAttrs(want), err)
			continue
		}
		if !got.Equal(want) {
			t.Errorf("%s: %v read back as %v", tc.op, want, got)
		}
	}
}

func TestDecodeAttrsErrors(t *testing.T) {
	for _, tc := range []struct {
		op   string
		text map[string]string
		want string
	}{
		{"nope", nil, `unknown op "nope"`},
		{"matmul", map[string]string{"transpose": "true"}, `op matmul has no attribute "transpose"`},
		{"matmul", map[string]string{"transpose_b": "ja"}, "not a valid bool"},
		{"rms_norm", map[string]string{"eps": "small"}, "not a valid float"},
		{"transpose", map[string]string{"perm": "1, 0"}, "a list must be written [a, b, ...]"},
		{"transpose", map[string]string{"perm": "[1,,0]"}, "empty list item"},
		{"reshape", map[string]string{"shape": "[2, 3x]"}, "neither a size nor a symbol"},
		{"cast", map[string]string{"to": "f31"}, "not a valid dtype"},
		{"attention", map[string]string{}, `missing required attribute "scale"`},
	} {
		_, err := DecodeAttrs(tc.op, tc.text)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s %v: error %v, want %q", tc.op, tc.text, err, tc.want)
		}
	}
}

func TestFingerprint(t *testing.T) {
	f := func(v ...float32) *tensor.Tensor { return tensor.FromFloat32([]int{len(v)}, v) }
	for _, tc := range []struct {
		t    *tensor.Tensor
		want string
	}{
		{f(0.75, -3, 1), "e2z0"},
		{f(0, 0, 0), "0z4"},
		{f(0, 0, 0, 1e-3), "e-9z3"},
		{f(0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1), "e1z1"},
		{f(0, 1, 1), "e1z2"},
		{f(float32(math.NaN()), 2), "e2z0nan"},
		{f(float32(math.Inf(-1)), 0), "0z2inf"},
		{tensor.ScalarInt32(0), "0z4"},
		{tensor.ScalarInt32(1), "e1z0"},
		{tensor.ScalarInt32(5), "e3z0"},
		{tensor.ScalarInt32(7), "e3z0"},
		{tensor.ScalarInt32(8), "e4z0"},
		{tensor.New(ir.F32, []int{0}), "0z0"},
	} {
		if got := FingerprintOf(tc.t).String(); got != tc.want {
			t.Errorf("%v: fingerprint %s, want %s", tc.t, got, tc.want)
		}
	}
}

func TestContentKey(t *testing.T) {
	a := tensor.FromFloat32([]int{2}, []float32{1, 2})
	b := tensor.FromFloat32([]int{2}, []float32{1.5, 3})  // same fingerprint as a
	c := tensor.FromFloat32([]int{2}, []float32{100, 2})  // another magnitude
	d := tensor.FromFloat32([]int{1, 2}, []float32{1, 2}) // another shape
	attrs := ir.Attrs{"transpose_b": ir.BoolAttr(true)}
	key := func(op string, at ir.Attrs, ts ...*tensor.Tensor) string {
		return ContentKey(op, at, ts[:len(ts)-1], ts[len(ts)-1:], FingerprintOf)
	}
	if key("add", nil, a, a, a) != key("add", nil, b, b, b) {
		t.Error("values of the same nature get different keys")
	}
	for _, other := range []string{key("add", nil, c, a, a), key("add", nil, d, a, a), key("sub", nil, a, a, a), key("matmul", attrs, a, a, a),
		key("add", nil, a.Convert(ir.F16), a, a)} {
		if other == key("add", nil, a, a, a) {
			t.Errorf("key %s does not tell calls apart", other)
		}
	}
	if want := "matmul{transpose_b=true}(f32[2]:e2z0 f32[2]:e2z0)->(f32[2]:e2z0)"; key("matmul", attrs, a, a, a) != want {
		t.Errorf("key %s, want %s", key("matmul", attrs, a, a, a), want)
	}
	// expert_matmul calls that read other experts' weights are other cases;
	// the order of a token's experts is not.
	x, w, out := tensor.FromFloat32([]int{1, 2}, []float32{1, 2}), tensor.New(ir.F32, []int{4, 3, 2}), tensor.New(ir.F32, []int{1, 2, 3})
	ids := func(e ...int32) *tensor.Tensor { return tensor.FromInt32([]int{1, 2}, e) }
	k01, k10, k23 := key("expert_matmul", nil, x, w, ids(0, 1), out), key("expert_matmul", nil, x, w, ids(1, 0), out), key("expert_matmul", nil, x, w, ids(2, 3), out)
	if k01 == k23 || k01 != k10 || !strings.HasSuffix(k01, " routed[0 1]") {
		t.Errorf("routed keys: %s, %s, %s", k01, k10, k23)
	}
}
