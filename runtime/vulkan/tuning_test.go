package vulkan

import (
	"math"
	"strings"
	"testing"

	"github.com/tapml/tapml/codegen/wgsl"
	"github.com/tapml/tapml/frontend/arch"
	"github.com/tapml/tapml/frontend/arch/llama"
	"github.com/tapml/tapml/ir"
)

// TestPrefillTunings runs a 40-token prefill of the tiny LLaMA under the
// tunings a discrete GPU takes (its products then use the vec4 tiles with
// K split among slices) and under one with +t's vec4 stores, and compares
// the logits with those of the CPU driver's own tuning (the scalar tile).
// Only the order of f32 sums differs between them: over two layers of
// K <= 172 that moves the logits by well under 1e-6 of their norm (3e-7
// on lavapipe), while a wrong index or a slice's sum lost or negated
// moves them by O(1) (1.6 when the tree subtracts); the bound is 1e-4.
func TestPrefillTunings(t *testing.T) {
	d := openTest(t, Options{})
	m, err := arch.Build("tiny", llama.Tiny, llama.RandomWeights(llama.Tiny, 5))
	if err != nil {
		t.Fatal(err)
	}
	prompt := make([]int, 40)
	for i := range prompt {
		prompt[i] = (i*37 + 11) % llama.Tiny.Vocab
	}
	want := forward(t, newSession(t, m, d), prompt)
	for _, tu := range []wgsl.Tuning{
		wgsl.DiscreteTuning(),
		{Matmul: "32x32x16/4x4+p+t*4,16x16x16/4x4+d+t*8", MatmulMinGroups: 264},
	} {
		t.Run(tu.Matmul, func(t *testing.T) {
			// The premise: the q projection (40x64 by 64x64ᵀ) splits K.
			q, outs := mkNode(t, 1, ir.OpMatmul, ir.Attrs{"transpose_b": ir.BoolAttr(true)}, f32(40, 64), f32(64, 64))
			k, err := wgsl.Generate(q, []ir.Type{f32(40, 64), f32(64, 64)}, outs, wgsl.Options{Limits: d.Limits(), Tuning: tu})
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(k.Source), "if (slice != 0u)") {
				t.Fatalf("the q projection does not split K under %s", tu.Matmul)
			}
			d.SetTuning(tu)
			defer d.SetTuning(wgsl.Tuning{})
			got := forward(t, newSession(t, m, d), prompt)
			var num, den float64
			for i := range want {
				e := float64(got[i]) - float64(want[i])
				num += e * e
				den += float64(want[i]) * float64(want[i])
			}
			if rel := math.Sqrt(num / den); !(rel < 1e-4) {
				t.Errorf("logits differ from the scalar tile's by %.3g (relative L2), want < 1e-4", rel)
			} else {
				t.Logf("relative L2 difference %.3g", rel)
			}
		})
	}
}
