package cpu

import (
	"fmt"

	"github.com/tapml/tapml/ir"
	"github.com/tapml/tapml/tensor"
)

// The recurrent ops of RWKV and Mamba. Each walks the rows of its call in
// order, channel by channel (channels are independent, so they are split
// over goroutines), and updates its state (input 0) in place, returning it
// as output 0. Every product and sum is rounded to f32 as PyTorch's
// elementwise ops round them (explicit float32 conversions keep Go from
// fusing a multiply and an add).

// rowsOf checks x[S, C] and returns S and C.
func rowsOf(name string, x *tensor.Tensor) (s, ch int, err error) {
	if err := checkF32(name, x); err != nil {
		return 0, 0, err
	}
	if len(x.Shape) != 2 {
		return 0, 0, fmt.Errorf("%s must be [S, C], got %v", name, x.Shape)
	}
	return x.Shape[0], x.Shape[1], nil
}

// checkF32Shape checks that t is f32 of the given shape.
func checkF32Shape(name string, t *tensor.Tensor, shape ...int) error {
	if err := checkF32(name, t); err != nil {
		return err
	}
	if !equalInts(t.Shape, shape) {
		return fmt.Errorf("%s must be %v, got %v", name, shape, t.Shape)
	}
	return nil
}

// tokenShiftKernel moves x[S, C] down one row, row 0 from prev[1, C].
func tokenShiftKernel(_ *Device, c *call) ([]*tensor.Tensor, error) {
	x, prev := c.in[0], c.in[1]
	s, ch, err := rowsOf("x", x)
	if err != nil {
		return nil, err
	}
	if err := checkF32Shape("prev", prev, 1, ch); err != nil {
		return nil, err
	}
	out := tensor.New(ir.F32, []int{s, ch})
	if s > 0 {
		o := out.Float32s()
		copy(o, prev.Float32s())
		copy(o[ch:], x.Float32s()[:(s-1)*ch])
	}
	return []*tensor.Tensor{out}, nil
}

// causalConv1DKernel convolves x[S, C] with w[C, K] along the sequence,
// the rows of state[K-1, C] before x's: y[s, c] = Σ_j w[c, j]·u[s+j, c].
func causalConv1DKernel(d *Device, c *call) ([]*tensor.Tensor, error) {
	state, x, w := c.in[0], c.in[1], c.in[2]
	s, ch, err := rowsOf("x", x)
	if err != nil {
		return nil, err
	}
	if err := checkF32("w", w); err != nil {
		return nil, err
	}
	if len(w.Shape) != 2 || w.Shape[0] != ch || w.Shape[1] < 1 {
		return nil, fmt.Errorf("w must be [%d, K], got %v", ch, w.Shape)
	}
	k := w.Shape[1]
	if err := checkF32Shape("state", state, k-1, ch); err != nil {
		return nil, err
	}
	y := tensor.New(ir.F32, []int{s, ch})
	st, xd, wd, yd := state.Float32s(), x.Float32s(), w.Float32s(), y.Float32s()
	d.parallel(ch, s*ch*k, func(lo, hi int) {
		for cc := lo; cc < hi; cc++ {
			u := func(i int) float32 { // row i of state followed by x
				if i < k-1 {
					return st[i*ch+cc]
				}
				return xd[(i-k+1)*ch+cc]
			}
			for r := range s {
				var acc float32
				for j := range k {
					acc += float32(wd[cc*k+j] * u(r+j))
				}
				yd[r*ch+cc] = acc
			}
			// Ascending rows read rows at or after their own: in place is safe.
			for r := range k - 1 {
				st[r*ch+cc] = u(s + r)
			}
		}
	})
	return []*tensor.Tensor{state, y}, nil
}

// emptyWKV is the exponent p of a WKV state channel with no history (b = 0),
// as transformers' rwkv_linear_attention_cpu starts it.
const emptyWKV = float32(-1e38)

// wkvKernel runs RWKV-4's WKV recurrence over k, v [S, C] with decay w[C]
// and bonus u[C] from state[3, C] = (a, b, p), in transformers' order of
// operations.
func wkvKernel(d *Device, c *call) ([]*tensor.Tensor, error) {
	state, k, v, w, u := c.in[0], c.in[1], c.in[2], c.in[3], c.in[4]
	s, ch, err := rowsOf("k", k)
	if err != nil {
		return nil, err
	}
	for i, t := range []*tensor.Tensor{v, w, u, state} {
		shape := [][]int{{s, ch}, {ch}, {ch}, {3, ch}}[i]
		if err := checkF32Shape([]string{"v", "w", "u", "state"}[i], t, shape...); err != nil {
			return nil, err
		}
	}
	y := tensor.New(ir.F32, []int{s, ch})
	st, kd, vd, wd, ud, yd := state.Float32s(), k.Float32s(), v.Float32s(), w.Float32s(), u.Float32s(), y.Float32s()
	d.parallel(ch, s*ch*80, func(lo, hi int) {
		for cc := lo; cc < hi; cc++ {
			if s == 0 {
				continue
			}
			a, b, p := st[cc], st[ch+cc], st[2*ch+cc]
			if b == 0 {
				p = emptyWKV
			}
			for r := range s {
				kk, vv := kd[r*ch+cc], vd[r*ch+cc]
				uk := ud[cc] + kk
				q := maxNaN(p, uk)
				e1, e2 := expf(p-q), expf(uk-q)
				yd[r*ch+cc] = (float32(e1*a) + float32(e2*vv)) / (float32(e1*b) + e2)
				pw := p + wd[cc]
				q = maxNaN(pw, kk)
				e1, e2 = expf(pw-q), expf(kk-q)
				a = float32(e1*a) + float32(e2*vv)
				b = float32(e1*b) + e2
				p = q
			}
			st[cc], st[ch+cc], st[2*ch+cc] = a, b, p
		}
	})
	return []*tensor.Tensor{state, y}, nil
}

// maxNaN is torch.maximum: NaN if either is NaN.
func maxNaN(a, b float32) float32 {
	switch {
	case a != a:
		return a
	case b != b || b > a:
		return b
	}
	return a
}

// selectiveScanKernel runs Mamba's selective scan over x, dt [S, C] with
// A[C, N], B and Cm [S, N] from state h[C, N].
func selectiveScanKernel(d *Device, c *call) ([]*tensor.Tensor, error) {
	state, x, dt, a, b, cm := c.in[0], c.in[1], c.in[2], c.in[3], c.in[4], c.in[5]
	s, ch, err := rowsOf("x", x)
	if err != nil {
		return nil, err
	}
	if len(a.Shape) != 2 {
		return nil, fmt.Errorf("A must be [%d, N], got %v", ch, a.Shape)
	}
	n := a.Shape[1]
	for i, t := range []*tensor.Tensor{dt, a, b, cm, state} {
		shape := [][]int{{s, ch}, {ch, n}, {s, n}, {s, n}, {ch, n}}[i]
		if err := checkF32Shape([]string{"dt", "A", "B", "Cm", "state"}[i], t, shape...); err != nil {
			return nil, err
		}
	}
	y := tensor.New(ir.F32, []int{s, ch})
	hd, xd, dtd, ad, bd, cd, yd := state.Float32s(), x.Float32s(), dt.Float32s(), a.Float32s(), b.Float32s(), cm.Float32s(), y.Float32s()
	d.parallel(ch, s*ch*n*20, func(lo, hi int) {
		for cc := lo; cc < hi; cc++ {
			h, an := hd[cc*n:(cc+1)*n], ad[cc*n:(cc+1)*n]
			for r := range s {
				dv, xv := dtd[r*ch+cc], xd[r*ch+cc]
				br, cr := bd[r*n:(r+1)*n], cd[r*n:(r+1)*n]
				var acc float32
				for i := range h {
					da := expf(float32(an[i] * dv))
					h[i] = float32(da*h[i]) + float32(float32(dv*br[i])*xv)
					acc += float32(h[i] * cr[i])
				}
				yd[r*ch+cc] = acc
			}
		}
	})
	return []*tensor.Tensor{state, y}, nil
}
