package spirv

import (
	"slices"
	"testing"

	"github.com/tapml/tapml/frontend"
	"github.com/tapml/tapml/frontend/arch"
	"github.com/tapml/tapml/frontend/arch/llama"
	"github.com/tapml/tapml/internal/testenv"
	"github.com/tapml/tapml/ir"
	"github.com/tapml/tapml/runtime"
	"github.com/tapml/tapml/runtime/cpu"
	"github.com/tapml/tapml/tensor"
)

// greedy runs prefill on a prompt, then greedy decode steps.
type greedy struct {
	exec   *runtime.Executor
	dev    runtime.Device
	caches []*runtime.Buffer
	pos    int
}

func newGreedy(t *testing.T, m *ir.Module, d runtime.Device) *greedy {
	t.Helper()
	g := &greedy{exec: runtime.NewExecutor(m, d), dev: d}
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
func (g *greedy) step(t *testing.T, tokens []int32) *tensor.Tensor {
	t.Helper()
	tok, err := g.dev.Upload(tensor.FromInt32([]int{len(tokens)}, tokens))
	if err != nil {
		t.Fatal(err)
	}
	pos, err := g.dev.Upload(tensor.ScalarInt32(int32(g.pos)))
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
	g.dev.Free(tok)
	g.dev.Free(pos)
	for i, c := range out[1:] {
		if c != g.caches[i] {
			t.Fatalf("%s: cache %d was not updated in place", g.dev.Name(), i)
		}
	}
	logits, err := g.dev.Download(out[0])
	if err != nil {
		t.Fatal(err)
	}
	g.dev.Free(out[0])
	g.pos += len(tokens)
	return logits
}

func argmaxOf(x *tensor.Tensor) int32 {
	v := x.Float32s()
	best := 0
	for i := range v {
		if v[i] > v[best] {
			best = i
		}
	}
	return int32(best)
}

// generateBoth runs greedy generation on the SPIR-V device and on the CPU
// reference and checks that every step's logits agree within tl and the
// tokens are the same.
func generateBoth(t *testing.T, m *ir.Module, prompt []int32, steps int, tl tol) []int32 {
	dev := openGPU(t)
	made := dev.Stats().KernelsMade
	gpu := newGreedy(t, m, dev)
	defer gpu.exec.Close()
	ref := newGreedy(t, m, cpu.New())
	want, got := ref.step(t, prompt), gpu.step(t, prompt)
	var wantToks, gotToks []int32
	for s := 0; ; s++ {
		if err := compare(got, want, tl); err != nil {
			t.Fatalf("step %d logits: %v", s, err)
		}
		wantToks = append(wantToks, argmaxOf(want))
		gotToks = append(gotToks, argmaxOf(got))
		if s == steps {
			break
		}
		want = ref.step(t, wantToks[len(wantToks)-1:])
		got = gpu.step(t, gotToks[len(gotToks)-1:])
	}
	if !slices.Equal(gotToks, wantToks) {
		t.Errorf("tokens differ:\n got %v\nwant %v", gotToks, wantToks)
	}
	t.Logf("%d kernels generated; tokens %v", dev.Stats().KernelsMade-made, gotToks)
	return gotToks
}

// TestTinyEndToEnd runs llama.Tiny (random weights) with SPIR-V kernels
// for every node: a 5-token prefill and 20 greedy decode steps match the
// CPU reference (logits within 1e-4: two layers of kernels within their
// own tolerances).
func TestTinyEndToEnd(t *testing.T) {
	m, err := arch.Build("tiny", llama.Tiny, llama.RandomWeights(llama.Tiny, 10))
	if err != nil {
		t.Fatal(err)
	}
	generateBoth(t, m, []int32{1, 72, 101, 108, 108}, 20, tol{Abs: 1e-4, Rel: 1e-4})
}

// TestStories260K generates from llama2.c's stories260K with SPIR-V
// kernels: the same tokens as the CPU reference for 40 greedy steps.
func TestStories260K(t *testing.T) {
	if testing.Short() {
		t.Skip("short") // 40 steps through every kernel on a CPU driver
	}
	model, err := frontend.Load(testenv.Model(t, "stories260K.bin"), frontend.Options{Tokenizer: testenv.Model(t, "tok512.bin")})
	if err != nil {
		t.Fatal(err)
	}
	var prompt []int32
	for _, id := range model.Tokenizer.Encode("Once upon a time", true, false) {
		prompt = append(prompt, int32(id))
	}
	toks := generateBoth(t, model.Module, prompt, 40, tol{Abs: 2e-4, Rel: 1e-4})
	ids := make([]int, len(toks))
	for i, id := range toks {
		ids[i] = int(id)
	}
	t.Logf("text: %q", model.Tokenizer.Decode(ids))
}
