package spirv

import "fmt"

// negBig starts running maxima: the most negative finite f32 rounded a
// little up (naga rejects infinite constants).
const negBig = -3.0e38

// genAttention generates scaled dot-product attention with one workgroup
// per (query row s, head h). The visible cache rows (0..pos+s with causal,
// 0..pos+S-1 without, clamped to the cache) are taken in chunks that fit
// workgroup memory; each chunk's scores are computed one row per
// invocation, and an online softmax (running max m, running sum l, output
// accumulators rescaled by exp(m_old - m_new)) folds the chunks, so any
// cache length works. Invocation d accumulates output dims d, d+wg, ...
func genAttention(k *kern) error {
	k.bindAll()
	b := k.b
	qs, ks := sizes(k.in[0]), sizes(k.in[1])
	s, h, dh := qs[0], qs[1], qs[2]
	t, kh := ks[0], ks[1]
	group := h / kh
	scale := float32(k.attrs.Float("scale"))
	if k.faultIs(FaultWrongConstant) {
		scale *= 1.1
	}
	causal := k.attrs.Bool("causal")
	wrongIndex := k.faultIs(FaultWrongIndex)
	wgx := k.threads(max(dh, 32))
	chunk := min(t, k.lim.MaxWorkgroupStorageSize/4-wgx, 2048)
	if chunk < 1 {
		return fmt.Errorf("workgroup storage of %d bytes is too small for attention with %d invocations", k.lim.MaxWorkgroupStorageSize, wgx)
	}
	slots := ceilDiv(dh, wgx)
	sc := k.m.Workgroup(k.m.F32, chunk, "scores")
	red := k.m.Workgroup(k.m.F32, wgx, "red")
	Q, K, V, P, O := k.ins[0], k.ins[1], k.ins[2], k.ins[3], k.outs[0]
	k.rowwise(s*h, wgx, func(row, valid, tid Value) {
		sr := b.DivU(row, h)
		kvh := b.DivU(b.RemU(row, h), group)
		qb := b.MulU(row, dh)
		pos := k.loadPos(P)
		var n Value
		if causal {
			n = b.MinU(b.Add(pos, b.AddU(sr, 1)), t)
		} else {
			n = b.MinU(b.AddU(pos, s), t)
		}
		m := b.NewVar(k.m.F32, b.F(negBig))
		l := b.NewVar(k.m.F32, b.F(0))
		acc := make([]Var, slots)
		for j := range acc {
			acc[j] = b.NewVar(k.m.F32, b.F(0))
		}
		nch := b.DivU(b.AddU(n, chunk-1), chunk)
		b.For(b.U(0), nch, 1, func(c Value) {
			c0 := b.MulU(c, chunk)
			cn := b.MinU(b.Sub(n, c0), chunk)
			// Scores of this chunk, one cache row per invocation.
			lm := b.NewVar(k.m.F32, b.F(negBig))
			b.For(tid, cn, wgx, func(j Value) {
				tr := b.Add(c0, j)
				if wrongIndex {
					tr = b.MinU(b.AddU(tr, 1), max(t-1, 0))
				}
				kb := b.MulU(b.Add(b.MulU(tr, kh), kvh), dh)
				dot := b.NewVar(k.m.F32, b.F(0))
				b.ForN(dh, func(d Value) {
					qv := b.Load(Q, b.Add(qb, d))
					kv := b.Load(K, b.Add(kb, d))
					b.Set(dot, k.ov(b.Add(b.Get(dot), b.Mul(qv, kv))))
				})
				sv := b.Mul(b.Get(dot), b.F(scale))
				b.Store(sc, j, sv)
				b.Set(lm, b.Max(b.Get(lm), sv))
			})
			cm := k.reduce(red, tid, wgx, b.Get(lm), b.Max)
			mOld := b.Get(m)
			mNew := b.Max(mOld, cm)
			alpha := b.Ext(glslExp, b.Sub(mOld, mNew))
			ls := b.NewVar(k.m.F32, b.F(0))
			b.For(tid, cn, wgx, func(j Value) {
				p := b.Ext(glslExp, b.Sub(b.Load(sc, j), mNew))
				b.Store(sc, j, p)
				b.Set(ls, b.Add(b.Get(ls), p))
			})
			// The reduction's barriers also publish the probabilities.
			csum := k.reduce(red, tid, wgx, b.Get(ls), b.Add)
			b.Set(l, k.ov(b.Add(b.Mul(b.Get(l), alpha), csum)))
			b.Set(m, mNew)
			for j := range acc {
				d := b.AddU(tid, j*wgx)
				b.If(b.Lt(d, b.U(dh)), func() {
					a := b.NewVar(k.m.F32, b.Mul(b.Get(acc[j]), alpha))
					b.For(b.U(0), cn, 1, func(r Value) {
						vb := b.MulU(b.Add(b.MulU(b.Add(c0, r), kh), kvh), dh)
						pv := b.Mul(b.Load(sc, r), b.Load(V, b.Add(vb, d)))
						b.Set(a, k.ov(b.Add(b.Get(a), pv)))
					})
					b.Set(acc[j], b.Get(a))
				})
			}
			// Every invocation is done with the chunk's scores before the
			// next chunk overwrites them.
			k.barrier(false)
		})
		for j := range acc {
			d := b.AddU(tid, j*wgx)
			b.If(b.And(valid, b.Lt(d, b.U(dh))), func() {
				lv := b.Get(l)
				y := b.Select(b.Gt(lv, b.F(0)), b.Div(b.Get(acc[j]), lv), b.F(0))
				b.Store(O, b.Add(qb, d), y)
			})
		}
	})
	return nil
}
