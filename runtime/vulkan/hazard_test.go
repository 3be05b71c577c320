package vulkan

import "testing"

// TestHazards checks when a command must wait for the commands recorded
// since the last barrier: it reads what they wrote, writes what they
// wrote or read; reads after reads and disjoint ranges need nothing.
func TestHazards(t *testing.T) {
	x := access{0, 0, 256}
	xTail := access{0, 128, 384} // overlaps x
	y := access{0, 256, 512}     // adjacent to x: disjoint
	z := access{1, 0, 256}       // same offsets, another block
	type cmd struct{ reads, writes []access }
	for _, c := range []struct {
		name   string
		before []cmd
		next   cmd
		want   bool
	}{
		{"nothing recorded", nil, cmd{[]access{x}, []access{y}}, false},
		{"read after write", []cmd{{nil, []access{x}}}, cmd{[]access{x}, []access{y}}, true},
		{"read after overlapping write", []cmd{{nil, []access{x}}}, cmd{[]access{xTail}, nil}, true},
		{"write after write", []cmd{{nil, []access{x}}}, cmd{nil, []access{x}}, true},
		{"write after read", []cmd{{[]access{x}, []access{y}}}, cmd{nil, []access{x}}, true},
		{"read after read", []cmd{{[]access{x}, []access{y}}}, cmd{[]access{x}, []access{z}}, false},
		{"adjacent ranges", []cmd{{nil, []access{x}}}, cmd{[]access{y}, []access{y}}, false},
		{"another block", []cmd{{nil, []access{x}}}, cmd{[]access{z}, []access{z}}, false},
		{"in place after read", []cmd{{[]access{y}, []access{z}}}, cmd{[]access{x}, []access{x}}, false},
	} {
		var h hazards
		for _, b := range c.before {
			h.note(b.reads, b.writes)
		}
		if got := h.conflicts(c.next.reads, c.next.writes); got != c.want {
			t.Errorf("%s: conflicts = %v, want %v", c.name, got, c.want)
		}
		h.clear()
		if h.conflicts(c.next.reads, c.next.writes) {
			t.Errorf("%s: a conflict after clear", c.name)
		}
	}
}
