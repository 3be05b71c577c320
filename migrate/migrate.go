package migrate

import (
	"fmt"
	"io"
	"math"
	"slices"
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
	// Decoding is greedy. Language models only.
	Prompt string
	Steps  int
	// Inputs and Seed are the arguments of a model that is not a language
	// model, as `tapmlc run` takes them: given values by parameter name,
	// seeded random values for the others (see carve.Arguments).
	Inputs map[string]carve.Input
	Seed   uint64
	// Policy derives the tolerance of such a model's outputs end to end
	// (see carve.Chain; zero: carve.DefaultPolicy).
	Policy carve.Policy
	// Pipeline compiles the model (nil: passes.Default()).
	Pipeline *passes.Pipeline
	// Compute is the target's compute dtype: f32 (zero) or f16. Under f16
	// the CPU reference (when Source is nil) emulates f16 storage
	// (cpu.Options.Round16), so that the reference and mixed placements
	// round where the target does, and carved cases get the f16 policy.
	Compute ir.DType
	// Target names the target ("webgpu") in reports, in legalize's messages
	// and for fault injection.
	Target string
	// Supports is the target's kernel table; ops it lacks stay on the
	// source. Nil: target.Supports(Target).
	Supports func(op ir.Op) bool
	// Source is the reference device, which runs every node not placed on
	// the target (nil: the CPU reference, which the driver owns); Reference
	// names it ("cpu" when Source is nil). Another target as the reference
	// compares two targets directly; it must have a kernel for every op.
	Source    runtime.Device
	Reference string
	// SourceSupports is the reference's kernel table (nil: every op, the
	// CPU's). An op the reference lacks is an error: it runs every node.
	SourceSupports func(op ir.Op) bool
	// Thresholds define divergence of a language model (zero:
	// DefaultThresholds; for bit-exact logits use
	// math.SmallestNonzeroFloat64). Under f16 compute they are at least
	// the f16 thresholds (Thresholds.f16: 8 f16 ulps of the largest
	// reference logit, and the KL that logit error allows).
	Thresholds Thresholds
	// MaxRuns bounds the mixed runs of one localisation (0: 64).
	MaxRuns int
	// Regression, when set, is the folder where the culprit's carved cases
	// are written as a test bundle (`tapmlc test` replays it).
	Regression string
	// Log receives one line per model run (nil: none).
	Log io.Writer
}

// Driver runs a model on the source (the reference) and on mixed
// source/target placements and compares them with the reference. It keeps
// the compiled module, the reference trace and the devices between runs.
type Driver struct {
	Opts   Options
	Model  *ir.Module // the model as given (carving recompiles it)
	Module *ir.Module // compiled with Opts.Pipeline, unpartitioned
	Tok    llm.Tokenizer
	Source runtime.Device // the reference
	Target runtime.Device

	work        workload
	ownSource   bool
	ref         *Trace
	tols        [][]carve.Tolerance // per call of the reference, per output (models that are not language models)
	order       []*ir.Node          // candidates: target-supported nodes of the functions run, in order
	byID        map[int]*ir.Node
	funcOf      map[int]string
	unsupported map[string]int
	types       map[int][]signature // concrete types each node ran with in the reference
	faults      map[int]string      // injected faults by node id
	runs        int                 // mixed runs so far
	step        int                 // call of the model in progress (for OnNode hooks)
	lastCheck   []Point             // the suspects' recording runs, for the report
}

type signature struct{ in, out []ir.Type }

// New compiles model, runs the all-source reference once and returns a
// driver that migrates to dev. A language model (@prefill and @decode,
// see carve.IsLanguageModel) needs its tokenizer and is run through the
// greedy generation of o.Prompt; any other model is called once per
// function on o.Inputs (tok is not used).
func New(model *ir.Module, tok llm.Tokenizer, dev runtime.Device, o Options) (*Driver, error) {
	if dev == nil {
		return nil, fmt.Errorf("no target device")
	}
	o, err := o.withDefaults()
	if err != nil {
		return nil, err
	}
	cm, _, err := carve.Compile(model, o.Pipeline, false, nil)
	if err != nil {
		return nil, err
	}
	d := &Driver{
		Opts: o, Model: model, Module: cm, Tok: tok, Source: o.Source, Target: dev,
		byID: map[int]*ir.Node{}, funcOf: map[int]string{}, unsupported: map[string]int{},
		types: map[int][]signature{}, faults: map[int]string{},
	}
	if d.work, err = newWorkload(cm, tok, o); err != nil {
		return nil, err
	}
	if d.Source == nil {
		d.Source, d.ownSource = cpu.NewWith(cpu.Options{Round16: o.Compute == ir.F16}), true
	}
	for _, f := range cm.Funcs {
		for _, n := range f.Nodes {
			d.byID[n.ID] = n
			d.funcOf[n.ID] = f.Name
		}
	}
	if err := d.checkSource(); err != nil {
		d.Close()
		return nil, err
	}
	if err := d.runReference(); err != nil {
		d.Close()
		return nil, err
	}
	if err := d.selectCandidates(); err != nil {
		d.Close()
		return nil, err
	}
	return d, nil
}

// withDefaults checks the options and fills in their defaults.
func (o Options) withDefaults() (Options, error) {
	if o.Thresholds == (Thresholds{}) {
		o.Thresholds = DefaultThresholds()
	}
	if o.Thresholds.MaxLogitErr < 0 || o.Thresholds.MaxKL < 0 || math.IsNaN(o.Thresholds.MaxLogitErr) || math.IsNaN(o.Thresholds.MaxKL) {
		return o, fmt.Errorf("divergence thresholds must be non-negative numbers, got %+v", o.Thresholds)
	}
	if o.Policy == (carve.Policy{}) {
		o.Policy = carve.DefaultPolicy()
	}
	if o.MaxRuns <= 0 {
		o.MaxRuns = 64
	}
	if o.Target == "" {
		o.Target = "target"
	}
	if o.Reference == "" {
		o.Reference = "cpu"
	}
	if o.Supports == nil {
		name := o.Target
		o.Supports = func(op ir.Op) bool { return target.Supports(name, op) }
	}
	return o, nil
}

// newWorkload chooses how the compiled module cm runs: generation for a
// language model, one call per function for any other.
func newWorkload(cm *ir.Module, tok llm.Tokenizer, o Options) (workload, error) {
	if !carve.IsLanguageModel(cm) {
		if o.Prompt != "" {
			return nil, fmt.Errorf("module %q is not a language model (no @prefill/@decode): it takes inputs, not a prompt", cm.Name)
		}
		return newCalls(cm, o.Inputs, o.Seed)
	}
	if tok == nil {
		return nil, fmt.Errorf("migrating a language model needs its tokenizer")
	}
	if len(o.Inputs) > 0 {
		return nil, fmt.Errorf("module %q is a language model: it takes a prompt, not inputs", cm.Name)
	}
	return &generation{tok: tok, prompt: o.Prompt, steps: o.Steps}, nil
}

// runReference runs every node on the source, the same code path as the
// mixed runs. It records the concrete types each node ran with and, for a
// model that is not a language model, the end-to-end tolerance of each
// output (carve.Chain over the worst path of the policy's op tolerances).
func (d *Driver) runReference() error {
	refMod, err := d.partitioned(nil)
	if err != nil {
		return err
	}
	paths := newPathTols(d.Opts.Policy)
	ref, err := d.generate(refMod, func(n *ir.Node, in, out []*runtime.Buffer) error {
		d.noteSignature(n, in, out)
		if d.IsLanguageModel() {
			return nil
		}
		return paths.add(d.step, n, in, out)
	}, nil)
	if err != nil {
		return fmt.Errorf("reference run on %s: %w", d.Opts.Reference, err)
	}
	d.ref = ref
	if d.Opts.Compute == ir.F16 {
		d.Opts.Thresholds = d.Opts.Thresholds.f16(ref.Logits)
	}
	for i, outs := range ref.Outputs {
		f := refMod.Func(ref.Funcs[i])
		tols := make([]carve.Tolerance, len(outs))
		for k, t := range outs {
			tols[k] = paths.tolerance(i, f.Results[k], t)
		}
		d.tols = append(d.tols, tols)
	}
	return nil
}

// f16 returns the thresholds of f16 compute, at least th's:
//
//   - logit error: 8 f16 ulps of the largest reference logit. The logits
//     are stored as f16, so they are known to one ulp (2^(e-10) for |x| in
//     [2^e, 2^(e+1))), and an ulp flip of an activation upstream (each op
//     may round its output to the other neighbour, carve.Policy.ForCompute)
//     moves them by a few ulps; 8 leaves room for a few such flips.
//   - KL: L²/2 for that logit error L. Logits moved by δ (|δ| <= L) change
//     the next-token distribution by KL ≈ Var_p(δ)/2 to second order, and
//     a variance is at most the largest square: KL <= L²/2.
//
// Tokens must still match.
func (th Thresholds) f16(logits [][]float32) Thresholds {
	l := f16LogitErr(logits)
	th.MaxLogitErr = max(th.MaxLogitErr, l)
	th.MaxKL = max(th.MaxKL, l*l/2)
	return th
}

// f16LogitErr is 8 f16 ulps of the largest finite |logit|.
func f16LogitErr(logits [][]float32) float64 {
	m := 0.0
	for _, row := range logits {
		for _, v := range row {
			if a := math.Abs(float64(v)); a > m && !math.IsInf(a, 0) {
				m = a
			}
		}
	}
	if m == 0 {
		return 0
	}
	_, e := math.Frexp(m) // m in [2^(e-1), 2^e)
	return 8 * math.Ldexp(1, e-1-10)
}

// checkSource checks that the reference has a kernel for every node it
// may run (all of them).
func (d *Driver) checkSource() error {
	if d.Opts.SourceSupports == nil {
		return nil
	}
	for _, fn := range d.work.funcs() {
		for _, n := range d.Module.Func(fn).Nodes {
			if def := n.Def(); def != nil && def.Kind != ir.KindMeta && !d.Opts.SourceSupports(n.Op) {
				return fmt.Errorf("the reference %s has no kernel for %s (node %s), and the reference runs every node not moved: choose another reference", d.Opts.Reference, n.Op, n)
			}
		}
	}
	return nil
}

// noteSignature records the concrete types node n ran with.
func (d *Driver) noteSignature(n *ir.Node, in, out []*runtime.Buffer) {
	s := signature{in: bufTypes(in), out: bufTypes(out)}
	for _, o := range d.types[n.ID] {
		if typesEqual(o.in, s.in) && typesEqual(o.out, s.out) {
			return
		}
	}
	d.types[n.ID] = append(d.types[n.ID], s)
}

// selectCandidates lists the nodes that can move to the target: the op
// nodes of the functions the reference ran, that the target has a kernel
// for, in topological order.
func (d *Driver) selectCandidates() error {
	ran := map[string]bool{}
	for _, f := range d.ref.Funcs {
		ran[f] = true
	}
	for _, fn := range d.work.funcs() {
		if !ran[fn] {
			continue
		}
		for _, n := range d.Module.Func(fn).Nodes {
			if !candidate(n) {
				continue
			}
			if !d.Opts.Supports(n.Op) {
				d.unsupported[n.Op.String()]++
				continue
			}
			d.order = append(d.order, n)
		}
	}
	if len(d.order) == 0 {
		return fmt.Errorf("%s has a kernel for none of the ops of %q", d.Opts.Target, d.Model.Name)
	}
	return nil
}

// IsLanguageModel reports whether the driver migrates a language model
// (generation, compared by tokens, logits and KL) rather than a model
// whose outputs are compared under their tolerances.
func (d *Driver) IsLanguageModel() bool {
	_, ok := d.work.(*generation)
	return ok
}

// Close releases the source device when the driver owns it (the target
// and a given source belong to the caller).
func (d *Driver) Close() {
	if d.ownSource {
		d.Source.Close()
	}
}

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

// generate runs the workload on m (partitioned): the reference run with
// force nil, else the same calls as force's. onNode, when set, sees every
// launched node.
func (d *Driver) generate(m *ir.Module, onNode func(n *ir.Node, in, out []*runtime.Buffer) error, force *Trace) (*Trace, error) {
	exec, err := d.executor(m)
	if err != nil {
		return nil, err
	}
	defer exec.Close()
	exec.OnNode = onNode
	return d.runOn(exec, force)
}

// executor returns an executor of m (partitioned) on the source and the
// target, its kernels prepared.
func (d *Driver) executor(m *ir.Module) (*runtime.Executor, error) {
	exec := runtime.NewExecutor(m, d.Source)
	exec.SetDevice(passes.Source, d.Source)
	exec.SetDevice(passes.Target, d.Target)
	for _, fn := range d.work.funcs() {
		if err := exec.Prepare(fn); err != nil {
			exec.Close()
			return nil, err
		}
	}
	return exec, nil
}

// runOn runs the workload once on exec and waits for the target.
func (d *Driver) runOn(exec *runtime.Executor, force *Trace) (*Trace, error) {
	tr, err := d.work.run(exec, force, &d.step)
	if err != nil {
		return tr, err
	}
	return tr, d.Target.Sync()
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
	// Language models. TokensMatch: every greedy token equals the
	// reference's (under teacher forcing, so the free-running generation
	// is identical too).
	TokensMatch   bool
	FirstMismatch int // call index of the first differing token (or failing output), -1
	Greedy        []int
	// Largest |logit - reference| and KL(reference || run) of the
	// next-token distributions, over all steps and per step.
	MaxLogitErr  float64
	MaxKL        float64
	StepLogitErr []float64
	StepKL       []float64
	// Other models: every output of every call against the reference
	// under its tolerance, and the worst error over what the tolerance
	// allows (above 1 diverges) and largest absolute error.
	Outputs   []OutputCheck
	MaxRatio  float64
	MaxAbsErr float64
	Divergent bool
	Err       string // the run failed (a kernel that does not build, ...)
	Duration  time.Duration

	placement []int // the nodes on the target
}

// OutputCheck is one output of one call of a model that is not a language
// model, compared with the reference's.
type OutputCheck struct {
	Call      int
	Func      string
	Name      string
	Metrics   carve.Metrics
	Tolerance carve.Tolerance
	Err       string // missing, or not comparable (dtype, shape)
}

// Pass reports whether the output is within its tolerance.
func (o OutputCheck) Pass() bool { return o.Err == "" && o.Metrics.Pass() }

// Eval runs the model with the nodes onTarget on the target (teacher
// forced with the reference's tokens, for a language model) and compares
// it with the reference. A run that fails (a kernel error) diverges, with
// the error. The returned error is for failures of the tool itself (a
// placement that does not compile).
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
	p.placement = slices.Clone(onTarget)
	m, err := d.partitioned(onTarget)
	if err != nil {
		return p, err
	}
	d.runs++
	tr, err := d.generate(m, onNode, d.ref)
	if err != nil {
		p.Err = err.Error()
	}
	if d.IsLanguageModel() {
		p.compareLogits(d.ref, tr)
		p.Divergent = !p.TokensMatch || p.MaxLogitErr > d.Opts.Thresholds.MaxLogitErr || p.MaxKL > d.Opts.Thresholds.MaxKL
	} else {
		p.compareOutputs(d.ref, tr, d.tols)
	}
	p.Divergent = p.Divergent || p.Err != ""
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
	if p.Outputs != nil {
		failing := 0
		for _, o := range p.Outputs {
			if !o.Pass() {
				failing++
			}
		}
		return fmt.Sprintf("%s: %d of %d outputs out of tolerance, max abs err %s, max err/tolerance %s", verdict, failing, len(p.Outputs), fmtNum(p.MaxAbsErr), fmtNum(p.MaxRatio))
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

// compareLogits fills the comparison of a language model's run tr
// (possibly cut short by an error) with the reference.
func (p *Point) compareLogits(ref, tr *Trace) {
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

// compareOutputs compares every output of run tr (possibly cut short by an
// error) with the reference's under tols, the outputs' tolerances.
func (p *Point) compareOutputs(ref, tr *Trace, tols [][]carve.Tolerance) {
	p.Outputs = []OutputCheck{}
	for i, want := range ref.Outputs {
		for k, w := range want {
			o := OutputCheck{Call: i, Func: ref.Funcs[i], Name: ref.Names[i][k], Tolerance: tols[i][k]}
			if tr == nil || i >= len(tr.Outputs) || k >= len(tr.Outputs[i]) {
				o.Err = "not computed (the run failed)"
			} else if m, err := carve.Compare(tr.Outputs[i][k], w, o.Tolerance); err != nil {
				o.Err = err.Error()
			} else {
				o.Metrics = m
			}
			if o.Err != "" {
				o.Metrics.MaxAbs, o.Metrics.Ratio = math.Inf(1), math.Inf(1)
			}
			if !o.Pass() && p.FirstMismatch < 0 {
				p.FirstMismatch = i
			}
			p.MaxRatio = nanMax(p.MaxRatio, o.Metrics.Ratio)
			p.MaxAbsErr = nanMax(p.MaxAbsErr, o.Metrics.MaxAbs)
			p.Divergent = p.Divergent || !o.Pass()
			p.Outputs = append(p.Outputs, o)
		}
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
