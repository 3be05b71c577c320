package target

import (
	"slices"
	"testing"

	"github.com/tapml/tapml/codegen/spirv"
	"github.com/tapml/tapml/ir"
)

// Every registered op has a kernel on every target `tapmlc ops` lists.
func TestEveryOpOnEveryTarget(t *testing.T) {
	for _, d := range ir.Ops() {
		for _, name := range Names {
			if name == "vulkan" && slices.Contains(spirv.PendingTranslation, d.Op) {
				continue // their SPIR-V comes from their WGSL (see spirv.PendingTranslation)
			}
			if !Supports(name, d.Op) {
				t.Errorf("op %s has no kernel on target %s", d.Name, name)
			}
		}
	}
}

func TestUnknownTarget(t *testing.T) {
	if _, err := Open("nope", ""); err == nil {
		t.Error("opening an unknown target succeeded")
	}
	if Supports("nope", ir.OpAdd) {
		t.Error("an unknown target claims a kernel")
	}
}
