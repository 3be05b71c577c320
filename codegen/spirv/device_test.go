package spirv

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/tapml/tapml/codegen"
	"github.com/tapml/tapml/codegen/fault"
	"github.com/tapml/tapml/codegen/wgsl"
	"github.com/tapml/tapml/internal/testenv/storedtest"
	"github.com/tapml/tapml/ir"
	"github.com/tapml/tapml/runtime"
	"github.com/tapml/tapml/runtime/cpu"
	"github.com/tapml/tapml/runtime/vulkan"
	"github.com/tapml/tapml/tensor"
)

var gpu struct {
	once sync.Once
	dev  *vulkan.Device
	err  error
}

// openGPU returns the test binary's Vulkan device (the vulkan target's,
// lavapipe on the project's machines), opened once and shared by the
// tests, which must not close it. LaunchKernel runs a prebuilt kernel;
// Launch runs this package's kernel of a node.
func openGPU(t testing.TB) *vulkan.Device {
	t.Helper()
	gpu.once.Do(func() { gpu.dev, gpu.err = vulkan.Open(vulkan.Options{Generate: Generate}) })
	if gpu.err != nil {
		t.Fatalf("vulkan: %v (scripts/setup.sh installs lavapipe, a CPU Vulkan driver)", gpu.err)
	}
	return gpu.dev
}

// kernelLimits returns the limits the device's kernels are generated for.
func kernelLimits(d *vulkan.Device) Limits { return d.Limits() }

// runKernel runs kernel k as node n's on the device over host inputs and
// downloads its outputs.
func runKernel(d *vulkan.Device, n *ir.Node, k *codegen.Kernel, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	return roundTrip(d, in, func(bufs []*runtime.Buffer) ([]*runtime.Buffer, error) { return d.LaunchKernel(n, k, bufs) })
}

// generateRun generates node n's kernel under opts and runs its SPIR-V on g
// over in, failing the test (as name) on an error; it returns the WGSL the
// SPIR-V was translated from, for tests of what the generator chose, the
// SPIR-V kernel and the outputs.
func generateRun(t *testing.T, g *vulkan.Device, name string, n *ir.Node, in, outs []ir.Type, opts Options, data []*tensor.Tensor) (string, *codegen.Kernel, []*tensor.Tensor) {
	t.Helper()
	src, err := wgsl.Generate(n, in, outs, opts)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	kern, err := Generate(n, in, outs, opts)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	got, err := runKernel(g, n, kern, data)
	if err != nil {
		t.Fatalf("%s: run: %v", name, err)
	}
	return string(src.Source), kern, got
}

// checkWrongIndex runs case c's kernel with the wrong_index fault on g (the
// device's features, default tuning) and fails the test when its first
// output stays within tl of the reference: the fault must show.
func checkWrongIndex(t *testing.T, g *vulkan.Device, r *rand.Rand, c testCase, tl tol) {
	t.Helper()
	n, outs := c.fullNode(t)
	in := c.inputs(r)
	want, err := reference(n, outs, in)
	if err != nil {
		t.Fatalf("%s: reference: %v", c, err)
	}
	opts := Options{Limits: kernelLimits(g), Features: g.Features(), Fault: fault.WrongIndex}
	_, _, got := generateRun(t, g, c.String(), n, c.in, outs, opts, in)
	if compare(got[0], want[0], tl) == nil {
		t.Errorf("%s: wrong_index leaves the output within the tolerance", c)
	}
}

// roundTrip uploads host inputs to d, launches on them, downloads the
// results and frees every buffer it made.
func roundTrip(d runtime.Device, in []*tensor.Tensor, launch func([]*runtime.Buffer) ([]*runtime.Buffer, error)) ([]*tensor.Tensor, error) {
	var bufs []*runtime.Buffer
	defer func() {
		for _, b := range bufs {
			d.Free(b)
		}
	}()
	for _, x := range in {
		b, err := d.Upload(x.Clone())
		if err != nil {
			return nil, err
		}
		bufs = append(bufs, b)
	}
	res, err := launch(bufs)
	if err != nil {
		return nil, err
	}
	var got []*tensor.Tensor
	for _, b := range res {
		x, err := d.Download(b)
		if err != nil {
			return nil, err
		}
		got = append(got, x)
		if !slices.Contains(bufs, b) {
			d.Free(b)
		}
	}
	return got, nil
}

// tol is a comparison tolerance: |got - want| <= Abs + Rel·|want|; NaN
// must meet NaN; integers compare exactly.
type tol struct{ Abs, Rel float64 }

// Tolerances by kind of kernel (f32; ε = 2^-24 ≈ 6e-8), the policy of the
// WGSL kernels' tests:
//
//   - exact: data movement (gather, copies, transpose, slice, concat,
//     kv_write, constant, cast), argmax, and the correctly rounded
//     arithmetic (add, sub, mul, neg, abs, relu, maximum, minimum).
//   - transcendental elementwise ops (exp, log, tanh, silu, gelu, pow, div,
//     rsqrt, ...): Vulkan allows exp/log 3+2|x| ulp and division 2.5 ulp:
//     1e-5 relative plus 1e-6 absolute near zeros.
//   - matmul: a K-long dot product in another order than gonum's:
//     2e-6·√K absolute plus 1e-5 relative (inputs in [-2, 2]).
//   - rms_norm, layer_norm, softmax: a tree reduction and one
//     transcendental per element: 1e-5 relative, 1e-6 absolute.
//   - rope: the reference's own f32 frequencies and angles; only sin/cos
//     differ: 2e-5 absolute.
//   - attention: Dh-long dot products, an online softmax over chunks and a
//     T-long weighted sum: 2e-5 absolute, 1e-4 relative.
var (
	exact     = tol{}
	transc    = tol{Abs: 1e-6, Rel: 1e-5}
	reduction = tol{Abs: 1e-6, Rel: 1e-5}
	ropeTol   = tol{Abs: 2e-5, Rel: 1e-5}
	attnTol   = tol{Abs: 2e-5, Rel: 1e-4}
)

// tolerance returns the tolerance of a test case.
func (c testCase) tolerance() tol {
	switch c.op {
	case ir.OpNeg, ir.OpAbs, ir.OpRelu, ir.OpAdd, ir.OpSub, ir.OpMul, ir.OpMaximum, ir.OpMinimum,
		ir.OpConstant, ir.OpCast, ir.OpGather, ir.OpKVWrite, ir.OpReshape, ir.OpTranspose, ir.OpSlice, ir.OpConcat,
		ir.OpProbe, ir.OpTransfer, ir.OpArgmax, ir.OpTopK, ir.OpTokenShift, ir.OpDequantize:
		return exact
	case ir.OpExpertMatmul:
		k := c.in[1].Shape[2].Size
		return tol{Abs: 2e-6 * math.Sqrt(float64(k)) * 4, Rel: 1e-5}
	case ir.OpCausalConv1D:
		return reduction
	case ir.OpMatmul, ir.OpRMSNormMatmul, ir.OpRMSNormQKV, ir.OpRMSNormSwiGLU:
		// The fused norms' products are K-long dot products too (of the
		// normalized row): the H200 put rms_norm_swiglu at K = 37 just
		// past the elementwise tolerance.
		k := c.in[0].Shape[c.in[0].Shape.Rank()-1].Size
		return tol{Abs: 2e-6 * math.Sqrt(float64(k)) * 4, Rel: 1e-5}
	case ir.OpRMSNorm, ir.OpLayerNorm, ir.OpSoftmax, ir.OpReduceSum, ir.OpReduceMean:
		return reduction
	case ir.OpIota, ir.OpReduceMax:
		return exact
	case ir.OpConv2D, ir.OpConvTranspose2D:
		w := c.in[1].Shape.Sizes()
		return tol{Abs: 2e-6 * math.Sqrt(float64(w[1]*w[2]*w[3]*4)) * 4, Rel: 1e-5}
	case ir.OpPool2D, ir.OpResize:
		if c.attrs.String("mode") == "linear" || c.attrs.String("mode") == "avg" {
			return transc
		}
		return exact
	case ir.OpRope:
		return ropeTol
	case ir.OpAttention:
		return attnTol
	}
	return transc
}

// inputs makes the test case's input tensors: fill where given, else
// uniform in [-2, 2) (f32) or [-5, 5) (i32).
func (c testCase) inputs(r *rand.Rand) []*tensor.Tensor {
	ts := make([]*tensor.Tensor, len(c.in))
	for i, t := range c.in {
		if t.DType != ir.F32 && t.DType != ir.I32 {
			ts[i] = storedtest.Tensor(r, t.DType, t.Shape.Sizes()...)
			continue
		}
		x := tensor.New(t.DType, t.Shape.Sizes())
		for j := range x.NumElements() {
			var v float64
			switch {
			case c.fill[i] != nil:
				v = c.fill[i](j)
			case t.DType == ir.I32:
				v = float64(r.IntN(10) - 5)
			default:
				v = r.Float64()*4 - 2
			}
			x.SetFloat64At(j, v)
		}
		ts[i] = x
	}
	return ts
}

// fullNode builds the node of a test case as a Builder would: normalized
// attributes, input and output values.
func (c testCase) fullNode(t testing.TB) (*ir.Node, []ir.Type) {
	t.Helper()
	outs, na, err := ir.InferTypes(c.op, c.in, c.attrs)
	if err != nil {
		t.Fatalf("infer: %v", err)
	}
	n := &ir.Node{ID: 1, Op: c.op, Attrs: na, Prov: "test." + c.op.String()}
	for i, ty := range c.in {
		n.Inputs = append(n.Inputs, &ir.Value{Name: fmt.Sprintf("x%d", i), Type: ty})
	}
	for i, ty := range outs {
		n.Outputs = append(n.Outputs, &ir.Value{Name: fmt.Sprintf("y%d", i), Type: ty, Def: n})
	}
	return n, outs
}

// reference runs a node on the CPU reference device.
func reference(n *ir.Node, outs []ir.Type, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	return launchOn(cpu.New(), n, outs, in)
}

// compare reports the first elements that differ beyond tol.
func compare(got, want *tensor.Tensor, tl tol) error {
	if got.DType != want.DType || fmt.Sprint(got.Shape) != fmt.Sprint(want.Shape) {
		return fmt.Errorf("got %s, want %s", got, want)
	}
	var bad []string
	for i := range want.NumElements() {
		g, w := got.Float64At(i), want.Float64At(i)
		ok := g == w || (math.IsNaN(g) && math.IsNaN(w))
		if !ok && got.DType != ir.I32 && !math.IsNaN(g) && !math.IsNaN(w) && !math.IsInf(w, 0) {
			d := math.Abs(g - w)
			ok = d <= tl.Abs+tl.Rel*math.Abs(w)
		}
		if !ok && len(bad) < 5 {
			bad = append(bad, fmt.Sprintf("[%d] got %g want %g", i, g, w))
		}
		if !ok && len(bad) == 5 {
			bad = append(bad, "...")
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("%v (tolerance %+v)", bad, tl)
	}
	return nil
}

// maxErr is the largest |got - want| / (Abs + Rel·|want|) over finite
// elements (0 for exact matches).
func maxErr(got, want *tensor.Tensor, tl tol) float64 {
	worst := 0.0
	for i := range want.NumElements() {
		g, w := got.Float64At(i), want.Float64At(i)
		if g == w || math.IsNaN(g) || math.IsNaN(w) || math.IsInf(w, 0) {
			continue
		}
		worst = max(worst, math.Abs(g-w)/(tl.Abs+tl.Rel*math.Abs(w)))
	}
	return worst
}

// TestDevice runs every test case's SPIR-V kernel on the Vulkan device
// (lavapipe here) and compares it with the CPU reference.
func TestDevice(t *testing.T) {
	g := openGPU(t)
	t.Logf("device: %s", g.Name())
	r := rand.New(rand.NewPCG(1, 2))
	for _, c := range testCases() {
		t.Run(c.name, func(t *testing.T) {
			if !cpu.Supports(c.op) {
				t.Fatalf("the CPU reference has no %s kernel", c.op)
			}
			n, outs := c.fullNode(t)
			in := c.inputs(r)
			want, err := reference(n, outs, in)
			if err != nil {
				t.Fatalf("reference: %v", err)
			}
			k, err := Generate(n, c.in, outs, Options{Limits: kernelLimits(g), Tuning: c.tune})
			if err != nil {
				t.Fatalf("generate: %v", err)
			}
			got, err := runKernel(g, n, k, in)
			if err != nil {
				t.Fatalf("run: %v", err)
			}
			for i := range want {
				if err := compare(got[i], want[i], c.tolerance()); err != nil {
					t.Errorf("output %d: %v", i, err)
				}
				if testing.Verbose() {
					t.Logf("max error %.3g (in units of the tolerance)", maxErr(got[i], want[i], c.tolerance()))
				}
			}
		})
	}
}

// TestDeviceTunings runs the matmul cases, and shapes that the vec4 tiled
// kernels take, under every tuning of the validation (the discrete GPUs'
// one included, which the CPU driver's device does not choose itself): the
// translated SPIR-V of every matmul variant runs on the Vulkan device and
// computes what the CPU reference does, within the matmul tolerance.
func TestDeviceTunings(t *testing.T) {
	g := openGPU(t)
	r := rand.New(rand.NewPCG(7, 8))
	tb := ir.Attrs{"transpose_b": ir.BoolAttr(true)}
	cases := []testCase{
		{op: ir.OpMatmul, in: []ir.Type{f32(130, 64), f32(36, 64)}, attrs: tb},
		{op: ir.OpMatmul, in: []ir.Type{f32(2, 64, 96), f32(96, 128)}},
		{op: ir.OpMatmul, in: []ir.Type{f32(1, 256), f32(300, 256)}, attrs: tb},
	}
	for _, c := range testCases() {
		if c.op == ir.OpMatmul {
			cases = append(cases, c)
		}
	}
	seen := map[string]bool{}
	sliced := 0
	for i, tu := range tunings {
		for _, c := range cases {
			n, outs := c.fullNode(t)
			k, err := Generate(n, c.in, outs, Options{Limits: kernelLimits(g), Tuning: tu})
			if err != nil {
				t.Fatalf("%s, tuning %d: %v", c, i, err)
			}
			if seen[string(k.Source)] {
				continue
			}
			seen[string(k.Source)] = true
			if w, err := wgsl.Generate(n, c.in, outs, Options{Limits: kernelLimits(g), Tuning: tu}); err == nil && strings.Contains(string(w.Source), "if (slice != 0u)") {
				sliced++
			}
			in := c.inputs(r)
			want, err := reference(n, outs, in)
			if err != nil {
				t.Fatal(err)
			}
			got, err := runKernel(g, n, k, in)
			if err != nil {
				t.Fatalf("%s, tuning %d: %v", c, i, err)
			}
			if err := compare(got[0], want[0], c.tolerance()); err != nil {
				t.Errorf("%s, tuning %d: %v", c, i, err)
			}
		}
	}
	t.Logf("%d distinct matmul kernels, %d with K split among slices", len(seen), sliced)
	if sliced == 0 {
		t.Errorf("no kernel split K among slices: the sliced tunings did not fit the device")
	}
}

// TestDeviceFaults checks that the faults are detectable: for every op a
// fault applies to, some test case's output leaves the tolerance.
// missing_barrier is left out: a data race may happen to give the right
// answer on a CPU driver.
func TestDeviceFaults(t *testing.T) {
	if testing.Short() {
		t.Skip("short") // every fault on every case: slow on a CPU driver
	}
	g := openGPU(t)
	r := rand.New(rand.NewPCG(3, 4))
	// Ops whose intermediates pass 65504 when the inputs are scaled by 300.
	overflows := map[ir.Op]bool{ir.OpExp: true, ir.OpMul: true, ir.OpPow: true, ir.OpMatmul: true, ir.OpRMSNorm: true,
		ir.OpLayerNorm: true, ir.OpAttention: true}
	for _, f := range []string{fault.WrongIndex, fault.WrongConstant, fault.F16Overflow} {
		applies, caught := map[ir.Op]bool{}, map[ir.Op]bool{}
		for _, c := range testCases() {
			if caught[c.op] {
				continue
			}
			n, outs := c.fullNode(t)
			k, err := Generate(n, c.in, outs, Options{Limits: kernelLimits(g), Tuning: c.tune, Fault: f})
			if err != nil {
				continue
			}
			applies[c.op] = true
			in := c.inputs(r)
			if f == fault.F16Overflow {
				// Scale float inputs so that intermediates pass 65504.
				for i, x := range in {
					if x.DType == ir.F32 && c.fill[i] == nil {
						for j, v := range x.Float32s() {
							x.Float32s()[j] = v * 300
						}
					}
				}
			}
			want, err := reference(n, outs, in)
			if err != nil {
				t.Fatalf("%s: reference: %v", c.name, err)
			}
			got, err := runKernel(g, n, k, in)
			if err != nil {
				t.Fatalf("%s with %s: run: %v", c.name, f, err)
			}
			for i := range want {
				if compare(got[i], want[i], c.tolerance()) != nil {
					caught[c.op] = true
				}
			}
		}
		for op := range applies {
			if f == fault.F16Overflow && !overflows[op] {
				continue // its values stay below 65504 on these inputs
			}
			if !caught[op] {
				t.Errorf("fault %s on %s changes no test case's output", f, op)
			}
		}
	}
}

// BenchmarkMatmul times square f32 matmuls (the prefill shape) and GEMVs
// with transpose_b (the decode shape) on the device.
func BenchmarkMatmul(b *testing.B) {
	g := openGPU(b)
	r := rand.New(rand.NewPCG(5, 6))
	for _, sh := range []struct{ m, k, n, lanes int }{{512, 512, 512, 0}, {1024, 1024, 1024, 0}, {2048, 2048, 2048, 0},
		{1, 4096, 4096, 0}, {1, 4096, 4096, 1}, {1, 288, 32000, 0}, {1, 288, 32000, 1}} {
		b.Run(fmt.Sprintf("%dx%dx%d/lanes%d", sh.m, sh.k, sh.n, sh.lanes), func(b *testing.B) {
			c := testCase{op: ir.OpMatmul, in: []ir.Type{f32(int64(sh.m), int64(sh.k)), f32(int64(sh.n), int64(sh.k))},
				attrs: ir.Attrs{"transpose_b": ir.BoolAttr(true)}, tune: wgsl.Tuning{GEMVLanes: sh.lanes}}
			n, outs := c.fullNode(b)
			k, err := Generate(n, c.in, outs, Options{Limits: kernelLimits(g), Tuning: c.tune})
			if err != nil {
				b.Fatal(err)
			}
			var bufs []*runtime.Buffer
			for _, x := range c.inputs(r) {
				buf, err := g.Upload(x)
				if err != nil {
					b.Fatal(err)
				}
				bufs = append(bufs, buf)
			}
			launch := func() {
				res, err := g.LaunchKernel(n, k, bufs)
				if err != nil {
					b.Fatal(err)
				}
				g.Free(res[0])
			}
			launch()
			if err := g.Sync(); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for range b.N {
				launch()
			}
			if err := g.Sync(); err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(2*float64(sh.m*sh.k*sh.n)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
			for _, buf := range bufs {
				g.Free(buf)
			}
		})
	}
}

// TestGatherOutOfRange checks what the GPU does where the op defines a
// run-time error: ids out of range give NaN rows (f32 tables).
func TestGatherOutOfRange(t *testing.T) {
	g := openGPU(t)
	c := testCase{op: ir.OpGather, in: []ir.Type{f32(10, 4), i32(3)}}
	n, outs := c.fullNode(t)
	k, err := Generate(n, c.in, outs, Options{Limits: kernelLimits(g)})
	if err != nil {
		t.Fatal(err)
	}
	table := tensor.New(ir.F32, []int{10, 4})
	for i := range table.Float32s() {
		table.Float32s()[i] = float32(i)
	}
	got, err := runKernel(g, n, k, []*tensor.Tensor{table, tensor.FromInt32([]int{3}, []int32{-1, 2, 10})})
	if err != nil {
		t.Fatal(err)
	}
	v := got[0].Float32s()
	for j := 0; j < 4; j++ {
		if !math.IsNaN(float64(v[j])) || v[4+j] != float32(8+j) || !math.IsNaN(float64(v[8+j])) {
			t.Fatalf("got %v, want NaN row, row 2, NaN row", v)
		}
	}
}

// TestDeviceF16 runs every test case on a Vulkan device under f16 compute
// (f16 buffers, f32 arithmetic: wgsl's Options.Compute) and compares it
// with the CPU reference emulating that (cpu.Options.Round16): the same
// f16-rounded inputs, each output rounded to f16 once. Tolerance: the f32
// one plus one f16 ulp relative (2^-10): the two sides' f32 results differ
// within the f32 tolerance, which can move a value across an f16 rounding
// boundary, and no further. Exact kernels stay exact.
func TestDeviceF16(t *testing.T) {
	g, err := vulkan.Open(vulkan.Options{Generate: Generate, Compute: ir.F16, PipelineCacheDir: "-"})
	if err != nil {
		t.Fatalf("vulkan with f16 compute: %v (lavapipe has shaderFloat16)", err)
	}
	defer g.Close()
	r := rand.New(rand.NewPCG(3, 4))
	for _, c := range testCases() {
		t.Run(c.name, func(t *testing.T) {
			n, outs := c.fullNode(t)
			in := c.inputs(r)
			want, err := launchOn(cpu.NewWith(cpu.Options{Round16: true}), n, outs, in)
			if err != nil {
				t.Fatalf("reference: %v", err)
			}
			got, err := launchOn(g, n, outs, in)
			if err != nil {
				t.Fatalf("run: %v", err)
			}
			tl := c.tolerance()
			if tl != exact {
				tl.Rel += 0x1p-10
			}
			for i := range want {
				if err := compare(got[i], want[i], tl); err != nil {
					t.Errorf("output %d: %v", i, err)
				}
			}
		})
	}
}

// launchOn runs node n on device d over host inputs and downloads its
// outputs.
func launchOn(d runtime.Device, n *ir.Node, outs []ir.Type, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	return roundTrip(d, in, func(bufs []*runtime.Buffer) ([]*runtime.Buffer, error) { return d.Launch(n, bufs, outs) })
}
