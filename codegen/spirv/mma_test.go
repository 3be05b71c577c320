package spirv

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/tapml/tapml/codegen/wgsl"
	"github.com/tapml/tapml/ir"
	"github.com/tapml/tapml/runtime/cpu"
	"github.com/tapml/tapml/runtime/vulkan"
	"github.com/tapml/tapml/tensor"
)

// TestDeviceMMA runs prefill products with subgroup matrices in the
// tuning, under f16 compute against the CPU reference emulating it, and
// under f32 compute (Tuning.MatmulMMAF32) against the f32 reference. On a
// device with the feature (an NVIDIA GPU: cooperative matrices) the
// products take the subgroup-matrix kernel; on one without (lavapipe) the
// vec4 kernel, and the test checks that too.
//
// Tolerance under f16 compute: TestDeviceF16's (the f32 matmul one plus an
// f16 ulp relative): a and b are f16 values, their products exact, the
// sums f32; a block-format b (with Tuning.MatmulMMABlocks) is two f16
// parts whose sum is b exactly for Q4_0 and Q8_0, within 2^-21 for Q4_K
// (mma.go). Without the knob block formats keep the vec4 kernel; the test
// checks which kernel each product took. With Tuning.MatmulMMAScaled, Q4_0,
// Q5_0 and Q8_0 are their integers, exact in f16, each block's partial
// sums divided by the inverse of its scale (within 2.5 f32 ulps on Vulkan;
// at f32 compute the sums of a's low parts folded into the high ones
// first, one more f32 rounding: far inside either tolerance).
//
// Under f32 compute the f32 matmul tolerance itself: the split of a (and
// b) leaves each term within about 2^-22 of its f32 product, 1e-6 at
// these inputs, and a K-long sum of such errors stays well inside
// 2e-6·√K·4. Rows of a there span 2^-30 to 2^20 (past f16's range both
// ways, so that a kernel without the rows' scales fails); each output row
// is divided by its row's factor (a power of two, exact) before the
// comparison, which keeps the tolerance's meaning.
func TestDeviceMMA(t *testing.T) {
	r := rand.New(rand.NewPCG(41, 42))
	tb := ir.Attrs{"transpose_b": ir.BoolAttr(true)}
	type shape struct {
		dt      ir.DType
		m, n, k int64
		addend  bool
	}
	shapes := []shape{
		{ir.F16, 37, 20, 64, false}, {ir.F16, 130, 136, 96, true}, {ir.F32, 40, 64, 128, false},
		{ir.Q4_0, 45, 36, 96, true}, {ir.Q8_0, 128, 96, 64, false}, {ir.Q4_K, 33, 68, 256, false},
		{ir.F16, 70, 72, 128, false}, {ir.Q5_0, 48, 40, 128, true},
	}
	// rowExp is the power of two row i of a is multiplied by at f32
	// compute (products without an addend).
	rowExp := func(i int) int { return []int{0, 20, -30, 9, -12}[i%5] }
	// kstep: the K a product must be a multiple of to take the blocking;
	// blocks: block formats take it too (Tuning.MatmulMMABlocks).
	for _, compute := range []ir.DType{ir.F16, ir.F32} {
		for _, b := range []struct {
			tiles          string
			kstep          int64
			blocks, scaled bool
		}{{"64x64x32/32x32", 32, false, false}, {"32x32x32/16x16", 32, false, false}, {"128x64x32/64x32", 32, false, false}, {"64x64x64/32x32", 64, false, false},
			{"32x32x16/16x16*4", 64, false, false}, {"64x64x32/32x32*2", 64, false, false}, {"64x64x32/32x32", 32, true, false}, {"32x32x16/16x16*4", 64, true, false},
			{"64x64x32/32x32+d", 32, false, false}, {"32x32x32/16x16+d*2", 64, true, false}, {"32x64x32/16x32*4", 128, false, false},
			{"64x64x32/32x32", 32, true, true}, {"32x32x16/16x16*4", 64, true, true}, {"64x64x64/32x32", 64, true, true}, {"32x32x32/16x16+d*2", 64, true, true}} {
			tiles := b.tiles
			tune := wgsl.DiscreteTuning()
			tune.MatmulMMA, tune.MatmulMinGroups, tune.MatmulMMABlocks, tune.MatmulMMAF32, tune.MatmulMMAF32Blocks = tiles, 1, b.blocks, tiles, true
			// Whatever the grid's size: the test's products are small.
			tune.MatmulMMAScaled, tune.MatmulMMAF32BlocksMinWorkgroups = b.scaled, 0
			g, err := vulkan.Open(vulkan.Options{Generate: Generate, Compute: compute, Tuning: tune, PipelineCacheDir: "-"})
			if err != nil {
				t.Fatalf("vulkan with %s compute: %v (lavapipe has shaderFloat16)", compute, err)
			}
			feat := g.Features().SubgroupMatrix
			for _, s := range shapes {
				c := testCase{op: ir.OpMatmul, in: []ir.Type{f32(s.m, s.k), ir.T(s.dt, ir.S(s.n, s.k))}, attrs: tb}
				if s.addend {
					c.in = append(c.in, f32(s.m, s.n))
				}
				scaled := compute == ir.F32 && !s.addend
				if scaled {
					k := int(s.k)
					c.fill = map[int]func(int) float64{0: func(i int) float64 { return math.Ldexp(r.Float64()*4-2, rowExp(i/k)) }}
				}
				name := fmt.Sprintf("%s compute, %s blocks=%v scaled=%v %s subgroup matrices %v", compute, tiles, b.blocks, b.scaled, c, feat)
				n, outs := c.fullNode(t)
				in := c.inputs(r)
				want, err := launchOn(cpu.NewWith(cpu.Options{Round16: compute == ir.F16}), n, outs, in)
				if err != nil {
					t.Fatalf("%s: reference: %v", name, err)
				}
				src, err := wgsl.Generate(n, c.in, outs, wgsl.Options{Limits: g.Limits(), Tuning: tune, Features: g.Features(), Compute: compute})
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				takes := s.dt == ir.F16 || s.dt == ir.F32 && compute == ir.F16 || s.dt.IsBlock() && b.blocks
				if b.scaled && (s.dt == ir.Q4_0 || s.dt == ir.Q5_0 || s.dt == ir.Q8_0) {
					chosen := strings.Contains(string(src.Source), "var<workgroup> ts:")
					if want := feat && s.k%b.kstep == 0; chosen != want {
						t.Errorf("%s: the scaled kernel was chosen: %v, want %v", name, chosen, want)
					}
				}
				if got, want := strings.Contains(string(src.Source), "subgroupMatrixMultiplyAccumulate"), feat && takes && s.k%b.kstep == 0; got != want {
					t.Errorf("%s: the subgroup-matrix kernel was chosen: %v, want %v", name, got, want)
				}
				got, err := launchOn(g, n, outs, in)
				if err != nil {
					t.Fatalf("%s: run: %v", name, err)
				}
				tl := c.tolerance()
				if compute == ir.F16 {
					tl.Rel += 0x1p-10
				}
				if scaled {
					for _, x := range []*tensor.Tensor{got[0], want[0]} {
						for i := range x.NumElements() {
							x.SetFloat64At(i, math.Ldexp(x.Float64At(i), -rowExp(i/int(s.n))))
						}
					}
				}
				if err := compare(got[0], want[0], tl); err != nil {
					t.Errorf("%s: %v", name, err)
				}
			}
			g.Close()
		}
	}
}
