package devkit

import "fmt"

// Buf is a device buffer (the device's handle B, of Size bytes) shared by
// the runtime.Buffers that alias it: a reshape's output is a view of its
// input's memory. It is released when its last user frees it.
type Buf[B any] struct {
	B    B
	Size uint64 // bytes (a size class, for buffers of an Allocator)
	refs int
}

// NewBuf returns a buffer with one user.
func NewBuf[B any](b B, size uint64) *Buf[B] { return &Buf[B]{B: b, Size: size, refs: 1} }

// Live reports whether g has users.
func (g *Buf[B]) Live() bool { return g != nil && g.refs > 0 }

// Retain adds a user (a view).
func (g *Buf[B]) Retain() { g.refs++ }

// Drop removes a user; it reports whether that was the last one.
func (g *Buf[B]) Drop() bool {
	g.refs--
	return g.refs == 0
}

// Allocator makes a device's buffers in size classes (SizeClass) and keeps
// freed ones in its Pool for the next buffers of their class. Set Create,
// Destroy and Pool.Limit before use.
type Allocator[B comparable] struct {
	// Create makes a device buffer of size bytes.
	Create func(size uint64) (B, error)
	// Destroy releases a device buffer. The device keeps a buffer alive
	// for work already recorded that uses it (or Destroy waits for that).
	Destroy func(B)
	// MaxSize, when > 0, is the largest buffer the device makes.
	MaxSize uint64
	// Stats, when set, counts Allocs and PoolHits, and the bytes of the
	// buffers made and not yet destroyed.
	Stats *Stats
	// TrackLive makes Close destroy the buffers still in use too (their
	// users then find them freed), for devices that must release every
	// buffer they made.
	TrackLive bool
	// Pool keeps the freed buffers, up to its Limit.
	Pool Pool[B]

	live   map[*Buf[B]]struct{}
	closed bool
}

// Alloc returns a buffer of at least n bytes, from the pool when it holds
// one of n's class.
func (a *Allocator[B]) Alloc(n uint64) (*Buf[B], error) {
	c := SizeClass(n)
	if b, ok := a.Pool.Take(c); ok {
		if a.Stats != nil {
			a.Stats.PoolHits++
		}
		return a.track(NewBuf(b, c)), nil
	}
	return a.create(n, c)
}

// New returns a newly made buffer of at least n bytes, never a pooled one
// (that work in flight may still use).
func (a *Allocator[B]) New(n uint64) (*Buf[B], error) { return a.create(n, SizeClass(n)) }

func (a *Allocator[B]) create(n, c uint64) (*Buf[B], error) {
	if a.closed {
		return nil, fmt.Errorf("allocation of %d bytes on a closed device", n)
	}
	if a.MaxSize > 0 && c > a.MaxSize {
		return nil, fmt.Errorf("a buffer of %d bytes exceeds the device's max buffer size %d", n, a.MaxSize)
	}
	b, err := a.Create(c)
	if err != nil {
		return nil, err
	}
	if a.Stats != nil {
		a.Stats.Allocs++
		a.Stats.BufferBytes += int64(c)
		a.Stats.PeakBufferBytes = max(a.Stats.PeakBufferBytes, a.Stats.BufferBytes)
	}
	return a.track(NewBuf(b, c)), nil
}

// destroy destroys b, a buffer of size bytes.
func (a *Allocator[B]) destroy(b B, size uint64) {
	a.Destroy(b)
	a.uncount(int64(size))
}

// uncount takes n destroyed bytes off Stats.BufferBytes.
func (a *Allocator[B]) uncount(n int64) {
	if a.Stats != nil {
		a.Stats.BufferBytes -= n
	}
}

func (a *Allocator[B]) track(g *Buf[B]) *Buf[B] {
	if a.TrackLive {
		if a.live == nil {
			a.live = map[*Buf[B]]struct{}{}
		}
		a.live[g] = struct{}{}
	}
	return g
}

// Free removes one user of g; after the last, g goes back to the pool, or
// is destroyed when the pool is full or the allocator closed.
func (a *Allocator[B]) Free(g *Buf[B]) {
	if !g.Drop() {
		return
	}
	if a.TrackLive {
		delete(a.live, g)
	}
	if a.closed || !a.Pool.Put(g.Size, g.B) {
		a.destroy(g.B, g.Size)
	}
}

// Discard destroys g at once, whatever its users, without pooling it:
// for a buffer that must not be reused (its creation or first write
// failed).
func (a *Allocator[B]) Discard(g *Buf[B]) {
	g.refs = 0
	delete(a.live, g)
	a.destroy(g.B, g.Size)
}

// Drain destroys the pooled buffers, so that the next buffers are newly
// made (a device server calls it between host sessions: WebGPU zeroes new
// buffers, so no session reads what another left).
func (a *Allocator[B]) Drain() {
	n := a.Pool.Bytes()
	a.Pool.Drain(a.Destroy)
	a.uncount(n)
}

// Close drains the pool and, with TrackLive, destroys the buffers in use
// (their users find them freed); buffers freed later are destroyed, not
// pooled.
func (a *Allocator[B]) Close() {
	a.Drain()
	for g := range a.live {
		a.destroy(g.B, g.Size)
		g.refs = 0
	}
	a.live = nil
	a.closed = true
}
