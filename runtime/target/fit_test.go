package target

import (
	"math"
	"strings"
	"testing"

	"github.com/tapml/tapml/frontend/arch"
	"github.com/tapml/tapml/frontend/arch/llama"
	"github.com/tapml/tapml/internal/testenv/llmtest"
	"github.com/tapml/tapml/ir"
	"github.com/tapml/tapml/runtime"
	"github.com/tapml/tapml/runtime/cpu"
	"github.com/tapml/tapml/runtime/llm"
)

// splitCap is the $TAPML_MAX_BUFFER of these tests: the tiny LLaMA's
// 259x64 f32 table (66,304 bytes) becomes 5 shards, its FFN matrices
// (44,032 bytes) 3 each.
const splitCap = "16KiB"

var splitFeed = [][]int{{1, 72, 101, 108, 108}, {111}, {258}, {0}, {44}}

// logitsOn runs the feed through m on dev and returns every call's logits.
func logitsOn(t *testing.T, m *ir.Module, dev runtime.Device) [][]float32 {
	t.Helper()
	r := llmtest.NewRunnerOn(t, m, dev)
	var out [][]float32
	for _, toks := range splitFeed {
		out = append(out, r.Forward(t, toks))
	}
	return out
}

func tinyModel(t *testing.T) *ir.Module {
	t.Helper()
	m, err := arch.Build("tiny", llama.Tiny, llama.RandomWeights(llama.Tiny, 3))
	if err != nil {
		t.Fatal(err)
	}
	// 16 positions: KV caches of 2 KiB, under the cap.
	if err := llm.FitContext(m, 16); err != nil {
		t.Fatal(err)
	}
	return m
}

// maxDiff is the largest |got - want| / (1 + |want|) over all logits.
func maxDiff(got, want [][]float32) float64 {
	d := 0.0
	for i := range want {
		for j := range want[i] {
			d = max(d, math.Abs(float64(got[i][j])-float64(want[i][j]))/(1+math.Abs(float64(want[i][j]))))
		}
	}
	return d
}

// On webgpu and vulkan with the buffer limit capped, FitWeights splits the
// tiny LLaMA's large weights and its logits (a prompt, then 4 decode
// steps) match the unsplit model's on the CPU reference within 1e-4
// relative to 1 + |logit| (logits are O(1); two layers of f32 kernels,
// each within its own tolerance, as the webgpu end-to-end test states). On
// webgpu the device is asked for the capped limits, so wgpu itself refuses
// the unsplit model's tables.
func TestFitWeightsOnGPUTargets(t *testing.T) {
	want := logitsOn(t, tinyModel(t), cpu.New())
	t.Setenv(runtime.MaxBufferEnv, splitCap)
	for _, name := range []string{"webgpu", "vulkan"} {
		t.Run(name, func(t *testing.T) {
			dev, err := Open(name, "")
			if err != nil {
				t.Fatal(err)
			}
			defer dev.Close()
			m := tinyModel(t)
			fit, err := FitWeights(m, dev)
			if err != nil {
				t.Fatal(err)
			}
			if fit.Limit <= 0 || fit.Limit > 16<<10 || fit.Split.Weights < 7 {
				t.Fatalf("%v: want the table and the FFN matrices split under 16 KiB", fit)
			}
			t.Log(fit)
			got := logitsOn(t, m, dev)
			if d := maxDiff(got, want); d > 1e-4 {
				t.Errorf("split logits differ from the CPU reference by %g relative, want <= 1e-4", d)
			}
		})
	}
	dev, err := Open("webgpu", "")
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	if l := dev.(runtime.BufferLimiter).BufferLimits(); l.MaxBuffer != 16<<10 || l.MaxBinding != 16<<10 {
		t.Errorf("capped webgpu device: %+v, want 16384-byte buffers and bindings", l)
	}
	exec := runtime.NewExecutor(tinyModel(t), dev)
	defer exec.Close()
	sess, err := llm.NewSession(exec)
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	_, err = sess.Forward(splitFeed[0])
	if err == nil || !strings.Contains(err.Error(), "max buffer size") {
		t.Errorf("unsplit model on the capped device: %v, want a buffer size error", err)
	}
}

// The split does not raise device memory: on webgpu the weights take the
// same bytes split or not, and the device's peak buffer memory (weights,
// KV caches, activations, the pool) of the split run stays within that of
// the unsplit run plus 5%: the shards' size classes may round up where the
// whole tensors' did not (at most 1/8 of each, but mostly less), and each
// split reader adds small per-shard activations (ids, masks, partial
// logits of a 259-entry vocabulary).
func TestFitWeightsKeepsMemory(t *testing.T) {
	run := func(capped bool) (weights, peak int64) {
		if capped {
			t.Setenv(runtime.MaxBufferEnv, splitCap)
		}
		dev, err := Open("webgpu", "")
		if err != nil {
			t.Fatal(err)
		}
		defer dev.Close()
		m := tinyModel(t)
		if _, err := FitWeights(m, dev); err != nil {
			t.Fatal(err)
		}
		exec := runtime.NewExecutor(m, dev)
		defer exec.Close()
		sess, err := llm.NewSession(exec)
		if err != nil {
			t.Fatal(err)
		}
		defer sess.Close()
		for _, toks := range splitFeed {
			if _, err := sess.Forward(toks); err != nil {
				t.Fatal(err)
			}
		}
		weights, _ = exec.WeightBytes(dev)
		_, peak = dev.(runtime.MemoryReporter).BufferBytes()
		return weights, peak
	}
	w0, p0 := run(false)
	w1, p1 := run(true)
	t.Logf("weights %d -> %d bytes, peak device memory %d -> %d bytes", w0, w1, p0, p1)
	if w1 != w0 {
		t.Errorf("split weights take %d bytes on the device, unsplit %d", w1, w0)
	}
	if float64(p1) > 1.05*float64(p0) {
		t.Errorf("peak device memory %d bytes split, %d unsplit: more than 5%% above", p1, p0)
	}
}
