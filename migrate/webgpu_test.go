package migrate

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tapml/tapml/carve"
	"github.com/tapml/tapml/internal/testenv/webgputest"
	"github.com/tapml/tapml/ir"
	"github.com/tapml/tapml/runtime/target"
)

func storiesDriver(t testing.TB, o Options) *Driver {
	t.Helper()
	m := loadStories(t)
	dev := webgputest.Device(t)
	if o.Prompt == "" {
		o.Prompt = storiesPrompt
	}
	if o.Steps == 0 {
		o.Steps = 12
	}
	o.Target = "webgpu"
	d, err := New(m.Module, m.Tokenizer, dev, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Close)
	t.Cleanup(d.ClearFaults) // the device is shared by the test binary
	return d
}

// With no fault, stories260K migrates fully to webgpu with identical
// tokens, by both strategies, and the reports say so.
func TestStoriesWebGPUIdentical(t *testing.T) {
	d := storiesDriver(t, Options{})
	if n := len(d.Nodes()); n != 151 || len(d.Unsupported()) != 0 {
		t.Errorf("%d candidates (unsupported %v); stories260K has 151 after the default pipeline, all with WGSL kernels", n, d.Unsupported())
	}
	for _, strategy := range []string{Incremental, Bisect} {
		rep, err := d.Run(strategy)
		if err != nil {
			t.Fatal(err)
		}
		if rep.Outcome != OutcomeIdentical || rep.ExitCode() != 0 {
			t.Fatalf("%s: %s", strategy, rep.Verdict())
		}
		f := rep.Final
		if f.OnTarget != 151 || !f.TokensMatch || f.Err != "" || len(f.Greedy) != len(d.Reference().Greedy) {
			t.Errorf("%s: final %s with %d nodes on target", strategy, f.Summary(), f.OnTarget)
		}
		var txt, js bytes.Buffer
		if err := rep.WriteText(&txt); err != nil {
			t.Fatal(err)
		}
		if err := rep.WriteJSON(&js); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(txt.String(), "result: identical: with all 151 candidate nodes on webgpu") {
			t.Errorf("%s: text report:\n%s", strategy, txt.String())
		}
		var j struct {
			Identical bool   `json:"identical"`
			Outcome   string `json:"outcome"`
			ExitCode  int    `json:"exit_code"`
			Final     struct {
				OnTarget    int  `json:"on_target"`
				TokensMatch bool `json:"tokens_match"`
			} `json:"final"`
		}
		if err := json.Unmarshal(js.Bytes(), &j); err != nil {
			t.Fatal(err)
		}
		if !j.Identical || j.Outcome != "identical" || j.ExitCode != 0 || j.Final.OnTarget != 151 || !j.Final.TokensMatch {
			t.Errorf("%s: JSON report %+v", strategy, j)
		}
	}
}

// A fault planted in every rope kernel is found by incremental migration
// at the rope step and narrowed to the first rope node in order, a kernel
// bug; its regression bundle fails on the faulted device and passes once
// the fault is removed.
func TestStoriesWebGPUInjectOp(t *testing.T) {
	reg := filepath.Join(t.TempDir(), "reg")
	d := storiesDriver(t, Options{Regression: reg})
	faults, err := d.Inject([]target.Injection{{Op: ir.OpRope, Fault: "wrong_constant"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(faults) != 10 {
		t.Errorf("planted %d faults, want every rope node (10: prefill's; decode's are in rope_kv_write)", len(faults))
	}
	defer d.ClearFaults()
	rep, err := d.RunIncremental()
	if err != nil {
		t.Fatal(err)
	}
	if rep.Final.Label != "op rope" || !rep.Final.Divergent {
		t.Errorf("diverging step %q (%s), want op rope", rep.Final.Label, rep.Final.Summary())
	}
	var first int
	for _, n := range d.Nodes() {
		if n.Op == ir.OpRope {
			first = n.ID
			break
		}
	}
	c := rep.Culprit()
	if c == nil || !rep.Localisation.Single || c.Node != first || c.Verdict != VerdictKernelBug || c.Fault != "wrong_constant" {
		t.Fatalf("culprit %+v, want node %d, a kernel bug", c, first)
	}
	b, err := carve.Open(reg)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	faulted, err := b.Test(d.Target, carve.TestOptions{})
	if err != nil {
		t.Fatal(err)
	}
	d.ClearFaults()
	clean, err := b.Test(d.Target, carve.TestOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if faulted.OK() || !clean.OK() {
		t.Errorf("regression bundle: %s faulted, %s clean; want failing, passing", faulted.Summary(), clean.Summary())
	}
}

// Injection errors: a fault that applies to no kernel of the op, a node
// that does not exist.
func TestStoriesWebGPUInjectErrors(t *testing.T) {
	d := storiesDriver(t, Options{Steps: 8})
	for _, tc := range []struct {
		inj  target.Injection
		want string
	}{
		{target.Injection{Op: ir.OpGather, Fault: "wrong_constant"}, "applies to none"},
		{target.Injection{Op: ir.OpSoftmax, Fault: "wrong_index"}, "no softmax node"},
		{target.Injection{Node: 99999, Fault: "wrong_index"}, "no op node with id 99999"},
		{target.Injection{Node: d.Nodes()[0].ID, Fault: "missing_barrier"}, "does not apply"},
	} {
		if _, err := d.Inject([]target.Injection{tc.inj}); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("inject %s: %v, want %q", tc.inj, err, tc.want)
		}
	}
	if len(d.Faults()) != 0 {
		t.Errorf("failed injections left faults: %v", d.Faults())
	}
}
