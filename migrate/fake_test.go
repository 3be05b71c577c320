package migrate

import (
	"fmt"
	"math"
	"testing"

	"github.com/tapml/tapml/frontend"
	"github.com/tapml/tapml/ir"
	"github.com/tapml/tapml/runtime"
	"github.com/tapml/tapml/runtime/cpu"
	"github.com/tapml/tapml/tensor"
)

// fakeTarget is the CPU reference under another name, with planted bugs:
// the outputs of the nodes in perturb get a value added to every element,
// the nodes in fail return an error.
type fakeTarget struct {
	runtime.Device
	perturb map[int]float64
	fail    map[int]bool
}

func newFake() *fakeTarget {
	return &fakeTarget{Device: cpu.New(), perturb: map[int]float64{}, fail: map[int]bool{}}
}

func (d *fakeTarget) Name() string { return "fake" }

func (d *fakeTarget) Upload(t *tensor.Tensor) (*runtime.Buffer, error) {
	b, err := d.Device.Upload(t)
	if err != nil {
		return nil, err
	}
	b.Dev = d
	return b, nil
}

func (d *fakeTarget) Launch(n *ir.Node, in []*runtime.Buffer, outs []ir.Type) ([]*runtime.Buffer, error) {
	if d.fail[n.ID] {
		return nil, fmt.Errorf("planted failure")
	}
	res, err := d.Device.Launch(n, in, outs)
	if err != nil {
		return nil, err
	}
	for _, b := range res {
		b.Dev = d
		if delta := d.perturb[n.ID]; delta != 0 {
			t := b.Handle.(*tensor.Tensor)
			for i := 0; i < t.NumElements(); i++ {
				t.SetFloat64At(i, t.Float64At(i)+delta)
			}
		}
	}
	return res, nil
}

// tiny is the built-in tiny LLaMA (random weights, byte-level tokenizer).
func tiny(t testing.TB) *frontend.Model {
	t.Helper()
	m, err := frontend.BuiltinTiny()
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func newTinyDriver(t testing.TB, dev runtime.Device, o Options) *Driver {
	t.Helper()
	m := tiny(t)
	if o.Prompt == "" {
		o.Prompt = "hi there"
	}
	if o.Steps == 0 {
		o.Steps = 14
	}
	if o.Target == "" {
		o.Target = "fake"
	}
	if o.Supports == nil {
		o.Supports = cpu.Supports
	}
	d, err := New(m.Module, m.Tokenizer, dev, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Close)
	return d
}

// nodeAt returns the first candidate of op in function fn at or after
// fraction frac of the candidate order.
func nodeAt(t testing.TB, d *Driver, fn string, op ir.Op, frac float64) *ir.Node {
	t.Helper()
	order := d.Nodes()
	for _, n := range order[int(frac*float64(len(order))):] {
		if n.Op == op && d.Func(n.ID) == fn {
			return n
		}
	}
	t.Fatalf("no %s node in @%s after %g of the order", op, fn, frac)
	return nil
}

// maxSearchRuns is what bisection may take for one culprit among n: the
// prefix search and the check alone.
func maxSearchRuns(n int) int { return int(math.Ceil(math.Log2(float64(n)))) + 1 }
