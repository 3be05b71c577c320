package onnx

import (
	"testing"

	"github.com/tapml/tapml/internal/testenv"
	"github.com/tapml/tapml/runtime"
)

// mnist-8 from the ONNX model zoo (opset 7: Conv, MaxPool, Relu, Reshape,
// MatMul, Add; weights as initializers that are also graph inputs) on its
// test input matches its expected output on cpu and webgpu. Tolerance: the
// largest difference within 1e-6 of the largest |logit| (the logits reach
// ~6600; f32 sums of up to 200 products in another order than CNTK's;
// measured 1.1e-7 on cpu, 1.5e-7 on lavapipe).
func TestMNIST(t *testing.T) {
	m, err := Load(testenv.Model(t, "mnist-8_cntk.onnx"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	in := readTensorPB(t, testenv.Model(t, "mnist_test_data_set_0/input_0.pb"))
	want := readTensorPB(t, testenv.Model(t, "mnist_test_data_set_0/output_0.pb"))
	const tol = 1e-6
	for _, dev := range []func(testing.TB) runtime.Device{func(testing.TB) runtime.Device { return cpuDev }, gpu} {
		d := dev(t)
		got := run(t, m, d, in)
		if len(got) != 1 || !sameShape(got[0], want) {
			t.Fatalf("%s: got %v, want %s", d.Name(), got, want)
		}
		abs, rel := diff(want, got[0])
		t.Logf("%s: max abs error %.3g (relative %.3g)", d.Name(), abs, rel)
		if rel > tol {
			t.Errorf("%s: max error %.3g of the largest logit > %g", d.Name(), rel, tol)
		}
	}
}
