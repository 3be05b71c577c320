package cpu

import (
	"fmt"
	"sort"

	"github.com/tapml/tapml/ir"
	"github.com/tapml/tapml/tensor"
)

// topkKernel keeps the k largest elements of every row along axis, largest
// first: a stable sort of the row's indices by value, NaN above every
// number, so that equal elements keep their index order.
func topkKernel(_ *Device, c *call) ([]*tensor.Tensor, error) {
	x := c.in[0]
	if err := checkF32("x", x); err != nil {
		return nil, err
	}
	axis := ir.NormAxis(c.attrs.Int("axis"), len(x.Shape))
	if axis >= len(x.Shape) {
		return nil, fmt.Errorf("axis %d out of range for %v", c.attrs.Int("axis"), x.Shape)
	}
	n, k := x.Shape[axis], int(c.attrs.Int("k"))
	if k < 1 || k > n {
		return nil, fmt.Errorf("k = %d must be in [1, %d]", k, n)
	}
	outer, inner := 1, 1
	for _, d := range x.Shape[:axis] {
		outer *= d
	}
	for _, d := range x.Shape[axis+1:] {
		inner *= d
	}
	shape := append([]int{}, x.Shape...)
	shape[axis] = k
	vals, idx := tensor.New(ir.F32, shape), tensor.New(ir.I32, shape)
	xd, vd, id := x.Float32s(), vals.Float32s(), idx.Int32s()
	order := make([]int, n)
	for r := range outer * inner {
		in, out := (r/inner)*n*inner+r%inner, (r/inner)*k*inner+r%inner
		at := func(i int) float32 { return xd[in+i*inner] }
		for i := range order {
			order[i] = i
		}
		sort.SliceStable(order, func(a, b int) bool { return ranksAbove(at(order[a]), at(order[b])) })
		for j, i := range order[:k] {
			vd[out+j*inner], id[out+j*inner] = at(i), int32(i)
		}
	}
	return []*tensor.Tensor{vals, idx}, nil
}

// ranksAbove reports whether a ranks strictly above b in topk's order: NaN
// above every number, numbers by value.
func ranksAbove(a, b float32) bool {
	an, bn := a != a, b != b
	if an || bn {
		return an && !bn
	}
	return a > b
}

// expertMatmulKernel projects each token by the experts it was routed to:
// out[s, j, n] = Σ_m x[s, (j,) m]·w[ids[s, j], n, m], the products summed
// in f32 in order of m, one (s, j) pair per task.
func expertMatmulKernel(d *Device, c *call) ([]*tensor.Tensor, error) {
	x, w, ids := c.in[0], c.in[1], c.in[2]
	if err := checkF32("x and w", x, w); err != nil {
		return nil, err
	}
	if ids.DType != ir.I32 || len(ids.Shape) != 2 || len(w.Shape) != 3 || (len(x.Shape) != 2 && len(x.Shape) != 3) {
		return nil, fmt.Errorf("want x[S, K] or [S, k, K], w[E, N, K] and ids i32[S, k]; got %s, %s, %s", x, w, ids)
	}
	s, k := ids.Shape[0], ids.Shape[1]
	e, n, kk := w.Shape[0], w.Shape[1], w.Shape[2]
	perPair := len(x.Shape) == 3
	if x.Shape[0] != s || x.Shape[len(x.Shape)-1] != kk || perPair && x.Shape[1] != k {
		return nil, fmt.Errorf("x %v does not match ids %v and w %v", x.Shape, ids.Shape, w.Shape)
	}
	for i, v := range ids.Int32s() {
		if v < 0 || int(v) >= e {
			return nil, fmt.Errorf("expert id %d (at %d) is out of range for %d experts", v, i, e)
		}
	}
	out := tensor.New(ir.F32, []int{s, k, n})
	xd, wd, id, od := x.Float32s(), w.Float32s(), ids.Int32s(), out.Float32s()
	d.parallel(s*k, s*k*n*kk, func(lo, hi int) {
		for p := lo; p < hi; p++ {
			row := p / k
			if perPair {
				row = p
			}
			xv := xd[row*kk : (row+1)*kk]
			we := wd[int(id[p])*n*kk:]
			for o := range n {
				wv := we[o*kk : (o+1)*kk]
				wv = wv[:len(xv)]
				var acc float32
				for m, a := range xv {
					acc += float32(a * wv[m])
				}
				od[p*n+o] = acc
			}
		}
	})
	return []*tensor.Tensor{out}, nil
}
