package llm_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/tapml/tapml/codegen/spirv"
	"github.com/tapml/tapml/frontend/arch"
	"github.com/tapml/tapml/frontend/arch/llama"
	"github.com/tapml/tapml/runtime"
	"github.com/tapml/tapml/runtime/cpu"
	"github.com/tapml/tapml/runtime/llm"
	"github.com/tapml/tapml/runtime/target"
	"github.com/tapml/tapml/runtime/vulkan"
)

// TestLookahead runs greedy generation on the devices whose downloads can
// start before the host launches more (runtime.AsyncDownloader), so that
// each Next launches the following decode step before it waits: the ids
// must be the CPU reference's, the steps must have been launched ahead
// (Stats.Ahead), none may be left at the horizon, and feeding a token other
// than the one returned must drop the step launched for it and still give
// the reference's ids. On vulkan, whose steps replay a capture on the
// session's token and position buffers, a step launched ahead (its token
// copied there by the device) must replay too: each steady step submits
// an already recorded command buffer and records none.
func TestLookahead(t *testing.T) {
	m, err := arch.Build("tiny", llama.Tiny, llama.RandomWeights(llama.Tiny, 7))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		open func() (runtime.Device, error)
	}{
		{"webgpu", func() (runtime.Device, error) { return target.Open("webgpu", "") }},
		{"vulkan", func() (runtime.Device, error) { return target.Open("vulkan", "") }},
		// Every transfer through a small staging buffer, as on a discrete GPU.
		{"vulkan staged", func() (runtime.Device, error) {
			return vulkan.Open(vulkan.Options{Generate: spirv.Generate, PipelineCacheDir: "-", ForceStaging: true, StagingBytes: 4096})
		}},
	} {
		name := c.name
		t.Run(name, func(t *testing.T) {
			dev, err := c.open()
			if err != nil {
				t.Fatal(err)
			}
			defer dev.Close()
			if _, ok := dev.(runtime.AsyncDownloader); !ok {
				t.Fatalf("%s does not start downloads asynchronously", dev.Name())
			}
			session := func(d runtime.Device) *llm.Session {
				exec := runtime.NewExecutor(m, d)
				exec.Capture = true // as tapmlc run's
				t.Cleanup(exec.Close)
				s, err := llm.NewSession(exec)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(s.Close)
				return s
			}
			ref, s := session(cpu.New()), session(dev)
			greedy := llm.NewSampler(0, 0, 1)
			next := 0
			prompt := []int{1, 2, 3}
			want, err := ref.Continue(prompt, 12, greedy)
			if err != nil {
				t.Fatal(err)
			}
			got, err := s.Continue(prompt, 12, greedy)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Fatalf("ids (-cpu +%s with lookahead):\n%s", name, diff)
			}
			if s.Stats.Ahead != 12 || s.Pos != ref.Pos {
				t.Errorf("%d of 12 decode steps launched ahead, position %d (cpu %d)", s.Stats.Ahead, s.Pos, ref.Pos)
			}
			// Off the greedy path: Next launches a step for the id it returns;
			// another token fed instead drops that step and decides.
			step := func(tokens ...int) {
				t.Helper()
				got, err := s.Next(tokens, greedy)
				if err != nil {
					t.Fatal(err)
				}
				want, err := ref.Next(tokens, greedy)
				if err != nil {
					t.Fatal(err)
				}
				if got != want {
					t.Fatalf("after %v: %d, cpu %d", tokens, got, want)
				}
				next = got
			}
			step(5)
			step((next + 1) % llama.Tiny.Vocab)
			for range 3 {
				step(next)
			}
			if s.Stats.Ahead != 12+3 || s.Pos != ref.Pos {
				t.Errorf("%d decode steps launched ahead and taken (want 15), position %d (cpu %d)", s.Stats.Ahead, s.Pos, ref.Pos)
			}
			vk, ok := dev.(*vulkan.Device)
			if !ok {
				return
			}
			before := vk.Stats()
			const steps = 4
			for range steps {
				step(next)
			}
			after := vk.Stats()
			if after.Recorded != before.Recorded || after.Replayed-before.Replayed != after.Submits-before.Submits ||
				after.CallsReplayed-before.CallsReplayed != steps {
				t.Errorf("%d steady steps launched ahead recorded %d command buffers (want 0), replayed %d of %d submissions (want all) and %d captured calls (want %d)",
					steps, after.Recorded-before.Recorded, after.Replayed-before.Replayed, after.Submits-before.Submits, after.CallsReplayed-before.CallsReplayed, steps)
			}
		})
	}
}
