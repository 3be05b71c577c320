package vulkan

import (
	"bytes"
	_ "embed"
	"encoding/binary"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/tapml/tapml/codegen"
	"github.com/tapml/tapml/internal/testenv"
	"github.com/tapml/tapml/ir"
	"github.com/tapml/tapml/runtime"
	"github.com/tapml/tapml/tensor"
	"github.com/x448/float16"
)

var update = flag.Bool("update", false, "rewrite testdata/coopmat.spv from testdata/coopmat.spvasm")

// coopMatrixSPV is testdata/coopmat.spvasm assembled. It is embedded so
// that a test binary built with `go test -c` runs TestCooperativeMatrix
// on a machine with neither the source tree nor spirv-as.
//
//go:embed testdata/coopmat.spv
var coopMatrixSPV []byte

// TestCoopMatrixModule checks that testdata/coopmat.spv is the current
// assembly of coopmat.spvasm (-update rewrites it) and that spirv-val
// takes it.
func TestCoopMatrixModule(t *testing.T) {
	as, val := testenv.Tool(t, "spirv-as"), testenv.Tool(t, "spirv-val")
	out := filepath.Join(t.TempDir(), "coopmat.spv")
	if b, err := exec.Command(as, "--target-env", "vulkan1.1", "testdata/coopmat.spvasm", "-o", out).CombinedOutput(); err != nil {
		t.Fatalf("spirv-as: %v\n%s", err, b)
	}
	if b, err := exec.Command(val, "--target-env", "vulkan1.1", out).CombinedOutput(); err != nil {
		t.Fatalf("spirv-val: %v\n%s", err, b)
	}
	got, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if *update {
		if err := os.WriteFile("testdata/coopmat.spv", got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if !bytes.Equal(got, coopMatrixSPV) {
		t.Error("testdata/coopmat.spv is not the assembly of coopmat.spvasm: run go test ./runtime/vulkan -run TestCoopMatrixModule -update")
	}
}

// coopMatrixKernel is testdata/coopmat.spv as a kernel: A and B, 16x16
// f16 (B stored column-major), in; D = A·B, 16x16 f32, out; one subgroup
// of 32 invocations.
func coopMatrixKernel() *codegen.Kernel {
	half, float := ir.T(ir.F16, ir.S(16, 16)), f32(16, 16)
	return &codegen.Kernel{Language: "spirv", Op: ir.OpProbe, NodeID: 901, Source: coopMatrixSPV, Entry: "main",
		Bindings: []codegen.Binding{
			{Index: 0, Name: "a", Access: codegen.Read, Type: half, Input: 0, Output: -1},
			{Index: 1, Name: "b", Access: codegen.Read, Type: half, Input: 1, Output: -1},
			{Index: 2, Name: "d", Access: codegen.Write, Type: float, Input: -1, Output: 0},
		},
		WorkgroupSize: [3]int{32, 1, 1}, Grid: [3]int{1, 1, 1}}
}

// TestCooperativeMatrix runs a 16x16x16 cooperative-matrix product on a
// device with the feature (an NVIDIA GPU) and compares it with the same
// product in Go, exactly: the inputs are integers in [-3, 3], each
// product of two f16s is exact in f32 and each sum of 16 of them is an
// integer of magnitude at most 144, far inside f32's 24 bits, so any
// order of summation gives the same result. On a device without it
// (lavapipe) the feature is reported off and the module is refused with
// the reason. On both, a device opened with NoSubgroupMatrix refuses it.
func TestCooperativeMatrix(t *testing.T) {
	const n = 16
	a, b := make([]float32, n*n), make([]float32, n*n) // a row-major, b column-major
	want := make([]float32, n*n)
	for i := range n {
		for k := range n {
			a[i*n+k] = float32((i+2*k)%7 - 3)
			b[i*n+k] = float32((3*i+k)%5 - 2) // b[k][j] is at j*n+k: here j = i
		}
	}
	for i := range n {
		for j := range n {
			for k := range n {
				want[i*n+j] += a[i*n+k] * b[j*n+k]
			}
		}
	}
	k := coopMatrixKernel()
	info := testDev.Info()
	p := &testDev.phys
	t.Logf("%s: subgroup matrices %v (f16 %v, subgroup size %d; VK_NV_cooperative_matrix with the feature %v, stages %#x, shapes %+v)",
		info.Name, info.SubgroupMatrix, info.F16, info.SubgroupSize, p.CoopMatrix, p.CoopMatrixStages, p.CoopMatrixShapes)
	if info.SubgroupMatrix != testDev.Features().SubgroupMatrix || info.SubgroupMatrix && !info.F16 {
		t.Errorf("Info %+v and Features %+v disagree, or subgroup matrices without f16", info, testDev.Features())
	}
	if !info.SubgroupMatrix {
		wantError(t, "without the feature", testDev.Compile(k), "cooperative matrices (SPV_NV_cooperative_matrix)", "off on this device")
	} else {
		ins := []*runtime.Buffer{upload(t, testDev, halves(a, n)), upload(t, testDev, halves(b, n))}
		out, err := testDev.LaunchKernel(&ir.Node{ID: 901, Op: ir.OpProbe}, k, ins)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, download(t, testDev, out[0]).Float32s()); diff != "" {
			t.Errorf("D = A·B (-want +got):\n%s", diff)
		}
	}
	off := openTest(t, Options{NoSubgroupMatrix: true})
	if off.Info().SubgroupMatrix || off.Features().SubgroupMatrix {
		t.Error("NoSubgroupMatrix: the feature is on")
	}
	wantError(t, "NoSubgroupMatrix", off.Compile(k), "off on this device")
}

// halves is an f16 tensor of shape n x n holding xs (exact in f16).
func halves(xs []float32, n int) *tensor.Tensor {
	t := tensor.New(ir.F16, []int{n, n})
	for i, x := range xs {
		binary.LittleEndian.PutUint16(t.Data[2*i:], float16.Fromfloat32(x).Bits())
	}
	return t
}
