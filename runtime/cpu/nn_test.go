package cpu

import (
	"fmt"
	"math"
	"testing"
	"unsafe"

	"github.com/google/go-cmp/cmp"
	"github.com/tapml/tapml/ir"
	"github.com/tapml/tapml/runtime"
	"github.com/tapml/tapml/tensor"
)

func naiveMatmul(a, b *tensor.Tensor, transB bool) ([]int, []float64) {
	ra, rb := len(a.Shape), len(b.Shape)
	m, k := a.Shape[ra-2], a.Shape[ra-1]
	n := b.Shape[rb-1]
	if transB {
		n = b.Shape[rb-2]
	}
	batch := naiveBroadcastShape(a.Shape[:ra-2], b.Shape[:rb-2])
	shape := append(append([]int{}, batch...), m, n)
	av, bv := f64s(a), f64s(b)
	out := make([]float64, tensor.NumElements(shape))
	for o := range out {
		idx := unravel(o, shape)
		bi := idx[:len(batch)]
		i, j := idx[len(batch)], idx[len(batch)+1]
		aoff := ravelBroadcast(bi, a.Shape[:ra-2]) * m * k
		boff := ravelBroadcast(bi, b.Shape[:rb-2]) * k * n
		var s float64
		for l := 0; l < k; l++ {
			bj := boff + l*n + j
			if transB {
				bj = boff + j*k + l
			}
			s += av[aoff+i*k+l] * bv[bj]
		}
		out[o] = s
	}
	return shape, out
}

func TestMatmul(t *testing.T) {
	d := New()
	r := newRand(10)
	cases := []struct {
		a, b   []int
		transB bool
	}{
		{[]int{3, 4}, []int{4, 5}, false},
		{[]int{3, 4}, []int{5, 4}, true},
		{[]int{1, 4}, []int{5, 4}, true},
		{[]int{2, 3, 4}, []int{4, 5}, false},
		{[]int{2, 3, 4}, []int{2, 5, 4}, true},
		{[]int{3, 4}, []int{2, 4, 5}, false},
		{[]int{2, 1, 3, 4}, []int{3, 4, 5}, false},
		{[]int{1, 3, 4}, []int{2, 1, 5, 4}, true},
		{[]int{7, 13}, []int{13, 11}, false},
		{[]int{70, 130}, []int{200, 130}, true}, // gonum's parallel path
		{[]int{1, 300}, []int{259, 300}, true},
		{[]int{2, 0}, []int{0, 3}, false},
		{[]int{0, 4}, []int{4, 3}, false},
	}
	for _, c := range cases {
		a, b := randF32(r, c.a...), randF32(r, c.b...)
		got := launch(t, d, ir.OpMatmul, ir.Attrs{"transpose_b": ir.BoolAttr(c.transB)}, a, b)
		shape, want := naiveMatmul(a, b, c.transB)
		what := fmt.Sprintf("%v×%v transpose_b=%v", c.a, c.b, c.transB)
		checkShape(t, what, got, shape)
		approx(t, what, want, f64s(got), 1e-5, 1e-5)
	}
}

// A row of a product has the same bits whatever the other rows, and
// whatever b's alignment in memory.
func TestMatmulRowsIndependent(t *testing.T) {
	d := New()
	r := newRand(19)
	for _, c := range []struct {
		m, k, n int
		transB  bool
	}{{130, 300, 500, true}, {70, 131, 257, false}, {200, 2048, 40, true}} {
		a := randF32(r, c.m, c.k)
		b := randF32(r, c.n, c.k)
		if !c.transB {
			b = randF32(r, c.k, c.n)
		}
		attrs := ir.Attrs{"transpose_b": ir.BoolAttr(c.transB)}
		all := launch(t, d, ir.OpMatmul, attrs, a, b).Float32s()
		// b again, 8 bytes off a 16-byte boundary
		raw := make([]byte, len(b.Data)+16)
		off := 8 - int(uintptr(unsafe.Pointer(&raw[0]))%16)
		if off < 0 {
			off += 16
		}
		mis := &tensor.Tensor{DType: ir.F32, Shape: b.Shape, Data: raw[off : off+len(b.Data)]}
		copy(mis.Data, b.Data)
		for _, i := range []int{0, 1, c.m / 2, c.m - 1} {
			row := tensor.FromFloat32([]int{1, c.k}, a.Float32s()[i*c.k:(i+1)*c.k])
			one := launch(t, d, ir.OpMatmul, attrs, row, mis).Float32s()
			if diff := cmp.Diff(all[i*c.n:(i+1)*c.n], one); diff != "" {
				t.Errorf("%+v: row %d alone (b misaligned) differs from the full product:\n%s", c, i, diff)
			}
		}
	}
}

func TestRMSNorm(t *testing.T) {
	d := New()
	r := newRand(11)
	for _, shape := range [][]int{{5}, {3, 7}, {2, 3, 16}, {1, 288}} {
		for _, eps := range []float64{1e-5, 1e-6} {
			x, w := randF32(r, shape...), randF32(r, shape[len(shape)-1])
			got := launch(t, d, ir.OpRMSNorm, ir.Attrs{"eps": ir.FloatAttr(eps)}, x, w)
			dim := shape[len(shape)-1]
			xv, wv := f64s(x), f64s(w)
			want := make([]float64, len(xv))
			for row := 0; row < len(xv)/dim; row++ {
				var ss float64
				for j := 0; j < dim; j++ {
					ss += xv[row*dim+j] * xv[row*dim+j]
				}
				inv := 1 / math.Sqrt(ss/float64(dim)+eps)
				for j := 0; j < dim; j++ {
					want[row*dim+j] = xv[row*dim+j] * inv * wv[j]
				}
			}
			checkShape(t, "rms_norm", got, shape)
			approx(t, fmt.Sprintf("rms_norm%v eps=%g", shape, eps), want, f64s(got), 1e-5, 1e-6)
		}
	}
}

func TestLayerNorm(t *testing.T) {
	d := New()
	r := newRand(12)
	for _, tc := range []struct {
		shape []int
		bias  bool
	}{{[]int{5}, true}, {[]int{3, 7}, true}, {[]int{2, 3, 16}, true}, {[]int{3, 7}, false}} {
		shape := tc.shape
		dim := shape[len(shape)-1]
		x, w, b := randF32(r, shape...), randF32(r, dim), randF32(r, dim)
		in := []*tensor.Tensor{x, w, b}
		bv := f64s(b)
		if !tc.bias {
			in, bv = in[:2], make([]float64, dim)
		}
		got := launch(t, d, ir.OpLayerNorm, nil, in...)
		xv, wv := f64s(x), f64s(w)
		want := make([]float64, len(xv))
		for row := 0; row < len(xv)/dim; row++ {
			xr := xv[row*dim : (row+1)*dim]
			var mean, vr float64
			for _, v := range xr {
				mean += v
			}
			mean /= float64(dim)
			for _, v := range xr {
				vr += (v - mean) * (v - mean)
			}
			vr /= float64(dim)
			for j, v := range xr {
				want[row*dim+j] = (v-mean)/math.Sqrt(vr+1e-5)*wv[j] + bv[j]
			}
		}
		approx(t, fmt.Sprintf("layer_norm%v bias %v", shape, tc.bias), want, f64s(got), 1e-5, 1e-5)
	}
}

// naiveAxis returns, for a reduction along axis, the flat indices of each
// lane (one lane per position of the other dims).
func naiveLanes(shape []int, axis int) [][]int {
	if axis < 0 {
		axis += len(shape)
	}
	rest := append(append([]int{}, shape[:axis]...), shape[axis+1:]...)
	var lanes [][]int
	for o := 0; o < tensor.NumElements(rest); o++ {
		ri := unravel(o, rest)
		var lane []int
		for i := 0; i < shape[axis]; i++ {
			idx := append(append(append([]int{}, ri[:axis]...), i), ri[axis:]...)
			flat := 0
			for j, s := range shape {
				flat = flat*s + idx[j]
			}
			lane = append(lane, flat)
		}
		lanes = append(lanes, lane)
	}
	return lanes
}

func TestSoftmax(t *testing.T) {
	d := New()
	r := newRand(13)
	cases := []struct {
		shape []int
		axis  int
	}{{[]int{7}, -1}, {[]int{3, 5}, 0}, {[]int{3, 5}, 1}, {[]int{3, 5}, -2}, {[]int{2, 3, 4}, 1}, {[]int{2, 3, 4}, -1}, {[]int{4, 1}, 1}}
	for _, c := range cases {
		x := randF32(r, c.shape...)
		for i := range x.Float32s() {
			x.Float32s()[i] *= 10
		}
		got := launch(t, d, ir.OpSoftmax, ir.Attrs{"axis": ir.IntAttr(int64(c.axis))}, x)
		xv := f64s(x)
		want := make([]float64, len(xv))
		for _, lane := range naiveLanes(c.shape, c.axis) {
			mx := math.Inf(-1)
			for _, i := range lane {
				mx = math.Max(mx, xv[i])
			}
			var s float64
			for _, i := range lane {
				s += math.Exp(xv[i] - mx)
			}
			for _, i := range lane {
				want[i] = math.Exp(xv[i]-mx) / s
			}
		}
		approx(t, fmt.Sprintf("softmax%v axis %d", c.shape, c.axis), want, f64s(got), 1e-5, 1e-7)
	}
}

func TestArgmax(t *testing.T) {
	d := New()
	r := newRand(14)
	check := func(x *tensor.Tensor, axis int) {
		t.Helper()
		got := launch(t, d, ir.OpArgmax, ir.Attrs{"axis": ir.IntAttr(int64(axis))}, x)
		xv := f64s(x)
		var want []float64
		for _, lane := range naiveLanes(x.Shape, axis) {
			best := 0
			for i, j := range lane {
				if xv[j] > xv[lane[best]] {
					best = i
				}
			}
			want = append(want, float64(best))
		}
		if got.DType != ir.I32 {
			t.Fatalf("argmax gave %s", got.DType)
		}
		approx(t, fmt.Sprintf("argmax %s%v axis %d", x.DType, x.Shape, axis), want, f64s(got), 0, 0)
	}
	check(tensor.FromFloat32([]int{5}, []float32{1, 3, 3, 2, -1}), 0) // first of ties: 1
	check(tensor.FromFloat32([]int{2, 3}, []float32{5, 1, 5, 0, 9, 9}), 0)
	check(tensor.FromFloat32([]int{2, 3}, []float32{5, 1, 5, 0, 9, 9}), -1)
	check(intTensor(ir.I32, []int{2, 3}, 4, -2, 4, 7, 7, 1), 1)
	check(intTensor(ir.I64, []int{3, 2}, 4, -2, 4, 7, 7, 1), 0)
	for _, axis := range []int{0, 1, 2, -1, -3} {
		check(randF32(r, 3, 4, 5), axis)
	}
	got := launch(t, d, ir.OpArgmax, nil, tensor.FromFloat32([]int{4}, []float32{2, 1, 3, 3}))
	if got.Int32s()[0] != 2 {
		t.Errorf("argmax [2 1 3 3] = %d, want 2", got.Int32s()[0])
	}
	if err := launchRaw(d, ir.OpArgmax, nil, tensor.New(ir.F32, []int{2, 0})); err == nil {
		t.Error("argmax over an empty axis: no error")
	}
}

func TestRope(t *testing.T) {
	d := New()
	r := newRand(15)
	// table is a freqs input of three rows (for lengths <= 4, 5 and >= 6:
	// original_max 4) of two pairs.
	table := [][]float64{{1, 0.1}, {0.5, 0.05}, {0.25, 0.01}}
	cases := []struct {
		s, h, dh, dims, pos int
		style               string
		theta               float64
		factors             []float64
		mscale              float64 // attention_factor; 0: none
		row                 int     // the table row the call reads; -1: no table
	}{
		{1, 4, 8, 0, 0, "interleaved", 10000, nil, 0, -1},
		{3, 2, 8, 0, 5, "interleaved", 10000, nil, 0, -1},
		{4, 3, 16, 0, 17, "half", 10000, nil, 0, -1},
		{2, 2, 10, 6, 3, "interleaved", 10000, nil, 0, -1},
		{2, 2, 10, 4, 40, "half", 500000, nil, 0, -1},
		{5, 1, 6, 0, 0, "half", 100, nil, 0, -1},
		{3, 2, 8, 0, 60, "interleaved", 500000, []float64{1, 1.5, 4, 8}, 0, -1}, // Llama 3.1-style scaling
		{2, 2, 8, 0, 9, "half", 10000, []float64{2, 2, 2, 2}, 1.2, -1},          // YaRN-style: factors and an attention factor
		{3, 2, 6, 4, 0, "half", 10000, nil, 1.1, 0},                             // length 3: the first row
		{1, 1, 4, 0, 4, "half", 10000, nil, 0, 1},                               // length 5: the second
		{2, 3, 4, 0, 30, "interleaved", 10000, nil, 0, 2},                       // past the table: the last
	}
	for _, c := range cases {
		x := randF32(r, c.s, c.h, c.dh)
		attrs := ir.Attrs{"style": ir.StringAttr(c.style), "dims": ir.IntAttr(int64(c.dims)), "theta": ir.FloatAttr(c.theta)}
		if c.factors != nil {
			attrs["freq_factors"] = ir.FloatsAttr(c.factors...)
		}
		m := 1.0
		if c.mscale != 0 {
			m = c.mscale
			attrs["attention_factor"] = ir.FloatAttr(m)
		}
		ins := []*tensor.Tensor{x, tensor.ScalarInt32(int32(c.pos))}
		if c.row >= 0 {
			attrs["original_max"] = ir.IntAttr(4)
			var flat []float32
			for _, row := range table {
				for _, f := range row {
					flat = append(flat, float32(f))
				}
			}
			ins = append(ins, tensor.FromFloat32([]int{3, 2}, flat))
		}
		got := launch(t, d, ir.OpRope, attrs, ins...)
		dims := c.dims
		if dims == 0 {
			dims = c.dh
		}
		want := f64s(x)
		for s := 0; s < c.s; s++ {
			for h := 0; h < c.h; h++ {
				v := want[(s*c.h+h)*c.dh : (s*c.h+h+1)*c.dh]
				for i := 0; i < dims/2; i++ {
					i0, i1 := 2*i, 2*i+1
					if c.style == "half" {
						i0, i1 = i, i+dims/2
					}
					ang := float64(c.pos+s) * math.Pow(c.theta, -2*float64(i)/float64(dims))
					if c.factors != nil {
						ang /= c.factors[i]
					}
					if c.row >= 0 {
						ang = float64(c.pos+s) * float64(float32(table[c.row][i]))
					}
					a, b := v[i0], v[i1]
					v[i0] = m * (a*math.Cos(ang) - b*math.Sin(ang))
					v[i1] = m * (a*math.Sin(ang) + b*math.Cos(ang))
				}
			}
		}
		approx(t, fmt.Sprintf("rope %+v", c), want, f64s(got), 0, 2e-5)
	}
	if err := launchRaw(d, ir.OpRope, nil, randF32(r, 1, 1, 4), tensor.ScalarInt32(0), randF32(r, 2, 3)); err == nil {
		t.Error("rope with a freqs table of 3 columns for 2 pairs: no error")
	}
}

func TestKVWriteInPlace(t *testing.T) {
	d := New()
	r := newRand(16)
	for _, dt := range []ir.DType{ir.F32, ir.F16} {
		cache := randF32(r, 8, 2, 3).Convert(dt)
		before := cache.Clone()
		nw := randF32(r, 3, 2, 3).Convert(dt)
		cb, _ := d.Upload(cache)
		nb, _ := d.Upload(nw)
		pb, _ := d.Upload(tensor.ScalarInt32(2))
		n, outs := node(t, ir.OpKVWrite, nil, cache, nw, tensor.ScalarInt32(2))
		res, err := d.Launch(n, []*runtime.Buffer{cb, nb, pb}, outs)
		if err != nil {
			t.Fatal(err)
		}
		if res[0] != cb {
			t.Errorf("%s: kv_write returned a new buffer, want the cache buffer itself", dt)
		}
		row := 2 * 3 * dt.Size()
		want := append(append(append([]byte{}, before.Data[:2*row]...), nw.Data...), before.Data[5*row:]...)
		if diff := cmp.Diff(want, cache.Data); diff != "" {
			t.Errorf("%s: the uploaded cache was not updated in place (-want +got):\n%s", dt, diff)
		}
	}
	for _, pos := range []int32{6, -1} {
		err := launchRaw(d, ir.OpKVWrite, nil, tensor.New(ir.F32, []int{8, 2, 3}), tensor.New(ir.F32, []int{3, 2, 3}), tensor.ScalarInt32(pos))
		if err == nil {
			t.Errorf("kv_write of 3 rows at %d into 8: no error", pos)
		}
	}
}

// naiveAttention is attention in float64: scores of the rows a query sees
// (a -Inf score for the rows a window hides), soft-capped, a softmax.
func naiveAttention(q, k, v *tensor.Tensor, pos int, scale float64, causal bool, softcap float64, window int) []float64 {
	s, h, dh := q.Shape[0], q.Shape[1], q.Shape[2]
	kh := k.Shape[1]
	qv, kv, vv := f64s(q), f64s(k), f64s(v)
	out := make([]float64, len(qv))
	for r := 0; r < s; r++ {
		for hh := 0; hh < h; hh++ {
			g := hh / (h / kh)
			n := pos + s
			if causal {
				n = pos + r + 1
			}
			sc := make([]float64, n)
			mx := math.Inf(-1)
			for j := range sc {
				for i := 0; i < dh; i++ {
					sc[j] += qv[(r*h+hh)*dh+i] * kv[(j*kh+g)*dh+i]
				}
				sc[j] *= scale
				if softcap > 0 {
					sc[j] = softcap * math.Tanh(sc[j]/softcap)
				}
				if window > 0 && j <= pos+r-window {
					sc[j] = math.Inf(-1)
				}
				mx = math.Max(mx, sc[j])
			}
			var sum float64
			for j := range sc {
				sc[j] = math.Exp(sc[j] - mx)
				sum += sc[j]
			}
			for j := range sc {
				for i := 0; i < dh; i++ {
					out[(r*h+hh)*dh+i] += sc[j] / sum * vv[(j*kh+g)*dh+i]
				}
			}
		}
	}
	return out
}

func TestAttention(t *testing.T) {
	d := New()
	r := newRand(17)
	cases := []struct {
		s, h, kh, dh, t, pos int
		causal               bool
		softcap              float64
		window               int
	}{
		{1, 4, 2, 8, 10, 5, true, 0, 0},
		{4, 4, 1, 8, 10, 3, true, 0, 0},
		{3, 2, 2, 8, 10, 0, false, 0, 0},
		{5, 6, 3, 5, 12, 7, true, 0, 0},
		{1, 1, 1, 3, 1, 0, true, 0, 0},
		{2, 8, 4, 16, 300, 250, true, 0, 0},
		{64, 8, 4, 16, 70, 3, true, 0, 0},  // big enough to run on several goroutines
		{1, 4, 2, 8, 20, 12, true, 0.5, 0}, // scores beyond the cap
		{6, 2, 1, 8, 20, 2, true, 0, 3},    // a window shorter than the rows seen
		{3, 2, 2, 8, 20, 9, false, 1, 4},   // both, without the causal mask
		{2, 2, 1, 4, 10, 0, true, 0, 100},  // a window longer than the cache
	}
	for _, c := range cases {
		q, k, v := randF32(r, c.s, c.h, c.dh), randF32(r, c.t, c.kh, c.dh), randF32(r, c.t, c.kh, c.dh)
		scale := 1 / math.Sqrt(float64(c.dh))
		a := ir.Attrs{"scale": ir.FloatAttr(scale), "causal": ir.BoolAttr(c.causal), "softcap": ir.FloatAttr(c.softcap), "window": ir.IntAttr(int64(c.window))}
		got := launch(t, d, ir.OpAttention, a, q, k, v, tensor.ScalarInt32(int32(c.pos)))
		approx(t, fmt.Sprintf("attention %+v", c), naiveAttention(q, k, v, c.pos, scale, c.causal, c.softcap, c.window), f64s(got), 1e-5, 1e-6)
	}
	// Rows beyond pos+S do not matter.
	q, k, v := randF32(r, 2, 2, 4), randF32(r, 6, 1, 4), randF32(r, 6, 1, 4)
	a := ir.Attrs{"scale": ir.FloatAttr(0.5), "causal": ir.BoolAttr(false)}
	before := launch(t, d, ir.OpAttention, a, q, k, v, tensor.ScalarInt32(1))
	for i := 3 * 4; i < 6*4; i++ {
		k.Float32s()[i], v.Float32s()[i] = 1e9, float32(math.NaN())
	}
	after := launch(t, d, ir.OpAttention, a, q, k, v, tensor.ScalarInt32(1))
	if diff := cmp.Diff(before.Float32s(), after.Float32s()); diff != "" {
		t.Errorf("attention read cache rows beyond pos+S:\n%s", diff)
	}
	for _, pos := range []int32{5, -1} {
		err := launchRaw(d, ir.OpAttention, ir.Attrs{"scale": ir.FloatAttr(1)}, randF32(r, 2, 2, 4), randF32(r, 6, 1, 4), randF32(r, 6, 1, 4), tensor.ScalarInt32(pos))
		if err == nil {
			t.Errorf("attention of 2 rows at pos %d over 6 cache rows: no error", pos)
		}
	}
}

// Results do not depend on how many goroutines share the work.
func TestDeterministicAcrossWorkers(t *testing.T) {
	r := newRand(18)
	q, k, v := randF32(r, 64, 8, 16), randF32(r, 80, 4, 16), randF32(r, 80, 4, 16)
	x, w := randF32(r, 300, 288), randF32(r, 288)
	var prev [][]float32
	for _, workers := range []int{1, 2, 3, 7} {
		d := New()
		d.workers = workers
		outs := [][]float32{
			launch(t, d, ir.OpAttention, ir.Attrs{"scale": ir.FloatAttr(0.25)}, q, k, v, tensor.ScalarInt32(16)).Float32s(),
			launch(t, d, ir.OpRMSNorm, nil, x, w).Float32s(),
			launch(t, d, ir.OpSoftmax, ir.Attrs{"axis": ir.IntAttr(0)}, x).Float32s(),
			launch(t, d, ir.OpMatmul, ir.Attrs{"transpose_b": ir.BoolAttr(true)}, x, randF32(newRand(19), 500, 288)).Float32s(),
		}
		if prev != nil {
			if diff := cmp.Diff(prev, outs); diff != "" {
				t.Errorf("%d workers differ from 1:\n%s", workers, diff)
			}
		}
		prev = outs
	}
}

// TestRopeKVWriteIsItsParts: rope_kv_write gives bit for bit what rope of
// q and k and kv_write of k and v give, for every rope variant the
// frontends build (both styles, partial rotary, frequency factors, an
// attention factor, a freqs table), and updates both caches in place.
func TestRopeKVWriteIsItsParts(t *testing.T) {
	d := New()
	r := newRand(17)
	table := randF32(r, 3, 4)
	for _, tc := range []struct {
		name  string
		attrs ir.Attrs
		freqs bool
	}{
		{"interleaved", nil, false},
		{"half partial", ir.Attrs{"style": ir.StringAttr("half"), "dims": ir.IntAttr(4), "theta": ir.FloatAttr(500000)}, false},
		{"llama3 factors", ir.Attrs{"freq_factors": ir.FloatsAttr(1, 2, 4, 8), "attention_factor": ir.FloatAttr(1.2)}, false},
		{"table", ir.Attrs{"style": ir.StringAttr("half"), "original_max": ir.IntAttr(4)}, true},
	} {
		pos := tensor.ScalarInt32(5)
		q, k, v := randF32(r, 1, 4, 8), randF32(r, 1, 2, 8), randF32(r, 1, 2, 8)
		kc, vc := randF32(r, 9, 2, 8), randF32(r, 9, 2, 8)
		extra := []*tensor.Tensor{}
		if tc.freqs {
			extra = append(extra, table)
		}
		wantQ := launch(t, d, ir.OpRope, tc.attrs, append([]*tensor.Tensor{q, pos}, extra...)...)
		wantK := launch(t, d, ir.OpRope, tc.attrs, append([]*tensor.Tensor{k, pos}, extra...)...)
		wantKC := launch(t, d, ir.OpKVWrite, nil, kc.Clone(), wantK, pos)
		wantVC := launch(t, d, ir.OpKVWrite, nil, vc.Clone(), v, pos)
		got := launchN(t, d, ir.OpRopeKVWrite, tc.attrs, append([]*tensor.Tensor{kc, vc, q, k, v, pos}, extra...)...)
		for i, want := range []*tensor.Tensor{wantKC, wantVC, wantQ} {
			if diff := cmp.Diff(want.Data, got[i].Data); diff != "" {
				t.Errorf("%s: output %d differs from rope and kv_write's (-want +got):\n%s", tc.name, i, diff)
			}
		}
		for i, cache := range []*tensor.Tensor{kc, vc} {
			if diff := cmp.Diff(got[i].Data, cache.Data); diff != "" {
				t.Errorf("%s: cache %d was not updated in place (-want +got):\n%s", tc.name, i, diff)
			}
		}
	}
	// A position past one cache's rows fails before either cache is written.
	kc, vc := randF32(r, 9, 2, 8), randF32(r, 6, 2, 8)
	before := kc.Clone()
	err := launchRaw(d, ir.OpRopeKVWrite, nil, kc, vc, randF32(r, 1, 4, 8), randF32(r, 1, 2, 8), randF32(r, 1, 2, 8), tensor.ScalarInt32(7))
	if err == nil {
		t.Error("rope_kv_write at position 7 of a 6-row v cache: no error")
	}
	if diff := cmp.Diff(before.Data, kc.Data); diff != "" {
		t.Errorf("a failing rope_kv_write changed the k cache (-before +after):\n%s", diff)
	}
}
