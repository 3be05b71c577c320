package vulkan

import "encoding/binary"

/*
#include "vk.h"
*/
import "C"

// descriptorCache keeps one descriptor set per pipeline layout and bound
// ranges, so that a kernel launched again on the same buffers (every
// decode step) binds the set it had, and recorded command buffers stay
// valid: a set is never changed or freed while the cache holds it.
type descriptorCache struct {
	pools []C.uint64_t
	left  int // sets left in the last pool
	sets  map[string]C.uint64_t
	key   []byte // scratch
	// scratch of a new set's bindings
	bufs, offs, ranges []C.uint64_t
}

// Pools hold descriptorPoolSets sets of up to descriptorPoolBuffers
// storage buffers in all; when a pool runs out another is created.
const (
	descriptorPoolSets    = 1024
	descriptorPoolBuffers = 8 * descriptorPoolSets
	maxDescriptorSets     = 64 * descriptorPoolSets // then the cache starts over
)

func newDescriptorCache() *descriptorCache {
	return &descriptorCache{sets: map[string]C.uint64_t{}}
}

// descriptorSet returns the set binding bufs to p's layout (must hold
// d.mu).
func (d *Device) descriptorSet(p *vkPipeline, bufs []*vbuf) (C.uint64_t, error) {
	c := d.sets
	c.key = binary.LittleEndian.AppendUint64(c.key[:0], uint64(p.setLayout))
	for _, g := range bufs {
		c.key = binary.LittleEndian.AppendUint64(c.key, uint64(g.B.blk.id))
		c.key = binary.LittleEndian.AppendUint64(c.key, g.B.off)
		c.key = binary.LittleEndian.AppendUint64(c.key, g.Size)
	}
	if set, ok := c.sets[string(c.key)]; ok {
		return set, nil
	}
	if len(c.sets) >= maxDescriptorSets {
		// Starting over frees every set, so nothing recorded may use them.
		if err := d.flushWait(); err != nil {
			return 0, err
		}
		d.replays.clear()
		c.destroy(d.x)
		d.gen++ // recorded calls name the sets
	}
	c.bufs, c.offs, c.ranges = c.bufs[:0], c.offs[:0], c.ranges[:0]
	for _, g := range bufs {
		c.bufs = append(c.bufs, g.B.blk.buf)
		c.offs = append(c.offs, C.uint64_t(g.B.off))
		c.ranges = append(c.ranges, C.uint64_t(g.Size))
	}
	for tries := 0; ; tries++ {
		if c.left == 0 {
			pool, err := d.x.createDescriptorPool(descriptorPoolSets, descriptorPoolBuffers)
			if err != nil {
				return 0, err
			}
			c.pools = append(c.pools, pool)
			c.left = descriptorPoolSets
		}
		set, err := d.x.descriptorSet(c.pools[len(c.pools)-1], p.setLayout, c.bufs, c.offs, c.ranges)
		if err != nil && isPoolExhausted(err) && tries == 0 {
			c.left = 0 // out of buffer descriptors before sets: a new pool
			continue
		}
		if err != nil {
			return 0, err
		}
		c.left--
		c.sets[string(c.key)] = set
		return set, nil
	}
}

// destroy frees every pool and with them every set.
func (c *descriptorCache) destroy(x ctx) {
	for _, p := range c.pools {
		x.destroyDescriptorPool(p)
	}
	c.pools, c.left = nil, 0
	c.sets = map[string]C.uint64_t{}
}
