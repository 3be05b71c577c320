package target

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/tapml/tapml/codegen/wgsl"
	"github.com/tapml/tapml/ir"
	"github.com/tapml/tapml/runtime"
)

// Injection is a test-only fault planted in the target's kernels: in every
// node of op Op, or in node Node alone. Faults exist so that the tests of
// the carving and migration tools can plant a known culprit; the webgpu,
// vulkan and remote: targets have them (codegen/wgsl's faults: wrong_index,
// wrong_constant, missing_barrier, f16_overflow; vulkan's kernels are those
// WGSL kernels translated to SPIR-V, faults included).
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
			s, why, strings.Join(wgsl.FaultNames(), ", "))
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
	known := false
	for _, f := range wgsl.FaultNames() {
		known = known || f == in.Fault
	}
	if !known {
		return bad(fmt.Sprintf("unknown fault %q", in.Fault))
	}
	return in, nil
}

// FaultInjector is a device that takes test-only faults per node id
// (*webgpu.Device, *vulkan.Device).
type FaultInjector interface {
	SetFault(id int, fault string)
}

// InjectableTarget reports whether the target named target takes injected
// faults, with the reason when it does not.
func InjectableTarget(target string) error {
	if target == "webgpu" || target == "vulkan" || IsRemote(target) {
		return nil
	}
	return fmt.Errorf("fault injection is supported only on the webgpu and vulkan targets and remote:ws:// targets (codegen/wgsl's test-only faults), not on %s", target)
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
func FaultApplies(target string, dev runtime.Device, n *ir.Node, in, out []ir.Type, fault string) error {
	if err := Injectable(target, dev); err != nil {
		return err
	}
	opts := wgsl.Options{Fault: fault}
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
