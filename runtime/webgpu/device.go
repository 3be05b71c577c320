//go:build !js

// Package webgpu is tapml's WebGPU device: it runs each IR node as a WGSL
// compute kernel (codegen/wgsl) through wgpu-native (cogentcore/webgpu),
// on Vulkan by default or on GL.
//
// Work is batched: Launch only records a dispatch into the current command
// encoder (into one compute pass, unless Options.SafeDispatch); the encoder
// is submitted when a result is downloaded, on Sync, before an upload, and
// after Options.MaxBatch dispatches, so that no submission runs long on
// CPU drivers (lavapipe). Waiting never calls
// Poll(true), which gives up after 5 s and then crashes lavapipe; it
// registers OnSubmittedWorkDone (or MapAsync) and polls without blocking,
// sleeping briefly between polls.
//
// Every wgpu call that can fail is made inside an error scope and its
// failure comes back as an error (a runtime.KernelError naming the op and
// node for kernel failures). Validation errors inside Queue.Submit would
// abort the process, so everything a submission uses is validated before:
// a failed pipeline or bind group is never recorded, and an encoder whose
// recording failed is dropped, not submitted.
//
// Buffers come from a pool keyed by size class, so a steady decode loop
// allocates no GPU memory; pipelines are cached by kernel source, and the
// kernel of each (node, input shapes) is generated once.
package webgpu

import (
	"errors"
	"fmt"
	"math"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/cogentcore/webgpu/wgpu"
	"github.com/tapml/tapml/codegen"
	"github.com/tapml/tapml/codegen/wgsl"
	"github.com/tapml/tapml/ir"
	"github.com/tapml/tapml/runtime"
	"github.com/tapml/tapml/runtime/internal/devkit"
	"github.com/tapml/tapml/tensor"
)

// Options configure a device.
type Options struct {
	// Backend is the graphics API: "vulkan" (the default), "gl", "metal",
	// "dx12" or "all" (let wgpu choose).
	Backend string
	// MaxBatch is the number of dispatches recorded before the encoder is
	// submitted (default 64 on CPU drivers, DiscreteMaxBatch on GPUs).
	MaxBatch int
	// BatchRamp, when > 0, makes the first submission after the device
	// waited (a Download or Sync) come after this many dispatches, the next
	// after twice as many, and so on up to MaxBatch, so that the GPU starts
	// on a step's first kernels while the rest are recorded. 0 means 8 on
	// GPUs and none on CPU drivers; < 0 means none.
	BatchRamp int
	// PoolBytes bounds the bytes of freed buffers kept for reuse (default
	// 1 GiB); buffers freed beyond it are released.
	PoolBytes int64
	// CopyReshape makes reshape run a copy kernel; by default its output
	// shares the input's GPU buffer.
	CopyReshape bool
	// Faults maps node ids to a fault of codegen/wgsl injected into that
	// node's kernel. For tests of the carving and migration tools only.
	Faults map[int]string
	// WaitTimeout bounds a wait for the device (Sync, Download); past it
	// the wait fails instead of hanging (default 10 minutes: lavapipe is
	// slow, but not that slow).
	WaitTimeout time.Duration
	// SafeDispatch records each dispatch in a compute pass of its own, so
	// that wgpu validates it (and reports an error naming its node) at
	// Launch. By default dispatches share a pass until the batch is
	// submitted, which costs about half as much host time per launch; a
	// validation error then comes back from the Sync or Download that
	// submits, still naming the node whose dispatch failed. Kernels are
	// checked against the device limits before recording, so such errors
	// mean a bug in a kernel or in this package.
	SafeDispatch bool
	// Verbose turns on wgpu's log of warnings and errors on stderr (errors
	// are returned as Go errors either way).
	Verbose bool
	// Tuning passes performance knobs to the kernel generator. The zero
	// value means wgsl.DiscreteTuning() on adapters that are not CPU
	// drivers and the generator's defaults on CPU drivers (lavapipe).
	Tuning wgsl.Tuning
	// Limits, where a field is set, lowers the device limit kernels are
	// generated for (tests use it to exercise folded grids and small
	// workgroups).
	Limits wgsl.Limits
	// MaxBufferBytes, when > 0, lowers the max buffer size and max storage
	// binding size the device is asked for (wgpu then enforces them), as a
	// constrained browser would ($TAPML_MAX_BUFFER; tests).
	MaxBufferBytes uint64
}

// Device is a WebGPU device. Its methods are safe for concurrent use (they
// serialise on one lock).
type Device struct {
	mu   sync.Mutex
	opts Options
	name string

	instance *wgpu.Instance
	adapter  *wgpu.Adapter
	dev      *wgpu.Device
	queue    *wgpu.Queue
	unc      uncaptured // errors no error scope caught
	info     wgpu.AdapterInfo
	limits   wgpu.Limits
	cgLimits wgsl.Limits
	faults   devkit.Faults

	pipelines map[string]*pipeline     // by kernel source
	plans     map[devkit.PlanKey]*plan // by node, input types and fault
	memos     map[*ir.Node]*memo       // the last launch of each node

	bufs    devkit.Allocator[*wgpu.Buffer] // storage buffers, pooled by size class
	staging devkit.Pool[*wgpu.Buffer]      // free map-read buffers by size class

	enc    *wgpu.CommandEncoder
	pass   *wgpu.ComputePassEncoder  // open compute pass of enc, if any
	labels []dispatched              // dispatches of the open pass, to name a failing node
	batch  devkit.Batch              // dispatches recorded in enc, and when to submit them
	lastCP *wgpu.ComputePipeline     // pipeline set last in the open pass
	groups []*wgpu.BindGroup         // bind groups to release after submission (uncached or evicted)
	bgs    map[bgKey]*wgpu.BindGroup // cached bind groups by layout and buffers
	bgOf   map[*wgpu.Buffer][]bgKey  // cached bind groups that use a buffer
	maxBGs int                       // bound of bgs: maxCachedBindGroups (tests lower it)
	cpu    bool                      // the adapter is a CPU driver
	lost   error                     // set when recorded work had to be dropped
	closed bool

	stats Stats

	// hook, when set (by tests), may alter each kernel after generation.
	hook func(*codegen.Kernel)
}

// Stats counts what the device did, for tests and benchmarks.
type Stats = devkit.Stats

// dispatched is a dispatch recorded in the open pass.
type dispatched struct {
	k *codegen.Kernel
	n *ir.Node
}

// bgKey identifies a bind group: its layout and the buffers bound, in
// binding order (each bound whole).
type bgKey struct {
	layout *wgpu.BindGroupLayout
	n      int
	bufs   [8]*wgpu.Buffer
}

// maxCachedBindGroups bounds the bind-group cache; past it the cache is
// emptied.
const maxCachedBindGroups = 8192

// DiscreteMaxBatch is the default Options.MaxBatch on adapters that are not
// CPU drivers. On an NVIDIA H200 (bench/gpu) TinyLlama decoded fastest
// with 64 and a ramp of 8 (248 tok/s; 16: 203, 32: 237, 128: 220, 256:
// 193, one submission per step: 134): the GPU runs the first kernels of a
// step while the host records the rest.
const DiscreteMaxBatch = 64

// pipeline is a compiled kernel source.
type pipeline struct {
	layout *wgpu.BindGroupLayout
	pl     *wgpu.PipelineLayout
	cp     *wgpu.ComputePipeline
}

// plan is the kernel of one node on concrete input types, with its pipeline.
type plan struct {
	k  *codegen.Kernel
	pp *pipeline
}

// gpuBuf is the handle of a runtime.Buffer: a pooled GPU buffer shared by
// the buffers that alias it (reshape).
type gpuBuf = devkit.Buf[*wgpu.Buffer]

var _ runtime.Device = (*Device)(nil)
var (
	_ runtime.Preparer       = (*Device)(nil)
	_ runtime.KernelCompiler = (*Device)(nil)
)

const bufUsage = wgpu.BufferUsageStorage | wgpu.BufferUsageCopySrc | wgpu.BufferUsageCopyDst

var quietOnce sync.Once

// quiet silences the noise of the graphics stack: a private
// XDG_RUNTIME_DIR when none is set.
func quiet() {
	quietOnce.Do(func() {
		if os.Getenv("XDG_RUNTIME_DIR") == "" {
			if dir, err := os.MkdirTemp("", "tapml-xdg-"); err == nil {
				_ = os.Chmod(dir, 0o700)
				_ = os.Setenv("XDG_RUNTIME_DIR", dir)
			}
		}
	})
}

// Open opens the first adapter of the chosen backend and requests a device
// with the adapter's own limits.
func Open(opts Options) (*Device, error) {
	quiet()
	// Every error comes back as a Go error, so wgpu's own log (which would
	// print each one again on stderr) stays off unless asked for.
	if opts.Verbose {
		wgpu.SetLogLevel(wgpu.LogLevelWarn)
	} else {
		wgpu.SetLogLevel(wgpu.LogLevelOff)
	}
	if opts.PoolBytes <= 0 {
		opts.PoolBytes = 1 << 30
	}
	if opts.WaitTimeout <= 0 {
		opts.WaitTimeout = 10 * time.Minute
	}
	backends := map[string]wgpu.InstanceBackend{
		"": wgpu.InstanceBackendVulkan, "vulkan": wgpu.InstanceBackendVulkan, "gl": wgpu.InstanceBackendGL,
		"metal": wgpu.InstanceBackendMetal, "dx12": wgpu.InstanceBackendDX12, "all": wgpu.InstanceBackendAll,
	}
	be, ok := backends[strings.ToLower(opts.Backend)]
	if !ok {
		return nil, fmt.Errorf("webgpu: unknown backend %q (want vulkan, gl, metal, dx12 or all)", opts.Backend)
	}
	inst, err := createInstance(be)
	if err != nil {
		return nil, err
	}
	adapter, err := inst.RequestAdapter(&wgpu.RequestAdapterOptions{PowerPreference: wgpu.PowerPreferenceHighPerformance})
	if err != nil || adapter == nil {
		inst.Release()
		return nil, fmt.Errorf("webgpu: no %s adapter: %v (is a driver installed? apt-get install -y mesa-vulkan-drivers libvulkan1)", orDefault(opts.Backend, "vulkan"), err)
	}
	// The adapter's own limits, not WebGPU's defaults: the buffer limits
	// especially (256 MiB per buffer, 128 MiB per binding by default).
	limits := adapter.GetLimits().Limits
	limits.MaxPushConstantSize = 0 // the binding reads garbage here
	if c := opts.MaxBufferBytes; c > 0 {
		limits.MaxBufferSize = min(limits.MaxBufferSize, c)
		limits.MaxStorageBufferBindingSize = min(limits.MaxStorageBufferBindingSize, c)
	}
	unc := newUncaptured()
	dev, err := requestDevice(adapter, limits, unc)
	if err != nil {
		unc.free()
		adapter.Release()
		inst.Release()
		return nil, err
	}
	// The buffer limits wgpu enforces are the device's, read back: should
	// a request not take (a measurement on an H200 met 256 MiB buffers
	// where the adapter offers more), the weights are split to those.
	if got := dev.GetLimits().Limits; got.MaxBufferSize > 0 && got.MaxStorageBufferBindingSize > 0 {
		limits.MaxBufferSize, limits.MaxStorageBufferBindingSize = got.MaxBufferSize, got.MaxStorageBufferBindingSize
	}
	info := adapter.GetInfo()
	cpu := info.AdapterType == wgpu.AdapterTypeCPU
	opts.MaxBatch = batchDefaults.MaxBatchOr(opts.MaxBatch, cpu)
	opts.BatchRamp = batchDefaults.RampOr(opts.BatchRamp, cpu)
	if opts.Tuning == (wgsl.Tuning{}) && !cpu {
		opts.Tuning = wgsl.DiscreteTuning()
	}
	d := &Device{
		opts:     opts,
		name:     fmt.Sprintf("webgpu:%s:%s", backendName(info.BackendType), adapterName(info)),
		info:     info,
		instance: inst,
		adapter:  adapter,
		dev:      dev,
		queue:    dev.GetQueue(),
		unc:      unc,
		limits:   limits,
		cgLimits: wgsl.Limits{
			MaxInvocationsPerWorkgroup:      int(limits.MaxComputeInvocationsPerWorkgroup),
			MaxWorkgroupSizeX:               int(limits.MaxComputeWorkgroupSizeX),
			MaxWorkgroupSizeY:               int(limits.MaxComputeWorkgroupSizeY),
			MaxWorkgroupSizeZ:               int(limits.MaxComputeWorkgroupSizeZ),
			MaxWorkgroupStorageSize:         int(limits.MaxComputeWorkgroupStorageSize),
			MaxWorkgroupsPerDimension:       int(limits.MaxComputeWorkgroupsPerDimension),
			MaxStorageBuffersPerShaderStage: int(limits.MaxStorageBuffersPerShaderStage),
		},
		faults:    devkit.CopyFaults(opts.Faults),
		pipelines: map[string]*pipeline{},
		plans:     map[devkit.PlanKey]*plan{},
		memos:     map[*ir.Node]*memo{},
		staging:   devkit.Pool[*wgpu.Buffer]{Limit: math.MaxInt64},
		batch:     devkit.NewBatch(opts.MaxBatch, opts.BatchRamp),
		bgs:       map[bgKey]*wgpu.BindGroup{},
		maxBGs:    maxCachedBindGroups,
		bgOf:      map[*wgpu.Buffer][]bgKey{},
		cpu:       cpu,
	}
	d.bufs = devkit.Allocator[*wgpu.Buffer]{
		Create: func(size uint64) (*wgpu.Buffer, error) {
			return dev.CreateBuffer(&wgpu.BufferDescriptor{Usage: bufUsage, Size: size})
		},
		Destroy: d.destroy,
		MaxSize: limits.MaxBufferSize,
		Stats:   &d.stats,
		Pool:    devkit.Pool[*wgpu.Buffer]{Limit: opts.PoolBytes},
	}
	lower := func(dst *int, v int) {
		if v > 0 && v < *dst {
			*dst = v
		}
	}
	l := &d.cgLimits
	lower(&l.MaxInvocationsPerWorkgroup, opts.Limits.MaxInvocationsPerWorkgroup)
	lower(&l.MaxWorkgroupSizeX, opts.Limits.MaxWorkgroupSizeX)
	lower(&l.MaxWorkgroupSizeY, opts.Limits.MaxWorkgroupSizeY)
	lower(&l.MaxWorkgroupSizeZ, opts.Limits.MaxWorkgroupSizeZ)
	lower(&l.MaxWorkgroupStorageSize, opts.Limits.MaxWorkgroupStorageSize)
	lower(&l.MaxWorkgroupsPerDimension, opts.Limits.MaxWorkgroupsPerDimension)
	lower(&l.MaxStorageBuffersPerShaderStage, opts.Limits.MaxStorageBuffersPerShaderStage)
	return d, nil
}

// batchDefaults are the submission sizes on GPUs: 8 dispatches first
// after each wait, then doubling up to DiscreteMaxBatch.
var batchDefaults = devkit.BatchDefaults{MaxBatch: DiscreteMaxBatch, Ramp: 8}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// adapterName is a short name of the adapter: its device name, or the first
// word of the driver's description when the name is only a hex id (as
// lavapipe's is).
func adapterName(info wgpu.AdapterInfo) string {
	name := info.Name
	if name == "" || strings.HasPrefix(name, "0x") {
		if f := strings.Fields(info.DriverDescription); len(f) > 0 {
			name = f[0]
		}
	}
	if name == "" {
		name = "unknown"
	}
	return name
}

// Adapter describes the adapter the device runs on.
func (d *Device) Adapter() wgpu.AdapterInfo { return d.info }

func backendName(b wgpu.BackendType) string {
	switch b {
	case wgpu.BackendTypeVulkan:
		return "vulkan"
	case wgpu.BackendTypeOpenGL:
		return "gl"
	case wgpu.BackendTypeOpenGLES:
		return "gles"
	case wgpu.BackendTypeMetal:
		return "metal"
	}
	return strings.ToLower(b.String())
}

// Name identifies the device: webgpu:BACKEND:ADAPTER.
func (d *Device) Name() string { return d.name }

// Limits returns the device limits kernels are generated for.
func (d *Device) Limits() wgsl.Limits { return d.cgLimits }

// BufferLimits returns the device's buffer and binding limits. A tensor
// lives in a pooled buffer of its size class, bound whole.
func (d *Device) BufferLimits() runtime.BufferLimits {
	l := runtime.BufferLimits{MaxBuffer: d.limits.MaxBufferSize, MaxBinding: d.limits.MaxStorageBufferBindingSize}
	l.MaxTensor = int64(devkit.LargestFitting(min(l.MaxBuffer, l.MaxBinding)))
	return l
}

// Stats returns counters of the device's work so far.
func (d *Device) Stats() Stats {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.stats
}

// CompileTime returns the time spent making kernels so far
// (runtime.KernelCompiler).
func (d *Device) CompileTime() time.Duration { return d.Stats().CompileTime }

// BufferBytes returns the bytes of the storage buffers the device holds,
// now and at the peak (runtime.MemoryReporter).
func (d *Device) BufferBytes() (now, peak int64) {
	st := d.Stats()
	return st.BufferBytes, st.PeakBufferBytes
}

// Tuning returns the kernel tuning in use.
func (d *Device) Tuning() wgsl.Tuning {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.opts.Tuning
}

// SetTuning changes the kernel tuning: kernels are generated again on their
// next launch (compiled pipelines stay cached by source). Work already
// recorded is unaffected. For benchmarks that compare variants on one
// device.
func (d *Device) SetTuning(t wgsl.Tuning) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.opts.Tuning = t
	d.plans = map[devkit.PlanKey]*plan{}
	d.memos = map[*ir.Node]*memo{}
}

// MaxBatch returns the number of dispatches recorded per submission.
func (d *Device) MaxBatch() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.opts.MaxBatch
}

// SetMaxBatch changes Options.MaxBatch (n <= 0 restores the default of the
// adapter's type).
func (d *Device) SetMaxBatch(n int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.opts.MaxBatch = batchDefaults.MaxBatchOr(n, d.cpu)
	d.batch.Set(d.opts.MaxBatch, d.opts.BatchRamp)
}

// BatchRamp returns Options.BatchRamp in use.
func (d *Device) BatchRamp() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.opts.BatchRamp
}

// SetBatchRamp changes Options.BatchRamp (0 restores the default of the
// adapter's type).
func (d *Device) SetBatchRamp(n int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.opts.BatchRamp = batchDefaults.RampOr(n, d.cpu)
	d.batch.Set(d.opts.MaxBatch, d.opts.BatchRamp)
}

// SetFault injects a codegen/wgsl fault into the kernel of node id (""
// removes it). For tests only.
func (d *Device) SetFault(id int, fault string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.faults.Set(id, fault)
}

// destroy releases a storage buffer and the cached bind groups that bind
// it (must hold d.mu). wgpu keeps it alive until pending work is done.
func (d *Device) destroy(buf *wgpu.Buffer) {
	d.forgetBindGroups(buf)
	buf.Release()
}

// forgetBindGroups drops the cached bind groups that bind buf (must hold
// d.mu).
func (d *Device) forgetBindGroups(buf *wgpu.Buffer) {
	for _, k := range d.bgOf[buf] {
		if bg := d.bgs[k]; bg != nil {
			d.retire(bg)
			delete(d.bgs, k)
		}
	}
	delete(d.bgOf, buf)
}

// clearBindGroups drops every cached bind group (must hold d.mu).
func (d *Device) clearBindGroups() {
	for _, bg := range d.bgs {
		d.retire(bg)
	}
	d.bgs = map[bgKey]*wgpu.BindGroup{}
	d.bgOf = map[*wgpu.Buffer][]bgKey{}
}

// retire releases a bind group the cache drops. While commands are being
// recorded it joins the recorded dispatches' groups, released after
// submission: an open compute pass looks its groups up only when it ends,
// and wgpu aborts the process on a group released before that. Submitted
// work keeps its groups alive in wgpu.
func (d *Device) retire(bg *wgpu.BindGroup) {
	if d.enc != nil {
		d.groups = append(d.groups, bg)
		return
	}
	bg.Release()
}

// bindGroup returns a bind group of layout over bufs, cached when it binds
// at most 8 buffers (must hold d.mu). cached reports whether the cache owns
// it; otherwise the caller releases it after submission.
func (d *Device) bindGroup(pp *pipeline, k *codegen.Kernel, bufs []*gpuBuf) (bg *wgpu.BindGroup, cached bool, err error) {
	var key bgKey
	cacheable := len(bufs) <= len(key.bufs)
	if cacheable {
		key.layout, key.n = pp.layout, len(bufs)
		for i, g := range bufs {
			key.bufs[i] = g.B
		}
		if bg := d.bgs[key]; bg != nil {
			return bg, true, nil
		}
	}
	entries := make([]wgpu.BindGroupEntry, len(bufs))
	for i, g := range bufs {
		entries[i] = wgpu.BindGroupEntry{Binding: uint32(k.Bindings[i].Index), Buffer: g.B, Size: g.Size}
	}
	bg, err = d.dev.CreateBindGroup(&wgpu.BindGroupDescriptor{Layout: pp.layout, Entries: entries})
	if err != nil || !cacheable {
		return bg, false, err
	}
	if len(d.bgs) >= d.maxBGs {
		d.clearBindGroups()
	}
	d.bgs[key] = bg
	for i, g := range bufs {
		dup := false
		for _, h := range bufs[:i] {
			dup = dup || h.B == g.B
		}
		if !dup {
			d.bgOf[g.B] = append(d.bgOf[g.B], key)
		}
	}
	return bg, true, nil
}

// Upload copies a tensor into a new device buffer.
func (d *Device) Upload(t *tensor.Tensor) (*runtime.Buffer, error) {
	if t == nil {
		return nil, errors.New("webgpu: upload of a nil tensor")
	}
	if err := devkit.CheckGPUTensor(t); err != nil {
		return nil, fmt.Errorf("webgpu: upload of %w", err)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.usable(); err != nil {
		return nil, err
	}
	// A pooled buffer may still be read by recorded dispatches; queue
	// writes run before the next submission, so submit those first.
	if err := d.flush(); err != nil {
		return nil, err
	}
	g, err := d.bufs.Alloc(uint64(len(t.Data)))
	if err != nil {
		return nil, fmt.Errorf("webgpu: upload of %s: %w", t, err)
	}
	if len(t.Data) > 0 {
		data := t.Data
		if len(data)%4 != 0 {
			data = make([]byte, (len(t.Data)+3)/4*4)
			copy(data, t.Data)
		}
		if err := d.queue.WriteBuffer(g.B, 0, data); err != nil {
			d.bufs.Free(g)
			return nil, fmt.Errorf("webgpu: upload of %s: %w", t, err)
		}
	}
	return devkit.Wrap(d, g, t.DType, t.Shape), nil
}

// Download copies a buffer to the host, submitting pending work and waiting
// for it.
func (d *Device) Download(b *runtime.Buffer) (*tensor.Tensor, error) {
	wait, err := d.StartDownload(b)
	if err != nil {
		return nil, err
	}
	return wait()
}

// StartDownload submits the work launched so far with a copy of b to a
// staging buffer and returns at once; wait returns b's data when that
// work is done, without waiting for work launched after StartDownload (a
// session's next decode step, recorded while this one runs).
func (d *Device) StartDownload(b *runtime.Buffer) (wait func() (*tensor.Tensor, error), err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	g, err := devkit.Handle[*wgpu.Buffer](d, b)
	if err != nil {
		return nil, fmt.Errorf("webgpu: download: %w", err)
	}
	if err := d.usable(); err != nil {
		return nil, err
	}
	t := tensor.New(b.DType, b.Shape)
	if len(t.Data) == 0 {
		return func() (*tensor.Tensor, error) { return t, nil }, nil
	}
	n := uint64(len(t.Data)+3) / 4 * 4
	c := devkit.SizeClass(n)
	st, ok := d.staging.Take(c)
	if !ok {
		st, err = d.dev.CreateBuffer(&wgpu.BufferDescriptor{Usage: wgpu.BufferUsageMapRead | wgpu.BufferUsageCopyDst, Size: c})
		if err != nil {
			return nil, fmt.Errorf("webgpu: download: staging buffer: %w", err)
		}
		d.stats.Allocs++
	}
	if err := d.encoder(); err != nil {
		st.Release()
		return nil, err
	}
	if err := d.endPass(); err != nil {
		d.staging.Put(c, st)
		return nil, err
	}
	if err := d.enc.CopyBufferToBuffer(g.B, 0, st, 0, n); err != nil {
		// The encoder is now invalid: drop it with the work it holds.
		d.drop(fmt.Errorf("copy for download: %w", err))
		st.Release()
		return nil, fmt.Errorf("webgpu: download: %w", err)
	}
	if err := d.submit(); err != nil {
		st.Release()
		return nil, err
	}
	return func() (*tensor.Tensor, error) {
		d.mu.Lock()
		defer d.mu.Unlock()
		// Mapped here, not at the start: the binding hands wgpu a pointer
		// to the callback's handle that only lives until the callback
		// runs in a Poll soon after (measured: a map left pending while
		// more work was recorded called back with a garbage handle). The
		// map waits for the submissions that use st, not later ones.
		var status wgpu.BufferMapAsyncStatus
		done := false
		if err := st.MapAsync(wgpu.MapModeRead, 0, n, func(s wgpu.BufferMapAsyncStatus) { status, done = s, true }); err != nil {
			st.Release()
			return nil, fmt.Errorf("webgpu: download: map: %w", err)
		}
		if err := d.pollUntil(&done); err != nil {
			return nil, err
		}
		d.batch.Waited()
		if status != wgpu.BufferMapAsyncStatusSuccess {
			st.Release()
			return nil, fmt.Errorf("webgpu: download: map failed: %s", status)
		}
		copy(t.Data, st.GetMappedRange(0, uint(n)))
		if err := st.Unmap(); err != nil {
			st.Release()
			return nil, fmt.Errorf("webgpu: download: unmap: %w", err)
		}
		d.staging.Put(c, st)
		return t, nil
	}, nil
}

// pollUntil polls the device without blocking until *done: first without
// sleeping (a GPU often finishes within tens of microseconds), then
// sleeping a little longer each round, up to 200 µs. Callbacks run inside
// Poll, on this goroutine. After Options.WaitTimeout it gives up: the
// device is then marked lost, since the callback may still come.
func (d *Device) pollUntil(done *bool) error {
	for i := 0; i < 20; i++ {
		d.dev.Poll(false, nil)
		if *done {
			return nil
		}
	}
	deadline := time.Now().Add(d.opts.WaitTimeout)
	sleep := 5 * time.Microsecond
	for {
		d.dev.Poll(false, nil)
		if *done {
			return nil
		}
		if time.Now().After(deadline) {
			d.closed = true // its state is unknown: refuse further work
			return fmt.Errorf("webgpu: the device did not finish within %s; it is now closed", d.opts.WaitTimeout)
		}
		time.Sleep(sleep)
		// CPU drivers need the cores; a GPU's wait is better cut short.
		if maxSleep := 50 * time.Microsecond; sleep < maxSleep || (d.cpu && sleep < 4*maxSleep) {
			sleep *= 2
		}
	}
}

// Sync submits pending work and waits until the queue is idle.
func (d *Device) Sync() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.usable(); err != nil {
		return err
	}
	if err := d.flush(); err != nil {
		return err
	}
	return d.wait()
}

// wait blocks until all submitted work is done (must hold d.mu).
func (d *Device) wait() error {
	var status wgpu.QueueWorkDoneStatus
	done := false
	d.queue.OnSubmittedWorkDone(func(s wgpu.QueueWorkDoneStatus) { status, done = s, true })
	if err := d.pollUntil(&done); err != nil {
		return err
	}
	d.batch.Waited()
	if status != wgpu.QueueWorkDoneStatusSuccess {
		return fmt.Errorf("webgpu: queue work failed: %s", status)
	}
	return nil
}

// usable reports an error when the device is closed or lost recorded work.
func (d *Device) usable() error {
	if d.closed {
		return errors.New("webgpu: device is closed")
	}
	if d.lost != nil {
		err := d.lost
		d.lost = nil
		return fmt.Errorf("webgpu: earlier work was dropped: %w", err)
	}
	if err := d.unc.take(); err != nil {
		return fmt.Errorf("webgpu: %w", err)
	}
	return nil
}

// encoder makes sure a command encoder is open.
func (d *Device) encoder() error {
	if d.enc != nil {
		return nil
	}
	enc, err := d.dev.CreateCommandEncoder(nil)
	if err != nil {
		return fmt.Errorf("webgpu: command encoder: %w", err)
	}
	d.enc = enc
	return nil
}

// endPass ends the open compute pass, where wgpu validates its dispatches.
// On failure the encoder is dropped and the error names the node whose
// pipeline the message mentions.
func (d *Device) endPass() error {
	if d.pass == nil {
		return nil
	}
	err := d.pass.End()
	d.pass.Release()
	d.pass = nil
	labels := map[string]*ir.Node{}
	for _, l := range d.labels {
		labels[l.k.Name()] = l.n
	}
	d.labels = d.labels[:0]
	if err == nil {
		return nil
	}
	lost := d.batch.Pending()
	d.drop(nil)
	err = fmt.Errorf("dispatch: %w (the %d dispatches recorded since the last submission were dropped)", err, lost)
	if m := pipelineLabel.FindStringSubmatch(err.Error()); m != nil && labels[m[1]] != nil {
		return &runtime.KernelError{Device: d.name, Node: labels[m[1]], Err: err}
	}
	return fmt.Errorf("webgpu: %w", err)
}

// pipelineLabel finds the pipeline a wgpu validation message is about.
var pipelineLabel = regexp.MustCompile("compute pipeline = `([^`]*)`")

// drop discards the open encoder and what it recorded, remembering why.
func (d *Device) drop(cause error) {
	if d.pass != nil {
		d.pass.Release()
		d.pass = nil
		d.labels = nil
	}
	if d.enc != nil {
		d.enc.Release()
		d.enc = nil
	}
	d.batch.Dropped()
	for _, bg := range d.groups {
		bg.Release()
	}
	d.groups = d.groups[:0]
	d.lost = cause
}

// submit finishes the open encoder and submits it (must hold d.mu).
func (d *Device) submit() error {
	if d.enc == nil {
		return nil
	}
	if err := d.endPass(); err != nil {
		return err
	}
	cb, err := d.enc.Finish(nil)
	d.enc.Release()
	d.enc = nil
	if err != nil {
		d.drop(err)
		return fmt.Errorf("webgpu: finishing commands: %w", err)
	}
	d.queue.Submit(cb)
	cb.Release()
	d.stats.Submits++
	d.batch.Submitted()
	for _, bg := range d.groups {
		bg.Release()
	}
	d.groups = d.groups[:0]
	d.dev.Poll(false, nil)
	return nil
}

// flush submits recorded work, if any.
func (d *Device) flush() error { return d.submit() }

// Free returns a buffer to the pool once no alias uses it.
func (d *Device) Free(b *runtime.Buffer) {
	if b == nil {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if g := devkit.Take[*wgpu.Buffer](d, b); g != nil {
		d.bufs.Free(g)
	}
}

// ReleasePool releases the freed buffers kept for reuse, so that the next
// buffers come new from wgpu, which zeroes them: a device server calls it
// between host sessions, so that no session reads another's data.
func (d *Device) ReleasePool() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return
	}
	d.bufs.Drain()
}

// Close submits and waits for pending work, then releases everything.
func (d *Device) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil
	}
	var err error
	if d.lost == nil {
		if err = d.flush(); err == nil {
			err = d.wait()
		}
	}
	d.drop(nil)
	d.closed = true
	d.clearBindGroups()
	for _, pp := range d.pipelines {
		pp.cp.Release()
		pp.pl.Release()
		pp.layout.Release()
	}
	d.bufs.Close()
	d.staging.Drain((*wgpu.Buffer).Release)
	d.pipelines, d.plans, d.memos = nil, nil, nil
	d.queue.Release()
	d.dev.Release()
	d.adapter.Release()
	d.instance.Release()
	d.unc.free()
	d.unc = uncaptured{}
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
	k, err := wgsl.Generate(n, in, out, wgsl.Options{Limits: d.cgLimits, Tuning: d.opts.Tuning, Fault: key.Fault})
	if err != nil {
		return nil, err
	}
	d.stats.KernelsMade++
	if d.hook != nil {
		d.hook(k)
	}
	pp, err := d.compile(k)
	if err != nil {
		return nil, err
	}
	p := &plan{k: k, pp: pp}
	d.plans[key] = p
	return p, nil
}

// compile creates (or finds) the pipeline of a kernel's WGSL source.
func (d *Device) compile(k *codegen.Kernel) (*pipeline, error) {
	src := string(k.Source)
	if pp, ok := d.pipelines[src]; ok {
		return pp, nil
	}
	if k.Language != "wgsl" && k.Language != "" {
		return nil, fmt.Errorf("the webgpu device runs wgsl kernels, not %q", k.Language)
	}
	mod, err := d.dev.CreateShaderModule(&wgpu.ShaderModuleDescriptor{
		Label:          k.Name(),
		WGSLDescriptor: &wgpu.ShaderModuleWGSLDescriptor{Code: src},
	})
	if err != nil {
		return nil, fmt.Errorf("shader module: %w", err)
	}
	defer mod.Release()
	pp, err := d.pipelineFor(mod, k.Entry, k.Bindings, k.Name())
	if err != nil {
		return nil, err
	}
	d.pipelines[src] = pp
	return pp, nil
}

// pipelineFor creates a compute pipeline with an explicit layout of the
// kernel's bindings.
func (d *Device) pipelineFor(mod *wgpu.ShaderModule, entry string, bindings []codegen.Binding, label string) (*pipeline, error) {
	entries := make([]wgpu.BindGroupLayoutEntry, len(bindings))
	for i, b := range bindings {
		ty := wgpu.BufferBindingTypeStorage
		if b.Access == codegen.Read {
			ty = wgpu.BufferBindingTypeReadOnlyStorage
		}
		entries[i] = wgpu.BindGroupLayoutEntry{
			Binding:    uint32(b.Index),
			Visibility: wgpu.ShaderStageCompute,
			Buffer:     wgpu.BufferBindingLayout{Type: ty},
		}
	}
	layout, err := d.dev.CreateBindGroupLayout(&wgpu.BindGroupLayoutDescriptor{Label: label, Entries: entries})
	if err != nil {
		return nil, fmt.Errorf("bind group layout: %w", err)
	}
	pl, err := d.dev.CreatePipelineLayout(&wgpu.PipelineLayoutDescriptor{Label: label, BindGroupLayouts: []*wgpu.BindGroupLayout{layout}})
	if err != nil {
		layout.Release()
		return nil, fmt.Errorf("pipeline layout: %w", err)
	}
	cp, err := d.dev.CreateComputePipeline(&wgpu.ComputePipelineDescriptor{
		Label:   label,
		Layout:  pl,
		Compute: wgpu.ProgrammableStageDescriptor{Module: mod, EntryPoint: entry},
	})
	if err != nil {
		pl.Release()
		layout.Release()
		return nil, fmt.Errorf("compute pipeline: %w", err)
	}
	d.stats.Pipelines++
	return &pipeline{layout: layout, pl: pl, cp: cp}, nil
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
func (d *Device) isView(n *ir.Node) bool {
	return !d.opts.CopyReshape && devkit.IsView(n, d.faults[n.ID])
}

// Launch records node n's kernel on inputs in. kv_write updates its cache
// in place and returns the cache buffer itself; reshape returns a buffer
// sharing its input's memory (unless Options.CopyReshape).
func (d *Device) Launch(n *ir.Node, in []*runtime.Buffer, outs []ir.Type) ([]*runtime.Buffer, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	res, err := d.launch(n, in, outs)
	return res, devkit.NodeError(d.name, n, err)
}

func (d *Device) launch(n *ir.Node, in []*runtime.Buffer, outs []ir.Type) ([]*runtime.Buffer, error) {
	if n == nil {
		return nil, errors.New("webgpu: launch of a nil node")
	}
	if err := d.usable(); err != nil {
		return nil, err
	}
	hs := make([]*gpuBuf, len(in))
	if err := devkit.Handles(d, in, hs); err != nil {
		return nil, err
	}
	fault := d.faults[n.ID]
	// A node launched again on inputs of the same types (every decode
	// step) skips type inference and the plan lookup.
	if m := d.memos[n]; m != nil && m.matches(in, fault) {
		if m.p == nil {
			return []*runtime.Buffer{devkit.Alias(d, hs[0], m.outDType, m.outShape)}, nil
		}
		return d.dispatch(n, m.p.k, m.p.pp, in, hs)
	}
	types := devkit.Types(in)
	if d.isView(n) && len(in) == 1 {
		want, err := devkit.ViewType(n, types, outs)
		if err != nil {
			return nil, err
		}
		d.memos[n] = newMemo(in, fault, nil, want.DType, want.Shape.Sizes())
		return []*runtime.Buffer{devkit.Alias(d, hs[0], want.DType, want.Shape.Sizes())}, nil
	}
	p, err := d.planFor(n, types, outs)
	if err != nil {
		return nil, err
	}
	d.memos[n] = newMemo(in, fault, p, 0, nil)
	return d.dispatch(n, p.k, p.pp, in, hs)
}

// memo is what the last launch of a node decided for its input types: the
// plan, or for a buffer-sharing reshape the output type.
type memo struct {
	dts      []ir.DType
	shapes   [][]int
	fault    string
	p        *plan
	outDType ir.DType
	outShape []int
}

func newMemo(in []*runtime.Buffer, fault string, p *plan, dt ir.DType, shape []int) *memo {
	m := &memo{fault: fault, p: p, outDType: dt, outShape: shape}
	for _, b := range in {
		m.dts = append(m.dts, b.DType)
		m.shapes = append(m.shapes, append([]int(nil), b.Shape...))
	}
	return m
}

func (m *memo) matches(in []*runtime.Buffer, fault string) bool {
	if m.fault != fault || len(in) != len(m.dts) {
		return false
	}
	for i, b := range in {
		if b.DType != m.dts[i] || !slices.Equal(b.Shape, m.shapes[i]) {
			return false
		}
	}
	return true
}

// LaunchKernel runs a prebuilt WGSL kernel as node n's on inputs in, like
// Launch does with the kernel it generates: outputs are allocated from the
// kernel's bindings, a ReadWrite binding updates its input in place. The
// pipeline is cached by source. The device server uses it.
func (d *Device) LaunchKernel(n *ir.Node, k *codegen.Kernel, in []*runtime.Buffer) ([]*runtime.Buffer, error) {
	if n == nil || k == nil {
		return nil, errors.New("webgpu: launch of a nil node or kernel")
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	res, err := d.launchKernel(n, k, in)
	return res, devkit.NodeError(d.name, n, err)
}

// Compile creates (or finds in the cache) the pipeline of a prebuilt kernel
// without running it, so that a bad kernel is reported before any launch
// (remote device servers compile when the host asks).
func (d *Device) Compile(k *codegen.Kernel) error {
	if k == nil {
		return errors.New("webgpu: compile of a nil kernel")
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return errors.New("webgpu: device is closed")
	}
	_, err := d.compile(k)
	return err
}

func (d *Device) launchKernel(n *ir.Node, k *codegen.Kernel, in []*runtime.Buffer) ([]*runtime.Buffer, error) {
	if err := d.usable(); err != nil {
		return nil, err
	}
	hs := make([]*gpuBuf, len(in))
	if err := devkit.Handles(d, in, hs); err != nil {
		return nil, err
	}
	if err := devkit.CheckBindings(k, hs); err != nil {
		return nil, err
	}
	pp, err := d.compile(k)
	if err != nil {
		return nil, err
	}
	return d.dispatch(n, k, pp, in, hs)
}

// dispatch allocates k's outputs and records its dispatch (must hold d.mu).
func (d *Device) dispatch(n *ir.Node, k *codegen.Kernel, pp *pipeline, in []*runtime.Buffer, hs []*gpuBuf) ([]*runtime.Buffer, error) {
	bound := make([]*gpuBuf, len(k.Bindings))
	if err := d.bufs.Bind(k, hs, bound); err != nil {
		return nil, err
	}
	if k.Grid[0]*k.Grid[1]*k.Grid[2] > 0 {
		if err := d.record(n, k, pp, bound); err != nil {
			d.bufs.Unbind(k, bound) // nothing was submitted: the outputs are unused
			return nil, err
		}
	}
	return devkit.Outputs(d, k, in, bound), nil
}

// record records one dispatch of k on the bound buffers and submits the
// batch when it is full (must hold d.mu).
func (d *Device) record(n *ir.Node, k *codegen.Kernel, pp *pipeline, bound []*gpuBuf) error {
	bg, cached, err := d.bindGroup(pp, k, bound)
	if err != nil {
		return fmt.Errorf("bind group: %w", err)
	}
	if err := d.encoder(); err != nil {
		if !cached {
			bg.Release()
		}
		return err
	}
	if !cached {
		d.groups = append(d.groups, bg)
	}
	if d.opts.SafeDispatch {
		if err := d.recordAlone(n, k, pp, bg); err != nil {
			return err
		}
	} else {
		if d.pass == nil {
			d.pass = d.enc.BeginComputePass(nil)
			d.labels = d.labels[:0]
			d.lastCP = nil
		}
		if d.lastCP != pp.cp {
			d.pass.SetPipeline(pp.cp)
			d.lastCP = pp.cp
		}
		d.pass.SetBindGroup(0, bg, nil)
		d.pass.DispatchWorkgroups(uint32(k.Grid[0]), uint32(k.Grid[1]), uint32(k.Grid[2]))
		d.labels = append(d.labels, dispatched{k, n})
	}
	d.stats.Dispatches++
	if d.batch.Add() {
		return d.submit()
	}
	return nil
}

// recordAlone records a dispatch in a compute pass of its own, which wgpu
// validates at once (Options.SafeDispatch).
func (d *Device) recordAlone(n *ir.Node, k *codegen.Kernel, pp *pipeline, bg *wgpu.BindGroup) error {
	hadPending := d.batch.Pending() > 0
	pass := d.enc.BeginComputePass(nil)
	pass.SetPipeline(pp.cp)
	pass.SetBindGroup(0, bg, nil)
	pass.DispatchWorkgroups(uint32(k.Grid[0]), uint32(k.Grid[1]), uint32(k.Grid[2]))
	err := pass.End()
	pass.Release()
	if err != nil {
		// The encoder is invalid now: drop it. Earlier dispatches recorded
		// in it are lost too; the next call reports that.
		d.drop(fmt.Errorf("node %s failed to record: %w", n, err))
		if !hadPending {
			d.lost = nil
		}
		return fmt.Errorf("dispatch: %w", err)
	}
	return nil
}
