package spirv

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/tapml/tapml/codegen/internal/kerneltest"
)

// disText translates src, checks it with spirv-val and returns spirv-dis's
// text of the module, with friendly names (%uint_16, %false, %ta, ...).
func disText(t *testing.T, src string) string {
	t.Helper()
	code, _, err := Translate(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := spirvVal(t, code); err != nil {
		t.Fatalf("spirv-val: %v", err)
	}
	file := filepath.Join(t.TempDir(), "k.spv")
	if err := os.WriteFile(file, code, 0o644); err != nil {
		t.Fatal(err)
	}
	return disassemble(file)
}

// TestMatrixKernels translates the subgroup matrix kernels, which
// spirv-val must accept (lavapipe has no cooperative matrices, so they
// are not run here), and checks the NV instructions they become: the
// capability and extension, one cooperative matrix type per element type
// and shape (a left and a right f16 matrix share one), and each load,
// multiply-accumulate and store with its operands.
func TestMatrixKernels(t *testing.T) {
	cases := []struct {
		name, src string
		want      []string
	}{
		{"staged", kerneltest.MatrixKernel, []string{
			`OpCapability CooperativeMatrixNV`,
			`OpExtension "SPV_NV_cooperative_matrix"`,
			`OpTypeCooperativeMatrixNV %float %uint_3 %uint_16 %uint_16`,
			`OpConstantNull %X`,
			`OpTypeCooperativeMatrixNV %half %uint_3 %uint_16 %uint_16`,
			`OpAccessChain %_ptr_Workgroup_half %ta %uint_0`,
			`OpCooperativeMatrixLoadNV %X %X %uint_32 %false`,
			`OpAccessChain %_ptr_Workgroup_v4half %tb %uint_4`,
			`OpCooperativeMatrixLoadNV %X %X %uint_8 %true`,
			`OpCooperativeMatrixMulAddNV %X %X %X %X`,
			`OpAccessChain %_ptr_Workgroup_float %tc %uint_0`,
			`OpCooperativeMatrixStoreNV %X %X %uint_16 %false`,
		}},
		{"scaled", kerneltest.MatrixScaleKernel, []string{
			`OpCapability CooperativeMatrixNV`,
			`OpExtension "SPV_NV_cooperative_matrix"`,
			`OpTypeCooperativeMatrixNV %half %uint_3 %uint_16 %uint_16`,
			`OpTypeCooperativeMatrixNV %float %uint_3 %uint_16 %uint_16`,
			`OpConstantNull %X`,
			`OpAccessChain %_ptr_StorageBuffer_half %in0 %uint_0 %uint_0`,
			`OpCooperativeMatrixLoadNV %X %X %uint_16 %false`,
			`OpAccessChain %_ptr_StorageBuffer_half %in0 %uint_0 %uint_256`,
			`OpCooperativeMatrixLoadNV %X %X %uint_16 %true`,
			`OpCooperativeMatrixMulAddNV %X %X %X %X`,
			`OpAccessChain %_ptr_StorageBuffer_float %in1 %uint_0 %uint_0`,
			`OpCooperativeMatrixLoadNV %X %X %uint_0 %false`,
			`OpFDiv %X %X %X`,
			`OpMatrixTimesScalar %X %X %float_0_5`,
			`OpFAdd %X %X %X`,
			`OpFSub %X %X %X`,
			`OpAccessChain %_ptr_StorageBuffer_float %out0 %uint_0 %uint_0`,
			`OpCooperativeMatrixStoreNV %X %X %uint_16 %false`,
		}},
		{"loop", kerneltest.MatrixLoopKernel, []string{
			`OpCapability CooperativeMatrixNV`,
			`OpExtension "SPV_NV_cooperative_matrix"`,
			`OpTypeCooperativeMatrixNV %float %uint_3 %uint_16 %uint_16`,
			`OpConstantNull %X`,
			`OpTypeCooperativeMatrixNV %half %uint_3 %uint_16 %uint_16`,
			`OpConstantNull %X`,
			`OpAccessChain %_ptr_StorageBuffer_half %a %uint_0 %X`,
			`OpCooperativeMatrixLoadNV %X %X %uint_64 %false`,
			`OpAccessChain %_ptr_StorageBuffer_half %a %uint_0 %X`,
			`OpCooperativeMatrixLoadNV %X %X %uint_64 %false`,
			`OpAccessChain %_ptr_StorageBuffer_half %b %uint_0 %X`,
			`OpCooperativeMatrixLoadNV %X %X %uint_32 %false`,
			`OpAccessChain %_ptr_StorageBuffer_half %b %uint_0 %X`,
			`OpCooperativeMatrixLoadNV %X %X %uint_32 %false`,
			`OpCooperativeMatrixMulAddNV %X %X %X %X`, `OpCooperativeMatrixMulAddNV %X %X %X %X`,
			`OpCooperativeMatrixMulAddNV %X %X %X %X`, `OpCooperativeMatrixMulAddNV %X %X %X %X`,
			`OpAccessChain %_ptr_StorageBuffer_float %c %uint_0 %X`,
			`OpCooperativeMatrixStoreNV %X %X %uint_32 %false`,
			`OpAccessChain %_ptr_StorageBuffer_float %c %uint_0 %X`,
			`OpCooperativeMatrixStoreNV %X %X %uint_32 %false`,
			`OpAccessChain %_ptr_StorageBuffer_float %c %uint_0 %X`,
			`OpCooperativeMatrixStoreNV %X %X %uint_32 %false`,
			`OpAccessChain %_ptr_StorageBuffer_half %c16 %uint_0 %X`,
			`OpCooperativeMatrixStoreNV %X %X %uint_32 %false`,
		}},
	}
	// The lines of interest (float arithmetic among them, which the kernels
	// have on matrices only, and a matrix's product with a scalar) and the
	// access chain before each load and store, with the ids spirv-dis
	// numbers (%42) as %X.
	interesting := regexp.MustCompile(`(?i)cooperative_?matrix|OpConstantNull|\bOpF(Add|Sub|Div)\b|OpMatrixTimesScalar`)
	number := regexp.MustCompile(`%[0-9]+\b`)
	for _, c := range cases {
		var got []string
		lines := strings.Split(disText(t, c.src), "\n")
		for i, line := range lines {
			memory := i+1 < len(lines) && strings.Contains(lines[i+1], "OpCooperativeMatrix") && strings.Contains(line, "OpAccessChain")
			if !interesting.MatchString(line) && !memory {
				continue
			}
			if _, rhs, ok := strings.Cut(line, " = "); ok {
				line = rhs
			}
			got = append(got, number.ReplaceAllString(strings.TrimSpace(line), "%X"))
		}
		if diff := cmp.Diff(c.want, got); diff != "" {
			t.Errorf("%s: the cooperative matrix instructions (-want +got):\n%s", c.name, diff)
		}
	}
	// A kernel without the extension declares none of it.
	if dis := disText(t, kerneltest.DialectKernel); strings.Contains(dis, "CooperativeMatrix") || strings.Contains(dis, "OpExtension") {
		t.Errorf("the dialect kernel, which does not enable subgroup matrices, declares them:\n%s", dis)
	}
}
