package target_test

import (
	"testing"

	"github.com/tapml/tapml/artifact"
	"github.com/tapml/tapml/codegen/spirv"
	"github.com/tapml/tapml/frontend/arch"
	"github.com/tapml/tapml/frontend/arch/llama"
	"github.com/tapml/tapml/internal/testenv/webgputest"
	"github.com/tapml/tapml/ir"
	"github.com/tapml/tapml/runtime"
	"github.com/tapml/tapml/runtime/llm"
	"github.com/tapml/tapml/runtime/target"
	"github.com/tapml/tapml/runtime/vulkan"
)

// TestDecodeDispatches counts the kernels one greedy decode step of the
// tiny LLaMA launches on the vulkan and webgpu targets, as tapmlc run drives it
// (Session.Next), before and after the passes that run applies
// (artifact.Lower). The counts are exact: a change to them is a change to
// the work of every decode step, and should be deliberate.
func TestDecodeDispatches(t *testing.T) {
	m, vk := tinyOnVulkan(t)
	wg := webgputest.Device(t)
	// Per layer of the model as built: 2 rms_norm, 7 matmul (q, k, v, o,
	// gate, up, down), 2 rope, 2 kv_write, attention, silu, mul and 2
	// residual adds (18); then the embedding gather, the slice of the last
	// position, the final norm and the classifier; plus the argmax. The
	// reshapes are views. Lowered: the slice, whole in a decode step, is
	// gone (canonicalize), silu·mul is one fused_elementwise, each
	// residual add is its matmul's addend, each norm is folded into
	// the products that read it (the final norm into the classifier) and
	// gate, up and silu·mul are one rms_norm_swiglu, q, k and v one
	// rms_norm_qkv, the ropes of q and k and both kv_writes one
	// rope_kv_write (6 a layer).
	for _, dev := range []struct {
		target     string
		d          runtime.Device
		dispatches func() int
	}{
		{"vulkan", vk, func() int { return vk.Stats().Dispatches }},
		{"webgpu", wg, func() int { return wg.Stats().Dispatches }},
	} {
		lowered, err := artifact.Lower(m, dev.target, func(op ir.Op) bool { return target.Supports(dev.target, op) })
		if err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct {
			name string
			m    *ir.Module
			want int
		}{
			{"as built", m, 2*18 + 4 + 1},
			{"lowered", lowered, 2*6 + 2 + 1},
		} {
			exec := runtime.NewExecutor(tc.m, dev.d)
			s, err := llm.NewSession(exec)
			if err != nil {
				t.Fatal(err)
			}
			greedy := llm.NewSampler(0, 0, 1)
			ids, err := s.Continue([]int{1, 2, 3}, 2, greedy) // kernels compiled
			if err != nil {
				t.Fatal(err)
			}
			// A greedy step on webgpu and vulkan launches the one after it
			// (llm's lookahead): the second Next's dispatches are one step.
			next, err := s.Next(ids[len(ids)-1:], greedy)
			if err != nil {
				t.Fatal(err)
			}
			before := dev.dispatches()
			if _, err := s.Next([]int{next}, greedy); err != nil {
				t.Fatal(err)
			}
			if got := dev.dispatches() - before; got != tc.want {
				t.Errorf("%s, %s: %d dispatches a decode step, want %d", dev.target, tc.name, got, tc.want)
			}
			s.Close()
			exec.Close()
		}
	}
}

// tinyOnVulkan builds the tiny LLaMA (random weights from a fixed seed)
// and opens a vulkan device without a pipeline cache, closed at the
// test's end.
func tinyOnVulkan(t *testing.T) (*ir.Module, *vulkan.Device) {
	t.Helper()
	m, err := arch.Build("tiny", llama.Tiny, llama.RandomWeights(llama.Tiny, 3))
	if err != nil {
		t.Fatal(err)
	}
	vk, err := vulkan.Open(vulkan.Options{Generate: spirv.Generate, PipelineCacheDir: "-"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { vk.Close() })
	return m, vk
}
