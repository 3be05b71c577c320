//go:build !js

package device

import (
	"errors"
	"fmt"
	"strings"

	"github.com/tapml/tapml/codegen"
	"github.com/tapml/tapml/ir"
	"github.com/tapml/tapml/runtime"
	"github.com/tapml/tapml/runtime/remote/proto"
	"github.com/tapml/tapml/runtime/webgpu"
	"github.com/tapml/tapml/tensor"
)

// native is the Backend of a runtime/webgpu device: buffers are its
// *runtime.Buffer, launches go through LaunchKernel (batched there).
type native struct {
	d    *webgpu.Device
	info proto.DeviceInfo
}

// Native serves a local WebGPU device.
func Native(d *webgpu.Device) Backend {
	a := d.Adapter()
	l := d.Limits()
	bl := d.BufferLimits()
	name := d.Name()
	parts := strings.SplitN(name, ":", 3)
	backend := "webgpu"
	if len(parts) == 3 {
		backend = parts[1]
	}
	return &native{d: d, info: proto.DeviceInfo{
		Name:        name,
		Backend:     backend,
		Adapter:     a.Name,
		Description: strings.TrimSpace(a.VendorName + " " + a.DriverDescription),
		Limits: proto.Limits{
			MaxInvocationsPerWorkgroup:      uint32(l.MaxInvocationsPerWorkgroup),
			MaxWorkgroupSizeX:               uint32(l.MaxWorkgroupSizeX),
			MaxWorkgroupSizeY:               uint32(l.MaxWorkgroupSizeY),
			MaxWorkgroupSizeZ:               uint32(l.MaxWorkgroupSizeZ),
			MaxWorkgroupStorageSize:         uint32(l.MaxWorkgroupStorageSize),
			MaxWorkgroupsPerDimension:       uint32(l.MaxWorkgroupsPerDimension),
			MaxStorageBuffersPerShaderStage: uint32(l.MaxStorageBuffersPerShaderStage),
			MaxBufferSize:                   bl.MaxBuffer,
			MaxStorageBufferBindingSize:     bl.MaxBinding,
		},
	}}
}

func (n *native) Info() proto.DeviceInfo { return n.info }

func (n *native) Upload(dt ir.DType, shape []int, data []byte) (Buffer, error) {
	t, err := tensor.FromBytes(dt, shape, data)
	if err != nil {
		return nil, err
	}
	return n.d.Upload(t)
}

func (n *native) Compile(k *codegen.Kernel) error { return n.d.Compile(k) }

func (n *native) bufs(in []Buffer) ([]*runtime.Buffer, error) {
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

func (n *native) Launch(node *ir.Node, k *codegen.Kernel, in []Buffer) ([]Buffer, error) {
	bs, err := n.bufs(in)
	if err != nil {
		return nil, err
	}
	outs, err := n.d.LaunchKernel(node, k, bs)
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

func (n *native) Download(b Buffer, offset, length int64) ([]byte, error) {
	bs, err := n.bufs([]Buffer{b})
	if err != nil {
		return nil, err
	}
	t, err := n.d.Download(bs[0])
	if err != nil {
		return nil, err
	}
	if offset < 0 || length < 0 || offset+length > int64(len(t.Data)) {
		return nil, fmt.Errorf("bytes %d to %d of a %d-byte buffer", offset, offset+length, len(t.Data))
	}
	return t.Data[offset : offset+length], nil
}

func (n *native) Sync() error { return n.d.Sync() }

func (n *native) Free(b Buffer) {
	if rb, ok := b.(*runtime.Buffer); ok {
		n.d.Free(rb)
	}
}

// ReleasePool frees the device's pooled buffers (PoolReleaser).
func (n *native) ReleasePool() { n.d.ReleasePool() }
