package vulkan

import (
	"testing"
	"time"

	"github.com/tapml/tapml/frontend/arch"
	"github.com/tapml/tapml/frontend/arch/llama"
	"github.com/tapml/tapml/runtime"
	"github.com/tapml/tapml/tensor"
)

// BenchmarkDecodeStep times decode steps of the tiny LLaMA (40 small
// dispatches), walking the graph every step and replaying a captured
// step, as llm.Session drives them (the token and position written into
// the same buffers, the logits downloaded). It reports the host's time in
// Executor.Call per step and per dispatch: the walk's or the replay's cost
// alone, without the submission and the wait, which on lavapipe include
// running the kernels on the same CPU.
func BenchmarkDecodeStep(b *testing.B) {
	m, err := arch.Build("tiny", llama.Tiny, llama.RandomWeights(llama.Tiny, 3))
	if err != nil {
		b.Fatal(err)
	}
	for _, capture := range []bool{false, true} {
		name := "walk"
		if capture {
			name = "replay"
		}
		b.Run(name, func(b *testing.B) {
			exec := runtime.NewExecutor(m, testDev)
			exec.Capture = capture
			defer exec.Close()
			args := []*runtime.Buffer{upload(b, testDev, tensor.FromInt32([]int{1}, []int32{5})), upload(b, testDev, tensor.ScalarInt32(3))}
			for _, p := range m.Func("decode").Params[2:] {
				args = append(args, upload(b, testDev, tensor.New(p.Type.DType, p.Type.Shape.Sizes())))
			}
			defer func() {
				for _, a := range args {
					testDev.Free(a)
				}
			}()
			var inCall time.Duration
			step := func() {
				if err := testDev.Write(args[1], tensor.ScalarInt32(3)); err != nil {
					b.Fatal(err)
				}
				start := time.Now()
				out, err := exec.Call("decode", args...)
				if err != nil {
					b.Fatal(err)
				}
				inCall += time.Since(start)
				download(b, testDev, out[0])
				testDev.Free(out[0])
			}
			for range 3 { // compile, then the step captured
				step()
			}
			inCall = 0
			before := testDev.Stats()
			b.ResetTimer()
			for range b.N {
				step()
			}
			after := testDev.Stats()
			b.ReportMetric(float64(inCall.Nanoseconds())/float64(b.N), "call-ns/step")
			b.ReportMetric(float64(inCall.Nanoseconds())/float64(after.Dispatches-before.Dispatches), "call-ns/dispatch")
			b.ReportMetric(float64(after.Submits-before.Submits)/float64(b.N), "submits/step")
			b.ReportMetric(float64(after.Recorded-before.Recorded)/float64(b.N), "recorded/step")
		})
	}
}
