//go:build !js

package device

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/tapml/tapml/codegen"
	"github.com/tapml/tapml/codegen/spirv"
	"github.com/tapml/tapml/codegen/wgsl"
	"github.com/tapml/tapml/ir"
	"github.com/tapml/tapml/runtime"
	"github.com/tapml/tapml/runtime/remote/proto"
	"github.com/tapml/tapml/runtime/vulkan"
	"github.com/tapml/tapml/runtime/webgpu"
	"github.com/tapml/tapml/tensor"
)

// gpu is what a device of this machine gives a server: runtime/webgpu's
// and runtime/vulkan's devices both have it. Buffers are its
// *runtime.Buffer; launches go through LaunchKernel (batched there).
type gpu interface {
	Upload(t *tensor.Tensor) (*runtime.Buffer, error)
	Compile(k *codegen.Kernel) error
	LaunchKernel(n *ir.Node, k *codegen.Kernel, in []*runtime.Buffer) ([]*runtime.Buffer, error)
	Download(b *runtime.Buffer) (*tensor.Tensor, error)
	Sync() error
	Free(b *runtime.Buffer)
}

// local is the Backend of a device of this machine (Native, Vulkan).
type local struct {
	d    gpu
	info proto.DeviceInfo
	// compiled returns the kernel the device compiles for a WGSL kernel:
	// the kernel itself (webgpu) or its SPIR-V translation (vulkan).
	compiled func(k *codegen.Kernel) (*codegen.Kernel, error)
	// release frees or zeroes the memory that freed buffers held
	// (PoolReleaser). When it fails the backend refuses all further work,
	// so that no session gets memory an earlier one may have left.
	release func() error

	mu     sync.Mutex
	failed error
}

// wireLimits are a device's limits as the handshake gives them.
func wireLimits(l wgsl.Limits, maxBuffer, maxBinding uint64) proto.Limits {
	return proto.Limits{
		MaxInvocationsPerWorkgroup:      uint32(l.MaxInvocationsPerWorkgroup),
		MaxWorkgroupSizeX:               uint32(l.MaxWorkgroupSizeX),
		MaxWorkgroupSizeY:               uint32(l.MaxWorkgroupSizeY),
		MaxWorkgroupSizeZ:               uint32(l.MaxWorkgroupSizeZ),
		MaxWorkgroupStorageSize:         uint32(l.MaxWorkgroupStorageSize),
		MaxWorkgroupsPerDimension:       uint32(l.MaxWorkgroupsPerDimension),
		MaxStorageBuffersPerShaderStage: uint32(l.MaxStorageBuffersPerShaderStage),
		MaxBufferSize:                   maxBuffer,
		MaxStorageBufferBindingSize:     maxBinding,
	}
}

// Native serves a local WebGPU device (its naga takes no f16: the device
// never lists shader-f16).
func Native(d *webgpu.Device) Backend {
	a := d.Adapter()
	bl := d.BufferLimits()
	name := d.Name()
	parts := strings.SplitN(name, ":", 3)
	backend := "webgpu"
	if len(parts) == 3 {
		backend = parts[1]
	}
	return &local{d: d, info: proto.DeviceInfo{
		Name:        name,
		Backend:     backend,
		Adapter:     a.Name,
		Description: strings.TrimSpace(a.VendorName + " " + a.DriverDescription),
		Limits:      wireLimits(d.Limits(), bl.MaxBuffer, bl.MaxBinding),
	},
		compiled: func(k *codegen.Kernel) (*codegen.Kernel, error) { return k, nil },
		release:  func() error { d.ReleasePool(); return nil },
	}
}

// Vulkan serves tapml's own Vulkan device (runtime/vulkan, opened without
// a generator): the host's WGSL kernels are translated to SPIR-V as the
// vulkan target's are (codegen/spirv), and the device lists shader-f16
// where it has f16 (shaderFloat16 and 16-bit storage) and subgroups where it
// has subgroup operations, as the vulkan target's kernels use them. Between sessions
// the freed device memory is zeroed (Vulkan zeroes nothing).
func Vulkan(d *vulkan.Device) Backend {
	vi := d.Info()
	bl := d.BufferLimits()
	info := proto.DeviceInfo{
		Name:        d.Name(),
		Backend:     "vulkan",
		Adapter:     vi.Name,
		Description: fmt.Sprintf("%s, Vulkan %s, tapml's SPIR-V", vi.Type, vi.API),
		Limits:      wireLimits(d.Limits(), uint64(bl.MaxTensor), bl.MaxBinding),
	}
	if vi.F16 {
		info.Features = append(info.Features, proto.FeatureShaderF16)
	}
	if vi.Subgroups {
		info.Features = append(info.Features, proto.FeatureSubgroups)
	}
	tr := &translations{code: map[[32]byte][]byte{}}
	return &local{d: d, info: info, compiled: tr.kernel, release: d.ClearFreed}
}

// translations caches the SPIR-V of WGSL kernels by source, for a Vulkan
// backend: Compile translates and Launch finds the translation again.
type translations struct {
	mu   sync.Mutex
	code map[[32]byte][]byte
}

// maxTranslations bounds the cache; past it the cache starts over (a
// launch translates its kernel again).
const maxTranslations = 4096

func (tr *translations) kernel(k *codegen.Kernel) (*codegen.Kernel, error) {
	if k.Entry != wgsl.Entry {
		return nil, fmt.Errorf("entry point %q: this device translates kernels whose entry point is %s", k.Entry, wgsl.Entry)
	}
	key := sha256.Sum256(k.Source)
	tr.mu.Lock()
	code := tr.code[key]
	tr.mu.Unlock()
	if code == nil {
		var err error
		if code, _, err = spirv.Translate(string(k.Source)); err != nil {
			return nil, fmt.Errorf("translating the kernel to SPIR-V: %w", err)
		}
		tr.mu.Lock()
		if len(tr.code) >= maxTranslations {
			clear(tr.code)
		}
		tr.code[key] = code
		tr.mu.Unlock()
	}
	sk := *k
	sk.Source, sk.Language, sk.Entry = code, spirv.Language, spirv.Entry
	return &sk, nil
}

// usable returns the error that made the backend refuse work, if any.
func (l *local) usable() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.failed != nil {
		return fmt.Errorf("the device is unusable: %w", l.failed)
	}
	return nil
}

func (l *local) Info() proto.DeviceInfo { return l.info }

func (l *local) Upload(dt ir.DType, shape []int, data []byte) (Buffer, error) {
	if err := l.usable(); err != nil {
		return nil, err
	}
	t, err := tensor.FromBytes(dt, shape, data)
	if err != nil {
		return nil, err
	}
	return l.d.Upload(t)
}

func (l *local) Compile(k *codegen.Kernel) error {
	if err := l.usable(); err != nil {
		return err
	}
	ck, err := l.compiled(k)
	if err != nil {
		return err
	}
	return l.d.Compile(ck)
}

func bufs(in []Buffer) ([]*runtime.Buffer, error) {
	out := make([]*runtime.Buffer, len(in))
	for i, b := range in {
		rb, ok := b.(*runtime.Buffer)
		if !ok || rb == nil {
			return nil, fmt.Errorf("input %d is not a buffer of this device", i)
		}
		out[i] = rb
	}
	return out, nil
}

func (l *local) Launch(node *ir.Node, k *codegen.Kernel, in []Buffer) ([]Buffer, error) {
	if err := l.usable(); err != nil {
		return nil, err
	}
	bs, err := bufs(in)
	if err != nil {
		return nil, err
	}
	ck, err := l.compiled(k)
	if err != nil {
		return nil, err
	}
	outs, err := l.d.LaunchKernel(node, ck, bs)
	if err != nil {
		var ke *runtime.KernelError
		if errors.As(err, &ke) {
			err = ke.Err // the host names the node itself
		}
		return nil, err
	}
	res := make([]Buffer, len(outs))
	for i, o := range outs {
		res[i] = o
	}
	return res, nil
}

func (l *local) Download(b Buffer, offset, length int64) ([]byte, error) {
	if err := l.usable(); err != nil {
		return nil, err
	}
	bs, err := bufs([]Buffer{b})
	if err != nil {
		return nil, err
	}
	t, err := l.d.Download(bs[0])
	if err != nil {
		return nil, err
	}
	if offset < 0 || length < 0 || offset+length > int64(len(t.Data)) {
		return nil, fmt.Errorf("bytes %d to %d of a %d-byte buffer", offset, offset+length, len(t.Data))
	}
	return t.Data[offset : offset+length], nil
}

func (l *local) Sync() error {
	if err := l.usable(); err != nil {
		return err
	}
	return l.d.Sync()
}

func (l *local) Free(b Buffer) {
	if rb, ok := b.(*runtime.Buffer); ok {
		l.d.Free(rb)
	}
}

// ReleasePool frees or zeroes what freed buffers held (PoolReleaser).
func (l *local) ReleasePool() {
	if err := l.release(); err != nil {
		l.mu.Lock()
		if l.failed == nil {
			l.failed = fmt.Errorf("clearing freed memory between sessions: %w", err)
		}
		l.mu.Unlock()
	}
}
