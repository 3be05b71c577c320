package vulkan

import (
	"testing"

	"github.com/tapml/tapml/frontend/arch"
	"github.com/tapml/tapml/frontend/arch/llama"
	"github.com/tapml/tapml/runtime"
	"github.com/tapml/tapml/runtime/llm"
)

// BenchmarkDecodeStep times decode steps of the tiny LLaMA (a few hundred
// small dispatches, so mostly host time on any device) and reports the
// host-side cost per dispatch. On lavapipe the kernels run on the same
// CPU, so ns/dispatch there bounds the host cost from above.
func BenchmarkDecodeStep(b *testing.B) {
	m, err := arch.Build("tiny", llama.Tiny, llama.RandomWeights(llama.Tiny, 3))
	if err != nil {
		b.Fatal(err)
	}
	exec := runtime.NewExecutor(m, testDev)
	defer exec.Close()
	s, err := llm.NewSession(exec)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Forward([]int{1, 2, 3}); err != nil {
		b.Fatal(err)
	}
	before := testDev.Stats()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if s.Pos == s.MaxSeq {
			s.Pos = 1
		}
		if _, err := s.Forward([]int{5}); err != nil {
			b.Fatal(err)
		}
	}
	after := testDev.Stats()
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(after.Dispatches-before.Dispatches), "ns/dispatch")
	b.ReportMetric(float64(after.Recorded-before.Recorded)/float64(b.N), "recorded/step")
}
