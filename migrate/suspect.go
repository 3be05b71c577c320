package migrate

import (
	"fmt"
	"math"
	"os"
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
}

// maxSuspects bounds the nodes of a culprit set that are analysed.
const maxSuspects = 8

// regressionCasesPerNode bounds the cases per node in a regression bundle.
const regressionCasesPerNode = 4

// analyse carves the culprit set's nodes from a reference run, replays
// them alone on the target (isolated error), records them in the
// diverging mixed run (accumulated error) and, when dir is set, writes
// their failing cases as a regression bundle there.
func (d *Driver) analyse(loc *Localisation, dir string) ([]Suspect, *Regression, error) {
	set := loc.Set
	if len(set) > maxSuspects {
		// The culprit (last) and the start of the window first.
		set = append([]*ir.Node{set[len(set)-1], set[0]}, set[1:maxSuspects-1]...)
	} else {
		set = append([]*ir.Node{set[len(set)-1]}, set[:len(set)-1]...)
	}
	sids := ids(set)

	// Carve the suspects: a reference run with probes on them alone; every
	// call of theirs is kept (nothing is deduplicated away).
	probeIDs := make([]int64, len(sids))
	for i, id := range sids {
		probeIDs[i] = int64(id)
	}
	pm, names, err := carve.Compile(d.Model, d.Opts.Pipeline, true, passes.Options{"nodes": probeIDs})
	if err != nil {
		return nil, nil, fmt.Errorf("carving the suspects: %w", err)
	}
	for _, n := range set {
		var found *ir.Node
		for _, f := range pm.Funcs {
			for _, x := range f.Nodes {
				if x.ID == n.ID {
					found = x
				}
			}
		}
		if found == nil || found.Op != n.Op || found.Prov != n.Prov {
			return nil, nil, fmt.Errorf("carving the suspects: node %d (%s %s) is not the same node when compiled with probes; the pipeline is not deterministic", n.ID, n.Op, n.Prov)
		}
	}
	rec := carve.NewRecorder(pm, math.MaxInt32, carve.DefaultPolicy(), true)
	gen, err := rec.Generate(d.Tok, d.Opts.Prompt, d.Opts.Steps, nil)
	rec.Close()
	if err != nil {
		return nil, nil, fmt.Errorf("carving the suspects: %w", err)
	}
	if refGen := d.ref.Generated(d.Tok.IsEOG); len(gen) > len(refGen) || !slices.Equal(gen, refGen[:len(gen)]) {
		return nil, nil, fmt.Errorf("carving the suspects: the probed reference generated %v, the reference %v", gen, d.ref.Generated(d.Tok.IsEOG))
	}
	cases := rec.Cases()
	recording := &carve.Recording{
		Module: pm, Cases: cases, Stats: rec.Stats, Model: d.Model.Name, Prompt: d.Opts.Prompt,
		Steps: d.Opts.Steps, Keep: rec.Keep, Generated: gen, Pipeline: names,
	}
	tmp, err := os.MkdirTemp("", "tapml-migrate-*")
	if err != nil {
		return nil, nil, err
	}
	defer os.RemoveAll(tmp)
	bdir := tmp + "/suspects"
	if _, err := recording.Write(bdir); err != nil {
		return nil, nil, fmt.Errorf("carving the suspects: %w", err)
	}
	b, err := carve.Open(bdir)
	if err != nil {
		return nil, nil, fmt.Errorf("carving the suspects: %w", err)
	}
	defer b.Close()

	// Isolated: replay each case alone on the target.
	sus := make([]Suspect, len(set))
	index := map[int]int{}
	for i, n := range set {
		index[n.ID] = i
		sus[i] = Suspect{Node: n.ID, Op: n.Op.String(), Prov: n.Prov, Func: d.Func(n.ID), NodeText: ir.NodeText(n), Fault: d.faults[n.ID]}
	}
	byCall := map[[2]int]*carve.Case{} // (node, forward call) -> case
	failing := map[int][]*carve.Case{}
	for _, c := range b.Manifest.Cases {
		i, ok := index[c.Node]
		if !ok {
			continue
		}
		sus[i].Cases = append(sus[i].Cases, c.ID)
		byCall[[2]int{c.Node, c.Step}] = c
		r := b.Replay(d.Target, c, c.Tolerance)
		if r.Err != "" {
			sus[i].Isolated.fail(fmt.Errorf("%s", r.Err))
		} else {
			sus[i].Isolated.add(r.Metrics, r.Passed())
		}
		if !r.Passed() {
			failing[c.Node] = append(failing[c.Node], c)
		}
	}

	// Accumulated: the suspects' outputs (and inputs) in the diverging run.
	inRel := make([]float64, len(set))
	hook := func(n *ir.Node, in, out []*runtime.Buffer) error {
		i, ok := index[n.ID]
		if !ok {
			return nil
		}
		c := byCall[[2]int{n.ID, d.step}]
		if c == nil {
			return nil
		}
		ins, want, err := b.Tensors(c)
		if err != nil {
			return err
		}
		got, err := downloadAll(out)
		if err != nil {
			return err
		}
		for j := range want {
			if j >= len(got) {
				break
			}
			m, err := carve.Compare(got[j], want[j], c.Tolerance)
			if err != nil {
				sus[i].Accumulated.fail(err)
				continue
			}
			sus[i].Accumulated.add(m, m.Pass())
		}
		for j, v := range n.Inputs {
			if v.IsWeight() || n.UpdatesInPlace(j) || j >= len(ins) {
				continue
			}
			t, err := runtime.Download(in[j])
			if err != nil {
				return err
			}
			inRel[i] = nanMax(inRel[i], relErr(t, ins[j]))
		}
		return nil
	}
	p, err := d.eval("culprit set (recording its nodes)", "check", loc.Divergent, hook)
	if err != nil {
		return nil, nil, err
	}
	d.lastCheck = &p
	for i := range sus {
		s := &sus[i]
		s.InputRel = inRel[i]
		s.Amplification = ratio(s.Accumulated.MaxRel, s.Isolated.MaxRel)
		if s.InputRel > 0 {
			s.Condition = s.Accumulated.MaxRel / s.InputRel
		}
		s.Verdict = classify(s.Isolated, s.Accumulated, s.Condition)
	}

	if dir == "" {
		return sus, nil, nil
	}
	// The regression: the failing cases of each suspect (a few each); a set
	// with no failing case keeps its culprit's first case, which then
	// guards the op on the reference inputs.
	var keep []*carve.Case
	for _, n := range set {
		fc := failing[n.ID]
		keep = append(keep, fc[:min(len(fc), regressionCasesPerNode)]...)
	}
	if len(keep) == 0 {
		for _, c := range cases {
			if c.Node == set[0].ID {
				keep = append(keep, c)
				break
			}
		}
	}
	if len(keep) == 0 {
		return sus, nil, fmt.Errorf("no carved case for node %d: it does not run in this generation", set[0].ID)
	}
	// Cases of the recording carry their tensors; the bundle's do not.
	byID := map[string]*carve.Case{}
	for _, c := range cases {
		byID[c.ID] = c
	}
	var sel []*carve.Case
	var caseIDs []string
	for _, c := range keep {
		sel = append(sel, byID[c.ID])
		caseIDs = append(caseIDs, c.ID)
	}
	reg := &carve.Recording{
		Module: pm, Cases: sel, Stats: rec.Stats, Model: d.Model.Name, Prompt: d.Opts.Prompt,
		Steps: d.Opts.Steps, Keep: rec.Keep, Generated: gen, Pipeline: names,
	}
	if _, err := reg.Write(dir); err != nil {
		return sus, nil, fmt.Errorf("writing the regression bundle: %w", err)
	}
	return sus, &Regression{Dir: dir, Cases: caseIDs, Failing: len(failing[set[0].ID]) > 0}, nil
}

// Regression is the carved test case(s) written for the culprit.
type Regression struct {
	Dir     string   `json:"dir"`
	Cases   []string `json:"cases"`
	Failing bool     `json:"failing"` // the culprit's cases fail on the target as it is now
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
