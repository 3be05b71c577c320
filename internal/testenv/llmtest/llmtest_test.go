package llmtest

import (
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/tapml/tapml/frontend/arch"
	"github.com/tapml/tapml/frontend/arch/llama"
)

func TestRelErr(t *testing.T) {
	if e, at := RelErr([]float32{1, 2.5, -4}, []float64{1, 2, -4}); e != 0.125 || at != 1 {
		t.Errorf("RelErr = %g at %d, want 0.125 at 1", e, at)
	}
	if e, at := RelErr([]float32{1, float32(math.NaN()), 3}, []float64{1, 2, 3}); !math.IsNaN(e) || at != 1 {
		t.Errorf("RelErr with a NaN = %g at %d, want NaN at 1", e, at)
	}
}

func TestMath(t *testing.T) {
	if got := MatVec([][]float64{{1, 2}, {3, 4}, {0, -1}}, []float64{1, 1}); !cmp.Equal(got, []float64{3, 7, -1}) {
		t.Errorf("MatVec = %v", got)
	}
	// mean(x²) = 12.5, so x is divided by sqrt(12.5 + 3.5) = 4.
	if got := RMSNorm([]float64{3, -4}, []float64{1, 2}, 3.5); !cmp.Equal(got, []float64{0.75, -2}) {
		t.Errorf("RMSNorm = %v", got)
	}
	if got := Widen([]float32{0.5, -2}); !cmp.Equal(got, []float64{0.5, -2}) {
		t.Errorf("Widen = %v", got)
	}
}

// A prefill of n tokens and n decode steps give the same logits, and the
// runner keeps its position between calls.
func TestRunner(t *testing.T) {
	m, err := arch.Build("tiny", llama.Tiny, llama.RandomWeights(llama.Tiny, 3))
	if err != nil {
		t.Fatal(err)
	}
	toks := []int{1, 5, 9, 2}
	a, b := NewRunner(t, m), NewRunner(t, m)
	want := a.Forward(t, toks)
	var got []float32
	for _, tok := range toks {
		got = b.Forward(t, []int{tok})
	}
	if e, at := RelErr(got, Widen(want)); e > 1e-5 {
		t.Errorf("decode against prefill: relative error %g at %d", e, at)
	}
	if e, _ := RelErr(a.Forward(t, []int{3}), Widen(b.Forward(t, []int{3}))); e > 1e-5 {
		t.Errorf("next step: relative error %g", e)
	}
}
