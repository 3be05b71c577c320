package wgsl

import (
	"strings"
	"testing"

	"github.com/tapml/tapml/codegen/internal/kerneltest"
	"github.com/tapml/tapml/ir"
)

// The convolution kernel blocks channels and pixels; wrong_index applies to
// the convolutions and pool2d only, f16_overflow to the convolutions and
// the sums.
func TestNNKernels(t *testing.T) {
	nn := map[ir.Op]bool{ir.OpIota: true, ir.OpConv2D: true, ir.OpConvTranspose2D: true, ir.OpPool2D: true, ir.OpResize: true, ir.OpReduceSum: true, ir.OpReduceMean: true, ir.OpReduceMax: true}
	for _, c := range kerneltest.Cases() {
		if !nn[c.Op] {
			continue
		}
		k, err := generate(t, c, Options{})
		if err != nil {
			t.Fatalf("%s: %v", c.Name, err)
		}
		src := string(k.Source)
		if c.Op == ir.OpConv2D && !strings.Contains(src, "acc0_3") {
			t.Errorf("%s: no 4-pixel register tile in\n%s", c.Name, src)
		}
		if c.Name == "conv2d" && !strings.Contains(src, "acc7_3") {
			t.Errorf("%s: no 8×4 register tile in\n%s", c.Name, src)
		}
		_, err = generate(t, c, Options{Fault: FaultWrongIndex})
		applies := c.Op == ir.OpConv2D || c.Op == ir.OpConvTranspose2D || c.Op == ir.OpPool2D
		if (err == nil) != applies {
			t.Errorf("%s: wrong_index: %v (applies: %v)", c.Name, err, applies)
		}
		_, err = generate(t, c, Options{Fault: FaultF16Overflow})
		applies = c.Op == ir.OpConv2D || c.Op == ir.OpConvTranspose2D || c.Op == ir.OpReduceSum || c.Op == ir.OpReduceMean
		if (err == nil) != applies {
			t.Errorf("%s: f16_overflow: %v (applies: %v)", c.Name, err, applies)
		}
	}
}
