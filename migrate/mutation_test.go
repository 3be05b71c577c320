package migrate

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/tapml/tapml/frontend/arch"
	"github.com/tapml/tapml/frontend/arch/llama"
	"github.com/tapml/tapml/frontend/tokenizer/sentencepiece"
	"github.com/tapml/tapml/internal/testenv/webgputest"
	"github.com/tapml/tapml/ir"
	"github.com/tapml/tapml/runtime/target"
)

// The fast mutation test (CI): a few mutants over different ops, functions
// and faults on stories260K; each is detected by the carved tests and
// named by bisection in at most ceil(log2 N) + 2 runs.
func TestMutationScoreFast(t *testing.T) {
	d := storiesDriver(t, Options{Steps: 8})
	suite, err := d.CarveSuite(filepath.Join(t.TempDir(), "suite"))
	if err != nil {
		t.Fatal(err)
	}
	defer suite.Close()
	if len(suite.BaselineFailures) != 0 {
		t.Fatalf("carved cases fail on the clean device: %v", suite.BaselineFailures)
	}
	var picked []Mutant
	want := map[string]bool{"matmul wrong_index decode": true, "rms_norm wrong_constant prefill": true,
		"attention wrong_index decode": true, "rope wrong_index prefill": true}
	for _, m := range d.Mutants(nil) {
		if want[m.Op+" "+m.Fault+" "+m.Func] {
			picked = append(picked, m)
		}
	}
	if len(picked) != len(want) {
		t.Fatalf("picked %d mutants, want %d", len(picked), len(want))
	}
	sc, err := d.MutationScore(suite, picked)
	if err != nil {
		t.Fatal(err)
	}
	if testing.Verbose() {
		sc.WriteText(os.Stdout)
	}
	bound := 1 + maxSearchRuns(sc.Nodes)
	for _, r := range sc.Results {
		if !r.Detected || !r.Localised || r.Runs > bound {
			t.Errorf("mutant %s: detected %v (%d/%d cases), localised %v (named %v), %d runs (bound %d)",
				r.Mutant, r.Detected, r.Failed, r.Cases, r.Localised, r.Named, r.Runs, bound)
		}
	}
	if len(d.Faults()) != 0 {
		t.Errorf("faults left planted: %v", d.Faults())
	}
}

// BenchmarkMutationScore plants one fault in one node for every (op,
// fault, function) that applies to stories260K (31 mutants over 10 ops),
// checks whether the carved tests detect it (carved once, every call of
// every node kept; replayed on the faulted device) and whether bisection
// names the node, and prints detected/total, localised/total and the runs
// bisection needed against the node count. Then it shows how the runs grow
// with the node count, on built-in LLaMA shapes of 1 to 16 layers.
//
//	go test ./migrate -run '^$' -bench MutationScore -benchtime 1x
func BenchmarkMutationScore(b *testing.B) {
	for i := 0; i < b.N; i++ {
		d := storiesDriver(b, Options{Steps: 10})
		suite, err := d.CarveSuite(filepath.Join(b.TempDir(), "suite"))
		if err != nil {
			b.Fatal(err)
		}
		if len(suite.BaselineFailures) != 0 {
			b.Fatalf("carved cases fail on the clean device: %v", suite.BaselineFailures)
		}
		mutants := d.Mutants(nil)
		sc, err := d.MutationScore(suite, mutants)
		suite.Close()
		if err != nil {
			b.Fatal(err)
		}
		fmt.Printf("carved suite: %d cases (every call of every node), all passing on the clean device\n\n", len(suite.Bundle.Manifest.Cases))
		sc.WriteText(os.Stdout)
		b.ReportMetric(float64(sc.Detected)/float64(max(sc.Effective(), 1)), "detected/total")
		b.ReportMetric(float64(sc.Localised)/float64(max(sc.Effective(), 1)), "localised/total")
		b.ReportMetric(sc.MeanRuns(), "runs/mutant")

		// Runs against nodes: one wrong_index in a decode matmul about
		// two thirds along the order, on LLaMA shapes of growing depth.
		fmt.Printf("\nbisect runs against the node count (built-in LLaMA shape, random weights, one faulty decode matmul):\n")
		fmt.Printf("%7s %6s %7s %5s %9s\n", "layers", "nodes", "log2", "runs", "named it")
		dev := webgputest.Device(b)
		for _, layers := range []int{1, 2, 4, 8, 16} {
			cfg := llama.Tiny
			cfg.Layers = layers
			m, err := arch.Build(fmt.Sprintf("tiny-%d", layers), cfg, llama.RandomWeights(cfg, 7))
			if err != nil {
				b.Fatal(err)
			}
			sd, err := New(m, sentencepiece.NewBytes(), dev, Options{Prompt: "hello", Steps: 8, Target: "webgpu"})
			if err != nil {
				b.Fatal(err)
			}
			n := nodeAt(b, sd, "decode", ir.OpMatmul, 0.67)
			if _, err := sd.Inject([]target.Injection{{Node: n.ID, Fault: "wrong_index"}}); err != nil {
				b.Fatal(err)
			}
			rep, err := sd.RunBisect()
			sd.ClearFaults()
			sd.Close()
			if err != nil {
				b.Fatal(err)
			}
			runs, named := 1, false
			if loc := rep.Localisation; loc != nil {
				runs += loc.Runs
				named = loc.Single && loc.Set[0].ID == n.ID
			}
			nodes := len(sd.Nodes())
			fmt.Printf("%7d %6d %7.1f %5d %9v\n", layers, nodes, math.Log2(float64(nodes)), runs, named)
		}
	}
}
