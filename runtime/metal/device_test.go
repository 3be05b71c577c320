package metal

import (
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"testing"
	"unsafe"

	"github.com/tapml/tapml/codegen/fault"
	"github.com/tapml/tapml/codegen/msl"
	"github.com/tapml/tapml/frontend/arch"
	"github.com/tapml/tapml/frontend/arch/llama"
	"github.com/tapml/tapml/ir"
	rt "github.com/tapml/tapml/runtime"
	"github.com/tapml/tapml/runtime/internal/devkit"
	"github.com/tapml/tapml/tensor"
)

// fakeBridge stands in for Metal on Linux: buffers are Go memory, kernels
// are not run (outputs stay as they were), and every call is recorded, so
// the device's bookkeeping can be tested here. Handles point to Go values
// the fake keeps alive in its maps.
type fakeBridge struct {
	bufs       map[unsafe.Pointer][]byte
	pipes      map[unsafe.Pointer][]byte // source
	sources    [][]byte                  // every compiled source, in order
	dispatches []fakeDispatch
	open       int // dispatches in the open command buffer
	commits    int
	waits      int
	maxThreads int
	compileErr error
	waitErr    error
	closed     bool
	released   int
}

type fakeDispatch struct {
	pipe           unsafe.Pointer
	bufs           []unsafe.Pointer
	grid, threads  [3]int
	committedAfter int // commits before this dispatch
}

func newFake() *fakeBridge {
	return &fakeBridge{bufs: map[unsafe.Pointer][]byte{}, pipes: map[unsafe.Pointer][]byte{}, maxThreads: 1024}
}

func (f *fakeBridge) name() string { return "Fake GPU" }

func (f *fakeBridge) newBuffer(size int) (unsafe.Pointer, error) {
	b := make([]byte, size)
	h := unsafe.Pointer(&b[0])
	f.bufs[h] = b
	return h, nil
}

func (f *fakeBridge) contents(buf unsafe.Pointer, size int) []byte {
	b, ok := f.bufs[buf]
	if !ok {
		panic("contents of a released buffer")
	}
	return b[:size]
}

func (f *fakeBridge) compile(src []byte, entry string) (unsafe.Pointer, int, error) {
	if f.compileErr != nil {
		return nil, 0, f.compileErr
	}
	if !strings.Contains(string(src), "kernel void "+entry+"(") {
		return nil, 0, fmt.Errorf("no kernel %s", entry)
	}
	s := slices.Clone(src)
	h := unsafe.Pointer(&s[0])
	f.pipes[h] = s
	f.sources = append(f.sources, s)
	return h, f.maxThreads, nil
}

func (f *fakeBridge) dispatch(pipe unsafe.Pointer, bufs []unsafe.Pointer, grid, threads [3]int) error {
	if _, ok := f.pipes[pipe]; !ok {
		return errors.New("dispatch of a released pipeline")
	}
	for _, b := range bufs {
		if _, ok := f.bufs[b]; !ok {
			return errors.New("dispatch with a released buffer")
		}
	}
	f.dispatches = append(f.dispatches, fakeDispatch{pipe, slices.Clone(bufs), grid, threads, f.commits})
	f.open++
	return nil
}

func (f *fakeBridge) commit() {
	if f.open > 0 {
		f.commits++
		f.open = 0
	}
}

func (f *fakeBridge) wait() error {
	f.waits++
	err := f.waitErr
	f.waitErr = nil
	return err
}

func (f *fakeBridge) release(obj unsafe.Pointer) {
	switch {
	case f.bufs[obj] != nil:
		delete(f.bufs, obj)
	case f.pipes[obj] != nil:
		delete(f.pipes, obj)
	default:
		panic("release of an unknown or released object")
	}
	f.released++
}

func (f *fakeBridge) close() { f.closed = true }

func f32s(shape []int, v ...float32) *tensor.Tensor { return tensor.FromFloat32(shape, v) }

func node(t *testing.T, id int, op ir.Op, attrs ir.Attrs, in ...ir.Type) *ir.Node {
	t.Helper()
	_, na, err := ir.InferTypes(op, in, attrs)
	if err != nil {
		t.Fatal(err)
	}
	return &ir.Node{ID: id, Op: op, Attrs: na}
}

func upload(t *testing.T, d *Device, x *tensor.Tensor) *rt.Buffer {
	t.Helper()
	b, err := d.Upload(x)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestOpenOffMac(t *testing.T) {
	if runtime.GOOS == "darwin" {
		t.Skip("Metal may exist here") // platform-specific: checks the error off macOS
	}
	_, err := Open(Options{})
	if !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), "runs on macOS") {
		t.Errorf("Open: %v, want ErrUnsupported", err)
	}
}

func TestUploadDownload(t *testing.T) {
	f := newFake()
	d := newDevice(f, Options{})
	if d.Name() != "metal:Fake GPU" {
		t.Errorf("name %q", d.Name())
	}
	x := f32s([]int{2, 3}, 1, 2, 3, 4, 5, 6)
	b := upload(t, d, x)
	got, err := d.Download(b)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got.Float32s(), x.Float32s()) || !slices.Equal(got.Shape, x.Shape) {
		t.Errorf("round trip: %v %v", got.Shape, got.Float32s())
	}
	i := upload(t, d, tensor.ScalarInt32(-7))
	gi, err := d.Download(i)
	if err != nil || gi.Int32s()[0] != -7 {
		t.Errorf("i32 scalar: %v %v", gi, err)
	}
	if _, err := d.Upload(tensor.New(ir.I64, []int{2})); err == nil {
		t.Error("i64 upload accepted")
	}
	q := tensor.New(ir.Q4_0, []int{1, 32}) // a weight's blocks, as they are
	for i := range q.Data {
		q.Data[i] = byte(3 * i)
	}
	if g, err := d.Download(upload(t, d, q)); err != nil || !slices.Equal(g.Data, q.Data) {
		t.Errorf("q4_0 blocks do not round trip: %v", err)
	}
	empty := upload(t, d, tensor.New(ir.F32, []int{0}))
	if g, err := d.Download(empty); err != nil || len(g.Data) != 0 {
		t.Errorf("empty tensor: %v %v", g, err)
	}
	// A freed buffer is reused; a freed handle is refused.
	d.Free(b)
	b2 := upload(t, d, x)
	if st := d.Stats(); st.PoolHits != 1 {
		t.Errorf("stats %+v, want one pool hit", st)
	}
	if _, err := d.Download(b); err == nil {
		t.Error("download of a freed buffer accepted")
	}
	d.Free(b2)
}

func TestLaunchEncodes(t *testing.T) {
	f := newFake()
	d := newDevice(f, Options{})
	a := upload(t, d, f32s([]int{2, 3}, 1, 2, 3, 4, 5, 6))
	b := upload(t, d, f32s([]int{3}, 1, 1, 1))
	n := node(t, 3, ir.OpAdd, nil, a.Type(), b.Type())
	out, err := d.Launch(n, []*rt.Buffer{a, b}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != 1 || !out[0].Type().Equal(ir.T(ir.F32, ir.S(2, 3))) {
		t.Fatalf("outputs %v", out)
	}
	if len(f.dispatches) != 1 || f.commits != 0 {
		t.Fatalf("%d dispatches, %d commits; want 1 encoded, none committed", len(f.dispatches), f.commits)
	}
	k, err := msl.Generate(n, []ir.Type{a.Type(), b.Type()}, nil, msl.Options{})
	if err != nil {
		t.Fatal(err)
	}
	dp := f.dispatches[0]
	want := []unsafe.Pointer{a.Handle.(*mbuf).B, b.Handle.(*mbuf).B, out[0].Handle.(*mbuf).B}
	if !slices.Equal(dp.bufs, want) || dp.grid != k.Grid || dp.threads != k.WorkgroupSize {
		t.Errorf("dispatch %+v, want buffers %v grid %v threads %v", dp, want, k.Grid, k.WorkgroupSize)
	}
	if string(f.pipes[dp.pipe]) != string(k.Source) {
		t.Error("the pipeline is not the generated kernel")
	}
	// The same node and shapes reuse the plan and pipeline.
	if _, err := d.Launch(n, []*rt.Buffer{a, b}, nil); err != nil {
		t.Fatal(err)
	}
	if st := d.Stats(); st.Pipelines != 1 || st.KernelsMade != 1 || st.Dispatches != 2 {
		t.Errorf("stats %+v", st)
	}
	if _, err := d.Download(out[0]); err != nil {
		t.Fatal(err)
	}
	if f.commits != 1 || f.waits != 1 {
		t.Errorf("download: %d commits, %d waits; want 1, 1", f.commits, f.waits)
	}
	if err := d.Sync(); err != nil || f.waits != 1 {
		t.Errorf("sync with nothing pending: %v, %d waits", err, f.waits)
	}
}

func TestInPlaceAndReshape(t *testing.T) {
	f := newFake()
	d := newDevice(f, Options{})
	cache := upload(t, d, tensor.New(ir.F32, []int{8, 2, 4}))
	nw := upload(t, d, tensor.New(ir.F32, []int{1, 2, 4}))
	pos := upload(t, d, tensor.ScalarInt32(3))
	kv := node(t, 1, ir.OpKVWrite, nil, cache.Type(), nw.Type(), pos.Type())
	out, err := d.Launch(kv, []*rt.Buffer{cache, nw, pos}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if out[0] != cache {
		t.Error("kv_write did not return its cache")
	}
	if f.dispatches[0].bufs[0] != cache.Handle.(*mbuf).B {
		t.Error("kv_write's first buffer is not the cache")
	}
	rs := node(t, 2, ir.OpReshape, ir.Attrs{"shape": ir.ShapeAttr(ir.S(16, 4))}, cache.Type())
	r, err := d.Launch(rs, []*rt.Buffer{cache}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r[0].Handle.(*mbuf) != cache.Handle.(*mbuf) || !slices.Equal(r[0].Shape, []int{16, 4}) || len(f.dispatches) != 1 {
		t.Errorf("reshape: %v, %d dispatches; want a shared buffer and no dispatch", r[0], len(f.dispatches))
	}
	d.Free(cache)
	if _, err := d.Download(r[0]); err != nil {
		t.Errorf("the reshape's buffer died with its input: %v", err)
	}
	d.Free(r[0])
	if st := d.Stats(); d.bufs.Pool.Bytes() == 0 {
		t.Errorf("shared buffer not recycled after both frees: %+v", st)
	}
	// A reshape with a fault runs the copy kernel.
	d.SetFault(2, fault.WrongIndex)
	x := upload(t, d, tensor.New(ir.F32, []int{8, 2, 4}))
	if _, err := d.Launch(rs, []*rt.Buffer{x}, nil); err != nil || len(f.dispatches) != 2 {
		t.Errorf("faulty reshape: %v, %d dispatches", err, len(f.dispatches))
	}
	if !strings.Contains(string(f.sources[len(f.sources)-1]), "i + 1u") {
		t.Error("the fault is not in the kernel")
	}
}

func TestBatchingAndUploadWhileBusy(t *testing.T) {
	f := newFake()
	d := newDevice(f, Options{MaxBatch: 2})
	x := upload(t, d, f32s([]int{4}, 1, 2, 3, 4))
	n := node(t, 1, ir.OpExp, nil, x.Type())
	var outs []*rt.Buffer
	for i := 0; i < 5; i++ {
		o, err := d.Launch(n, []*rt.Buffer{x}, nil)
		if err != nil {
			t.Fatal(err)
		}
		outs = append(outs, o[0])
	}
	if f.commits != 2 {
		t.Errorf("%d commits after 5 launches with MaxBatch 2, want 2", f.commits)
	}
	// Freed while work is in flight: the next upload must not write it.
	freed := outs[0].Handle.(*mbuf).B
	d.Free(outs[0])
	y := upload(t, d, f32s([]int{4}, 9, 9, 9, 9))
	if y.Handle.(*mbuf).B == freed {
		t.Error("upload wrote a buffer the GPU may still use")
	}
	// A launch may reuse it: the GPU runs work in order.
	o, err := d.Launch(n, []*rt.Buffer{x}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if o[0].Handle.(*mbuf).B != freed {
		t.Error("launch output did not reuse the pooled buffer")
	}
	if err := d.Sync(); err != nil {
		t.Fatal(err)
	}
	if f.commits != 3 || f.waits != 1 {
		t.Errorf("after sync: %d commits, %d waits; want 3, 1", f.commits, f.waits)
	}
	// Idle now: uploads reuse the pool.
	yh := y.Handle.(*mbuf).B
	d.Free(y)
	z := upload(t, d, f32s([]int{4}, 1, 1, 1, 1))
	if z.Handle.(*mbuf).B != yh {
		t.Error("idle upload did not reuse the pool")
	}
}

func TestErrors(t *testing.T) {
	f := newFake()
	d := newDevice(f, Options{})
	x := upload(t, d, f32s([]int{4}, 1, 2, 3, 4))
	n := node(t, 5, ir.OpSoftmax, nil, x.Type())
	f.compileErr = errors.New("program_source:3:1: error: boom")
	_, err := d.Launch(n, []*rt.Buffer{x}, nil)
	var ke *rt.KernelError
	if !errors.As(err, &ke) || ke.Node != n || !strings.Contains(err.Error(), "boom") {
		t.Errorf("compile failure: %v, want a KernelError naming node 5", err)
	}
	f.compileErr = nil
	f.maxThreads = 2
	if _, err := d.Launch(n, []*rt.Buffer{x}, nil); err == nil || !strings.Contains(err.Error(), "threads per threadgroup") {
		t.Errorf("small pipeline: %v", err)
	}
	// The pipeline stays cached with its limit: start again.
	f = newFake()
	d = newDevice(f, Options{})
	x = upload(t, d, f32s([]int{4}, 1, 2, 3, 4))
	if _, err := d.Launch(n, []*rt.Buffer{x}, []ir.Type{ir.T(ir.F32, ir.S(5))}); err == nil {
		t.Error("wrong output type accepted")
	}
	o, err := d.Launch(n, []*rt.Buffer{x}, nil)
	if err != nil {
		t.Fatal(err)
	}
	f.waitErr = errors.New("Execution of the command buffer was aborted")
	if _, err := d.Download(o[0]); err == nil || !strings.Contains(err.Error(), "aborted") {
		t.Errorf("failed command buffer: %v", err)
	}
	other := newDevice(newFake(), Options{})
	y := upload(t, other, f32s([]int{4}, 1, 2, 3, 4))
	if _, err := d.Launch(n, []*rt.Buffer{y}, nil); err == nil {
		t.Error("buffer of another device accepted")
	}
	if _, err := d.Launch(nil, nil, nil); err == nil {
		t.Error("nil node accepted")
	}
}

func TestCloseReleasesEverything(t *testing.T) {
	f := newFake()
	d := newDevice(f, Options{})
	x := upload(t, d, f32s([]int{4}, 1, 2, 3, 4))
	n := node(t, 1, ir.OpNeg, nil, x.Type())
	o, err := d.Launch(n, []*rt.Buffer{x}, nil)
	if err != nil {
		t.Fatal(err)
	}
	d.Free(o[0]) // pooled; x stays live
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if len(f.bufs) != 0 || len(f.pipes) != 0 || !f.closed {
		t.Errorf("after close: %d buffers, %d pipelines, closed %v", len(f.bufs), len(f.pipes), f.closed)
	}
	d.Free(x) // no double release
	if _, err := d.Upload(f32s([]int{1}, 1)); err == nil {
		t.Error("upload after close accepted")
	}
	if err := d.Close(); err != nil {
		t.Error(err)
	}
}

// TestTinyModel runs llama.Tiny through the executor on the fake device
// (prefill of 5 tokens, two decode steps; results are not computed), at
// f32 and under f16 compute, and passes every kernel the device compiled
// through the MSL syntax check: the exact sources a Mac would compile for
// this model. Under f16 the KV caches take half their f32 bytes.
func TestTinyModel(t *testing.T) {
	m, err := arch.Build("tiny", llama.Tiny, llama.RandomWeights(llama.Tiny, 1))
	if err != nil {
		t.Fatal(err)
	}
	for _, opts := range []Options{{Compute: ir.F32}, f16Options} {
		t.Run(opts.Compute.String(), func(t *testing.T) { runTiny(t, m, opts) })
	}
}

func runTiny(t *testing.T, m *ir.Module, opts Options) {
	f := newFake()
	d := newDevice(f, opts)
	exec := rt.NewExecutor(m, d)
	if err := exec.Prepare("decode"); err != nil {
		t.Fatal(err)
	}
	var caches []*rt.Buffer
	for _, p := range m.Func("decode").Params[2:] {
		c := upload(t, d, tensor.New(p.Type.DType, p.Type.Shape.Sizes()))
		want := p.Type.Bytes()
		if d.store.Halved(p.Type.DType) {
			want /= 2
		}
		if g := c.Handle.(*mbuf); g.Size != devkit.SizeClass(uint64(want)) {
			t.Fatalf("cache %s takes %d bytes, want %d", p.Type, g.Size, want)
		}
		caches = append(caches, c)
	}
	pos := 0
	for _, toks := range [][]int32{{1, 72, 101, 108, 108}, {5}, {6}} {
		tok := upload(t, d, tensor.FromInt32([]int{len(toks)}, toks))
		p := upload(t, d, tensor.ScalarInt32(int32(pos)))
		fn := "decode"
		if len(toks) > 1 {
			fn = "prefill"
		}
		out, err := exec.Call(fn, append([]*rt.Buffer{tok, p}, caches...)...)
		if err != nil {
			t.Fatal(err)
		}
		for i, c := range out[1:] {
			if c != caches[i] {
				t.Fatalf("cache %d was not updated in place", i)
			}
		}
		if _, err := d.Download(out[0]); err != nil {
			t.Fatal(err)
		}
		d.Free(out[0])
		d.Free(tok)
		d.Free(p)
		pos += len(toks)
	}
	exec.Close()
	for _, c := range caches {
		d.Free(c)
	}
	st := d.Stats()
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if len(f.bufs) != 0 {
		t.Errorf("%d buffers leaked", len(f.bufs))
	}
	srcs := make([]msl.Source, len(f.sources))
	for i, s := range f.sources {
		srcs[i] = msl.Source{Name: fmt.Sprintf("tiny_%d", i), Src: s}
	}
	errs, err := msl.CheckAll(srcs)
	if err != nil {
		t.Fatal(err) // clang-14 missing: fail, never skip
	}
	for i, e := range errs {
		if e != nil {
			t.Errorf("%v\n%s", e, srcs[i].Src)
		}
	}
	t.Logf("%d kernels compiled and syntax-checked; stats %+v", len(srcs), st)
}
