package cpu

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/tapml/tapml/ir"
	"github.com/tapml/tapml/tensor"
)

func TestTokenShift(t *testing.T) {
	x := tensor.FromFloat32([]int{3, 2}, []float32{1, 2, 3, 4, 5, 6})
	prev := tensor.FromFloat32([]int{1, 2}, []float32{-1, -2})
	got := launch(t, New(), ir.OpTokenShift, nil, x, prev)
	if diff := cmp.Diff([]float32{-1, -2, 1, 2, 3, 4}, got.Float32s()); diff != "" {
		t.Errorf("token_shift (-want +got):\n%s", diff)
	}
}

// rowsF32 is rows lo..hi-1 of x[S, C] as a new tensor.
func rowsF32(x *tensor.Tensor, lo, hi int) *tensor.Tensor {
	c := x.Shape[1]
	return tensor.FromFloat32([]int{hi - lo, c}, append([]float32{}, x.Float32s()[lo*c:hi*c]...))
}

// inChunks runs a recurrent op over the rows of its sequence inputs in
// calls of the given sizes, carrying the state, and returns the final
// state and the outputs of every row. seq says which inputs are [S, ...].
func inChunks(t *testing.T, op ir.Op, state *tensor.Tensor, in []*tensor.Tensor, seq []bool, sizes ...int) (*tensor.Tensor, []float32) {
	t.Helper()
	d := New()
	st := state.Clone()
	var y []float32
	lo := 0
	for _, n := range sizes {
		args := []*tensor.Tensor{st}
		for i, x := range in {
			if seq[i] {
				x = rowsF32(x, lo, lo+n)
			}
			args = append(args, x)
		}
		got := launchN(t, d, op, nil, args...)
		st = got[0]
		y = append(y, got[1].Float32s()...)
		lo += n
	}
	return st, y
}

// sameBits fails unless a and b are bitwise equal.
func sameBits(t *testing.T, what string, a, b []float32) {
	t.Helper()
	if len(a) != len(b) {
		t.Fatalf("%s: %d values, want %d", what, len(b), len(a))
	}
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			t.Fatalf("%s: element %d is %v, want %v (bit for bit)", what, i, b[i], a[i])
		}
	}
}

// A sequence run in one call or in several (prefill then decode steps)
// gives the same bits: the state carries exactly what the rows left.
func TestRecurrentChunks(t *testing.T) {
	r := newRand(41)
	const s, c, n = 7, 5, 3
	for _, tc := range []struct {
		op    ir.Op
		state *tensor.Tensor
		in    []*tensor.Tensor
		seq   []bool
	}{
		{ir.OpCausalConv1D, tensor.New(ir.F32, []int{3, c}), []*tensor.Tensor{randF32(r, s, c), randF32(r, c, 4)}, []bool{true, false}},
		{ir.OpWKV, tensor.New(ir.F32, []int{3, c}), []*tensor.Tensor{randF32(r, s, c), randF32(r, s, c), negExp(randF32(r, c)), randF32(r, c)}, []bool{true, true, false, false}},
		{ir.OpSelectiveScan, randF32(r, c, n), []*tensor.Tensor{randF32(r, s, c), positiveF32(r, s, c), negExp(randF32(r, c, n)), randF32(r, s, n), randF32(r, s, n)},
			[]bool{true, true, false, true, true}},
	} {
		t.Run(tc.op.String(), func(t *testing.T) {
			wantState, wantY := inChunks(t, tc.op, tc.state, tc.in, tc.seq, s)
			for _, sizes := range [][]int{{4, 1, 1, 1}, {1, 1, 1, 1, 1, 1, 1}, {2, 5}} {
				st, y := inChunks(t, tc.op, tc.state, tc.in, tc.seq, sizes...)
				sameBits(t, "y", wantY, y)
				sameBits(t, "state", wantState.Float32s(), st.Float32s())
			}
		})
	}
}

// negExp is -exp(x): a decay (RWKV's w, Mamba's A).
func negExp(x *tensor.Tensor) *tensor.Tensor {
	for i, v := range x.Float32s() {
		x.Float32s()[i] = -float32(math.Exp(float64(v)))
	}
	return x
}

// positiveF32 is uniform in (0, 1): time steps.
func positiveF32(r *rand.Rand, shape ...int) *tensor.Tensor {
	x := randF32(r, shape...)
	for i, v := range x.Float32s() {
		x.Float32s()[i] = float32(math.Abs(float64(v))) + 0.01
	}
	return x
}

// The convolution against its definition in float64: state rows then x,
// zero state at the start as a zero-padded convolution.
func TestCausalConv1D(t *testing.T) {
	r := newRand(42)
	const s, c, k = 6, 3, 4
	state, x, w := randF32(r, k-1, c), randF32(r, s, c), randF32(r, c, k)
	u := append(append([]float32{}, state.Float32s()...), x.Float32s()...)
	want := make([]float64, s*c)
	for i := range s {
		for cc := range c {
			for j := range k {
				want[i*c+cc] += float64(w.Float32s()[cc*k+j]) * float64(u[(i+j)*c+cc])
			}
		}
	}
	got := launchN(t, New(), ir.OpCausalConv1D, nil, state, x, w)
	approx(t, "y", want, f64s(got[1]), 1e-6, 1e-6)
	sameBits(t, "state", u[(s)*c:], got[0].Float32s())
	if got[0].Float32s()[0] != state.Float32s()[0] {
		t.Error("the state was not updated in place")
	}
}

// WKV against its definition without the max tracking, in float64:
// y_t = (a + e^(u+k_t)·v_t) / (b + e^(u+k_t)) with a, b the sums of
// e^(k_i)·v_i and e^(k_i) decayed by e^w per step.
func TestWKV(t *testing.T) {
	r := newRand(43)
	const s, c = 9, 4
	k, v, w, u := randF32(r, s, c), randF32(r, s, c), negExp(randF32(r, c)), randF32(r, c)
	state := tensor.New(ir.F32, []int{3, c})
	got := launchN(t, New(), ir.OpWKV, nil, state, k, v, w, u)
	want := make([]float64, s*c)
	for cc := range c {
		var a, b float64
		for i := range s {
			kk, vv := float64(k.Float32s()[i*c+cc]), float64(v.Float32s()[i*c+cc])
			e := math.Exp(float64(u.Float32s()[cc]) + kk)
			want[i*c+cc] = (a + e*vv) / (b + e)
			decay := math.Exp(float64(w.Float32s()[cc]))
			a = decay*a + math.Exp(kk)*vv
			b = decay*b + math.Exp(kk)
		}
		// The state holds a and b scaled by e^-p.
		p := float64(got[0].Float32s()[2*c+cc])
		approx(t, "state a", []float64{a, b}, []float64{float64(got[0].Float32s()[cc]) * math.Exp(p), float64(got[0].Float32s()[c+cc]) * math.Exp(p)}, 1e-5, 0)
	}
	approx(t, "y", want, f64s(got[1]), 1e-5, 1e-6)

	// b = 0 marks an empty channel whatever its p says.
	junk := tensor.FromFloat32([]int{3, c}, []float32{0, 0, 0, 0, 0, 0, 0, 0, 50, -3, 7, 1e30})
	again := launchN(t, New(), ir.OpWKV, nil, junk, k, v, w, u)
	sameBits(t, "y from an empty state", got[1].Float32s(), again[1].Float32s())
}

// The selective scan against its definition in float64.
func TestSelectiveScan(t *testing.T) {
	r := newRand(44)
	const s, c, n = 5, 3, 4
	state, x, dt := randF32(r, c, n), randF32(r, s, c), positiveF32(r, s, c)
	a, b, cm := negExp(randF32(r, c, n)), randF32(r, s, n), randF32(r, s, n)
	h := f64s(state)
	got := launchN(t, New(), ir.OpSelectiveScan, nil, state.Clone(), x, dt, a, b, cm)
	want := make([]float64, s*c)
	for i := range s {
		for cc := range c {
			d := float64(dt.Float32s()[i*c+cc])
			for j := range n {
				h[cc*n+j] = math.Exp(float64(a.Float32s()[cc*n+j])*d)*h[cc*n+j] + d*float64(b.Float32s()[i*n+j])*float64(x.Float32s()[i*c+cc])
				want[i*c+cc] += h[cc*n+j] * float64(cm.Float32s()[i*n+j])
			}
		}
	}
	approx(t, "y", want, f64s(got[1]), 1e-5, 1e-6)
	approx(t, "state", h, f64s(got[0]), 1e-5, 1e-6)
}
