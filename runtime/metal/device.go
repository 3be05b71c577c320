// Package metal is tapml's Metal device for macOS: it runs each IR node as
// a Metal Shading Language kernel (codegen/msl) through Apple's Metal
// framework, called from Go with cgo and a little Objective-C.
//
// It builds only where Metal exists: Open works on darwin with cgo
// enabled; elsewhere it returns ErrUnsupported ("the metal target runs on
// macOS; use compile --target metal to emit kernels"). The device logic
// (this file: kernel and pipeline caches, buffer pool, in-place kv_write,
// shared reshape buffers, batching) is plain Go over a small bridge
// interface and is tested on Linux with a fake bridge; the bridge to Metal
// (bridge_darwin.go) is the only platform code:
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
package metal

import (
	"errors"
	"fmt"
	"math/bits"
	"sync"
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
	faults map[int]string

	pipes map[string]*pipeline // by kernel source
	plans map[planKey]*plan    // by node, input types and fault

	pool   map[int][]unsafe.Pointer // free buffers by size class
	pooled int64
	live   map[*mbuf]struct{} // buffers in use

	pending  int  // dispatches encoded in the open command buffer
	inflight bool // committed work not waited for
	closed   bool

	stats Stats
}

// Stats counts what the device did, for tests and benchmarks.
type Stats struct {
	Dispatches  int // dispatches encoded
	Commits     int // command buffers committed
	Allocs      int // buffers created
	PoolHits    int // buffers reused from the pool
	Pipelines   int // pipelines compiled
	KernelsMade int // kernels generated
}

type pipeline struct {
	h          unsafe.Pointer
	maxThreads int
}

type planKey struct {
	node  *ir.Node
	sig   string
	fault string
}

type plan struct {
	k  *codegen.Kernel
	pp *pipeline
}

// mbuf is a Metal buffer with a reference count: a reshape shares its
// input's buffer.
type mbuf struct {
	h    unsafe.Pointer
	size int // bytes (its size class)
	refs int
}

// newDevice wraps a bridge; Open calls it with the platform's bridge.
func newDevice(br bridge, opts Options) *Device {
	if opts.MaxBatch <= 0 {
		opts.MaxBatch = 64
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
	faults := map[int]string{}
	for id, f := range opts.Faults {
		faults[id] = f
	}
	return &Device{
		br: br, opts: opts, name: "metal:" + br.name(), limits: lim, faults: faults,
		pipes: map[string]*pipeline{}, plans: map[planKey]*plan{}, pool: map[int][]unsafe.Pointer{},
		live: map[*mbuf]struct{}{},
	}
}

// Name identifies the device: metal:GPU.
func (d *Device) Name() string { return d.name }

// Limits returns the limits kernels are generated for.
func (d *Device) Limits() msl.Limits { return d.limits }

// Stats returns counters of the device's work so far.
func (d *Device) Stats() Stats {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.stats
}

// SetFault injects a codegen/msl fault into the kernel of node id (""
// removes it). For tests only.
func (d *Device) SetFault(id int, fault string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if fault == "" {
		delete(d.faults, id)
	} else {
		d.faults[id] = fault
	}
}

// sizeClass rounds a byte count up to its pool class: powers of two up to
// 64 KiB, then eighths of a power of two. The minimum is 16 bytes (Metal
// has no empty buffers).
func sizeClass(n int) int {
	if n <= 16 {
		return 16
	}
	if n <= 64<<10 {
		return 1 << bits.Len(uint(n-1))
	}
	step := 1 << (bits.Len(uint(n-1)) - 4)
	return (n + step - 1) / step * step
}

// alloc returns a buffer of at least n bytes (must hold d.mu); fresh
// forces a new buffer.
func (d *Device) alloc(n int, fresh bool) (*mbuf, error) {
	c := sizeClass(n)
	if free := d.pool[c]; len(free) > 0 && !fresh {
		h := free[len(free)-1]
		d.pool[c] = free[:len(free)-1]
		d.pooled -= int64(c)
		d.stats.PoolHits++
		g := &mbuf{h: h, size: c, refs: 1}
		d.live[g] = struct{}{}
		return g, nil
	}
	h, err := d.br.newBuffer(c)
	if err != nil {
		return nil, err
	}
	d.stats.Allocs++
	g := &mbuf{h: h, size: c, refs: 1}
	d.live[g] = struct{}{}
	return g, nil
}

// recycle returns a buffer to the pool, or releases it when the pool is
// full. Work already encoded that uses it runs before any later work that
// reuses it (one queue, serial dispatch).
func (d *Device) recycle(g *mbuf) {
	if d.closed {
		return // Close released it
	}
	delete(d.live, g)
	if d.pooled+int64(g.size) > d.opts.PoolBytes {
		d.br.release(g.h)
		return
	}
	d.pool[g.size] = append(d.pool[g.size], g.h)
	d.pooled += int64(g.size)
}

func (d *Device) wrap(g *mbuf, dt ir.DType, shape []int) *runtime.Buffer {
	return &runtime.Buffer{Dev: d, DType: dt, Shape: append([]int{}, shape...), Handle: g}
}

// handle returns the Metal buffer behind b, checking that it is live and ours.
func (d *Device) handle(b *runtime.Buffer) (*mbuf, error) {
	if b == nil {
		return nil, errors.New("nil buffer")
	}
	if b.Dev != runtime.Device(d) {
		return nil, fmt.Errorf("buffer %s is not on %s", b, d.name)
	}
	g, ok := b.Handle.(*mbuf)
	if !ok || g == nil || g.refs <= 0 {
		return nil, fmt.Errorf("buffer %s was freed", b)
	}
	return g, nil
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
	// CPU must not write it until that is done.
	busy := d.pending > 0 || d.inflight
	g, err := d.alloc(len(t.Data), busy)
	if err != nil {
		return nil, fmt.Errorf("metal: upload of %s: %w", t, err)
	}
	copy(d.br.contents(g.h, g.size), t.Data)
	return d.wrap(g, t.DType, t.Shape), nil
}

// flush commits the open command buffer (must hold d.mu).
func (d *Device) flush() {
	if d.pending > 0 {
		d.br.commit()
		d.stats.Commits++
		d.pending = 0
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
	g, err := d.handle(b)
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
	if len(t.Data) > g.size {
		return nil, fmt.Errorf("metal: download of %s: the buffer holds %d bytes", b, g.size)
	}
	copy(t.Data, d.br.contents(g.h, g.size))
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
	g, ok := b.Handle.(*mbuf)
	if !ok || g == nil {
		return
	}
	b.Handle = nil
	g.refs--
	if g.refs == 0 {
		d.recycle(g)
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
	for _, free := range d.pool {
		for _, h := range free {
			d.br.release(h)
		}
	}
	for g := range d.live {
		d.br.release(g.h)
		g.refs = 0
	}
	for _, pp := range d.pipes {
		d.br.release(pp.h)
	}
	d.pool, d.pipes, d.plans, d.live, d.pooled = nil, nil, nil, nil, 0
	d.br.close()
	return err
}

// planFor returns the compiled kernel of n on input types in (must hold d.mu).
func (d *Device) planFor(n *ir.Node, in, out []ir.Type) (*plan, error) {
	key := planKey{node: n, sig: devkit.TypeSig(in), fault: d.faults[n.ID]}
	if p, ok := d.plans[key]; ok {
		return p, nil
	}
	k, err := msl.Generate(n, in, out, msl.Options{Limits: d.limits, Fault: key.fault})
	if err != nil {
		return nil, err
	}
	d.stats.KernelsMade++
	pp, err := d.compile(k)
	if err != nil {
		return nil, err
	}
	p := &plan{k: k, pp: pp}
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
	for _, n := range nodes {
		if n.Op == ir.OpReshape && d.faults[n.ID] == "" {
			continue
		}
		in, static := devkit.StaticInputs(n)
		if !static {
			continue
		}
		if _, err := d.planFor(n, in, nil); err != nil {
			return &runtime.KernelError{Device: d.name, Node: n, Err: err}
		}
	}
	return nil
}

// Launch encodes node n's kernel on inputs in. kv_write updates its cache
// in place and returns the cache buffer itself; reshape returns a buffer
// sharing its input's memory.
func (d *Device) Launch(n *ir.Node, in []*runtime.Buffer, outs []ir.Type) ([]*runtime.Buffer, error) {
	if n == nil {
		return nil, errors.New("metal: launch of a nil node")
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	res, err := d.launch(n, in, outs)
	if err != nil {
		return nil, &runtime.KernelError{Device: d.name, Node: n, Err: err}
	}
	return res, nil
}

func (d *Device) launch(n *ir.Node, in []*runtime.Buffer, outs []ir.Type) ([]*runtime.Buffer, error) {
	if err := d.usable(); err != nil {
		return nil, err
	}
	hs := make([]*mbuf, len(in))
	types := make([]ir.Type, len(in))
	for i, b := range in {
		h, err := d.handle(b)
		if err != nil {
			return nil, fmt.Errorf("input %d: %w", i, err)
		}
		hs[i], types[i] = h, b.Type()
	}
	if n.Op == ir.OpReshape && len(in) == 1 && d.faults[n.ID] == "" {
		want, _, err := ir.InferTypes(n.Op, types, n.BoundAttrs(types, outs))
		if err != nil {
			return nil, err
		}
		if outs != nil && (len(outs) != 1 || !outs[0].Equal(want[0])) {
			return nil, fmt.Errorf("output types %v, the input gives %s", outs, want[0])
		}
		hs[0].refs++
		return []*runtime.Buffer{d.wrap(hs[0], want[0].DType, want[0].Shape.Sizes())}, nil
	}
	p, err := d.planFor(n, types, outs)
	if err != nil {
		return nil, err
	}
	return d.dispatch(p.k, p.pp, in, hs)
}

// LaunchKernel runs a prebuilt MSL kernel as node n's on inputs in, as
// Launch does with the kernel it generates: outputs are allocated from the
// kernel's bindings, a ReadWrite binding updates its input in place.
func (d *Device) LaunchKernel(n *ir.Node, k *codegen.Kernel, in []*runtime.Buffer) ([]*runtime.Buffer, error) {
	if n == nil || k == nil {
		return nil, errors.New("metal: launch of a nil node or kernel")
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	res, err := d.launchKernel(k, in)
	if err != nil {
		return nil, &runtime.KernelError{Device: d.name, Node: n, Err: err}
	}
	return res, nil
}

func (d *Device) launchKernel(k *codegen.Kernel, in []*runtime.Buffer) ([]*runtime.Buffer, error) {
	if err := d.usable(); err != nil {
		return nil, err
	}
	hs := make([]*mbuf, len(in))
	for i, b := range in {
		h, err := d.handle(b)
		if err != nil {
			return nil, fmt.Errorf("input %d: %w", i, err)
		}
		hs[i] = h
	}
	for i, b := range k.Bindings {
		if b.Index != i {
			return nil, fmt.Errorf("kernel binding %d has index %d; bindings must be 0, 1, ... in order", i, b.Index)
		}
		if b.Input >= len(in) {
			return nil, fmt.Errorf("kernel binding %d reads input %d of %d", i, b.Input, len(in))
		}
		if b.Input >= 0 && b.Type.Bytes() > int64(hs[b.Input].size) {
			return nil, fmt.Errorf("kernel binding %d expects %s, input %d holds %d bytes", i, b.Type, b.Input, hs[b.Input].size)
		}
		if b.Input < 0 && (b.Output < 0 || !b.Type.Shape.IsStatic()) {
			return nil, fmt.Errorf("kernel binding %d is neither an input nor a static output", i)
		}
	}
	pp, err := d.compile(k)
	if err != nil {
		return nil, err
	}
	return d.dispatch(k, pp, in, hs)
}

// dispatch allocates k's outputs and encodes its dispatch (must hold d.mu).
func (d *Device) dispatch(k *codegen.Kernel, pp *pipeline, in []*runtime.Buffer, hs []*mbuf) ([]*runtime.Buffer, error) {
	nout := 0
	for _, b := range k.Bindings {
		nout = max(nout, b.Output+1)
	}
	res := make([]*runtime.Buffer, nout)
	bufs := make([]unsafe.Pointer, len(k.Bindings))
	var fresh []*mbuf
	fail := func(err error) ([]*runtime.Buffer, error) {
		for _, g := range fresh {
			g.refs--
			d.recycle(g)
		}
		return nil, err
	}
	for i, b := range k.Bindings {
		switch {
		case b.Input >= 0:
			bufs[i] = hs[b.Input].h
			if b.Output >= 0 {
				res[b.Output] = in[b.Input] // in place
			}
		default:
			g, err := d.alloc(int(b.Type.Bytes()), false)
			if err != nil {
				return fail(fmt.Errorf("output %d: %w", b.Output, err))
			}
			fresh = append(fresh, g)
			bufs[i] = g.h
			res[b.Output] = d.wrap(g, b.Type.DType, b.Type.Shape.Sizes())
		}
	}
	if k.Grid[0]*k.Grid[1]*k.Grid[2] == 0 {
		return res, nil
	}
	if err := d.br.dispatch(pp.h, bufs, k.Grid, k.WorkgroupSize); err != nil {
		return fail(fmt.Errorf("dispatch: %w", err))
	}
	d.pending++
	d.stats.Dispatches++
	if d.pending >= d.opts.MaxBatch {
		d.flush()
	}
	return res, nil
}
