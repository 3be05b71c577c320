package wgsl

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/tapml/tapml/codegen/internal/kerneltest"
	"github.com/tapml/tapml/ir"
)

// TestMMAChoice checks when products take the subgroup-matrix kernel: f16
// compute on a device with the feature, a transposed b stored as f16 (or
// f32, stored as f16 under f16 compute), M > 16, K whole steps of the
// blocking; and its workgroup (32 invocations a subgroup) and grid.
func TestMMAChoice(t *testing.T) {
	tb := ir.Attrs{"transpose_b": ir.BoolAttr(true)}
	mm := func(name string, a, b ir.Type) kerneltest.Case {
		return kerneltest.Case{Name: name, Op: ir.OpMatmul, Attrs: tb, In: []ir.Type{a, b}}
	}
	up := mm("gate", f32(128, 2048), ir.T(ir.F16, ir.S(5632, 2048)))
	q4 := mm("q4_0", f32(128, 2048), ir.T(ir.Q4_0, ir.S(5632, 2048)))
	all := Features{F16: true, Subgroups: true, SubgroupMatrix: true}
	half := Options{Limits: bigLimits, Features: all, Compute: ir.F16, Tuning: Tuning{MatmulMMA: "64x64x32/32x32"}}
	for _, c := range []struct {
		name   string
		c      kerneltest.Case
		opts   func(Options) Options
		mma    bool
		wg     int // invocations of the workgroup
		grid   [3]int
		marker string
	}{
		{"f16 weights", up, func(o Options) Options { return o }, true, 128, [3]int{88, 2, 1}, "subgroupMatrixMultiplyAccumulate(a1_1, b1_1, c1_1)"},
		{"q4_0 keeps the vec4 kernel", q4, func(o Options) Options { return o }, false, 0, [3]int{}, ""},
		{"q4_0 split, in runs of 4 units", q4, func(o Options) Options { o.Tuning.MatmulMMABlocks = true; return o }, true, 128, [3]int{88, 2, 1},
			"l1_1 = subgroupMatrixMultiplyAccumulate(a1_1, bl1_1, l1_1)"},
		{"list by groups", up, func(o Options) Options {
			o.Tuning = Tuning{MatmulMMA: "128x128x32/64x64,64x64x32/32x32", MatmulMinGroups: 100}
			return o
		}, true, 128, [3]int{88, 2, 1}, "64x64x32/32x32"},
		{"K in 8 slices", mm("kv", f32(128, 2048), ir.T(ir.F16, ir.S(512, 2048))), func(o Options) Options {
			o.Tuning = Tuning{MatmulMMA: "32x32x16/16x16*8"}
			return o
		}, true, 1024, [3]int{16, 4, 1}, "if (slice == 7u) { subgroupMatrixStore(&tc, sg * 256u, c0_0, false, 16u); }"},
		{"f32 compute", up, func(o Options) Options { o.Compute = ir.F32; return o }, false, 0, [3]int{}, ""},
		{"f32 compute splits a", up, func(o Options) Options { o.Compute, o.Tuning.MatmulMMAF32 = ir.F32, o.Tuning.MatmulMMA; return o }, true, 128, [3]int{88, 2, 1},
			"l1_1 = subgroupMatrixMultiplyAccumulate(al1_1, b1_1, l1_1)"},
		{"f32 compute takes MatmulMMAF32's blockings", up, func(o Options) Options {
			o.Compute, o.Tuning.MatmulMMAF32 = ir.F32, "32x32x32/16x16"
			return o
		}, true, 128, [3]int{176, 4, 1}, "subgroup-matrix matmul 32x32x32/16x16*1"},
		{"f16 compute keeps MatmulMMA's", up, func(o Options) Options { o.Tuning.MatmulMMAF32 = "32x32x32/16x16"; return o }, true, 128, [3]int{88, 2, 1},
			"subgroup-matrix matmul 64x64x32/32x32*1"},
		{"f32 compute splits a and q4_0", q4, func(o Options) Options {
			o.Compute, o.Tuning.MatmulMMAF32, o.Tuning.MatmulMMABlocks, o.Tuning.MatmulMMAF32Blocks = ir.F32, o.Tuning.MatmulMMA, true, true
			return o
		}, true, 128, [3]int{88, 2, 1}, "l1_1 = subgroupMatrixMultiplyAccumulate(al1_1, b1_1, l1_1);\n      l1_1 = subgroupMatrixMultiplyAccumulate(a1_1, bl1_1, l1_1)"},
		{"q4_0 scaled: integers, one product a step, each block's scale applied", q4, func(o Options) Options {
			o.Tuning.MatmulMMABlocks, o.Tuning.MatmulMMAScaled = true, true
			return o
		}, true, 128, [3]int{88, 2, 1}, "let sd0_1 = subgroupMatrixLoad<subgroup_matrix_result<f32, 16, 16>>(&ts, ss + 0u + wn + 16u, false, 0u);\n    let p0_1_0 = subgroupMatrixMultiplyAccumulate(a0_0, b0_1, subgroup_matrix_result<f32, 16, 16>());\n    let p0_1_1 = subgroupMatrixMultiplyAccumulate(a1_0, b1_1, p0_1_0);\n    c0_1 = c0_1 + p0_1_1 / sd0_1;"},
		{"q4_0 scaled needs MatmulMMABlocks", q4, func(o Options) Options { o.Tuning.MatmulMMAScaled = true; return o }, false, 0, [3]int{}, ""},
		{"q4_k is split though scaled", mm("q4_k", f32(128, 2048), ir.T(ir.Q4_K, ir.S(5632, 2048))), func(o Options) Options {
			o.Tuning.MatmulMMABlocks, o.Tuning.MatmulMMAScaled = true, true
			return o
		}, true, 128, [3]int{88, 2, 1}, "l1_1 = subgroupMatrixMultiplyAccumulate(a1_1, bl1_1, l1_1)"},
		{"q8_0 scaled at f32 compute: two products a step", mm("q8_0", f32(128, 2048), ir.T(ir.Q8_0, ir.S(5632, 2048))), func(o Options) Options {
			o.Compute, o.Tuning.MatmulMMAF32, o.Tuning.MatmulMMABlocks, o.Tuning.MatmulMMAF32Blocks, o.Tuning.MatmulMMAScaled = ir.F32, o.Tuning.MatmulMMA, true, true, true
			return o
		}, true, 128, [3]int{88, 2, 1}, "let pl1_1_0 = subgroupMatrixMultiplyAccumulate(al0_1, b0_1, subgroup_matrix_result<f32, 16, 16>());\n      let pl1_1_1 = subgroupMatrixMultiplyAccumulate(al1_1, b1_1, pl1_1_0);\n      c1_1 = c1_1 + (p1_1_1 + pl1_1_1 * 0.0009765625f) / sd0_1;"},
		{"q4_0 split at f32 compute keeps the vec4 kernel without MatmulMMAF32Blocks", q4, func(o Options) Options {
			o.Compute, o.Tuning.MatmulMMAF32, o.Tuning.MatmulMMABlocks = ir.F32, o.Tuning.MatmulMMA, true
			return o
		}, false, 0, [3]int{}, ""},
		{"q4_0 scaled at f32 compute takes it without MatmulMMAF32Blocks", q4, func(o Options) Options {
			o.Compute, o.Tuning.MatmulMMAF32, o.Tuning.MatmulMMABlocks, o.Tuning.MatmulMMAScaled = ir.F32, o.Tuning.MatmulMMA, true, true
			return o
		}, true, 128, [3]int{88, 2, 1}, "c0_0 = c0_0 + (p0_0_1 + pl0_0_1 * 0.0009765625f) / sd0_0;"},
		{"q4_0 of few workgroups at f32 compute keeps the vec4 kernel under MatmulMMAF32BlocksMinWorkgroups", mm("kv", f32(128, 2048), ir.T(ir.Q4_0, ir.S(512, 2048))), func(o Options) Options {
			o.Compute, o.Tuning.MatmulMMAF32, o.Tuning.MatmulMMABlocks, o.Tuning.MatmulMMAScaled = ir.F32, "32x32x32/16x16*4", true, true
			o.Tuning.MatmulMMAF32BlocksMinWorkgroups = 65
			return o
		}, false, 0, [3]int{}, ""},
		{"q4_0 of 64 workgroups at f32 compute takes it at MatmulMMAF32BlocksMinWorkgroups 64", mm("kv", f32(128, 2048), ir.T(ir.Q4_0, ir.S(512, 2048))), func(o Options) Options {
			o.Compute, o.Tuning.MatmulMMAF32, o.Tuning.MatmulMMABlocks, o.Tuning.MatmulMMAScaled = ir.F32, "32x32x32/16x16*4", true, true
			o.Tuning.MatmulMMAF32BlocksMinWorkgroups = 64
			return o
		}, true, 512, [3]int{16, 4, 1}, "c0_0 = c0_0 + (p0_0_1 + pl0_0_1 * 0.0009765625f) / sd0_0;"},
		{"q4_k at f32 compute keeps the vec4 kernel though scaled", mm("q4_k", f32(128, 2048), ir.T(ir.Q4_K, ir.S(5632, 2048))), func(o Options) Options {
			o.Compute, o.Tuning.MatmulMMAF32, o.Tuning.MatmulMMABlocks, o.Tuning.MatmulMMAScaled = ir.F32, o.Tuning.MatmulMMA, true, true
			return o
		}, false, 0, [3]int{}, ""},
		{"f32 weights at f32 compute", mm("f32", f32(128, 2048), f32(5632, 2048)), func(o Options) Options {
			o.Compute, o.Tuning.MatmulMMAF32 = ir.F32, o.Tuning.MatmulMMA
			return o
		}, false, 0, [3]int{}, ""},
		{"f32 compute without subgroups", up, func(o Options) Options {
			o.Compute, o.Tuning.MatmulMMAF32, o.Features.Subgroups = ir.F32, o.Tuning.MatmulMMA, false
			return o
		}, false, 0, [3]int{}, ""},
		{"no feature", up, func(o Options) Options { o.Features.SubgroupMatrix = false; return o }, false, 0, [3]int{}, ""},
		{"K not whole steps", mm("k", f32(128, 48), ir.T(ir.F16, ir.S(64, 48))), func(o Options) Options { return o }, false, 0, [3]int{}, ""},
		{"few rows", mm("m", f32(16, 64), ir.T(ir.F16, ir.S(64, 64))), func(o Options) Options { return o }, false, 0, [3]int{}, ""},
	} {
		k, err := generate(t, c.c, c.opts(half))
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		src := string(k.Source)
		if got := strings.Contains(src, "subgroupMatrixMultiplyAccumulate"); got != c.mma {
			t.Errorf("%s: subgroup-matrix kernel %v, want %v", c.name, got, c.mma)
			continue
		}
		if c.mma && (k.WorkgroupSize != [3]int{c.wg, 1, 1} || k.Grid != c.grid || !strings.Contains(src, c.marker) ||
			!strings.HasPrefix(src, "enable f16;\n") || !strings.Contains(src, "enable "+SubgroupMatrixExt+";\n")) {
			t.Errorf("%s: workgroup %v grid %v, want %d and %v with %q:\n%s", c.name, k.WorkgroupSize, k.Grid, c.wg, c.grid, c.marker, src)
		}
	}
}

// TestMMAWorkgroupLayout checks the subgroup-matrix kernel's workgroup
// arrays under every blocking, compute dtype and split: the arrays that
// subgroup matrices load from or store to come first, every array is a
// whole multiple of 16 bytes (a matrix load behind a 4-byte array computed
// garbage on the H200), and together they take what mmaTile.shared says,
// the figure the blocking is checked against the device's limit with;
// a scaled b's scales included.
func TestMMAWorkgroupLayout(t *testing.T) {
	decl := regexp.MustCompile(`(?m)^var<workgroup> (\w+): array<(vec4<f16>|f32|u32), (\d+)>;`)
	tb := ir.Attrs{"transpose_b": ir.BoolAttr(true)}
	all := Features{F16: true, Subgroups: true, SubgroupMatrix: true}
	for _, tile := range MatmulMMATiles {
		for _, c := range []struct {
			compute ir.DType
			b       ir.DType
			scaled  bool
		}{{ir.F16, ir.F16, false}, {ir.F16, ir.Q4_0, false}, {ir.F32, ir.F16, false}, {ir.F32, ir.Q4_0, false},
			{ir.F16, ir.Q4_0, true}, {ir.F32, ir.Q8_0, true}} {
			name := fmt.Sprintf("%s, %s compute, %s weights, scaled %v", tile, c.compute, c.b, c.scaled)
			kc := kerneltest.Case{Name: name, Op: ir.OpMatmul, Attrs: tb, In: []ir.Type{f32(128, 1024), ir.T(c.b, ir.S(256, 1024))}}
			o := Options{Limits: bigLimits, Features: all, Compute: c.compute,
				Tuning: Tuning{MatmulMMA: tile, MatmulMMABlocks: true, MatmulMMAF32: tile, MatmulMMAF32Blocks: true, MatmulMMAScaled: c.scaled}}
			k, err := generate(t, kc, o)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			src := string(k.Source)
			if !strings.Contains(src, "subgroupMatrixMultiplyAccumulate") {
				continue // over the limits
			}
			total, matrices := 0, true
			for _, m := range decl.FindAllStringSubmatch(src, -1) {
				n, _ := strconv.Atoi(m[3])
				size := n * map[string]int{"vec4<f16>": 8, "f32": 4, "u32": 4}[m[2]]
				total += size
				if size%16 != 0 {
					t.Errorf("%s: %s takes %d bytes, not a multiple of 16", name, m[1], size)
				}
				used := strings.Contains(src, "(&"+m[1]+",")
				if used && !matrices {
					t.Errorf("%s: the matrices' array %s follows another array", name, m[1])
				}
				matrices = matrices && used
			}
			tl, _ := parseMMATile(tile)
			scales := 0
			if c.scaled {
				scales = tl.scales(32)
			}
			if want := tl.shared(c.compute == ir.F32, c.b.IsBlock() && !c.scaled, scales); total != want {
				t.Errorf("%s: the arrays take %d bytes, shared says %d", name, total, want)
			}
		}
	}
}

func TestParseMMATile(t *testing.T) {
	for _, s := range MatmulMMATiles {
		if err := ValidMatmulMMA(s); err != nil {
			t.Errorf("%s: %v", s, err)
		}
	}
	for _, bad := range []string{"64x64x32", "64x64x32/32x48", "64x64x24/32x32", "64x64x32/128x32", "0x64x32/32x32", "64x64x32/32x32,x", "64x64x32/32x32+p", "64x64x32/32x32*2+d"} {
		if ValidMatmulMMA(bad) == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// TestHalfVectorLoads checks that f16 compute reads an activation vector
// with one load (through the widening helper), not one per component: the
// decode GEMV over Q4_0 ran 3x slower on an H200 with component loads.
func TestHalfVectorLoads(t *testing.T) {
	tb := ir.Attrs{"transpose_b": ir.BoolAttr(true)}
	c := kerneltest.Case{Name: "gemv", Op: ir.OpMatmul, Attrs: tb, In: []ir.Type{f32(1, 2048), ir.T(ir.Q4_0, ir.S(256, 2048)), f32(1, 256)}}
	k, err := generate(t, c, Options{Limits: bigLimits, Features: Features{F16: true, Subgroups: true}, Compute: ir.F16, Tuning: DiscreteTuning()})
	if err != nil {
		t.Fatal(err)
	}
	src := string(k.Source)
	if strings.Contains(src, "].x)") || !strings.Contains(src, "f16_widen4(in0[") || !strings.Contains(src, "fn f16_widen4(v: vec4<f16>) -> vec4<f32>") {
		t.Errorf("the vec4<f16> activation is not read through f16_widen4:\n%s", src)
	}
}
