package target

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/tapml/tapml/codegen/fault"
	codegenllvm "github.com/tapml/tapml/codegen/llvm"
	"github.com/tapml/tapml/codegen/wgsl"
	"github.com/tapml/tapml/ir"
	"github.com/tapml/tapml/runtime"
)

// Injection is a test-only fault planted in the target's kernels: in every
// node of op Op, or in node Node alone. Faults exist so that the tests of
// the carving and migration tools can plant a known culprit; codegen/fault
// is the table of the faults and of the targets that take them.
type Injection struct {
	Op    ir.Op // an op (ir.OpMatmul); or
	Node  int   // a node id (> 0)
	Fault string
}

func (in Injection) String() string {
	if in.Node > 0 {
		return fmt.Sprintf("node=%d,fault=%s", in.Node, in.Fault)
	}
	return fmt.Sprintf("op=%s,fault=%s", in.Op, in.Fault)
}

// ParseInjection parses "op=KIND,fault=NAME" or "node=ID,fault=NAME".
func ParseInjection(s string) (Injection, error) {
	var in Injection
	bad := func(why string) (Injection, error) {
		return Injection{}, fmt.Errorf("--inject %q: %s (want op=KIND,fault=NAME or node=ID,fault=NAME; faults: %s)",
			s, why, strings.Join(fault.Names(), ", "))
	}
	for _, part := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok || v == "" {
			return bad(fmt.Sprintf("%q is not key=value", part))
		}
		switch strings.TrimSpace(k) {
		case "op":
			if in.Op != ir.OpNone {
				return bad("op given twice")
			}
			op, ok := ir.OpNamed(v)
			if !ok {
				return bad(fmt.Sprintf("unknown op %q", v))
			}
			in.Op = op
		case "node":
			if in.Node != 0 {
				return bad("node given twice")
			}
			id, err := strconv.Atoi(v)
			if err != nil || id <= 0 {
				return bad(fmt.Sprintf("node %q is not a positive node id", v))
			}
			in.Node = id
		case "fault":
			if in.Fault != "" {
				return bad("fault given twice")
			}
			in.Fault = v
		default:
			return bad(fmt.Sprintf("unknown key %q", k))
		}
	}
	if (in.Op == ir.OpNone) == (in.Node == 0) {
		return bad("give exactly one of op= and node=")
	}
	if in.Fault == "" {
		return bad("no fault=")
	}
	if !slices.Contains(fault.Names(), in.Fault) {
		return bad(fmt.Sprintf("unknown fault %q", in.Fault))
	}
	return in, nil
}

// FaultInjector is a device that takes test-only faults per node id
// (*webgpu.Device, *vulkan.Device, *llvm.Device).
type FaultInjector interface {
	SetFault(id int, fault string)
}

// InjectableTarget reports whether the target named target takes injected
// faults (codegen/fault.Targets), with the reason when it does not.
func InjectableTarget(target string) error {
	if _, ok := fault.GeneratorOf(target); ok {
		return nil
	}
	ts := fault.InjectableTargets()
	return fmt.Errorf("fault injection is supported only on the %s and %s targets (codegen/fault's test-only faults), not on %s",
		strings.Join(ts[:len(ts)-1], ", "), ts[len(ts)-1], target)
}

// Injectable reports whether the device of target takes injected faults,
// with the reason when it does not.
func Injectable(target string, dev runtime.Device) error {
	if err := InjectableTarget(target); err != nil {
		return err
	}
	if _, ok := dev.(FaultInjector); !ok {
		return fmt.Errorf("the device of target %s takes no injected faults", target)
	}
	return nil
}

// FaultApplies reports (as an error saying why not) whether fault changes
// the kernel the target generates for node n with the given concrete input
// and output types: a fault applies only to some ops and kernel variants.
func FaultApplies(target string, dev runtime.Device, n *ir.Node, in, out []ir.Type, name string) error {
	if err := Injectable(target, dev); err != nil {
		return err
	}
	gen, _ := fault.GeneratorOf(target)
	if err := fault.Check(gen, name); err != nil {
		return fmt.Errorf("target %s: %w", target, err)
	}
	if gen == fault.LLVM {
		_, err := codegenllvm.Generate(n, in, out, codegenllvm.Options{Fault: name})
		return err
	}
	opts := wgsl.Options{Fault: name}
	if l, ok := dev.(interface{ Limits() wgsl.Limits }); ok {
		opts.Limits = l.Limits()
	}
	if tu, ok := dev.(interface{ Tuning() wgsl.Tuning }); ok {
		opts.Tuning = tu.Tuning() // the variant the device generates (webgpu on a GPU)
	}
	if f, ok := dev.(interface{ Features() wgsl.Features }); ok {
		opts.Features = f.Features() // the dialect extensions the device's kernels may use (vulkan)
	}
	_, err := wgsl.Generate(n, in, out, opts)
	return err
}
