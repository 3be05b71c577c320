package vulkan

import (
	"math"
	"os"
	"testing"

	"github.com/tapml/tapml/codegen"
	"github.com/tapml/tapml/frontend/arch"
	"github.com/tapml/tapml/frontend/arch/llama"
	"github.com/tapml/tapml/ir"
	"github.com/tapml/tapml/runtime"
	"github.com/tapml/tapml/runtime/cpu"
	"github.com/tapml/tapml/runtime/llm"
)

// TestDecodeReplays generates with a tiny LLaMA (random weights) through
// llm.Session, the path `tapmlc run` takes, and checks two things per
// device configuration: every step's logits match the CPU reference
// (max |Δ| <= 1e-4·(1 + |want|): two layers of kernels that each keep
// within about 1e-5 relative of the reference, as codegen/spirv's tests
// check), and from the second decode step on, a step records no command
// buffer: all its submissions replay recordings of earlier steps. The
// staging configuration sends every transfer through a 4 KiB staging
// buffer (the discrete-GPU path, in parts) and suballocates from 64 KiB
// blocks (tensors larger than a block get their own).
func TestDecodeReplays(t *testing.T) {
	m, err := arch.Build("tiny", llama.Tiny, llama.RandomWeights(llama.Tiny, 3))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		dev  func() *Device
	}{
		{"shared", func() *Device { return testDev }},
		{"staging", func() *Device {
			return openTest(t, Options{ForceStaging: true, StagingBytes: 4096, BlockBytes: 64 << 10})
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := c.dev()
			gpu, ref := newSession(t, m, d), newSession(t, m, cpu.New())
			prompt := []int{1, 72, 101, 108, 108}
			want, got := forward(t, ref, prompt), forward(t, gpu, prompt)
			for step := 0; step < 8; step++ {
				for i := range want {
					if diff := math.Abs(float64(got[i] - want[i])); diff > 1e-4*(1+math.Abs(float64(want[i]))) {
						t.Fatalf("step %d logit %d: got %g, want %g", step, i, got[i], want[i])
					}
				}
				tok := []int{int(argmax(want))}
				before := d.Stats()
				want, got = forward(t, ref, tok), forward(t, gpu, tok)
				after := d.Stats()
				if step >= 1 && (after.Recorded != before.Recorded || after.Replayed-before.Replayed != after.Submits-before.Submits) {
					t.Errorf("decode step %d recorded %d command buffers and replayed %d of %d submissions; want all replayed",
						step, after.Recorded-before.Recorded, after.Replayed-before.Replayed, after.Submits-before.Submits)
				}
			}
			st := d.Stats()
			t.Logf("%s: %+v", d.Name(), st)
			if c.name == "staging" && (st.Staged == 0 || st.Allocs < 3) {
				t.Errorf("staging configuration staged %d bytes in %d blocks; want staging and several blocks", st.Staged, st.Allocs)
			}
		})
	}
}

func newSession(t *testing.T, m *ir.Module, d runtime.Device) *llm.Session {
	t.Helper()
	exec := runtime.NewExecutor(m, d)
	s, err := llm.NewSession(exec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		s.Close()
		exec.Close()
	})
	return s
}

func forward(t *testing.T, s *llm.Session, tokens []int) []float32 {
	t.Helper()
	logits, err := s.Forward(tokens)
	if err != nil {
		t.Fatal(err)
	}
	return logits
}

func argmax(x []float32) int {
	best := 0
	for i, v := range x {
		if v > x[best] {
			best = i
		}
	}
	return best
}

// TestBarriers checks where the device puts barriers: none between
// independent dispatches, one before a dispatch that reads their outputs,
// and one before a dispatch whose new output reuses the range of a buffer
// freed while a recorded dispatch still reads it (write after read).
func TestBarriers(t *testing.T) {
	d := openTest(t, Options{})
	add, outs := mkNode(t, 1, ir.OpAdd, nil, f32(64), f32(64))
	a, b := upload(t, d, seq(0, 64)), upload(t, d, seq(100, 64))
	if err := d.Sync(); err != nil {
		t.Fatal(err)
	}
	barriers := func() int { return d.Stats().Barriers }
	b0 := barriers()
	x := launch(t, d, add, outs, a, a)[0]
	y := launch(t, d, add, outs, b, b)[0]
	if n := barriers() - b0; n != 0 {
		t.Errorf("%d barriers between independent dispatches, want 0", n)
	}
	z := launch(t, d, add, outs, x, y)[0]
	if n := barriers() - b0; n != 1 {
		t.Errorf("%d barriers before a dispatch reading both outputs, want 1", n)
	}
	// w reads a; a is freed and its range (first fit) becomes v.
	w := launch(t, d, add, outs, a, b)[0]
	aRange := accessOf(a.Handle.(*vbuf))
	d.Free(a)
	v := launch(t, d, add, outs, b, b)[0]
	if accessOf(v.Handle.(*vbuf)) != aRange {
		t.Fatalf("v is %+v, not a's former range %+v: the test needs first fit", accessOf(v.Handle.(*vbuf)), aRange)
	}
	if n := barriers() - b0; n != 2 {
		t.Errorf("%d barriers after a dispatch wrote a range that one before it reads, want 2", n)
	}
	for _, c := range []struct {
		buf  *runtime.Buffer
		want func(i int) float32
	}{
		{z, func(i int) float32 { return 2*float32(i) + 2*float32(100+i) }},
		{w, func(i int) float32 { return float32(i) + float32(100+i) }},
		{v, func(i int) float32 { return 2 * float32(100+i) }},
	} {
		got := download(t, d, c.buf).Float32s()
		for i, g := range got {
			if g != c.want(i) {
				t.Fatalf("element %d = %g, want %g", i, g, c.want(i))
			}
		}
	}
}

// TestHandWrittenKernel runs SPIR-V that no tapml translator wrote
// (testdata/double.spvasm, assembled with spirv-as into double.spv): one
// read_write binding updated in place, data[i] = 2·data[i] + i for i <
// 100. LaunchKernel returns the input buffer itself as the output.
func TestHandWrittenKernel(t *testing.T) {
	bin, err := os.ReadFile("testdata/double.spv")
	if err != nil {
		t.Fatal(err)
	}
	ty := f32(100)
	k := &codegen.Kernel{Language: "spirv", Op: ir.OpProbe, NodeID: 900, Source: bin, Entry: "main",
		Bindings:      []codegen.Binding{{Index: 0, Name: "data", Access: codegen.ReadWrite, Type: ty, Input: 0, Output: 0}},
		WorkgroupSize: [3]int{64, 1, 1}, Grid: [3]int{2, 1, 1}}
	x := seq(0, 100)
	in := upload(t, testDev, x.Clone())
	defer testDev.Free(in)
	out, err := testDev.LaunchKernel(&ir.Node{ID: 900, Op: ir.OpProbe}, k, []*runtime.Buffer{in})
	if err != nil {
		t.Fatal(err)
	}
	if out[0] != in {
		t.Fatal("the read_write binding did not return its input buffer")
	}
	for i, v := range download(t, testDev, out[0]).Float32s() {
		if want := 2*x.Float32s()[i] + float32(i); v != want {
			t.Fatalf("data[%d] = %g, want %g", i, v, want)
		}
	}
}
