package llvm

import (
	"cmp"
	"fmt"

	"github.com/llir/llvm/ir/constant"
	"github.com/llir/llvm/ir/enum"
	"github.com/llir/llvm/ir/types"
	"github.com/llir/llvm/ir/value"

	"github.com/tapml/tapml/ir"
)

// Matmul tiling. With transpose_b (weights stored out×in, the LLM case)
// every output element is a dot product of two contiguous rows; an item is
// a tile of tileN output columns of one batch, over all M rows, computed
// tileM rows at a time: tileM·tileN accumulators in one k loop whose adds
// may be reassociated, which LLVM vectorises along k (one vector register
// per accumulator). The b rows of a tile stay in L1 while the rows of a go
// by. M=1 (decode) is a GEMV over tiles of 4 weight rows.
//
// Without transpose_b an item is a chunk of chunkN columns of one output
// row, accumulated in place over k as out[m, n] += a[m, k]·b[k, n] with n
// innermost (contiguous, vectorised).
const (
	tileM  = 2
	tileN  = 4
	chunkN = 64
)

func genMatmul(g *gen) error {
	a, b, o := g.in[0], g.in[1], g.out[0]
	for i, t := range []ir.Type{a, b, o} {
		if !t.DType.IsFloat() && !(i == 1 && t.DType.IsBlock() && g.attrs.Bool("transpose_b")) {
			return fmt.Errorf("matmul computes on f32, f16 and bf16 (b may be a block format with transpose_b), got %s", t.DType)
		}
	}
	if len(g.in) > 2 && (o.DType != ir.F32 || !g.in[2].Equal(o)) {
		return fmt.Errorf("matmul's addend c must be the f32 output's type %s, got %s", o, g.in[2])
	}
	g.bindAll()
	as, bs, os := sizes(a), sizes(b), sizes(o)
	ra, rb, ro := len(as), len(bs), len(os)
	m, k := int64(as[ra-2]), int64(as[ra-1])
	n := int64(os[ro-1])
	transB := g.attrs.Bool("transpose_b")
	// batch strides (in matrices) of a and b along the output's batch dims
	batch := os[:ro-2]
	nb := prod(batch)
	aStr, bStr := batchStrides(batch, as[:ra-2]), batchStrides(batch, bs[:rb-2])
	batchOff := func(bi value.Value) (value.Value, value.Value) {
		ao, bo := value.Value(c64(0)), value.Value(c64(0))
		div := int64(1)
		for d := len(batch) - 1; d >= 0; d-- {
			if aStr[d] != 0 || bStr[d] != 0 {
				c := g.remi(g.divi(bi, div), int64(batch[d]))
				if aStr[d] != 0 {
					ao = g.add(ao, g.muli(c, aStr[d]))
				}
				if bStr[d] != 0 {
					bo = g.add(bo, g.muli(c, bStr[d]))
				}
			}
			div *= int64(batch[d])
		}
		return g.muli(ao, m*k), g.muli(bo, k*n)
	}
	shift := g.faultOnce(FaultWrongIndex)
	if nb == 0 || m == 0 || n == 0 {
		g.setItems(0)
		g.finish()
		return nil
	}
	if transB {
		tiles := (n + tileN - 1) / tileN
		full := n / tileN
		g.setItems(nb * tiles)
		g.loop(g.lo, g.hi, func(it value.Value) {
			bi, t := g.divi(it, tiles), g.remi(it, tiles)
			aOff, bOff := batchOff(bi)
			oOff := g.muli(bi, m*n)
			n0 := g.muli(t, tileN)
			tile := func(cols int64) {
				bRows := make([]value.Value, cols)
				for c := range bRows {
					bRows[c] = g.add(bOff, g.muli(g.addi(n0, int64(c)), k))
				}
				rowBlock := func(m0 value.Value, rows int64) {
					aRows := make([]value.Value, rows)
					for r := range aRows {
						aRows[r] = g.add(aOff, g.muli(g.addi(m0, int64(r)), k))
					}
					acc := g.dotTiles(b.DType, aRows, bRows, k, shift, g.plainA, 1)
					for r := range aRows {
						for c := range bRows {
							at := g.add(g.add(oOff, g.muli(g.addi(m0, int64(r)), n)), g.addi(n0, int64(c)))
							g.stOut(at, acc[r*len(bRows)+c])
						}
					}
				}
				if m >= tileM {
					g.loop(c64(0), c64(m/tileM), func(mp value.Value) {
						rowBlock(g.muli(mp, tileM), tileM)
					})
				}
				if rem := m % tileM; rem > 0 {
					rowBlock(c64(m-rem), rem)
				}
			}
			if full == tiles {
				tile(tileN)
				return
			}
			// the last tile holds n%tileN columns
			isFull := g.icmp(enum.IPredSLT, t, c64(full))
			fb, lb, join := g.block(), g.block(), g.block()
			g.cur.NewCondBr(isFull, fb, lb)
			g.cur = fb
			tile(tileN)
			g.cur.NewBr(join)
			g.cur = lb
			tile(n % tileN)
			g.cur.NewBr(join)
			g.cur = join
		})
		g.finish()
		return nil
	}
	if a.DType == ir.F32 && b.DType == ir.F32 && o.DType == ir.F32 && g.fault != FaultF16Overflow {
		g.matmulVec(m, k, n, nb, batchOff, shift)
		g.finish()
		return nil
	}
	chunks := (n + chunkN - 1) / chunkN
	g.setItems(nb * m * chunks)
	g.loop(g.lo, g.hi, func(it value.Value) {
		c := g.remi(it, chunks)
		row := g.divi(it, chunks) // bi*m + mi
		bi, mi := g.divi(row, m), g.remi(row, m)
		aOff, bOff := batchOff(bi)
		aRow := g.add(aOff, g.muli(mi, k))
		oRow := g.muli(row, n)
		n0 := g.muli(c, chunkN)
		n1 := g.sel(g.icmp(enum.IPredSLT, g.addi(n0, chunkN), c64(n)), g.addi(n0, chunkN), c64(n))
		if o.DType != ir.F32 {
			// accumulate each element in f32 and round it once
			g.loop(n0, n1, func(j value.Value) {
				acc := g.loopAcc(c64(0), c64(k), []value.Value{cf(0)}, func(kk value.Value, acc []value.Value) []value.Value {
					bk := kk
					if shift {
						bk = g.wrapNext(kk, k)
					}
					p := g.fmulFast(g.ldF(0, g.add(aRow, kk)), g.ldF(1, g.add(g.add(bOff, g.muli(bk, n)), j)))
					return []value.Value{g.ov(g.faddFast(acc[0], p))}
				})
				g.stOut(g.add(oRow, j), acc[0])
			})
			return
		}
		ob := g.outBinding(0)
		g.loop(n0, n1, func(j value.Value) {
			g.stF(ob, g.add(oRow, j), cf(0))
		})
		g.loop(c64(0), c64(k), func(kk value.Value) {
			av := g.ldF(0, g.add(aRow, kk))
			bk := kk
			if shift {
				bk = g.wrapNext(kk, k)
			}
			bRow := g.add(bOff, g.muli(bk, n))
			g.loop(n0, n1, func(j value.Value) {
				at := g.add(oRow, j)
				s := g.faddFast(g.ldF(ob, at), g.fmulFast(av, g.ldF(1, g.add(bRow, j))))
				g.stF(ob, at, g.ov(s))
			})
		})
		if len(g.in) > 2 {
			g.loop(n0, n1, func(j value.Value) {
				at := g.add(oRow, j)
				g.stOut(at, g.ldF(ob, at))
			})
		}
	})
	g.finish()
	return nil
}

// Register tiles of the f32 kernel without transpose_b: vecMR rows by
// vecNV vectors of vecW columns, accumulated in registers over k (an FMA of
// a broadcast a[m, k] and a vector of b's row k). A GEMV (M=1) takes wider
// tiles of gemvNV vectors.
const (
	vecW   = 8
	vecMR  = 4
	vecNV  = 2
	gemvNV = 8
)

// matmulVec emits the f32 kernel without transpose_b. An item is one tile
// of (up to) vecMR rows by nv·vecW columns of one batch; the last row block
// and column chunk take what is left (columns beyond whole vectors as
// scalars). Each output element is a sum over k in order.
func (g *gen) matmulVec(m, k, n, nb int64, batchOff func(value.Value) (value.Value, value.Value), shift bool) {
	mr, nv := int64(vecMR), int64(vecNV)
	if m < vecMR {
		mr, nv = m, gemvNV
	}
	ncol := nv * vecW
	mBlocks, nChunks := (m+mr-1)/mr, (n+ncol-1)/ncol
	g.setItems(nb * mBlocks * nChunks)
	g.loop(g.lo, g.hi, func(it value.Value) {
		nc := g.remi(it, nChunks)
		rest := g.divi(it, nChunks)
		mb, bi := g.remi(rest, mBlocks), g.divi(rest, mBlocks)
		aOff, bOff := batchOff(bi)
		oOff := g.muli(bi, m*n)
		m0, n0 := g.muli(mb, mr), g.muli(nc, ncol)
		tile := func(rows, cols int64) {
			g.vecTile(aOff, bOff, oOff, m0, n0, rows, cols/vecW, cols%vecW, k, n, shift)
		}
		// variants: full or last row block × full or last column chunk
		rowCases := []int64{mr}
		if r := m % mr; r != 0 {
			rowCases = append(rowCases, r)
		}
		colCases := []int64{ncol}
		if c := n % ncol; c != 0 {
			colCases = append(colCases, c)
		}
		g.branch(mb, mBlocks-1, rowCases, func(rows int64) {
			g.branch(nc, nChunks-1, colCases, func(cols int64) { tile(rows, cols) })
		})
	})
}

// branch emits body(cases[0]) when there is one case; with two, body(cases[1])
// when idx == last and body(cases[0]) otherwise.
func (g *gen) branch(idx value.Value, last int64, cases []int64, body func(int64)) {
	if len(cases) == 1 {
		body(cases[0])
		return
	}
	isLast := g.icmp(enum.IPredEQ, idx, c64(last))
	lb, fb, join := g.block(), g.block(), g.block()
	g.cur.NewCondBr(isLast, lb, fb)
	g.cur = lb
	body(cases[1])
	g.cur.NewBr(join)
	g.cur = fb
	body(cases[0])
	g.cur.NewBr(join)
	g.cur = join
}

// vecTile emits the k loop of one register tile: rows rows from m0, nv
// vectors and ns scalar columns from n0.
func (g *gen) vecTile(aOff, bOff, oOff, m0, n0 value.Value, rows, nv, ns, k, n int64, shift bool) {
	vt := types.NewVector(vecW, types.Float)
	vp := types.NewPointer(vt)
	vload := func(bind int, idx value.Value) value.Value {
		p := g.cur.NewBitCast(g.gep(bind, idx), vp)
		l := g.cur.NewLoad(vt, p)
		l.Align = 4
		return l
	}
	vstore := func(bind int, idx, v value.Value) {
		p := g.cur.NewBitCast(g.gep(bind, idx), vp)
		st := g.cur.NewStore(v, p)
		st.Align = 4
	}
	splat := func(x value.Value) value.Value {
		v := g.cur.NewInsertElement(constant.NewUndef(vt), x, c32(0))
		return g.cur.NewShuffleVector(v, constant.NewUndef(vt), constant.NewZeroInitializer(types.NewVector(vecW, types.I32)))
	}
	per := nv + ns
	init := make([]value.Value, rows*per)
	for r := int64(0); r < rows; r++ {
		for j := int64(0); j < per; j++ {
			if j < nv {
				init[r*per+j] = constant.NewZeroInitializer(vt)
			} else {
				init[r*per+j] = cf(0)
			}
		}
	}
	acc := g.loopAcc(c64(0), c64(k), init, func(kk value.Value, acc []value.Value) []value.Value {
		bk := kk
		if shift {
			bk = g.wrapNext(kk, k)
		}
		bRow := g.add(g.add(bOff, g.muli(bk, n)), n0)
		bv := make([]value.Value, per)
		for j := int64(0); j < per; j++ {
			if j < nv {
				bv[j] = vload(1, g.addi(bRow, j*vecW))
			} else {
				bv[j] = g.ldF(1, g.addi(bRow, nv*vecW+j-nv))
			}
		}
		next := make([]value.Value, len(acc))
		for r := int64(0); r < rows; r++ {
			av := g.ldF(0, g.add(aOff, g.add(g.muli(g.addi(m0, r), k), kk)))
			var as value.Value
			if nv > 0 {
				as = splat(av)
			}
			for j := int64(0); j < per; j++ {
				i := r*per + j
				if j < nv {
					next[i] = g.fma(acc[i], as, bv[j])
				} else {
					next[i] = g.fma(acc[i], av, bv[j])
				}
			}
		}
		return next
	})
	for r := int64(0); r < rows; r++ {
		oRow := g.add(g.add(oOff, g.muli(g.addi(m0, r), n)), n0)
		for j := int64(0); j < per; j++ {
			if j < nv {
				at, v := g.addi(oRow, j*vecW), acc[r*per+j]
				if len(g.in) > 2 {
					v = g.fadd(v, vload(2, at))
				}
				vstore(g.outBinding(0), at, v)
			} else {
				g.stOut(g.addi(oRow, nv*vecW+j-nv), acc[r*per+j])
			}
		}
	}
}

// stOut stores v, an element of matmul's product, at idx of the output,
// plus the addend's element idx when the node has one (a residual add fused
// into the product, passes/residual.go): one f32 add, as the add op.
func (g *gen) stOut(idx, v value.Value) {
	if len(g.in) > 2 {
		v = g.fadd(v, g.ldF(2, idx))
	}
	g.stF(g.outBinding(0), idx, v)
}

// aLoader loads element kk of the row of a at element offset off, as the
// product reads it.
type aLoader func(off, kk value.Value) value.Value

// plainA reads a as it is, from binding 0.
func (g *gen) plainA(off, kk value.Value) value.Value { return g.ldF(0, g.add(off, kk)) }

// dotTiles is dotTile, or dotTileUnits when b (binding bb) is in a block
// format.
func (g *gen) dotTiles(bt ir.DType, aRows, bRows []value.Value, k int64, shift bool, a aLoader, bb int) []value.Value {
	if bt.IsBlock() {
		return g.dotTileUnits(aRows, bRows, k, shift, a, bb)
	}
	return g.dotTile(aRows, bRows, k, shift, a, bb)
}

// dotTile emits one k loop computing the dot products of every row of a
// (element offsets aRows, read through a) with every row of b (binding bb,
// offsets bRows), each of length k, and returns them row-major (a row,
// then b row).
func (g *gen) dotTile(aRows, bRows []value.Value, k int64, shift bool, a aLoader, bb int) []value.Value {
	init := make([]value.Value, len(aRows)*len(bRows))
	for i := range init {
		init[i] = cf(0)
	}
	return g.loopAcc(c64(0), c64(k), init, func(kk value.Value, acc []value.Value) []value.Value {
		bk := kk
		if shift {
			bk = g.wrapNext(kk, k)
		}
		av := make([]value.Value, len(aRows))
		for r, off := range aRows {
			av[r] = a(off, kk)
		}
		next := make([]value.Value, len(acc))
		for c, off := range bRows {
			bv := g.ldF(bb, g.add(off, bk))
			for r := range aRows {
				i := r*len(bRows) + c
				next[i] = g.ov(g.faddFast(acc[i], g.fmulFast(av[r], bv)))
			}
		}
		return next
	})
}

// batchStrides returns, for each dim of the output batch shape out, the
// stride (in matrices) of an operand with batch shape in along that dim
// (0 where the operand broadcasts).
func batchStrides(out, in []int) []int64 {
	st := make([]int64, len(out))
	acc := int64(1)
	for j := len(in) - 1; j >= 0; j-- {
		d := len(out) - len(in) + j
		if in[j] != 1 {
			st[d] = acc
		}
		acc *= int64(in[j])
	}
	return st
}

// genRMSNormMatmul emits rms_norm_matmul: matmul(rms_norm(x, g), w) with
// transpose_b. An item is a chunk of chunkN output columns of one row: it
// computes the row's reciprocal RMS as rms_norm does (Σx² in order, /K,
// +eps, 1/sqrt), then dot products in tiles of tileN columns whose a is
// g·(inv·x), each element rounded as rms_norm rounds it.
//
// rms_norm_swiglu (x, g, wg, wu) is the same kernel with a second weight:
// each tile's gate and up products meet in the fused_elementwise
// mul(silu($0), $1) that it replaces, through the same formulas.
func genRMSNormMatmul(g *gen) error {
	x, gw := g.in[0], g.in[1]
	for _, w := range g.in[2:] {
		if x.DType != ir.F32 || gw.DType != ir.F32 || !w.DType.IsFloat() && !w.DType.IsBlock() {
			return fmt.Errorf("%s needs f32 x and g (the weights may be stored), got %s, %s and %s", g.op, x, gw, w)
		}
	}
	swiglu := g.op == ir.OpRMSNormSwiGLU
	// The products' segments: rms_norm_qkv's three weights (bindings 2,
	// 3, 4) each write their output; the others have one, weight 2 (and
	// swiglu's up, 3) to output 0. Items run over every segment's rows ×
	// chunks in turn.
	type segment struct {
		w, out     int
		n, base    int64
		chunks, nb int64 // chunks of a row; items
	}
	var segs []segment
	var genErr error
	g.bindAll()
	xs := sizes(x)
	k := int64(xs[len(xs)-1])
	rows := int64(prod(xs[:len(xs)-1]))
	shift := g.faultOnce(FaultWrongIndex)
	var items int64
	for j := range g.out {
		n := int64(sizes(g.in[2+j])[0])
		chunks := (n + chunkN - 1) / chunkN
		segs = append(segs, segment{w: 2 + j, out: j, n: n, base: items, chunks: chunks, nb: rows * chunks})
		items += rows * chunks
	}
	if items == 0 {
		g.setItems(0)
		g.finish()
		return nil
	}
	eps := float32(g.attrs.Float("eps"))
	g.setItems(items)
	for _, sg := range segs {
		if sg.nb == 0 {
			continue
		}
		n, chunks, ob := sg.n, sg.chunks, g.outBinding(sg.out)
		lo, hi := g.lo, g.hi
		if len(segs) > 1 { // this segment's part of the worker's items
			end := c64(sg.base + sg.nb)
			lo = g.sel(g.icmp(enum.IPredSGT, lo, c64(sg.base)), lo, c64(sg.base))
			hi = g.sel(g.icmp(enum.IPredSLT, hi, end), hi, end)
		}
		g.loop(lo, hi, func(it value.Value) {
			if sg.base > 0 {
				it = g.sub(it, c64(sg.base))
			}
			row, c := g.divi(it, chunks), g.remi(it, chunks)
			xOff := g.muli(row, k)
			ss := g.loopAcc(c64(0), c64(k), []value.Value{cf(0)}, func(j value.Value, acc []value.Value) []value.Value {
				v := g.ldF(0, g.add(xOff, j))
				return []value.Value{g.ov(g.fadd(acc[0], g.fmul(v, v)))}
			})[0]
			inv := g.fdiv(cf(1), g.sqrtf(g.fadd(g.fdiv(ss, cf(float32(k))), cf(eps))))
			normed := func(off, kk value.Value) value.Value {
				return g.fmul(g.ldF(1, kk), g.fmul(inv, g.ldF(0, g.add(off, kk))))
			}
			n0 := g.muli(c, chunkN)
			cols := func(first value.Value, width int64) {
				bRows := make([]value.Value, width)
				for j := range bRows {
					bRows[j] = g.muli(g.addi(first, int64(j)), k)
				}
				acc := g.dotTiles(g.in[sg.w].DType, []value.Value{xOff}, bRows, k, shift, normed, sg.w)
				if swiglu {
					up := g.dotTiles(g.in[3].DType, []value.Value{xOff}, bRows, k, shift, normed, 3)
					for j := range acc {
						s, err := g.opOn(ir.OpSilu, acc[j])
						if err == nil {
							acc[j], err = g.opOn(ir.OpMul, s, up[j])
						}
						genErr = cmp.Or(genErr, err)
					}
				}
				for j := range bRows {
					g.stF(ob, g.add(g.muli(row, n), g.addi(first, int64(j))), acc[j])
				}
			}
			// whole tiles of the chunk (every chunk but the last is whole),
			// then the columns past the last whole tile
			end := g.sel(g.icmp(enum.IPredSLT, g.addi(n0, chunkN), c64(n)), g.addi(n0, chunkN), c64(n))
			g.loop(c64(0), g.divi(g.sub(end, n0), tileN), func(t value.Value) {
				cols(g.add(n0, g.muli(t, tileN)), tileN)
			})
			if rem := n % tileN; rem > 0 {
				last := g.icmp(enum.IPredEQ, c, c64(chunks-1))
				lb, join := g.block(), g.block()
				g.cur.NewCondBr(last, lb, join)
				g.cur = lb
				cols(c64(n-rem), rem)
				g.cur.NewBr(join)
				g.cur = join
			}
		})
	}
	if genErr != nil {
		return genErr
	}
	g.finish()
	return nil
}
