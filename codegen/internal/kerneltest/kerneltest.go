// Package kerneltest holds what the tests of the kernel generators
// (codegen/wgsl, codegen/wgslfront, codegen/msl, codegen/spirv) share: generator cases, at least one per op
// of the registry and per kernel variant, and checks of a generated
// kernel's bindings and of golden files.
package kerneltest

import (
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/tapml/tapml/codegen"
	"github.com/tapml/tapml/ir"
)

// Case is a node to generate a kernel for: an op, its attributes and its
// input types.
type Case struct {
	Name  string
	Op    ir.Op
	Attrs ir.Attrs
	In    []ir.Type
}

// F32 and I32 are tensor types of the given sizes.
func F32(s ...int64) ir.Type { return ir.T(ir.F32, ir.S(s...)) }
func I32(s ...int64) ir.Type { return ir.T(ir.I32, ir.S(s...)) }

// Node is the case's node (ID 7), its attributes completed by the op's
// type inference.
func (c Case) Node(t testing.TB) *ir.Node {
	t.Helper()
	_, na, err := ir.InferTypes(c.Op, c.In, c.Attrs)
	if err != nil {
		t.Fatalf("%s: %v", c.Name, err)
	}
	return &ir.Node{ID: 7, Op: c.Op, Attrs: na}
}

// Cases has at least one case per op of the registry, one per kernel
// variant (GEMV with and without transpose, vec4 or not, the tiled
// matmuls) and more shapes of every op (broadcasts, axes, i32 tensors,
// empty and scalar tensors).
func Cases() []Case {
	var cs []Case
	for _, op := range ir.UnaryOps {
		cs = append(cs, Case{op.String(), op, nil, []ir.Type{F32(7, 33)}})
	}
	for _, op := range ir.BinaryOps {
		cs = append(cs, Case{op.String(), op, nil, []ir.Type{F32(5, 1, 7), F32(3, 7)}})
	}
	for _, op := range []ir.Op{ir.OpNeg, ir.OpAbs, ir.OpRelu} {
		cs = append(cs, Case{op.String() + "_i32", op, nil, []ir.Type{I32(4, 3)}})
	}
	for _, op := range []ir.Op{ir.OpAdd, ir.OpSub, ir.OpMul, ir.OpDiv, ir.OpMaximum, ir.OpMinimum} {
		cs = append(cs, Case{op.String() + "_i32", op, nil, []ir.Type{I32(4, 3), I32(3)}})
	}
	cs = append(cs, StoredCases()...)
	pos := I32()
	tr := ir.Attrs{"transpose_b": ir.BoolAttr(true)}
	ints := ir.IntsAttr
	return append(cs,
		Case{"exp_scalar", ir.OpExp, nil, []ir.Type{F32()}},
		Case{"add_empty", ir.OpAdd, nil, []ir.Type{F32(0, 3), F32(3)}},
		Case{"mul_scalar_bcast", ir.OpMul, nil, []ir.Type{F32(2, 3, 4), F32()}},
		Case{"fused", ir.OpFusedElementwise, ir.Attrs{"expr": ir.StringAttr("mul(silu($0), add($1, 2.5))")}, []ir.Type{F32(3, 172), F32(172)}},
		Case{"fused_all", ir.OpFusedElementwise, ir.Attrs{"expr": ir.StringAttr(
			"add(pow(gelu($0), -1.5), minimum(maximum(tanh($1), rsqrt(abs($2))), div(sigmoid(neg($0)), sub(exp(log(sqrt($1))), relu($2)))))")},
			[]ir.Type{F32(2, 1, 5), F32(3, 5), F32(2, 3, 1)}},
		Case{"fused_consts", ir.OpFusedElementwise, ir.Attrs{"expr": ir.StringAttr("add(mul($0, inf), add(nan, -0))")}, []ir.Type{F32(4)}},
		Case{"constant", ir.OpConstant, ir.Attrs{"shape": ir.ShapeAttr(ir.S(2, 2)), "value": ir.FloatsAttr(1, 2, 3, 4)}, nil},
		Case{"constant_splat", ir.OpConstant, ir.Attrs{"shape": ir.ShapeAttr(ir.S(3)), "value": ir.FloatsAttr(-2.5)}, nil},
		Case{"constant_i32", ir.OpConstant, ir.Attrs{"dtype": ir.DTypeAttr(ir.I32), "shape": ir.ShapeAttr(ir.S(3)), "value": ir.FloatsAttr(-2147483648, 0, 7)}, nil},
		Case{"cast", ir.OpCast, ir.Attrs{"to": ir.DTypeAttr(ir.I32)}, []ir.Type{F32(10)}},
		Case{"cast_to_f32", ir.OpCast, ir.Attrs{"to": ir.DTypeAttr(ir.F32)}, []ir.Type{I32(10)}},
		Case{"cast_same", ir.OpCast, ir.Attrs{"to": ir.DTypeAttr(ir.F32)}, []ir.Type{F32(10)}},
		Case{"gather", ir.OpGather, nil, []ir.Type{F32(32000, 288), I32(1)}},
		Case{"gather_axis1_i32", ir.OpGather, ir.Attrs{"axis": ir.IntAttr(1)}, []ir.Type{I32(3, 9, 4), I32(2, 5)}},
		Case{"gemv_t", ir.OpMatmul, tr, []ir.Type{F32(1, 288), F32(32000, 288)}},
		Case{"gemv_t_scalar", ir.OpMatmul, tr, []ir.Type{F32(1, 37), F32(20, 37)}},
		Case{"gemv_t_batch", ir.OpMatmul, tr, []ir.Type{F32(3, 1, 1, 64), F32(2, 10, 64)}},
		Case{"gemv_n", ir.OpMatmul, nil, []ir.Type{F32(1, 37), F32(37, 20)}},
		Case{"gemv_n_scalar", ir.OpMatmul, nil, []ir.Type{F32(1, 37), F32(37, 21)}},
		Case{"tiled", ir.OpMatmul, tr, []ir.Type{F32(2, 67, 45), F32(33, 45)}},
		Case{"tiled_small_m", ir.OpMatmul, nil, []ir.Type{F32(5, 64), F32(64, 172)}},
		Case{"tiled_batch", ir.OpMatmul, nil, []ir.Type{F32(2, 1, 40, 8), F32(3, 8, 17)}},
		// Shapes the vec4 tiled kernels take when a tuning selects them.
		Case{"tiled_vec", ir.OpMatmul, nil, []ir.Type{F32(2, 64, 96), F32(96, 128)}},
		Case{"tiled_vec_t", ir.OpMatmul, tr, []ir.Type{F32(130, 64), F32(36, 64)}},
		// With the addend c (a residual add fused in): each kernel variant.
		Case{"gemv_t_addend", ir.OpMatmul, tr, []ir.Type{F32(1, 288), F32(320, 288), F32(1, 320)}},
		Case{"gemv_n_addend", ir.OpMatmul, nil, []ir.Type{F32(1, 37), F32(37, 20), F32(1, 20)}},
		Case{"tiled_addend", ir.OpMatmul, tr, []ir.Type{F32(2, 67, 45), F32(33, 45), F32(2, 67, 33)}},
		Case{"tiled_vec_addend", ir.OpMatmul, nil, []ir.Type{F32(2, 64, 96), F32(96, 128), F32(2, 64, 128)}},
		Case{"rms_norm", ir.OpRMSNorm, nil, []ir.Type{F32(5, 288), F32(288)}},
		Case{"rms_norm_small", ir.OpRMSNorm, nil, []ir.Type{F32(3), F32(3)}},
		Case{"rms_norm_matmul", ir.OpRMSNormMatmul, nil, []ir.Type{F32(1, 288), F32(288), F32(320, 288)}},
		Case{"rms_norm_matmul_rows", ir.OpRMSNormMatmul, nil, []ir.Type{F32(2, 3, 37), F32(37), F32(20, 37)}},
		Case{"rms_norm_swiglu", ir.OpRMSNormSwiGLU, nil, []ir.Type{F32(1, 288), F32(288), F32(320, 288), F32(320, 288)}},
		Case{"rms_norm_swiglu_rows", ir.OpRMSNormSwiGLU, nil, []ir.Type{F32(2, 3, 37), F32(37), F32(20, 37), F32(20, 37)}},
		Case{"rms_norm_qkv", ir.OpRMSNormQKV, nil, []ir.Type{F32(1, 288), F32(288), F32(288, 288), F32(96, 288), F32(96, 288)}},
		Case{"rms_norm_qkv_rows", ir.OpRMSNormQKV, nil, []ir.Type{F32(2, 3, 37), F32(37), F32(20, 37), F32(7, 37), F32(7, 37)}},
		Case{"layer_norm", ir.OpLayerNorm, nil, []ir.Type{F32(5, 288), F32(288), F32(288)}},
		Case{"layer_norm_no_bias", ir.OpLayerNorm, nil, []ir.Type{F32(3, 40), F32(40)}},
		Case{"softmax", ir.OpSoftmax, ir.Attrs{"axis": ir.IntAttr(1)}, []ir.Type{F32(6, 5, 7)}},
		Case{"softmax_last", ir.OpSoftmax, nil, []ir.Type{F32(2, 1000)}},
		Case{"argmax", ir.OpArgmax, nil, []ir.Type{F32(1, 32000)}},
		Case{"argmax_i32_axis0", ir.OpArgmax, ir.Attrs{"axis": ir.IntAttr(0)}, []ir.Type{I32(5, 3)}},
		Case{"rope", ir.OpRope, nil, []ir.Type{F32(9, 6, 48), pos}},
		Case{"rope_half_partial", ir.OpRope, ir.Attrs{"style": ir.StringAttr("half"), "dims": ir.IntAttr(16), "theta": ir.FloatAttr(500000)}, []ir.Type{F32(1, 4, 64), pos}},
		Case{"rope_freq_factors", ir.OpRope, ir.Attrs{"theta": ir.FloatAttr(500000), "freq_factors": ir.FloatsAttr(ropeFactors(32)...)}, []ir.Type{F32(3, 4, 64), pos}},
		Case{"rope_yarn", ir.OpRope, ir.Attrs{"style": ir.StringAttr("half"), "freq_factors": ir.FloatsAttr(1, 1.5, 3, 4), "attention_factor": ir.FloatAttr(1.14)}, []ir.Type{F32(2, 4, 8), pos}},
		Case{"rope_table", ir.OpRope, ir.Attrs{"style": ir.StringAttr("half"), "original_max": ir.IntAttr(16), "attention_factor": ir.FloatAttr(1.2)}, []ir.Type{F32(3, 4, 16), pos, F32(5, 8)}},
		Case{"kv_write", ir.OpKVWrite, nil, []ir.Type{F32(512, 4, 8), F32(1, 4, 8), pos}},
		// rope_kv_write (passes/ropekv.go): a decode step's shapes (grouped
		// heads), a partial half-style rotation by a freqs table, prefill-like rows.
		Case{"rope_kv_write", ir.OpRopeKVWrite, nil, []ir.Type{F32(512, 4, 64), F32(512, 4, 64), F32(1, 32, 64), F32(1, 4, 64), F32(1, 4, 64), pos}},
		Case{"rope_kv_write_table", ir.OpRopeKVWrite, ir.Attrs{"style": ir.StringAttr("half"), "dims": ir.IntAttr(8), "original_max": ir.IntAttr(16), "attention_factor": ir.FloatAttr(1.2)}, []ir.Type{F32(64, 2, 16), F32(64, 2, 16), F32(1, 4, 16), F32(1, 2, 16), F32(1, 2, 16), pos, F32(5, 4)}},
		Case{"rope_kv_write_rows", ir.OpRopeKVWrite, ir.Attrs{"theta": ir.FloatAttr(500000), "freq_factors": ir.FloatsAttr(ropeFactors(8)...)}, []ir.Type{F32(64, 2, 16), F32(64, 2, 16), F32(3, 6, 16), F32(3, 2, 16), F32(3, 2, 16), pos}},
		Case{"kv_write_prefill", ir.OpKVWrite, nil, []ir.Type{F32(64, 2, 16), F32(7, 2, 16), pos}},
		Case{"attention", ir.OpAttention, ir.Attrs{"scale": ir.FloatAttr(0.125)}, []ir.Type{F32(1, 8, 64), F32(512, 4, 64), F32(512, 4, 64), pos}},
		Case{"attention_softcap_window", ir.OpAttention, ir.Attrs{"scale": ir.FloatAttr(0.0625), "softcap": ir.FloatAttr(50), "window": ir.IntAttr(7)}, []ir.Type{F32(4, 4, 16), F32(64, 2, 16), F32(64, 2, 16), pos}},
		Case{"attention_prefill", ir.OpAttention, ir.Attrs{"scale": ir.FloatAttr(0.25), "causal": ir.BoolAttr(false)}, []ir.Type{F32(5, 2, 300), F32(4000, 1, 300), F32(4000, 1, 300), pos}},
		Case{"reshape", ir.OpReshape, ir.Attrs{"shape": ir.ShapeAttr(ir.S(4, -1))}, []ir.Type{F32(2, 3, 10)}},
		Case{"transpose", ir.OpTranspose, ir.Attrs{"perm": ir.IntsAttr(2, 0, 1)}, []ir.Type{F32(3, 5, 7)}},
		Case{"transpose_unit", ir.OpTranspose, ir.Attrs{"perm": ir.IntsAttr(1, 0)}, []ir.Type{I32(1, 7)}},
		Case{"slice", ir.OpSlice, ir.Attrs{"axis": ir.IntAttr(0), "start": ir.IntAttr(-1), "end": ir.IntAttr(math.MaxInt32)}, []ir.Type{F32(7, 288)}},
		Case{"slice_step", ir.OpSlice, ir.Attrs{"axis": ir.IntAttr(1), "start": ir.IntAttr(1), "end": ir.IntAttr(9), "step": ir.IntAttr(3)}, []ir.Type{F32(2, 10, 3)}},
		Case{"concat", ir.OpConcat, ir.Attrs{"axis": ir.IntAttr(0)}, []ir.Type{F32(2, 5), F32(3, 5)}},
		Case{"concat3", ir.OpConcat, ir.Attrs{"axis": ir.IntAttr(-1)}, []ir.Type{I32(2, 1), I32(2, 0), I32(2, 4)}},
		Case{"probe", ir.OpProbe, nil, []ir.Type{F32(3)}},
		Case{"transfer", ir.OpTransfer, ir.Attrs{"from": ir.StringAttr("source"), "to": ir.StringAttr("target")}, []ir.Type{F32(3)}},
		// The ops of ir/ops_nn.go.
		Case{"iota", ir.OpIota, ir.Attrs{"shape": ir.ShapeAttr(ir.S(3, 5)), "axis": ir.IntAttr(1)}, []ir.Type{I32()}},
		Case{"iota_1d", ir.OpIota, ir.Attrs{"shape": ir.ShapeAttr(ir.S(7))}, []ir.Type{I32()}},
		Case{"conv2d", ir.OpConv2D, ir.Attrs{"pads": ints(1, 1, 1, 1), "strides": ints(2, 2)}, []ir.Type{F32(1, 3, 17, 19), F32(16, 3, 3, 3), F32(16)}},
		Case{"conv2d_dw", ir.OpConv2D, ir.Attrs{"pads": ints(1, 1, 1, 1), "groups": ir.IntAttr(8)}, []ir.Type{F32(2, 8, 9, 9), F32(8, 1, 3, 3)}},
		Case{"conv2d_dilated", ir.OpConv2D, ir.Attrs{"dilations": ints(2, 3), "pads": ints(0, 2, 1, 0)}, []ir.Type{F32(1, 5, 11, 10), F32(3, 5, 2, 3), F32(3)}},
		Case{"conv_transpose2d", ir.OpConvTranspose2D, ir.Attrs{"strides": ints(2, 2)}, []ir.Type{F32(1, 8, 5, 5), F32(8, 4, 2, 2), F32(4)}},
		Case{"conv_transpose2d_groups", ir.OpConvTranspose2D, ir.Attrs{"strides": ints(3, 2), "pads": ints(1, 0, 1, 1), "groups": ir.IntAttr(2), "output_padding": ints(1, 1)}, []ir.Type{F32(2, 4, 3, 4), F32(4, 3, 3, 2)}},
		Case{"pool2d", ir.OpPool2D, ir.Attrs{"kernel": ints(3, 3), "strides": ints(2, 2), "pads": ints(1, 1, 1, 1)}, []ir.Type{F32(1, 4, 9, 9)}},
		Case{"pool2d_ceil_dilated", ir.OpPool2D, ir.Attrs{"kernel": ints(2, 3), "dilations": ints(2, 1), "ceil_mode": ir.BoolAttr(true), "strides": ints(2, 2)}, []ir.Type{F32(2, 3, 10, 8)}},
		Case{"pool2d_avg", ir.OpPool2D, ir.Attrs{"mode": ir.StringAttr("avg"), "kernel": ints(2, 2), "count_include_pad": ir.BoolAttr(true), "pads": ints(1, 1, 0, 0)}, []ir.Type{F32(1, 4, 9, 9)}},
		Case{"pool2d_avg_exclude", ir.OpPool2D, ir.Attrs{"mode": ir.StringAttr("avg"), "kernel": ints(3, 3), "pads": ints(1, 1, 1, 1)}, []ir.Type{F32(1, 2, 6, 6)}},
		Case{"resize", ir.OpResize, ir.Attrs{"size": ints(10, 14)}, []ir.Type{F32(1, 2, 5, 7)}},
		Case{"resize_ceil_asym", ir.OpResize, ir.Attrs{"size": ints(4, 9), "nearest": ir.StringAttr("ceil"), "coord": ir.StringAttr("asymmetric"), "scales": ir.FloatsAttr(0.8, 1.3)}, []ir.Type{F32(1, 2, 5, 7)}},
		Case{"resize_prefer_ceil_tf", ir.OpResize, ir.Attrs{"size": ints(3, 3), "nearest": ir.StringAttr("round_prefer_ceil"), "coord": ir.StringAttr("tf_half_pixel_for_nn")}, []ir.Type{F32(1, 1, 6, 6)}},
		Case{"resize_floor_pytorch", ir.OpResize, ir.Attrs{"size": ints(1, 5), "nearest": ir.StringAttr("floor"), "coord": ir.StringAttr("pytorch_half_pixel")}, []ir.Type{F32(1, 1, 6, 6)}},
		Case{"resize_linear", ir.OpResize, ir.Attrs{"size": ints(3, 4), "mode": ir.StringAttr("linear"), "coord": ir.StringAttr("align_corners")}, []ir.Type{F32(1, 2, 5, 7)}},
		Case{"resize_linear_align_scales", ir.OpResize, ir.Attrs{"size": ints(7, 3), "mode": ir.StringAttr("linear"), "coord": ir.StringAttr("align_corners"), "scales": ir.FloatsAttr(1.5, 0.5)}, []ir.Type{F32(1, 2, 5, 7)}},
		Case{"resize_linear_half", ir.OpResize, ir.Attrs{"size": ints(10, 1), "mode": ir.StringAttr("linear")}, []ir.Type{F32(2, 1, 5, 7)}},
		Case{"reduce_sum", ir.OpReduceSum, ir.Attrs{"axes": ints(0, 2)}, []ir.Type{F32(3, 4, 5)}},
		Case{"reduce_sum_all", ir.OpReduceSum, ir.Attrs{"axes": ints(0, 1), "keepdims": ir.BoolAttr(false)}, []ir.Type{F32(3, 4)}},
		Case{"reduce_sum_none", ir.OpReduceSum, ir.Attrs{"axes": ints()}, []ir.Type{F32(3, 4)}},
		Case{"reduce_mean", ir.OpReduceMean, ir.Attrs{"axes": ints(-1)}, []ir.Type{F32(7, 64)}},
		Case{"reduce_max", ir.OpReduceMax, ir.Attrs{"axes": ints(1), "keepdims": ir.BoolAttr(false)}, []ir.Type{F32(2, 9, 3)}},
		// The ops of ir/ops_logic.go.
		Case{"compare_ge", ir.OpCompare, ir.Attrs{"cmp": ir.StringAttr("ge")}, []ir.Type{F32(5, 1, 7), F32(3, 7)}},
		Case{"compare_eq_i32", ir.OpCompare, ir.Attrs{"cmp": ir.StringAttr("eq")}, []ir.Type{I32(4, 3), I32(3)}},
		Case{"compare_ne", ir.OpCompare, ir.Attrs{"cmp": ir.StringAttr("ne")}, []ir.Type{F32(6), F32()}},
		Case{"where", ir.OpWhere, nil, []ir.Type{I32(5, 1), F32(3, 5, 7), F32(7)}},
		Case{"where_i32", ir.OpWhere, nil, []ir.Type{I32(4), I32(), I32(4)}},
		// The ops of ir/ops_moe.go and ir/ops_recurrent.go.
		Case{"topk", ir.OpTopK, ir.Attrs{"k": ir.IntAttr(2)}, []ir.Type{F32(5, 8)}},
		Case{"topk_axis0", ir.OpTopK, ir.Attrs{"k": ir.IntAttr(3), "axis": ir.IntAttr(0)}, []ir.Type{F32(4, 3, 2)}},
		Case{"expert_matmul", ir.OpExpertMatmul, nil, []ir.Type{F32(3, 64), F32(4, 40, 64), I32(3, 2)}},
		Case{"expert_matmul_pairs_odd", ir.OpExpertMatmul, nil, []ir.Type{F32(1, 2, 37), F32(8, 5, 37), I32(1, 2)}},
		Case{"token_shift", ir.OpTokenShift, nil, []ir.Type{F32(5, 16), F32(1, 16)}},
		Case{"causal_conv1d", ir.OpCausalConv1D, nil, []ir.Type{F32(3, 64), F32(7, 64), F32(64, 4)}},
		Case{"wkv", ir.OpWKV, nil, []ir.Type{F32(3, 32), F32(6, 32), F32(6, 32), F32(32), F32(32)}},
		Case{"selective_scan", ir.OpSelectiveScan, nil, []ir.Type{F32(64, 8), F32(5, 64), F32(5, 64), F32(64, 8), F32(5, 8), F32(5, 8)}},
	)
}

// ByName returns the case named name.
func ByName(t testing.TB, name string) Case {
	t.Helper()
	for _, c := range Cases() {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("no case %s", name)
	return Case{}
}

// CheckBindings checks a kernel's bindings against its case: ascending
// indices, the inputs in order and then the outputs, with their types and
// access (a ReadWrite binding carries both an input and an output).
func CheckBindings(t *testing.T, c Case, k *codegen.Kernel) {
	t.Helper()
	lastIn, seenOut := -1, false
	for i, b := range k.Bindings {
		if b.Index != i {
			t.Errorf("%s: binding %d has index %d", c.Name, i, b.Index)
		}
		switch {
		case b.Input >= 0:
			if seenOut || b.Input != lastIn+1 {
				t.Errorf("%s: binding %d carries input %d out of order", c.Name, i, b.Input)
			}
			lastIn = b.Input
			if !b.Type.Equal(c.In[b.Input]) {
				t.Errorf("%s: binding %d type %s, input is %s", c.Name, i, b.Type, c.In[b.Input])
			}
			if (b.Output >= 0) != (b.Access == codegen.ReadWrite) || (b.Output < 0 && b.Access != codegen.Read) {
				t.Errorf("%s: binding %d access %s for input %d output %d", c.Name, i, b.Access, b.Input, b.Output)
			}
		default:
			seenOut = true
			if b.Access != codegen.Write || b.Output < 0 {
				t.Errorf("%s: binding %d access %s output %d", c.Name, i, b.Access, b.Output)
			}
		}
	}
	if lastIn != len(c.In)-1 {
		t.Errorf("%s: bindings carry %d inputs, the node has %d", c.Name, lastIn+1, len(c.In))
	}
}

// Golden compares got with the file at path, after writing got there when
// update is set (go test -update), so that changes to generated code show
// in diffs.
func Golden(t *testing.T, path string, got []byte, update bool) {
	t.Helper()
	if update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update)", err)
	}
	if string(want) != string(got) {
		t.Errorf("%s differs from %s (run go test -update and review the diff)", filepath.Base(path), path)
	}
}

// ropeFactors returns n Llama 3.1-like frequency divisors: 1 for the high
// frequencies, 8 for the low ones, a smooth ramp between.
func ropeFactors(n int) []float64 {
	f := make([]float64, n)
	for i := range f {
		f[i] = 1 + 7*math.Min(1, math.Max(0, float64(i-n/4)/float64(n/2)))
	}
	return f
}

// WGSLKernel is a WGSL module of the dialect around a kernel body (whose
// first line is line 8): i32 inputs in0 and in1, an f32 output out0, the
// index i of the invocation, decls at module scope.
func WGSLKernel(decls, body string) string {
	return `@group(0) @binding(0) var<storage, read> in0: array<i32>;
@group(0) @binding(1) var<storage, read> in1: array<i32>;
@group(0) @binding(2) var<storage, read_write> out0: array<f32>;
` + decls + `
@compute @workgroup_size(64, 1, 1)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) li: u32) {
  let i = wid.x * 64u + li;
` + body + `
}
`
}

// Sources returns the kernel sources gen makes for the cases named (fuzz
// seeds).
func Sources(t testing.TB, gen func(Case) (*codegen.Kernel, error), names ...string) []string {
	t.Helper()
	var srcs []string
	for _, name := range names {
		k, err := gen(ByName(t, name))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		srcs = append(srcs, string(k.Source))
	}
	return srcs
}

// DialectKernel is a kernel that uses what the dialect has beyond the WGSL
// that naga takes (codegen/wgslfront): f16 (storage, vectors, arithmetic,
// conversions, max) and subgroup operations and builtins. No generator
// writes such kernels yet; the translators' tests translate this one.
const DialectKernel = `enable f16;
enable subgroups;
@group(0) @binding(0) var<storage, read> in0: array<f16>;
@group(0) @binding(1) var<storage, read> in1: array<vec4<f16>>;
@group(0) @binding(2) var<storage, read_write> out0: array<f32>;
@group(0) @binding(3) var<storage, read_write> out1: array<f16>;
const SCALE: f16 = 0.5h;
var<workgroup> part: array<f32, 64>;
@compute @workgroup_size(64, 1, 1)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) li: u32,
    @builtin(subgroup_size) sg_size: u32, @builtin(subgroup_invocation_id) sg_id: u32) {
  let i = wid.x * 64u + li;
  let h = in0[i] * SCALE + 1.0h;
  let v = in1[i] * h - vec4<f16>(f16(i % 16u), 0.25h, -h, 2.0h);
  let d = dot(v, vec4<f16>(1.0h));
  let x = f32(d) + f32(max(h, 0.0h));
  let s = subgroupAdd(x) + subgroupMax(x) + subgroupMin(x);
  let b = subgroupBroadcastFirst(x) + subgroupBroadcast(x, 0u);
  let sh = subgroupShuffle(x, (sg_id + 1u) % sg_size) + subgroupShuffleXor(x, 1u) + subgroupShuffleUp(x, 1u) + subgroupShuffleDown(x, 1u);
  let n = subgroupAdd(i32(li)) + i32(subgroupMax(sg_id));
  let hv = subgroupAdd(v);
  if (sg_id == 0u) { part[li / sg_size] = s; }
  workgroupBarrier();
  out0[i] = part[0] + b + sh + f32(n) + f32(hv.x);
  out1[i] = f16(x) * h;
}
`
