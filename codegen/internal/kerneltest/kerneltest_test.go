package kerneltest

import (
	"testing"

	"github.com/tapml/tapml/ir"
)

// TestEveryOpHasCase checks that the cases cover every op of the registry,
// and that every case is a valid node.
func TestEveryOpHasCase(t *testing.T) {
	covered := map[ir.Op]bool{}
	names := map[string]bool{}
	for _, c := range Cases() {
		covered[c.Op] = true
		if names[c.Name] {
			t.Errorf("two cases named %s", c.Name)
		}
		names[c.Name] = true
		c.Node(t)
	}
	for _, d := range ir.Ops() {
		if !covered[d.Op] {
			t.Errorf("op %s has no generator case", d.Name)
		}
	}
}
