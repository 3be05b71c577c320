package carve

import (
	"errors"
	"fmt"
	"regexp"
	"time"

	"github.com/tapml/tapml/ir"
	"github.com/tapml/tapml/runtime"
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
	exec := runtime.NewExecutor(m, dev)
	defer exec.Close()
	if err := exec.Prepare(CaseFunc); err != nil {
		return nil, err
	}
	args := make([]*runtime.Buffer, 0, len(inputs))
	defer func() {
		for _, a := range args {
			a.Dev.Free(a)
		}
	}()
	for _, t := range inputs {
		a, err := dev.Upload(t.Clone())
		if err != nil {
			return nil, err
		}
		args = append(args, a)
	}
	res, err := exec.Call(CaseFunc, args...)
	if err != nil {
		return nil, err
	}
	out := make([]*tensor.Tensor, len(res))
	var derr error
	for i, r := range res {
		out[i], err = runtime.Download(r)
		if err != nil && derr == nil {
			derr = err
		}
		if !isAmong(r, args) {
			r.Dev.Free(r)
		}
	}
	if derr != nil {
		return nil, derr
	}
	return out, nil
}

func isAmong(b *runtime.Buffer, list []*runtime.Buffer) bool {
	for _, x := range list {
		if x == b {
			return true
		}
	}
	return false
}

// Replay runs case c alone on dev and compares its outputs with the
// reference under tol.
func (b *Bundle) Replay(dev runtime.Device, c *Case, tol Tolerance) Result {
	start := time.Now()
	res := Result{Case: c, Tolerance: tol}
	defer func() { res.Duration = time.Since(start) }()
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
	var args []*tensor.Tensor
	for i, o := range c.Inputs {
		if o.Weight == "" {
			args = append(args, ins[i])
		}
	}
	got, err := Run(dev, m, args)
	if err != nil {
		return fail(err)
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
	res.Duration = time.Since(start)
	return res
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
}

// Selected reports whether the options select case c.
func (o TestOptions) Selected(c *Case) bool {
	return o.Run == nil || o.Run.MatchString(c.ID) || o.Run.MatchString(c.Op) || o.Run.MatchString(c.Prov)
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
	start := time.Now()
	for i, c := range cases {
		tol := c.Tolerance
		if o.Overrides != nil && o.Overrides.Policy != nil {
			in, out, err := b.Tensors(c)
			if err != nil {
				return nil, err
			}
			attrs, err := DecodeAttrs(c.Op, c.Attrs)
			if err != nil {
				return nil, fmt.Errorf("case %s: %w", c.ID, err)
			}
			op, _ := ir.OpNamed(c.Op) // known: DecodeAttrs checked it
			tol = o.Overrides.Policy.For(op, attrs, in, out)
		}
		tol = o.Overrides.Apply(c, tol)
		r := b.Replay(dev, c, tol)
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
	rep.Duration = time.Since(start)
	return rep, nil
}
