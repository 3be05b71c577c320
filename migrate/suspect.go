package migrate

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"

	"github.com/tapml/tapml/carve"
	"github.com/tapml/tapml/ir"
	"github.com/tapml/tapml/passes"
	"github.com/tapml/tapml/runtime"
	"github.com/tapml/tapml/tensor"
)

// Error is the worst comparison of a node's outputs with the reference
// over the calls that were compared.
type Error struct {
	MaxAbs float64
	MaxRel float64
	Ratio  float64 // error over what the case's tolerance allows (> 1 fails)
	Calls  int     // calls compared
	Failed int     // calls out of tolerance (or that could not run)
	Err    string  // first failure to run, if any
}

// Pass reports whether every call was within tolerance.
func (e Error) Pass() bool { return e.Failed == 0 && e.Calls > 0 }

func (e *Error) add(m carve.Metrics, pass bool) {
	e.Calls++
	if !pass {
		e.Failed++
	}
	e.MaxAbs = nanMax(e.MaxAbs, m.MaxAbs)
	e.MaxRel = nanMax(e.MaxRel, m.MaxRel)
	e.Ratio = nanMax(e.Ratio, m.Ratio)
}

func (e *Error) fail(err error) {
	e.Calls++
	e.Failed++
	e.MaxAbs, e.MaxRel, e.Ratio = math.Inf(1), math.Inf(1), math.Inf(1)
	if e.Err == "" {
		e.Err = err.Error()
	}
}

// Verdicts of a suspect.
const (
	// VerdictKernelBug: wrong on the reference's inputs.
	VerdictKernelBug = "kernel bug"
	// VerdictIllConditioned: right on the reference's inputs, out of
	// tolerance on the mixed run's, whose error it magnifies more than
	// IllConditioned times.
	VerdictIllConditioned = "ill-conditioned"
	// VerdictPropagated: right on the reference's inputs, out of tolerance
	// on the mixed run's, which are already about as wrong: it passes on
	// an error made upstream.
	VerdictPropagated = "propagated"
	// VerdictAccumulated: within tolerance either way; the divergence
	// builds up over the set.
	VerdictAccumulated = "accumulated"
)

// IllConditioned is the condition (output over input relative error)
// above which an op that is right on the reference's inputs counts as
// ill-conditioned rather than passing an upstream error on.
const IllConditioned = 10

// classify gives a suspect's verdict from its isolated and accumulated
// errors and its condition (0: its inputs were exact).
func classify(iso, acc Error, condition float64) string {
	switch {
	case !iso.Pass():
		return VerdictKernelBug
	case acc.Failed == 0:
		return VerdictAccumulated
	case condition == 0 || condition > IllConditioned:
		// Out of tolerance on exact inputs although the isolated replay
		// passed: only a nondeterministic kernel does that; count it as
		// amplification too.
		return VerdictIllConditioned
	}
	return VerdictPropagated
}

// Suspect is a node of the culprit set with the errors that tell a buggy
// kernel from an ill-conditioned op.
type Suspect struct {
	Node     int
	Op       string
	Prov     string
	Func     string
	NodeText string
	Fault    string // the fault planted in it, when one was injected
	// Isolated: the node alone on the target, fed the reference's inputs
	// (its carved cases replayed), against the reference outputs.
	Isolated Error
	// Accumulated: the node's outputs in the diverging mixed run (inputs
	// computed partly on the target) against the reference outputs.
	Accumulated Error
	// InputRel is the largest relative error of the node's inputs in the
	// diverging mixed run (its cache input excepted for kv_write).
	InputRel float64
	// Amplification is Accumulated.MaxRel / Isolated.MaxRel: how much the
	// mixed run's inputs magnify the node's own error (≈ 1 when the node's
	// inputs are exact, as for a single culprit).
	Amplification float64
	// Condition is Accumulated.MaxRel / InputRel: how much the op magnifies
	// the error of its inputs (0 when its inputs are exact: nothing to
	// amplify).
	Condition float64
	// Verdict: VerdictKernelBug, VerdictIllConditioned, VerdictPropagated
	// or VerdictAccumulated (see classify).
	Verdict string
	Cases   []string // ids of its carved cases (in the suspects' recording)
	// Range says whether its values stayed within f16's range, and which
	// left it (the report shows it under f16 compute, or when one did).
	Range Range
}

// maxSuspects bounds the nodes of a culprit set that are analysed.
const maxSuspects = 8

// regressionCasesPerNode bounds the cases per node in a regression bundle.
const regressionCasesPerNode = 4

// analyse measures each node of the culprit set (the culprit first): it
// carves their calls from a reference run, replays them alone on the
// target (isolated error), records them in the diverging mixed run and in
// the reference placement (accumulated error, input error), classifies
// each, and, when dir is set, writes their failing cases there as a
// regression bundle.
func (d *Driver) analyse(loc *Localisation, dir string) ([]Suspect, *Regression, error) {
	set := suspectOrder(loc.Set)
	sc, err := d.carveSuspects(set)
	if err != nil {
		return nil, nil, fmt.Errorf("carving the suspects: %w", err)
	}
	defer sc.close()
	sus := d.newSuspects(set)
	failing := d.replayIsolated(sc.bundle, sus)
	if err := d.measureAccumulated(loc.Divergent, sus); err != nil {
		return nil, nil, err
	}
	for i := range sus {
		sus[i].judge()
	}
	if dir == "" {
		return sus, nil, nil
	}
	reg, err := d.writeRegression(dir, sc, set, failing)
	return sus, reg, err
}

// suspectOrder puts the culprit (the last node of the set) first, then the
// rest of the set in order, at most maxSuspects nodes; a longer set keeps
// the start of its window.
func suspectOrder(set []*ir.Node) []*ir.Node {
	last := set[len(set)-1]
	rest := set[:len(set)-1]
	if len(set) > maxSuspects {
		rest = append([]*ir.Node{set[0]}, set[1:maxSuspects-1]...)
	}
	return append([]*ir.Node{last}, rest...)
}

// suspectCarving is the suspects' calls carved from a reference run: the
// recording (with its tensors) and the bundle written from it (in a
// temporary folder).
type suspectCarving struct {
	rec    *carve.Recording
	bundle *carve.Bundle
	tmp    string
}

func (s *suspectCarving) close() {
	s.bundle.Close()
	os.RemoveAll(s.tmp)
}

// carveSuspects carves every call of the set's nodes: a reference run of
// the model compiled with probes on them alone, nothing deduplicated away.
func (d *Driver) carveSuspects(set []*ir.Node) (*suspectCarving, error) {
	probeIDs := make([]int64, len(set))
	for i, n := range set {
		probeIDs[i] = int64(n.ID)
	}
	pm, names, err := carve.Compile(d.Model, d.Opts.Pipeline, true, passes.Options{"nodes": probeIDs})
	if err != nil {
		return nil, err
	}
	if err := sameNodes(pm, set); err != nil {
		return nil, err
	}
	rec := carve.NewRecorderAt(pm, math.MaxInt32, d.Opts.Policy, true, d.Opts.Compute)
	gen, err := d.work.record(rec)
	rec.Close()
	if err != nil {
		return nil, err
	}
	if d.IsLanguageModel() {
		refGen := d.ref.Generated(d.Tok.IsEOG)
		if len(gen) > len(refGen) || !slices.Equal(gen, refGen[:len(gen)]) {
			return nil, fmt.Errorf("the probed reference generated %v, the reference %v", gen, refGen)
		}
	}
	recording := &carve.Recording{Module: pm, Cases: rec.Cases(), Stats: rec.Stats, Model: d.Model.Name, Keep: rec.Keep, Generated: gen, Pipeline: names}
	d.work.describe(recording)
	tmp, err := os.MkdirTemp("", "tapml-migrate-*")
	if err != nil {
		return nil, err
	}
	bdir := filepath.Join(tmp, "suspects")
	if _, err := recording.Write(bdir); err != nil {
		os.RemoveAll(tmp)
		return nil, err
	}
	b, err := carve.Open(bdir)
	if err != nil {
		os.RemoveAll(tmp)
		return nil, err
	}
	return &suspectCarving{rec: recording, bundle: b, tmp: tmp}, nil
}

// sameNodes checks that compiling with probes kept the set's nodes as they
// were (same id, op and provenance).
func sameNodes(pm *ir.Module, set []*ir.Node) error {
	byID := map[int]*ir.Node{}
	for _, f := range pm.Funcs {
		for _, x := range f.Nodes {
			byID[x.ID] = x
		}
	}
	for _, n := range set {
		if found := byID[n.ID]; found == nil || found.Op != n.Op || found.Prov != n.Prov {
			return fmt.Errorf("node %d (%s %s) is not the same node when compiled with probes; the pipeline is not deterministic", n.ID, n.Op, n.Prov)
		}
	}
	return nil
}

// newSuspects describes the set's nodes, before any measurement.
func (d *Driver) newSuspects(set []*ir.Node) []Suspect {
	sus := make([]Suspect, len(set))
	for i, n := range set {
		sus[i] = Suspect{Node: n.ID, Op: n.Op.String(), Prov: n.Prov, Func: d.Func(n.ID), NodeText: ir.NodeText(n), Fault: d.faults[n.ID]}
	}
	return sus
}

// replayIsolated replays each suspect's carved cases alone on the target,
// fed the reference's inputs, against the reference's outputs (the
// recorded ones, or the reference device's when it is not the CPU). It
// returns the failing cases by node id.
func (d *Driver) replayIsolated(b *carve.Bundle, sus []Suspect) map[int][]*carve.Case {
	index := suspectIndex(sus)
	var ref runtime.Device
	if !d.ownSource {
		ref = d.Source
	}
	failing := map[int][]*carve.Case{}
	for _, c := range b.Manifest.Cases {
		i, ok := index[c.Node]
		if !ok {
			continue
		}
		s := &sus[i]
		s.Cases = append(s.Cases, c.ID)
		r := b.ReplayAgainst(d.Target, ref, c, c.Tolerance)
		if r.Err != "" {
			s.Isolated.fail(fmt.Errorf("%s", r.Err))
		} else {
			s.Isolated.add(r.Metrics, r.Passed())
		}
		if !r.Passed() {
			failing[c.Node] = append(failing[c.Node], c)
		}
	}
	return failing
}

func suspectIndex(sus []Suspect) map[int]int {
	index := map[int]int{}
	for i, s := range sus {
		index[s.Node] = i
	}
	return index
}

// callValues are the inputs and outputs of one node in one call of the
// model, as a run computed them.
type callValues struct{ in, out []*tensor.Tensor }

// downloadCall copies a node's inputs and outputs to the host.
func downloadCall(in, out []*runtime.Buffer) (callValues, error) {
	ins, err := downloadAll(in)
	if err != nil {
		return callValues{}, err
	}
	outs, err := downloadAll(out)
	return callValues{ins, outs}, err
}

// capture runs the placement onTarget and keeps the inputs and outputs of
// the nodes in want, per (node id, call).
func (d *Driver) capture(label string, onTarget []int, want map[int]int) (Point, map[[2]int]callValues, error) {
	got := map[[2]int]callValues{}
	hook := func(n *ir.Node, in, out []*runtime.Buffer) error {
		if _, ok := want[n.ID]; !ok {
			return nil
		}
		cv, err := downloadCall(in, out)
		if err != nil {
			return err
		}
		got[[2]int{n.ID, d.step}] = cv
		return nil
	}
	p, err := d.eval(label, "check", onTarget, hook)
	return p, got, err
}

// measureAccumulated records the suspects in the diverging placement and
// in the all-source one, and compares them call by call: the accumulated
// error of their outputs, under their cases' tolerances, and the error of
// their inputs.
func (d *Driver) measureAccumulated(divergent []int, sus []Suspect) error {
	index := suspectIndex(sus)
	p, mixed, err := d.capture("culprit set (recording its nodes)", divergent, index)
	if err != nil {
		return err
	}
	d.lastCheck = append(d.lastCheck, p)
	p, ref, err := d.capture("reference placement (recording the set)", nil, index)
	if err != nil {
		return err
	}
	d.lastCheck = append(d.lastCheck, p)
	for key, want := range ref {
		n, s := d.byID[key[0]], &sus[index[key[0]]]
		got, ok := mixed[key]
		if !ok {
			s.Accumulated.fail(fmt.Errorf("call %d did not run in the diverging placement", key[1]))
			continue
		}
		s.Range.add(s.Op, want, got)
		tol := d.Opts.Policy.ForCompute(n.Op, n.Attrs, want.in, want.out, d.Opts.Compute)
		for j := range want.out {
			if j >= len(got.out) {
				break
			}
			m, err := carve.Compare(got.out[j], want.out[j], tol)
			if err != nil {
				s.Accumulated.fail(err)
				continue
			}
			s.Accumulated.add(m, m.Pass())
		}
		for j, v := range n.Inputs {
			if v.IsWeight() || n.UpdatesInPlace(j) || j >= len(got.in) {
				continue
			}
			s.InputRel = nanMax(s.InputRel, relErr(got.in[j], want.in[j]))
		}
	}
	return nil
}

// judge derives the suspect's ratios and verdict from its measurements.
func (s *Suspect) judge() {
	s.Amplification = ratio(s.Accumulated.MaxRel, s.Isolated.MaxRel)
	if s.InputRel > 0 {
		s.Condition = s.Accumulated.MaxRel / s.InputRel
	}
	s.Verdict = classify(s.Isolated, s.Accumulated, s.Condition)
}

// writeRegression writes the failing cases of each suspect (a few each)
// as a bundle in dir; a set with no failing case keeps its culprit's first
// case, which then guards the op on the reference inputs. Faults planted
// in the set's nodes are recorded in the bundle, so that `tapmlc test`
// replays them.
func (d *Driver) writeRegression(dir string, sc *suspectCarving, set []*ir.Node, failing map[int][]*carve.Case) (*Regression, error) {
	var keep []string
	for _, n := range set {
		fc := failing[n.ID]
		for _, c := range fc[:min(len(fc), regressionCasesPerNode)] {
			keep = append(keep, c.ID)
		}
	}
	if len(keep) == 0 {
		for _, c := range sc.rec.Cases {
			if c.Node == set[0].ID {
				keep = append(keep, c.ID)
				break
			}
		}
	}
	if len(keep) == 0 {
		return nil, fmt.Errorf("no carved case for node %d: it does not run in this migration's runs", set[0].ID)
	}
	// Cases of the recording carry their tensors; the bundle's do not.
	reg := *sc.rec
	reg.Cases = nil
	for _, c := range sc.rec.Cases {
		if slices.Contains(keep, c.ID) {
			reg.Cases = append(reg.Cases, c)
		}
	}
	for _, n := range set {
		if f := d.faults[n.ID]; f != "" {
			reg.Faults = append(reg.Faults, carve.Fault{Node: n.ID, Op: n.Op.String(), Fault: f})
		}
	}
	if _, err := reg.Write(dir); err != nil {
		return nil, fmt.Errorf("writing the regression bundle: %w", err)
	}
	return &Regression{Dir: dir, Cases: keep, Failing: len(failing[set[0].ID]) > 0, Faults: reg.Faults}, nil
}

// Regression is the carved test case(s) written for the culprit.
type Regression struct {
	Dir     string        `json:"dir"`
	Cases   []string      `json:"cases"`
	Failing bool          `json:"failing"` // the culprit's cases fail on the target as it is now
	Faults  []carve.Fault `json:"injected_faults,omitempty"`
}

// ratio is a/b with 0/0 = 1 and x/0 = +Inf.
func ratio(a, b float64) float64 {
	switch {
	case a == 0 && b == 0:
		return 1
	case b == 0:
		return math.Inf(1)
	}
	return a / b
}

// relErr is the largest |got-want|/|want| over elements with want != 0,
// +Inf for a non-finite mismatch or a shape mismatch.
func relErr(got, want *tensor.Tensor) float64 {
	if got.DType != want.DType || got.NumElements() != want.NumElements() {
		return math.Inf(1)
	}
	m := 0.0
	for i := 0; i < want.NumElements(); i++ {
		w, g := want.Float64At(i), got.Float64At(i)
		if w == g {
			continue
		}
		if math.IsNaN(w) || math.IsNaN(g) || math.IsInf(w, 0) || math.IsInf(g, 0) {
			return math.Inf(1)
		}
		if w != 0 {
			m = math.Max(m, math.Abs(g-w)/math.Abs(w))
		} else {
			m = math.Max(m, math.Abs(g)) // against zero: the absolute error
		}
	}
	return m
}
