package llm

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/tapml/tapml/artifact"
	"github.com/tapml/tapml/frontend/arch"
	"github.com/tapml/tapml/frontend/arch/llama"
	"github.com/tapml/tapml/frontend/arch/mamba"
	"github.com/tapml/tapml/ir"
	"github.com/tapml/tapml/runtime"
	"github.com/tapml/tapml/runtime/cpu"
)

// A context fitted to the run gives the same logits as the full one
// (the caches only hold positions the run never reaches) and allocates
// caches of the fitted length, also in a lowered module (a build folder's,
// whose decode step writes the caches with rope_kv_write); a context the
// header inflates is refused.
func TestFitContext(t *testing.T) {
	logits := func(fit int, lowered bool) ([]float32, int) {
		m, err := arch.Build("tiny", llama.Tiny, llama.RandomWeights(llama.Tiny, 3))
		if err != nil {
			t.Fatal(err)
		}
		if lowered {
			if m, err = artifact.Lower(m, "cpu", cpu.Supports); err != nil {
				t.Fatal(err)
			}
		}
		if err := FitContext(m, fit); err != nil {
			t.Fatal(err)
		}
		s := cpuSession(t, m)
		l, err := s.Forward([]int{1, 5, 6})
		if err != nil {
			t.Fatal(err)
		}
		l2, err := s.Forward([]int{7})
		if err != nil {
			t.Fatal(err)
		}
		return append(l, l2...), s.MaxSeq
	}
	for _, lowered := range []bool{false, true} {
		want, full := logits(0, lowered)
		got, fitted := logits(4, lowered)
		if full != llama.Tiny.MaxSeq || fitted != 4 {
			t.Fatalf("lowered %v: cache lengths %d and %d, want %d and 4", lowered, full, fitted, llama.Tiny.MaxSeq)
		}
		for i := range want {
			if got[i] != want[i] { // exact: the same ops on the same values
				t.Fatalf("lowered %v: logit %d: %v fitted, %v full", lowered, i, got[i], want[i])
			}
		}
	}
	huge := llama.Tiny
	huge.MaxSeq = 1 << 21
	huge.Layers = 40 // 80 caches of 256 MiB
	m, err := arch.Build("huge", huge, llama.RandomWeights(huge, 3))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := NewSession(runtime.NewExecutor(m, cpu.New())); err == nil {
		t.Error("a session with 20 GiB of caches was allocated")
	}
}

// A recurrent model's state does not grow with the context, so fitting
// keeps its shapes (Mamba's conv state has ConvKernel-1 rows, more than the
// fitted 2) and shortens only the session, through the meta max_seq.
func TestFitContextRecurrent(t *testing.T) {
	c := mamba.Config{Dim: 8, Inner: 16, State: 4, ConvKernel: 4, DtRank: 1, Layers: 1, Vocab: 20, NormEps: 1e-5, MaxSeq: 64}
	r := rand.New(rand.NewPCG(1, 2))
	m, err := arch.Build("mamba", c, arch.RandomWeights(c.WeightShapes(), func(arch.NamedShape) func() float64 {
		return arch.Symmetric(r, 0.5)
	}))
	if err != nil {
		t.Fatal(err)
	}
	shapes := func() []ir.Type {
		var ts []ir.Type
		for _, p := range m.Func("decode").Params[2:] {
			ts = append(ts, p.Type)
		}
		return ts
	}
	before := shapes()
	if err := FitContext(m, 2); err != nil {
		t.Fatal(err)
	}
	if after := shapes(); !slices.EqualFunc(before, after, ir.Type.Equal) {
		t.Errorf("state %v became %v", before, after)
	}
	s := cpuSession(t, m)
	if s.MaxSeq != 2 || m.Meta["max_seq"] != "2" {
		t.Errorf("MaxSeq %d, meta max_seq %q, want 2", s.MaxSeq, m.Meta["max_seq"])
	}
	if _, err := s.Forward([]int{1, 2}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Forward([]int{3}); err == nil {
		t.Error("a third token went past the fitted context of 2")
	}
}
