package llvm_test

import (
	"fmt"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/tapml/tapml/frontend/arch"
	"github.com/tapml/tapml/frontend/arch/llama"
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
	m, err := arch.Build("tiny", llama.Tiny, llama.RandomWeights(llama.Tiny, 7))
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
// stories15M-shaped model (random weights) on cpu and on llvm in one run.
// The two devices take turns, one decode step each per iteration, so that
// both see the same machine load (it varies a lot on shared machines); the
// metrics are each device's tokens/s (steps over total time, and one over
// the median step time, which shared machines disturb less) and the ratios. Sessions restart when
// the context (256) is full, so positions cycle through 1..256.
// llvm1w is the llvm device with one worker (Options.Workers 1): on a
// machine shared with other work, threads that wait for each other can cost
// more than they gain. Compilation (or loading from the kernel cache)
// happens before the timer.
func BenchmarkDecodeStories15M(b *testing.B) {
	m, err := arch.Build("stories15M", llama.Stories15M, llama.RandomWeights(llama.Stories15M, 1))
	if err != nil {
		b.Fatal(err)
	}
	type runner struct {
		name    string
		ex      *runtime.Executor
		s       *llm.Session
		tok     int
		elapsed time.Duration
		steps   []time.Duration
	}
	var rs []*runner
	for _, name := range []string{"cpu", "llvm", "llvm1w"} {
		var dev runtime.Device = cpu.New()
		if name == "llvm" {
			dev = newDevice(b, llvm.Options{})
		}
		if name == "llvm1w" { // one worker: no launch is split over threads

			dev = newDevice(b, llvm.Options{Workers: 1})
		}
		ex := runtime.NewExecutor(m, dev)
		defer ex.Close()
		if err := ex.Prepare("decode"); err != nil {
			b.Fatal(err)
		}
		rs = append(rs, &runner{name: name, ex: ex, tok: 1})
	}
	step := func(r *runner) {
		if r.s == nil || r.s.Pos >= r.s.MaxSeq {
			if r.s != nil {
				r.s.Close()
			}
			if r.s, err = llm.NewSession(r.ex); err != nil {
				b.Fatal(err)
			}
		}
		logits, err := r.s.Forward([]int{r.tok})
		if err != nil {
			b.Fatalf("%s: %v", r.name, err)
		}
		r.tok = llm.Argmax(logits)
	}
	for _, r := range rs {
		step(r) // compile or load kernels, upload weights
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for _, r := range rs {
			t0 := time.Now()
			step(r)
			d := time.Since(t0)
			r.elapsed += d
			r.steps = append(r.steps, d)
		}
	}
	b.StopTimer()
	tps, med := map[string]float64{}, map[string]float64{}
	for _, r := range rs {
		tps[r.name] = float64(b.N) / r.elapsed.Seconds()
		slices.Sort(r.steps)
		med[r.name] = 1 / r.steps[len(r.steps)/2].Seconds()
		b.ReportMetric(tps[r.name], r.name+"-tokens/s")
		b.ReportMetric(med[r.name], r.name+"-median-tokens/s")
		r.s.Close()
	}
	b.ReportMetric(tps["llvm"]/tps["cpu"], "llvm/cpu")
	b.ReportMetric(med["llvm"]/med["cpu"], "llvm/cpu-median")
}
