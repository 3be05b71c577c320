package vulkan

import "github.com/tapml/tapml/runtime/internal/devkit"

// ClearFreed zeroes every range of device memory that held a tensor or
// weight and is free now, so that the tensors the device hands out next
// hold nothing earlier ones did (Vulkan neither zeroes new memory nor
// freed ranges). A device server calls it between host sessions, when
// the session's buffers are freed (runtime/remote/device), so that no host
// reads another's data. Ranges never handed out are left as they are:
// nothing was written there.
func (d *Device) ClearFreed() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.usable(); err != nil {
		return err
	}
	// Idle first, so that on host-visible memory the zeroes are written
	// directly, and no pending command can touch a range afterwards.
	if err := d.flushWait(); err != nil {
		return err
	}
	zeros := make([]byte, min(d.opts.StagingBytes, 4<<20))
	for _, p := range []*pool{d.tensors, d.weights} {
		for i := range p.a.blocks {
			f := &p.a.blocks[i]
			for _, s := range f.free {
				for off := s.off; off < min(s.off+s.size, f.hwm); {
					n := min(uint64(len(zeros)), f.hwm-off, s.off+s.size-off)
					g := devkit.NewBuf(vrange{pool: p, blk: p.blocks[i], local: i, off: off}, n)
					if err := d.write(g, zeros[:n], false); err != nil {
						return err
					}
					off += n
				}
			}
		}
	}
	return d.flushWait()
}
