package migrate

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/tapml/tapml/carve"
	"github.com/tapml/tapml/internal/atomicfile"
)

// Outcomes of a migration.
const (
	// OutcomeIdentical: every candidate node runs on the target and the
	// output agrees with the reference (identical tokens, errors within
	// the thresholds).
	OutcomeIdentical = "identical"
	// OutcomeLocalised: a placement diverged and the report names the
	// smallest culprit set found.
	OutcomeLocalised = "localised"
	// OutcomeNotFired: test-only faults were planted, nothing diverged,
	// and the faulted kernels computed exactly what the fault-free ones
	// do: the fault never fired, so the run tested nothing.
	OutcomeNotFired = "fault never fired"
)

// Exit codes of `tapmlc migrate` (ExitCode): 0 identical, 1 localised a
// divergence, 3 an injected fault never fired; 2 is the command's own
// failure (bad arguments, a model or device that cannot be opened, a
// reference run that fails).
const (
	ExitIdentical = 0
	ExitLocalised = 1
	ExitError     = 2
	ExitNotFired  = 3
)

// Report is the result of a migration.
type Report struct {
	Model      string
	Target     string
	Device     string
	Reference  string // the reference's target name ("cpu")
	Strategy   string
	Prompt     string
	Steps      int
	Thresholds Thresholds
	// Language says the model is a language model (compared by tokens,
	// logits and KL); otherwise every output of every call is compared
	// under its tolerance (Outputs).
	Language bool
	// Candidates is the number of nodes that can move to the target;
	// Unsupported the nodes per op that stay on the source.
	Candidates  int
	Unsupported map[string]int
	Faults      []Fault // test-only faults planted (--inject)
	// Reference: what the all-source run generated (language models) or
	// returned (the others: each output with its tolerance).
	RefTokens []int
	RefText   string
	Outputs   []OutputInfo
	Inputs    []carve.InputInfo
	Forwards  int // calls of the model per run (prefill and decode steps, or function calls)
	// Points are the mixed runs in the order they ran: the migration curve.
	Points []Point
	Runs   int // mixed runs
	// Final is the last placement of the migration proper: every candidate
	// on the target when nothing diverged, else the diverging step.
	Final        Point
	Outcome      string
	Localisation *Localisation
	Culprits     []Suspect
	Regression   *Regression
	// Fired says, when faults were planted and nothing diverged, whether
	// a faulted kernel changed any output (see Driver.FaultsFired).
	Fired *FaultCheck
	// Timing is the warm time per op of the final placement's nodes on
	// the target (see Driver.TimeOps).
	Timing    []carve.OpTime
	TimingErr string
	Duration  time.Duration

	runs0 int
	start time.Time
}

// OutputInfo is one output of a reference call of a model that is not a
// language model, with the tolerance it is compared under.
type OutputInfo struct {
	Call      int             `json:"call"`
	Func      string          `json:"func"`
	Name      string          `json:"name"`
	Type      string          `json:"type"`
	Tolerance carve.Tolerance `json:"tolerance"`
}

func (d *Driver) newReport(strategy string) *Report {
	r := &Report{
		Model: d.Model.Name, Target: d.Opts.Target, Device: d.Target.Name(), Reference: d.Opts.Reference, Strategy: strategy,
		Prompt: d.Opts.Prompt, Steps: d.Opts.Steps, Thresholds: d.Opts.Thresholds, Language: d.IsLanguageModel(),
		Candidates: len(d.order), Unsupported: d.unsupported, Forwards: len(d.ref.Funcs), start: time.Now(),
	}
	if r.Language {
		r.RefTokens = d.ref.Generated(d.Tok.IsEOG)
		if dt, ok := d.Tok.(interface{ Decode([]int) string }); ok {
			r.RefText = dt.Decode(r.RefTokens)
		}
	} else {
		r.Prompt, r.Steps = "", 0
		for i, outs := range d.ref.Outputs {
			for k, t := range outs {
				r.Outputs = append(r.Outputs, OutputInfo{Call: i, Func: d.ref.Funcs[i], Name: d.ref.Names[i][k], Type: t.Type().String(), Tolerance: d.tols[i][k]})
			}
		}
		if c, ok := d.work.(*calls); ok {
			r.Inputs = c.infos
		}
	}
	for _, n := range d.order {
		if f, ok := d.faults[n.ID]; ok {
			r.Faults = append(r.Faults, Fault{Node: n.ID, Op: n.Op.String(), Prov: n.Prov, Fault: f})
		}
	}
	r.runs0 = d.runs
	return r
}

// finish analyses the culprit set, if any, checks that planted faults
// fired, times the final placement and completes the report.
func (d *Driver) finish(r *Report) (*Report, error) {
	r.Outcome = OutcomeIdentical
	if r.Final.Divergent {
		r.Outcome = OutcomeLocalised
	}
	d.lastCheck = nil
	if r.Localisation != nil && len(r.Localisation.Set) > 0 {
		sus, reg, err := d.analyse(r.Localisation, d.Opts.Regression)
		if err != nil {
			return nil, err
		}
		r.Culprits, r.Regression = sus, reg
	}
	if r.Outcome == OutcomeIdentical && len(r.Faults) > 0 {
		fc, err := d.FaultsFired(r.Final.placement)
		if err != nil {
			return nil, err
		}
		r.Fired = fc
		if !fc.Fired {
			r.Outcome = OutcomeNotFired
		}
	}
	r.Points = append(r.Points, d.lastCheck...)
	if r.Final.Err == "" {
		timing, err := d.TimeOps(r.Final.placement)
		if err != nil {
			r.TimingErr = err.Error()
		}
		r.Timing = timing
	}
	r.Runs = d.runs - r.runs0
	r.Duration = time.Since(r.start)
	return r, nil
}

// FinalPlacement is the nodes on the target in the final placement.
func (r *Report) FinalPlacement() []int { return r.Final.placement }

// ExitCode is the exit code of `tapmlc migrate` for the report.
func (r *Report) ExitCode() int {
	switch r.Outcome {
	case OutcomeIdentical:
		return ExitIdentical
	case OutcomeNotFired:
		return ExitNotFired
	}
	return ExitLocalised
}

// Culprit returns the primary culprit (the node that completes the
// diverging set), or nil.
func (r *Report) Culprit() *Suspect {
	if len(r.Culprits) == 0 {
		return nil
	}
	return &r.Culprits[0]
}

// Verdict is the report's conclusion in one or two sentences.
func (r *Report) Verdict() string {
	switch r.Outcome {
	case OutcomeIdentical:
		if !r.Language {
			return fmt.Sprintf("identical: with all %d candidate nodes on %s every output of the %d calls agrees with the %s reference within its tolerance (max abs error %s, max error/tolerance %s)",
				r.Candidates, r.Target, r.Forwards, r.Reference, fmtNum(r.Final.MaxAbsErr), fmtNum(r.Final.MaxRatio))
		}
		return fmt.Sprintf("identical: with all %d candidate nodes on %s the %d generated tokens are identical to the %s reference (max logit error %s, max KL %s)",
			r.Candidates, r.Target, len(r.RefTokens), r.Reference, fmtNum(r.Final.MaxLogitErr), fmtNum(r.Final.MaxKL))
	case OutcomeNotFired:
		return fmt.Sprintf("the injected faults never fired: with every candidate node on %s, the %d faulted nodes that ran computed bit for bit what their fault-free kernels compute (the fault does not change this model's kernels on these values and this device); nothing was tested",
			r.Target, r.Fired.Ran)
	}
	var b strings.Builder
	how := "tokens differ"
	switch {
	case r.Final.Err != "":
		how = "the run fails"
	case !r.Language:
		how = "outputs beyond their tolerance"
	case r.Final.TokensMatch:
		how = "tokens are identical but logits are beyond the thresholds"
	}
	fmt.Fprintf(&b, "diverges (%s at %q)", how, r.Final.Label)
	c := r.Culprit()
	if c == nil {
		return b.String()
	}
	loc := r.Localisation
	if loc.Single {
		fmt.Fprintf(&b, "; culprit: node %d %s (%s, @%s), %s", c.Node, c.Op, c.Prov, c.Func, c.Verdict)
	} else {
		fmt.Fprintf(&b, "; culprit set of %d nodes ending at node %d %s (%s, @%s), %s", len(loc.Set), c.Node, c.Op, c.Prov, c.Func, c.Verdict)
	}
	if !loc.Complete {
		b.WriteString(" (search cut short by the run budget: the set may not be minimal)")
	}
	return b.String()
}

// WriteText writes the terminal report.
func (r *Report) WriteText(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "migrate %s to %s (%s) against the %s reference, strategy %s\n", r.Model, r.Target, r.Device, r.Reference, r.Strategy)
	r.writeDivergence(&b)
	fmt.Fprintf(&b, "candidate nodes: %d", r.Candidates)
	if len(r.Unsupported) > 0 {
		var ops []string
		for op, n := range r.Unsupported {
			ops = append(ops, fmt.Sprintf("%s %d", op, n))
		}
		sort.Strings(ops)
		fmt.Fprintf(&b, " (staying on the source, no kernel: %s)", strings.Join(ops, ", "))
	}
	b.WriteString("\n")
	if len(r.Faults) > 0 {
		fmt.Fprintf(&b, "injected faults (test only): %d nodes:", len(r.Faults))
		for i, f := range r.Faults {
			if i == 8 {
				fmt.Fprintf(&b, " ... (%d more)", len(r.Faults)-8)
				break
			}
			fmt.Fprintf(&b, " %d(%s %s)", f.Node, f.Op, f.Fault)
		}
		b.WriteString("\n")
	}
	b.WriteString("\n")
	r.writeRuns(&b)
	fmt.Fprintf(&b, "\n%d mixed runs", r.Runs)
	if r.Localisation != nil {
		fmt.Fprintf(&b, " (%d to localise over %d nodes; log2 = %.1f)", r.Localisation.Runs, r.searchSpace(), math.Log2(float64(max(r.searchSpace(), 1))))
	}
	fmt.Fprintf(&b, " in %s\n", r.Duration.Round(time.Millisecond))
	if !r.Language {
		r.writeOutputs(&b)
	}
	for i, s := range r.Culprits {
		role := "culprit"
		if i > 0 {
			role = "also in the set"
		}
		s.writeText(&b, role)
	}
	if r.Regression != nil {
		state := "passes on the target now (a guard for the fix)"
		if r.Regression.Failing {
			state = "fails on the target now"
		}
		replay := ""
		if len(r.Regression.Faults) > 0 {
			replay = " (the bundle records the injected faults; test plants them again)"
		}
		fmt.Fprintf(&b, "\nregression bundle: %s (cases %s; %s); replay with: tapmlc test %s --target %s%s\n",
			r.Regression.Dir, strings.Join(r.Regression.Cases, ", "), state, r.Regression.Dir, r.Target, replay)
	}
	if r.Fired != nil && r.Fired.Fired {
		fmt.Fprintf(&b, "\ninjected faults fired: %d of %d faulted nodes changed their outputs (largest change %s), within the divergence thresholds\n",
			len(r.Fired.Changed), r.Fired.Ran, fmtNum(r.Fired.MaxDiff))
	}
	if len(r.Timing) > 0 {
		fmt.Fprintf(&b, "\nkernel time on %s, final placement (warm; each node launched, moved and waited for):\n", r.Target)
		if err := carve.WriteOpTimes(&b, r.Timing); err != nil {
			return err
		}
	}
	if r.TimingErr != "" {
		fmt.Fprintf(&b, "\nkernel time: not measured (%s)\n", firstLine(r.TimingErr))
	}
	fmt.Fprintf(&b, "\nresult: %s\n", r.Verdict())
	_, err := io.WriteString(w, b.String())
	return err
}

// writeDivergence says what was run and what diverges.
func (r *Report) writeDivergence(b *strings.Builder) {
	if r.Language {
		fmt.Fprintf(b, "reference (%s): %d forward calls, generated %d tokens %q\n", r.Reference, r.Forwards, len(r.RefTokens), r.RefText)
		fmt.Fprintf(b, "divergence: a token differs, a logit differs by more than %g, or KL > %g\n", r.Thresholds.MaxLogitErr, r.Thresholds.MaxKL)
		return
	}
	fmt.Fprintf(b, "reference (%s): %d calls, %d outputs; inputs:\n", r.Reference, r.Forwards, len(r.Outputs))
	for _, in := range r.Inputs {
		fmt.Fprintf(b, "  %s of @%s: %s%v, %s\n", in.Name, in.Func, in.DType, in.Shape, in.Source)
	}
	b.WriteString("divergence: an output element differs from the reference by more than atol + rtol·|want|, each output's tolerance:\n")
	for _, o := range r.Outputs {
		fmt.Fprintf(b, "  @%s %s %s: rtol %s, atol %s (%s)\n", o.Func, o.Name, o.Type, fmtNum(o.Tolerance.RTol), fmtNum(o.Tolerance.ATol), o.Tolerance.Rule)
	}
}

// writeRuns writes the table of runs.
func (r *Report) writeRuns(b *strings.Builder) {
	if r.Language {
		fmt.Fprintf(b, "%-4s %-7s %-44s %9s %8s %11s %10s  %s\n", "run", "phase", "placement", "on target", "tokens", "logit err", "max KL", "result")
	} else {
		fmt.Fprintf(b, "%-4s %-7s %-44s %9s %8s %11s %10s  %s\n", "run", "phase", "placement", "on target", "outputs", "max abs", "err/tol", "result")
	}
	for i, p := range r.Points {
		res := "ok"
		if p.Divergent {
			res = "DIVERGES"
		}
		col, e1, e2 := "same", p.MaxLogitErr, p.MaxKL
		switch {
		case p.Err != "":
			col = "error"
		case !r.Language:
			col, e1, e2 = fmt.Sprintf("%d bad", p.failingOutputs()), p.MaxAbsErr, p.MaxRatio
		case !p.TokensMatch:
			col = fmt.Sprintf("step %d", p.FirstMismatch)
		}
		fmt.Fprintf(b, "%-4d %-7s %-44s %9d %8s %11s %10s  %s\n", i+1, p.Phase, trunc(p.Label, 44), p.OnTarget, col, fmtNum(e1), fmtNum(e2), res)
	}
}

// failingOutputs counts the outputs out of tolerance.
func (p Point) failingOutputs() int {
	n := 0
	for _, o := range p.Outputs {
		if !o.Pass() {
			n++
		}
	}
	return n
}

// writeOutputs writes each output's comparison in the final placement.
func (r *Report) writeOutputs(b *strings.Builder) {
	fmt.Fprintf(b, "\noutputs of the final placement (%s):\n", r.Final.Label)
	for _, o := range r.Final.Outputs {
		status := "ok"
		if !o.Pass() {
			status = "OUT OF TOLERANCE"
		}
		if o.Err != "" {
			status = o.Err
		}
		fmt.Fprintf(b, "  @%s %s: max abs %s, max rel %s, err/tol %s, %d of %d elements out; %s\n", o.Func, o.Name,
			fmtNum(o.Metrics.MaxAbs), fmtNum(o.Metrics.MaxRel), fmtNum(o.Metrics.Ratio), o.Metrics.Mismatches, o.Metrics.Elements, status)
	}
}

// writeText writes one suspect of the culprit set.
func (s Suspect) writeText(b *strings.Builder, role string) {
	fmt.Fprintf(b, "\n%s: node %d %s  prov %s  @%s\n", role, s.Node, s.Op, s.Prov, s.Func)
	fmt.Fprintf(b, "  %s\n", s.NodeText)
	if s.Fault != "" {
		fmt.Fprintf(b, "  injected fault: %s\n", s.Fault)
	}
	fmt.Fprintf(b, "  isolated error (reference inputs):   max abs %s, max rel %s, tolerance ratio %s, %d of %d calls fail%s\n",
		fmtNum(s.Isolated.MaxAbs), fmtNum(s.Isolated.MaxRel), fmtNum(s.Isolated.Ratio), s.Isolated.Failed, s.Isolated.Calls, errNote(s.Isolated.Err))
	fmt.Fprintf(b, "  accumulated error (mixed-run inputs): max abs %s, max rel %s, tolerance ratio %s, %d of %d calls fail (input rel err %s)%s\n",
		fmtNum(s.Accumulated.MaxAbs), fmtNum(s.Accumulated.MaxRel), fmtNum(s.Accumulated.Ratio), s.Accumulated.Failed, s.Accumulated.Calls, fmtNum(s.InputRel), errNote(s.Accumulated.Err))
	cond := "inputs exact"
	if s.InputRel > 0 {
		cond = "condition accumulated/input " + fmtNum(s.Condition)
	}
	fmt.Fprintf(b, "  amplification accumulated/isolated %s, %s: %s\n", fmtNum(s.Amplification), cond, s.Verdict)
	if s.Range.Left() {
		fmt.Fprintf(b, "  f16 range: %s\n", s.Range)
	}
}

func errNote(s string) string {
	if s == "" {
		return ""
	}
	return " (" + firstLine(s) + ")"
}

// searchSpace is the number of nodes the localisation searched.
func (r *Report) searchSpace() int {
	if r.Localisation == nil {
		return 0
	}
	return r.Localisation.Searched
}

// num is a float that JSON can hold when it is not finite ("inf", "nan").
type num float64

func (n num) MarshalJSON() ([]byte, error) {
	v := float64(n)
	if math.IsInf(v, 0) || math.IsNaN(v) {
		return json.Marshal(fmtNum(v))
	}
	return json.Marshal(v)
}

func nums(v []float64) []num {
	out := make([]num, len(v))
	for i, x := range v {
		out[i] = num(x)
	}
	return out
}

type jsonPoint struct {
	Label         string       `json:"label"`
	Phase         string       `json:"phase"`
	OnTarget      int          `json:"on_target"`
	Fraction      num          `json:"fraction"`
	Nodes         []int        `json:"nodes,omitempty"`
	TokensMatch   bool         `json:"tokens_match"`
	FirstMismatch int          `json:"first_mismatch"`
	Greedy        []int        `json:"greedy"`
	MaxLogitErr   num          `json:"max_logit_err"`
	MaxKL         num          `json:"max_kl"`
	StepLogitErr  []num        `json:"step_logit_err"`
	StepKL        []num        `json:"step_kl"`
	MaxAbsErr     num          `json:"max_abs_err"`
	MaxRatio      num          `json:"max_err_over_tolerance"`
	Outputs       []jsonOutput `json:"outputs,omitempty"`
	Divergent     bool         `json:"divergent"`
	Error         string       `json:"error,omitempty"`
	Seconds       num          `json:"seconds"`
}

type jsonOutput struct {
	Call       int    `json:"call"`
	Func       string `json:"func"`
	Name       string `json:"name"`
	MaxAbs     num    `json:"max_abs"`
	MaxRel     num    `json:"max_rel"`
	Ratio      num    `json:"err_over_tolerance"`
	Mismatches int    `json:"mismatches"`
	Elements   int    `json:"elements"`
	Pass       bool   `json:"pass"`
	Error      string `json:"error,omitempty"`
}

func toJSONPoint(p Point) jsonPoint {
	jp := jsonPoint{Label: p.Label, Phase: p.Phase, OnTarget: p.OnTarget, Fraction: num(p.Fraction), Nodes: p.Nodes,
		TokensMatch: p.TokensMatch, FirstMismatch: p.FirstMismatch, Greedy: p.Greedy, MaxLogitErr: num(p.MaxLogitErr),
		MaxKL: num(p.MaxKL), StepLogitErr: nums(p.StepLogitErr), StepKL: nums(p.StepKL), Divergent: p.Divergent,
		MaxAbsErr: num(p.MaxAbsErr), MaxRatio: num(p.MaxRatio), Error: p.Err, Seconds: num(p.Duration.Seconds())}
	for _, o := range p.Outputs {
		jp.Outputs = append(jp.Outputs, jsonOutput{Call: o.Call, Func: o.Func, Name: o.Name, MaxAbs: num(o.Metrics.MaxAbs), MaxRel: num(o.Metrics.MaxRel),
			Ratio: num(o.Metrics.Ratio), Mismatches: o.Metrics.Mismatches, Elements: o.Metrics.Elements, Pass: o.Pass(), Error: o.Err})
	}
	return jp
}

type jsonError struct {
	MaxAbs num    `json:"max_abs"`
	MaxRel num    `json:"max_rel"`
	Ratio  num    `json:"tolerance_ratio"`
	Calls  int    `json:"calls"`
	Failed int    `json:"failed"`
	Error  string `json:"error,omitempty"`
}

func toJSONError(e Error) jsonError {
	return jsonError{MaxAbs: num(e.MaxAbs), MaxRel: num(e.MaxRel), Ratio: num(e.Ratio), Calls: e.Calls, Failed: e.Failed, Error: e.Err}
}

type jsonSuspect struct {
	Node          int        `json:"node"`
	Op            string     `json:"op"`
	Prov          string     `json:"prov"`
	Func          string     `json:"func"`
	NodeText      string     `json:"node_text"`
	Fault         string     `json:"injected_fault,omitempty"`
	Isolated      jsonError  `json:"isolated"`
	Accumulated   jsonError  `json:"accumulated"`
	InputRel      num        `json:"input_rel_err"`
	Amplification num        `json:"amplification"`
	Condition     num        `json:"condition"`
	Verdict       string     `json:"verdict"`
	Cases         []string   `json:"cases"`
	F16Range      *jsonRange `json:"f16_range,omitempty"` // when a value left f16's range
}

type jsonLocalisation struct {
	Set       []int `json:"set"`
	Single    bool  `json:"single"`
	Base      int   `json:"base_on_target"`
	Divergent []int `json:"diverging_placement,omitempty"`
	Searched  int   `json:"searched_nodes"`
	Runs      int   `json:"runs"`
	Complete  bool  `json:"complete"`
}

type jsonReport struct {
	Model       string            `json:"model"`
	Target      string            `json:"target"`
	Device      string            `json:"device"`
	Reference   string            `json:"reference"`
	Language    bool              `json:"language_model"`
	Outputs     []OutputInfo      `json:"outputs,omitempty"`
	Inputs      []carve.InputInfo `json:"inputs,omitempty"`
	FaultCheck  *FaultCheck       `json:"fault_check,omitempty"`
	Timing      []carve.OpTime    `json:"kernel_time,omitempty"`
	Strategy    string            `json:"strategy"`
	Prompt      string            `json:"prompt"`
	Steps       int               `json:"steps"`
	Thresholds  jsonThresholds    `json:"thresholds"`
	Candidates  int               `json:"candidates"`
	Unsupported map[string]int    `json:"unsupported,omitempty"`
	Faults      []Fault           `json:"injected_faults,omitempty"`
	RefTokens   []int             `json:"reference_tokens"`
	RefText     string            `json:"reference_text"`
	Forwards    int               `json:"forwards"`
	Outcome     string            `json:"outcome"`
	Identical   bool              `json:"identical"`
	Verdict     string            `json:"verdict"`
	ExitCode    int               `json:"exit_code"`
	Runs        int               `json:"runs"`
	Final       jsonPoint         `json:"final"`
	Points      []jsonPoint       `json:"points"`
	Loc         *jsonLocalisation `json:"localisation,omitempty"`
	Culprits    []jsonSuspect     `json:"culprits"`
	Regression  *Regression       `json:"regression,omitempty"`
	Seconds     num               `json:"seconds"`
}

type jsonThresholds struct {
	MaxLogitErr num `json:"max_logit_err"`
	MaxKL       num `json:"max_kl"`
}

// WriteJSON writes the report as JSON.
func (r *Report) WriteJSON(w io.Writer) error {
	jr := jsonReport{Model: r.Model, Target: r.Target, Device: r.Device, Reference: r.Reference, Language: r.Language,
		Outputs: r.Outputs, Inputs: r.Inputs, FaultCheck: r.Fired, Timing: r.Timing, Strategy: r.Strategy, Prompt: r.Prompt, Steps: r.Steps,
		Thresholds: jsonThresholds{num(r.Thresholds.MaxLogitErr), num(r.Thresholds.MaxKL)}, Candidates: r.Candidates,
		Unsupported: r.Unsupported, Faults: r.Faults, RefTokens: r.RefTokens, RefText: r.RefText, Forwards: r.Forwards,
		Outcome: r.Outcome, Identical: r.Outcome == OutcomeIdentical, Verdict: r.Verdict(), ExitCode: r.ExitCode(), Runs: r.Runs,
		Final: toJSONPoint(r.Final), Points: []jsonPoint{}, Culprits: []jsonSuspect{}, Regression: r.Regression, Seconds: num(r.Duration.Seconds())}
	for _, p := range r.Points {
		jr.Points = append(jr.Points, toJSONPoint(p))
	}
	if l := r.Localisation; l != nil {
		jr.Loc = &jsonLocalisation{Set: ids(l.Set), Single: l.Single, Base: len(l.Base), Searched: l.Searched, Runs: l.Runs, Complete: l.Complete}
		if len(l.Divergent) <= 64 {
			jr.Loc.Divergent = l.Divergent
		}
	}
	for _, s := range r.Culprits {
		jr.Culprits = append(jr.Culprits, jsonSuspect{Node: s.Node, Op: s.Op, Prov: s.Prov, Func: s.Func, NodeText: s.NodeText, Fault: s.Fault,
			Isolated: toJSONError(s.Isolated), Accumulated: toJSONError(s.Accumulated), InputRel: num(s.InputRel),
			Amplification: num(s.Amplification), Condition: num(s.Condition), Verdict: s.Verdict, Cases: s.Cases,
			F16Range: toJSONRange(s.Range)})
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(jr)
}

// WriteFiles writes the JSON and HTML reports to the paths that are set,
// each atomically (a temporary file renamed into place).
func (r *Report) WriteFiles(jsonPath, htmlPath string) error {
	for _, f := range []struct {
		path  string
		write func(io.Writer) error
	}{{jsonPath, r.WriteJSON}, {htmlPath, r.WriteHTML}} {
		if f.path == "" {
			continue
		}
		var b strings.Builder
		if err := f.write(&b); err != nil {
			return err
		}
		if err := atomicfile.WriteFile(f.path, []byte(b.String())); err != nil {
			return err
		}
	}
	return nil
}
