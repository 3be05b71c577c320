package migrate

import (
	"bytes"
	"encoding/json"
	"math"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/tapml/tapml/carve"
	"github.com/tapml/tapml/ir"
	"github.com/tapml/tapml/runtime/cpu"
	"github.com/tapml/tapml/runtime/target"
)

// With nothing wrong on the target, both strategies end with every
// candidate on it and tokens identical; the reference run is the
// all-source placement and agrees with itself bit for bit.
func TestIdenticalWithoutBug(t *testing.T) {
	d := newTinyDriver(t, newFake(), Options{})
	if len(d.Reference().Calls) < 3 {
		t.Fatalf("reference made %d forward calls; the test needs decode steps", len(d.Reference().Calls))
	}
	p, err := d.Eval("all source", "check", nil)
	if err != nil {
		t.Fatal(err)
	}
	if p.Divergent || p.MaxLogitErr != 0 || p.MaxKL != 0 {
		t.Fatalf("all-source run differs from the reference: %s", p.Summary())
	}
	for _, strategy := range []string{Incremental, Bisect} {
		rep, err := d.Run(strategy)
		if err != nil {
			t.Fatal(err)
		}
		if rep.Outcome != OutcomeIdentical || rep.ExitCode() != ExitIdentical {
			t.Errorf("%s: outcome %s (exit %d), want identical", strategy, rep.Outcome, rep.ExitCode())
		}
		if rep.Final.OnTarget != len(d.Nodes()) || !rep.Final.TokensMatch || rep.Final.Divergent {
			t.Errorf("%s: final placement %d of %d nodes, %s", strategy, rep.Final.OnTarget, len(d.Nodes()), rep.Final.Summary())
		}
		if rep.Localisation != nil || len(rep.Culprits) != 0 {
			t.Errorf("%s: a culprit without divergence: %+v", strategy, rep.Culprits)
		}
		var b bytes.Buffer
		if err := rep.WriteText(&b); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(b.String(), "result: identical") {
			t.Errorf("%s: text report does not say identical:\n%s", strategy, b.String())
		}
	}
}

// Incremental migration moves op kinds in the documented order (data,
// elementwise, reduction, contraction; names alphabetically within a kind)
// and each step adds exactly one op's nodes.
func TestIncrementalOrder(t *testing.T) {
	d := newTinyDriver(t, newFake(), Options{})
	rep, err := d.RunIncremental()
	if err != nil {
		t.Fatal(err)
	}
	var labels []string
	prev := 0
	for _, p := range rep.Points {
		labels = append(labels, strings.TrimPrefix(p.Label, "op "))
		if p.OnTarget <= prev {
			t.Errorf("step %s: %d nodes on target after %d", p.Label, p.OnTarget, prev)
		}
		prev = p.OnTarget
	}
	want := []string{"gather", "kv_write", "reshape", "slice", "fused_elementwise", "rope", "rope_kv_write", "rms_norm", "attention", "matmul", "rms_norm_matmul", "rms_norm_qkv", "rms_norm_swiglu"}
	if diff := cmp.Diff(want, labels); diff != "" {
		t.Errorf("incremental order (-want +got):\n%s", diff)
	}
}

// A perturbed node is named by both strategies, as a kernel bug (its
// isolated replay fails) whose inputs were exact, in about log2(N) runs;
// the regression bundle replays its failing case: failing on the buggy
// target, passing on the CPU.
func TestLocalisePerturbedNode(t *testing.T) {
	dev := newFake()
	for _, tc := range []struct {
		fn   string
		op   ir.Op
		frac float64
	}{{"decode", ir.OpMatmul, 0.7}, {"prefill", ir.OpRMSNorm, 0.2}, {"decode", ir.OpRopeKVWrite, 0.75}} {
		t.Run(tc.fn+"/"+tc.op.String(), func(t *testing.T) {
			reg := filepath.Join(t.TempDir(), "regression")
			d := newTinyDriver(t, dev, Options{Regression: reg})
			bad := nodeAt(t, d, tc.fn, tc.op, tc.frac)
			dev.perturb = map[int]float64{bad.ID: 0.5}
			defer func() { dev.perturb = map[int]float64{} }()
			for _, strategy := range []string{Bisect, Incremental} {
				rep, err := d.Run(strategy)
				if err != nil {
					t.Fatal(err)
				}
				if rep.Outcome != OutcomeLocalised || rep.ExitCode() != ExitLocalised {
					t.Fatalf("%s: outcome %s, want localised", strategy, rep.Outcome)
				}
				loc := rep.Localisation
				if !loc.Single || !loc.Complete || loc.Set[0].ID != bad.ID {
					t.Fatalf("%s: named %v (single %v), want node %d %s %s", strategy, ids(loc.Set), loc.Single, bad.ID, bad.Op, bad.Prov)
				}
				if rep.Runs != len(rep.Points) {
					t.Errorf("%s: %d runs counted, %d points reported", strategy, rep.Runs, len(rep.Points))
				}
				c := rep.Culprit()
				if c.Node != bad.ID || c.Prov != bad.Prov || c.Func != tc.fn || c.Verdict != VerdictKernelBug {
					t.Errorf("%s: culprit %+v", strategy, c)
				}
				if c.Isolated.Pass() || c.Accumulated.Pass() || c.Isolated.Calls == 0 {
					t.Errorf("%s: isolated %+v, accumulated %+v: both should fail", strategy, c.Isolated, c.Accumulated)
				}
				if strategy == Bisect {
					// (rope_kv_write's caches carry their own earlier error
					// from call to call: its accumulated error grows.)
					if tc.op != ir.OpRopeKVWrite && (c.InputRel != 0 || c.Amplification != 1) {
						t.Errorf("bisect: the culprit alone on the target has exact inputs: input err %g, amplification %g", c.InputRel, c.Amplification)
					}
					if max := maxSearchRuns(len(d.Nodes())); loc.Runs > max {
						t.Errorf("bisect took %d runs over %d nodes, want at most %d", loc.Runs, len(d.Nodes()), max)
					}
				}
				if !strings.Contains(rep.Verdict(), "node "+itoa(bad.ID)) {
					t.Errorf("%s: verdict does not name the node: %s", strategy, rep.Verdict())
				}
			}
			// The regression bundle (from the last run).
			checkRegression(t, reg, dev, bad.ID)
		})
	}
}

func itoa(i int) string { return strconv.Itoa(i) }

// Two nodes that are each within the thresholds but together beyond them
// are found as a window: the smallest contiguous set ending at the second.
func TestLocaliseWindow(t *testing.T) {
	dev := newFake()
	d := newTinyDriver(t, dev, Options{})
	// Two residual adds, each folded into its matmul (the addend c): they
	// carry the residual stream, so their perturbations add up.
	var a, b *ir.Node
	for _, n := range d.Nodes()[len(d.Nodes())*55/100:] {
		if n.Op == ir.OpMatmul && len(n.Inputs) == 3 && d.Func(n.ID) == "decode" && (a == nil || n.ID > a.ID+4) {
			if a == nil {
				a = n
			} else {
				b = n
				break
			}
		}
	}
	if b == nil {
		t.Fatal("no two residual matmuls in @decode")
	}
	dev.perturb = map[int]float64{a.ID: 0.02, b.ID: 0.02}
	one := func(n *ir.Node) Point {
		p, err := d.Eval("one", "check", []int{n.ID})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	both, err := d.Eval("both", "check", []int{a.ID, b.ID})
	if err != nil {
		t.Fatal(err)
	}
	ea, eb := one(a).MaxLogitErr, one(b).MaxLogitErr
	if !(both.MaxLogitErr > math.Max(ea, eb)*1.1) {
		t.Fatalf("the two perturbations do not add up: %g and %g alone, %g together", ea, eb, both.MaxLogitErr)
	}
	// Diverge only on both, by the logit error.
	d.Opts.Thresholds = Thresholds{MaxLogitErr: (math.Max(ea, eb) + both.MaxLogitErr) / 2, MaxKL: math.Inf(1)}
	rep, err := d.RunBisect()
	if err != nil {
		t.Fatal(err)
	}
	loc := rep.Localisation
	if loc == nil || loc.Single || !loc.Complete {
		t.Fatalf("localisation %+v, want a complete window", loc)
	}
	set := ids(loc.Set)
	if set[0] != a.ID || set[len(set)-1] != b.ID {
		t.Errorf("window %v, want from node %d to node %d", set, a.ID, b.ID)
	}
	if max := 2*maxSearchRuns(len(d.Nodes())) + 1; loc.Runs > max {
		t.Errorf("window search took %d runs, want at most %d", loc.Runs, max)
	}
	// Node b is right on reference inputs but its inputs were wrong: the
	// first suspect is the culprit b, then a (the window's start).
	if rep.Culprits[0].Node != b.ID || rep.Culprits[1].Node != a.ID {
		t.Errorf("suspects %d, %d; want %d, %d", rep.Culprits[0].Node, rep.Culprits[1].Node, b.ID, a.ID)
	}
	if !strings.Contains(rep.Verdict(), "culprit set of") {
		t.Errorf("verdict: %s", rep.Verdict())
	}
}

// A kernel that fails to run makes its run diverge, with the error, and is
// localised like a wrong one.
func TestLocaliseFailingKernel(t *testing.T) {
	dev := newFake()
	d := newTinyDriver(t, dev, Options{})
	bad := nodeAt(t, d, "decode", ir.OpRopeKVWrite, 0.5)
	dev.fail = map[int]bool{bad.ID: true}
	rep, err := d.RunBisect()
	if err != nil {
		t.Fatal(err)
	}
	if rep.Final.Err == "" || !strings.Contains(rep.Final.Err, "planted failure") || !rep.Final.Divergent {
		t.Errorf("final point: %s", rep.Final.Summary())
	}
	if math.IsInf(rep.Final.MaxLogitErr, 1) == false {
		t.Errorf("a failed run's error is %g, want +Inf", rep.Final.MaxLogitErr)
	}
	if loc := rep.Localisation; !loc.Single || loc.Set[0].ID != bad.ID {
		t.Errorf("named %v, want %d", ids(loc.Set), bad.ID)
	}
	if c := rep.Culprit(); c.Isolated.Err == "" || c.Verdict != VerdictKernelBug {
		t.Errorf("culprit %+v", c)
	}
	// JSON holds the infinities as strings.
	var buf bytes.Buffer
	if err := rep.WriteJSON(&buf); err != nil {
		t.Fatal(err)
	}
	var j map[string]any
	if err := json.Unmarshal(buf.Bytes(), &j); err != nil {
		t.Fatal(err)
	}
	if got := j["final"].(map[string]any)["max_logit_err"]; got != "inf" {
		t.Errorf("final max_logit_err in JSON = %v, want \"inf\"", got)
	}
}

// MaxRuns cuts the search short; the report says the set may not be minimal.
func TestMaxRuns(t *testing.T) {
	dev := newFake()
	d := newTinyDriver(t, dev, Options{MaxRuns: 2})
	bad := nodeAt(t, d, "decode", ir.OpMatmul, 0.8)
	dev.perturb = map[int]float64{bad.ID: 1}
	rep, err := d.RunBisect()
	if err != nil {
		t.Fatal(err)
	}
	loc := rep.Localisation
	if loc.Complete || loc.Runs != 2 || len(loc.Set) < 2 || !slices.Contains(ids(loc.Set), bad.ID) {
		t.Errorf("cut-short localisation: complete %v, %d runs, set %v (bad %d)", loc.Complete, loc.Runs, ids(loc.Set), bad.ID)
	}
	if !strings.Contains(rep.Verdict(), "cut short") {
		t.Errorf("verdict: %s", rep.Verdict())
	}
}

// Ops the target lacks stay on the source: they are not candidates, the
// report counts them, and the all-target placement still runs.
func TestUnsupportedStayOnSource(t *testing.T) {
	d := newTinyDriver(t, newFake(), Options{Supports: func(op ir.Op) bool { return op != ir.OpRope && cpu.Supports(op) }})
	for _, n := range d.Nodes() {
		if n.Op == ir.OpRope {
			t.Fatalf("rope node %d is a candidate", n.ID)
		}
	}
	if d.Unsupported()["rope"] == 0 {
		t.Errorf("unsupported = %v, want rope counted", d.Unsupported())
	}
	rep, err := d.RunBisect()
	if err != nil {
		t.Fatal(err)
	}
	if rep.Outcome != OutcomeIdentical {
		t.Errorf("outcome %s", rep.Outcome)
	}
	var b bytes.Buffer
	rep.WriteText(&b)
	if !strings.Contains(b.String(), "staying on the source, no kernel: rope") {
		t.Errorf("text report does not list rope:\n%s", b.String())
	}
}

func TestBadOptions(t *testing.T) {
	m := tiny(t)
	if _, err := New(m.Module, m.Tokenizer, newFake(), Options{Thresholds: Thresholds{MaxLogitErr: -1}}); err == nil {
		t.Error("negative threshold accepted")
	}
	if _, err := New(m.Module, nil, newFake(), Options{}); err == nil {
		t.Error("no tokenizer accepted")
	}
	if _, err := New(m.Module, m.Tokenizer, nil, Options{}); err == nil {
		t.Error("no device accepted")
	}
	notLM := ir.NewModule("x")
	if _, err := New(notLM, m.Tokenizer, newFake(), Options{Prompt: "hi"}); err == nil || !strings.Contains(err.Error(), "not a language model") {
		t.Errorf("a prompt for a module without prefill/decode: %v", err)
	}
	if _, err := New(m.Module, m.Tokenizer, newFake(), Options{Inputs: map[string]carve.Input{"x": {}}}); err == nil || !strings.Contains(err.Error(), "takes a prompt, not inputs") {
		t.Errorf("inputs for a language model: %v", err)
	}
	if _, err := New(m.Module, m.Tokenizer, newFake(), Options{Target: "nothing", Supports: func(ir.Op) bool { return false }}); err == nil || !strings.Contains(err.Error(), "none of the ops") {
		t.Errorf("a target with no kernel: %v", err)
	}
	d := newTinyDriver(t, newFake(), Options{})
	if _, err := d.Run("sideways"); err == nil {
		t.Error("unknown strategy accepted")
	}
	if _, err := d.Inject([]target.Injection{{Op: ir.OpMatmul, Fault: "wrong_index"}}); err == nil || !strings.Contains(err.Error(), "only on the webgpu, vulkan, remote: and llvm targets") {
		t.Errorf("injection on a device without faults: %v", err)
	}
}

func TestMetrics(t *testing.T) {
	a := []float32{1, 2, 3}
	if e, k := logitErr(a, a), klDiv(a, a); e != 0 || k != 0 {
		t.Errorf("identical logits: err %g, KL %g", e, k)
	}
	b := []float32{1, 2, 3.5}
	if e := logitErr(a, b); math.Abs(e-0.5) > 1e-12 {
		t.Errorf("logit err %g, want 0.5", e)
	}
	// KL of softmax([1 2 3]) from softmax([1 2 3.5]), computed by hand.
	p := []float64{math.Exp(1), math.Exp(2), math.Exp(3)}
	q := []float64{math.Exp(1), math.Exp(2), math.Exp(3.5)}
	sp, sq := p[0]+p[1]+p[2], q[0]+q[1]+q[2]
	want := 0.0
	for i := range p {
		want += p[i] / sp * math.Log((p[i]/sp)/(q[i]/sq))
	}
	if k := klDiv(a, b); math.Abs(k-want) > 1e-12 {
		t.Errorf("KL %g, want %g", k, want)
	}
	nan := []float32{1, float32(math.NaN()), 3}
	if e, k := logitErr(a, nan), klDiv(a, nan); !math.IsInf(e, 1) || !math.IsInf(k, 1) {
		t.Errorf("NaN logits: err %g, KL %g; want +Inf", e, k)
	}
	if e := logitErr(a, a[:2]); !math.IsInf(e, 1) {
		t.Errorf("length mismatch: %g", e)
	}
}

func TestClassify(t *testing.T) {
	pass := Error{Calls: 2}
	fail := Error{Calls: 2, Failed: 1}
	for _, tc := range []struct {
		iso, acc Error
		cond     float64
		want     string
	}{
		{fail, fail, 0, VerdictKernelBug},
		{fail, pass, 3, VerdictKernelBug},
		{pass, pass, 100, VerdictAccumulated},
		{pass, fail, 100, VerdictIllConditioned},
		{pass, fail, 2, VerdictPropagated},
		{Error{}, pass, 0, VerdictKernelBug}, // no call compared: not a pass
	} {
		if got := classify(tc.iso, tc.acc, tc.cond); got != tc.want {
			t.Errorf("classify(%+v, %+v, %g) = %s, want %s", tc.iso, tc.acc, tc.cond, got, tc.want)
		}
	}
}

func TestSteps(t *testing.T) {
	d := newTinyDriver(t, newFake(), Options{})
	ls := LayerSteps(d.Nodes(), d.Func)
	var labels []string
	total := 0
	for _, s := range ls {
		labels = append(labels, s.Label)
		total += len(s.Nodes)
	}
	if diff := cmp.Diff([]string{"before the layers", "layer 0", "layer 1", "after the layers"}, labels); diff != "" {
		t.Errorf("layer steps (-want +got):\n%s", diff)
	}
	if total != len(d.Nodes()) {
		t.Errorf("layer steps hold %d nodes, want %d", total, len(d.Nodes()))
	}
	for _, n := range ls[0].Nodes {
		if n.Op != ir.OpGather {
			t.Errorf("before the layers: %s %s", n.Op, n.Prov)
		}
	}
	for _, tc := range []struct {
		prov string
		want int
		ok   bool
	}{{"layers.3.attention.wq", 3, true}, {"model.layers.12.mlp", 12, true}, {"a+layers.2.x", 2, true}, {"tok_embeddings", 0, false}, {"layers.x.y", 0, false}} {
		if l, ok := nodeLayer(tc.prov); l != tc.want || ok != tc.ok {
			t.Errorf("nodeLayer(%q) = %d, %v", tc.prov, l, ok)
		}
	}
}

// The HTML report holds the plots, the table of runs and the culprit.
func TestHTML(t *testing.T) {
	dev := newFake()
	d := newTinyDriver(t, dev, Options{})
	bad := nodeAt(t, d, "decode", ir.OpMatmul, 0.6)
	dev.perturb = map[int]float64{bad.ID: 0.3}
	rep, err := d.RunIncremental()
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := rep.WriteHTML(&b); err != nil {
		t.Fatal(err)
	}
	h := b.String()
	// html/template writes a fused node's '+' as "&#43;".
	prov := strings.ReplaceAll(bad.Prov, "+", "&#43;")
	for _, want := range []string{"<svg", "migration curve", "nodes on the target", "#" + itoa(bad.ID), prov, "kernel bug", "diverges"} {
		if !strings.Contains(h, want) {
			t.Errorf("HTML report lacks %q", want)
		}
	}
	if n := strings.Count(h, "<svg"); n != 3 {
		t.Errorf("%d plots, want 3", n)
	}
	dir := t.TempDir()
	if err := rep.WriteFiles(filepath.Join(dir, "r.json"), filepath.Join(dir, "r.html")); err != nil {
		t.Fatal(err)
	}
}
