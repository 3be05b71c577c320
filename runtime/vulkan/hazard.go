package vulkan

// hazards decides where a command list needs a pipeline barrier. Vulkan
// runs the dispatches of a command buffer with no ordering between them
// unless a barrier says so; a barrier after every dispatch would serialise
// independent kernels (the q, k and v projections of a decode step), so,
// as llama.cpp's Vulkan backend does, one is recorded only before a
// command that touches memory an earlier command since the last barrier
// wrote (read after write, write after write) or read (write after read:
// a freed range reused for a new output).
//
// Ranges are compared, not buffers, because tensors are ranges of shared
// blocks and a freed range may come back as another tensor.
type hazards struct {
	written, read []access
}

// access is the byte range [off, end) of block blk that a command reads
// or writes.
type access struct {
	blk      int
	off, end uint64
}

func (a access) overlaps(b access) bool { return a.blk == b.blk && a.off < b.end && b.off < a.end }

func anyOverlap(xs, ys []access) bool {
	for _, x := range xs {
		for _, y := range ys {
			if x.overlaps(y) {
				return true
			}
		}
	}
	return false
}

// conflicts reports whether a command with these reads and writes must
// wait for the commands recorded since the last barrier.
func (h *hazards) conflicts(reads, writes []access) bool {
	return anyOverlap(reads, h.written) || anyOverlap(writes, h.written) || anyOverlap(writes, h.read)
}

// note records a command's accesses.
func (h *hazards) note(reads, writes []access) {
	h.read = append(h.read, reads...)
	h.written = append(h.written, writes...)
}

// clear forgets every access: a barrier was recorded.
func (h *hazards) clear() {
	h.read = h.read[:0]
	h.written = h.written[:0]
}
