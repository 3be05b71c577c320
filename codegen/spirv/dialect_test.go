package spirv

import (
	"slices"
	"strings"
	"testing"

	"github.com/tapml/tapml/codegen"
	"github.com/tapml/tapml/codegen/internal/kerneltest"
	"github.com/tapml/tapml/ir"
	"github.com/tapml/tapml/runtime/vulkan"
	"github.com/tapml/tapml/tensor"
)

// dialectKernel is kerneltest.DialectKernel (f16 storage and arithmetic,
// subgroup operations) as a kernel over n invocations.
func dialectKernel(t *testing.T, n int) *codegen.Kernel {
	t.Helper()
	code, _, err := Translate(kerneltest.DialectKernel)
	if err != nil {
		t.Fatal(err)
	}
	ty := func(dt ir.DType, k int) ir.Type { return ir.T(dt, ir.S(int64(k))) }
	return &codegen.Kernel{Language: Language, Op: ir.OpProbe, NodeID: 1, Source: code, Entry: Entry,
		Bindings: []codegen.Binding{
			{Index: 0, Name: "in0", Access: codegen.Read, Type: ty(ir.F16, n), Input: 0, Output: -1},
			{Index: 1, Name: "in1", Access: codegen.Read, Type: ty(ir.F16, 4*n), Input: 1, Output: -1},
			{Index: 2, Name: "out0", Access: codegen.Write, Type: ty(ir.F32, n), Input: -1, Output: 0},
			{Index: 3, Name: "out1", Access: codegen.Write, Type: ty(ir.F16, n), Input: -1, Output: 1},
		},
		WorkgroupSize: [3]int{64, 1, 1}, Grid: [3]int{n / 64, 1, 1}}
}

// TestDialectKernel runs the kernel that uses f16 and subgroup operations
// on lavapipe, which has both, and compares every output with a Go model
// of the kernel. The inputs make every value exact in f16 (integers and
// quarters below 2048: in0 in {-2, 0, 2} makes h an integer, and the
// subgroup sum of v stays below 2048 for subgroups of up to 64 lanes), so
// the comparison is exact whatever order the device sums in. (With f16(i)
// instead of f16(i % 16), NVIDIA's 32-lane subgroups summed past 2048,
// where f16 keeps only even integers, and the order of the sum showed.) Lanes where
// subgroupShuffleUp or Down reads past the subgroup get undefined values
// and are not compared; the model takes subgroups as consecutive
// invocations of the reported size, as the device runs them.
func TestDialectKernel(t *testing.T) {
	d := openGPU(t)
	if !d.Features().F16 || !d.Features().Subgroups {
		t.Fatalf("%s has no f16 or subgroups (%+v); lavapipe has both", d.Name(), d.Info())
	}
	const n = 128
	in0, in1 := tensor.New(ir.F16, []int{n}), tensor.New(ir.F16, []int{4 * n})
	for i := range n {
		in0.SetFloat64At(i, float64(2*(i%3)-2))
		for c := range 4 {
			in1.SetFloat64At(4*i+c, float64((i*7+c*3)%9-4))
		}
	}
	got, err := runKernel(d, &ir.Node{ID: 1, Op: ir.OpProbe}, dialectKernel(t, n), []*tensor.Tensor{in0, in1})
	if err != nil {
		t.Fatal(err)
	}
	s := d.Info().SubgroupSize
	want0, want1, defined := dialectModel(in0, in1, n, s)
	for i := range n {
		if g := got[1].Float64At(i); g != want1[i] {
			t.Errorf("out1[%d] = %g, want %g", i, g, want1[i])
		}
		if g := got[0].Float64At(i); defined[i] && g != want0[i] {
			t.Errorf("out0[%d] = %g, want %g (subgroup size %d)", i, g, want0[i], s)
		}
	}
}

// dialectModel computes kerneltest.DialectKernel in Go for subgroups of
// size s: out0, out1, and whether out0[i] is defined.
func dialectModel(in0, in1 *tensor.Tensor, n, s int) (out0, out1 []float64, defined []bool) {
	x, h, vx := make([]float64, n), make([]float64, n), make([]float64, n)
	for i := range n {
		h[i] = in0.Float64At(i)*0.5 + 1
		sub := []float64{float64(i % 16), 0.25, -h[i], 2}
		var dot float64
		for c := range 4 {
			v := in1.Float64At(4*i+c)*h[i] - sub[c]
			dot += v
			if c == 0 {
				vx[i] = v
			}
		}
		x[i] = dot + max(h[i], 0)
	}
	out0, out1, defined = make([]float64, n), make([]float64, n), make([]bool, n)
	for wg := 0; wg < n; wg += 64 {
		var part0 float64
		for g := wg; g < wg+64; g += s {
			lanes := x[g : g+s]
			sum, hi, lo, nsum, hv := 0.0, lanes[0], lanes[0], 0.0, 0.0
			for j, v := range lanes {
				sum, hi, lo = sum+v, max(hi, v), min(lo, v)
				nsum += float64(g - wg + j)
				hv += vx[g+j]
			}
			if g == wg {
				part0 = sum + hi + lo
			}
			for j := range lanes {
				i := g + j
				b := 2 * lanes[0]
				sh := lanes[(j+1)%s] + lanes[j^1]
				if j > 0 && j < s-1 {
					sh += lanes[j-1] + lanes[j+1]
					defined[i] = true
				}
				out0[i] = b + sh + nsum + float64(s-1) + hv
				out1[i] = x[i] * h[i]
			}
		}
		for i := wg; i < wg+64; i++ {
			out0[i] += part0
		}
	}
	return out0, out1, defined
}

// TestDialectRefused checks that a device opened without f16 and
// subgroups refuses the dialect kernel before the driver sees it, with an
// error naming the capability, and stays usable.
func TestDialectRefused(t *testing.T) {
	d, err := vulkan.Open(vulkan.Options{Generate: Generate, NoF16: true, NoSubgroups: true, PipelineCacheDir: "-"})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if f := d.Features(); f.F16 || f.Subgroups {
		t.Fatalf("features %+v with NoF16 and NoSubgroups", f)
	}
	k := dialectKernel(t, 64)
	_, err = runKernel(d, &ir.Node{ID: 1, Op: ir.OpProbe}, k, []*tensor.Tensor{tensor.New(ir.F16, []int{64}), tensor.New(ir.F16, []int{256})})
	if err == nil || !strings.Contains(err.Error(), "capability") {
		t.Fatalf("got %v, want an error naming a capability", err)
	}
	c := testCase{op: ir.OpAdd, in: []ir.Type{f32(4), f32(4)}}
	n, outs := c.fullNode(t)
	add, err := Generate(n, c.in, outs, Options{Limits: d.Limits()})
	if err != nil {
		t.Fatal(err)
	}
	x := tensor.FromFloat32([]int{4}, []float32{1, 2, 3, 4})
	got, err := runKernel(d, n, add, []*tensor.Tensor{x, x})
	if err != nil {
		t.Fatalf("after the refusal: %v", err)
	}
	if want := []float32{2, 4, 6, 8}; !slices.Equal(got[0].Float32s(), want) {
		t.Errorf("after the refusal: %v, want %v", got[0].Float32s(), want)
	}
}
