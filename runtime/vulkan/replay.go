package vulkan

import (
	"bytes"
	"hash/maphash"
)

// replayCache keeps recorded command buffers by the exact content of the
// command list they hold (pipelines, descriptor sets, grids, copies,
// barriers), so that a list submitted again is not recorded again. A
// decode step submits the same lists every step: its kernels, shapes and
// buffers are the same (the position lives in a buffer, and the arena
// hands out the same ranges), so after the first steps a step costs its
// submissions and no recording. The match is by content, not by a call's
// identity, so it can never replay stale work: any difference (a new
// buffer, another grid) is a miss and records afresh.
//
// T is the command buffer handle; the cache does not know Vulkan.
type replayCache[T any] struct {
	seed    maphash.Seed
	byHash  map[uint64][]*replayEntry[T]
	n, max  int
	tick    uint64
	evicted func(T) // frees an evicted entry's command buffer
}

type replayEntry[T any] struct {
	key    []byte // the command list, as recorded
	cb     T
	serial uint64 // the last submission that used it
	used   uint64 // tick of the last use, for eviction
}

func newReplayCache[T any](max int, evicted func(T)) *replayCache[T] {
	return &replayCache[T]{seed: maphash.MakeSeed(), byHash: map[uint64][]*replayEntry[T]{}, max: max, evicted: evicted}
}

// find returns the entry recorded for list key, or nil.
func (c *replayCache[T]) find(key []byte) (*replayEntry[T], uint64) {
	h := maphash.Bytes(c.seed, key)
	for _, e := range c.byHash[h] {
		if bytes.Equal(e.key, key) {
			c.tick++
			e.used = c.tick
			return e, h
		}
	}
	return nil, h
}

// add keeps cb as the recording of key (hash h from find). When the cache
// is full it first evicts the least recently used entry that is not in
// flight (serial > done); if all are, it keeps one more.
func (c *replayCache[T]) add(h uint64, key []byte, cb T, done uint64) *replayEntry[T] {
	if c.n >= c.max {
		c.evictOne(done)
	}
	c.tick++
	e := &replayEntry[T]{key: bytes.Clone(key), cb: cb, used: c.tick}
	c.byHash[h] = append(c.byHash[h], e)
	c.n++
	return e
}

func (c *replayCache[T]) evictOne(done uint64) {
	var victim *replayEntry[T]
	var vh uint64
	for h, es := range c.byHash {
		for _, e := range es {
			if e.serial <= done && (victim == nil || e.used < victim.used) {
				victim, vh = e, h
			}
		}
	}
	if victim == nil {
		return
	}
	es := c.byHash[vh]
	for i, e := range es {
		if e == victim {
			es = append(es[:i], es[i+1:]...)
			break
		}
	}
	if len(es) == 0 {
		delete(c.byHash, vh)
	} else {
		c.byHash[vh] = es
	}
	c.n--
	c.evicted(victim.cb)
}

// clear evicts every entry (the caller has waited for the device).
func (c *replayCache[T]) clear() {
	for _, es := range c.byHash {
		for _, e := range es {
			c.evicted(e.cb)
		}
	}
	c.byHash = map[uint64][]*replayEntry[T]{}
	c.n = 0
}
