package vulkan

import (
	"errors"
	"fmt"
	"slices"

	"github.com/tapml/tapml/runtime"
	"github.com/tapml/tapml/runtime/internal/devkit"
	"github.com/tapml/tapml/tensor"
)

/*
#include "vk.h"
*/
import "C"

// Captured calls (runtime.Capturer). The executor walks a decode step's
// graph once more while the device records its commands; later steps
// append the recorded commands in one go, so a step costs the host a copy
// of its command list and one submission, which the replay cache
// (replay.go) finds already recorded in a command buffer. The recording
// stays valid because nothing it names moves: pipelines live as long as
// the device, descriptor sets as long as their cache generation
// (Device.gen), and the buffers the call freed stay allocated, owned by
// the capture, so that no other tensor is given their memory.

// capture is a call being recorded, then its recording.
type capture struct {
	d      *Device
	args   []*vbuf
	start  int  // where the call's commands begin in d.ops
	broken bool // a copy or a submission came in between: not replayable
	pinned []*vbuf
	gen    uint64

	ops                  []C.tvk_op
	read, written        []access // the hazards after the call's commands
	results              []*runtime.Buffer
	dispatches, barriers int
	released             bool
}

var (
	_ runtime.Capturer = (*Device)(nil)
	_ runtime.Writer   = (*Device)(nil)
)

// BeginCapture starts recording a call on args.
func (d *Device) BeginCapture(args []*runtime.Buffer) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.usable(); err != nil {
		return err
	}
	if d.capturing != nil {
		return errors.New("vulkan: a capture is already in progress")
	}
	hs := make([]*vbuf, len(args))
	if err := devkit.Handles(d, args, hs); err != nil {
		return fmt.Errorf("vulkan: capture: %w", err)
	}
	// The recording must not depend on what was recorded before it.
	if len(d.ops) > 0 {
		d.ops = append(d.ops, barrierOp())
		d.stats.Barriers++
	}
	d.haz.clear()
	d.capturing = &capture{d: d, args: hs, start: len(d.ops), gen: d.gen}
	return nil
}

// EndCapture stops recording; it returns nil when the call cannot be
// replayed.
func (d *Device) EndCapture(results []*runtime.Buffer) (runtime.Capture, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	c := d.capturing
	if c == nil {
		return nil, errors.New("vulkan: no capture in progress")
	}
	d.capturing = nil
	if c.broken || d.closed || c.gen != d.gen || c.start > len(d.ops) {
		c.releasePinned()
		return nil, nil
	}
	for _, r := range results {
		g, err := devkit.Handle[vrange](d, r)
		if err != nil {
			c.releasePinned()
			return nil, fmt.Errorf("vulkan: capture: result %w", err)
		}
		c.results = append(c.results, devkit.Alias(d, g, r.DType, r.Shape))
	}
	c.ops = slices.Clone(d.ops[c.start:])
	for _, op := range c.ops {
		switch op.kind {
		case C.TVK_OP_DISPATCH:
			c.dispatches++
		case C.TVK_OP_BARRIER:
			c.barriers++
		}
	}
	c.read, c.written = slices.Clone(d.haz.read), slices.Clone(d.haz.written)
	d.stats.CallsRecorded++
	return c, nil
}

// Replay appends the recorded commands, after a barrier when commands are
// pending, and returns new shares of the results.
func (c *capture) Replay(args []*runtime.Buffer) ([]*runtime.Buffer, error) {
	d := c.d
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.usable(); err != nil {
		return nil, err
	}
	if c.released {
		return nil, errors.New("vulkan: replay of a released capture")
	}
	if d.capturing != nil {
		return nil, errors.New("vulkan: replay while a capture is in progress")
	}
	if c.gen != d.gen {
		return nil, runtime.ErrStale
	}
	if len(args) != len(c.args) {
		return nil, fmt.Errorf("vulkan: replay on %d arguments; the call was recorded on %d", len(args), len(c.args))
	}
	for i, a := range args {
		g, err := devkit.Handle[vrange](d, a)
		if err != nil {
			return nil, fmt.Errorf("vulkan: replay: argument %d: %w", i, err)
		}
		if g != c.args[i] {
			return nil, runtime.ErrStale // another buffer at the address of the one recorded
		}
	}
	if len(d.ops) > 0 {
		d.ops = append(d.ops, barrierOp())
		d.stats.Barriers++
	}
	d.ops = append(d.ops, c.ops...)
	d.haz.read = append(d.haz.read[:0], c.read...)
	d.haz.written = append(d.haz.written[:0], c.written...)
	d.stats.Dispatches += c.dispatches
	d.stats.Barriers += c.barriers
	d.stats.CallsReplayed++
	res := make([]*runtime.Buffer, len(c.results))
	for i, r := range c.results {
		res[i] = devkit.Alias(d, r.Handle.(*vbuf), r.DType, r.Shape)
	}
	return res, nil
}

// Release frees the buffers the capture holds. Commands already submitted
// may still use them: later commands that write them are ordered after
// those (hazard.go, and every command buffer begins with a barrier).
func (c *capture) Release() {
	d := c.d
	d.mu.Lock()
	defer d.mu.Unlock()
	if c.released {
		return
	}
	c.released = true
	c.releasePinned()
	for _, r := range c.results {
		if g := devkit.Take[vrange](d, r); g != nil && !d.closed && g.Drop() {
			d.release(g)
		}
	}
	c.results, c.ops = nil, nil
}

// releasePinned returns the buffers freed during the call (must hold
// d.mu).
func (c *capture) releasePinned() {
	if !c.d.closed {
		for _, g := range c.pinned {
			c.d.release(g)
		}
	}
	c.pinned = nil
}

// Write copies t into b, ordered with the commands around it.
func (d *Device) Write(b *runtime.Buffer, t *tensor.Tensor) error {
	if t == nil {
		return errors.New("vulkan: write of a nil tensor")
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	g, err := devkit.Handle[vrange](d, b)
	if err != nil {
		return fmt.Errorf("vulkan: write: %w", err)
	}
	if err := d.usable(); err != nil {
		return err
	}
	if t.DType != b.DType || uint64(len(t.Data)) > g.Size || int64(t.NumElements()) != b.Type().Shape.NumElements() {
		return fmt.Errorf("vulkan: write of %s into %s", t, b)
	}
	if g.B.weight {
		return fmt.Errorf("vulkan: write into %s, a weight", b)
	}
	return d.write(g, t.Data, false)
}
