package spirv

import (
	"testing"

	"github.com/tapml/tapml/codegen/internal/kerneltest"
	"github.com/tapml/tapml/codegen/wgsl"
	"github.com/tapml/tapml/codegen/wgslfront"
)

// FuzzTranslate checks that every module the front end accepts translates
// without a panic, into a module spirv-val accepts, or into an error (a
// table too long for SPIR-V, a constant that is not finite).
func FuzzTranslate(f *testing.F) {
	for _, name := range []string{"add", "gemv_t", "tiled_vec", "softmax", "attention", "constant_i32", "argmax", "rope"} {
		c := kerneltest.ByName(f, name)
		k, err := wgsl.Generate(c.Node(f), c.In, nil, wgsl.Options{Tuning: wgsl.DiscreteTuning()})
		if err != nil {
			f.Fatal(err)
		}
		f.Add(string(k.Source))
	}
	f.Add(kerneltest.DialectKernel)
	f.Add(controlFlow)
	f.Fuzz(func(t *testing.T, src string) {
		if wgslfront.Validate(src, wgsl.Entry) != nil {
			return
		}
		code, _, err := Translate(src)
		if err != nil {
			return
		}
		if err := spirvVal(t, code); err != nil {
			t.Fatalf("%v\n--- source ---\n%s", err, src)
		}
	})
}
