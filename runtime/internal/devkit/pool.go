package devkit

import "math/bits"

// SizeClass rounds a byte count up to its pool class: powers of two up to
// 64 KiB, then eighths of a power of two (at most 12.5% slack). The minimum
// is 16 bytes, so that no buffer is empty (WebGPU bindings and Metal
// buffers cannot be).
func SizeClass(n uint64) uint64 {
	if n <= 16 {
		return 16
	}
	if n <= 64<<10 {
		return 1 << bits.Len64(n-1)
	}
	step := uint64(1) << (bits.Len64(n-1) - 4) // 1/8 of the power of two at or above n
	return (n + step - 1) / step * step
}

// Pool keeps freed device buffers (handles of type B) by size class for
// reuse, up to Limit bytes. Its zero value keeps nothing; set Limit.
type Pool[B any] struct {
	// Limit bounds the bytes of the buffers kept.
	Limit int64
	free  map[uint64][]B
	bytes int64
}

// Take returns a kept buffer of size class c, if there is one.
func (p *Pool[B]) Take(c uint64) (b B, ok bool) {
	free := p.free[c]
	if len(free) == 0 {
		return b, false
	}
	b = free[len(free)-1]
	var zero B
	free[len(free)-1] = zero
	p.free[c] = free[:len(free)-1]
	p.bytes -= int64(c)
	return b, true
}

// Put keeps b, a buffer of size class c. It reports false, keeping
// nothing, when b would pass the limit: the caller then destroys b.
func (p *Pool[B]) Put(c uint64, b B) bool {
	if p.bytes+int64(c) > p.Limit {
		return false
	}
	if p.free == nil {
		p.free = map[uint64][]B{}
	}
	p.free[c] = append(p.free[c], b)
	p.bytes += int64(c)
	return true
}

// Drain empties the pool, passing each buffer kept to destroy.
func (p *Pool[B]) Drain(destroy func(B)) {
	for c, free := range p.free {
		for _, b := range free {
			destroy(b)
		}
		delete(p.free, c)
	}
	p.bytes = 0
}

// Bytes returns the bytes of the buffers kept.
func (p *Pool[B]) Bytes() int64 { return p.bytes }

// LargestFitting returns the largest byte count whose size class is at
// most limit (0 when none is): the largest tensor a device whose buffers
// and bindings are limited to limit bytes can hold.
func LargestFitting(limit uint64) uint64 {
	if limit < 16 {
		return 0
	}
	if limit <= 64<<10 {
		return 1 << (bits.Len64(limit) - 1)
	}
	step := uint64(1) << (bits.Len64(limit) - 4)
	return limit / step * step // a multiple of its own class's step is its own class
}
