package devkit

import (
	"errors"

	"github.com/tapml/tapml/ir"
	"github.com/tapml/tapml/runtime"
)

// PlanKey identifies the kernel of a node on concrete input types with an
// injected fault: what devices cache a node's kernel (and pipeline) by.
type PlanKey struct {
	Node  *ir.Node
	Sig   string // TypeSig of the input types
	Fault string
}

// KeyOf returns the PlanKey of node n on input types in with fault.
func KeyOf(n *ir.Node, in []ir.Type, fault string) PlanKey {
	return PlanKey{Node: n, Sig: TypeSig(in), Fault: fault}
}

// Faults maps node ids to the fault injected into their kernels (the
// fault names of the device's kernel generator), for tests of the carving
// and migration tools.
type Faults map[int]string

// CopyFaults returns Faults holding a copy of m.
func CopyFaults(m map[int]string) Faults {
	f := Faults{}
	for id, fault := range m {
		f[id] = fault
	}
	return f
}

// Set injects fault into node id's kernel ("" removes it).
func (f Faults) Set(id int, fault string) {
	if fault == "" {
		delete(f, id)
	} else {
		f[id] = fault
	}
}

// Prepare compiles ahead, with compile, the kernel of each node whose
// declared types are all static (StaticInputs), so that a bad kernel is
// reported before the run; views (isView) are passed over, and nodes with
// symbolic shapes compile at their first launch. A failure names its node
// (NodeError).
func Prepare(dev string, nodes []*ir.Node, isView func(*ir.Node) bool, compile func(n *ir.Node, in []ir.Type) error) error {
	for _, n := range nodes {
		if isView(n) {
			continue
		}
		in, static := StaticInputs(n)
		if !static {
			continue
		}
		if err := compile(n, in); err != nil {
			return NodeError(dev, n, err)
		}
	}
	return nil
}

// NodeError returns err, a failure of node n on device dev, as a
// runtime.KernelError naming n, unless it already names a node (a batched
// dispatch of another node failed), means that the device is lost, or n is
// nil (nil stays nil).
func NodeError(dev string, n *ir.Node, err error) error {
	if err == nil || n == nil { // before ke, which escapes: no allocation on success
		return err
	}
	var ke *runtime.KernelError
	if errors.As(err, &ke) || errors.Is(err, runtime.ErrDeviceLost) {
		return err
	}
	return &runtime.KernelError{Device: dev, Node: n, Err: err}
}
