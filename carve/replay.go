package carve

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"regexp"
	"slices"
	"time"

	"github.com/tapml/tapml/ir"
	"github.com/tapml/tapml/runtime"
	"github.com/tapml/tapml/runtime/cpu"
	"github.com/tapml/tapml/tensor"
)

// CaseFunc is the name of the one-op function a case is replayed as.
const CaseFunc = "case"

// Module builds the one-op module that replays case c: a function @case
// whose parameters are the case's recorded inputs (static shapes), one node
// with the case's op, attributes, node id and provenance reading them and
// the module's weights it read, and that node's outputs as results. The
// weights' data comes from the bundle. The inferred output types must be
// the recorded ones.
func (b *Bundle) Module(c *Case) (*ir.Module, error) {
	attrs, err := DecodeAttrs(c.Op, c.Attrs)
	if err != nil {
		return nil, fmt.Errorf("case %s: %w", c.ID, err)
	}
	m := ir.NewModule("case " + c.ID)
	fb := ir.NewFunction(m, CaseFunc)
	ins := make([]*ir.Value, len(c.Inputs))
	for i, o := range c.Inputs {
		t, err := o.Type()
		if err != nil {
			return nil, fmt.Errorf("case %s: input %d: %w", c.ID, i, err)
		}
		if o.Weight != "" {
			if w := m.Weight(o.Weight); w != nil {
				ins[i] = w.Value()
				continue
			}
			var raw []byte
			if b != nil {
				if raw, err = b.weightBytes(o.Weight); err != nil {
					return nil, fmt.Errorf("case %s: weight %s: %w", c.ID, o.Weight, err)
				}
			} else if o.t != nil {
				raw = o.t.Data
			}
			ins[i] = m.AddWeight(o.Weight, t, ir.BytesSource(raw))
			continue
		}
		ins[i] = fb.Param(fmt.Sprintf("in%d", i), t)
	}
	op, _ := ir.OpNamed(c.Op) // known: DecodeAttrs checked it
	outs := fb.At(c.Prov).OpN(op, ins, attrs)
	if err := fb.Err(); err != nil {
		return nil, fmt.Errorf("case %s: %w", c.ID, err)
	}
	if len(outs) != len(c.Outputs) {
		return nil, fmt.Errorf("case %s: op %s has %d outputs, the case %d", c.ID, c.Op, len(outs), len(c.Outputs))
	}
	for i, o := range outs {
		want, err := c.Outputs[i].Type()
		if err != nil {
			return nil, fmt.Errorf("case %s: output %d: %w", c.ID, i, err)
		}
		if !o.Type.Equal(want) {
			return nil, fmt.Errorf("case %s: output %d of %s is %s, the case records %s", c.ID, i, c.Op, o.Type, want)
		}
		o.Name = fmt.Sprintf("out%d", i)
	}
	node := outs[0].Def
	if c.Node > 0 {
		node.ID = c.Node
	}
	fb.Return(outs...)
	if err := ir.Verify(m); err != nil {
		return nil, fmt.Errorf("case %s: %w", c.ID, err)
	}
	return m, nil
}

// Run runs a one-op module built by Module on dev with the given inputs
// (the case's non-weight inputs, in order) and returns its outputs on the
// host. Inputs are copied before upload, so in-place ops (kv_write) leave
// them as they were.
func Run(dev runtime.Device, m *ir.Module, inputs []*tensor.Tensor) ([]*tensor.Tensor, error) {
	r, err := newCaseRun(dev, m, inputs)
	if err != nil {
		return nil, err
	}
	defer r.close()
	return r.call()
}

// caseRun is a one-op module ready to run on a device: kernels compiled,
// inputs uploaded. It can run many times (repeats, timing); in-place ops
// write the same values on every run.
type caseRun struct {
	dev  runtime.Device
	exec *runtime.Executor
	args []*runtime.Buffer
}

func newCaseRun(dev runtime.Device, m *ir.Module, inputs []*tensor.Tensor) (*caseRun, error) {
	r := &caseRun{dev: dev, exec: runtime.NewExecutor(m, dev)}
	if err := r.exec.Prepare(CaseFunc); err != nil {
		r.close()
		return nil, err
	}
	for _, t := range inputs {
		a, err := dev.Upload(t.Clone())
		if err != nil {
			r.close()
			return nil, err
		}
		r.args = append(r.args, a)
	}
	return r, nil
}

func (r *caseRun) close() {
	for _, a := range r.args {
		a.Dev.Free(a)
	}
	r.exec.Close()
}

// launch runs the case once and returns its result buffers.
func (r *caseRun) launch() ([]*runtime.Buffer, error) { return r.exec.Call(CaseFunc, r.args...) }

// free frees result buffers that are not inputs.
func (r *caseRun) free(res []*runtime.Buffer) {
	for _, b := range res {
		if !isAmong(b, r.args) {
			b.Dev.Free(b)
		}
	}
}

// call runs the case once and returns its outputs on the host.
func (r *caseRun) call() ([]*tensor.Tensor, error) {
	res, err := r.launch()
	if err != nil {
		return nil, err
	}
	defer r.free(res)
	out := make([]*tensor.Tensor, len(res))
	for i, b := range res {
		if out[i], err = runtime.Download(b); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// Timing: a case's kernel is timed warm, after a first run that compiled
// it and uploaded its weights: each timed run is the launch and the wait
// for it to finish (inputs already on the device, outputs not
// downloaded). Runs repeat until timedRuns ran and timedSpan passed, at
// most maxTimedRuns; the median is kept, robust to a stray slow run.
const (
	timedRuns    = 3
	maxTimedRuns = 50
	timedSpan    = 20 * time.Millisecond
)

// time measures the case's warm kernel time (see above).
func (r *caseRun) time() (time.Duration, error) {
	if err := r.warm(); err != nil {
		return 0, err
	}
	var ds []time.Duration
	start := time.Now()
	for len(ds) < maxTimedRuns && (len(ds) < timedRuns || time.Since(start) < timedSpan) {
		t := time.Now()
		res, err := r.launch()
		if err == nil {
			err = r.dev.Sync()
		}
		ds = append(ds, time.Since(t))
		r.free(res)
		if err != nil {
			return 0, err
		}
	}
	slices.Sort(ds)
	return ds[len(ds)/2], nil
}

func (r *caseRun) warm() error {
	res, err := r.launch()
	if err == nil {
		err = r.dev.Sync()
	}
	r.free(res)
	return err
}

func isAmong(b *runtime.Buffer, list []*runtime.Buffer) bool {
	for _, x := range list {
		if x == b {
			return true
		}
	}
	return false
}

// ReplayOptions say how a case is replayed besides the comparison.
type ReplayOptions struct {
	// Reference, when set, is a device the case also runs on, whose
	// outputs replace the recorded reference (comparing two targets).
	Reference runtime.Device
	// Repeat runs the case this many times (> 1) and compares the runs
	// with the first bit for bit: a kernel whose result varies (a race)
	// fails, with where the differences are.
	Repeat int
	// Time measures the case's warm kernel time (see caseRun.time).
	Time bool
	// Keep keeps the got and want tensors of a failing case in its
	// result (for dumps and the HTML report's got-vs-want views).
	Keep bool
	// Fit, when set, rewrites a case's module for a device before it runs
	// there (tapmlc test splits weights over the device's buffer limits:
	// a case of the classifier of a large vocabulary runs as shards, as
	// the model does on that device).
	Fit func(m *ir.Module, dev runtime.Device) error
}

// Replay runs case c alone on dev and compares its outputs with the
// recorded reference under tol.
func (b *Bundle) Replay(dev runtime.Device, c *Case, tol Tolerance) Result {
	return b.ReplayWith(dev, c, tol, ReplayOptions{})
}

// ReplayAgainst runs case c alone on dev and compares its outputs with
// those of ref running the same case (the recorded ones when ref is nil).
func (b *Bundle) ReplayAgainst(dev, ref runtime.Device, c *Case, tol Tolerance) Result {
	return b.ReplayWith(dev, c, tol, ReplayOptions{Reference: ref})
}

// ReplayWith runs case c alone on dev as the options say and compares its
// outputs with the reference's under tol.
func (b *Bundle) ReplayWith(dev runtime.Device, c *Case, tol Tolerance, o ReplayOptions) Result {
	start := time.Now()
	res := Result{Case: c, Tolerance: tol, Reference: "recorded"}
	fail := func(err error) Result {
		res.Err = err.Error()
		if errors.Is(err, runtime.ErrDeviceLost) {
			res.lost = err
		}
		res.Duration = time.Since(start)
		return res
	}
	m, err := b.Module(c)
	if err != nil {
		return fail(err)
	}
	ins, want, err := b.Tensors(c)
	if err != nil {
		return fail(err)
	}
	args := caseArgs(c, ins)
	if o.Fit != nil {
		for _, d := range []runtime.Device{dev, o.Reference} {
			if d == nil {
				continue
			}
			if err := o.Fit(m, d); err != nil {
				return fail(err)
			}
		}
	}
	if o.Reference != nil {
		res.Reference = o.Reference.Name()
		if want, err = Run(o.Reference, m, args); err != nil {
			return fail(fmt.Errorf("on the reference %s: %w", o.Reference.Name(), err))
		}
	}
	run, err := newCaseRun(dev, m, args)
	if err != nil {
		return fail(err)
	}
	defer run.close()
	got, err := run.call()
	if err != nil {
		return fail(err)
	}
	if len(got) != len(want) {
		return fail(fmt.Errorf("%d outputs, the reference has %d", len(got), len(want)))
	}
	for i := range want {
		mt, err := Compare(got[i], want[i], tol)
		if err != nil {
			return fail(fmt.Errorf("output %d: %w", i, err))
		}
		if i == 0 {
			res.Metrics = mt
		} else {
			res.Metrics = res.Metrics.merge(mt)
		}
	}
	res.Pass = res.Metrics.Pass()
	if c.Compute == "f16" && o.Reference == nil {
		if res.Truth, err = truth(m, args, got, tol); err != nil {
			return fail(fmt.Errorf("the f32 truth: %w", err))
		}
		res.Pass = res.Pass && res.Truth.Pass()
	}
	if o.Repeat > 1 {
		if res.Variation, err = repeatRuns(run, got, o.Repeat); err != nil {
			return fail(err)
		}
		res.Pass = res.Pass && res.Variation.Varying == 0
	}
	if o.Time {
		if res.Time, err = run.time(); err != nil {
			return fail(fmt.Errorf("timing: %w", err))
		}
	}
	if o.Keep && !res.Passed() {
		res.In, res.Got, res.Want = args, got, want
	}
	res.Duration = time.Since(start)
	return res
}

// truth compares the outputs got of a case carved under f16 compute with
// the f32 truth: the case's op on the CPU reference without f16 emulation,
// from the same (f16-valued) inputs. The case's tolerance bounds that
// distance too: correct f16 code stores the f32 result rounded to f16
// (at most u·|x| away, u = 2^-11) after f32 arithmetic that differs from
// the reference's by the f32 rule, within rtol_f32 + 2u
// (Policy.ForCompute).
func truth(m *ir.Module, args, got []*tensor.Tensor, tol Tolerance) (*Metrics, error) {
	want, err := Run(cpu.New(), m, args)
	if err != nil {
		return nil, err
	}
	var all Metrics
	for i := range want {
		mt, err := Compare(got[i], want[i], tol)
		if err != nil {
			return nil, fmt.Errorf("output %d: %w", i, err)
		}
		if i == 0 {
			all = mt
		} else {
			all = all.merge(mt)
		}
	}
	return &all, nil
}

// Variation is what repeated runs of a case changed: a kernel with a race
// or reading memory it did not write gives other values on another run.
type Variation struct {
	Runs int
	// Output is the first output whose values varied; Varying counts its
	// elements that differ from the first run's in some run, MaxSpread is
	// the largest difference, and Where locates them.
	Output    int
	Varying   int
	MaxSpread float64
	Where     Grid
}

// repeatRuns runs the case n-1 more times and compares every output with
// first, the first run's, bit for bit.
func repeatRuns(run *caseRun, first []*tensor.Tensor, n int) (*Variation, error) {
	v := &Variation{Runs: n}
	spread := make([][]float64, len(first))
	for i, t := range first {
		spread[i] = make([]float64, t.NumElements())
	}
	for range n - 1 {
		got, err := run.call()
		if err != nil {
			return nil, fmt.Errorf("repeated run: %w", err)
		}
		for i, t := range got {
			for j := range spread[i] {
				spread[i][j] = math.Max(spread[i][j], ElementDiff(t, first[i], j))
			}
		}
	}
	for i, s := range spread {
		w := Locate(first[i].Shape, func(j int) float64 { return s[j] })
		if w.Marked > 0 {
			v.Output, v.Varying, v.Where = i, w.Marked, w
			for _, d := range s {
				v.MaxSpread = math.Max(v.MaxSpread, d)
			}
			break
		}
	}
	return v, nil
}

// ElementDiff compares element j of two tensors of one dtype bit for bit:
// 0 when its bytes are equal, else |a - b|, or +Inf when that is not a
// positive number (NaN against a number, -0 against +0).
func ElementDiff(a, b *tensor.Tensor, j int) float64 {
	size := a.DType.Size()
	if bytes.Equal(a.Data[j*size:(j+1)*size], b.Data[j*size:(j+1)*size]) {
		return 0
	}
	if d := math.Abs(a.Float64At(j) - b.Float64At(j)); d > 0 {
		return d
	}
	return math.Inf(1)
}

// MaxDiff is the largest ElementDiff of two tensors, +Inf when their
// dtypes or shapes differ.
func MaxDiff(a, b *tensor.Tensor) float64 {
	if a.DType != b.DType || !sameShape(a.Shape, b.Shape) {
		return math.Inf(1)
	}
	m := 0.0
	for j := range a.NumElements() {
		m = math.Max(m, ElementDiff(a, b, j))
	}
	return m
}

// TestOptions configure Test.
type TestOptions struct {
	// Run selects cases whose id, op or provenance it matches (nil: all).
	Run *regexp.Regexp
	// Overrides change the recorded tolerances (nil: none).
	Overrides *Overrides
	// Target names the target in reports.
	Target string
	// Progress, when set, is called after each case.
	Progress func(done, total int)
	// Replay says how each case runs: against another device, repeated,
	// timed, keeping a failing case's tensors.
	Replay ReplayOptions
	// Faults are test-only faults planted in the device (which must take
	// them: SetFault(node id, fault)) while the cases run. Each case of a
	// faulted node runs once more without its fault, to tell whether the
	// fault fired (changed any output bit).
	Faults []Fault
}

// Selected reports whether the options select case c.
func (o TestOptions) Selected(c *Case) bool {
	return o.Run == nil || o.Run.MatchString(c.ID) || o.Run.MatchString(c.Op) || o.Run.MatchString(c.Prov)
}

// faultSetter is a device that takes test-only faults per node id.
type faultSetter interface{ SetFault(id int, fault string) }

// FaultResult is what a planted fault did in a test run.
type FaultResult struct {
	Fault
	Cases int `json:"cases"` // cases of the faulted node that ran
	Fired int `json:"fired"` // of those, cases whose outputs the fault changed
}

// Test replays every selected case on dev and reports the results. A case
// that cannot run (a kernel that fails to build, say) fails with its
// error; the others still run.
func (b *Bundle) Test(dev runtime.Device, o TestOptions) (*Report, error) {
	var cases []*Case
	for _, c := range b.Manifest.Cases {
		if o.Selected(c) {
			cases = append(cases, c)
		}
	}
	rep := &Report{Bundle: b.Dir, Target: o.Target, Device: dev.Name(), Model: b.Manifest.Model, Total: len(b.Manifest.Cases)}
	if rep.Target == "" {
		rep.Target = dev.Name()
	}
	faults, err := plant(dev, o.Faults)
	if err != nil {
		return nil, err
	}
	defer faults.clear()
	start := time.Now()
	for i, c := range cases {
		tol, err := b.tolerance(c, o.Overrides)
		if err != nil {
			return nil, err
		}
		r := b.ReplayWith(dev, c, tol, o.Replay)
		if f := faults.of(c.Node); f != nil && r.Err == "" {
			if err := b.checkFired(dev, faults, f, c); err != nil {
				return nil, err
			}
		}
		if r.lost != nil {
			// Every later case would fail the same way: stop with one error.
			return nil, fmt.Errorf("case %s (%d of %d): %w", c.ID, i+1, len(cases), r.lost)
		}
		rep.Results = append(rep.Results, r)
		if r.Passed() {
			rep.Passed++
		} else {
			rep.Failed++
		}
		if o.Progress != nil {
			o.Progress(i+1, len(cases))
		}
	}
	rep.Faults = faults.results
	rep.Duration = time.Since(start)
	return rep, nil
}

// tolerance is case c's tolerance after the overrides.
func (b *Bundle) tolerance(c *Case, o *Overrides) (Tolerance, error) {
	tol := c.Tolerance
	if o != nil && o.Policy != nil {
		in, out, err := b.Tensors(c)
		if err != nil {
			return Tolerance{}, err
		}
		attrs, err := DecodeAttrs(c.Op, c.Attrs)
		if err != nil {
			return Tolerance{}, fmt.Errorf("case %s: %w", c.ID, err)
		}
		op, _ := ir.OpNamed(c.Op) // known: DecodeAttrs checked it
		compute, err := c.ComputeDType()
		if err != nil {
			return Tolerance{}, err
		}
		tol = o.Policy.ForCompute(op, attrs, in, out, compute)
	}
	return o.Apply(c, tol), nil
}

// planted are the faults planted in a device during a test run.
type planted struct {
	dev     faultSetter
	results []FaultResult
}

func plant(dev runtime.Device, faults []Fault) (*planted, error) {
	p := &planted{}
	if len(faults) == 0 {
		return p, nil
	}
	fs, ok := dev.(faultSetter)
	if !ok {
		return nil, fmt.Errorf("device %s takes no test-only faults", dev.Name())
	}
	p.dev = fs
	for _, f := range faults {
		fs.SetFault(f.Node, f.Fault)
		p.results = append(p.results, FaultResult{Fault: f})
	}
	return p, nil
}

func (p *planted) of(node int) *FaultResult {
	for i := range p.results {
		if p.results[i].Node == node {
			return &p.results[i]
		}
	}
	return nil
}

func (p *planted) clear() {
	for _, f := range p.results {
		p.dev.SetFault(f.Node, "")
	}
}

// checkFired runs case c with its node's fault and without it and counts
// the fault as fired when any output bit differs.
func (b *Bundle) checkFired(dev runtime.Device, p *planted, f *FaultResult, c *Case) error {
	with, err := b.outputs(dev, c)
	if err != nil {
		return err
	}
	p.dev.SetFault(f.Node, "")
	without, err := b.outputs(dev, c)
	p.dev.SetFault(f.Node, f.Fault.Fault)
	if err != nil {
		return fmt.Errorf("case %s without its fault: %w", c.ID, err)
	}
	f.Cases++
	for i := range with {
		if MaxDiff(with[i], without[i]) > 0 {
			f.Fired++
			break
		}
	}
	return nil
}

// outputs runs case c on dev and returns its outputs.
func (b *Bundle) outputs(dev runtime.Device, c *Case) ([]*tensor.Tensor, error) {
	m, err := b.Module(c)
	if err != nil {
		return nil, err
	}
	ins, _, err := b.Tensors(c)
	if err != nil {
		return nil, err
	}
	return Run(dev, m, caseArgs(c, ins))
}

// caseArgs are the inputs of case c that are not weights.
func caseArgs(c *Case, ins []*tensor.Tensor) []*tensor.Tensor {
	var args []*tensor.Tensor
	for i, op := range c.Inputs {
		if op.Weight == "" {
			args = append(args, ins[i])
		}
	}
	return args
}
