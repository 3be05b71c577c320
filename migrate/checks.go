package migrate

import (
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/tapml/tapml/carve"
	"github.com/tapml/tapml/ir"
	"github.com/tapml/tapml/passes"
	"github.com/tapml/tapml/runtime"
)

// TimeOps measures the target's kernels in the placement onTarget, warm:
// the workload runs once on an executor (kernels built, weights uploaded),
// then again with a wait for the target after each node placed there. A
// node's time runs from the end of the previous node's hook to the end of
// its wait: the launch, moving its inputs to the target at a boundary,
// and the kernel. It returns the times per op, ranked (carve.OpTimes).
func (d *Driver) TimeOps(onTarget []int) ([]carve.OpTime, error) {
	m, err := d.partitioned(onTarget)
	if err != nil {
		return nil, err
	}
	exec, err := d.executor(m)
	if err != nil {
		return nil, err
	}
	defer exec.Close()
	if _, err := d.runOn(exec, d.ref); err != nil {
		return nil, fmt.Errorf("warming up: %w", err)
	}
	var items []carve.Timed
	last := time.Now()
	exec.OnNode = func(n *ir.Node, _, _ []*runtime.Buffer) error {
		if n.Place == passes.Target {
			if err := d.Target.Sync(); err != nil {
				return err
			}
			items = append(items, carve.Timed{Op: n.Op.String(), Name: fmt.Sprintf("#%d %s", n.ID, n.Prov), Time: time.Since(last)})
		}
		last = time.Now()
		return nil
	}
	if _, err := d.runOn(exec, d.ref); err != nil {
		return nil, err
	}
	return carve.OpTimes(items), nil
}

// FaultCheck says whether the planted faults changed anything: a fault
// can be planted and never fire (f16_overflow on values that stay in
// range, missing_barrier in a kernel whose lanes do not race on this
// device).
type FaultCheck struct {
	Fired   bool    `json:"fired"`
	Ran     int     `json:"faulted_nodes_run"` // faulted nodes that ran (on the target)
	Changed []int   `json:"changed_nodes"`     // faulted nodes whose outputs changed
	MaxDiff float64 `json:"max_diff"`          // largest change of an output element
}

// FaultsFired runs the placement onTarget with the planted faults and
// without them, recording the faulted nodes, and compares their outputs
// call by call, bit for bit. The faults are planted again afterwards.
func (d *Driver) FaultsFired(onTarget []int) (*FaultCheck, error) {
	faults := map[int]string{}
	want := map[int]int{}
	for id, f := range d.faults {
		if slices.Contains(onTarget, id) {
			faults[id], want[id] = f, 1
		}
	}
	fc := &FaultCheck{Ran: len(faults)}
	if len(faults) == 0 {
		return fc, nil
	}
	p1, with, err := d.capture("with the planted faults (recording them)", onTarget, want)
	if err != nil {
		return nil, err
	}
	inj := d.Target.(interface{ SetFault(int, string) })
	for id := range faults {
		inj.SetFault(id, "")
	}
	p2, without, err := d.capture("without the faults (recording the same nodes)", onTarget, want)
	for id, f := range faults {
		inj.SetFault(id, f)
	}
	if err != nil {
		return nil, err
	}
	d.lastCheck = append(d.lastCheck, p1, p2)
	changed := map[int]bool{}
	for key, a := range with {
		b, ok := without[key]
		if !ok || len(a.out) != len(b.out) {
			changed[key[0]] = true
			fc.MaxDiff = math.Inf(1)
			continue
		}
		for j := range a.out {
			if m := carve.MaxDiff(a.out[j], b.out[j]); m > 0 {
				changed[key[0]] = true
				fc.MaxDiff = math.Max(fc.MaxDiff, m)
			}
		}
	}
	for id := range changed {
		fc.Changed = append(fc.Changed, id)
	}
	slices.Sort(fc.Changed)
	fc.Fired = len(fc.Changed) > 0
	return fc, nil
}
