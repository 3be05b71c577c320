// Package vulkan is tapml's native Vulkan device, the `vulkan` target: it
// runs each IR node as a SPIR-V compute kernel (codegen/spirv's
// translation of codegen/wgsl's kernels) through the Vulkan API itself,
// called with cgo. The Vulkan loader (libvulkan.so.1, Debian's libvulkan1)
// is opened with dlopen at Open, so a tapmlc binary starts on machines
// without one; building needs Debian's libvulkan-dev headers.
//
// What it does for speed (measured only on lavapipe here; the design
// follows what a GPU needs, as llama.cpp's Vulkan backend does):
//
//   - Memory: tensors are ranges of a few large device-local blocks
//     (memory.go), weights in blocks of their own; uploads and downloads
//     go through a host-visible staging buffer, or straight to the
//     tensor's memory where that is host-visible (lavapipe, integrated
//     GPUs).
//   - Launch only appends a command to a list: a dispatch with its
//     pipeline and descriptor set (both cached: pipelines by SPIR-V,
//     descriptor sets by pipeline and bound ranges), a barrier only where
//     a command touches memory an unsynchronised earlier one wrote or read
//     (hazard.go), copies for uploads and downloads.
//   - A list is recorded into a command buffer in one C call and
//     submitted with a fence after Options.MaxBatch dispatches (ramping up
//     from Options.BatchRamp after each wait, so the GPU starts while the
//     host records the rest), and on Download and Sync.
//   - Recorded command buffers are kept by the content of their list
//     (replay.go): a decode step launches the same kernels on the same
//     buffers every step (the position lives in a buffer), so from the
//     second step on its lists are resubmitted, never recorded again.
//   - Compiled pipelines persist in the driver's pipeline cache on disk
//     (pipecache.go).
//
// Safety: every Vulkan call's result is checked and a failure is an error
// naming the call; kernels are checked before the driver sees them
// (spirvcheck.go: structure, entry point, capabilities against the
// device's features; workgroup size, grid and bindings against its
// limits), because drivers do not validate and a bad kernel could crash
// them. A machine without a Vulkan driver gets an error naming the
// packages to install.
package vulkan

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/tapml/tapml/codegen"
	"github.com/tapml/tapml/codegen/wgsl"
	"github.com/tapml/tapml/ir"
	"github.com/tapml/tapml/runtime"
	"github.com/tapml/tapml/runtime/internal/devkit"
)

/*
#include "vk.h"
*/
import "C"

// Options configure a device.
type Options struct {
	// Generate makes the SPIR-V kernel of a node under the device's
	// limits, tuning, features and fault: runtime/target passes
	// codegen/spirv.Generate. (This package does not import codegen/spirv,
	// so that codegen/spirv's tests can run their kernels on it.) Without
	// it only LaunchKernel runs kernels.
	Generate func(n *ir.Node, in, out []ir.Type, opts wgsl.Options) (*codegen.Kernel, error)
	// Device chooses the physical device: its index or a part of its name.
	// By default the first discrete GPU, else integrated, virtual, other,
	// and last a CPU driver.
	Device string
	// MaxBatch is the number of dispatches after which the command list is
	// submitted (default 64 on CPU drivers, DiscreteMaxBatch on GPUs).
	MaxBatch int
	// BatchRamp, when > 0, makes the first submission after a wait come
	// after this many dispatches, the next after twice as many, up to
	// MaxBatch. 0 means DiscreteBatchRamp on GPUs and none on CPU
	// drivers; < 0 means none.
	BatchRamp int
	// Tuning passes performance knobs to the kernel generator; the zero
	// value means wgsl.DiscreteTuning() on GPUs and the generator's
	// defaults on CPU drivers.
	Tuning wgsl.Tuning
	// Limits, where a field is set, lowers the device limit kernels are
	// generated for (tests use it to exercise folded grids).
	Limits wgsl.Limits
	// NoF16, NoSubgroups and NoSubgroupMatrix keep the dialect's f16,
	// subgroup operations and subgroup matrices (VK_NV_cooperative_matrix)
	// off even where the device has them. Subgroup matrices need f16: NoF16
	// turns them off too.
	NoF16, NoSubgroups, NoSubgroupMatrix bool
	// Compute is the dtype float tensors live in on the device: f32 (zero)
	// or f16, which Open refuses (ErrNoF16) on a device without f16.
	// Under f16 every f32 tensor (activations, the KV cache, f32 weights)
	// is stored as f16: uploads round to f16 (to nearest even), downloads
	// widen, kernels compute in f32 (codegen/wgsl's Options.Compute).
	Compute ir.DType
	// Accumulate is the kernels' accumulator dtype where they honour it
	// (wgsl.Options.Accumulate): f32 (zero) or f16.
	Accumulate ir.DType
	// Faults maps node ids to a fault of codegen/wgsl injected into that
	// node's kernel. For tests of the carving and migration tools only.
	Faults map[int]string
	// WaitTimeout bounds a wait for the device (default 10 minutes); past
	// it the wait fails and the device is closed.
	WaitTimeout time.Duration
	// PipelineCacheDir is where compiled pipelines persist between runs
	// ("" means $XDG_CACHE_HOME/tapml/vulkan; "-" keeps them in memory).
	PipelineCacheDir string
	// BlockBytes is the largest block of device memory tensors are
	// suballocated from (default 1 GiB; tensors larger than it get a block
	// of their own). StagingBytes is the size of the staging buffer
	// (default 32 MiB); larger transfers go in parts.
	BlockBytes, StagingBytes uint64
	// ForceStaging sends every upload and download through the staging
	// buffer even when the tensors' memory is host-visible (tests use it
	// to exercise, on lavapipe, the path a discrete GPU takes).
	ForceStaging bool
	// MaxReplays bounds the recorded command buffers kept for replay
	// (default 256).
	MaxReplays int
	// Wait is how the host waits for the device: WaitBlock in the
	// driver's vkWaitForFences (the default on GPUs) or WaitPoll, polling
	// the fence with sleeps of at most 100 µs (the default on CPU
	// drivers: lavapipe's blocking wait woke so late under load that
	// decode took 2-4x the wall time of the same work polled).
	Wait WaitMode
}

// ErrNoF16 is Open's error when f16 compute is asked of a device without
// shaderFloat16 and 16-bit storage buffers (or with Options.NoF16).
var ErrNoF16 = errors.New("f16 compute needs shaderFloat16 and 16-bit storage buffers, which the device lacks")

// WaitMode is how the host waits for the device (Options.Wait).
type WaitMode int

const (
	WaitAuto  WaitMode = iota // WaitPoll on CPU drivers, WaitBlock on GPUs
	WaitBlock                 // block in vkWaitForFences
	WaitPoll                  // poll the fence, sleeping in between
)

// DiscreteMaxBatch and DiscreteBatchRamp are the submission sizes on
// GPUs: a step's first kernels run while the host records the rest, and
// a 400-dispatch decode step takes five submissions (16, 32, 64, 128,
// 128), each a replayed command buffer. (Guessed from the webgpu
// device's H200 measurements; bench/gpu can sweep them.)
const (
	DiscreteMaxBatch  = 128
	DiscreteBatchRamp = 16
)

var batchDefaults = devkit.BatchDefaults{MaxBatch: DiscreteMaxBatch, Ramp: DiscreteBatchRamp}

// Device is a Vulkan device. Its methods are safe for concurrent use (they
// serialise on one lock).
type Device struct {
	mu   sync.Mutex
	opts Options
	name string
	phys physInfo
	x    ctx
	cpu  bool // a CPU driver (lavapipe)

	feats    features      // enabled on the device
	wfeats   wgsl.Features // what kernels may use
	cgLimits wgsl.Limits
	faults   devkit.Faults
	store    devkit.Storage // f32 tensors as f16 under f16 compute (Options.Compute)

	// Memory.
	memType, stagingType int
	hostMem              bool // tensors' memory is host-visible and cached
	blocks               []*memBlock
	tensors, weights     *pool
	staging              *stagingBuf

	// Kernels.
	pipelines map[string]*vkPipeline // by SPIR-V bytes
	pcache    C.uint64_t
	plans     map[devkit.PlanKey]*plan
	memos     map[*ir.Node]*launchMemo
	sets      *descriptorCache

	// Commands.
	ops      []C.tvk_op
	haz      hazards
	reads    []access // scratch of dispatch
	writes   []access
	batch    devkit.Batch // dispatches in ops, and when to submit them
	replays  *replayCache[C.VkCommandBuffer]
	spareCBs []C.VkCommandBuffer
	fences   []C.uint64_t // unsignalled, free
	inflight []submission
	serial   uint64 // of the last submission
	done     uint64 // every submission up to it has finished

	// capturing is the call being recorded (capture.go); gen changes
	// when recordings become stale (descriptor sets freed, kernels
	// changed).
	capturing *capture
	gen       uint64

	prof *profiler // timing each command (profile.go), or nil

	lost   error // set when recorded work had to be dropped
	closed bool
	stats  Stats

	// hook, when set (by tests), may alter each kernel after generation.
	hook func(*codegen.Kernel)
}

// Stats counts what the device did, for tests and benchmarks: what every
// GPU device counts (Allocs are device memory allocations, blocks) and
// what is this device's own.
type Stats struct {
	devkit.Stats
	Barriers int // barriers between dependent commands
	Recorded int // command buffers recorded
	Replayed int // submissions of a command buffer recorded before
	// CallsRecorded and CallsReplayed count captured calls
	// (runtime.Capturer) and their replays.
	CallsRecorded, CallsReplayed int
	BlockBytes                   uint64 // bytes of device memory allocated
	InUse                        uint64 // bytes of live tensors and weights
	Staged                       uint64 // bytes that went through the staging buffer
}

var (
	_ runtime.Device         = (*Device)(nil)
	_ runtime.Preparer       = (*Device)(nil)
	_ runtime.KernelCompiler = (*Device)(nil)
	_ runtime.MemoryReporter = (*Device)(nil)
)

// Open opens a Vulkan device: the loader, an instance, the physical device
// chosen by opts.Device, a logical device with f16, subgroup and
// cooperative-matrix features where the device has them, one compute
// queue.
func Open(opts Options) (*Device, error) {
	if err := loadVulkan(); err != nil {
		return nil, err
	}
	if opts.WaitTimeout <= 0 {
		opts.WaitTimeout = 10 * time.Minute
	}
	if opts.PipelineCacheDir == "" {
		opts.PipelineCacheDir = defaultPipelineCacheDir()
	} else if opts.PipelineCacheDir == "-" {
		opts.PipelineCacheDir = ""
	}
	if opts.StagingBytes == 0 {
		opts.StagingBytes = 32 << 20
	}
	if opts.MaxReplays <= 0 {
		opts.MaxReplays = 256
	}
	x := newCtx()
	d, err := open(x, opts)
	if err != nil {
		x.free()
		return nil, err
	}
	return d, nil
}

func open(x ctx, opts Options) (*Device, error) {
	if err := x.createInstance(); err != nil {
		return nil, fmt.Errorf("vulkan: %w: %v; %s", errNoVulkan, err, fixHint)
	}
	devs, err := x.physical()
	if err != nil {
		return nil, fmt.Errorf("vulkan: %w", err)
	}
	idx, err := chooseDevice(devs, opts.Device)
	if err != nil {
		return nil, fmt.Errorf("vulkan: %w", err)
	}
	p := devs[idx]
	memType, stagingType, host, err := chooseMemory(&p)
	if err != nil {
		return nil, fmt.Errorf("vulkan: %s: %w", p.Name, err)
	}
	f := shaderFeatures(&p)
	if opts.NoF16 {
		f.f16, f.storage16, f.subgroupTypes, f.coopMatrix = false, false, false, false
	}
	if opts.NoSubgroupMatrix {
		f.coopMatrix = false
	}
	if opts.NoSubgroups {
		f.subgroupOps, f.subgroupTypes = 0, false
	}
	if (opts.Compute == ir.F16 || opts.Accumulate == ir.F16) && !f.f16 {
		return nil, fmt.Errorf("vulkan: %s: %w", p.Name, ErrNoF16)
	}
	if err := x.createDevice(idx, &p, f); err != nil {
		return nil, fmt.Errorf("vulkan: %s: %w", p.Name, err)
	}
	cpu := p.Type == typeCPU
	opts.MaxBatch = batchDefaults.MaxBatchOr(opts.MaxBatch, cpu)
	opts.BatchRamp = batchDefaults.RampOr(opts.BatchRamp, cpu)
	if opts.Tuning == (wgsl.Tuning{}) && !cpu {
		opts.Tuning = wgsl.DiscreteTuning()
	}
	opts.Wait = defaultWait(opts.Wait, cpu)
	maxBlock := opts.BlockBytes
	if maxBlock == 0 {
		maxBlock = 1 << 30
	}
	maxBlock = min(maxBlock, p.MaxAllocation)
	d := &Device{
		opts: opts, name: "vulkan:" + deviceName(&p), phys: p, x: x, cpu: cpu,
		feats:   f,
		wfeats:  wgsl.Features{F16: f.f16, Subgroups: f.subgroupOps != 0, SubgroupMatrix: f.coopMatrix},
		faults:  devkit.CopyFaults(opts.Faults),
		store:   devkit.Storage{Half: opts.Compute == ir.F16},
		batch:   devkit.NewBatch(opts.MaxBatch, opts.BatchRamp),
		memType: memType, stagingType: stagingType, hostMem: host,
		tensors:   newPool(p.StorageAlign, firstBlock, maxBlock),
		weights:   newPool(p.StorageAlign, firstBlock, min(firstBlock, maxBlock)),
		pipelines: map[string]*vkPipeline{},
		plans:     map[devkit.PlanKey]*plan{},
		memos:     map[*ir.Node]*launchMemo{},
		sets:      newDescriptorCache(),
	}
	d.cgLimits = deviceLimits(&p, opts.Limits)
	d.replays = newReplayCache(opts.MaxReplays, func(cb C.VkCommandBuffer) { d.spareCBs = append(d.spareCBs, cb) })
	d.pcache, err = x.createPipelineCache(loadPipelineCache(opts.PipelineCacheDir, &p))
	if err != nil {
		// A cache the driver refuses is no reason to fail: start empty.
		if d.pcache, err = x.createPipelineCache(nil); err != nil {
			return nil, fmt.Errorf("vulkan: %w", err)
		}
	}
	return d, nil
}

// deviceLimits are the limits kernels are generated for: the device's,
// lowered where lower sets a field.
func deviceLimits(p *physInfo, lower wgsl.Limits) wgsl.Limits {
	l := wgsl.Limits{
		MaxInvocationsPerWorkgroup:      int(p.MaxInvocations),
		MaxWorkgroupSizeX:               int(p.MaxWorkgroupSize[0]),
		MaxWorkgroupSizeY:               int(p.MaxWorkgroupSize[1]),
		MaxWorkgroupSizeZ:               int(p.MaxWorkgroupSize[2]),
		MaxWorkgroupStorageSize:         int(p.MaxSharedMemory),
		MaxWorkgroupsPerDimension:       int(min(p.MaxWorkgroups[0], p.MaxWorkgroups[1], p.MaxWorkgroups[2], 1<<31-1)),
		MaxStorageBuffersPerShaderStage: int(min(p.MaxStorageBuffers, maxBindings)),
	}
	for _, f := range []struct {
		dst *int
		v   int
	}{
		{&l.MaxInvocationsPerWorkgroup, lower.MaxInvocationsPerWorkgroup},
		{&l.MaxWorkgroupSizeX, lower.MaxWorkgroupSizeX}, {&l.MaxWorkgroupSizeY, lower.MaxWorkgroupSizeY},
		{&l.MaxWorkgroupSizeZ, lower.MaxWorkgroupSizeZ}, {&l.MaxWorkgroupStorageSize, lower.MaxWorkgroupStorageSize},
		{&l.MaxWorkgroupsPerDimension, lower.MaxWorkgroupsPerDimension},
		{&l.MaxStorageBuffersPerShaderStage, lower.MaxStorageBuffersPerShaderStage},
	} {
		if f.v > 0 && f.v < *f.dst {
			*f.dst = f.v
		}
	}
	return l
}

// maxBindings is the most storage buffers one kernel may bind (vk.c's
// descriptor arrays).
const maxBindings = 64

// Name identifies the device: vulkan:DEVICE.
func (d *Device) Name() string { return d.name }

// Info describes the physical device and what tapml enabled on it.
type Info struct {
	Name, API, Type string
	Driver, Vendor  uint32
	F16, Subgroups  bool
	SubgroupMatrix  bool // cooperative matrices (wgsl.Features.SubgroupMatrix)
	SubgroupSize    int
	HostMemory      bool // tensors live in host-visible memory (no staging copies)
}

// Info describes the device.
func (d *Device) Info() Info {
	types := map[int]string{typeOther: "other", typeIntegrated: "integrated GPU", typeDiscrete: "discrete GPU", typeVirtual: "virtual GPU", typeCPU: "CPU"}
	return Info{
		Name: d.phys.Name, API: apiString(d.phys.API), Type: types[d.phys.Type], Driver: d.phys.Driver, Vendor: d.phys.Vendor,
		F16: d.wfeats.F16, Subgroups: d.wfeats.Subgroups, SubgroupMatrix: d.wfeats.SubgroupMatrix, SubgroupSize: int(d.phys.SubgroupSize), HostMemory: d.hostMem,
	}
}

// Limits returns the device limits kernels are generated for.
func (d *Device) Limits() wgsl.Limits { return d.cgLimits }

// BufferLimits returns the device's binding limit (maxStorageBufferRange;
// a tensor larger than a memory block gets a block of its own, so buffers
// have no limit of their own here). A tensor's range is its size rounded
// up to the offset alignment, at most 256 bytes (Vulkan's bound on
// minStorageBufferOffsetAlignment).
func (d *Device) BufferLimits() runtime.BufferLimits {
	r := d.phys.MaxStorageRange
	return runtime.BufferLimits{MaxBinding: r, MaxTensor: int64(r / 256 * 256)}
}

// Features returns the dialect extensions kernels may use on the device.
func (d *Device) Features() wgsl.Features { return d.wfeats }

// Stats returns counters of the device's work so far.
func (d *Device) Stats() Stats {
	d.mu.Lock()
	defer d.mu.Unlock()
	s := d.stats
	s.InUse = d.tensors.inUse + d.weights.inUse
	return s
}

// CompileTime returns the time spent making kernels so far
// (runtime.KernelCompiler).
func (d *Device) CompileTime() time.Duration { return d.Stats().CompileTime }

// BufferBytes returns the device memory that holds the device's tensors
// and weights: its memory blocks, which it keeps until Close, so the
// amount now is the peak (runtime.MemoryReporter).
func (d *Device) BufferBytes() (now, peak int64) {
	st := d.Stats()
	return int64(st.BlockBytes), int64(st.BlockBytes)
}

// Tuning returns the kernel tuning in use.
func (d *Device) Tuning() wgsl.Tuning {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.opts.Tuning
}

// SetTuning changes the kernel tuning: kernels are generated again on their
// next launch (pipelines stay cached by SPIR-V). For benchmarks.
func (d *Device) SetTuning(t wgsl.Tuning) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.opts.Tuning = t
	d.gen++
	d.plans = map[devkit.PlanKey]*plan{}
	d.memos = map[*ir.Node]*launchMemo{}
}

// MaxBatch returns Options.MaxBatch in use.
func (d *Device) MaxBatch() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.opts.MaxBatch
}

// BatchRamp returns Options.BatchRamp in use.
func (d *Device) BatchRamp() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.opts.BatchRamp
}

// SetMaxBatch changes Options.MaxBatch (n <= 0 restores the default).
func (d *Device) SetMaxBatch(n int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.opts.MaxBatch = batchDefaults.MaxBatchOr(n, d.cpu)
	d.batch.Set(d.opts.MaxBatch, d.opts.BatchRamp)
}

// SetBatchRamp changes Options.BatchRamp (0 restores the default).
func (d *Device) SetBatchRamp(n int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.opts.BatchRamp = batchDefaults.RampOr(n, d.cpu)
	d.batch.Set(d.opts.MaxBatch, d.opts.BatchRamp)
}

// SetWait changes Options.Wait (WaitAuto restores the default).
func (d *Device) SetWait(w WaitMode) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.opts.Wait = defaultWait(w, d.cpu)
}

func defaultWait(w WaitMode, cpu bool) WaitMode {
	switch {
	case w != WaitAuto:
		return w
	case cpu:
		return WaitPoll
	}
	return WaitBlock
}

// SetFault injects a codegen/wgsl fault into the kernel of node id (""
// removes it). For tests only.
func (d *Device) SetFault(id int, fault string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.faults.Set(id, fault)
	d.gen++
}

// usable reports an error when the device is closed or lost recorded work.
func (d *Device) usable() error {
	if d.closed {
		return errors.New("vulkan: device is closed")
	}
	if d.lost != nil {
		err := d.lost
		d.lost = nil
		return fmt.Errorf("vulkan: earlier work was dropped: %w", err)
	}
	return nil
}

// Close waits for pending work, saves the pipeline cache and releases
// everything.
func (d *Device) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil
	}
	var err error
	if d.lost == nil {
		err = d.flushWait()
	}
	// Whatever happened, nothing may be in flight when objects go.
	err = errors.Join(err, d.x.waitIdle())
	d.closed = true
	d.ops = nil
	if data, derr := d.x.pipelineCacheData(d.pcache); derr == nil {
		// Failing to save only costs the next run compile time.
		_ = savePipelineCache(d.opts.PipelineCacheDir, &d.phys, data)
	}
	d.replays.clear()
	if d.prof != nil {
		d.x.destroyQueryPool(d.prof.pool)
		d.prof = nil
	}
	for _, s := range d.inflight {
		d.x.destroyFence(s.fence)
		if s.once {
			d.spareCBs = append(d.spareCBs, s.cb)
		}
	}
	d.inflight = nil
	for _, cb := range d.spareCBs {
		d.x.freeCommandBuffer(cb)
	}
	for _, f := range d.fences {
		d.x.destroyFence(f)
	}
	d.sets.destroy(d.x)
	for _, p := range d.pipelines {
		d.x.destroyPipeline(p)
	}
	d.x.destroyPipelineCache(d.pcache)
	for _, b := range d.blocks {
		d.x.destroyBlock(b)
	}
	if d.staging != nil {
		d.x.destroyBlock(d.staging.blk)
	}
	d.x.free()
	d.spareCBs, d.fences, d.pipelines, d.blocks, d.staging = nil, nil, nil, nil, nil
	d.plans, d.memos = nil, nil
	return err
}
