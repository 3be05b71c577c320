package wgslfront_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/tapml/tapml/codegen/internal/kerneltest"
	"github.com/tapml/tapml/codegen/wgslfront"
)

// TestMatrixKernels checks that the subgroup matrix kernels parse, and
// the types the checker gives their matrix expressions.
func TestMatrixKernels(t *testing.T) {
	cases := []struct {
		name, src string
		want      []string // the matrix expressions and their types, in source order
	}{
		{"staged", kerneltest.MatrixKernel, []string{
			"subgroup_matrix_result<f32, 16, 16>(): subgroup_matrix_result<f32, 16, 16>",
			"subgroupMatrixLoad<subgroup_matrix_left<f16, 16, 16>>(&ta, 0u, false, 32u): subgroup_matrix_left<f16, 16, 16>",
			"subgroupMatrixLoad<subgroup_matrix_right<f16, 16, 16>>(&(tb), 4u, true, 8u): subgroup_matrix_right<f16, 16, 16>",
			"subgroupMatrixMultiplyAccumulate(a, b, acc): subgroup_matrix_result<f32, 16, 16>",
			"subgroupMatrixStore(&tc, 0u, acc, false, 16u)",
		}},
		{"scaled", kerneltest.MatrixScaleKernel, []string{
			"subgroupMatrixLoad<subgroup_matrix_left<f16, 16, 16>>(&in0, 0u, false, 16u): subgroup_matrix_left<f16, 16, 16>",
			"subgroupMatrixLoad<subgroup_matrix_right<f16, 16, 16>>(&in0, 256u, true, 16u): subgroup_matrix_right<f16, 16, 16>",
			"subgroupMatrixMultiplyAccumulate(a, b, subgroup_matrix_result<f32, 16, 16>()): subgroup_matrix_result<f32, 16, 16>",
			"subgroupMatrixLoad<subgroup_matrix_result<f32, 16, 16>>(&in1, 0u, false, 0u): subgroup_matrix_result<f32, 16, 16>",
			"p / s: subgroup_matrix_result<f32, 16, 16>",
			"c + p * 0.5f: subgroup_matrix_result<f32, 16, 16>",
			"c - subgroup_matrix_result<f32, 16, 16>(): subgroup_matrix_result<f32, 16, 16>",
			"subgroupMatrixStore(&out0, 0u, c, false, 16u)",
		}},
	}
	for _, c := range cases {
		m, err := wgslfront.Parse(c.src, "main")
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if !m.SubgroupMatrix || !m.F16 || m.Subgroups {
			t.Errorf("%s: enables f16 %v, subgroups %v, subgroup matrices %v", c.name, m.F16, m.Subgroups, m.SubgroupMatrix)
		}
		var got []string
		wgslfront.Walk(m.Entry.Body, func(s *wgslfront.Stmt) {
			var e *wgslfront.Expr
			switch {
			case s.Kind == wgslfront.StmtCall:
				got = append(got, s.X.String())
				return
			case s.Kind == wgslfront.StmtDecl:
				e = s.Decl.Init
			case s.Kind == wgslfront.StmtAssign:
				e = s.X
			}
			if e != nil && e.Type.Kind == wgslfront.Matrix {
				got = append(got, e.String()+": "+e.Type.String())
			}
		})
		if diff := cmp.Diff(c.want, got); diff != "" {
			t.Errorf("%s: matrix expressions (-want +got):\n%s", c.name, diff)
		}
	}
	if _, err := wgslfront.Parse(kerneltest.MatrixLoopKernel, "main"); err != nil {
		t.Errorf("loop: %v", err)
	}
}
