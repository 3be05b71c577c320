package webgpu

import (
	"os"
	"strings"
	"testing"

	"github.com/tapml/tapml/codegen"
	"github.com/tapml/tapml/ir"
	"github.com/tapml/tapml/runtime"
	"github.com/tapml/tapml/tensor"
)

// TestSPIRVModule loads a hand-assembled SPIR-V compute shader
// (testdata/double.spvasm, assembled with spirv-as into double.spv) through
// CreateShaderModuleSPIRV and runs it as a kernel: data[i] = 2·data[i] + i
// in place, for i < 100.
func TestSPIRVModule(t *testing.T) {
	bin, err := os.ReadFile("testdata/double.spv")
	if err != nil {
		t.Fatal(err)
	}
	words, err := spirvWords(bin)
	if err != nil {
		t.Fatal(err)
	}
	mod, err := testDev.CreateShaderModuleSPIRV(words)
	if err != nil {
		t.Fatal(err)
	}
	mod.Release()

	ty := ir.T(ir.F32, ir.S(100))
	k := &codegen.Kernel{Language: "spirv", Op: ir.OpProbe, NodeID: 900, Source: bin, Entry: "main",
		Bindings:      []codegen.Binding{{Index: 0, Name: "data", Access: codegen.ReadWrite, Type: ty, Input: 0, Output: 0}},
		WorkgroupSize: [3]int{64, 1, 1}, Grid: [3]int{2, 1, 1}}
	n, _ := mkNode(t, 900, ir.OpProbe, nil, ty)
	x := make([]float32, 100)
	for i := range x {
		x[i] = float32(i) * 0.5
	}
	in, err := testDev.Upload(tensor.FromFloat32([]int{100}, x))
	if err != nil {
		t.Fatal(err)
	}
	defer testDev.Free(in)
	out, err := testDev.LaunchKernel(n, k, []*runtime.Buffer{in})
	if err != nil {
		t.Fatal(err)
	}
	if out[0] != in {
		t.Fatal("the read_write binding did not return its input buffer")
	}
	got, err := testDev.Download(out[0])
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range got.Float32s() {
		if want := 2*x[i] + float32(i); v != want {
			t.Fatalf("data[%d] = %g, want %g", i, v, want)
		}
	}
}

// TestSPIRVErrors checks that invalid SPIR-V is an error, not a crash.
func TestSPIRVErrors(t *testing.T) {
	if _, err := testDev.CreateShaderModuleSPIRV([]uint32{1, 2, 3}); err == nil {
		t.Error("bad magic accepted")
	}
	bin, err := os.ReadFile("testdata/double.spv")
	if err != nil {
		t.Fatal(err)
	}
	words, _ := spirvWords(bin)
	words = words[:len(words)-3] // cut the function short
	_, err = testDev.CreateShaderModuleSPIRV(words)
	if err == nil {
		t.Fatal("truncated SPIR-V accepted")
	}
	if !strings.Contains(err.Error(), "spirv") {
		t.Errorf("error %q does not say spirv", err)
	}
	t.Log(err)
}
