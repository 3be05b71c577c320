package devkit

import (
	"errors"
	"testing"
)

// device stands in for a GPU's buffer calls: handles are numbers, and it
// records which exist, so that a test sees every buffer made and destroyed.
type device struct {
	next    int
	exist   map[int]uint64 // handle: size
	fail    bool
	destroy int
}

func (d *device) allocator(limit int64, track bool, st *Stats) *Allocator[int] {
	d.exist = map[int]uint64{}
	return &Allocator[int]{
		Create: func(size uint64) (int, error) {
			if d.fail {
				return 0, errors.New("out of memory")
			}
			d.next++
			d.exist[d.next] = size
			return d.next, nil
		},
		Destroy: func(h int) {
			if _, ok := d.exist[h]; !ok {
				panic("destroyed twice")
			}
			delete(d.exist, h)
			d.destroy++
		},
		MaxSize:   1 << 20,
		Stats:     st,
		TrackLive: track,
		Pool:      Pool[int]{Limit: limit},
	}
}

func TestAllocatorReuseAndViews(t *testing.T) {
	var d device
	var st Stats
	a := d.allocator(1<<10, false, &st)
	g, err := a.Alloc(100)
	if err != nil || g.Size != 128 || d.exist[g.B] != 128 {
		t.Fatalf("Alloc(100) = %+v, %v; want a 128-byte buffer", g, err)
	}
	// A view keeps the buffer: only the second Free pools it.
	g.Retain()
	a.Free(g)
	if !g.Live() || a.Pool.Bytes() != 0 {
		t.Fatal("the first of two users freed the buffer")
	}
	a.Free(g)
	if g.Live() || a.Pool.Bytes() != 128 {
		t.Fatalf("after the last user: live %v, %d bytes pooled", g.Live(), a.Pool.Bytes())
	}
	h, err := a.Alloc(120)
	if err != nil || h.B != g.B || !h.Live() {
		t.Errorf("Alloc of the same class made %+v (%v), want the pooled buffer %d", h, err, g.B)
	}
	n, err := a.New(120)
	if err != nil || n.B == g.B {
		t.Errorf("New gave the pooled buffer: %+v %v", n, err)
	}
	if st.Allocs != 2 || st.PoolHits != 1 {
		t.Errorf("stats %+v, want 2 allocs and 1 pool hit", st)
	}
	if _, err := a.Alloc(2 << 20); err == nil {
		t.Error("a buffer over MaxSize was made")
	}
	d.fail = true
	if _, err := a.Alloc(4 << 10); err == nil {
		t.Error("Create's failure was not returned")
	}
	d.fail = false
	// Over the pool's limit, a freed buffer is destroyed.
	big, _ := a.Alloc(1 << 10)
	a.Free(h)
	a.Free(big)
	if _, ok := d.exist[big.B]; ok || a.Pool.Bytes() != 128 {
		t.Errorf("a buffer over the pool limit was kept (%d bytes pooled)", a.Pool.Bytes())
	}
	a.Discard(n)
	if _, ok := d.exist[n.B]; ok || n.Live() {
		t.Error("Discard kept the buffer")
	}
	// Drain empties the pool (between sessions): the next buffer is new.
	a.Drain()
	if len(d.exist) != 0 {
		t.Errorf("%d buffers left after the drain", len(d.exist))
	}
	if g2, _ := a.Alloc(100); g2.B == g.B {
		t.Error("a drained buffer was reused")
	}
}

func TestAllocatorClose(t *testing.T) {
	for _, track := range []bool{false, true} {
		var d device
		a := d.allocator(1<<10, track, nil)
		held, _ := a.Alloc(16)
		freed, _ := a.Alloc(16)
		a.Free(freed)
		a.Close()
		want := 1 // the pooled buffer
		if track {
			want = 0 // and the one still held
		}
		if len(d.exist) != want {
			t.Errorf("track %v: %d buffers left after Close, want %d", track, len(d.exist), want)
		}
		a.Free(held) // destroyed now without tracking; no double destroy with it
		if len(d.exist) != 0 {
			t.Errorf("track %v: a buffer freed after Close was kept", track)
		}
		if _, err := a.Alloc(16); err == nil {
			t.Errorf("track %v: Alloc after Close succeeded", track)
		}
	}
}

// Stats.BufferBytes follows the bytes of the buffers that exist through
// every way one is made or destroyed, and PeakBufferBytes their maximum.
func TestAllocatorBufferBytes(t *testing.T) {
	for _, track := range []bool{false, true} {
		var d device
		var st Stats
		a := d.allocator(256, track, &st)
		var peak int64
		check := func(step string) {
			t.Helper()
			var n int64
			for _, size := range d.exist {
				n += int64(size)
			}
			peak = max(peak, n)
			if st.BufferBytes != n || st.PeakBufferBytes != peak {
				t.Errorf("track %v, after %s: BufferBytes %d, peak %d; the device holds %d, at most %d",
					track, step, st.BufferBytes, st.PeakBufferBytes, n, peak)
			}
		}
		g, _ := a.Alloc(100)
		big, _ := a.Alloc(1000)
		n, _ := a.New(16)
		held, _ := a.Alloc(16)
		check("allocations")
		a.Free(g) // pooled
		check("a pooled free")
		a.Free(big) // over the pool's limit: destroyed
		check("a free over the limit")
		a.Discard(n)
		check("a discard")
		a.Drain()
		check("a drain")
		a.Close()
		check("close")
		a.Free(held)
		check("a free after close")
	}
}
