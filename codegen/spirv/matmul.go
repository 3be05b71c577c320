package spirv

// genMatmul generates a[..., M, K] × b[..., K, N] (or b[..., N, K] with
// transpose_b) with broadcast batch dims. Each invocation computes a tile
// of up to 4×4 outputs, keeping the tile's accumulators in registers and
// reusing every loaded element of a across the tile's columns and of b
// across its rows. Loads are clamped into range (edge tiles compute some
// outputs twice) and stores are guarded.
func genMatmul(k *kern) error {
	k.bindAll()
	b := k.b
	as, bs, os := sizes(k.in[0]), sizes(k.in[1]), sizes(k.out[0])
	transB := k.attrs.Bool("transpose_b")
	m, kk := as[len(as)-2], as[len(as)-1]
	n := os[len(os)-1]
	aBatch, bBatch, oBatch := as[:len(as)-2], bs[:len(bs)-2], os[:len(os)-2]
	batch := prod(oBatch)
	tm, tn := min(4, max(m, 1)), min(4, max(n, 1))
	ntr, ntc := ceilDiv(m, tm), ceilDiv(n, tn)
	wrongIndex := k.faultIs(FaultWrongIndex)
	A, B, O := k.ins[0], k.ins[1], k.outs[0]
	k.elementwise(batch*ntr*ntc, func(t Value) {
		tc := b.RemU(t, ntc)
		tr := b.RemU(b.DivU(t, ntc), ntr)
		bt := b.DivU(t, ntc*ntr)
		var aOff, bOff Value
		if len(oBatch) > 0 {
			c := k.coords(oBatch, bt)
			aOff = b.MulU(k.broadcastOffset(oBatch, aBatch, c), m*kk)
			bOff = b.MulU(k.broadcastOffset(oBatch, bBatch, c), kk*n)
		} else {
			aOff, bOff = b.U(0), b.U(0)
		}
		oOff := b.MulU(bt, m*n)
		r0, c0 := b.MulU(tr, tm), b.MulU(tc, tn)
		aBase := make([]Value, tm)
		for i := range aBase {
			aBase[i] = b.Add(aOff, b.MulU(b.MinU(b.AddU(r0, i), m-1), kk))
		}
		bBase := make([]Value, tn)
		for j := range bBase {
			col := b.MinU(b.AddU(c0, j), n-1)
			if transB {
				bBase[j] = b.Add(bOff, b.MulU(col, kk))
			} else {
				bBase[j] = b.Add(bOff, col)
			}
		}
		acc := make([][]Var, tm)
		for i := range acc {
			acc[i] = make([]Var, tn)
			for j := range acc[i] {
				acc[i][j] = b.NewVar(k.m.F32, b.F(0))
			}
		}
		b.ForN(kk, func(p Value) {
			pb := p
			if wrongIndex {
				pb = b.MinU(b.AddU(p, 1), max(kk-1, 0))
			}
			av := make([]Value, tm)
			for i := range av {
				av[i] = b.Load(A, b.Add(aBase[i], p))
			}
			bv := make([]Value, tn)
			for j := range bv {
				if transB {
					bv[j] = b.Load(B, b.Add(bBase[j], pb))
				} else {
					bv[j] = b.Load(B, b.Add(bBase[j], b.MulU(pb, n)))
				}
			}
			for i := range acc {
				for j := range acc[i] {
					b.Set(acc[i][j], k.ov(b.Add(b.Get(acc[i][j]), b.Mul(av[i], bv[j]))))
				}
			}
		})
		for i := range acc {
			for j := range acc[i] {
				row, col := b.AddU(r0, i), b.AddU(c0, j)
				store := func() {
					b.Store(O, b.Add(oOff, b.Add(b.MulU(row, n), col)), b.Get(acc[i][j]))
				}
				var cond Value
				hasCond := false
				if m%tm != 0 {
					cond, hasCond = b.Lt(row, b.U(m)), true
				}
				if n%tn != 0 {
					c := b.Lt(col, b.U(n))
					if hasCond {
						cond = b.And(cond, c)
					} else {
						cond, hasCond = c, true
					}
				}
				if hasCond {
					b.If(cond, store)
				} else {
					store()
				}
			}
		}
	})
	return nil
}
