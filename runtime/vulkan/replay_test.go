package vulkan

import (
	"slices"
	"testing"
)

// TestReplayCache checks lookups by content, eviction of the least
// recently used entry that is not in flight, and clear.
func TestReplayCache(t *testing.T) {
	var evicted []int
	c := newReplayCache(2, func(cb int) { evicted = append(evicted, cb) })
	key := func(s string) []byte { return []byte(s) }
	if e, _ := c.find(key("a")); e != nil {
		t.Fatal("found a list in an empty cache")
	}
	_, h := c.find(key("a"))
	a := c.add(h, key("a"), 1, 0)
	_, h = c.find(key("b"))
	b := c.add(h, key("b"), 2, 0)
	a.serial, b.serial = 5, 6
	if e, _ := c.find(key("a")); e != a {
		t.Fatal("a is not found by its content")
	}
	if e, _ := c.find(key("ab")); e != nil {
		t.Fatal("a longer list matched")
	}
	// Full: b is least recently used but in flight (serial 6 > done 5),
	// so a goes.
	_, h = c.find(key("c"))
	c.add(h, key("c"), 3, 5).serial = 7
	if !slices.Equal(evicted, []int{1}) {
		t.Errorf("evicted %v, want [1] (a: b is in flight)", evicted)
	}
	if e, _ := c.find(key("a")); e != nil {
		t.Error("a is still cached")
	}
	// Everything in flight: the cache keeps one more rather than evict.
	evicted = nil
	_, h = c.find(key("d"))
	c.add(h, key("d"), 4, 0)
	if len(evicted) != 0 || c.n != 3 {
		t.Errorf("evicted %v with every entry in flight, %d entries", evicted, c.n)
	}
	c.clear()
	slices.Sort(evicted)
	if !slices.Equal(evicted, []int{2, 3, 4}) || c.n != 0 {
		t.Errorf("clear evicted %v (%d left), want [2 3 4]", evicted, c.n)
	}
}
