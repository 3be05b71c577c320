// Package llmtest holds what the importers' tests share to check a language
// model's IR against an independent float64 forward pass: a runner that
// feeds tokens to the module on the CPU reference, the error measure, and
// the float64 building blocks every reference needs.
package llmtest

import (
	"math"
	"testing"

	"github.com/tapml/tapml/ir"
	"github.com/tapml/tapml/runtime"
	"github.com/tapml/tapml/runtime/cpu"
	"github.com/tapml/tapml/runtime/llm"
)

// Runner runs a module with the LLM calling convention (prefill/decode with
// KV caches) on the CPU reference, one llm.Session; errors fail the test.
type Runner struct {
	s *llm.Session
}

// NewRunner starts a session on the CPU reference at position 0; it is
// closed when the test ends.
func NewRunner(t testing.TB, m *ir.Module) *Runner {
	t.Helper()
	return NewRunnerOn(t, m, cpu.New())
}

// NewRunnerOn starts a session on dev at position 0; it is closed when the
// test ends (dev is not).
func NewRunnerOn(t testing.TB, m *ir.Module, dev runtime.Device) *Runner {
	t.Helper()
	exec := runtime.NewExecutor(m, dev)
	s, err := llm.NewSession(exec)
	if err != nil {
		exec.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		s.Close()
		exec.Close()
	})
	return &Runner{s: s}
}

// Forward feeds tokens at the current position (several through prefill,
// one through decode) and returns a copy of the next token's logits.
func (r *Runner) Forward(t testing.TB, toks []int) []float32 {
	t.Helper()
	pos := r.s.Pos
	logits, err := r.s.Forward(toks)
	if err != nil {
		t.Fatalf("forward of %d tokens at pos %d: %v", len(toks), pos, err)
	}
	return append([]float32(nil), logits...)
}

// Chunked feeds toks to m at once in one session, and in another as
// toks[:first] then one token at a time; it returns RelErr of the second's
// last logits against the first's, and where the largest difference is.
func Chunked(t testing.TB, m *ir.Module, toks []int, first int) (float64, int) {
	t.Helper()
	want := NewRunner(t, m).Forward(t, toks)
	r := NewRunner(t, m)
	got := r.Forward(t, toks[:first])
	for _, tok := range toks[first:] {
		got = r.Forward(t, []int{tok})
	}
	return RelErr(got, Widen(want))
}

// RelErr returns max|got - want| / max|want| and the index of the largest
// difference; a NaN in got counts as the largest (the error is NaN).
func RelErr(got []float32, want []float64) (float64, int) {
	maxRef, maxDiff, at := 0.0, 0.0, 0
	for i, w := range want {
		maxRef = max(maxRef, math.Abs(w))
		if d := math.Abs(float64(got[i]) - w); d > maxDiff || math.IsNaN(d) {
			maxDiff, at = d, i
		}
	}
	return maxDiff / maxRef, at
}

// Widen converts logits to float64, to use one run as another's reference.
func Widen(x []float32) []float64 {
	out := make([]float64, len(x))
	for i, v := range x {
		out[i] = float64(v)
	}
	return out
}

// MatVec is W·x for W stored out × in (rows of in values).
func MatVec(w [][]float64, x []float64) []float64 {
	out := make([]float64, len(w))
	for i, row := range w {
		s := 0.0
		for j, v := range row {
			s += v * x[j]
		}
		out[i] = s
	}
	return out
}

// RMSNorm is x / sqrt(mean(x²) + eps) · w.
func RMSNorm(x, w []float64, eps float64) []float64 {
	ss := 0.0
	for _, v := range x {
		ss += v * v
	}
	s := 1 / math.Sqrt(ss/float64(len(x))+eps)
	out := make([]float64, len(x))
	for i := range x {
		out[i] = x[i] * s * w[i]
	}
	return out
}

// CheckRopeFused fails the test when a decode step of the lowered module m
// still has a rope or a kv_write of a rope's output: every rope variant
// the frontends build fuses with its kv_writes into rope_kv_write
// (passes/ropekv.go). A kv_write of an unrotated k (learned positions)
// stays.
func CheckRopeFused(t testing.TB, m *ir.Module) {
	t.Helper()
	for _, n := range m.Func("decode").Nodes {
		if n.Op == ir.OpRope || n.Op == ir.OpKVWrite && n.Inputs[1].Def != nil && n.Inputs[1].Def.Op == ir.OpRope {
			t.Errorf("decode's %s is not fused into rope_kv_write", n)
		}
	}
}
