package vulkan

import (
	"fmt"
	"time"

	"github.com/tapml/tapml/runtime"
)

/*
#include "vk.h"
*/
import "C"

// submission is a command buffer submitted with a fence.
type submission struct {
	serial uint64
	fence  C.uint64_t
	cb     C.VkCommandBuffer
	once   bool // cb was recorded for this submission only (not kept for replay)
}

// command appends op to the command list, after a barrier when it touches
// memory that commands since the last barrier wrote or read (must hold
// d.mu).
func (d *Device) command(op C.tvk_op, reads, writes []access) {
	if d.capturing != nil && op.kind != C.TVK_OP_DISPATCH {
		d.capturing.broken = true // data the recording cannot carry
	}
	if d.haz.conflicts(reads, writes) {
		d.ops = append(d.ops, barrierOp())
		d.haz.clear()
		d.stats.Barriers++
	}
	d.haz.note(reads, writes)
	d.ops = append(d.ops, op)
}

// submit records (or finds recorded) the command list and submits it
// (must hold d.mu). On failure the list is dropped and the device
// remembers why.
func (d *Device) submit() error {
	if len(d.ops) == 0 {
		return nil
	}
	err := d.submitOps()
	d.ops = d.ops[:0]
	d.haz.clear()
	if err != nil {
		d.batch.Dropped()
		err = fmt.Errorf("vulkan: %w", err)
		if isDeviceLost(err) {
			d.closed = true
			return runtime.Lost(err)
		}
		// Buffers that earlier launches returned will never be written:
		// the next call reports it too.
		d.lost = err
		return err
	}
	d.batch.Submitted()
	return nil
}

func (d *Device) submitOps() error {
	if d.capturing != nil {
		d.capturing.broken = true
	}
	if err := d.reap(); err != nil {
		return err
	}
	if d.prof != nil {
		return d.submitProfiled()
	}
	key := opBytes(d.ops)
	e, h := d.replays.find(key)
	var cb C.VkCommandBuffer
	once := false
	if e != nil && e.serial <= d.done {
		cb = e.cb
		d.stats.Replayed++
	} else {
		// A new list, or one whose recording is still in flight.
		var err error
		if cb, err = d.commandBuffer(); err != nil {
			return err
		}
		once = e != nil
		if err := d.x.record(cb, d.ops, once); err != nil {
			d.spareCBs = append(d.spareCBs, cb)
			return err
		}
		d.stats.Recorded++
		if !once {
			e = d.replays.add(h, key, cb, d.done)
		}
	}
	fence, err := d.fence()
	if err != nil {
		if once {
			d.spareCBs = append(d.spareCBs, cb)
		}
		return err
	}
	if err := d.x.submit(cb, fence); err != nil {
		d.fences = append(d.fences, fence)
		if once {
			d.spareCBs = append(d.spareCBs, cb)
		}
		return err
	}
	d.serial++
	if !once {
		e.serial = d.serial
	}
	d.inflight = append(d.inflight, submission{serial: d.serial, fence: fence, cb: cb, once: once})
	d.stats.Submits++
	return nil
}

// commandBuffer returns a command buffer to record into.
func (d *Device) commandBuffer() (C.VkCommandBuffer, error) {
	if n := len(d.spareCBs); n > 0 {
		cb := d.spareCBs[n-1]
		d.spareCBs = d.spareCBs[:n-1]
		return cb, nil
	}
	return d.x.commandBuffer()
}

// fence returns an unsignalled fence.
func (d *Device) fence() (C.uint64_t, error) {
	if n := len(d.fences); n > 0 {
		f := d.fences[n-1]
		d.fences = d.fences[:n-1]
		return f, nil
	}
	return d.x.createFence()
}

// reap retires the submissions that have finished, in order (must hold
// d.mu).
func (d *Device) reap() error {
	for len(d.inflight) > 0 {
		s := d.inflight[0]
		ok, err := d.x.fenceDone(s.fence)
		if err != nil {
			return err
		}
		if !ok {
			return nil
		}
		if err := d.retire(s); err != nil {
			return err
		}
		d.inflight = d.inflight[1:]
	}
	return nil
}

func (d *Device) retire(s submission) error {
	if err := d.x.resetFence(s.fence); err != nil {
		return err
	}
	d.fences = append(d.fences, s.fence)
	if s.once {
		d.spareCBs = append(d.spareCBs, s.cb)
	}
	d.done = s.serial
	return nil
}

// idle reports whether no command is recorded or running (must hold d.mu).
func (d *Device) idle() (bool, error) {
	if len(d.ops) > 0 {
		return false, nil // no reap: what it frees in staging would vary the offsets of the commands to come
	}
	if err := d.reap(); err != nil {
		return false, err
	}
	return len(d.ops) == 0 && len(d.inflight) == 0, nil
}

// flushWait submits the command list and waits until the device is idle
// (must hold d.mu); the staging buffer is empty then, but for the data of
// downloads not yet read (StartDownload).
func (d *Device) flushWait() error {
	if err := d.submit(); err != nil {
		return err
	}
	if err := d.wait(); err != nil {
		return err
	}
	d.batch.Waited()
	return nil
}

// wait waits for every submission (must hold d.mu).
func (d *Device) wait() error { return d.waitFor(d.serial) }

// waitFor waits for the submissions up to serial, oldest first, and
// retires them (must hold d.mu); later ones may still run. Past
// Options.WaitTimeout the device is closed: its state is unknown.
func (d *Device) waitFor(serial uint64) error {
	deadline := time.Now().Add(d.opts.WaitTimeout)
	for len(d.inflight) > 0 && d.inflight[0].serial <= serial {
		s := d.inflight[0]
		if err := d.waitFence(s.fence, deadline); err != nil {
			if isDeviceLost(err) {
				d.closed = true
				return runtime.Lost(fmt.Errorf("vulkan: %w", err))
			}
			return fmt.Errorf("vulkan: %w", err)
		}
		if err := d.retire(s); err != nil {
			return fmt.Errorf("vulkan: %w", err)
		}
		d.inflight = d.inflight[1:]
	}
	return nil
}

// waitFence waits for fence f: it first polls a few times without
// sleeping (short work is often done by then), then blocks in the
// driver's vkWaitForFences, or with WaitPoll keeps polling with short
// sleeps, up to maxPollSleep.
func (d *Device) waitFence(f C.uint64_t, deadline time.Time) error {
	sleep := time.Microsecond
	for i := 0; ; i++ {
		done, err := d.x.fenceDone(f)
		if err != nil || done {
			return err
		}
		if time.Now().After(deadline) {
			d.closed = true
			return fmt.Errorf("the device did not finish within %s; it is now closed", d.opts.WaitTimeout)
		}
		if i < 16 {
			continue
		}
		if d.opts.Wait == WaitBlock {
			done, err := d.x.wait([]C.uint64_t{f}, uint64(max(time.Until(deadline), 0)))
			if err != nil || done {
				return err
			}
			continue // timed out: the deadline check says so
		}
		time.Sleep(sleep)
		sleep = min(2*sleep, maxPollSleep)
	}
}

// maxPollSleep bounds the sleep between two polls of a fence (the latency
// WaitPoll adds to a wait).
const maxPollSleep = 100 * time.Microsecond

// Sync submits pending work and waits until the device is idle.
func (d *Device) Sync() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.usable(); err != nil {
		return err
	}
	return d.flushWait()
}
