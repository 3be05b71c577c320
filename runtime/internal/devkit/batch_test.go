package devkit

import (
	"slices"
	"testing"
)

// submissions records the dispatch counts at which a Batch submits.
func submissions(b *Batch, dispatches int) []int {
	var at []int
	for i := 1; i <= dispatches; i++ {
		if b.Add() {
			at = append(at, b.Pending())
			b.Submitted()
		}
	}
	return at
}

func TestBatch(t *testing.T) {
	for _, c := range []struct {
		max, ramp, n int
		want         []int
	}{
		{64, 0, 130, []int{64, 64}},
		{64, 8, 130, []int{8, 16, 32, 64}},
		{4, 8, 9, []int{4, 4}}, // a ramp above max is max
		{0, 0, 2, []int{1, 1}}, // at least one
	} {
		b := NewBatch(c.max, c.ramp)
		if got := submissions(&b, c.n); !slices.Equal(got, c.want) {
			t.Errorf("max %d ramp %d: submitted at %v, want %v", c.max, c.ramp, got, c.want)
		}
	}
	// After a wait the ramp starts again; Set keeps what is recorded.
	b := NewBatch(64, 8)
	submissions(&b, 24) // 8 + 16: the next would be 32
	b.Waited()
	if got := submissions(&b, 8); !slices.Equal(got, []int{8}) {
		t.Errorf("after a wait: submitted at %v, want [8]", got)
	}
	b.Add()
	b.Set(2, 0)
	if b.Pending() != 1 || !b.Add() {
		t.Errorf("Set lost the recorded dispatch or ignored the new max (pending %d)", b.Pending())
	}
	b.Dropped()
	if b.Pending() != 0 {
		t.Error("Dropped kept the count")
	}
}
