package spirv

// matmul kernels, chosen by shape:
//
//   - gemvT, transpose_b with M ≤ 4 (the decode step of every linear
//     layer, b is [N, K] weights): L lanes share an output column, each
//     folding a strided part of K so that a workgroup's loads of b are
//     contiguous; a tree in workgroup memory sums the lanes. With
//     Tuning.GEMVLanes = 1 it is the register-tiled kernel instead (no
//     barriers: better on CPU drivers).
//   - tiled, M and N ≥ 32 (prefill): a workgroup of 256 computes a 64×64
//     block of the output, staging 64×16 of a and 16×64 of b in workgroup
//     memory per step of K; each invocation accumulates a 4×4 register
//     block, strided by 16 so that workgroup-memory reads and global writes
//     are contiguous across invocations.
//   - regTiled, otherwise: each invocation computes up to 4×4 outputs from
//     global memory, reusing each loaded element across its tile.
//
// Leading (batch) dims broadcast: the batch index is folded into the
// workgroup (or invocation) index.

// mmShape is a matmul's sizes.
type mmShape struct {
	m, k, n            int
	batch, aB, bB      []int // output and input batch dims
	transB             bool
	aStride, bStride   int // elements per batch of a and b
	outStride, batches int
}

func (k *kern) mmShape() mmShape {
	as, bs, os := sizes(k.in[0]), sizes(k.in[1]), sizes(k.out[0])
	s := mmShape{m: as[len(as)-2], k: as[len(as)-1], n: os[len(os)-1], transB: k.attrs.Bool("transpose_b"),
		batch: os[:len(os)-2], aB: as[:len(as)-2], bB: bs[:len(bs)-2]}
	s.aStride, s.bStride, s.outStride, s.batches = s.m*s.k, s.k*s.n, s.m*s.n, prod(s.batch)
	return s
}

// batchOffsets returns the offsets of batch bt in a, b and the output.
func (k *kern) batchOffsets(s mmShape, bt Value) (aOff, bOff, oOff Value) {
	b := k.b
	if len(s.batch) == 0 {
		return b.U(0), b.U(0), b.U(0)
	}
	c := k.coords(s.batch, bt)
	return b.MulU(k.broadcastOffset(s.batch, s.aB, c), s.aStride),
		b.MulU(k.broadcastOffset(s.batch, s.bB, c), s.bStride),
		b.MulU(bt, s.outStride)
}

// bIndex is the offset of b's element (row p of K, column col of N).
func (k *kern) bIndex(s mmShape, bOff, p, col Value) Value {
	b := k.b
	if s.transB {
		return b.Add(bOff, b.Add(b.MulU(col, s.k), p))
	}
	return b.Add(bOff, b.Add(b.MulU(p, s.n), col))
}

// faultK applies the wrong_index fault to b's K index.
func (k *kern) faultK(s mmShape, p Value, wrong bool) Value {
	if !wrong {
		return p
	}
	return k.b.MinU(k.b.AddU(p, 1), max(s.k-1, 0))
}

// genMatmul generates a[..., M, K] × b[..., K, N] (or b[..., N, K] with
// transpose_b).
func genMatmul(k *kern) error {
	k.bindAll()
	s := k.mmShape()
	lanes := k.tune.GEMVLanes
	if lanes == 0 {
		lanes = 32
	}
	switch {
	case s.transB && s.m <= 4 && lanes > 1 && s.k > 1:
		k.gemvT(s, lanes)
	case s.m >= 32 && s.n >= 32 && k.threads(256) == 256 && k.lim.MaxWorkgroupStorageSize >= 8192:
		k.tiled(s)
	default:
		k.regTiled(s)
	}
	return nil
}

// gemvT: L lanes per output column, R = wg/L columns per workgroup, every
// row of a (M ≤ 4) at once.
func (k *kern) gemvT(s mmShape, lanes int) {
	b := k.b
	wgx := k.threads(256)
	l := 1
	for l*2 <= min(lanes, wgx, 64) && l < s.k {
		l *= 2
	}
	rows := wgx / l
	tiles := ceilDiv(s.n, rows)
	groups := s.batches * tiles
	wrong := k.faultIs(FaultWrongIndex)
	red := k.m.Workgroup(k.m.F32, s.m*wgx, "red")
	A, B, O := k.ins[0], k.ins[1], k.outs[0]
	g := k.entry(wgx, groups)
	valid := b.Lt(g, b.U(groups))
	g = b.MinU(g, max(groups-1, 0))
	tid := k.tid()
	lane, rr := b.RemU(tid, l), b.DivU(tid, l)
	bt, tile := b.DivU(g, tiles), b.RemU(g, tiles)
	aOff, bOff, oOff := k.batchOffsets(s, bt)
	col := b.Add(b.MulU(tile, rows), rr)
	colC := b.MinU(col, last(s.n))
	acc := make([]Var, s.m)
	for i := range acc {
		acc[i] = b.NewVar(k.m.F32, b.F(0))
	}
	b.For(lane, b.U(s.k), l, func(p Value) {
		bv := b.Load(B, k.bIndex(s, bOff, k.faultK(s, p, wrong), colC))
		for i := range acc {
			av := b.Load(A, b.Add(aOff, b.AddU(p, i*s.k)))
			b.Set(acc[i], k.ov(b.Add(b.Get(acc[i]), b.Mul(av, bv))))
		}
	})
	for i := range acc {
		b.Store(red, b.AddU(tid, i*wgx), b.Get(acc[i]))
	}
	k.barrier(true)
	for st := l / 2; st >= 1; st /= 2 {
		b.If(b.Lt(lane, b.U(st)), func() {
			for i := range acc {
				at := b.AddU(tid, i*wgx)
				sum := b.Add(b.Load(red, at), b.Load(red, b.AddU(at, st)))
				b.Store(red, at, k.ov(sum))
			}
		})
		k.barrier(false)
	}
	write := b.And(valid, b.And(b.Eq(lane, b.U(0)), b.Lt(col, b.U(s.n))))
	b.If(write, func() {
		for i := range acc {
			v := b.Load(red, b.AddU(tid, i*wgx))
			b.Store(O, b.Add(oOff, b.AddU(col, i*s.n)), v)
		}
	})
}

// Tile of the workgroup-tiled kernel.
const (
	tileMN = 64 // output rows and columns per workgroup
	tileK  = 16 // K per step
	tileT  = 16 // invocations per tile row and column (tileMN/4)
)

// tiled: 64×64 output block per workgroup of 256, K in steps of 16
// through workgroup memory.
func (k *kern) tiled(s mmShape) {
	b := k.b
	const wgx = tileT * tileT
	tm, tn := ceilDiv(s.m, tileMN), ceilDiv(s.n, tileMN)
	groups := s.batches * tm * tn
	wrong := k.faultIs(FaultWrongIndex)
	as := k.m.Workgroup(k.m.F32, tileK*tileMN, "as")
	bs := k.m.Workgroup(k.m.F32, tileK*tileMN, "bs")
	A, B, O := k.ins[0], k.ins[1], k.outs[0]
	g := k.entry(wgx, groups)
	valid := b.Lt(g, b.U(groups))
	g = b.MinU(g, max(groups-1, 0))
	tid := k.tid()
	tr, tc := b.DivU(tid, tileT), b.RemU(tid, tileT)
	bt := b.DivU(g, tm*tn)
	ti := b.RemU(b.DivU(g, tn), tm)
	tj := b.RemU(g, tn)
	aOff, bOff, oOff := k.batchOffsets(s, bt)
	row0, col0 := b.MulU(ti, tileMN), b.MulU(tj, tileMN)
	acc := make([][]Var, 4)
	for i := range acc {
		acc[i] = make([]Var, 4)
		for j := range acc[i] {
			acc[i][j] = b.NewVar(k.m.F32, b.F(0))
		}
	}
	zero := b.F(0)
	b.For(b.U(0), b.U(ceilDiv(s.k, tileK)), 1, func(step Value) {
		k0 := b.MulU(step, tileK)
		for q := 0; q < tileK*tileMN/wgx; q++ {
			e := b.AddU(tid, q*wgx)
			// a: consecutive invocations read consecutive k of a row.
			r, kk := b.DivU(e, tileK), b.RemU(e, tileK)
			p := b.Add(k0, kk)
			row := b.MinU(b.Add(row0, r), last(s.m))
			av := b.Load(A, b.Add(aOff, b.Add(b.MulU(row, s.k), b.MinU(p, last(s.k)))))
			b.Store(as, b.Add(b.MulU(kk, tileMN), r), b.Select(b.Lt(p, b.U(s.k)), av, zero))
			// b: contiguous along K (transposed) or along N.
			var c Value
			if s.transB {
				c, kk = b.DivU(e, tileK), b.RemU(e, tileK)
			} else {
				kk, c = b.DivU(e, tileMN), b.RemU(e, tileMN)
			}
			p = b.Add(k0, kk)
			col := b.MinU(b.Add(col0, c), last(s.n))
			pb := k.faultK(s, b.MinU(p, last(s.k)), wrong)
			bv := b.Load(B, k.bIndex(s, bOff, pb, col))
			b.Store(bs, b.Add(b.MulU(kk, tileMN), c), b.Select(b.Lt(p, b.U(s.k)), bv, zero))
		}
		k.barrier(true)
		b.ForN(tileK, func(kk Value) {
			base := b.MulU(kk, tileMN)
			av := make([]Value, 4)
			bv := make([]Value, 4)
			for i := range av {
				av[i] = b.Load(as, b.Add(base, b.AddU(tr, i*tileT)))
				bv[i] = b.Load(bs, b.Add(base, b.AddU(tc, i*tileT)))
			}
			for i := range acc {
				for j := range acc[i] {
					b.Set(acc[i][j], k.ov(b.Add(b.Get(acc[i][j]), b.Mul(av[i], bv[j]))))
				}
			}
		})
		k.barrier(false)
	})
	for i := range acc {
		for j := range acc[i] {
			row := b.Add(row0, b.AddU(tr, i*tileT))
			col := b.Add(col0, b.AddU(tc, j*tileT))
			ok := b.And(valid, b.And(b.Lt(row, b.U(s.m)), b.Lt(col, b.U(s.n))))
			b.If(ok, func() {
				b.Store(O, b.Add(oOff, b.Add(b.MulU(row, s.n), col)), b.Get(acc[i][j]))
			})
		}
	}
}

// regTiled: each invocation computes a tile of up to 4×4 outputs from
// global memory, keeping the accumulators in registers and reusing every
// loaded element of a across the tile's columns and of b across its rows.
// Loads are clamped into range (edge tiles compute some outputs twice) and
// stores are guarded.
func (k *kern) regTiled(s mmShape) {
	b := k.b
	tm, tn := min(4, max(s.m, 1)), min(4, max(s.n, 1))
	ntr, ntc := ceilDiv(s.m, tm), ceilDiv(s.n, tn)
	wrong := k.faultIs(FaultWrongIndex)
	A, B, O := k.ins[0], k.ins[1], k.outs[0]
	k.elementwise(s.batches*ntr*ntc, func(t Value) {
		tc := b.RemU(t, ntc)
		tr := b.RemU(b.DivU(t, ntc), ntr)
		bt := b.DivU(t, ntc*ntr)
		aOff, bOff, oOff := k.batchOffsets(s, bt)
		r0, c0 := b.MulU(tr, tm), b.MulU(tc, tn)
		aBase := make([]Value, tm)
		for i := range aBase {
			aBase[i] = b.Add(aOff, b.MulU(b.MinU(b.AddU(r0, i), last(s.m)), s.k))
		}
		cols := make([]Value, tn)
		for j := range cols {
			cols[j] = b.MinU(b.AddU(c0, j), last(s.n))
		}
		acc := make([][]Var, tm)
		for i := range acc {
			acc[i] = make([]Var, tn)
			for j := range acc[i] {
				acc[i][j] = b.NewVar(k.m.F32, b.F(0))
			}
		}
		b.ForN(s.k, func(p Value) {
			pb := k.faultK(s, p, wrong)
			av := make([]Value, tm)
			for i := range av {
				av[i] = b.Load(A, b.Add(aBase[i], p))
			}
			bv := make([]Value, tn)
			for j := range bv {
				bv[j] = b.Load(B, k.bIndex(s, bOff, pb, cols[j]))
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
					b.Store(O, b.Add(oOff, b.Add(b.MulU(row, s.n), col)), b.Get(acc[i][j]))
				}
				var conds []Value
				if s.m%tm != 0 {
					conds = append(conds, b.Lt(row, b.U(s.m)))
				}
				if s.n%tn != 0 {
					conds = append(conds, b.Lt(col, b.U(s.n)))
				}
				switch len(conds) {
				case 0:
					store()
				case 1:
					b.If(conds[0], store)
				default:
					b.If(b.And(conds[0], conds[1]), store)
				}
			}
		}
	})
}

// last is the largest index of n elements (0 when there are none, for
// clamps in kernels that then do nothing).
func last(n int) int { return max(n-1, 0) }
