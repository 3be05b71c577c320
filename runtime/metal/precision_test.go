package metal

import (
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/tapml/tapml/codegen/msl"
	"github.com/tapml/tapml/codegen/wgsl"
	"github.com/tapml/tapml/ir"
	rt "github.com/tapml/tapml/runtime"
	"github.com/tapml/tapml/runtime/internal/devkit"
	"github.com/tapml/tapml/tensor"
)

// f16Options open a device under f16 compute.
var f16Options = Options{Compute: ir.F16}

// storedBytes returns the bytes of the fake's buffer behind b, as the
// device stored them (the first n).
func storedBytes(f *fakeBridge, b *rt.Buffer, n int) []byte {
	return f.bufs[b.Handle.(*mbuf).B][:n]
}

// TestF16UploadDownload checks f16 storage: an f32 tensor is stored as
// exactly devkit.ToHalf of its data (to nearest even; beyond 65504 to
// infinity) in a buffer of half its bytes, and comes back as FromHalf of
// that: bit-exact, no tolerance, since both ends are the same conversion.
// i32 and quantized tensors are stored as they are.
func TestF16UploadDownload(t *testing.T) {
	f := newFake()
	d := newDevice(f, f16Options)
	if got := d.Precision(); got != (rt.Precision{Compute: ir.F16, Accumulate: ir.F32}) {
		t.Errorf("precision %s, want f16", got)
	}
	vals := make([]float32, 1024) // 4 KiB as f32, 2 KiB as f16: distinct size classes
	for i := range vals {
		vals[i] = float32(i)*0.37 - 100
	}
	copy(vals, []float32{1 + 0x1p-12, 65504, 70000, -70000, 0x1p-24, float32(math.NaN())})
	x := tensor.FromFloat32([]int{32, 32}, vals)
	b := upload(t, d, x)
	if g := b.Handle.(*mbuf); g.Size != 2048 {
		t.Errorf("f32[32 32] under f16 takes a %d-byte buffer, want 2048 (half of its 4096)", g.Size)
	}
	if now, peak := d.BufferBytes(); now != 2048 || peak != 2048 {
		t.Errorf("BufferBytes %d now, %d at peak; want the 2048 stored", now, peak)
	}
	half := devkit.ToHalf(x.Data)
	if !slices.Equal(storedBytes(f, b, len(half)), half) {
		t.Error("the buffer does not hold devkit.ToHalf of the data")
	}
	got, err := d.Download(b)
	if err != nil {
		t.Fatal(err)
	}
	want := tensor.New(ir.F32, x.Shape)
	devkit.FromHalf(half, want.Data)
	if !slices.Equal(got.Data, want.Data) || !slices.Equal(got.Shape, x.Shape) {
		t.Errorf("download is not FromHalf(ToHalf(x)): %v...", got.Float32s()[:6])
	}
	inf := float32(math.Inf(1))
	if g := got.Float32s(); g[0] != 1 || g[1] != 65504 || g[2] != inf || g[3] != -inf || g[4] != 0x1p-24 || g[5] == g[5] {
		t.Errorf("rounded values %v, want [1 65504 +Inf -Inf 2^-24 NaN]", g[:6])
	}

	// Not f32: stored as they are, at full size.
	ints := make([]int32, 512)
	for i := range ints {
		ints[i] = int32(i*7919) - 1<<20
	}
	q := tensor.New(ir.Q4_0, []int{4, 32})
	for i := range q.Data {
		q.Data[i] = byte(5 * i)
	}
	for _, x := range []*tensor.Tensor{tensor.FromInt32([]int{512}, ints), q} {
		b := upload(t, d, x)
		if g := b.Handle.(*mbuf); g.Size != devkit.SizeClass(uint64(len(x.Data))) {
			t.Errorf("%s takes %d bytes, want its own %d", x, g.Size, len(x.Data))
		}
		got, err := d.Download(b)
		if err != nil || !slices.Equal(got.Data, x.Data) {
			t.Errorf("%s does not round trip unchanged: %v", x, err)
		}
	}
}

// TestF16Kernels checks that a device under f16 compute runs codegen/msl's
// f16 kernels (the source compiled is msl.Generate's at f16, in half), that
// their f32 outputs get buffers of half the bytes, and that Accumulate
// reaches the generator.
func TestF16Kernels(t *testing.T) {
	f := newFake()
	d := newDevice(f, f16Options)
	a := upload(t, d, tensor.New(ir.F32, []int{32, 32}))
	n := node(t, 1, ir.OpExp, nil, a.Type())
	out, err := d.Launch(n, []*rt.Buffer{a}, nil)
	if err != nil {
		t.Fatal(err)
	}
	half := msl.Options{Features: wgsl.Features{F16: true}, Compute: ir.F16}
	k, err := msl.Generate(n, []ir.Type{a.Type()}, nil, half)
	if err != nil {
		t.Fatal(err)
	}
	src := string(f.sources[len(f.sources)-1])
	if src != string(k.Source) || !strings.Contains(src, "half") {
		t.Errorf("compiled source is not the f16 kernel:\n%s", src)
	}
	if out[0].DType != ir.F32 || out[0].Handle.(*mbuf).Size != 2048 {
		t.Errorf("output %s in %d bytes, want f32 in 2048", out[0], out[0].Handle.(*mbuf).Size)
	}

	// Attention keeps its accumulators in the dtype asked for.
	q := upload(t, d, tensor.New(ir.F32, []int{2, 2, 4}))
	kv := upload(t, d, tensor.New(ir.F32, []int{5, 1, 4}))
	pos := upload(t, d, tensor.ScalarInt32(3))
	in := []*rt.Buffer{q, kv, kv, pos}
	att := node(t, 2, ir.OpAttention, ir.Attrs{"scale": ir.FloatAttr(0.5)}, devkit.Types(in)...)
	var srcs []string
	for _, acc := range []ir.DType{ir.F32, ir.F16} {
		f := newFake()
		d := newDevice(f, Options{Compute: ir.F16, Accumulate: acc})
		in := []*rt.Buffer{upload(t, d, tensor.New(ir.F32, []int{2, 2, 4})), upload(t, d, tensor.New(ir.F32, []int{5, 1, 4})), nil, upload(t, d, tensor.ScalarInt32(3))}
		in[2] = in[1]
		if _, err := d.Launch(att, in, nil); err != nil {
			t.Fatal(err)
		}
		opts := half
		opts.Accumulate = acc
		k, err := msl.Generate(att, devkit.Types(in), nil, opts)
		if err != nil {
			t.Fatal(err)
		}
		if string(f.sources[0]) != string(k.Source) {
			t.Errorf("accumulate %s: the compiled source is not msl.Generate's", acc)
		}
		srcs = append(srcs, string(k.Source))
	}
	if srcs[0] == srcs[1] {
		t.Error("attention's kernel is the same at either accumulator dtype")
	}

	// An f32 device compiles no half.
	f = newFake()
	d = newDevice(f, Options{})
	if _, err := d.Launch(n, []*rt.Buffer{upload(t, d, tensor.New(ir.F32, []int{32, 32}))}, nil); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(f.sources[0]), "half") {
		t.Error("an f32 device compiled a kernel with half")
	}
}

// TestF16InPlaceAndReshape checks kv_write and reshape under f16: the
// cache, stored in half its bytes, is updated in place (no new buffer)
// and a reshape shares it.
func TestF16InPlaceAndReshape(t *testing.T) {
	f := newFake()
	d := newDevice(f, f16Options)
	cache := upload(t, d, tensor.New(ir.F32, []int{64, 2, 8})) // 4 KiB as f32
	nw := upload(t, d, tensor.New(ir.F32, []int{1, 2, 8}))
	pos := upload(t, d, tensor.ScalarInt32(3))
	allocs := d.Stats().Allocs
	kv := node(t, 1, ir.OpKVWrite, nil, cache.Type(), nw.Type(), pos.Type())
	out, err := d.Launch(kv, []*rt.Buffer{cache, nw, pos}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if out[0] != cache || f.dispatches[0].bufs[0] != cache.Handle.(*mbuf).B || d.Stats().Allocs != allocs {
		t.Errorf("kv_write under f16 did not update its cache in place (allocs %d -> %d)", allocs, d.Stats().Allocs)
	}
	if g := cache.Handle.(*mbuf); g.Size != 2048 {
		t.Errorf("cache of %d bytes, want 2048", g.Size)
	}
	rs := node(t, 2, ir.OpReshape, ir.Attrs{"shape": ir.ShapeAttr(ir.S(128, 8))}, cache.Type())
	r, err := d.Launch(rs, []*rt.Buffer{cache}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r[0].Handle.(*mbuf) != cache.Handle.(*mbuf) || len(f.dispatches) != 1 {
		t.Error("reshape under f16 does not share its input's buffer")
	}
	if got, err := d.Download(r[0]); err != nil || len(got.Data) != 4096 {
		t.Errorf("the reshaped view downloads as %v, %v; want 4096 bytes of f32", got, err)
	}
}

// TestF16LaunchKernel checks that a prebuilt f16 kernel (what `compile
// --target metal --compute f16` writes) runs on the f16 device: its f32
// bindings are checked against, and allocated at, their f16 bytes.
func TestF16LaunchKernel(t *testing.T) {
	f := newFake()
	d := newDevice(f, f16Options)
	a := upload(t, d, tensor.New(ir.F32, []int{32, 32}))
	n := node(t, 1, ir.OpNeg, nil, a.Type())
	k, err := msl.Generate(n, []ir.Type{a.Type()}, nil, msl.Options{Features: wgsl.Features{F16: true}, Compute: ir.F16})
	if err != nil {
		t.Fatal(err)
	}
	out, err := d.LaunchKernel(n, k, []*rt.Buffer{a})
	if err != nil {
		t.Fatal(err)
	}
	if out[0].Handle.(*mbuf).Size != 2048 || out[0].DType != ir.F32 {
		t.Errorf("output %s in %d bytes, want f32 in 2048", out[0], out[0].Handle.(*mbuf).Size)
	}
	// A buffer too small even for f16 is refused.
	small := upload(t, d, tensor.New(ir.F32, []int{16, 32}))
	if _, err := d.LaunchKernel(n, k, []*rt.Buffer{small}); err == nil || !strings.Contains(err.Error(), "holds") {
		t.Errorf("short input: %v", err)
	}
}

// TestPrecisionOption checks Options.precision, which Open runs first,
// and the kernel options of each precision.
func TestPrecisionOption(t *testing.T) {
	tests := []struct {
		opts Options
		want rt.Precision
		ok   bool
	}{
		{Options{}, rt.F32, true},
		{Options{Compute: ir.F16}, rt.Precision{Compute: ir.F16, Accumulate: ir.F32}, true},
		{Options{Compute: ir.F16, Accumulate: ir.F16}, rt.Precision{Compute: ir.F16, Accumulate: ir.F16}, true},
		{Options{Compute: ir.BF16}, rt.Precision{}, false},
		{Options{Accumulate: ir.I32}, rt.Precision{}, false},
	}
	for _, tc := range tests {
		got, err := tc.opts.precision()
		if (err == nil) != tc.ok || tc.ok && got != tc.want {
			t.Errorf("%+v: %s, %v; want %s (ok %v)", tc.opts, got, err, tc.want, tc.ok)
		}
		if !tc.ok {
			continue
		}
		// The kernels use half only under f16, so f32 kernels are as before.
		o := KernelOptions(msl.DefaultLimits(), tc.want)
		if o.Features.F16 != (tc.want != rt.F32) || o.Compute != tc.want.Compute || o.Accumulate != tc.want.Accumulate {
			t.Errorf("%s: kernel options %+v", tc.want, o)
		}
	}
}
