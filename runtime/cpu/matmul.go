package cpu

import (
	"fmt"

	"github.com/tapml/tapml/ir"
	"github.com/tapml/tapml/tensor"
	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas32"
)

// matmulKernel computes a[..., M, K] × b[..., K, N] (b[..., N, K] with
// transpose_b) with broadcast batch dims, one blas32.Gemm per batch; f32
// (f16/bf16 through f32). When b has no batch dims, a's batch dims are
// folded into M and one Gemm does all. gonum's Gemm accumulates in f32
// and splits big products over goroutines by output block, so results do
// not depend on the number of goroutines (they may depend on the shape:
// gonum sums K in blocks of 64 once the output has 4 or more 64×64 blocks).
func matmulKernel(_ *Device, c *call) ([]*tensor.Tensor, error) {
	a, b := c.in[0], c.in[1]
	if a.DType != ir.F32 || b.DType != ir.F32 {
		return nil, fmt.Errorf("inputs are %s and %s; matmul computes on f32, f16 and bf16", a.DType, b.DType)
	}
	ra, rb := len(a.Shape), len(b.Shape)
	if ra < 2 || rb < 2 {
		return nil, fmt.Errorf("inputs must have rank >= 2, got %v and %v", a.Shape, b.Shape)
	}
	transB := c.attrs.Bool("transpose_b")
	m, k := a.Shape[ra-2], a.Shape[ra-1]
	k2, n := b.Shape[rb-2], b.Shape[rb-1]
	if transB {
		k2, n = n, k2
	}
	if k != k2 {
		return nil, fmt.Errorf("inner dims differ: %v × %v (transpose_b=%v)", a.Shape, b.Shape, transB)
	}
	batch, err := broadcastShape(a.Shape[:ra-2], b.Shape[:rb-2])
	if err != nil {
		return nil, fmt.Errorf("batch dims: %w", err)
	}
	out := tensor.New(ir.F32, append(append([]int{}, batch...), m, n))
	if m == 0 || n == 0 || k == 0 || tensor.NumElements(batch) == 0 {
		return []*tensor.Tensor{out}, nil // zero-size, or an empty sum: zeros
	}
	ad, bd, cd := a.Float32s(), b.Float32s(), out.Float32s()
	tb := blas.NoTrans
	if transB {
		tb = blas.Trans
	}
	bRows, bCols := k, n
	if transB {
		bRows, bCols = n, k
	}
	gemm := func(aOff, bOff, cOff, rows int) {
		blas32.Gemm(blas.NoTrans, tb, 1,
			blas32.General{Rows: rows, Cols: k, Stride: k, Data: ad[aOff : aOff+rows*k]},
			blas32.General{Rows: bRows, Cols: bCols, Stride: bCols, Data: bd[bOff : bOff+k*n]},
			0,
			blas32.General{Rows: rows, Cols: n, Stride: n, Data: cd[cOff : cOff+rows*n]})
	}
	if rb == 2 {
		gemm(0, 0, 0, tensor.NumElements(a.Shape[:ra-2])*m)
		return []*tensor.Tensor{out}, nil
	}
	// Walk the output batch, finding each operand's matrix by broadcasting.
	bc, err := newBroadcast(a.Shape[:ra-2], b.Shape[:rb-2])
	if err != nil {
		return nil, err
	}
	bc.runs(func(o int, offs []int) {
		for j := 0; j < bc.inner; j++ {
			ia, ib := offs[0], offs[1]
			if bc.unit[0] {
				ia += j
			}
			if bc.unit[1] {
				ib += j
			}
			gemm(ia*m*k, ib*k*n, (o+j)*m*n, m)
		}
	})
	return []*tensor.Tensor{out}, nil
}
