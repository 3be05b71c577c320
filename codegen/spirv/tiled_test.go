package spirv

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/tapml/tapml/codegen/wgsl"
	"github.com/tapml/tapml/ir"
)

// tiledStoredCases are prefill products (M > 1, transpose_b) over a weight
// of dtype dt with rows of k elements: an odd number of rows and columns,
// the addend, batch dims, few rows (the scalar kernel) and many (the vec4
// one).
func tiledStoredCases(dt ir.DType, k int64) []testCase {
	w := func(n int64) ir.Type { return ir.T(dt, ir.S(n, k)) }
	tb := ir.Attrs{"transpose_b": ir.BoolAttr(true)}
	return []testCase{
		{op: ir.OpMatmul, in: []ir.Type{f32(37, k), w(33)}, attrs: tb},
		{op: ir.OpMatmul, in: []ir.Type{f32(45, k), w(20), f32(45, 20)}, attrs: tb},
		{op: ir.OpMatmul, in: []ir.Type{f32(2, 19, k), w(12)}, attrs: tb},
		{op: ir.OpMatmul, in: []ir.Type{f32(5, k), w(11)}, attrs: tb},
	}
}

// TestDeviceTiledStored runs the tiled matmul over stored weights on the
// Vulkan device (the vec4 kernel reading block formats as runs of units
// where its tile allows), with the device's f16 feature (f16 weights bound as f16,
// converted by the hardware) and without it (bound as u32 and decoded in
// integer arithmetic, the webgpu target's kernels), under the default
// tuning, the discrete GPUs' and a K-sliced one, against the CPU reference
// within the matmul tolerance (the decoding is exact; the sums are
// k-long dot products in another order). K is a multiple of neither the
// tiles' K step (times the slices) nor, for f16, of 4 (the scalar kernel).
func TestDeviceTiledStored(t *testing.T) {
	g := openGPU(t)
	if !g.Features().F16 {
		t.Fatalf("%s has no f16; lavapipe has it", g.Name())
	}
	r := rand.New(rand.NewPCG(21, 22))
	tunings := []wgsl.Tuning{{}, wgsl.DiscreteTuning(), {Matmul: "32x32x16/4x4+p*4", MatmulMinGroups: 1}}
	kinds := map[string]int{} // f16 bindings seen
	for _, s := range []struct {
		dt ir.DType
		k  int64
	}{{ir.F16, 72}, {ir.F16, 37}, {ir.BF16, 72}, {ir.Q4_0, 96}, {ir.Q8_0, 160}, {ir.Q4_K, 256}} {
		for _, c := range tiledStoredCases(s.dt, s.k) {
			n, outs := c.fullNode(t)
			in := c.inputs(r)
			want, err := reference(n, outs, in)
			if err != nil {
				t.Fatalf("%s: reference: %v", c, err)
			}
			for _, feat := range []wgsl.Features{{}, g.Features()} {
				for _, tu := range tunings {
					name := fmt.Sprintf("%s %s f16=%v tuning=%+v", c, s.dt, feat.F16, tu)
					opts := Options{Limits: kernelLimits(g), Tuning: tu, Features: feat}
					src, _, got := generateRun(t, g, name, n, c.in, outs, opts, in)
					hw := false
					for _, b := range []string{"f16", "vec4<f16>"} {
						if strings.Contains(src, "var<storage, read> in1: array<"+b+">") {
							hw = true
							kinds[b]++
						}
					}
					if want := s.dt == ir.F16 && feat.F16; hw != want {
						t.Errorf("%s: the weight is bound as f16: %v, want %v", name, hw, want)
					}
					if strings.Contains(src, "// b is read as runs of") {
						kinds["runs"]++
					}
					if err := compare(got[0], want[0], c.tolerance()); err != nil {
						t.Errorf("%s: %v", name, err)
					}
				}
			}
		}
	}
	if kinds["f16"] == 0 || kinds["vec4<f16>"] == 0 || kinds["runs"] == 0 {
		t.Errorf("f16 weights bound as f16 %d times, as vec4<f16> %d times, block formats read as runs of units %d times: want each kernel",
			kinds["f16"], kinds["vec4<f16>"], kinds["runs"])
	}
}

// TestDeviceTiledStoredWrongIndex checks that wrong_index changes the
// output of the tiled matmul over an f16 weight read as f16.
func TestDeviceTiledStoredWrongIndex(t *testing.T) {
	g := openGPU(t)
	r := rand.New(rand.NewPCG(23, 24))
	c := testCase{op: ir.OpMatmul, in: []ir.Type{f32(37, 72), ir.T(ir.F16, ir.S(33, 72))}, attrs: ir.Attrs{"transpose_b": ir.BoolAttr(true)}}
	checkWrongIndex(t, g, r, c, c.tolerance())
}
