package spirv

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/cogentcore/webgpu/wgpu"
	"github.com/tapml/tapml/codegen"
	"github.com/tapml/tapml/tensor"
)

// gpu is a minimal runner of codegen.Kernels on wgpu's Vulkan adapter, for
// the device test: buffers, an explicit pipeline layout from the kernel's
// bindings, one dispatch, a read back. Waiting never blocks in Poll(true)
// (PLATFORM.md: it gives up after 5 s and lavapipe then crashes).
type gpu struct {
	inst    *wgpu.Instance
	adapter *wgpu.Adapter
	dev     *wgpu.Device
	queue   *wgpu.Queue
	limits  wgpu.Limits
	name    string
	// module turns a kernel into a shader module on dev.
	module func(g *gpu, k *codegen.Kernel) (*wgpu.ShaderModule, error)
}

var (
	gpuOnce sync.Once
	gpuDev  *gpu
	gpuErr  error
)

// openGPU opens (once) the Vulkan adapter with its own limits.
func openGPU() (*gpu, error) {
	gpuOnce.Do(func() {
		if os.Getenv("XDG_RUNTIME_DIR") == "" {
			if dir, err := os.MkdirTemp("", "tapml-xdg-"); err == nil {
				_ = os.Chmod(dir, 0o700)
				_ = os.Setenv("XDG_RUNTIME_DIR", dir)
			}
		}
		wgpu.SetLogLevel(wgpu.LogLevelError)
		inst := wgpu.CreateInstance(&wgpu.InstanceDescriptor{Backends: wgpu.InstanceBackendVulkan})
		adapter, err := inst.RequestAdapter(&wgpu.RequestAdapterOptions{PowerPreference: wgpu.PowerPreferenceHighPerformance})
		if err != nil || adapter == nil {
			inst.Release()
			gpuErr = fmt.Errorf("no Vulkan adapter: %v", err)
			return
		}
		limits := adapter.GetLimits().Limits
		limits.MaxPushConstantSize = 0 // the binding reads garbage here
		dev, err := adapter.RequestDevice(&wgpu.DeviceDescriptor{Label: "spirv-test", RequiredLimits: &wgpu.RequiredLimits{Limits: limits}})
		if err != nil {
			gpuErr = fmt.Errorf("request device: %w", err)
			return
		}
		gpuDev = &gpu{inst: inst, adapter: adapter, dev: dev, queue: dev.GetQueue(), limits: limits,
			name: adapter.GetInfo().Name, module: spirvModule}
	})
	return gpuDev, gpuErr
}

// limitsOf returns the kernel limits of the device.
func (g *gpu) kernelLimits() Limits {
	return Limits{
		MaxInvocationsPerWorkgroup:      int(g.limits.MaxComputeInvocationsPerWorkgroup),
		MaxWorkgroupSizeX:               int(g.limits.MaxComputeWorkgroupSizeX),
		MaxWorkgroupStorageSize:         int(g.limits.MaxComputeWorkgroupStorageSize),
		MaxWorkgroupsPerDimension:       int(g.limits.MaxComputeWorkgroupsPerDimension),
		MaxStorageBuffersPerShaderStage: int(g.limits.MaxStorageBuffersPerShaderStage),
	}
}

func (g *gpu) pollUntil(done *bool) {
	sleep := 10 * time.Microsecond
	for {
		g.dev.Poll(false, nil)
		if *done {
			return
		}
		time.Sleep(sleep)
		if sleep < time.Millisecond {
			sleep *= 2
		}
	}
}

func padded(n int) uint64 { return uint64(max(16, (n+3)/4*4)) }

// run executes kernel k on host inputs (in binding order of the node's
// inputs) and returns its outputs. A ReadWrite binding's input is updated
// in place and returned as that output.
func (g *gpu) run(k *codegen.Kernel, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	mod, err := g.module(g, k)
	if err != nil {
		return nil, fmt.Errorf("shader module: %w", err)
	}
	defer mod.Release()
	entries := make([]wgpu.BindGroupLayoutEntry, len(k.Bindings))
	bufs := make([]*wgpu.Buffer, len(k.Bindings))
	defer func() {
		for _, b := range bufs {
			if b != nil {
				b.Release()
			}
		}
	}()
	nout := 0
	for i, bd := range k.Bindings {
		ty := wgpu.BufferBindingTypeStorage
		if bd.Access == codegen.Read {
			ty = wgpu.BufferBindingTypeReadOnlyStorage
		}
		entries[i] = wgpu.BindGroupLayoutEntry{Binding: uint32(bd.Index), Visibility: wgpu.ShaderStageCompute,
			Buffer: wgpu.BufferBindingLayout{Type: ty}}
		b, err := g.dev.CreateBuffer(&wgpu.BufferDescriptor{Size: padded(int(bd.Type.Bytes())),
			Usage: wgpu.BufferUsageStorage | wgpu.BufferUsageCopyDst | wgpu.BufferUsageCopySrc})
		if err != nil {
			return nil, err
		}
		bufs[i] = b
		if bd.Input >= 0 {
			data := in[bd.Input].Data
			if len(data) > 0 {
				if len(data)%4 != 0 {
					data = append(append([]byte{}, data...), make([]byte, 4-len(data)%4)...)
				}
				if err := g.queue.WriteBuffer(b, 0, data); err != nil {
					return nil, err
				}
			}
		}
		nout = max(nout, bd.Output+1)
	}
	layout, err := g.dev.CreateBindGroupLayout(&wgpu.BindGroupLayoutDescriptor{Entries: entries})
	if err != nil {
		return nil, fmt.Errorf("bind group layout: %w", err)
	}
	defer layout.Release()
	pl, err := g.dev.CreatePipelineLayout(&wgpu.PipelineLayoutDescriptor{BindGroupLayouts: []*wgpu.BindGroupLayout{layout}})
	if err != nil {
		return nil, fmt.Errorf("pipeline layout: %w", err)
	}
	defer pl.Release()
	cp, err := g.dev.CreateComputePipeline(&wgpu.ComputePipelineDescriptor{Layout: pl,
		Compute: wgpu.ProgrammableStageDescriptor{Module: mod, EntryPoint: k.Entry}})
	if err != nil {
		return nil, fmt.Errorf("compute pipeline: %w", err)
	}
	defer cp.Release()
	bgEntries := make([]wgpu.BindGroupEntry, len(k.Bindings))
	for i, bd := range k.Bindings {
		bgEntries[i] = wgpu.BindGroupEntry{Binding: uint32(bd.Index), Buffer: bufs[i], Size: wgpu.WholeSize}
	}
	bg, err := g.dev.CreateBindGroup(&wgpu.BindGroupDescriptor{Layout: layout, Entries: bgEntries})
	if err != nil {
		return nil, fmt.Errorf("bind group: %w", err)
	}
	defer bg.Release()

	enc, err := g.dev.CreateCommandEncoder(nil)
	if err != nil {
		return nil, err
	}
	defer enc.Release()
	if k.Grid[0]*k.Grid[1]*k.Grid[2] > 0 {
		pass := enc.BeginComputePass(nil)
		pass.SetPipeline(cp)
		pass.SetBindGroup(0, bg, nil)
		pass.DispatchWorkgroups(uint32(k.Grid[0]), uint32(k.Grid[1]), uint32(k.Grid[2]))
		if err := pass.End(); err != nil {
			return nil, fmt.Errorf("compute pass: %w", err)
		}
		pass.Release()
	}
	outs := make([]*tensor.Tensor, nout)
	staging := make([]*wgpu.Buffer, nout)
	defer func() {
		for _, s := range staging {
			if s != nil {
				s.Release()
			}
		}
	}()
	for i, bd := range k.Bindings {
		if bd.Output < 0 {
			continue
		}
		outs[bd.Output] = tensor.New(bd.Type.DType, bd.Type.Shape.Sizes())
		n := padded(int(bd.Type.Bytes()))
		s, err := g.dev.CreateBuffer(&wgpu.BufferDescriptor{Size: n, Usage: wgpu.BufferUsageMapRead | wgpu.BufferUsageCopyDst})
		if err != nil {
			return nil, err
		}
		staging[bd.Output] = s
		if err := enc.CopyBufferToBuffer(bufs[i], 0, s, 0, n); err != nil {
			return nil, err
		}
	}
	cb, err := enc.Finish(nil)
	if err != nil {
		return nil, fmt.Errorf("finish: %w", err)
	}
	g.queue.Submit(cb)
	cb.Release()
	for o, s := range staging {
		var status wgpu.BufferMapAsyncStatus
		done := false
		n := padded(len(outs[o].Data))
		if err := s.MapAsync(wgpu.MapModeRead, 0, n, func(st wgpu.BufferMapAsyncStatus) { status, done = st, true }); err != nil {
			return nil, err
		}
		g.pollUntil(&done)
		if status != wgpu.BufferMapAsyncStatusSuccess {
			return nil, errors.New("map failed: " + status.String())
		}
		copy(outs[o].Data, s.GetMappedRange(0, uint(n)))
		if err := s.Unmap(); err != nil {
			return nil, err
		}
	}
	return outs, nil
}
