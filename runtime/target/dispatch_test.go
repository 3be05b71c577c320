package target

import (
	"testing"

	"github.com/tapml/tapml/artifact"
	"github.com/tapml/tapml/frontend/arch"
	"github.com/tapml/tapml/frontend/arch/llama"
	"github.com/tapml/tapml/ir"
	"github.com/tapml/tapml/runtime"
	"github.com/tapml/tapml/runtime/llm"
	"github.com/tapml/tapml/runtime/vulkan"
)

// TestDecodeDispatches counts the kernels one greedy decode step of the
// tiny LLaMA launches on the vulkan target, as tapmlc run drives it
// (Session.Next), before and after the passes that run applies
// (artifact.Lower). The counts are exact: a change to them is a change to
// the work of every decode step, and should be deliberate.
func TestDecodeDispatches(t *testing.T) {
	m, err := arch.Build("tiny", llama.Tiny, llama.RandomWeights(llama.Tiny, 3))
	if err != nil {
		t.Fatal(err)
	}
	lowered, err := artifact.Lower(m, "vulkan", func(op ir.Op) bool { return Supports("vulkan", op) })
	if err != nil {
		t.Fatal(err)
	}
	dev, err := Open("vulkan", "")
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	vk := dev.(*vulkan.Device)
	// Per layer of the model as built: 2 rms_norm, 7 matmul (q, k, v, o,
	// gate, up, down), 2 rope, 2 kv_write, attention, silu, mul and 2
	// residual adds (18); then the embedding gather, the slice of the last
	// position, the final norm and the classifier; plus the argmax. The
	// reshapes are views. Lowered: the slice, whole in a decode step, is
	// gone (canonicalize), silu·mul is one fused_elementwise and each
	// residual add is its matmul's addend (15 a layer).
	for _, tc := range []struct {
		name string
		m    *ir.Module
		want int
	}{
		{"as built", m, 2*18 + 4 + 1},
		{"lowered", lowered, 2*15 + 3 + 1},
	} {
		exec := runtime.NewExecutor(tc.m, dev)
		s, err := llm.NewSession(exec)
		if err != nil {
			t.Fatal(err)
		}
		greedy := llm.NewSampler(0, 0, 1)
		ids, err := s.Continue([]int{1, 2, 3}, 2, greedy) // kernels compiled
		if err != nil {
			t.Fatal(err)
		}
		before := vk.Stats().Dispatches
		if _, err := s.Next(ids[len(ids)-1:], greedy); err != nil {
			t.Fatal(err)
		}
		if got := vk.Stats().Dispatches - before; got != tc.want {
			t.Errorf("%s: %d dispatches a decode step, want %d", tc.name, got, tc.want)
		}
		s.Close()
		exec.Close()
	}
}
