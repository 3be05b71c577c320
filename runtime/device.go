// Package runtime runs IR functions on devices. A Device allocates buffers,
// moves tensors in and out and launches one node at a time; the Executor
// walks a function, places each node on a device, moves tensors across
// placement boundaries and frees intermediates.
package runtime

import (
	"fmt"

	"github.com/tapml/tapml/ir"
	"github.com/tapml/tapml/tensor"
)

// Buffer is a tensor that lives on a device. Handle is the device's own
// representation (a *tensor.Tensor on the CPU, a GPU buffer on webgpu).
type Buffer struct {
	Dev    Device
	DType  ir.DType
	Shape  []int
	Handle any
}

// Type returns the buffer's concrete IR type.
func (b *Buffer) Type() ir.Type {
	s := make(ir.Shape, len(b.Shape))
	for i, d := range b.Shape {
		s[i] = ir.D(int64(d))
	}
	return ir.T(b.DType, s)
}

func (b *Buffer) String() string { return fmt.Sprintf("%s%v on %s", b.DType, b.Shape, b.Dev.Name()) }

// Device is one place where kernels run.
type Device interface {
	// Name identifies the device in messages ("cpu", "webgpu:vulkan:llvmpipe", ...).
	Name() string
	// Upload copies a host tensor to a new device buffer. A device may keep a
	// reference to t instead of copying; callers must not modify t afterwards.
	Upload(t *tensor.Tensor) (*Buffer, error)
	// Download copies a buffer to the host, waiting for pending work.
	Download(b *Buffer) (*tensor.Tensor, error)
	// Launch runs node n on inputs that live on this device and returns its
	// outputs, whose concrete types are outs. It may only enqueue the work.
	// An output may alias an input when the op allows it (kv_write updates
	// its cache in place).
	Launch(n *ir.Node, in []*Buffer, outs []ir.Type) ([]*Buffer, error)
	// Sync waits until all launched work has finished.
	Sync() error
	// Free releases a buffer; the device may recycle it.
	Free(b *Buffer)
	// Close releases the device.
	Close() error
}

// Preparer is implemented by devices that compile kernels ahead of running
// (so that a bad kernel is reported before the run, naming its node).
type Preparer interface {
	Prepare(m *ir.Module, f *ir.Function, nodes []*ir.Node) error
}

// WeightUploader is implemented by devices that keep weights apart from
// other tensors (a remote device caches them by content hash, so that a
// weight crosses the network once). The executor uploads weights through
// it when the device has it; weights are never written by kernels.
type WeightUploader interface {
	UploadWeight(name string, t *tensor.Tensor) (*Buffer, error)
}

// MemoryReporter is implemented by devices that know the device memory
// their buffers take: now and at the peak so far.
type MemoryReporter interface {
	BufferBytes() (now, peak int64)
}

// KernelError is a failure to build or run the kernel of one IR node.
type KernelError struct {
	Device string
	Node   *ir.Node
	Err    error
}

func (e *KernelError) Error() string {
	return fmt.Sprintf("%s: node %s: %v", e.Device, e.Node, e.Err)
}

func (e *KernelError) Unwrap() error { return e.Err }
