package webgpu

import (
	"fmt"
	"os"
	"testing"

	"github.com/cogentcore/webgpu/wgpu"
	"github.com/tapml/tapml/codegen/wgsl"
	"github.com/tapml/tapml/frontend/arch"
	"github.com/tapml/tapml/frontend/arch/llama"
	"github.com/tapml/tapml/ir"
	"github.com/tapml/tapml/runtime"
)

// bigOK reports whether benchmarks may run sizes that take minutes on CPU
// drivers: on a real GPU, or when TAPML_BENCH_BIG=1.
func bigOK() bool {
	return testDev.Adapter().AdapterType != wgpu.AdapterTypeCPU || os.Getenv("TAPML_BENCH_BIG") == "1"
}

// benchMatmul measures a [m, k] × [n, k]ᵀ matmul (the layout of linear
// layers) and reports GFLOP/s. Launches are batched the way a model runs
// them; the clock stops after the device drains.
func benchMatmul(b *testing.B, m, n, k int) {
	r := newRand(1)
	x, err := testDev.Upload(randF32(r, -1, 1, m, k))
	if err != nil {
		b.Fatal(err)
	}
	w, err := testDev.Upload(randF32(r, -1, 1, n, k))
	if err != nil {
		b.Fatal(err)
	}
	defer testDev.Free(x)
	defer testDev.Free(w)
	node, outs := mkNode(b, 1, ir.OpMatmul, ir.Attrs{"transpose_b": ir.BoolAttr(true)}, x.Type(), w.Type())
	launch := func() {
		res, err := testDev.Launch(node, []*runtime.Buffer{x, w}, outs)
		if err != nil {
			b.Fatal(err)
		}
		testDev.Free(res[0])
	}
	launch() // compile
	if err := testDev.Sync(); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		launch()
	}
	if err := testDev.Sync(); err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	flops := 2 * float64(m) * float64(n) * float64(k) * float64(b.N)
	b.ReportMetric(flops/b.Elapsed().Seconds()/1e9, "GFLOP/s")
}

func BenchmarkMatmul(b *testing.B) {
	for _, s := range []int{512, 1024, 4096} {
		b.Run(fmt.Sprintf("%d", s), func(b *testing.B) {
			if s > 1024 && !bigOK() {
				b.Skip("4096³ takes minutes on a CPU driver; set TAPML_BENCH_BIG=1")
			}
			benchMatmul(b, s, s, s)
		})
	}
	// Decode-shaped products (M = 1): the GEMV path.
	for _, s := range [][2]int{{4096, 4096}, {32000, 288}, {768, 288}} {
		b.Run(fmt.Sprintf("gemv_%dx%d", s[0], s[1]), func(b *testing.B) { benchMatmul(b, 1, s[0], s[1]) })
	}
}

// benchDecode measures greedy decode steps of a model with random weights
// (each step downloads its logits, as a generation loop does) and reports
// tokens/s.
func benchDecode(b *testing.B, c llama.Config) {
	m, err := arch.Build("bench", c, llama.RandomWeights(c, 1))
	if err != nil {
		b.Fatal(err)
	}
	g := newGreedy(b, m, testDev)
	defer g.exec.Close()
	if err := g.exec.Prepare("decode"); err != nil {
		b.Fatal(err)
	}
	tok := argmaxF32(g.step(b, []int32{1}))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if g.pos >= c.MaxSeq {
			b.StopTimer()
			for _, cb := range g.caches {
				testDev.Free(cb)
			}
			g = newGreedy(b, m, testDev)
			b.StartTimer()
		}
		tok = argmaxF32(g.step(b, []int32{tok}))
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "tokens/s")
}

func BenchmarkDecodeTiny(b *testing.B)       { benchDecode(b, llama.Tiny) }
func BenchmarkDecodeStories15M(b *testing.B) { benchDecode(b, llama.Stories15M) }

// BenchmarkDecodeTinyLlama decodes TinyLlama-1.1B-shaped random weights
// (4.4 GB of f32): real GPUs only.
func BenchmarkDecodeTinyLlama(b *testing.B) {
	if !bigOK() {
		b.Skip("4.4 GB of weights; real GPUs only (or TAPML_BENCH_BIG=1)")
	}
	benchDecode(b, llama.TinyLlama)
}

// BenchmarkGEMVLanes compares the lanes-per-output choices of the decode
// GEMV (wgsl.Tuning.GEMVLanes) on the current adapter.
func BenchmarkGEMVLanes(b *testing.B) {
	for _, lanes := range []int{1, 4, 16, 32} {
		d, err := Open(Options{Tuning: wgsl.Tuning{GEMVLanes: lanes}})
		if err != nil {
			b.Fatal(err)
		}
		saved := testDev
		testDev = d
		for _, s := range [][2]int{{4096, 4096}, {32000, 288}} {
			b.Run(fmt.Sprintf("lanes%d/%dx%d", lanes, s[0], s[1]), func(b *testing.B) { benchMatmul(b, 1, s[0], s[1]) })
		}
		testDev = saved
		d.Close()
	}
}

// BenchmarkLaunchOverhead measures the host cost of one launch of a tiny
// kernel (recording, bind group, pooled output), work drained at the end.
func BenchmarkLaunchOverhead(b *testing.B) {
	x, err := testDev.Upload(randF32(newRand(1), -1, 1, 16))
	if err != nil {
		b.Fatal(err)
	}
	defer testDev.Free(x)
	node, outs := mkNode(b, 1, ir.OpNeg, nil, x.Type())
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		res, err := testDev.Launch(node, []*runtime.Buffer{x}, outs)
		if err != nil {
			b.Fatal(err)
		}
		testDev.Free(res[0])
	}
	if err := testDev.Sync(); err != nil {
		b.Fatal(err)
	}
}
