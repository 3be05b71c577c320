package vulkan

import "fmt"

// arena suballocates tensors from a few large blocks of device memory, as
// a GPU allocator must: drivers allow a few thousand allocations at most
// and each costs a kernel call, while a model has hundreds of tensors and
// a decode step allocates and frees hundreds of activations.
//
// Each block is one VkBuffer over one allocation; a tensor is a range of a
// block, bound by offset. Free spans are kept per block, sorted and
// coalesced, and allocation is first fit, so the same sequence of
// allocations and frees gives the same ranges: a decode step that frees
// what it allocated gets the same buffers the next step, which is what
// lets its recorded command lists be replayed (replay.go).
//
// The arena only does the arithmetic; the device creates the blocks.
type arena struct {
	align    uint64 // every offset and size is a multiple
	minBlock uint64 // the first block's size
	maxBlock uint64 // blocks grow by doubling up to this; larger tensors get a block of their own
	blocks   []freeList
}

// span is a byte range [off, off+size) of a block.
type span struct{ off, size uint64 }

// freeList is the free spans of one block, sorted by offset, none
// adjacent; below hwm every byte has been handed out at least once.
type freeList struct {
	size, hwm uint64
	free      []span
}

// piece is a range that alloc gave: block blk, [off, off+size). fresh
// means that no earlier command can have touched it (it was never handed
// out before), so the host may write it while work is pending.
type piece struct {
	blk       int
	off, size uint64
	fresh     bool
}

func newArena(align, minBlock, maxBlock uint64) *arena {
	align = max(align, 16)
	a := &arena{align: align}
	a.minBlock = a.round(minBlock)
	a.maxBlock = max(a.round(maxBlock), a.minBlock)
	return a
}

// round rounds n up to the alignment (at least one unit: every binding
// must be non-empty).
func (a *arena) round(n uint64) uint64 {
	n = max(n, 1)
	return (n + a.align - 1) / a.align * a.align
}

// alloc returns a free range of n bytes (rounded) from the existing blocks.
func (a *arena) alloc(n uint64) (piece, bool) {
	size := a.round(n)
	for i := range a.blocks {
		f := &a.blocks[i]
		if off, ok := f.take(size); ok {
			fresh := off >= f.hwm
			f.hwm = max(f.hwm, off+size)
			return piece{i, off, size, fresh}, true
		}
	}
	return piece{size: size}, false
}

// nextBlock is the size of the block to add for a request of n bytes that
// did not fit: double the last block, up to maxBlock, and at least n.
func (a *arena) nextBlock(n uint64) uint64 {
	size := a.minBlock
	if k := len(a.blocks); k > 0 {
		size = min(max(2*a.blocks[k-1].size, a.minBlock), a.maxBlock)
	}
	return max(size, a.round(n))
}

// addBlock adds a block of size bytes, all free, and returns its index.
func (a *arena) addBlock(size uint64) int {
	a.blocks = append(a.blocks, freeList{size: size, free: []span{{0, size}}})
	return len(a.blocks) - 1
}

// release returns a range that alloc gave.
func (a *arena) release(blk int, off, size uint64) error {
	if blk < 0 || blk >= len(a.blocks) {
		return fmt.Errorf("block %d of %d", blk, len(a.blocks))
	}
	return a.blocks[blk].give(off, size)
}

// used returns the bytes in use in block blk.
func (a *arena) used(blk int) uint64 {
	f := &a.blocks[blk]
	n := f.size
	for _, s := range f.free {
		n -= s.size
	}
	return n
}

// take removes the first free span that holds size bytes.
func (f *freeList) take(size uint64) (uint64, bool) {
	for i, s := range f.free {
		if s.size < size {
			continue
		}
		if s.size == size {
			f.free = append(f.free[:i], f.free[i+1:]...)
		} else {
			f.free[i] = span{s.off + size, s.size - size}
		}
		return s.off, true
	}
	return 0, false
}

// give frees [off, off+size), merging it with its free neighbours. A range
// that overlaps a free span or the block's end is refused (a double free).
func (f *freeList) give(off, size uint64) error {
	if size == 0 || off+size > f.size || off+size < off {
		return fmt.Errorf("range [%d, %d) is outside the block of %d bytes", off, off+size, f.size)
	}
	i := 0 // the first free span after off
	for i < len(f.free) && f.free[i].off < off {
		i++
	}
	if i > 0 && f.free[i-1].off+f.free[i-1].size > off || i < len(f.free) && off+size > f.free[i].off {
		return fmt.Errorf("range [%d, %d) is already free", off, off+size)
	}
	joinPrev := i > 0 && f.free[i-1].off+f.free[i-1].size == off
	joinNext := i < len(f.free) && off+size == f.free[i].off
	switch {
	case joinPrev && joinNext:
		f.free[i-1].size += size + f.free[i].size
		f.free = append(f.free[:i], f.free[i+1:]...)
	case joinPrev:
		f.free[i-1].size += size
	case joinNext:
		f.free[i] = span{off, size + f.free[i].size}
	default:
		f.free = append(f.free, span{})
		copy(f.free[i+1:], f.free[i:])
		f.free[i] = span{off, size}
	}
	return nil
}
