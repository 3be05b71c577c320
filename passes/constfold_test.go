package passes

import (
	"os"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/tapml/tapml/ir"
	"github.com/tapml/tapml/tensor"
)

// The weight constant folding makes holds the evaluated elements.
func TestConstantFoldingWeightData(t *testing.T) {
	src, err := os.ReadFile("testdata/constant_folding/large.tir")
	if err != nil {
		t.Fatal(err)
	}
	m, err := ir.Parse("large.tir", string(src))
	if err != nil {
		t.Fatal(err)
	}
	attachRamps(m) // @w = [[0, 1, 2], [3, 4, 5]]
	if err := runPass(Lookup("constant_folding"), m, withDefaults(Lookup("constant_folding"), Options{"max_inline_elements": int64(2)})); err != nil {
		t.Fatal(err)
	}
	w := m.Weight("folded.3") // transpose(@w) * 2
	if w == nil {
		t.Fatalf("no weight folded.3:\n%s", ir.Text(m))
	}
	raw, err := w.Source.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	tt, err := tensor.FromBytes(ir.F32, []int{3, 2}, raw)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]float32{0, 6, 2, 8, 4, 10}, tt.Float32s()); diff != "" {
		t.Errorf("folded data (-want +got):\n%s", diff)
	}
}
