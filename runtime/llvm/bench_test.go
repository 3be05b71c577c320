package llvm_test

import (
	"fmt"
	"testing"

	"github.com/tapml/tapml/ir"
	"github.com/tapml/tapml/runtime"
	"github.com/tapml/tapml/runtime/cpu"
	"github.com/tapml/tapml/runtime/llvm"
	"github.com/tapml/tapml/tensor"
)

// BenchmarkMatmul compares f32 matmul on cpu (gonum) and llvm (one worker)
// for a prefill-sized product and 512³, with and without transpose_b.
func BenchmarkMatmul(b *testing.B) {
	for _, sz := range [][3]int{{64, 288, 768}, {512, 512, 512}} {
		for _, tb := range []bool{true, false} {
			for _, dn := range []string{"cpu", "llvm"} {
				b.Run(fmt.Sprintf("%dx%dx%d/tb=%v/%s", sz[0], sz[1], sz[2], tb, dn), func(b *testing.B) {
					var dev runtime.Device = cpu.New()
					if dn == "llvm" {
						dev = newDevice(b, llvm.Options{Workers: 1})
					}
					r := rng(3)
					m, k, n := sz[0], sz[1], sz[2]
					bs := []int{k, n}
					if tb {
						bs = []int{n, k}
					}
					c := opCase{op: ir.OpMatmul, attrs: ir.Attrs{"transpose_b": ir.BoolAttr(tb)},
						in: []*tensor.Tensor{randF32(r, -1, 1, m, k), randF32(r, -1, 1, bs...)}}
					benchLaunch(b, dev, c, float64(2*m*n*k)/1e9, "GFLOP/s")
				})
			}
		}
	}
}

// BenchmarkGEMV measures the decode classifier's matmul (1×288 by
// 32000×288ᵀ) alone on llvm; GB/s counts the weight bytes read.
func BenchmarkGEMV(b *testing.B) {
	dev := newDevice(b, llvm.Options{})
	r := rng(3)
	c := opCase{op: ir.OpMatmul, attrs: ir.Attrs{"transpose_b": ir.BoolAttr(true)},
		in: []*tensor.Tensor{randF32(r, -1, 1, 1, 288), randF32(r, -1, 1, 32000, 288)}}
	benchLaunch(b, dev, c, 32000*288*4/1e9, "GB/s")
}

// benchLaunch times launches of a case's node and reports per*launches/s
// under unit.
func benchLaunch(b *testing.B, dev runtime.Device, c opCase, per float64, unit string) {
	n := nodeOf(1, c)
	outs := outTypes(b, n)
	bufs := make([]*runtime.Buffer, len(c.in))
	for i, t := range c.in {
		var err error
		if bufs[i], err = dev.Upload(t); err != nil {
			b.Fatal(err)
		}
	}
	run := func() {
		res, err := dev.Launch(n, bufs, outs)
		if err != nil {
			b.Fatal(err)
		}
		if err := dev.Sync(); err != nil {
			b.Fatal(err)
		}
		dev.Free(res[0])
	}
	run()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		run()
	}
	b.ReportMetric(float64(b.N)*per/b.Elapsed().Seconds(), unit)
}
