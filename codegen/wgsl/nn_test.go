package wgsl

import (
	"strings"
	"testing"

	"github.com/tapml/tapml/codegen/internal/kerneltest"
)

// The convolution kernel blocks channels and pixels; wrong_index applies to
// the convolutions and pool2d only, f16_overflow to the convolutions and
// the sums.
func TestNNKernels(t *testing.T) {
	nn := map[string]bool{"iota": true, "conv2d": true, "conv_transpose2d": true, "pool2d": true, "resize": true, "reduce_sum": true, "reduce_mean": true, "reduce_max": true}
	for _, c := range kerneltest.Cases() {
		if !nn[c.Op] {
			continue
		}
		k, err := generate(t, c, Options{})
		if err != nil {
			t.Fatalf("%s: %v", c.Name, err)
		}
		src := string(k.Source)
		if c.Op == "conv2d" && !strings.Contains(src, "acc0_3") {
			t.Errorf("%s: no 4-pixel register tile in\n%s", c.Name, src)
		}
		if c.Name == "conv2d" && !strings.Contains(src, "acc7_3") {
			t.Errorf("%s: no 8×4 register tile in\n%s", c.Name, src)
		}
		_, err = generate(t, c, Options{Fault: FaultWrongIndex})
		applies := c.Op == "conv2d" || c.Op == "conv_transpose2d" || c.Op == "pool2d"
		if (err == nil) != applies {
			t.Errorf("%s: wrong_index: %v (applies: %v)", c.Name, err, applies)
		}
		_, err = generate(t, c, Options{Fault: FaultF16Overflow})
		applies = c.Op == "conv2d" || c.Op == "conv_transpose2d" || c.Op == "reduce_sum" || c.Op == "reduce_mean"
		if (err == nil) != applies {
			t.Errorf("%s: f16_overflow: %v (applies: %v)", c.Name, err, applies)
		}
	}
}
