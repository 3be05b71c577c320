package target_test

import (
	"math"
	"testing"

	"github.com/tapml/tapml/artifact"
	"github.com/tapml/tapml/ir"
	"github.com/tapml/tapml/runtime"
	"github.com/tapml/tapml/runtime/cpu"
	"github.com/tapml/tapml/runtime/llm"
	"github.com/tapml/tapml/runtime/target"
)

// A prefill's kernels, whose shapes the prompt fixes, are made before its
// first node runs (the executor hands a new plan to the vulkan device's
// PrepareTypes, which makes them on several goroutines): no node of the
// prefill makes a kernel as it launches, a second prompt length makes the
// kernels of its own shapes ahead too, and the logits are the CPU
// reference's (to f32 rounding over the tiny model's sums: 1e-5 of their
// range).
func TestPrefillKernelsMadeAhead(t *testing.T) {
	m, vk := tinyOnVulkan(t)
	lowered, err := artifact.Lower(m, "vulkan", func(op ir.Op) bool { return target.Supports("vulkan", op) })
	if err != nil {
		t.Fatal(err)
	}
	exec := runtime.NewExecutor(lowered, vk)
	var atLaunch []int // kernels made when each node ran
	exec.OnNode = func(*ir.Node, []*runtime.Buffer, []*runtime.Buffer) error {
		atLaunch = append(atLaunch, vk.Stats().KernelsMade)
		return nil
	}
	ref := runtime.NewExecutor(m, cpu.New())
	// forward runs the prompt in a fresh session of e: its logits.
	forward := func(e *runtime.Executor, prompt []int) []float32 {
		s, err := llm.NewSession(e)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		logits, err := s.Forward(prompt)
		if err != nil {
			t.Fatal(err)
		}
		return logits
	}
	for _, prompt := range [][]int{{1, 2, 3, 4, 5}, {6, 7, 8, 9, 10, 11, 12, 13, 14}} {
		before := vk.Stats().KernelsMade
		atLaunch = atLaunch[:0]
		got := forward(exec, prompt)
		after := vk.Stats().KernelsMade
		if after == before || len(atLaunch) == 0 || atLaunch[0] != after {
			t.Errorf("prompt of %d: %d kernels made before the prefill, %d after, %v as its nodes ran; want all made before the first",
				len(prompt), before, after, atLaunch)
		}
		want := forward(ref, prompt)
		var diff, scale float64
		for i := range want {
			diff, scale = max(diff, math.Abs(float64(got[i]-want[i]))), max(scale, math.Abs(float64(want[i])))
		}
		if diff > 1e-5*scale {
			t.Errorf("prompt of %d: logits differ from the CPU reference's by %g (their range %g)", len(prompt), diff, scale)
		}
	}
}
