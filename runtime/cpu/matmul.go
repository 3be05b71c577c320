package cpu

import (
	"fmt"
	"slices"
	"unsafe"

	"github.com/tapml/tapml/ir"
	"github.com/tapml/tapml/tensor"
	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas32"
)

// matmulKernel computes a[..., M, K] × b[..., K, N] (b[..., N, K] with
// transpose_b) with broadcast batch dims; f32 (f16/bf16 through f32).
//
// Each matrix product is cut into tiles of at most 64 rows × 192 columns,
// one blas32.Gemm call each, spread over goroutines. A call that small
// always takes gonum's serial path, which computes every output element as
// one f32 dot product over the whole of K (with transpose_b) or one
// sequence of axpys over K (without). So an output element's bits depend
// only on its row of a and its column of b: not on M (prefill and decode
// agree bit for bit), not on the tiling, not on the number of goroutines.
// gonum's dot kernel on amd64 peels elements until b's row is 16-byte
// aligned, so b is copied to an aligned buffer when it is not (weights
// almost always are): the bits then do not depend on where the allocator
// put b either.
func matmulKernel(d *Device, c *call) ([]*tensor.Tensor, error) {
	res, err := product(d, c)
	if err != nil || len(c.in) < 3 {
		return res, err
	}
	// The optional addend: the residual add that passes/residual.go fuses
	// in, one f32 add per element as the add op does.
	out, add := res[0], c.in[2]
	if add.DType != ir.F32 || !slices.Equal(add.Shape, out.Shape) {
		return nil, fmt.Errorf("the addend c is %s%v; it must be the output's f32%v", add.DType, add.Shape, out.Shape)
	}
	o, x := out.Float32s(), add.Float32s()
	for i := range o {
		o[i] += x[i]
	}
	return res, nil
}

// rmsNormMatmulKernel computes matmul(rms_norm(x, g), w) with transpose_b:
// the two kernels in turn, so its bits are theirs.
func rmsNormMatmulKernel(d *Device, c *call) ([]*tensor.Tensor, error) {
	y, err := rmsNormKernel(d, &call{op: ir.OpRMSNorm, attrs: c.attrs, in: c.in[:2]})
	if err != nil {
		return nil, err
	}
	return product(d, &call{op: ir.OpMatmul, attrs: ir.Attrs{"transpose_b": ir.BoolAttr(true)}, in: []*tensor.Tensor{y[0], c.in[2]}})
}

// rmsNormQKVKernel computes the three products of rms_norm(x, g) with wq,
// wk and wv (transpose_b): rms_norm and matmul's product in turn, so its
// bits are theirs.
func rmsNormQKVKernel(d *Device, c *call) ([]*tensor.Tensor, error) {
	h, err := rmsNormKernel(d, &call{op: ir.OpRMSNorm, attrs: c.attrs, in: c.in[:2]})
	if err != nil {
		return nil, err
	}
	var outs []*tensor.Tensor
	for _, w := range c.in[2:] {
		y, err := product(d, &call{op: ir.OpMatmul, attrs: ir.Attrs{"transpose_b": ir.BoolAttr(true)}, in: []*tensor.Tensor{h[0], w}})
		if err != nil {
			return nil, err
		}
		outs = append(outs, y[0])
	}
	return outs, nil
}

// rmsNormSwiGLUKernel computes silu(h·wgᵀ)·(h·wuᵀ) with h = rms_norm(x,
// g): rms_norm, the two products and the fused_elementwise
// mul(silu($0), $1) it replaces, in turn, so its bits are theirs.
func rmsNormSwiGLUKernel(d *Device, c *call) ([]*tensor.Tensor, error) {
	h, err := rmsNormKernel(d, &call{op: ir.OpRMSNorm, attrs: c.attrs, in: c.in[:2]})
	if err != nil {
		return nil, err
	}
	tb := ir.Attrs{"transpose_b": ir.BoolAttr(true)}
	gate, err := product(d, &call{op: ir.OpMatmul, attrs: tb, in: []*tensor.Tensor{h[0], c.in[2]}})
	if err != nil {
		return nil, err
	}
	up, err := product(d, &call{op: ir.OpMatmul, attrs: tb, in: []*tensor.Tensor{h[0], c.in[3]}})
	if err != nil {
		return nil, err
	}
	return fusedKernel(d, &call{op: ir.OpFusedElementwise, attrs: ir.Attrs{"expr": ir.StringAttr(ir.SwiGLUExpr)},
		in: []*tensor.Tensor{gate[0], up[0]}})
}

// product computes a × b, matmul's product.
func product(d *Device, c *call) ([]*tensor.Tensor, error) {
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
	mm := &matmul{a: a.Float32s(), b: aligned16(b.Float32s()), c: out.Float32s(), m: m, k: k, n: n, transB: transB}
	if rb == 2 {
		// b has no batch dims: a's batch dims fold into M.
		mm.m = tensor.NumElements(a.Shape[:ra-2]) * m
		mm.run(d, 0, 0, 0)
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
			mm.run(d, ia*m*k, ib*k*n, (o+j)*m*n)
		}
	})
	return []*tensor.Tensor{out}, nil
}

// matmul is one product c[m, n] = a[m, k] × b (b[k, n], or b[n, k] with
// transB), each matrix row-major and dense.
type matmul struct {
	a, b, c []float32
	m, k, n int
	transB  bool
}

const tileRows = 64 // with at most 3 blocks of 64 columns, gonum stays serial

// tileCols picks a tile width (<= 192) that keeps a tile of b near 64 KiB.
func tileCols(k int) int { return min(192, max(16, (1<<14)/k)) }

// run computes one product with a, b and c starting at the given offsets.
func (p *matmul) run(d *Device, aOff, bOff, cOff int) {
	m, k, n := p.m, p.k, p.n
	tn := tileCols(k)
	rowTiles, colTiles := (m+tileRows-1)/tileRows, (n+tn-1)/tn
	tb := blas.NoTrans
	if p.transB {
		tb = blas.Trans
	}
	d.parallel(rowTiles*colTiles, m*n*k, func(lo, hi int) {
		for t := lo; t < hi; t++ {
			i0, j0 := (t/colTiles)*tileRows, (t%colTiles)*tn
			mt, nt := min(tileRows, m-i0), min(tn, n-j0)
			bt := blas32.General{Rows: k, Cols: nt, Stride: n, Data: p.b[bOff+j0:]}
			if p.transB {
				bt = blas32.General{Rows: nt, Cols: k, Stride: k, Data: p.b[bOff+j0*k:]}
			}
			blas32.Gemm(blas.NoTrans, tb, 1,
				blas32.General{Rows: mt, Cols: k, Stride: k, Data: p.a[aOff+i0*k:]},
				bt, 0,
				blas32.General{Rows: mt, Cols: nt, Stride: n, Data: p.c[cOff+i0*n+j0:]})
		}
	})
}

// aligned16 returns x, or a copy of it on a 16-byte boundary when x is not
// on one.
func aligned16(x []float32) []float32 {
	if len(x) == 0 || uintptr(unsafe.Pointer(&x[0]))%16 == 0 {
		return x
	}
	buf := make([]float32, len(x)+3)
	off := int((16 - uintptr(unsafe.Pointer(&buf[0]))%16) % 16 / 4)
	y := buf[off : off+len(x)]
	copy(y, x)
	return y
}
