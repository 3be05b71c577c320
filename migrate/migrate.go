package migrate

import (
	"fmt"
	"io"
	"math"
	"sort"
	"time"

	"github.com/tapml/tapml/carve"
	"github.com/tapml/tapml/ir"
	"github.com/tapml/tapml/passes"
	"github.com/tapml/tapml/runtime"
	"github.com/tapml/tapml/runtime/cpu"
	"github.com/tapml/tapml/runtime/llm"
	"github.com/tapml/tapml/runtime/target"
	"github.com/tapml/tapml/tensor"
)

// Strategies.
const (
	Incremental = "incremental"
	Bisect      = "bisect"
)

// Thresholds define divergence (see the package documentation): a mixed
// run diverges when a greedy token differs from the reference's, when a
// logit differs by more than MaxLogitErr, or when the KL divergence of a
// next-token distribution from the reference's exceeds MaxKL.
type Thresholds struct {
	MaxLogitErr float64 `json:"max_logit_err"`
	MaxKL       float64 `json:"max_kl"`
}

// DefaultThresholds are loose enough for f32 reorderings on any device
// (stories260K on lavapipe: logit errors ~1e-5, KL ~1e-11) and tight enough
// for the injected faults.
func DefaultThresholds() Thresholds { return Thresholds{MaxLogitErr: 1e-3, MaxKL: 1e-5} }

// Options configure a migration.
type Options struct {
	// Prompt and Steps are as for `tapmlc run`: Steps positions are
	// processed, prompt included (0 or more than the context: the context).
	// Decoding is greedy.
	Prompt string
	Steps  int
	// Pipeline compiles the model (nil: passes.Default()).
	Pipeline *passes.Pipeline
	// Target names the target ("webgpu") in reports, in legalize's messages
	// and for fault injection.
	Target string
	// Supports is the target's kernel table; ops it lacks stay on the
	// source. Nil: target.Supports(Target).
	Supports func(op ir.Op) bool
	// Thresholds define divergence (zero: DefaultThresholds; for bit-exact
	// logits use math.SmallestNonzeroFloat64).
	Thresholds Thresholds
	// MaxRuns bounds the mixed runs of one localisation (0: 64).
	MaxRuns int
	// Regression, when set, is the folder where the culprit's carved cases
	// are written as a test bundle (`tapmlc test` replays it).
	Regression string
	// Log receives one line per model run (nil: none).
	Log io.Writer
}

// Trace is what one generation produced: per forward call, the tokens fed,
// the logits and the greedy next token.
type Trace struct {
	Calls  [][]int     // tokens fed to each forward (the prompt first)
	Funcs  []string    // function each forward ran (prefill or decode)
	Logits [][]float32 // logits after each forward
	Greedy []int       // argmax of each forward's logits
}

// Generated returns the tokens the trace generated: the greedy token of
// each forward, up to (not including) the first that ends generation.
func (t *Trace) Generated(isEOG func(int) bool) []int {
	var out []int
	for _, g := range t.Greedy {
		if isEOG(g) {
			break
		}
		out = append(out, g)
	}
	return out
}

// Driver runs a model on the source (the CPU reference) and on mixed
// source/target placements and compares them with the reference. It keeps
// the compiled module, the reference trace and the devices between runs.
type Driver struct {
	Opts   Options
	Model  *ir.Module // the model as given (carving recompiles it)
	Module *ir.Module // compiled with Opts.Pipeline, unpartitioned
	Tok    llm.Tokenizer
	Source runtime.Device // the CPU reference
	Target runtime.Device

	ref         *Trace
	order       []*ir.Node // candidates: target-supported nodes of the functions run, in order
	byID        map[int]*ir.Node
	funcOf      map[int]string
	unsupported map[string]int
	types       map[int][]signature // concrete types each node ran with in the reference
	faults      map[int]string      // injected faults by node id
	runs        int                 // mixed runs so far
	step        int                 // forward call in progress (for OnNode hooks)
	lastCheck   *Point              // the suspects' recording run, for the report
}

type signature struct{ in, out []ir.Type }

// New compiles model, runs the all-source reference generation once on the
// CPU and returns a driver that migrates to dev.
func New(model *ir.Module, tok llm.Tokenizer, dev runtime.Device, o Options) (*Driver, error) {
	if tok == nil {
		return nil, fmt.Errorf("migrating a language model needs its tokenizer")
	}
	if dev == nil {
		return nil, fmt.Errorf("no target device")
	}
	if o.Thresholds == (Thresholds{}) {
		o.Thresholds = DefaultThresholds()
	}
	if o.Thresholds.MaxLogitErr < 0 || o.Thresholds.MaxKL < 0 || math.IsNaN(o.Thresholds.MaxLogitErr) || math.IsNaN(o.Thresholds.MaxKL) {
		return nil, fmt.Errorf("divergence thresholds must be non-negative numbers, got %+v", o.Thresholds)
	}
	if o.MaxRuns <= 0 {
		o.MaxRuns = 64
	}
	if o.Target == "" {
		o.Target = "target"
	}
	if o.Supports == nil {
		name := o.Target
		o.Supports = func(op ir.Op) bool { return target.Supports(name, op) }
	}
	cm, _, err := carve.Compile(model, o.Pipeline, false, nil)
	if err != nil {
		return nil, err
	}
	if cm.Func("prefill") == nil || cm.Func("decode") == nil {
		return nil, fmt.Errorf("module %q is not a language model: it needs functions @prefill and @decode", model.Name)
	}
	d := &Driver{
		Opts: o, Model: model, Module: cm, Tok: tok, Source: cpu.New(), Target: dev,
		byID: map[int]*ir.Node{}, funcOf: map[int]string{}, unsupported: map[string]int{},
		types: map[int][]signature{}, faults: map[int]string{},
	}
	for _, f := range cm.Funcs {
		for _, n := range f.Nodes {
			d.byID[n.ID] = n
			d.funcOf[n.ID] = f.Name
		}
	}
	// The reference: every node on the source, the same code path as the
	// mixed runs. It also records the concrete types each node ran with.
	refMod, err := d.partitioned(nil)
	if err != nil {
		return nil, err
	}
	ref, err := d.generate(refMod, func(n *ir.Node, in, out []*runtime.Buffer) error {
		s := signature{in: bufTypes(in), out: bufTypes(out)}
		for _, o := range d.types[n.ID] {
			if typesEqual(o.in, s.in) && typesEqual(o.out, s.out) {
				return nil
			}
		}
		d.types[n.ID] = append(d.types[n.ID], s)
		return nil
	}, nil)
	if err != nil {
		return nil, fmt.Errorf("reference run on the CPU: %w", err)
	}
	d.ref = ref
	ran := map[string]bool{}
	for _, f := range ref.Funcs {
		ran[f] = true
	}
	for _, fn := range []string{"prefill", "decode"} {
		if !ran[fn] {
			continue
		}
		for _, n := range cm.Func(fn).Nodes {
			if !candidate(n) {
				continue
			}
			if !o.Supports(n.Op) {
				d.unsupported[n.Op.String()]++
				continue
			}
			d.order = append(d.order, n)
		}
	}
	if len(d.order) == 0 {
		return nil, fmt.Errorf("%s has a kernel for none of the ops of %q", o.Target, model.Name)
	}
	return d, nil
}

// Close releases the source device (the target belongs to the caller).
func (d *Driver) Close() { d.Source.Close() }

func candidate(n *ir.Node) bool {
	def := n.Def()
	return def != nil && def.Kind != ir.KindMeta && n.Op != ir.OpConstant
}

func bufTypes(bs []*runtime.Buffer) []ir.Type {
	ts := make([]ir.Type, len(bs))
	for i, b := range bs {
		ts[i] = b.Type()
	}
	return ts
}

func typesEqual(a, b []ir.Type) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !a[i].Equal(b[i]) {
			return false
		}
	}
	return true
}

// Reference returns the reference trace.
func (d *Driver) Reference() *Trace { return d.ref }

// Nodes returns the candidate nodes (those the target supports, in the
// functions the generation runs) in topological order: prefill's, then
// decode's.
func (d *Driver) Nodes() []*ir.Node { return d.order }

// Node returns the compiled module's node with id, or nil.
func (d *Driver) Node(id int) *ir.Node { return d.byID[id] }

// Func returns the name of the function holding node id.
func (d *Driver) Func(id int) string { return d.funcOf[id] }

// Unsupported counts the nodes per op that stay on the source because the
// target has no kernel for them.
func (d *Driver) Unsupported() map[string]int { return d.unsupported }

// Runs is the number of mixed runs so far.
func (d *Driver) Runs() int { return d.runs }

// Fault is a fault planted in one node.
type Fault struct {
	Node  int    `json:"node"`
	Op    string `json:"op"`
	Prov  string `json:"prov"`
	Fault string `json:"fault"`
}

// Inject plants test-only faults in the target's kernels (see
// target.Injection). An op injection plants the fault in every candidate
// node of that op whose kernels it applies to (in every shape the node ran
// with in the reference) and skips the others; it is an error when it
// applies to none. A node injection must apply. It returns the faults
// planted, which replace any planted before.
func (d *Driver) Inject(injs []target.Injection) ([]Fault, error) {
	if len(injs) == 0 {
		return nil, nil
	}
	if err := target.Injectable(d.Opts.Target, d.Target); err != nil {
		return nil, err
	}
	planned := map[int]string{}
	for _, inj := range injs {
		var nodes []*ir.Node
		if inj.Node > 0 {
			n := d.byID[inj.Node]
			if n == nil || !candidate(n) {
				return nil, fmt.Errorf("--inject %s: no op node with id %d in the compiled module", inj, inj.Node)
			}
			if !d.Opts.Supports(n.Op) {
				return nil, fmt.Errorf("--inject %s: node %d (%s) stays on the source: %s has no kernel for %s", inj, n.ID, n.Op, d.Opts.Target, n.Op)
			}
			if len(d.types[n.ID]) == 0 {
				return nil, fmt.Errorf("--inject %s: node %d (%s) does not run in this generation", inj, n.ID, n.Op)
			}
			if err := d.applies(n, inj.Fault); err != nil {
				return nil, fmt.Errorf("--inject %s: %w", inj, err)
			}
			nodes = []*ir.Node{n}
		} else {
			seen := false
			for _, n := range d.order {
				if n.Op != inj.Op {
					continue
				}
				seen = true
				if d.applies(n, inj.Fault) == nil {
					nodes = append(nodes, n)
				}
			}
			if !seen {
				return nil, fmt.Errorf("--inject %s: no %s node runs on the target in this generation", inj, inj.Op)
			}
			if len(nodes) == 0 {
				return nil, fmt.Errorf("--inject %s: fault %s applies to none of the %s kernels of this model", inj, inj.Fault, inj.Op)
			}
		}
		for _, n := range nodes {
			planned[n.ID] = inj.Fault
		}
	}
	d.ClearFaults()
	inj := d.Target.(target.FaultInjector)
	var out []Fault
	for _, n := range d.order {
		if f, ok := planned[n.ID]; ok {
			inj.SetFault(n.ID, f)
			d.faults[n.ID] = f
			out = append(out, Fault{Node: n.ID, Op: n.Op.String(), Prov: n.Prov, Fault: f})
		}
	}
	return out, nil
}

// applies checks a fault against every signature node n ran with.
func (d *Driver) applies(n *ir.Node, fault string) error {
	sigs := d.types[n.ID]
	if len(sigs) == 0 {
		return fmt.Errorf("node %d (%s) does not run in this generation", n.ID, n.Op)
	}
	for _, s := range sigs {
		if err := target.FaultApplies(d.Opts.Target, d.Target, n, s.in, s.out, fault); err != nil {
			return err
		}
	}
	return nil
}

// ClearFaults removes the faults Inject planted.
func (d *Driver) ClearFaults() {
	if inj, ok := d.Target.(target.FaultInjector); ok {
		for id := range d.faults {
			inj.SetFault(id, "")
		}
	}
	d.faults = map[int]string{}
}

// Faults returns the planted faults by node id.
func (d *Driver) Faults() map[int]string { return d.faults }

// partitioned returns a copy of the compiled module with the nodes in
// onTarget placed on the target and the rest on the source, transfers
// inserted by the partition pass, and legalize checking the target's ops.
func (d *Driver) partitioned(onTarget []int) (*ir.Module, error) {
	ids := make([]int64, len(onTarget))
	for i, id := range onTarget {
		ids[i] = int64(id)
	}
	pipe := &passes.Pipeline{File: "migrate"}
	if err := pipe.Append("shape_inference", nil, ""); err != nil {
		return nil, err
	}
	if err := pipe.Append("partition", passes.Options{"policy": "nodes", "nodes": ids}, ""); err != nil {
		return nil, err
	}
	if err := pipe.Append("legalize", passes.Options{"target": d.Opts.Target, "supports": passes.Supports(d.Opts.Supports)}, ""); err != nil {
		return nil, err
	}
	m := d.Module.Clone()
	if _, err := pipe.Run(m, passes.RunConfig{}); err != nil {
		return nil, err
	}
	return m, nil
}

// generate runs the generation of m (partitioned).
// With force nil it decodes greedily (the reference); otherwise it feeds
// force's calls (teacher forcing), so every step's logits are comparable
// with the reference even after a token differs. onNode, when set, sees
// every launched node.
func (d *Driver) generate(m *ir.Module, onNode func(n *ir.Node, in, out []*runtime.Buffer) error, force *Trace) (*Trace, error) {
	exec := runtime.NewExecutor(m, d.Source)
	defer exec.Close()
	exec.SetDevice(passes.Source, d.Source)
	exec.SetDevice(passes.Target, d.Target)
	exec.OnNode = onNode
	for _, fn := range []string{"prefill", "decode"} {
		if err := exec.Prepare(fn); err != nil {
			return nil, err
		}
	}
	s, err := llm.NewSession(exec)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	tr := &Trace{}
	forward := func(tokens []int) error {
		fn := "decode"
		if len(tokens) > 1 {
			fn = "prefill"
		}
		d.step = len(tr.Calls)
		logits, err := s.Forward(tokens)
		if err != nil {
			return fmt.Errorf("%s at position %d: %w", fn, s.Pos, err)
		}
		tr.Calls = append(tr.Calls, tokens)
		tr.Funcs = append(tr.Funcs, fn)
		tr.Logits = append(tr.Logits, logits)
		tr.Greedy = append(tr.Greedy, llm.Argmax(logits))
		return nil
	}
	if force != nil {
		for _, c := range force.Calls {
			if err := forward(c); err != nil {
				return tr, err
			}
		}
		return tr, d.Target.Sync()
	}
	steps := d.Opts.Steps
	if steps <= 0 || steps > s.MaxSeq {
		steps = s.MaxSeq
	}
	ids := d.Tok.Encode(d.Opts.Prompt, true, false)
	if len(ids) == 0 {
		return nil, fmt.Errorf("the prompt encodes to no tokens")
	}
	if len(ids) > steps {
		ids = ids[:steps] // as carving does: the prompt is cut to steps
	}
	if err := forward(ids); err != nil {
		return nil, err
	}
	for s.Pos < steps {
		next := tr.Greedy[len(tr.Greedy)-1]
		if d.Tok.IsEOG(next) {
			break
		}
		if err := forward([]int{next}); err != nil {
			return nil, err
		}
	}
	return tr, nil
}

// Point is one mixed run compared with the reference: a point of the
// migration curve.
type Point struct {
	Label string
	// Phase says which part of the strategy ran it: "op" and "layer"
	// (incremental steps), "search" (bisection), "check" (a confirmation),
	// "final" (the end placement).
	Phase    string
	OnTarget int     // nodes placed on the target
	Fraction float64 // OnTarget over the candidate nodes
	Nodes    []int
	// TokensMatch: every greedy token equals the reference's (under
	// teacher forcing, so the free-running generation is identical too).
	TokensMatch   bool
	FirstMismatch int // forward index of the first differing token, -1
	Greedy        []int
	// Largest |logit - reference| and KL(reference || run) of the
	// next-token distributions, over all steps and per step.
	MaxLogitErr  float64
	MaxKL        float64
	StepLogitErr []float64
	StepKL       []float64
	Divergent    bool
	Err          string // the run failed (a kernel that does not build, ...)
	Duration     time.Duration
}

// Eval runs the generation with the nodes onTarget on the target, teacher
// forced with the reference's tokens, and compares it with the reference.
// A run that fails (a kernel error) diverges, with the error. The returned
// error is for failures of the tool itself (a placement that does not
// compile).
func (d *Driver) Eval(label, phase string, onTarget []int) (Point, error) {
	return d.eval(label, phase, onTarget, nil)
}

func (d *Driver) eval(label, phase string, onTarget []int, onNode func(n *ir.Node, in, out []*runtime.Buffer) error) (Point, error) {
	start := time.Now()
	p := Point{Label: label, Phase: phase, OnTarget: len(onTarget), FirstMismatch: -1}
	if len(d.order) > 0 {
		p.Fraction = float64(len(onTarget)) / float64(len(d.order))
	}
	if len(onTarget) <= 16 {
		p.Nodes = append([]int{}, onTarget...)
	}
	m, err := d.partitioned(onTarget)
	if err != nil {
		return p, err
	}
	d.runs++
	tr, err := d.generate(m, onNode, d.ref)
	if err != nil {
		p.Err = err.Error()
	}
	p.compare(d.ref, tr)
	p.Divergent = p.Err != "" || !p.TokensMatch || p.MaxLogitErr > d.Opts.Thresholds.MaxLogitErr || p.MaxKL > d.Opts.Thresholds.MaxKL
	p.Duration = time.Since(start)
	if d.Opts.Log != nil {
		fmt.Fprintf(d.Opts.Log, "run %d %-40s %4d on target  %s\n", d.runs, trunc(label, 40), len(onTarget), p.Summary())
	}
	return p, nil
}

func trunc(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-1] + "…"
}

// Summary is a one-line account of the comparison.
func (p Point) Summary() string {
	verdict := "same"
	if p.Divergent {
		verdict = "DIVERGES"
	}
	if p.Err != "" {
		return fmt.Sprintf("%s: run failed: %s", verdict, firstLine(p.Err))
	}
	tok := "tokens identical"
	if !p.TokensMatch {
		tok = fmt.Sprintf("tokens differ from step %d", p.FirstMismatch)
	}
	return fmt.Sprintf("%s: %s, max logit err %s, max KL %s", verdict, tok, fmtNum(p.MaxLogitErr), fmtNum(p.MaxKL))
}

func firstLine(s string) string {
	for i, c := range s {
		if c == '\n' {
			return s[:i]
		}
	}
	return s
}

// compare fills the comparison of run tr (possibly cut short by an error)
// with the reference.
func (p *Point) compare(ref, tr *Trace) {
	p.TokensMatch = true
	for i := range ref.Logits {
		if tr == nil || i >= len(tr.Logits) {
			// A run cut short by an error: the missing steps count as
			// infinitely wrong.
			p.StepLogitErr = append(p.StepLogitErr, math.Inf(1))
			p.StepKL = append(p.StepKL, math.Inf(1))
			if p.TokensMatch {
				p.TokensMatch, p.FirstMismatch = false, i
			}
			continue
		}
		e, kl := logitErr(ref.Logits[i], tr.Logits[i]), klDiv(ref.Logits[i], tr.Logits[i])
		p.StepLogitErr = append(p.StepLogitErr, e)
		p.StepKL = append(p.StepKL, kl)
		p.Greedy = append(p.Greedy, tr.Greedy[i])
		if tr.Greedy[i] != ref.Greedy[i] && p.TokensMatch {
			p.TokensMatch, p.FirstMismatch = false, i
		}
	}
	for i := range p.StepLogitErr {
		p.MaxLogitErr = nanMax(p.MaxLogitErr, p.StepLogitErr[i])
		p.MaxKL = nanMax(p.MaxKL, p.StepKL[i])
	}
}

// nanMax is max where NaN counts as +Inf.
func nanMax(a, b float64) float64 {
	if math.IsNaN(b) {
		b = math.Inf(1)
	}
	return math.Max(a, b)
}

// logitErr is the largest absolute difference; a non-finite difference
// (NaN, a wrong infinity) is +Inf.
func logitErr(want, got []float32) float64 {
	if len(want) != len(got) {
		return math.Inf(1)
	}
	m := 0.0
	for i := range want {
		w, g := float64(want[i]), float64(got[i])
		if w == g {
			continue
		}
		d := math.Abs(w - g)
		if math.IsNaN(d) || math.IsInf(d, 0) {
			return math.Inf(1)
		}
		m = math.Max(m, d)
	}
	return m
}

// klDiv is KL(softmax(p) || softmax(q)) in nats, +Inf when q has
// non-finite logits.
func klDiv(p, q []float32) float64 {
	if len(p) != len(q) {
		return math.Inf(1)
	}
	lp, lq := logSoftmax(p), logSoftmax(q)
	if lp == nil || lq == nil {
		return math.Inf(1)
	}
	kl := 0.0
	for i := range lp {
		if pi := math.Exp(lp[i]); pi > 0 {
			kl += pi * (lp[i] - lq[i])
		}
	}
	return math.Max(kl, 0) // rounding can make a tiny negative
}

func logSoftmax(x []float32) []float64 {
	m := math.Inf(-1)
	for _, v := range x {
		f := float64(v)
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return nil
		}
		m = math.Max(m, f)
	}
	sum := 0.0
	for _, v := range x {
		sum += math.Exp(float64(v) - m)
	}
	ls := math.Log(sum)
	out := make([]float64, len(x))
	for i, v := range x {
		out[i] = float64(v) - m - ls
	}
	return out
}

func fmtNum(v float64) string {
	switch {
	case math.IsInf(v, 1):
		return "inf"
	case math.IsNaN(v):
		return "nan"
	case v == 0:
		return "0"
	}
	return fmt.Sprintf("%.3g", v)
}

// ids returns the ids of nodes.
func ids(nodes []*ir.Node) []int {
	out := make([]int, len(nodes))
	for i, n := range nodes {
		out[i] = n.ID
	}
	return out
}

// union returns the ids of a and b, without repeats, sorted.
func union(a, b []int) []int {
	set := map[int]bool{}
	for _, x := range a {
		set[x] = true
	}
	for _, x := range b {
		set[x] = true
	}
	out := make([]int, 0, len(set))
	for x := range set {
		out = append(out, x)
	}
	sort.Ints(out)
	return out
}

// downloadAll copies buffers to the host.
func downloadAll(bs []*runtime.Buffer) ([]*tensor.Tensor, error) {
	out := make([]*tensor.Tensor, len(bs))
	for i, b := range bs {
		t, err := runtime.Download(b)
		if err != nil {
			return nil, err
		}
		out[i] = t
	}
	return out, nil
}
