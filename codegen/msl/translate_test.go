package msl

import (
	"strings"
	"testing"

	"github.com/tapml/tapml/codegen/internal/kerneltest"
)

var wgslKernel = kerneltest.WGSLKernel

// TestTranslate translates small kernels and checks the MSL of each
// construct, above all where MSL's semantics differ from WGSL's; every
// result must pass the syntax check.
func TestTranslate(t *testing.T) {
	cases := []struct {
		name, decls, body string
		want              []string // in the MSL, in this order
	}{
		{"i32 arithmetic wraps", "", `let a = in0[i] + in1[i] * 3i - 1i; out0[i] = f32(a);`,
			[]string{"const int a = int(uint(in0[i]) + uint(in1[i]) * 3u - 1u);"}},
		{"i32 negation wraps", "", `let a = -in0[i]; let b = -5i; out0[i] = f32(a + b);`,
			[]string{"const int a = int(0u - uint(in0[i]));", "const int b = -5;"}},
		{"i32 parentheses are kept in uint", "", `let a = (in0[i] + 1i) * in1[i]; out0[i] = f32(a);`,
			[]string{"int((uint(in0[i]) + 1u) * uint(in1[i]))"}},
		{"uint(int(u32)) is the u32", "", `let a = in0[i] + i32(i / 2u); out0[i] = f32(a);`,
			[]string{"int(uint(in0[i]) + (i / 2u))"}},
		{"i32 increments wrap", "", `var a = in0[i]; a++; a += in1[i]; out0[i] = f32(a);`,
			[]string{"int a = in0[i];", "a = int(uint(a) + 1u);", "a = int(uint(a) + uint(in1[i]));"}},
		{"integer division", "const Z: u32 = 0u;\nconst D: u32 = 7u;", `let a = in0[i] / in1[i]; let b = in0[i] % 4i; let c = in0[i] / -1i;
  let d = i / Z; let e = i % D; let f = i % (D * 2u); var g = i; g /= 3u; out0[i] = f32(a + b + c) + f32(d + e + f + g);`,
			[]string{"static inline int div_i32(", "static inline uint div_u32(", "const int a = div_i32(in0[i], in1[i]);",
				"const int b = in0[i] % 4;", "const int c = div_i32(in0[i], -1);", "const uint d = div_u32(i, Z);",
				"const uint e = i % D;", "const uint f = i % (D * 2u);", "g /= 3u;"}},
		{"abs of i32", "", `out0[i] = f32(abs(in0[i]));`, []string{"static inline int abs_i32(", "out0[i] = float(abs_i32(in0[i]));"}},
		{"f32 max and min propagate NaN", "", `let x = f32(in0[i]); out0[i] = max(x, 0.0f) + min(x, 1.0f) + f32(max(i, 3u));`,
			[]string{"static inline float max_f32(", "static inline float min_f32(", "max_f32(x, 0.0f) + min_f32(x, 1.0f) + float(max(i, 3u))"}},
		{"select, round, NaN tests", "", `let x = f32(in0[i]); let v = in1[i];
  out0[i] = select(round(x), 0.0f, x != x || x == x && v == v);`,
			[]string{"out0[i] = (isnan(x) || !isnan(x) && true ? 0.0f : rint(x));"}},
		{"abstract literals take their context's type", "", `var cnt = 0; for (var a = 0; a < 3; a++) { cnt = cnt + 1; }
  let m = i32(-2147483647 - 1); let f = f32(in0[i]) * 2; out0[i] = f32(cnt + m) + f;`,
			[]string{"int cnt = 0;", "for (int a = 0; a < 3; a = int(uint(a) + 1u)) {", "cnt = int(uint(cnt) + 1u);",
				"const int m = (-2147483647 - 1);", "const float f = float(in0[i]) * 2.0f;"}},
		{"vars are zero-initialised", "", `var acc: array<f32, 3>; var v: vec4<f32>; var n: u32; acc[n] = v.x; out0[i] = acc[1];`,
			[]string{"float acc[3] = {};", "float4 v = float4(0.0f);", "uint n = 0u;"}},
		{"vectors", "", `let v = vec4<f32>(1.0f); let w = vec2<f32>(f32(in0[i]), 2.0f); out0[i] = dot(v, v) + w.y + fma(v, v, v).x;`,
			[]string{"const float4 v = float4(1.0f);", "const float2 w = float2(float(in0[i]), 2.0f);"}},
		{"workgroup memory and barriers", "var<workgroup> red: array<f32, 64>; // partial sums", `red[li] = f32(in0[i]); workgroupBarrier(); out0[i] = red[0];`,
			[]string{"  threadgroup float red[64]; // partial sums", "  red[li] = float(in0[i]);", "  threadgroup_barrier(mem_flags::mem_threadgroup);"}},
		{"tables and constants", "const N: u32 = 0xffffffffu;\nconst S: f32 = 2.5e-01f;\nvar<private> vals: array<i32, 3> = array<i32, 3>(i32(-2147483647 - 1), 0i, 7i);",
			`out0[i] = f32(vals[i % 3u]) * S + f32(N);`,
			[]string{"constant uint N = 0xffffffffu;", "constant float S = 2.5e-01f;", "constant int vals[3] = {(-2147483647 - 1), 0, 7};"}},
		{"helpers before their callers, bitcast", "fn f(x: f32) -> f32 { return g(x) * 2.0f; }\nfn g(x: f32) -> f32 { return bitcast<f32>(0x7fc00000u) + x; }\nfn unused(x: f32) -> f32 { return x; }",
			`out0[i] = f(1.0f);`,
			[]string{"static inline float g(float x) {", "return as_type<float>(0x7fc00000u) + x;", "static inline float f(float x) {", "kernel void tapml_main("}},
		{"reserved names are renamed", "", `var dot = 0.0f; let half = 1.0f; let kernel = vec2<f32>(dot, half); out0[i] = dot(kernel, kernel);`,
			[]string{"float dot_ = 0.0f;", "const float half_ = 1.0f;", "const float2 kernel_ = float2(dot_, half_);", "out0[i] = dot(kernel_, kernel_);"}},
		{"unused locals are left out", "", `var r_ = i; let c1 = r_ % 3u; r_ = r_ / 3u; let c0 = r_; let unused = c0 * 2u; var set = 1u; set = 2u;
  // a comment stays
  out0[i] = f32(c1);`,
			[]string{"uint r_ = i;", "const uint c1 = r_ % 3u;", "r_ = r_ / 3u;", "// a comment stays", "out0[i] = float(c1);"}},
		{"statements", "", `if (i >= 4u) { return; } else if (i == 2u) { out0[i] = 1.0f; } else { out0[i] = 2.0f; }
  for (var k = 0u; k < 4u; k += 1u) { if (k == 2u) { continue; } if (k == 3u) { break; } { let z = k; out0[z] = 0.0f; } }
  var k = 0u; for (; k < 2u;) { k++; }`,
			[]string{"if (i >= 4u) {", "} else if (i == 2u) {", "} else {", "for (uint k = 0u; k < 4u; k += 1u) {", "continue;", "break;",
				"const uint z = k;", "for (; k < 2u; ) {", "k++;"}},
	}
	var srcs []Source
	for _, c := range cases {
		src, _, err := translate(wgslKernel(c.decls, c.body))
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		at := 0
		for _, w := range c.want {
			j := strings.Index(src[at:], w)
			if j < 0 {
				t.Errorf("%s: no %q (after the previous) in\n%s", c.name, w, src)
				break
			}
			at += j + len(w)
		}
		srcs = append(srcs, Source{Name: c.name, Src: []byte("#include <metal_stdlib>\n" + src)})
	}
	for name, bad := range map[string]string{"unused locals are left out": "unused", "helpers before their callers, bitcast": "unused("} {
		for _, s := range srcs {
			if s.Name == name && strings.Contains(string(s.Src), bad) {
				t.Errorf("%s: %q was not left out", name, bad)
			}
		}
	}
	for i, err := range checkAll(t, srcs) {
		if err != nil {
			t.Errorf("%v\n%s", err, srcs[i].Src)
		}
	}
}

// TestTranslateSharedMemory checks the size reported for threadgroup memory
// and the workgroup size.
func TestTranslateSharedMemory(t *testing.T) {
	_, m, err := translate(wgslKernel("var<workgroup> a: array<vec4<f32>, 8>;\nvar<workgroup> b: array<u32, 3>;", "a[li] = vec4<f32>(0.0f); b[0] = 1u; out0[i] = a[0].x + f32(b[0]);"))
	if err != nil {
		t.Fatal(err)
	}
	if m.SharedBytes != 8*16+3*4 || m.WorkgroupSize != [3]int{64, 1, 1} {
		t.Errorf("shared %d bytes, workgroup %v; want 140, [64 1 1]", m.SharedBytes, m.WorkgroupSize)
	}
}

// TestTranslateDialect translates the kernel that uses the dialect's f16
// and subgroup operations: half, Metal's SIMD-group functions and
// attributes, and the syntax check accepts it.
func TestTranslateDialect(t *testing.T) {
	src, m, err := translate(kerneltest.DialectKernel)
	if err != nil {
		t.Fatal(err)
	}
	if !m.F16 || !m.Subgroups {
		t.Errorf("module: f16 %v, subgroups %v", m.F16, m.Subgroups)
	}
	for _, want := range []string{"static inline half max_f16(half a, half b)", "constant half SCALE = 0.5h;",
		"device const half4* in1 [[buffer(1)]]", "uint sg_size [[threads_per_simdgroup]]", "uint sg_id [[thread_index_in_simdgroup]]",
		"const half4 v = in1[i] * h - half4(half(i % 16u), 0.25h, -h, 2.0h);", "float(max_f16(h, 0.0h))",
		"simd_sum(x) + simd_max(x) + simd_min(x)", "simd_broadcast_first(x) + simd_broadcast(x, 0u)",
		"simd_shuffle_xor(x, 1u) + simd_shuffle_up(x, 1u) + simd_shuffle_down(x, 1u)", "const half4 hv = simd_sum(v);"} {
		if !strings.Contains(src, want) {
			t.Errorf("no %q in\n%s", want, src)
		}
	}
	if errs := checkAll(t, []Source{{Name: "dialect", Src: []byte("#include <metal_stdlib>\n" + src)}}); errs[0] != nil {
		t.Error(errs[0])
	}
}

// TestTranslateMatrixRefused checks that a kernel with subgroup matrices
// is refused with an error saying so, not translated or a panic.
func TestTranslateMatrixRefused(t *testing.T) {
	_, _, err := translate(kerneltest.MatrixKernel)
	if err == nil || !strings.Contains(err.Error(), "subgroup matrices are not translated to MSL") {
		t.Errorf("got %v, want the refusal of subgroup matrices", err)
	}
}
