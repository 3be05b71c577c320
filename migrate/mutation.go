package migrate

import (
	"fmt"
	"io"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/tapml/tapml/carve"
	"github.com/tapml/tapml/codegen/fault"
	"github.com/tapml/tapml/ir"
	"github.com/tapml/tapml/runtime/target"
)

// Mutation testing of the tools themselves: plant one test-only fault in
// one node's kernel (a mutant), then ask whether the carved tests detect it
// and whether bisection names that node.

// Mutant is one fault planted in one node.
type Mutant struct {
	Node  int
	Op    string
	Prov  string
	Func  string
	Fault string
}

func (m Mutant) String() string {
	return fmt.Sprintf("#%d %s %s (%s, @%s)", m.Node, m.Op, m.Fault, m.Prov, m.Func)
}

// Mutants lists one mutant per (op, fault, function) whose fault applies
// to some candidate node, in op order, each on a different node: the k-th
// triple takes the node k·step further along its candidates (a spread over
// the layers). faults nil means every fault but f16_overflow, which only
// bites where values pass 65504 (a small model's never do: its mutants
// would be equivalent).
func (d *Driver) Mutants(faults []string) []Mutant {
	if faults == nil {
		for _, f := range fault.Names() { // those the target does not take apply nowhere
			if f != fault.F16Overflow {
				faults = append(faults, f)
			}
		}
	}
	type key struct{ op, fault, fn string }
	nodes := map[key][]*ir.Node{}
	var keys []key
	for _, n := range d.order {
		for _, f := range faults {
			if d.applies(n, f) != nil {
				continue
			}
			k := key{n.Op.String(), f, d.Func(n.ID)}
			if nodes[k] == nil {
				keys = append(keys, k)
			}
			nodes[k] = append(nodes[k], n)
		}
	}
	sort.SliceStable(keys, func(i, j int) bool {
		a, b := keys[i], keys[j]
		if a.op != b.op {
			return a.op < b.op
		}
		if a.fault != b.fault {
			return a.fault < b.fault
		}
		return a.fn > b.fn // prefill before decode
	})
	var out []Mutant
	used := map[int]bool{}
	for i, k := range keys {
		ns := nodes[k]
		// Spread: start at a different place for each triple, skip nodes
		// already used by another mutant.
		for j := 0; j < len(ns); j++ {
			n := ns[(i*3+j)%len(ns)]
			if used[n.ID] {
				continue
			}
			used[n.ID] = true
			out = append(out, Mutant{Node: n.ID, Op: n.Op.String(), Prov: n.Prov, Func: d.Func(n.ID), Fault: k.fault})
			break
		}
	}
	return out
}

// Suite is a carved test bundle with every call of every node kept (no
// deduplication across nodes, so each node has its own cases) and the
// results of replaying it on the clean target.
type Suite struct {
	Bundle   *carve.Bundle
	byNode   map[int][]*carve.Case
	baseline map[string]carve.Result
	// BaselineFailures are cases that fail on the target with no fault
	// planted (they make detection meaningless for their nodes).
	BaselineFailures []string
}

// CarveSuite carves the model's generation into a bundle at dir with every
// op call kept, checks that its node ids are the driver's, and replays it
// on the clean target.
func (d *Driver) CarveSuite(dir string) (*Suite, error) {
	if len(d.faults) > 0 {
		return nil, fmt.Errorf("carving the suite needs a clean target: %d faults are planted", len(d.faults))
	}
	rec, err := carve.Carve(d.Model, d.Tok, carve.Options{Prompt: d.Opts.Prompt, Steps: d.Opts.Steps, Keep: math.MaxInt32, Pipeline: d.Opts.Pipeline})
	if err != nil {
		return nil, err
	}
	for _, c := range rec.Cases {
		if n := d.byID[c.Node]; n == nil || n.Op.String() != c.Op || n.Prov != c.Prov {
			return nil, fmt.Errorf("case %s: node %d (%s %s) is not the same node in the migrated module; the pipeline is not deterministic", c.ID, c.Node, c.Op, c.Prov)
		}
	}
	if _, err := rec.Write(dir); err != nil {
		return nil, err
	}
	b, err := carve.Open(dir)
	if err != nil {
		return nil, err
	}
	s := &Suite{Bundle: b, byNode: map[int][]*carve.Case{}, baseline: map[string]carve.Result{}}
	for _, c := range b.Manifest.Cases {
		s.byNode[c.Node] = append(s.byNode[c.Node], c)
		r := b.Replay(d.Target, c, c.Tolerance)
		s.baseline[c.ID] = r
		if !r.Passed() {
			s.BaselineFailures = append(s.BaselineFailures, c.ID)
		}
	}
	return s, nil
}

// Close closes the bundle.
func (s *Suite) Close() error { return s.Bundle.Close() }

// Cases returns the cases of node id.
func (s *Suite) Cases(id int) []*carve.Case { return s.byNode[id] }

// Detection is what replaying the suite on a faulted target found.
type Detection struct {
	Cases    int // cases of the mutated node
	Failed   int // of them, failing
	Changed  int // of them, with outputs that differ from the clean replay
	Detected bool
	// Equivalent: no case's output changed (the fault has no effect on
	// this run's values).
	Equivalent bool
}

// Detect replays the suite on the target with fault planted in node m.Node.
// Only that node's cases are replayed: every other case runs a one-op
// module of another node id, whose kernel the fault does not touch, so
// their results are the clean baseline's.
func (d *Driver) Detect(s *Suite, m Mutant) (Detection, error) {
	inj, ok := d.Target.(target.FaultInjector)
	if !ok {
		return Detection{}, target.Injectable(d.Opts.Target, d.Target)
	}
	inj.SetFault(m.Node, m.Fault)
	defer inj.SetFault(m.Node, "")
	var det Detection
	for _, c := range s.byNode[m.Node] {
		det.Cases++
		r := s.Bundle.Replay(d.Target, c, c.Tolerance)
		base := s.baseline[c.ID]
		if !r.Passed() {
			det.Failed++
		}
		if r.Err != "" || r.Metrics.MaxAbs != base.Metrics.MaxAbs || r.Metrics.Ratio != base.Metrics.Ratio {
			det.Changed++
		}
	}
	det.Detected = det.Failed > 0
	det.Equivalent = det.Changed == 0
	return det, nil
}

// MutantResult is the outcome of one mutant.
type MutantResult struct {
	Mutant
	Detection
	Localised bool  // bisection named exactly the mutated node
	Named     []int // the culprit set bisection named
	Verdict   string
	Runs      int // mixed runs to localise: the all-target run and the search
	Diverged  bool
	Err       string
}

// Score is the outcome of a mutation run.
type Score struct {
	Model     string
	Nodes     int
	Results   []MutantResult
	Detected  int
	Localised int
	// Equivalent mutants change no output of their node's cases and make
	// no run diverge: the fault has no effect on this device and run (a
	// dropped barrier where invocations run in lockstep). Mutation scores
	// leave them out.
	Equivalent int
	Duration   time.Duration
}

// Effective is the number of mutants that are not equivalent.
func (s *Score) Effective() int { return s.Total() - s.Equivalent }

// Total is the number of mutants.
func (s *Score) Total() int { return len(s.Results) }

// MeanRuns is the mean number of runs bisection needed over the mutants
// that diverged.
func (s *Score) MeanRuns() float64 {
	if len(s.Results) == 0 {
		return 0
	}
	t, n := 0, 0
	for _, r := range s.Results {
		if r.Diverged {
			t += r.Runs
			n++
		}
	}
	if n == 0 {
		return 0
	}
	return float64(t) / float64(n)
}

// MaxRuns is the largest number of runs bisection needed.
func (s *Score) MaxRuns() int {
	m := 0
	for _, r := range s.Results {
		m = max(m, r.Runs)
	}
	return m
}

// MutationScore runs every mutant: detection by the suite's cases, then
// the bisect strategy with the fault planted in the mutant's node.
func (d *Driver) MutationScore(s *Suite, mutants []Mutant) (*Score, error) {
	start := time.Now()
	sc := &Score{Model: d.Model.Name, Nodes: len(d.order)}
	for _, m := range mutants {
		res := MutantResult{Mutant: m}
		det, err := d.Detect(s, m)
		if err != nil {
			return nil, err
		}
		res.Detection = det
		if _, err := d.Inject([]target.Injection{{Node: m.Node, Fault: m.Fault}}); err != nil {
			return nil, err
		}
		rep, err := d.RunBisect()
		d.ClearFaults()
		if err != nil {
			res.Err = err.Error()
		} else {
			res.Diverged = rep.Final.Divergent
			res.Runs = 1
			if loc := rep.Localisation; loc != nil {
				res.Runs += loc.Runs
				res.Named = ids(loc.Set)
				res.Localised = loc.Single && len(loc.Set) == 1 && loc.Set[0].ID == m.Node
			}
			if c := rep.Culprit(); c != nil {
				res.Verdict = c.Verdict
			}
		}
		res.Equivalent = res.Equivalent && !res.Diverged && res.Err == ""
		if res.Equivalent {
			sc.Equivalent++
		}
		if res.Detected {
			sc.Detected++
		}
		if res.Localised {
			sc.Localised++
		}
		sc.Results = append(sc.Results, res)
	}
	sc.Duration = time.Since(start)
	return sc, nil
}

// WriteText writes the mutation table and the score.
func (s *Score) WriteText(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "%-5s %-18s %-16s %-8s %-36s %-9s %-10s %-10s %4s  %s\n", "node", "op", "fault", "func", "provenance", "cases", "detected", "localised", "runs", "bisect named")
	for _, r := range s.Results {
		det := "no"
		switch {
		case r.Detected:
			det = "yes"
		case r.Equivalent:
			det = "equiv."
		}
		loc := "no"
		if r.Localised {
			loc = "yes"
		}
		named := fmt.Sprint(r.Named)
		if r.Err != "" {
			named = "error: " + firstLine(r.Err)
		} else if !r.Diverged {
			named = "(no divergence)"
		} else if r.Verdict != "" {
			named += " " + r.Verdict
		}
		fmt.Fprintf(&b, "%-5d %-18s %-16s %-8s %-36s %4d/%-4d %-10s %-10s %4d  %s\n", r.Node, r.Op, r.Fault, r.Func, trunc(r.Prov, 36),
			r.Failed, r.Cases, det, loc, r.Runs, named)
	}
	ops := map[string]bool{}
	nodes := map[int]bool{}
	for _, r := range s.Results {
		ops[r.Op] = true
		nodes[r.Node] = true
	}
	fmt.Fprintf(&b, "\n%s: %d mutants over %d ops and %d nodes (of %d candidates)\n", s.Model, s.Total(), len(ops), len(nodes), s.Nodes)
	if s.Equivalent > 0 {
		fmt.Fprintf(&b, "equivalent (no output changed, no divergence; left out below): %d\n", s.Equivalent)
	}
	fmt.Fprintf(&b, "detected by the carved tests: %d/%d\n", s.Detected, s.Effective())
	fmt.Fprintf(&b, "localised by bisect:          %d/%d\n", s.Localised, s.Effective())
	fmt.Fprintf(&b, "bisect model runs (diverging mutants): mean %.1f, max %d, for %d nodes (log2 = %.1f) in %s\n",
		s.MeanRuns(), s.MaxRuns(), s.Nodes, math.Log2(float64(max(s.Nodes, 1))), s.Duration.Round(time.Millisecond))
	_, err := io.WriteString(w, b.String())
	return err
}
