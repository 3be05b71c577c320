// Package metal is tapml's Metal device for macOS: it runs each IR node as
// a Metal Shading Language kernel (codegen/msl) through Apple's Metal
// framework, called from Go with cgo and a little Objective-C.
//
// It builds only where Metal exists: Open works on darwin with cgo
// enabled; elsewhere it returns ErrUnsupported ("the metal target runs on
// macOS; use compile --target metal to emit kernels"). The device logic
// (this file: kernel and pipeline caches, and runtime/internal/devkit's
// buffer pool, in-place kv_write, shared reshape buffers, batching) is
// plain Go over a small bridge interface and is tested on Linux with a
// fake bridge; the bridge to Metal (bridge_darwin.go) is the only platform
// code:
//
//   - MTLCreateSystemDefaultDevice and one MTLCommandQueue;
//   - buffers are newBufferWithLength:options:MTLResourceStorageModeShared,
//     so uploads and downloads are memcpy into [buffer contents] (Apple
//     silicon has unified memory) after the GPU work that touches them;
//   - each kernel's source is compiled with newLibraryWithSource (fast math
//     off: the kernels need IEEE NaN and rounding behaviour) and
//     newComputePipelineStateWithFunction; pipelines are cached by source;
//   - launches are encoded into one compute command encoder (serial
//     dispatch, so each dispatch sees the previous one's writes) of an open
//     command buffer, committed every Options.MaxBatch dispatches and on
//     Sync, Download and Close; errors of committed command buffers are
//     reported by the next wait.
//
// Launch only encodes work; Download and Sync wait for it. Upload never
// writes a buffer the GPU may still use: while work is in flight it
// allocates a fresh buffer instead of reusing a pooled one.
//
// Under f16 compute (Options.Compute) the device stores every tensor the
// IR types f32 as f16, as the vulkan device does: uploads round
// (devkit.ToHalf), downloads widen (devkit.FromHalf), buffers are half the
// bytes, and the kernels are codegen/msl's at f16. Every Apple GPU Metal
// runs on has half in its shaders, so no feature is queried.
package metal

import (
	"errors"
	"fmt"
	"sync"
	"time"
	"unsafe"

	"github.com/tapml/tapml/codegen"
	"github.com/tapml/tapml/codegen/msl"
	"github.com/tapml/tapml/ir"
	"github.com/tapml/tapml/runtime"
	"github.com/tapml/tapml/runtime/internal/devkit"
	"github.com/tapml/tapml/tensor"
)

// ErrUnsupported is returned by Open where Metal is not available.
var ErrUnsupported = errors.New("the metal target runs on macOS; use compile --target metal to emit kernels")

// Options configure a device.
type Options struct {
	// MaxBatch is the number of dispatches encoded into one command buffer
	// before it is committed (default 64).
	MaxBatch int
	// PoolBytes bounds the bytes of freed buffers kept for reuse (default
	// 1 GiB); buffers freed beyond it are released.
	PoolBytes int64
	// Limits, where a field is set, lowers the limits kernels are
	// generated for (msl.DefaultLimits otherwise).
	Limits msl.Limits
	// Faults maps node ids to a fault of codegen/msl injected into that
	// node's kernel. For tests of the carving and migration tools only.
	Faults map[int]string
	// Compute is the dtype float tensors live in on the device: f32 (zero)
	// or f16. Under f16 every f32 tensor (activations, the KV cache, f32
	// weights) is stored as f16: uploads round to f16 (to nearest even,
	// beyond 65504 to infinity), downloads widen, kernels compute in f32
	// (msl.Options.Compute).
	Compute ir.DType
	// Accumulate is the kernels' accumulator dtype where they honour it
	// (msl.Options.Accumulate): f32 (zero) or f16.
	Accumulate ir.DType
}

// precision returns the options' compute precision, checked: f32 or f16
// each.
func (o Options) precision() (runtime.Precision, error) {
	p := runtime.Precision{Compute: o.Compute, Accumulate: o.Accumulate}.Normal()
	for _, dt := range []ir.DType{p.Compute, p.Accumulate} {
		if dt != ir.F32 && dt != ir.F16 {
			return p, fmt.Errorf("metal: precision %s: only f32 and f16 are supported", p)
		}
	}
	return p, nil
}

// bridge is what the device needs of Metal. Handles are retained
// Objective-C objects (or a fake's values); the device releases each one
// exactly once.
type bridge interface {
	// name is the GPU's name (MTLDevice.name).
	name() string
	// newBuffer returns a shared-storage buffer of size bytes (> 0).
	newBuffer(size int) (unsafe.Pointer, error)
	// contents is the CPU view of a buffer of size bytes.
	contents(buf unsafe.Pointer, size int) []byte
	// compile builds a compute pipeline from MSL source and its entry
	// point, returning it and its maxTotalThreadsPerThreadgroup.
	compile(src []byte, entry string) (pipe unsafe.Pointer, maxThreads int, err error)
	// dispatch encodes one dispatch of grid threadgroups of threads each
	// into the open command buffer (opening one when none is).
	dispatch(pipe unsafe.Pointer, bufs []unsafe.Pointer, grid, threads [3]int) error
	// commit ends encoding and commits the open command buffer, if any.
	commit()
	// wait blocks until every committed command buffer has completed and
	// returns the first one's error.
	wait() error
	// release releases a buffer or pipeline.
	release(obj unsafe.Pointer)
	// close releases the queue and the device.
	close()
}

// Device is a Metal device. Its methods are safe for concurrent use (they
// serialise on one lock).
type Device struct {
	mu     sync.Mutex
	br     bridge
	opts   Options
	name   string
	limits msl.Limits
	gen    msl.Options // what kernels are generated for, but the fault
	prec   runtime.Precision
	store  devkit.Storage // f32 tensors as f16 under f16 compute
	faults devkit.Faults

	pipes map[string]*pipeline     // by kernel source
	plans map[devkit.PlanKey]*plan // by node, input types and fault

	bufs     devkit.Allocator[unsafe.Pointer] // pooled by size class; all released at Close
	batch    devkit.Batch                     // dispatches encoded in the open command buffer
	inflight bool                             // committed work not waited for
	closed   bool

	stats Stats
}

// Stats counts what the device did, for tests and benchmarks (Submits
// counts committed command buffers).
type Stats = devkit.Stats

type pipeline struct {
	h          unsafe.Pointer
	maxThreads int
}

// plan is a node's kernel (its bindings typed as the IR types them), the
// same typed as the device stores them (devkit.HalfKernel under f16
// compute, else k) and its pipeline.
type plan struct {
	k, stored *codegen.Kernel
	pp        *pipeline
}

// mbuf is a Metal buffer with a reference count: a reshape shares its
// input's buffer.
type mbuf = devkit.Buf[unsafe.Pointer]

// newDevice wraps a bridge; Open calls it with the platform's bridge,
// after checking the options' precision (Options.precision).
func newDevice(br bridge, opts Options) *Device {
	prec, _ := opts.precision()
	if opts.MaxBatch <= 0 {
		opts.MaxBatch = devkit.DefaultMaxBatch
	}
	if opts.PoolBytes <= 0 {
		opts.PoolBytes = 1 << 30
	}
	lim := msl.DefaultLimits()
	lower := func(v *int, to int) {
		if to > 0 && to < *v {
			*v = to
		}
	}
	lower(&lim.MaxThreadsPerThreadgroup, opts.Limits.MaxThreadsPerThreadgroup)
	lower(&lim.MaxThreadgroupMemory, opts.Limits.MaxThreadgroupMemory)
	lower(&lim.MaxThreadgroupsPerDimension, opts.Limits.MaxThreadgroupsPerDimension)
	lower(&lim.MaxBuffers, opts.Limits.MaxBuffers)
	d := &Device{
		br: br, opts: opts, name: "metal:" + br.name(), limits: lim, gen: KernelOptions(lim, prec), prec: prec, store: devkit.Storage{Half: prec.Half()}, faults: devkit.CopyFaults(opts.Faults),
		pipes: map[string]*pipeline{}, plans: map[devkit.PlanKey]*plan{}, batch: devkit.NewBatch(opts.MaxBatch, 0),
	}
	d.bufs = devkit.Allocator[unsafe.Pointer]{
		Create:    func(size uint64) (unsafe.Pointer, error) { return br.newBuffer(int(size)) },
		Destroy:   br.release,
		Stats:     &d.stats,
		TrackLive: true,
		Pool:      devkit.Pool[unsafe.Pointer]{Limit: opts.PoolBytes},
	}
	return d
}

// KernelOptions are the options of the kernels the device runs for limits
// lim at precision p (but the fault); `compile --target metal` writes its
// kernels with them. Half is enabled only under an f16 precision, so f32
// kernels stay as they were.
func KernelOptions(lim msl.Limits, p runtime.Precision) msl.Options {
	p = p.Normal()
	o := msl.Options{Limits: lim, Compute: p.Compute, Accumulate: p.Accumulate}
	o.Features.F16 = p != runtime.F32
	return o
}

// Name identifies the device: metal:GPU.
func (d *Device) Name() string { return d.name }

// Limits returns the limits kernels are generated for.
func (d *Device) Limits() msl.Limits { return d.limits }

// Precision is the precision the device computes at (Options.Compute and
// Accumulate).
func (d *Device) Precision() runtime.Precision { return d.prec }

// Stats returns counters of the device's work so far.
func (d *Device) Stats() Stats {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.stats
}

// BufferBytes returns the bytes of the buffers the device holds, now and
// at the peak so far (runtime.MemoryReporter; f32 tensors under f16
// compute count at their stored 2 bytes).
func (d *Device) BufferBytes() (now, peak int64) {
	st := d.Stats()
	return st.BufferBytes, st.PeakBufferBytes
}

var _ runtime.MemoryReporter = (*Device)(nil)

// CompileTime returns the time spent making kernels so far
// (runtime.KernelCompiler).
func (d *Device) CompileTime() time.Duration { return d.Stats().CompileTime }

// SetFault injects a codegen/msl fault into the kernel of node id (""
// removes it). For tests only.
func (d *Device) SetFault(id int, fault string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.faults.Set(id, fault)
}

func (d *Device) usable() error {
	if d.closed {
		return errors.New("metal: device is closed")
	}
	return nil
}

// Upload copies a tensor into a new device buffer.
func (d *Device) Upload(t *tensor.Tensor) (*runtime.Buffer, error) {
	if t == nil {
		return nil, errors.New("metal: upload of a nil tensor")
	}
	if err := devkit.CheckGPUTensor(t); err != nil {
		return nil, fmt.Errorf("metal: upload of %w", err)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.usable(); err != nil {
		return nil, err
	}
	// A pooled buffer may still be used by encoded or running work; the
	// CPU must not write it until that is done. Work already encoded that
	// uses a pooled buffer runs before any later work that reuses it (one
	// queue, serial dispatch), so launches may reuse it.
	alloc := d.bufs.Alloc
	if d.batch.Pending() > 0 || d.inflight {
		alloc = d.bufs.New
	}
	data := d.store.Encode(t)
	g, err := alloc(uint64(len(data)))
	if err != nil {
		return nil, fmt.Errorf("metal: upload of %s: %w", t, err)
	}
	copy(d.br.contents(g.B, int(g.Size)), data)
	return devkit.Wrap(d, g, t.DType, t.Shape), nil
}

// flush commits the open command buffer (must hold d.mu).
func (d *Device) flush() {
	if d.batch.Pending() > 0 {
		d.br.commit()
		d.stats.Submits++
		d.batch.Submitted()
		d.inflight = true
	}
}

// wait commits and waits for all work (must hold d.mu).
func (d *Device) wait() error {
	d.flush()
	if !d.inflight {
		return nil
	}
	d.inflight = false
	d.batch.Waited()
	if err := d.br.wait(); err != nil {
		return fmt.Errorf("metal: command buffer failed: %w", err)
	}
	return nil
}

// Download copies a buffer to the host, committing pending work and
// waiting for it.
func (d *Device) Download(b *runtime.Buffer) (*tensor.Tensor, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	g, err := devkit.Handle[unsafe.Pointer](d, b)
	if err != nil {
		return nil, fmt.Errorf("metal: download: %w", err)
	}
	if err := d.usable(); err != nil {
		return nil, err
	}
	if err := d.wait(); err != nil {
		return nil, err
	}
	t := tensor.New(b.DType, b.Shape)
	n := len(t.Data)
	if d.store.Halved(b.DType) {
		n /= 2
	}
	if uint64(n) > g.Size {
		return nil, fmt.Errorf("metal: download of %s: the buffer holds %d bytes", b, g.Size)
	}
	raw := d.br.contents(g.B, int(g.Size))[:n]
	if d.store.Halved(b.DType) {
		devkit.FromHalf(raw, t.Data)
	} else {
		copy(t.Data, raw)
	}
	return t, nil
}

// Sync commits pending work and waits until it is done.
func (d *Device) Sync() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.usable(); err != nil {
		return err
	}
	return d.wait()
}

// Free returns a buffer to the pool once no alias uses it.
func (d *Device) Free(b *runtime.Buffer) {
	if b == nil {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if g := devkit.Take[unsafe.Pointer](d, b); g != nil {
		d.bufs.Free(g)
	}
}

// Close waits for pending work, then releases every buffer (freed or not:
// buffers still held become unusable), the pipelines, the queue and the
// device.
func (d *Device) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil
	}
	err := d.wait()
	d.closed = true
	d.bufs.Close()
	for _, pp := range d.pipes {
		d.br.release(pp.h)
	}
	d.pipes, d.plans = nil, nil
	d.br.close()
	return err
}

// planFor returns the compiled kernel of n on input types in (must hold d.mu).
func (d *Device) planFor(n *ir.Node, in, out []ir.Type) (*plan, error) {
	key := devkit.KeyOf(n, in, d.faults[n.ID])
	if p, ok := d.plans[key]; ok {
		return p, nil
	}
	start := time.Now()
	defer func() { d.stats.CompileTime += time.Since(start) }()
	opts := d.gen
	opts.Fault = key.Fault
	k, err := msl.Generate(n, in, out, opts)
	if err != nil {
		return nil, err
	}
	d.stats.KernelsMade++
	pp, err := d.compile(k)
	if err != nil {
		return nil, err
	}
	p := &plan{k: k, stored: d.store.Kernel(k), pp: pp}
	d.plans[key] = p
	return p, nil
}

// compile creates (or finds) the pipeline of a kernel's source and checks
// that it allows the kernel's threadgroup size.
func (d *Device) compile(k *codegen.Kernel) (*pipeline, error) {
	if k.Language != msl.Language {
		return nil, fmt.Errorf("the metal device runs msl kernels, not %q", k.Language)
	}
	src := string(k.Source)
	pp, ok := d.pipes[src]
	if !ok {
		h, maxThreads, err := d.br.compile(k.Source, k.Entry)
		if err != nil {
			return nil, fmt.Errorf("compiling %s: %w", k.Name(), err)
		}
		d.stats.Pipelines++
		pp = &pipeline{h: h, maxThreads: maxThreads}
		d.pipes[src] = pp
	}
	if wg := k.WorkgroupSize[0] * k.WorkgroupSize[1] * k.WorkgroupSize[2]; wg > pp.maxThreads {
		return nil, fmt.Errorf("kernel %s needs %d threads per threadgroup, its pipeline allows %d", k.Name(), wg, pp.maxThreads)
	}
	return pp, nil
}

// Prepare compiles the kernels of nodes whose input types are static (the
// decode function); nodes with symbolic shapes compile on first Launch.
func (d *Device) Prepare(m *ir.Module, f *ir.Function, nodes []*ir.Node) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.usable(); err != nil {
		return err
	}
	return devkit.Prepare(d.name, nodes, d.isView, func(n *ir.Node, in []ir.Type) error {
		_, err := d.planFor(n, in, nil)
		return err
	})
}

// isView reports whether node n runs as a view of its input instead of a
// kernel (must hold d.mu).
func (d *Device) isView(n *ir.Node) bool { return devkit.IsView(n, d.faults[n.ID]) }

// Launch encodes node n's kernel on inputs in. kv_write updates its cache
// in place and returns the cache buffer itself; reshape returns a buffer
// sharing its input's memory.
func (d *Device) Launch(n *ir.Node, in []*runtime.Buffer, outs []ir.Type) ([]*runtime.Buffer, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	res, err := d.launch(n, in, outs)
	return res, devkit.NodeError(d.name, n, err)
}

func (d *Device) launch(n *ir.Node, in []*runtime.Buffer, outs []ir.Type) ([]*runtime.Buffer, error) {
	if n == nil {
		return nil, errors.New("metal: launch of a nil node")
	}
	if err := d.usable(); err != nil {
		return nil, err
	}
	hs := make([]*mbuf, len(in))
	if err := devkit.Handles(d, in, hs); err != nil {
		return nil, err
	}
	if d.isView(n) {
		return devkit.View(d, n, in, hs, outs)
	}
	p, err := d.planFor(n, devkit.Types(in), outs)
	if err != nil {
		return nil, err
	}
	return d.dispatch(p, in, hs)
}

// LaunchKernel runs a prebuilt MSL kernel as node n's on inputs in, as
// Launch does with the kernel it generates: outputs are allocated from the
// kernel's bindings, a ReadWrite binding updates its input in place. Under
// f16 compute its f32 bindings are taken as stored in f16 (the kernels of
// `compile --target metal --compute f16`).
func (d *Device) LaunchKernel(n *ir.Node, k *codegen.Kernel, in []*runtime.Buffer) ([]*runtime.Buffer, error) {
	if n == nil || k == nil {
		return nil, errors.New("metal: launch of a nil node or kernel")
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	res, err := d.launchKernel(k, in)
	return res, devkit.NodeError(d.name, n, err)
}

func (d *Device) launchKernel(k *codegen.Kernel, in []*runtime.Buffer) ([]*runtime.Buffer, error) {
	if err := d.usable(); err != nil {
		return nil, err
	}
	hs := make([]*mbuf, len(in))
	if err := devkit.Handles(d, in, hs); err != nil {
		return nil, err
	}
	p := &plan{k: k, stored: d.store.Kernel(k)}
	if err := devkit.CheckBindings(p.stored, hs); err != nil {
		return nil, err
	}
	var err error
	if p.pp, err = d.compile(k); err != nil {
		return nil, err
	}
	return d.dispatch(p, in, hs)
}

// dispatch allocates p's outputs, sized as stored, and encodes its
// dispatch (must hold d.mu).
func (d *Device) dispatch(p *plan, in []*runtime.Buffer, hs []*mbuf) ([]*runtime.Buffer, error) {
	k, pp := p.k, p.pp
	bound := make([]*mbuf, len(k.Bindings))
	if err := d.bufs.Bind(p.stored, hs, bound); err != nil {
		return nil, err
	}
	if k.Grid[0]*k.Grid[1]*k.Grid[2] > 0 {
		bufs := make([]unsafe.Pointer, len(bound))
		for i, g := range bound {
			bufs[i] = g.B
		}
		if err := d.br.dispatch(pp.h, bufs, k.Grid, k.WorkgroupSize); err != nil {
			d.bufs.Unbind(k, bound)
			return nil, fmt.Errorf("dispatch: %w", err)
		}
		d.stats.Dispatches++
		if d.batch.Add() {
			d.flush()
		}
	}
	return devkit.Outputs(d, k, in, bound), nil
}
