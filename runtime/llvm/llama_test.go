package llvm_test

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/tapml/tapml/frontend/llama"
	"github.com/tapml/tapml/ir"
	"github.com/tapml/tapml/runtime"
	"github.com/tapml/tapml/runtime/cpu"
	"github.com/tapml/tapml/runtime/llm"
	"github.com/tapml/tapml/runtime/llvm"
)

// greedy runs prompt through prefill, then steps decode greedily, and
// returns the tokens chosen and the logits of every step.
func greedy(t testing.TB, m *ir.Module, dev runtime.Device, prompt []int, steps int, prepare bool) ([]int, [][]float32) {
	t.Helper()
	ex := runtime.NewExecutor(m, dev)
	defer ex.Close()
	for _, fn := range []string{"prefill", "decode"} {
		if !prepare {
			break
		}
		if err := ex.Prepare(fn); err != nil {
			t.Fatalf("%s: prepare %s: %v", dev.Name(), fn, err)
		}
	}
	s, err := llm.NewSession(ex)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	logits, err := s.Forward(prompt)
	if err != nil {
		t.Fatalf("%s: prefill: %v", dev.Name(), err)
	}
	var toks []int
	var all [][]float32
	for i := 0; i < steps; i++ {
		all = append(all, append([]float32(nil), logits...))
		tok := llm.Argmax(logits)
		toks = append(toks, tok)
		if logits, err = s.Forward([]int{tok}); err != nil {
			t.Fatalf("%s: decode step %d: %v", dev.Name(), i, err)
		}
	}
	return toks, all
}

// TestLlamaTiny runs llama.Tiny with random weights end to end (prefill of
// a 5-token prompt, then 20 greedy decode steps) on llvm and on cpu: the
// tokens must be the same, and the logits close (matmul reassociation is
// the only systematic difference; 1e-4 absolute on logits of magnitude
// about 1 leaves room for its accumulation through 2 layers).
func TestLlamaTiny(t *testing.T) {
	m, err := llama.Build("tiny", llama.Tiny, llama.RandomWeights(llama.Tiny, 7))
	if err != nil {
		t.Fatal(err)
	}
	prompt := []int{1, 84, 104, 101, 32}
	want, wantLogits := greedy(t, m, cpu.New(), prompt, 20, true)
	for _, prepare := range []bool{true, false} {
		t.Run(fmt.Sprintf("prepare=%v", prepare), func(t *testing.T) {
			dev := newDevice(t, llvm.Options{})
			got, gotLogits := greedy(t, m, dev, prompt, 20, prepare)
			checkGreedy(t, got, want, gotLogits, wantLogits)
			s := dev.Stats()
			t.Logf("device stats: %+v", s)
			if s.Modules != 2 {
				t.Errorf("built %d modules, want 2 (decode, and prefill for one prompt length)", s.Modules)
			}
		})
	}
}

func checkGreedy(t *testing.T, got, want []int, gotLogits, wantLogits [][]float32) {
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("step %d: llvm chose token %d, cpu %d (llvm %v, cpu %v)", i, got[i], want[i], got, want)
		}
	}
	worst := 0.0
	for i := range wantLogits {
		for j := range wantLogits[i] {
			worst = math.Max(worst, math.Abs(float64(gotLogits[i][j]-wantLogits[i][j])))
		}
	}
	t.Logf("tokens %v; largest logit difference %.3g", got, worst)
	if worst > 1e-4 {
		t.Errorf("logits differ by up to %.3g, want <= 1e-4", worst)
	}
}

// BenchmarkDecodeStories15M measures greedy decode tokens/s of a
// stories15M-shaped model (random weights) on llvm and on cpu in one run.
// Compilation (or loading from the kernel cache) happens before the timer.
func BenchmarkDecodeStories15M(b *testing.B) {
	m, err := llama.Build("stories15M", llama.Stories15M, llama.RandomWeights(llama.Stories15M, 1))
	if err != nil {
		b.Fatal(err)
	}
	for _, name := range []string{"cpu", "llvm"} {
		b.Run(name, func(b *testing.B) {
			var dev runtime.Device = cpu.New()
			if name == "llvm" {
				dev = newDevice(b, llvm.Options{})
			}
			ex := runtime.NewExecutor(m, dev)
			defer ex.Close()
			if err := ex.Prepare("decode"); err != nil {
				b.Fatal(err)
			}
			var s *llm.Session
			tok := 1
			step := func() {
				if s == nil || s.Pos >= s.MaxSeq {
					if s != nil {
						s.Close()
					}
					if s, err = llm.NewSession(ex); err != nil {
						b.Fatal(err)
					}
				}
				logits, err := s.Forward([]int{tok})
				if err != nil {
					b.Fatal(err)
				}
				tok = llm.Argmax(logits)
			}
			step() // compile or load kernels, upload weights
			b.ResetTimer()
			start := time.Now()
			for i := 0; i < b.N; i++ {
				step()
			}
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "tokens/s")
			b.StopTimer()
			if s != nil {
				s.Close()
			}
		})
	}
}
