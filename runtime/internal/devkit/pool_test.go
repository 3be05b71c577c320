package devkit

import (
	"slices"
	"testing"
)

func TestSizeClass(t *testing.T) {
	for _, c := range []struct{ n, want uint64 }{
		{0, 16}, {1, 16}, {16, 16}, {17, 32}, {1000, 1024}, {64 << 10, 64 << 10},
		// Past 64 KiB: eighths of the power of two at or above n.
		{64<<10 + 1, 72 << 10}, {100_000, 104 << 10}, {1 << 20, 1 << 20}, {1<<20 + 1, 1<<20 + 128<<10},
	} {
		if got := SizeClass(c.n); got != c.want {
			t.Errorf("SizeClass(%d) = %d, want %d", c.n, got, c.want)
		}
	}
	// Slack is at most 1/8 past 64 KiB, and classes are monotonic.
	prev := uint64(0)
	for n := uint64(60 << 10); n < 4<<20; n += 4093 {
		c := SizeClass(n)
		if c < n || c < prev || (n > 64<<10 && c-n > n/8) {
			t.Fatalf("SizeClass(%d) = %d (previous class %d)", n, c, prev)
		}
		prev = c
	}
}

func TestPool(t *testing.T) {
	p := Pool[string]{Limit: 48}
	if _, ok := p.Take(16); ok {
		t.Error("empty pool gave a buffer")
	}
	for _, c := range []struct {
		class uint64
		b     string
		kept  bool
	}{{16, "a", true}, {16, "b", true}, {32, "c", false}, {16, "d", true}, {16, "e", false}} {
		if kept := p.Put(c.class, c.b); kept != c.kept {
			t.Errorf("Put(%d, %s) = %v, want %v", c.class, c.b, kept, c.kept)
		}
	}
	if p.Bytes() != 48 {
		t.Errorf("%d bytes kept, want 48", p.Bytes())
	}
	if b, ok := p.Take(16); !ok || b != "d" || p.Bytes() != 32 {
		t.Errorf("Take(16) = %q %v with %d bytes left; want the last kept, d, and 32", b, ok, p.Bytes())
	}
	if _, ok := p.Take(32); ok {
		t.Error("Take of a class never kept gave a buffer")
	}
	var destroyed []string
	p.Drain(func(b string) { destroyed = append(destroyed, b) })
	slices.Sort(destroyed)
	if !slices.Equal(destroyed, []string{"a", "b"}) || p.Bytes() != 0 {
		t.Errorf("Drain destroyed %v with %d bytes left; want [a b] and 0", destroyed, p.Bytes())
	}
	if _, ok := p.Take(16); ok {
		t.Error("a drained pool gave a buffer")
	}
}

// LargestFitting(l) is the largest n with SizeClass(n) <= l: n fits and
// n+1 does not, for limits around every boundary kind (powers of two,
// eighths, WebGPU's defaults, odd values).
func TestLargestFitting(t *testing.T) {
	limits := []uint64{16, 17, 100, 64 << 10, 64<<10 + 1, 65537, 128 << 20, 256 << 20, 2147483647, 134217728 - 1, 1 << 40, 3_000_000_007}
	for l := uint64(16); l < 1<<20; l = l*5/4 + 3 {
		limits = append(limits, l)
	}
	for _, l := range limits {
		n := LargestFitting(l)
		if SizeClass(n) > l || SizeClass(n+1) <= l {
			t.Errorf("LargestFitting(%d) = %d: class %d, class of %d is %d", l, n, SizeClass(n), n+1, SizeClass(n+1))
		}
	}
	if LargestFitting(15) != 0 {
		t.Errorf("LargestFitting(15) = %d, want 0", LargestFitting(15))
	}
}
