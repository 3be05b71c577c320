// Package runtime runs IR functions on devices. A Device allocates buffers,
// moves tensors in and out and launches one node at a time; the Executor
// walks a function, places each node on a device, moves tensors across
// placement boundaries and frees intermediates.
package runtime

import (
	"errors"
	"fmt"
	"time"

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

// TypedPreparer is implemented by devices that can compile, ahead of a
// call, the kernels of nodes on the concrete input types that the call's
// arguments fix (a prefill's, whose shapes depend on the prompt): the
// executor hands a new plan's nodes over before their first launch, so
// that the kernels are made together (in parallel where the device can)
// rather than one at a time as each node first runs. in[i] and out[i] are
// nodes[i]'s input and output types (out may be nil: inferred).
type TypedPreparer interface {
	PrepareTypes(nodes []*ir.Node, in, out [][]ir.Type) error
}

// KernelCompiler is implemented by devices that make kernels as they run:
// the time spent generating and compiling them so far (which tapmlc run
// reports, as llama.cpp reports its load time).
type KernelCompiler interface {
	CompileTime() time.Duration
}

// WeightUploader is implemented by devices that keep weights apart from
// other tensors (a remote device caches them by content hash, so that a
// weight crosses the network once). The executor uploads weights through
// it when the device has it; weights are never written by kernels.
type WeightUploader interface {
	UploadWeight(name string, t *tensor.Tensor) (*Buffer, error)
}

// Writer is implemented by devices that can overwrite a buffer they hold.
// A session writes each decode step's token and position into the same
// buffers, so that a captured step (Capturer) replays on them.
type Writer interface {
	// Write copies t, of b's dtype and size, into b: after the work
	// launched before it reads or writes b, before the work launched
	// after it.
	Write(b *Buffer, t *tensor.Tensor) error
}

// Copier is implemented by devices that can copy one buffer they hold
// into another. A greedy session copies a step's argmax into the token
// buffer of the step it launches ahead, so that this step runs on the
// same buffers as the others and replays their capture (Capturer).
type Copier interface {
	// CopyBuffer copies src into dst, of the same type: ordered like
	// Writer.Write.
	CopyBuffer(dst, src *Buffer) error
}

// AsyncDownloader is implemented by devices that can start a download and
// let the host launch more work before waiting for it. A greedy session
// then records the next decode step, fed by the device's own argmax, while
// the device runs the current one (llm.Session.Next).
type AsyncDownloader interface {
	// StartDownload orders a copy of b after the work launched so far;
	// wait returns the data once that work is done, whatever was launched
	// after. wait must be called exactly once.
	StartDownload(b *Buffer) (wait func() (*tensor.Tensor, error), err error)
}

// Capturer is implemented by devices that can record the work of a call
// once and replay it, so that later calls on the same buffers skip the
// host's walk of the graph (as CUDA graphs do, and llama.cpp's Vulkan
// backend with its recorded command buffers). The Executor drives it
// (Executor.Capture).
type Capturer interface {
	// BeginCapture starts recording a call on args: the launches until
	// EndCapture are the capture's work. Buffers freed meanwhile stay
	// allocated, owned by the capture, so that a replay never writes
	// memory given to something else.
	BeginCapture(args []*Buffer) error
	// EndCapture stops recording. results are the call's results that are
	// not arguments; the capture keeps them. It returns nil (and no
	// error) when what was recorded cannot be replayed: the device copied
	// data or submitted work in between.
	EndCapture(results []*Buffer) (Capture, error)
}

// Capture is recorded work of a call (Capturer).
type Capture interface {
	// Replay launches the recorded work again on args, which must be the
	// buffers it was recorded on, and returns new buffers sharing the
	// recorded results' memory (freeing them leaves the capture's): the
	// next replay overwrites them. ErrStale means the device dropped
	// something the recording uses; record again.
	Replay(args []*Buffer) ([]*Buffer, error)
	// Release frees what the capture holds.
	Release()
}

// ErrStale is Capture.Replay's error when the recording can no longer run.
var ErrStale = errors.New("the recorded work uses objects the device has dropped")

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
