package spirv

import (
	"strings"
	"testing"

	"github.com/tapml/tapml/codegen"
	"github.com/tapml/tapml/codegen/internal/kerneltest"
	"github.com/tapml/tapml/codegen/wgsl"
)

// FuzzTranslate checks that every module the front end accepts translates
// without a panic, into a module spirv-val accepts, or into an error (a
// table too long for SPIR-V, a constant that is not finite).
func FuzzTranslate(f *testing.F) {
	// The WGSL of kernels of every kind, as the translator meets them.
	gen := func(c kerneltest.Case) (*codegen.Kernel, error) {
		return wgsl.Generate(c.Node(f), c.In, nil, wgsl.Options{Tuning: wgsl.DiscreteTuning()})
	}
	for _, src := range kerneltest.Sources(f, gen, "add", "gemv_t", "tiled_vec", "softmax", "attention", "constant_i32", "argmax", "rope") {
		f.Add(src)
	}
	f.Add(kerneltest.DialectKernel)
	f.Add(controlFlow)
	f.Add(kerneltest.MatrixKernel)
	f.Add(kerneltest.MatrixScaleKernel)
	f.Add(kerneltest.MatrixLoopKernel)
	f.Fuzz(func(t *testing.T, src string) {
		code, _, err := Translate(src) // most inputs are not WGSL: an error of the front end
		if err != nil {
			if strings.Contains(err.Error(), "internal error") {
				t.Fatalf("%v\n--- source ---\n%s", err, src)
			}
			return
		}
		if err := spirvVal(t, code); err != nil {
			t.Fatalf("%v\n--- source ---\n%s", err, src)
		}
	})
}
