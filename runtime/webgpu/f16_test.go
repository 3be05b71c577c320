package webgpu

import (
	"strings"
	"testing"

	"github.com/tapml/tapml/codegen/wgsl"
	"github.com/tapml/tapml/ir"
)

// TestNoF16 measures why the webgpu target computes in f32 under
// --compute f16: this wgpu's WGSL compiler (naga) rejects the f16 kernels
// (`enable f16;`) that the vulkan target runs. The day it accepts them,
// this test fails and the target can take them (runtime/target's
// OpenPrecision says which targets fall back).
func TestNoF16(t *testing.T) {
	n, outs := mkNode(t, 1, ir.OpAdd, nil, ir.T(ir.F32, ir.S(64)), ir.T(ir.F32, ir.S(64)))
	k, err := wgsl.Generate(n, []ir.Type{n.Inputs[0].Type, n.Inputs[1].Type}, outs,
		wgsl.Options{Features: wgsl.Features{F16: true}, Compute: ir.F16})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(k.Source), "enable f16;") {
		t.Fatalf("the f16 kernel does not enable f16:\n%s", k.Source)
	}
	err = testDev.Compile(k)
	if err == nil {
		t.Fatal("wgpu compiled an f16 kernel: the webgpu target could run --compute f16 now")
	}
	if !strings.Contains(err.Error(), "enable") {
		t.Errorf("wgpu refused the f16 kernel for another reason than `enable f16;`: %v", err)
	}
	t.Logf("wgpu on %s: %v", testDev.Name(), err)
}
