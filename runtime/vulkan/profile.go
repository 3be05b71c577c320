package vulkan

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"
)

/*
#include "vk.h"
*/
import "C"

// A profile times every command on the GPU: each submission is recorded
// afresh with a timestamp before its first command and after each dispatch
// or copy, and waited for, so that the difference of two stamps is what
// that command added to the queue's time (its own run, the barrier before
// it and the launch gap; commands that overlap share it out). It is for
// finding where a decode step's time goes, not for speed: waiting after
// every submission and recording afresh cost what replay saves.

// KernelTime is the GPU time of the commands of one kind in a profile.
type KernelTime struct {
	Name  string // op, input types and grid ("matmul f32[128,2048],f16[8192,2048] 88x2x1"), or "copy"
	Calls int
	Time  time.Duration
}

type profiler struct {
	pool   C.uint64_t
	size   int // queries in pool
	byName map[string]*KernelTime
	gpu    time.Duration // first stamp to last, summed over submissions
	ticks  []uint64
}

// errNoTimestamps is returned by Profile on a queue without timestamps.
var errNoTimestamps = errors.New("vulkan: the device's queue has no compute timestamps; it cannot be profiled")

// Profile starts (on) or ends timing each command on the GPU. Starting
// clears the previous profile.
func (d *Device) Profile(on bool) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.usable(); err != nil {
		return err
	}
	if err := d.flushWait(); err != nil {
		return err
	}
	if d.prof != nil {
		d.x.destroyQueryPool(d.prof.pool)
		d.prof = nil
	}
	if !on {
		return nil
	}
	if d.phys.TimestampPeriod <= 0 || d.phys.TimestampBits == 0 {
		return errNoTimestamps
	}
	d.prof = &profiler{byName: map[string]*KernelTime{}}
	return nil
}

// Profiled returns the time of each kind of command since Profile(true),
// most first, and the GPU time of the submissions (first stamp to last).
func (d *Device) Profiled() ([]KernelTime, time.Duration) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.prof == nil {
		return nil, 0
	}
	var out []KernelTime
	for _, k := range d.prof.byName {
		out = append(out, *k)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Time != out[j].Time {
			return out[i].Time > out[j].Time
		}
		return out[i].Name < out[j].Name
	})
	return out, d.prof.gpu
}

// submitProfiled records d.ops with timestamps, submits them, waits and
// adds the stamps to the profile (must hold d.mu).
func (d *Device) submitProfiled() error {
	if err := d.wait(); err != nil {
		return err
	}
	p := d.prof
	n := 1
	for _, op := range d.ops {
		if op.kind != C.TVK_OP_BARRIER {
			n++
		}
	}
	if n > p.size {
		if p.pool != 0 {
			d.x.destroyQueryPool(p.pool)
			p.pool, p.size = 0, 0
		}
		pool, err := d.x.createQueryPool(n)
		if err != nil {
			return err
		}
		p.pool, p.size = pool, n
	}
	cb, err := d.commandBuffer()
	if err != nil {
		return err
	}
	if err := d.x.recordStamped(cb, d.ops, p.pool); err != nil {
		d.spareCBs = append(d.spareCBs, cb)
		return err
	}
	fence, err := d.fence()
	if err != nil {
		d.spareCBs = append(d.spareCBs, cb)
		return err
	}
	if err := d.x.submit(cb, fence); err != nil {
		d.fences = append(d.fences, fence)
		d.spareCBs = append(d.spareCBs, cb)
		return err
	}
	d.serial++
	d.inflight = append(d.inflight, submission{serial: d.serial, fence: fence, cb: cb, once: true})
	d.stats.Submits++
	d.stats.Recorded++
	if err := d.wait(); err != nil {
		return err
	}
	p.ticks = append(p.ticks[:0], make([]uint64, n)...)
	if err := d.x.timestamps(p.pool, p.ticks); err != nil {
		return err
	}
	p.add(d.ops, p.ticks, d.phys.TimestampPeriod, d.phys.TimestampBits, d.pipelineLabels())
	return nil
}

// add attributes the stamps of one submission to its commands.
func (p *profiler) add(ops []C.tvk_op, ticks []uint64, period float64, bits uint32, labels map[C.uint64_t]string) {
	mask := ^uint64(0)
	if bits < 64 {
		mask = 1<<bits - 1
	}
	span := func(a, b uint64) time.Duration { return time.Duration(float64((b-a)&mask) * period) }
	j := 0
	for _, op := range ops {
		var name string
		switch op.kind {
		case C.TVK_OP_BARRIER:
			continue
		case C.TVK_OP_DISPATCH:
			name = fmt.Sprintf("%s %dx%dx%d", labels[op.pipeline], op.x, op.y, op.z)
		default:
			name = "copy"
		}
		j++
		k := p.byName[name]
		if k == nil {
			k = &KernelTime{Name: name}
			p.byName[name] = k
		}
		k.Calls++
		k.Time += span(ticks[j-1], ticks[j])
	}
	p.gpu += span(ticks[0], ticks[j])
}

// pipelineLabels maps pipeline handles to their names in profiles: op
// and input types.
func (d *Device) pipelineLabels() map[C.uint64_t]string {
	m := make(map[C.uint64_t]string, len(d.pipelines))
	for _, p := range d.pipelines {
		m[p.pipe] = strings.TrimSpace(p.op + " " + p.inputs)
	}
	return m
}
