package cpu

import (
	"fmt"
	"math"

	"github.com/tapml/tapml/ir"
	"github.com/tapml/tapml/tensor"
)

// The reductions and the LLM ops (rms_norm, layer_norm, softmax, argmax,
// rope, kv_write, attention). Sums run sequentially in float32, in the
// order of llama2.c's run.c. Products that feed a sum are rounded to f32
// explicitly (float32(a*b)) so that no compiler fuses them into an FMA:
// the bits are the same on every architecture.

func checkF32(what string, ts ...*tensor.Tensor) error {
	for _, t := range ts {
		if t.DType != ir.F32 {
			return fmt.Errorf("%s is %s; this op computes on f32, f16 and bf16", what, t.DType)
		}
	}
	return nil
}

// normInputs checks x[..., D] and the per-channel params p[D].
func normInputs(c *call) (rows, dim int, err error) {
	x := c.in[0]
	if err := checkF32("input", c.in...); err != nil {
		return 0, 0, err
	}
	if len(x.Shape) == 0 {
		return 0, 0, fmt.Errorf("x must have rank >= 1")
	}
	dim = x.Shape[len(x.Shape)-1]
	for i, p := range c.in[1:] {
		if len(p.Shape) != 1 || p.Shape[0] != dim {
			return 0, 0, fmt.Errorf("input %d is %v, want [%d] like x's last dim", i+1, p.Shape, dim)
		}
	}
	if dim == 0 {
		return 0, 0, nil
	}
	return x.NumElements() / dim, dim, nil
}

// rmsNormKernel is run.c's rmsnorm over the last axis:
// ss = Σx² (f32), ss = 1/sqrtf(ss/D + eps), out = w·(ss·x).
func rmsNormKernel(d *Device, c *call) ([]*tensor.Tensor, error) {
	rows, dim, err := normInputs(c)
	if err != nil {
		return nil, err
	}
	out := tensor.New(ir.F32, c.in[0].Shape)
	x, w, o := c.in[0].Float32s(), c.in[1].Float32s(), out.Float32s()
	eps := float32(c.attrs.Float("eps"))
	d.parallel(rows, rows*dim*4, func(lo, hi int) {
		for r := lo; r < hi; r++ {
			xr, or := x[r*dim:(r+1)*dim], o[r*dim:(r+1)*dim]
			var ss float32
			for _, v := range xr {
				ss += float32(v * v)
			}
			ss /= float32(dim)
			ss += eps
			ss = 1 / float32(math.Sqrt(float64(ss)))
			for j, v := range xr {
				or[j] = w[j] * (ss * v)
			}
		}
	})
	return []*tensor.Tensor{out}, nil
}

// layerNormKernel: mean = Σx/D, var = Σ(x-mean)²/D (two passes, f32),
// out = ((x-mean)·(1/sqrtf(var+eps)))·w + b (b is optional).
func layerNormKernel(d *Device, c *call) ([]*tensor.Tensor, error) {
	rows, dim, err := normInputs(c)
	if err != nil {
		return nil, err
	}
	out := tensor.New(ir.F32, c.in[0].Shape)
	x, w, o := c.in[0].Float32s(), c.in[1].Float32s(), out.Float32s()
	var b []float32 // nil: no bias
	if len(c.in) == 3 {
		b = c.in[2].Float32s()
	}
	eps := float32(c.attrs.Float("eps"))
	d.parallel(rows, rows*dim*6, func(lo, hi int) {
		for r := lo; r < hi; r++ {
			xr, or := x[r*dim:(r+1)*dim], o[r*dim:(r+1)*dim]
			var sum float32
			for _, v := range xr {
				sum += v
			}
			mean := sum / float32(dim)
			var vs float32
			for _, v := range xr {
				dv := v - mean
				vs += float32(dv * dv)
			}
			inv := 1 / float32(math.Sqrt(float64(vs/float32(dim)+eps)))
			for j, v := range xr {
				y := float32(float32((v-mean)*inv) * w[j]) // rounded: never fused with the bias
				if b != nil {
					y += b[j]
				}
				or[j] = y
			}
		}
	})
	return []*tensor.Tensor{out}, nil
}

// axisLayout splits a shape around axis: outer × dim × inner.
func axisLayout(shape []int, axis int64) (outer, dim, inner int, err error) {
	r := len(shape)
	a := axis
	if a < 0 {
		a += int64(r)
	}
	if a < 0 || a >= int64(r) {
		return 0, 0, 0, fmt.Errorf("axis %d out of range for rank %d", axis, r)
	}
	return tensor.NumElements(shape[:a]), shape[a], tensor.NumElements(shape[a+1:]), nil
}

// softmaxRow is run.c's softmax over x[0], x[stride], ...: subtract the
// max, exponentiate, sum in f32, divide.
func softmaxRow(x []float32, n, stride int) {
	if n == 0 {
		return
	}
	mx := x[0]
	for i := 1; i < n; i++ {
		if v := x[i*stride]; v > mx {
			mx = v
		}
	}
	var sum float32
	for i := 0; i < n; i++ {
		e := expf(x[i*stride] - mx)
		x[i*stride] = e
		sum += e
	}
	for i := 0; i < n; i++ {
		x[i*stride] /= sum
	}
}

func softmaxKernel(d *Device, c *call) ([]*tensor.Tensor, error) {
	x := c.in[0]
	if err := checkF32("input", x); err != nil {
		return nil, err
	}
	outer, dim, inner, err := axisLayout(x.Shape, c.attrs.Int("axis"))
	if err != nil {
		return nil, err
	}
	out := x.Clone()
	o := out.Float32s()
	d.parallel(outer*inner, outer*inner*dim*8, func(lo, hi int) {
		for r := lo; r < hi; r++ {
			base := (r/inner)*dim*inner + r%inner
			softmaxRow(o[base:], dim, inner)
		}
	})
	return []*tensor.Tensor{out}, nil
}

// argmaxKernel returns the i32 index of the largest element along axis,
// scanning like run.c's sample_argmax (strictly greater replaces), so the
// first maximum wins and a NaN is never chosen unless it comes first.
// Supports f32 (f16/bf16 through f32), i32 and i64.
func argmaxKernel(_ *Device, c *call) ([]*tensor.Tensor, error) {
	x := c.in[0]
	outer, dim, inner, err := axisLayout(x.Shape, c.attrs.Int("axis"))
	if err != nil {
		return nil, err
	}
	ax := int(c.attrs.Int("axis"))
	if ax < 0 {
		ax += len(x.Shape)
	}
	shape := append(append([]int{}, x.Shape[:ax]...), x.Shape[ax+1:]...)
	out := tensor.New(ir.I32, shape)
	if out.NumElements() > 0 && dim == 0 {
		return nil, fmt.Errorf("argmax over an empty axis")
	}
	if dim > math.MaxInt32 {
		return nil, fmt.Errorf("axis of %d elements does not fit i32 indices", dim)
	}
	o := out.Int32s()
	switch x.DType {
	case ir.F32:
		argmax(view[float32](x), o, outer, dim, inner)
	case ir.I32:
		argmax(view[int32](x), o, outer, dim, inner)
	case ir.I64:
		argmax(view[int64](x), o, outer, dim, inner)
	default:
		return nil, fmt.Errorf("argmax is not supported on %s (f32, f16, bf16, i32, i64 are)", x.DType)
	}
	return []*tensor.Tensor{out}, nil
}

func argmax[T float32 | int32 | int64](x []T, o []int32, outer, dim, inner int) {
	for r := range outer * inner {
		base := (r/inner)*dim*inner + r%inner
		best, bi := x[base], 0
		for i := 1; i < dim; i++ {
			if v := x[base+i*inner]; v > best {
				best, bi = v, i
			}
		}
		o[r] = int32(bi)
	}
}

// scalarPos reads a pos input: an i32 scalar.
func scalarPos(t *tensor.Tensor) (int, error) {
	if t.DType != ir.I32 || len(t.Shape) != 0 {
		return 0, fmt.Errorf("pos must be an i32 scalar, got %s", t)
	}
	return int(t.Int32s()[0]), nil
}

// ropeKernel rotates x[S, H, Dh] as run.c does: pair i (i < dims/2) of the
// row at position p = pos+s turns by val = p·freq, freq = 1/powf(theta,
// 2i/dims), all in f32. powf, cosf and sinf are computed in float64 and
// rounded to f32 (C's are within an ulp of that). The pair is (2i, 2i+1) in
// style interleaved and (i, i+dims/2) in style half; dims beyond `dims`
// pass through. An attention factor m multiplies cos and sin (in f32, as
// transformers does) before they rotate the pair; a freqs table input
// replaces the computed frequencies by its row for the length pos+S.
func ropeKernel(_ *Device, c *call) ([]*tensor.Tensor, error) {
	x := c.in[0]
	if err := checkF32("x", x); err != nil {
		return nil, err
	}
	if len(x.Shape) != 3 {
		return nil, fmt.Errorf("x must be [S, H, Dh], got %v", x.Shape)
	}
	pos, err := scalarPos(c.in[1])
	if err != nil {
		return nil, err
	}
	s, h, dh := x.Shape[0], x.Shape[1], x.Shape[2]
	dims := int(c.attrs.Int("dims"))
	if dims == 0 {
		dims = dh
	}
	if dims < 2 || dims%2 != 0 || dims > dh {
		return nil, fmt.Errorf("dims %d must be even, >= 2 and <= head dim %d", dims, dh)
	}
	interleaved := true
	switch st := c.attrs.String("style"); st {
	case "interleaved":
	case "half":
		interleaved = false
	default:
		return nil, fmt.Errorf("style %q is neither interleaved nor half", st)
	}
	half := dims / 2
	freq := ir.RopeFreqs(float32(c.attrs.Float("theta")), dims, c.attrs.Floats("freq_factors"))
	if len(c.in) == 3 {
		if freq, err = ropeTableRow(c.in[2], pos, s, int(c.attrs.Int("original_max")), half); err != nil {
			return nil, err
		}
	}
	m := float32(c.attrs.Float("attention_factor"))
	cs := make([]float32, 2*half)
	out := x.Clone()
	o := out.Float32s()
	for r := 0; r < s; r++ {
		p := float32(pos + r)
		for i, f := range freq {
			val := float64(p * f)
			cs[2*i], cs[2*i+1] = float32(math.Cos(val)), float32(math.Sin(val))
			if m != 1 {
				cs[2*i], cs[2*i+1] = cs[2*i]*m, cs[2*i+1]*m
			}
		}
		for hh := 0; hh < h; hh++ {
			v := o[(r*h+hh)*dh : (r*h+hh+1)*dh]
			for i := 0; i < half; i++ {
				i0, i1 := 2*i, 2*i+1
				if !interleaved {
					i0, i1 = i, i+half
				}
				fcr, fci := cs[2*i], cs[2*i+1]
				v0, v1 := v[i0], v[i1]
				v[i0] = float32(v0*fcr) - float32(v1*fci)
				v[i1] = float32(v0*fci) + float32(v1*fcr)
			}
		}
	}
	return []*tensor.Tensor{out}, nil
}

// ropeTableRow returns the frequencies a rope call of s rows from pos
// reads from its freqs table [R, half].
func ropeTableRow(t *tensor.Tensor, pos, s, originalMax, half int) ([]float32, error) {
	if err := checkF32("freqs", t); err != nil {
		return nil, err
	}
	if len(t.Shape) != 2 || t.Shape[0] < 1 || t.Shape[1] != half {
		return nil, fmt.Errorf("freqs must be [R, %d], got %v", half, t.Shape)
	}
	r := ir.RopeTableRow(pos, s, originalMax, t.Shape[0])
	return t.Float32s()[r*half : (r+1)*half], nil
}

// kvWriteKernel copies new[S, KH, Dh] into rows pos..pos+S-1 of
// cache[T, KH, Dh] in place and returns the cache itself. Any dtype.
func kvWriteKernel(_ *Device, c *call) ([]*tensor.Tensor, error) {
	cache, nw := c.in[0], c.in[1]
	pos, err := scalarPos(c.in[2])
	if err != nil {
		return nil, err
	}
	if len(cache.Shape) != 3 {
		return nil, fmt.Errorf("cache must be [T, KH, Dh], got %v", cache.Shape)
	}
	if nw.DType != cache.DType || len(nw.Shape) != 3 || nw.Shape[1] != cache.Shape[1] || nw.Shape[2] != cache.Shape[2] {
		return nil, fmt.Errorf("new is %s, want %s[S, %d, %d] like the cache", nw, cache.DType, cache.Shape[1], cache.Shape[2])
	}
	t, s := cache.Shape[0], nw.Shape[0]
	if pos < 0 || pos+s > t {
		return nil, fmt.Errorf("rows %d..%d do not fit a cache of %d rows (pos %d, %d new rows)", pos, pos+s-1, t, pos, s)
	}
	row := cache.Shape[1] * cache.Shape[2] * cache.DType.Size()
	copy(cache.Data[pos*row:(pos+s)*row], nw.Data)
	return []*tensor.Tensor{cache}, nil
}

// ropeKVWriteKernel is rope_kv_write as its four nodes: rope of q and of
// k (ropeKernel, one set of attributes), then kv_write of the rotated k and
// of v (kvWriteKernel), each cache updated in place. Both caches' rows are
// checked before either is written, so a failing call changes nothing.
func ropeKVWriteKernel(d *Device, c *call) ([]*tensor.Tensor, error) {
	kc, vc, q, k, v, pos := c.in[0], c.in[1], c.in[2], c.in[3], c.in[4], c.in[5]
	rope := func(x *tensor.Tensor) (*tensor.Tensor, error) {
		out, err := ropeKernel(d, &call{op: ir.OpRope, attrs: c.attrs, in: append([]*tensor.Tensor{x, pos}, c.in[6:]...)})
		if err != nil {
			return nil, err
		}
		return out[0], nil
	}
	qr, err := rope(q)
	if err != nil {
		return nil, fmt.Errorf("q: %w", err)
	}
	kr, err := rope(k)
	if err != nil {
		return nil, fmt.Errorf("k: %w", err)
	}
	p, err := scalarPos(pos)
	if err != nil {
		return nil, err
	}
	for _, cache := range []*tensor.Tensor{kc, vc} {
		if len(cache.Shape) == 3 && len(v.Shape) == 3 && (p < 0 || p+v.Shape[0] > cache.Shape[0]) {
			return nil, fmt.Errorf("rows %d..%d do not fit a cache of %d rows (pos %d, %d new rows)", p, p+v.Shape[0]-1, cache.Shape[0], p, v.Shape[0])
		}
	}
	res := []*tensor.Tensor{nil, nil, qr}
	for i, nw := range []*tensor.Tensor{kr, v} {
		out, err := kvWriteKernel(d, &call{op: ir.OpKVWrite, in: []*tensor.Tensor{c.in[i], nw, pos}})
		if err != nil {
			return nil, fmt.Errorf("%s: %w", []string{"k_cache", "v_cache"}[i], err)
		}
		res[i] = out[0]
	}
	return res, nil
}

// attentionKernel is run.c's multi-head attention over cache rows
// 0..pos+S-1: for query row s and head h (kv head h/(H/KH)), score[t] =
// (q·k[t])·scale summed in f32 over t ≤ pos+s (causal) or t < pos+S,
// and t > pos+s-window with a window; soft-capped as transformers does
// (score/softcap, tanh in float64 rounded to f32, times softcap);
// softmax as run.c, out = Σ_t score[t]·v[t] accumulated in order of t.
// (s, h) pairs are split over goroutines; each is computed by one.
func attentionKernel(d *Device, c *call) ([]*tensor.Tensor, error) {
	q, k, v := c.in[0], c.in[1], c.in[2]
	if err := checkF32("q, k and v", q, k, v); err != nil {
		return nil, err
	}
	pos, err := scalarPos(c.in[3])
	if err != nil {
		return nil, err
	}
	if len(q.Shape) != 3 || len(k.Shape) != 3 || !equalInts(k.Shape, v.Shape) {
		return nil, fmt.Errorf("want q[S, H, Dh], k and v [T, KH, Dh]; got %v, %v, %v", q.Shape, k.Shape, v.Shape)
	}
	s, h, dh := q.Shape[0], q.Shape[1], q.Shape[2]
	t, kh := k.Shape[0], k.Shape[1]
	if k.Shape[2] != dh {
		return nil, fmt.Errorf("q head dim %d differs from k's %d", dh, k.Shape[2])
	}
	if kh == 0 || h%kh != 0 {
		return nil, fmt.Errorf("query heads %d must be a multiple of kv heads %d", h, kh)
	}
	if pos < 0 || pos+s > t {
		return nil, fmt.Errorf("rows 0..%d do not fit a cache of %d rows (pos %d, %d query rows)", pos+s-1, t, pos, s)
	}
	group := h / kh
	scale := float32(c.attrs.Float("scale"))
	causal := c.attrs.Bool("causal")
	softcap := float32(c.attrs.Float("softcap"))
	window := int(c.attrs.Int("window"))
	out := tensor.New(ir.F32, q.Shape)
	qd, kd, vd, od := q.Float32s(), k.Float32s(), v.Float32s(), out.Float32s()
	work := s * h * (pos + s) * dh * 2
	d.parallel(s*h, work, func(lo, hi int) {
		att := make([]float32, pos+s)
		for task := lo; task < hi; task++ {
			r, hh := task/h, task%h
			kvh := hh / group
			n := pos + s
			if causal {
				n = pos + r + 1
			}
			first := 0 // the first row the window keeps
			if window > 0 {
				first = max(pos+r-window+1, 0)
			}
			qv := qd[task*dh : (task+1)*dh]
			row, off := kh*dh, kvh*dh // cache row stride, this head's offset
			for j := first; j < n; j++ {
				kv := kd[j*row+off : j*row+off+dh]
				kv = kv[:len(qv)]
				var score float32
				for i, x := range qv {
					score += float32(x * kv[i])
				}
				att[j] = score * scale
				if softcap > 0 {
					att[j] = float32(math.Tanh(float64(att[j]/softcap))) * softcap
				}
			}
			softmaxRow(att[first:n], n-first, 1)
			ov := od[task*dh : (task+1)*dh]
			for j := first; j < n; j++ {
				a := att[j]
				vv := vd[j*row+off : j*row+off+dh]
				vv = vv[:len(ov)]
				for i, x := range vv {
					ov[i] += float32(a * x)
				}
			}
		}
	})
	return []*tensor.Tensor{out}, nil
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
