package hf

import (
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/tapml/tapml/ir"
	"github.com/tapml/tapml/runtime"
	"github.com/tapml/tapml/runtime/cpu"
	"github.com/tapml/tapml/tensor"
)

// modelsDir returns the shared test models folder, ../shared/models from
// the repository root (the folder holding go.mod), or skips the test.
func modelsDir(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			break
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Skip("repository root not found")
		}
		dir = parent
	}
	models := filepath.Join(dir, "..", "shared", "models")
	if _, err := os.Stat(filepath.Join(models, "stories260K.bin")); err != nil {
		t.Skipf("test models not available: %v", err)
	}
	return models
}

// irRunner drives a module's prefill and decode on the CPU reference
// device with the LLM calling convention.
type irRunner struct {
	exec   *runtime.Executor
	caches []*runtime.Buffer
	pos    int
}

func newIRRunner(t testing.TB, m *ir.Module) *irRunner {
	t.Helper()
	r := &irRunner{exec: runtime.NewExecutor(m, cpu.New())}
	for _, p := range m.Func("decode").Params[2:] {
		b, err := r.exec.Upload("", tensor.New(p.Type.DType, p.Type.Shape.Sizes()))
		if err != nil {
			t.Fatal(err)
		}
		r.caches = append(r.caches, b)
	}
	return r
}

func (r *irRunner) forward(t testing.TB, toks []int) []float32 {
	t.Helper()
	fn := "decode"
	if len(toks) > 1 {
		fn = "prefill"
	}
	ids := make([]int32, len(toks))
	for i, v := range toks {
		ids[i] = int32(v)
	}
	tb, err := r.exec.Upload("", tensor.FromInt32([]int{len(ids)}, ids))
	if err != nil {
		t.Fatal(err)
	}
	pb, err := r.exec.Upload("", tensor.ScalarInt32(int32(r.pos)))
	if err != nil {
		t.Fatal(err)
	}
	args := append([]*runtime.Buffer{tb, pb}, r.caches...)
	out, err := r.exec.Call(fn, args...)
	if err != nil {
		t.Fatalf("%s at pos %d: %v", fn, r.pos, err)
	}
	copy(r.caches, out[1:])
	logits, err := runtime.Download(out[0])
	if err != nil {
		t.Fatal(err)
	}
	r.pos += len(toks)
	return append([]float32(nil), logits.Float32s()...)
}

// relErr returns max|got - want| / max|want| and where the largest
// difference is.
func relErr(got []float32, want []float64) (float64, int) {
	maxRef, maxDiff, at := 0.0, 0.0, 0
	for i, w := range want {
		maxRef = max(maxRef, math.Abs(w))
		if d := math.Abs(float64(got[i]) - w); d > maxDiff || math.IsNaN(d) {
			maxDiff, at = d, i
		}
	}
	return maxDiff / maxRef, at
}

func widen(x []float32) []float64 {
	out := make([]float64, len(x))
	for i, v := range x {
		out[i] = float64(v)
	}
	return out
}
