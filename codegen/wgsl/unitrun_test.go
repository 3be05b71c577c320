package wgsl

import (
	"strings"
	"testing"

	"github.com/tapml/tapml/ir"
)

// TestUnitRunLoadsWordsOnce checks that a run of units loads each 32-bit
// word it reads once: Q4_0's and Q8_0's 16 quant bytes of a four-unit run
// start 2 bytes off a word in every other block, so they span 5 words,
// which a unit at a time read as 8 (two per unaligned read); the scale is
// one load more. What the words decode to is checked on a device against
// the CPU reference (TestDeviceTiledStored and TestDeviceMMA in
// codegen/spirv).
func TestUnitRunLoadsWordsOnce(t *testing.T) {
	for _, c := range []struct {
		dt    ir.DType
		units int
		loads int
	}{{ir.Q8_0, 4, 6}, {ir.Q4_0, 4, 6}, {ir.Q5_0, 4, 7}, {ir.Q8_0, 8, 10}} {
		g := &gen{}
		g.unitRun(stored{name: "w", dt: c.dt, last: 1 << 20}, "e", c.units, "")
		if got := strings.Count(g.src.String(), "w["); got != c.loads {
			t.Errorf("%s, a run of %d units: %d loads, want %d:\n%s", c.dt, c.units, got, c.loads, g.src.String())
		}
	}
}
