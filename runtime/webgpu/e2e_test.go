package webgpu

import (
	"testing"

	"github.com/tapml/tapml/frontend/arch"
	"github.com/tapml/tapml/frontend/arch/llama"
	"github.com/tapml/tapml/ir"
	"github.com/tapml/tapml/runtime"
	"github.com/tapml/tapml/tensor"
)

// greedy runs a prompt through prefill, then steps greedy decoding, and
// returns the tokens and the logits of every step.
type greedy struct {
	exec   *runtime.Executor
	caches []*runtime.Buffer
	pos    int
}

func newGreedy(t testing.TB, m *ir.Module, d runtime.Device) *greedy {
	t.Helper()
	g := &greedy{exec: runtime.NewExecutor(m, d)}
	for _, p := range m.Func("decode").Params[2:] {
		b, err := d.Upload(tensor.New(p.Type.DType, p.Type.Shape.Sizes()))
		if err != nil {
			t.Fatal(err)
		}
		g.caches = append(g.caches, b)
	}
	return g
}

// step feeds tokens and returns the logits of the last one.
func (g *greedy) step(t testing.TB, tokens []int32) []float32 {
	t.Helper()
	d := g.exec.Device("")
	tok, err := d.Upload(tensor.FromInt32([]int{len(tokens)}, tokens))
	if err != nil {
		t.Fatal(err)
	}
	pos, err := d.Upload(tensor.ScalarInt32(int32(g.pos)))
	if err != nil {
		t.Fatal(err)
	}
	fn := "decode"
	if len(tokens) > 1 {
		fn = "prefill"
	}
	out, err := g.exec.Call(fn, append([]*runtime.Buffer{tok, pos}, g.caches...)...)
	if err != nil {
		t.Fatal(err)
	}
	d.Free(tok)
	d.Free(pos)
	for i, c := range out[1:] {
		if c != g.caches[i] {
			t.Fatalf("%s: cache %d was not updated in place", d.Name(), i)
		}
	}
	logits, err := d.Download(out[0])
	if err != nil {
		t.Fatal(err)
	}
	d.Free(out[0])
	g.pos += len(tokens)
	return logits.Float32s()
}

func argmaxF32(x []float32) int32 {
	best := 0
	for i, v := range x {
		if v > x[best] {
			best = i
		}
	}
	return int32(best)
}

// TestTinyEndToEnd runs llama.Tiny with random weights on the device and
// on the CPU reference: a 5-token prefill, then 20 greedy decode steps.
// The tokens must be the same and the logits within 1e-4 (logits are O(1);
// two layers of f32 kernels each within their own tolerance).
func TestTinyEndToEnd(t *testing.T) {
	m, err := arch.Build("tiny", llama.Tiny, llama.RandomWeights(llama.Tiny, 10))
	if err != nil {
		t.Fatal(err)
	}
	gpu := newGreedy(t, m, testDev)
	defer gpu.exec.Close()
	if err := gpu.exec.Prepare("decode"); err != nil {
		t.Fatal(err)
	}
	if err := gpu.exec.Prepare("prefill"); err != nil {
		t.Fatal(err)
	}
	cpuRun := newGreedy(t, m, refDev)
	prompt := []int32{1, 72, 101, 108, 108}
	const steps = 20 // seed 10 changes token twice in 20 steps
	tl := tol{Abs: 1e-4, Rel: 1e-4}
	var gotToks, wantToks []int32
	want := cpuRun.step(t, prompt)
	got := gpu.step(t, prompt)
	for s := 0; ; s++ {
		compare(t, "logits", tensor.FromFloat32([]int{len(want)}, want), tensor.FromFloat32([]int{len(got)}, got), tl)
		wantToks = append(wantToks, argmaxF32(want))
		gotToks = append(gotToks, argmaxF32(got))
		if s == steps || t.Failed() {
			break
		}
		want = cpuRun.step(t, wantToks[len(wantToks)-1:])
		got = gpu.step(t, gotToks[len(gotToks)-1:])
	}
	if !equalI32(gotToks, wantToks) {
		t.Errorf("tokens differ:\n got %v\nwant %v", gotToks, wantToks)
	}
	t.Logf("tokens %v", gotToks)
	st := testDev.Stats()
	t.Logf("device stats: %+v", st)
}

// TestSteadyStateNoAllocation checks that decode steps after the first
// allocate no GPU buffers: the pool serves every intermediate.
func TestSteadyStateNoAllocation(t *testing.T) {
	m, err := arch.Build("tiny", llama.Tiny, llama.RandomWeights(llama.Tiny, 2))
	if err != nil {
		t.Fatal(err)
	}
	g := newGreedy(t, m, testDev)
	defer g.exec.Close()
	tok := int32(1)
	for i := 0; i < 3; i++ {
		tok = argmaxF32(g.step(t, []int32{tok}))
	}
	before := testDev.Stats()
	for i := 0; i < 5; i++ {
		tok = argmaxF32(g.step(t, []int32{tok}))
	}
	after := testDev.Stats()
	if after.Allocs != before.Allocs {
		t.Errorf("steady decode allocated %d buffers", after.Allocs-before.Allocs)
	}
	if after.Pipelines != before.Pipelines || after.KernelsMade != before.KernelsMade {
		t.Errorf("steady decode compiled %d pipelines, generated %d kernels", after.Pipelines-before.Pipelines, after.KernelsMade-before.KernelsMade)
	}
	t.Logf("per step: %.1f dispatches, %.1f submits", float64(after.Dispatches-before.Dispatches)/5, float64(after.Submits-before.Submits)/5)
}

func equalI32(a, b []int32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
