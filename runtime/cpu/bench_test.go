package cpu

import (
	"fmt"
	"testing"

	"github.com/tapml/tapml/frontend/arch/llama"
	"github.com/tapml/tapml/ir"
	"github.com/tapml/tapml/runtime"
	"github.com/tapml/tapml/tensor"
)

func BenchmarkMatmul(b *testing.B) {
	r := newRand(40)
	for _, c := range []struct{ m, k, n int }{
		{1, 288, 288}, {1, 288, 32000}, {1, 2048, 5632}, {64, 288, 768}, {256, 512, 512},
	} {
		b.Run(fmt.Sprintf("%dx%dx%d", c.m, c.k, c.n), func(b *testing.B) {
			d := New()
			x, w := randF32(r, c.m, c.k), randF32(r, c.n, c.k)
			n, outs := node(b, ir.OpMatmul, ir.Attrs{"transpose_b": ir.BoolAttr(true)}, x, w)
			xb, _ := d.Upload(x)
			wb, _ := d.Upload(w)
			in := []*runtime.Buffer{xb, wb}
			b.SetBytes(int64(4 * (c.m*c.k + c.k*c.n)))
			b.ResetTimer()
			for range b.N {
				if _, err := d.Launch(n, in, outs); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(2*c.m*c.k*c.n)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		})
	}
}

// benchDecode measures decode steps (one token each) at growing positions,
// restarting at 0 when the cache is full, and reports tokens/s.
func benchDecode(b *testing.B, cfg llama.Config) {
	m := newModel(b, cfg, 1)
	tok, _ := m.d.Upload(tensor.FromInt32([]int{1}, []int32{1}))
	poss := make([]*runtime.Buffer, cfg.MaxSeq)
	for i := range poss {
		poss[i], _ = m.d.Upload(tensor.ScalarInt32(int32(i)))
	}
	args := append([]*runtime.Buffer{tok, nil}, m.caches...)
	args[1] = poss[0]
	if _, err := m.ex.Call("decode", args...); err != nil { // uploads the weights
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := range b.N {
		args[1] = poss[i%cfg.MaxSeq]
		if _, err := m.ex.Call("decode", args...); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "tokens/s")
}

func BenchmarkDecodeTiny(b *testing.B)       { benchDecode(b, llama.Tiny) }
func BenchmarkDecodeStories15M(b *testing.B) { benchDecode(b, llama.Stories15M) }

func BenchmarkPrefillStories15M(b *testing.B) {
	cfg := llama.Stories15M
	m := newModel(b, cfg, 1)
	ids := make([]int32, 64)
	for i := range ids {
		ids[i] = int32(i * 31 % cfg.Vocab)
	}
	tok, _ := m.d.Upload(tensor.FromInt32([]int{len(ids)}, ids))
	pos, _ := m.d.Upload(tensor.ScalarInt32(0))
	args := append([]*runtime.Buffer{tok, pos}, m.caches...)
	b.ResetTimer()
	for range b.N {
		if _, err := m.ex.Call("prefill", args...); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*len(ids))/b.Elapsed().Seconds(), "tokens/s")
}
