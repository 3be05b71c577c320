package devkit

import (
	"fmt"

	"github.com/tapml/tapml/codegen"
	"github.com/tapml/tapml/runtime"
)

// NumOutputs returns the number of outputs of kernel k.
func NumOutputs(k *codegen.Kernel) int {
	n := 0
	for _, b := range k.Bindings {
		n = max(n, b.Output+1)
	}
	return n
}

// CheckLayout checks the shape of a prebuilt kernel's bindings: they are
// numbered 0, 1, ... in order; each carries an input or an output (or
// both: an input updated in place); a binding that only carries an output
// is writable; and the outputs are numbered 0 to n-1, one binding each.
func CheckLayout(k *codegen.Kernel) error {
	nout := 0
	for i, b := range k.Bindings {
		switch {
		case b.Index != i:
			return fmt.Errorf("kernel binding %d has index %d; bindings must be 0, 1, ... in order", i, b.Index)
		case b.Input < 0 && b.Output < 0:
			return fmt.Errorf("kernel binding %d is neither an input nor an output", i)
		case b.Input < 0 && b.Access == codegen.Read:
			return fmt.Errorf("kernel binding %d is a read-only output", i)
		case b.Output < 0:
			continue
		}
		for _, c := range k.Bindings[:i] {
			if c.Output == b.Output {
				return fmt.Errorf("kernel output %d has two bindings", b.Output)
			}
		}
		nout++
	}
	if NumOutputs(k) != nout {
		return fmt.Errorf("kernel outputs are not numbered 0 to %d", nout-1)
	}
	return nil
}

// CheckBindings checks a prebuilt kernel's bindings (CheckLayout) against
// the buffers of its inputs: an input binding names an input that holds
// its type's bytes, and an output that is not an input has a static type
// (the launch makes its buffer).
func CheckBindings[B any](k *codegen.Kernel, in []*Buf[B]) error {
	if err := CheckLayout(k); err != nil {
		return err
	}
	for i, b := range k.Bindings {
		if b.Input >= len(in) {
			return fmt.Errorf("kernel binding %d reads input %d of %d", i, b.Input, len(in))
		}
		if b.Input >= 0 && uint64(b.Type.Bytes()) > in[b.Input].Size {
			return fmt.Errorf("kernel binding %d expects %s, input %d holds %d bytes", i, b.Type, b.Input, in[b.Input].Size)
		}
		if b.Input < 0 && !b.Type.Shape.IsStatic() {
			return fmt.Errorf("kernel binding %d is an output of symbolic type %s", i, b.Type)
		}
	}
	return nil
}

// Bind gives a launch of kernel k on inputs in the buffer of each binding,
// in bound (len k.Bindings): an input binding takes its input's buffer (an
// output bound to an input updates it in place), and any other binding, an
// output, a new buffer of a. On failure the new buffers are freed; after a
// later failure of the launch, Unbind frees them.
func (a *Allocator[B]) Bind(k *codegen.Kernel, in, bound []*Buf[B]) error {
	for i, b := range k.Bindings {
		if b.Input >= 0 {
			bound[i] = in[b.Input]
			continue
		}
		g, err := a.Alloc(uint64(b.Type.Bytes()))
		if err != nil {
			a.Unbind(k, bound[:i])
			return fmt.Errorf("output %d: %w", b.Output, err)
		}
		bound[i] = g
	}
	return nil
}

// Unbind frees the new output buffers that Bind put in bound (a prefix of
// k's bindings).
func (a *Allocator[B]) Unbind(k *codegen.Kernel, bound []*Buf[B]) {
	for i, g := range bound {
		if k.Bindings[i].Input < 0 && g != nil {
			a.Free(g)
			bound[i] = nil
		}
	}
}

// Outputs returns the runtime.Buffers of dev for the outputs of a launch
// of k on inputs in whose bindings Bind filled: an output updated in place
// is its input's runtime.Buffer itself, any other a new one of its
// binding's type.
func Outputs[B any](dev runtime.Device, k *codegen.Kernel, in []*runtime.Buffer, bound []*Buf[B]) []*runtime.Buffer {
	res := make([]*runtime.Buffer, NumOutputs(k))
	for i, b := range k.Bindings {
		switch {
		case b.Output < 0:
		case b.Input >= 0:
			res[b.Output] = in[b.Input]
		default:
			res[b.Output] = Wrap(dev, bound[i], b.Type.DType, b.Type.Shape.Sizes())
		}
	}
	return res
}
