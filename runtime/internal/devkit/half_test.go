package devkit

import (
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/tapml/tapml/tensor"
)

// TestHalf checks the f16 storage conversions: ToHalf rounds to nearest
// (1+2^-12, a quarter of f16's ulp at 1, goes to 1; the subnormal 2^-24
// stays), beyond 65504 to infinity; FromHalf widens exactly, so the round
// trip is the f16 value itself.
func TestHalf(t *testing.T) {
	in := []float32{0, 1, 1 + 0x1p-12, 1 + 0x1p-10, 65504, 70000, -70000, -3.14159, 0x1p-24, float32(math.NaN())}
	want := []float32{0, 1, 1, 1 + 0x1p-10, 65504, float32(math.Inf(1)), float32(math.Inf(-1)), -3.140625, 0x1p-24, float32(math.NaN())}
	src := tensor.FromFloat32([]int{len(in)}, in)
	half := ToHalf(src.Data)
	if len(half) != 2*len(in) {
		t.Fatalf("ToHalf of %d values gave %d bytes", len(in), len(half))
	}
	back := tensor.New(src.DType, src.Shape)
	FromHalf(half, back.Data)
	if diff := cmp.Diff(want, back.Float32s(), cmp.Comparer(func(a, b float32) bool {
		return a == b || a != a && b != b // NaN stays NaN
	})); diff != "" {
		t.Errorf("f32 through f16 (-want +got):\n%s", diff)
	}
}
