package migrate

import (
	"testing"

	"github.com/tapml/tapml/ir"
	"github.com/tapml/tapml/runtime/llvm"
	"github.com/tapml/tapml/runtime/target"
)

// The llvm target takes injected faults too (codegen/fault's table): a
// fault planted in one node through `--inject node=ID,...` is localised to
// that node by bisection, as a kernel bug.
func TestStoriesLLVMInjectNode(t *testing.T) {
	m := loadStories(t)
	dev, err := llvm.Open(llvm.Options{})
	if err != nil {
		t.Fatalf("no llvm device (scripts/setup.sh installs clang-14): %v", err)
	}
	d, err := New(m.Module, m.Tokenizer, dev, Options{Prompt: storiesPrompt, Steps: 8, Target: "llvm"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Close)
	var rope *ir.Node
	for _, n := range d.Nodes() {
		if n.Op == ir.OpRope {
			rope = n
		}
	}
	if _, err := d.Inject([]target.Injection{{Node: rope.ID, Fault: "missing_barrier"}}); err == nil {
		t.Error("missing_barrier on llvm: no error (LLVM kernels have no barriers)")
	}
	if _, err := d.Inject([]target.Injection{{Node: rope.ID, Fault: "wrong_constant"}}); err != nil {
		t.Fatal(err)
	}
	rep, err := d.Run(Bisect)
	if err != nil {
		t.Fatal(err)
	}
	if c := rep.Culprit(); c == nil || !rep.Localisation.Single || c.Node != rope.ID || c.Verdict != VerdictKernelBug || c.Fault != "wrong_constant" {
		t.Fatalf("culprit %+v, want node %d, a kernel bug", c, rope.ID)
	}
}
