package devkit

import (
	"errors"
	"fmt"

	"github.com/tapml/tapml/ir"
	"github.com/tapml/tapml/runtime"
)

// Wrap returns a runtime.Buffer of dev holding g as a tensor of dtype dt
// and shape (copied).
func Wrap[B any](dev runtime.Device, g *Buf[B], dt ir.DType, shape []int) *runtime.Buffer {
	return &runtime.Buffer{Dev: dev, DType: dt, Shape: append([]int{}, shape...), Handle: g}
}

// Handle returns the device buffer behind b, checking that b is dev's and
// not freed.
func Handle[B any](dev runtime.Device, b *runtime.Buffer) (*Buf[B], error) {
	if b == nil {
		return nil, errors.New("nil buffer")
	}
	if b.Dev != dev {
		return nil, fmt.Errorf("buffer %s is not on %s", b, dev.Name())
	}
	g, ok := b.Handle.(*Buf[B])
	if !ok || !g.Live() {
		return nil, fmt.Errorf("buffer %s was freed", b)
	}
	return g, nil
}

// Handles puts in hs (len(in)) the device buffers behind a launch's inputs
// (Handle), naming the input that is not one. The caller makes hs, so that
// it can live on the stack.
func Handles[B any](dev runtime.Device, in []*runtime.Buffer, hs []*Buf[B]) error {
	for i, b := range in {
		h, err := Handle[B](dev, b)
		if err != nil {
			return fmt.Errorf("input %d: %w", i, err)
		}
		hs[i] = h
	}
	return nil
}

// Take ends b's hold on its device buffer, for dev's Free: it clears
// b.Handle and returns the buffer, or nil when b is not a buffer of dev
// (or was freed already). The caller drops one user of the buffer.
func Take[B any](dev runtime.Device, b *runtime.Buffer) *Buf[B] {
	if b == nil || b.Dev != dev {
		return nil
	}
	g, ok := b.Handle.(*Buf[B])
	if !ok || g == nil {
		return nil
	}
	b.Handle = nil
	return g
}

// Types returns the concrete types of buffers.
func Types(in []*runtime.Buffer) []ir.Type {
	types := make([]ir.Type, len(in))
	for i, b := range in {
		types[i] = b.Type()
	}
	return types
}

// IsView reports whether node n runs as a view of its input (a reshape:
// its output shares the input's memory) rather than as a kernel. A node
// with an injected fault runs its kernel, so that the fault takes effect.
func IsView(n *ir.Node, fault string) bool { return n.Op == ir.OpReshape && fault == "" }

// ViewType returns the output type of view node n (IsView) on input types
// in, checked against outs when those are given.
func ViewType(n *ir.Node, in, outs []ir.Type) (ir.Type, error) {
	want, _, err := ir.InferTypes(n.Op, in, n.BoundAttrs(in, outs))
	if err != nil {
		return ir.Type{}, err
	}
	if outs != nil && (len(outs) != 1 || !outs[0].Equal(want[0])) {
		return ir.Type{}, fmt.Errorf("output types %v, the input gives %s", outs, want[0])
	}
	return want[0], nil
}

// Alias returns a new user of g: a runtime.Buffer of dev that shares g's
// memory as dtype dt and shape.
func Alias[B any](dev runtime.Device, g *Buf[B], dt ir.DType, shape []int) *runtime.Buffer {
	g.Retain()
	return Wrap(dev, g, dt, shape)
}

// View runs view node n (IsView) on inputs in, held by hs: its output
// shares the input's buffer.
func View[B any](dev runtime.Device, n *ir.Node, in []*runtime.Buffer, hs []*Buf[B], outs []ir.Type) ([]*runtime.Buffer, error) {
	if len(in) != 1 {
		return nil, fmt.Errorf("%s takes one input, not %d", n.Op, len(in))
	}
	t, err := ViewType(n, Types(in), outs)
	if err != nil {
		return nil, err
	}
	return []*runtime.Buffer{Alias(dev, hs[0], t.DType, t.Shape.Sizes())}, nil
}
