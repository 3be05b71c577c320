package ir

import "testing"

// Every Op constant is registered, names round-trip through OpNamed, and
// the constants are in name order (so that ordering Ops orders names).
func TestOpsInNameOrder(t *testing.T) {
	for op := OpNone + 1; op < numOps; op++ {
		if LookupOp(op) == nil {
			t.Errorf("op %s has a constant but no registry row", op)
		}
		if got, ok := OpNamed(op.String()); !ok || got != op {
			t.Errorf("OpNamed(%q) = %v, %v", op.String(), got, ok)
		}
		if op > OpNone+1 && opNames[op-1] >= opNames[op] {
			t.Errorf("op %s is declared after %s: keep the constants in name order", op, op-1)
		}
	}
	for _, name := range []string{"", "<none>", "Matmul", "frobnicate"} {
		if op, ok := OpNamed(name); ok || op != OpNone {
			t.Errorf("OpNamed(%q) = %v, %v; want no op", name, op, ok)
		}
	}
	if s := OpNone.String(); s != "<none>" {
		t.Errorf("OpNone prints as %q", s)
	}
	if s := Op(255).String(); s != "Op(255)" {
		t.Errorf("an out-of-range op prints as %q", s)
	}
	if LookupOp(OpNone) != nil || LookupOp(numOps) != nil {
		t.Error("LookupOp of no op is not nil")
	}
}
