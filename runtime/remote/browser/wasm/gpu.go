//go:build js && wasm

package main

import (
	"errors"
	"fmt"
	"strings"
	"syscall/js"

	"github.com/cogentcore/webgpu/jsx"
	"github.com/cogentcore/webgpu/wgpu"
	"github.com/tapml/tapml/codegen"
	"github.com/tapml/tapml/ir"
	"github.com/tapml/tapml/runtime"
	"github.com/tapml/tapml/runtime/internal/devkit"
	"github.com/tapml/tapml/runtime/remote/device"
	"github.com/tapml/tapml/runtime/remote/proto"
)

// gpu is the device.Backend of the browser's WebGPU, through
// cogentcore/webgpu's js binding. What that binding lacks (requesting a
// device with the adapter's limits, error scopes, adapter info) is done on
// the GPUDevice object directly. On js, pipelines need explicit bind group
// and pipeline layouts, End and Submit report nothing and shader modules
// are created without an error: failures are caught with error scopes,
// which also carry Tint's messages (line:column) for bad WGSL.
//
// Launches are recorded into one compute pass and submitted every maxBatch
// dispatches and before an upload, a download or a sync; each submission
// is checked with an error scope, and a failure names the nodes whose
// dispatches it held.
type gpu struct {
	js    js.Value // the GPUDevice
	dev   *wgpu.Device
	queue *wgpu.Queue
	info  proto.DeviceInfo

	pipelines map[string]*pipe
	bufs      devkit.Allocator[*wgpu.Buffer] // storage buffers, pooled by size class

	enc     *wgpu.CommandEncoder
	pass    *wgpu.ComputePassEncoder
	batch   devkit.Batch
	pending []int          // node ids of the recorded dispatches
	doomed  []*wgpu.Buffer // to destroy once the recorded dispatches are submitted

	lost       string
	uncaptured []string
}

type pipe struct {
	layout *wgpu.BindGroupLayout
	cp     *wgpu.ComputePipeline
}

// jbuf is a buffer handle.
type jbuf = devkit.Buf[*wgpu.Buffer]

// poolBytes bounds the bytes of freed buffers kept for reuse.
const poolBytes = 256 << 20

var _ device.Backend = (*gpu)(nil)

func await(p js.Value) (js.Value, error) {
	v, ok := jsx.Await(p)
	if !ok {
		msg := "promise rejected"
		if v.Truthy() && v.Get("message").Type() == js.TypeString {
			msg = v.Get("message").String()
		}
		return v, errors.New(msg)
	}
	return v, nil
}

func str(v js.Value) string {
	if v.Type() == js.TypeString {
		return v.String()
	}
	return ""
}

// noAdapter says why the page cannot serve when the browser gives no
// adapter, and the fix (on Linux, Chromium ships WebGPU switched off).
const noAdapter = "no WebGPU adapter: the browser offers none. Chromium on Linux needs --enable-unsafe-webgpu " +
	"(and, headless, --headless=new); see chrome://gpu for what it supports"

func openGPU() (*gpu, error) {
	nav := js.Global().Get("navigator")
	g := nav.Get("gpu")
	if !g.Truthy() {
		return nil, errors.New("this browser has no WebGPU (navigator.gpu is missing): use a browser with WebGPU, over https:// or localhost")
	}
	adapter, err := await(g.Call("requestAdapter", map[string]any{"powerPreference": "high-performance"}))
	if err != nil {
		return nil, fmt.Errorf("requesting a WebGPU adapter: %v", err)
	}
	if !adapter.Truthy() {
		return nil, errors.New(noAdapter)
	}
	al := adapter.Get("limits")
	lim := func(name string) uint32 { return uint32(al.Get(name).Int()) }
	lim64 := func(name string) uint64 { return uint64(al.Get(name).Float()) }
	l := proto.Limits{
		MaxInvocationsPerWorkgroup:      lim("maxComputeInvocationsPerWorkgroup"),
		MaxWorkgroupSizeX:               lim("maxComputeWorkgroupSizeX"),
		MaxWorkgroupSizeY:               lim("maxComputeWorkgroupSizeY"),
		MaxWorkgroupSizeZ:               lim("maxComputeWorkgroupSizeZ"),
		MaxWorkgroupStorageSize:         lim("maxComputeWorkgroupStorageSize"),
		MaxWorkgroupsPerDimension:       lim("maxComputeWorkgroupsPerDimension"),
		MaxStorageBuffersPerShaderStage: lim("maxStorageBuffersPerShaderStage"),
		MaxBufferSize:                   lim64("maxBufferSize"),
		MaxStorageBufferBindingSize:     lim64("maxStorageBufferBindingSize"),
	}
	// The page's ?max_buffer=BYTES (64MiB, say) lowers the buffer limits
	// asked for, as a more constrained browser would give ($TAPML_MAX_BUFFER
	// of native devices); hosts split larger weights to fit.
	if err := capBuffers(&l); err != nil {
		return nil, err
	}
	// Ask for the adapter's own limits (the defaults are lower: 256 MiB per
	// buffer, 128 MiB per binding, and smaller workgroups).
	required := map[string]any{
		"maxComputeInvocationsPerWorkgroup": l.MaxInvocationsPerWorkgroup,
		"maxComputeWorkgroupSizeX":          l.MaxWorkgroupSizeX,
		"maxComputeWorkgroupSizeY":          l.MaxWorkgroupSizeY,
		"maxComputeWorkgroupSizeZ":          l.MaxWorkgroupSizeZ,
		"maxComputeWorkgroupStorageSize":    l.MaxWorkgroupStorageSize,
		"maxComputeWorkgroupsPerDimension":  l.MaxWorkgroupsPerDimension,
		"maxStorageBuffersPerShaderStage":   l.MaxStorageBuffersPerShaderStage,
		"maxBufferSize":                     float64(l.MaxBufferSize),
		"maxStorageBufferBindingSize":       float64(l.MaxStorageBufferBindingSize),
	}
	want := map[string]any{"requiredLimits": required}
	// With shader-f16 the device compiles `enable f16;`, so that a host may
	// send it f16 kernels (--compute f16). Ask for it where the adapter has
	// it (Chromium's SwiftShader has not).
	if adapter.Get("features").Call("has", proto.FeatureShaderF16).Bool() {
		want["requiredFeatures"] = []any{proto.FeatureShaderF16}
	}
	dj, err := await(adapter.Call("requestDevice", want))
	if err != nil || !dj.Truthy() {
		return nil, fmt.Errorf("no WebGPU device: %v", err)
	}
	// The device's features (not the adapter's): what it was created with.
	var features []string
	arr := js.Global().Get("Array").Call("from", dj.Get("features"))
	for i := 0; i < arr.Length() && len(features) < proto.MaxFeatures; i++ {
		features = append(features, arr.Index(i).String())
	}
	ai := adapter.Get("info")
	var vendor, arch, desc string
	if ai.Truthy() {
		vendor, arch, desc = str(ai.Get("vendor")), str(ai.Get("architecture")), str(ai.Get("description"))
	}
	name := arch
	if name == "" {
		name = vendor
	}
	if name == "" {
		name = "webgpu"
	}
	d := &gpu{
		js: dj,
		info: proto.DeviceInfo{
			Name:        "browser:" + name,
			Backend:     "browser",
			Adapter:     strings.TrimSpace(vendor + " " + arch),
			Description: strings.TrimSpace(desc + " " + str(nav.Get("userAgent"))),
			Limits:      l,
			Features:    features,
		},
		pipelines: map[string]*pipe{},
		batch:     devkit.NewBatch(devkit.DefaultMaxBatch, 0),
	}
	wd := wgpu.NewDevice(dj)
	d.dev = &wd
	d.queue = d.dev.GetQueue()
	// Buffers are made inside the caller's error scope.
	d.bufs = devkit.Allocator[*wgpu.Buffer]{
		Create: func(size uint64) (*wgpu.Buffer, error) {
			return d.dev.CreateBuffer(&wgpu.BufferDescriptor{Usage: storageUsage, Size: size})
		},
		Destroy: d.destroy,
		MaxSize: l.MaxBufferSize,
		Pool:    devkit.Pool[*wgpu.Buffer]{Limit: poolBytes},
	}
	dj.Get("lost").Call("then", js.FuncOf(func(this js.Value, args []js.Value) any {
		msg := "lost"
		if len(args) > 0 && args[0].Truthy() {
			msg = "lost: " + str(args[0].Get("message"))
		}
		d.lost = msg
		logf("WebGPU device %s", msg)
		return nil
	}))
	dj.Call("addEventListener", "uncapturederror", js.FuncOf(func(this js.Value, args []js.Value) any {
		if len(args) > 0 && len(d.uncaptured) < 16 {
			d.uncaptured = append(d.uncaptured, str(args[0].Get("error").Get("message")))
		}
		return nil
	}))
	return d, nil
}

func (g *gpu) Info() proto.DeviceInfo { return g.info }

func (g *gpu) usable() error {
	if g.lost != "" {
		return fmt.Errorf("the WebGPU device was %s (reload the page)", g.lost)
	}
	if len(g.uncaptured) > 0 {
		msg := strings.Join(g.uncaptured, "; ")
		g.uncaptured = nil
		return fmt.Errorf("WebGPU error: %s", msg)
	}
	return nil
}

// popScope pops an error scope and returns its error, if any.
func (g *gpu) popScope() error {
	r, err := await(g.js.Call("popErrorScope"))
	if err != nil {
		return fmt.Errorf("popErrorScope: %v", err)
	}
	if r.Truthy() {
		return errors.New(str(r.Get("message")))
	}
	return nil
}

// scoped runs f inside validation and out-of-memory error scopes.
func (g *gpu) scoped(f func()) error {
	g.js.Call("pushErrorScope", "out-of-memory")
	g.js.Call("pushErrorScope", "validation")
	f()
	verr := g.popScope()
	merr := g.popScope()
	if verr != nil {
		return verr
	}
	if merr != nil {
		return fmt.Errorf("out of GPU memory: %v", merr)
	}
	return nil
}

const storageUsage = wgpu.BufferUsageStorage | wgpu.BufferUsageCopySrc | wgpu.BufferUsageCopyDst

// destroy destroys a storage buffer once the recorded dispatches that may
// use it are submitted.
func (g *gpu) destroy(b *wgpu.Buffer) {
	if g.enc != nil {
		g.doomed = append(g.doomed, b)
	} else {
		b.Destroy()
	}
}

// ReleasePool destroys the pooled buffers (device.PoolReleaser): between
// host sessions, so that the next host's buffers come zeroed from WebGPU.
func (g *gpu) ReleasePool() { g.bufs.Drain() }

func (g *gpu) Upload(dt ir.DType, shape []int, data []byte) (device.Buffer, error) {
	if err := g.flush(); err != nil {
		return nil, err
	}
	if err := g.usable(); err != nil {
		return nil, err
	}
	var b *jbuf
	var aerr error
	err := g.scoped(func() {
		if b, aerr = g.bufs.Alloc(uint64(len(data))); aerr != nil {
			return
		}
		if len(data) > 0 {
			if len(data)%4 != 0 {
				data = append(data, make([]byte, 4-len(data)%4)...)
			}
			aerr = g.writeBuffer(b.B, data)
		}
	})
	if aerr == nil {
		aerr = err
	}
	if aerr != nil {
		if b != nil {
			g.bufs.Discard(b)
		}
		return nil, aerr
	}
	return b, nil
}

// writeBuffer writes data at the start of b. The binding's write views the
// wasm memory through its ArrayBuffer, fetched before the call's other
// arguments are made; when the Go runtime grows the memory in between, that
// ArrayBuffer is detached and the call throws: "Cannot perform Construct on
// a detached ArrayBuffer" where the view is made after the growth, "Number
// of bytes to write is too large" where it was made before (a detached view
// is empty; both seen in CI). The memory has grown by then, so the write
// is tried again, at most twice more.
func (g *gpu) writeBuffer(b *wgpu.Buffer, data []byte) error {
	var err error
	for range 3 {
		if err = g.tryWrite(b, data); err == nil || !detached(err) {
			return err
		}
	}
	return err
}

// detached reports whether a write failed on a detached view of the wasm
// memory (writeBuffer).
func detached(err error) bool {
	m := err.Error()
	return strings.Contains(m, "detached ArrayBuffer") || strings.Contains(m, "Number of bytes to write is too large")
}

// tryWrite is one write, a JavaScript exception returned as an error.
func (g *gpu) tryWrite(b *wgpu.Buffer, data []byte) (err error) {
	defer func() {
		if r := recover(); r != nil {
			jerr, ok := r.(js.Error)
			if !ok {
				panic(r)
			}
			err = fmt.Errorf("writeBuffer: %w", jerr)
		}
	}()
	return g.queue.WriteBuffer(b, 0, data)
}

func pipeKey(k *codegen.Kernel) string {
	var s strings.Builder
	s.WriteString(k.Entry)
	for _, b := range k.Bindings {
		fmt.Fprintf(&s, ";%s", b.Access)
	}
	s.WriteByte(0)
	s.Write(k.Source)
	return s.String()
}

func (g *gpu) Compile(k *codegen.Kernel) error {
	key := pipeKey(k)
	if g.pipelines[key] != nil {
		return nil
	}
	if err := g.usable(); err != nil {
		return err
	}
	var p pipe
	var cerr error
	err := g.scoped(func() {
		mod, err := g.dev.CreateShaderModule(&wgpu.ShaderModuleDescriptor{WGSLDescriptor: &wgpu.ShaderModuleWGSLDescriptor{Code: string(k.Source)}})
		if err != nil {
			cerr = err
			return
		}
		entries := make([]wgpu.BindGroupLayoutEntry, len(k.Bindings))
		for i, b := range k.Bindings {
			ty := wgpu.BufferBindingTypeStorage
			if b.Access == codegen.Read {
				ty = wgpu.BufferBindingTypeReadOnlyStorage
			}
			entries[i] = wgpu.BindGroupLayoutEntry{Binding: uint32(b.Index), Visibility: wgpu.ShaderStageCompute, Buffer: wgpu.BufferBindingLayout{Type: ty}}
		}
		if p.layout, cerr = g.dev.CreateBindGroupLayout(&wgpu.BindGroupLayoutDescriptor{Entries: entries}); cerr != nil {
			return
		}
		pl, err := g.dev.CreatePipelineLayout(&wgpu.PipelineLayoutDescriptor{BindGroupLayouts: []*wgpu.BindGroupLayout{p.layout}})
		if err != nil {
			cerr = err
			return
		}
		p.cp, cerr = g.dev.CreateComputePipeline(&wgpu.ComputePipelineDescriptor{Layout: pl, Compute: wgpu.ProgrammableStageDescriptor{Module: mod, EntryPoint: k.Entry}})
	})
	if cerr == nil {
		cerr = err
	}
	if cerr != nil {
		return fmt.Errorf("WGSL rejected by the browser: %v", cerr)
	}
	g.pipelines[key] = &p
	return nil
}

func (g *gpu) Launch(n *ir.Node, k *codegen.Kernel, in []device.Buffer) ([]device.Buffer, error) {
	if err := g.usable(); err != nil {
		return nil, err
	}
	p := g.pipelines[pipeKey(k)]
	if p == nil {
		if err := g.Compile(k); err != nil {
			return nil, err
		}
		p = g.pipelines[pipeKey(k)]
	}
	ins := make([]*jbuf, len(in))
	for i, b := range in {
		jb, ok := b.(*jbuf)
		if !ok || jb == nil {
			return nil, fmt.Errorf("input %d is not a buffer of this device", i)
		}
		ins[i] = jb
	}
	bound := make([]*jbuf, len(k.Bindings))
	if err := g.bufs.Bind(k, ins, bound); err != nil {
		return nil, err
	}
	outs := make([]device.Buffer, devkit.NumOutputs(k))
	for i, b := range k.Bindings {
		if b.Output >= 0 {
			outs[b.Output] = bound[i]
		}
	}
	if k.Grid[0]*k.Grid[1]*k.Grid[2] == 0 {
		return outs, nil
	}
	if g.enc == nil {
		g.js.Call("pushErrorScope", "validation")
		enc, err := g.dev.CreateCommandEncoder(nil)
		if err != nil {
			g.popScope()
			g.bufs.Unbind(k, bound)
			return nil, err
		}
		g.enc = enc
		g.pass = enc.BeginComputePass(nil)
	}
	entries := make([]wgpu.BindGroupEntry, len(bound))
	for i, b := range bound {
		entries[i] = wgpu.BindGroupEntry{Binding: uint32(k.Bindings[i].Index), Buffer: b.B, Size: b.Size}
	}
	bg, err := g.dev.CreateBindGroup(&wgpu.BindGroupDescriptor{Layout: p.layout, Entries: entries})
	if err != nil {
		g.bufs.Unbind(k, bound)
		return nil, err
	}
	g.pass.SetPipeline(p.cp)
	g.pass.SetBindGroup(0, bg, nil)
	g.pass.DispatchWorkgroups(uint32(k.Grid[0]), uint32(k.Grid[1]), uint32(k.Grid[2]))
	g.pending = append(g.pending, n.ID)
	if g.batch.Add() {
		if err := g.flush(); err != nil {
			return nil, err
		}
	}
	return outs, nil
}

// flush submits the recorded dispatches and reports their validation
// errors.
func (g *gpu) flush() error {
	if g.enc == nil {
		return nil
	}
	g.pass.End()
	cb, err := g.enc.Finish(nil)
	if err == nil {
		g.queue.Submit(cb)
	}
	g.enc, g.pass = nil, nil
	for _, b := range g.doomed {
		b.Destroy() // WebGPU keeps it alive for the submitted work
	}
	g.doomed = nil
	nodes := g.pending
	g.pending = nil
	g.batch.Submitted()
	if serr := g.popScope(); serr != nil {
		err = serr
	}
	if err != nil {
		ids := make([]string, 0, len(nodes))
		for _, id := range nodes {
			ids = append(ids, fmt.Sprintf("#%d", id))
		}
		return fmt.Errorf("the dispatches of nodes %s failed: %v", strings.Join(ids, ", "), err)
	}
	return nil
}

func (g *gpu) Download(b device.Buffer, offset, length int64) ([]byte, error) {
	jb, ok := b.(*jbuf)
	if !ok || jb == nil {
		return nil, errors.New("not a buffer of this device")
	}
	if err := g.flush(); err != nil {
		return nil, err
	}
	if err := g.usable(); err != nil {
		return nil, err
	}
	if length == 0 {
		return []byte{}, nil
	}
	start := uint64(offset) &^ 3
	end := (uint64(offset+length) + 3) &^ 3
	if end > jb.Size {
		return nil, fmt.Errorf("bytes %d to %d of a %d-byte buffer", offset, offset+length, jb.Size)
	}
	size := end - start
	var st *wgpu.Buffer
	err := g.scoped(func() {
		var err error
		st, err = g.dev.CreateBuffer(&wgpu.BufferDescriptor{Usage: wgpu.BufferUsageMapRead | wgpu.BufferUsageCopyDst, Size: size})
		if err != nil {
			return
		}
		enc, err := g.dev.CreateCommandEncoder(nil)
		if err != nil {
			return
		}
		enc.CopyBufferToBuffer(jb.B, start, st, 0, size)
		cb, err := enc.Finish(nil)
		if err != nil {
			return
		}
		g.queue.Submit(cb)
	})
	if err != nil {
		if st != nil {
			st.Destroy()
		}
		return nil, fmt.Errorf("download: %v", err)
	}
	defer st.Destroy()
	var status wgpu.BufferMapAsyncStatus
	st.MapAsync(wgpu.MapModeRead, 0, size, func(s wgpu.BufferMapAsyncStatus) { status = s })
	if status != wgpu.BufferMapAsyncStatusSuccess {
		return nil, fmt.Errorf("download: map failed: %v", status)
	}
	data := st.GetMappedRange(0, uint(size))
	st.Unmap()
	lo := uint64(offset) - start
	return data[lo : lo+uint64(length)], nil
}

func (g *gpu) Sync() error {
	if err := g.flush(); err != nil {
		return err
	}
	g.queue.OnSubmittedWorkDone(func(wgpu.QueueWorkDoneStatus) {})
	return g.usable()
}

func (g *gpu) Free(b device.Buffer) {
	if jb, ok := b.(*jbuf); ok && jb.Live() {
		g.bufs.Free(jb)
	}
}

// capBuffers lowers l's buffer and binding limits to the page's
// ?max_buffer= when it has one.
func capBuffers(l *proto.Limits) error {
	q := js.Global().Get("URLSearchParams").New(js.Global().Get("location").Get("search")).Call("get", "max_buffer")
	if q.Type() != js.TypeString {
		return nil
	}
	c, err := runtime.ParseBytes(q.String())
	if err != nil {
		return fmt.Errorf("the page's max_buffer: %w", err)
	}
	l.MaxBufferSize = min(l.MaxBufferSize, c)
	l.MaxStorageBufferBindingSize = min(l.MaxStorageBufferBindingSize, c)
	return nil
}
