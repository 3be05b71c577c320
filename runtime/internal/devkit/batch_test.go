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

// TestBatchDefaults: options left at zero take the GPU defaults or, on a
// CPU driver, DefaultMaxBatch and no ramp; set options stay.
func TestBatchDefaults(t *testing.T) {
	d := BatchDefaults{MaxBatch: 128, Ramp: 16}
	for _, c := range []struct {
		n, ramp        int
		cpu            bool
		wantN, wantRmp int
	}{
		{0, 0, false, 128, 16},
		{-1, -1, false, 128, -1},
		{32, 4, false, 32, 4},
		{0, 0, true, DefaultMaxBatch, 0},
		{200, 8, true, 200, 8},
	} {
		if n, r := d.MaxBatchOr(c.n, c.cpu), d.RampOr(c.ramp, c.cpu); n != c.wantN || r != c.wantRmp {
			t.Errorf("(%d, %d, cpu %v): got %d, %d; want %d, %d", c.n, c.ramp, c.cpu, n, r, c.wantN, c.wantRmp)
		}
	}
}
