package migrate

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tapml/tapml/carve"
	"github.com/tapml/tapml/frontend"
	"github.com/tapml/tapml/internal/testenv"
	"github.com/tapml/tapml/ir"
	"github.com/tapml/tapml/runtime"
	"github.com/tapml/tapml/runtime/cpu"
)

// mnist is the ONNX model zoo's mnist-8: a model that is not a language
// model (Conv, MaxPool, Relu, Reshape, MatMul, Add; one input, one
// output).
func mnist(t testing.TB) *frontend.Model {
	t.Helper()
	m, err := frontend.Load(testenv.Model(t, "mnist-8_cntk.onnx"), frontend.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func newMnistDriver(t testing.TB, dev *fakeTarget, o Options) *Driver {
	t.Helper()
	o.Target, o.Supports = "fake", cpu.Supports
	d, err := New(mnist(t).Module, nil, dev, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Close)
	return d
}

// A model that is not a language model migrates on its inputs: with
// nothing wrong, every output agrees within its end-to-end tolerance,
// which the report states with its rule.
func TestPlainModelIdentical(t *testing.T) {
	d := newMnistDriver(t, newFake(), Options{Seed: 7})
	if d.IsLanguageModel() {
		t.Fatal("mnist taken for a language model")
	}
	rep, err := d.Run(Incremental)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Outcome != OutcomeIdentical || rep.Final.OnTarget != len(d.Nodes()) {
		t.Fatalf("outcome %s with %d of %d nodes on the target", rep.Outcome, rep.Final.OnTarget, len(d.Nodes()))
	}
	if len(rep.Outputs) != 1 || len(rep.Final.Outputs) != 1 {
		t.Fatalf("outputs %+v, final %+v: want one", rep.Outputs, rep.Final.Outputs)
	}
	tol := rep.Outputs[0].Tolerance
	// mnist's worst path: two convolutions (5·5·1 and 5·5·8 terms), the
	// classifier matmul (256 terms) and the adds; each adds 8·sqrt(K)·eps
	// (a few elementwise ops 4·eps each).
	if tol.RTol < 8*(5+14.1+16)*0x1p-23 || tol.RTol > 1e-3 || !strings.Contains(tol.Rule, "end to end over") {
		t.Errorf("output tolerance %+v", tol)
	}
	var b bytes.Buffer
	if err := rep.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"each output's tolerance", "end to end over", "random: uniform [-1, 1), xorshift32 seed 7", "result: identical", "kernel time on fake"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("text report lacks %q:\n%s", want, b.String())
		}
	}
}

// A planted bug in a node of an ONNX model is localised by both
// strategies, judged a kernel bug from its isolated error, and written as
// a regression bundle that fails on the buggy target and passes on the
// CPU; the report names the output that diverged and its error over its
// tolerance.
func TestPlainModelLocalise(t *testing.T) {
	dev := newFake()
	reg := filepath.Join(t.TempDir(), "reg")
	d := newMnistDriver(t, dev, Options{Regression: reg, Seed: 3})
	var bad *ir.Node
	for _, n := range d.Nodes() {
		if n.Op == ir.OpConv2D {
			bad = n // the last convolution
		}
	}
	dev.perturb = map[int]float64{bad.ID: 0.25}
	for _, strategy := range []string{Bisect, Incremental} {
		rep, err := d.Run(strategy)
		if err != nil {
			t.Fatal(err)
		}
		c := rep.Culprit()
		if rep.ExitCode() != ExitLocalised || c == nil || c.Node != bad.ID || c.Verdict != VerdictKernelBug {
			t.Fatalf("%s: exit %d, culprit %+v; want node %d, a kernel bug", strategy, rep.ExitCode(), c, bad.ID)
		}
		if rep.Final.MaxRatio <= 1 || rep.Final.failingOutputs() != 1 {
			t.Errorf("%s: final placement %s", strategy, rep.Final.Summary())
		}
		var html bytes.Buffer
		if err := rep.WriteHTML(&html); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(html.String(), "max error / tolerance over the outputs") || !strings.Contains(html.String(), "end to end over") {
			t.Errorf("%s: HTML report lacks the outputs' curve or tolerances", strategy)
		}
	}
	m := checkRegression(t, reg, dev, bad.ID)
	if m.Seed != 3 || len(m.Inputs) != 1 || m.Prompt != "" {
		t.Errorf("regression bundle records seed %d, inputs %+v, prompt %q", m.Seed, m.Inputs, m.Prompt)
	}
}

// checkRegression checks a regression bundle: cases of node bad only,
// failing on the buggy target dev and passing on the CPU. It returns the
// bundle's manifest.
func checkRegression(t *testing.T, dir string, dev runtime.Device, bad int) *carve.Manifest {
	t.Helper()
	b, err := carve.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if len(b.Manifest.Cases) == 0 {
		t.Fatal("empty regression bundle")
	}
	for _, c := range b.Manifest.Cases {
		if c.Node != bad {
			t.Errorf("regression case %s is node %d, want %d", c.ID, c.Node, bad)
		}
	}
	onBug, err := b.Test(dev, carve.TestOptions{})
	if err != nil {
		t.Fatal(err)
	}
	onCPU, err := b.Test(cpu.New(), carve.TestOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if onBug.OK() || !onCPU.OK() {
		t.Errorf("regression: %s on the buggy target, %s on the CPU; want failing, passing", onBug.Summary(), onCPU.Summary())
	}
	return b.Manifest
}
