package devkit

// DefaultMaxBatch is the number of dispatches per submission that devices
// use unless told otherwise (runtime/webgpu measures its own default on
// GPUs: DiscreteMaxBatch).
const DefaultMaxBatch = 64

// Batch decides when recorded dispatches go to the device in one
// submission: after its maximum of them, so that no submission runs long
// (CPU drivers) and the device is fed while the host records more. With a
// ramp > 0, the first submission after the device waited (a download or a
// sync) comes after ramp dispatches, the next after twice as many, and so
// on up to the maximum, so that the GPU starts on a step's first kernels
// while the host records the rest.
type Batch struct {
	max, ramp int
	pending   int // dispatches recorded since the last submission
	next      int // dispatches at which to submit
}

// NewBatch returns a Batch of at most maxBatch dispatches (at least 1)
// that ramps from ramp (<= 0: no ramp).
func NewBatch(maxBatch, ramp int) Batch {
	var b Batch
	b.Set(maxBatch, ramp)
	return b
}

// Set changes the most dispatches of one submission and the ramp; the
// ramp starts again. Dispatches recorded stay counted.
func (b *Batch) Set(maxBatch, ramp int) {
	b.max, b.ramp = max(maxBatch, 1), ramp
	b.Waited()
}

// Pending returns the dispatches recorded since the last submission.
func (b *Batch) Pending() int { return b.pending }

// Add counts one recorded dispatch; it reports whether to submit now.
func (b *Batch) Add() bool {
	b.pending++
	return b.pending >= b.next
}

// Submitted records a submission: the next one may be twice as large.
func (b *Batch) Submitted() {
	b.pending = 0
	b.next = min(2*b.next, b.max)
}

// Dropped records that the recorded dispatches were dropped, not
// submitted.
func (b *Batch) Dropped() { b.pending = 0 }

// Waited records that the device waited for all submitted work: the ramp
// starts again.
func (b *Batch) Waited() {
	b.next = b.max
	if b.ramp > 0 && b.ramp < b.next {
		b.next = b.ramp
	}
}

// BatchDefaults are a GPU device's default submission sizes on GPUs
// (Options.MaxBatch and BatchRamp of runtime/webgpu and runtime/vulkan);
// on CPU drivers the defaults are DefaultMaxBatch and no ramp.
type BatchDefaults struct{ MaxBatch, Ramp int }

// MaxBatchOr returns n, or the default when n <= 0.
func (b BatchDefaults) MaxBatchOr(n int, cpu bool) int {
	switch {
	case n > 0:
		return n
	case cpu:
		return DefaultMaxBatch
	}
	return b.MaxBatch
}

// RampOr returns n, or the default when n == 0 (< 0 means no ramp).
func (b BatchDefaults) RampOr(n int, cpu bool) int {
	if n == 0 && !cpu {
		return b.Ramp
	}
	return n
}
