package llvm

import (
	"fmt"

	"github.com/llir/llvm/ir/enum"
	"github.com/llir/llvm/ir/types"
	"github.com/llir/llvm/ir/value"

	"github.com/tapml/tapml/codegen/dequant"
	"github.com/tapml/tapml/ir"
)

// Kernels that read a weight in a storage dtype (the inputs the
// registry's Storage fact accepts): f16 and bf16 are element types here
// (ldF widens them); a block format is bound as bytes and decoded a unit
// of four consecutive elements at a time, as codegen/dequant describes
// it. Its integers are computed in i64, where none of the expressions
// wraps (a negative level, q - 8, is a negative i64 that converts to the
// same f32 as the wrapped u32 read as i32).

// unit decodes the unit of the block-format binding b whose first element
// has the flat index el (a multiple of 4) and returns its four lanes as
// f32 values.
func (g *gen) unit(b int, el value.Value) [4]value.Value {
	dt := g.bindings[b].Type.DType
	elems, bytes := dt.Block()
	blk := g.muli(g.divi(el, int64(elems)), int64(bytes))
	j := g.remi(el, int64(elems))
	p := &unitPrinter{g: g, base: g.ptr[b], blk: blk, j: j, shared: map[*dequant.Expr]value.Value{}}
	var out [4]value.Value
	for l := range out {
		p.lane, p.perLane = c64(int64(l)), map[*dequant.Expr]value.Value{}
		out[l] = p.print(dequant.Unit(dt))
	}
	return out
}

// unitPrinter emits a dequant expression as LLVM instructions.
type unitPrinter struct {
	g       *gen
	base    value.Value // i8* of the binding
	blk, j  value.Value
	lane    value.Value
	shared  map[*dequant.Expr]value.Value
	perLane map[*dequant.Expr]value.Value
}

// load loads a t at byte offset off (i64) of the binding, unaligned.
func (p *unitPrinter) load(t types.Type, off value.Value) value.Value {
	g := p.g
	at := g.cur.NewGetElementPtr(types.I8, p.base, off)
	at.InBounds = true
	ld := g.cur.NewLoad(t, g.cur.NewBitCast(at, types.NewPointer(t)))
	ld.Align = 1
	return ld
}

func (p *unitPrinter) print(e *dequant.Expr) value.Value {
	g := p.g
	switch e.Op {
	case dequant.Const:
		return c64(int64(e.K))
	case dequant.Block:
		return p.blk
	case dequant.Elem:
		return p.j
	case dequant.Lane:
		return p.lane
	}
	memo := p.shared
	if e.DependsOnLane() {
		memo = p.perLane
	}
	if v, ok := memo[e]; ok {
		return v
	}
	a := make([]value.Value, len(e.Args))
	for i, x := range e.Args {
		a[i] = p.print(x)
	}
	var v value.Value
	switch e.Op {
	case dequant.Word:
		v = g.cur.NewZExt(p.load(types.I32, a[0]), types.I64)
	case dequant.Byte:
		v = g.cur.NewZExt(p.load(types.I8, a[0]), types.I64)
	case dequant.Half:
		v = g.cur.NewFPExt(g.cur.NewBitCast(p.load(types.I16, a[0]), types.Half), types.Float)
	case dequant.Add:
		v = g.add(a[0], a[1])
	case dequant.Sub:
		v = g.sub(a[0], a[1])
	case dequant.Mul:
		v = g.mul(a[0], a[1])
	case dequant.Shl:
		v = g.cur.NewShl(a[0], a[1])
	case dequant.Shr:
		v = g.cur.NewLShr(a[0], a[1])
	case dequant.And:
		v = g.cur.NewAnd(a[0], a[1])
	case dequant.Or:
		v = g.cur.NewOr(a[0], a[1])
	case dequant.Select:
		v = g.sel(g.icmp(enum.IPredULT, a[0], c64(4)), a[1], a[2])
	case dequant.ToF32:
		v = g.cur.NewSIToFP(a[0], types.Float)
	case dequant.I8ToF32:
		v = g.cur.NewSIToFP(g.cur.NewTrunc(a[0], types.I8), types.Float)
	case dequant.FMul:
		v = g.fmul(a[0], a[1])
	case dequant.FAdd:
		v = g.fadd(a[0], a[1])
	case dequant.FSub:
		v = g.fsub(a[0], a[1])
	default:
		panic(fmt.Sprintf("llvm: dequant op %d", e.Op))
	}
	memo[e] = v
	return v
}

// genDequantize decodes a tensor in a storage dtype to f32 (an f32 input
// is copied): an item is a unit of a block format, an element otherwise.
func genDequantize(g *gen) error {
	dt := g.in[0].DType
	if dt == ir.F32 {
		return genCopy(g)
	}
	g.bindAll()
	n := numel(g.in[0])
	shift := g.faultOnce(FaultWrongIndex)
	if !dt.IsBlock() {
		g.setItems(n)
		g.loop(g.lo, g.hi, func(i value.Value) {
			at := i
			if shift {
				at = g.wrapNext(i, n)
			}
			g.stF(1, i, g.ldF(0, at))
		})
		g.finish()
		return nil
	}
	g.setItems(n / 4)
	g.loop(g.lo, g.hi, func(u value.Value) {
		at := u
		if shift {
			at = g.wrapNext(u, n/4)
		}
		lanes := g.unit(0, g.muli(at, 4))
		for l, v := range lanes {
			g.stF(1, g.addi(g.muli(u, 4), int64(l)), v)
		}
	})
	g.finish()
	return nil
}

// gatherRow copies inner elements of a table in a storage dtype from
// element src to element dst of the f32 output (binding 2), decoded.
func (g *gen) gatherRow(src, dst value.Value, inner int64) {
	if !g.in[0].DType.IsBlock() {
		g.loop(c64(0), c64(inner), func(j value.Value) {
			g.stF(2, g.add(dst, j), g.ldF(0, g.add(src, j)))
		})
		return
	}
	g.loop(c64(0), c64(inner/4), func(u value.Value) {
		for l, v := range g.unit(0, g.add(src, g.muli(u, 4))) {
			g.stF(2, g.addi(g.add(dst, g.muli(u, 4)), int64(l)), v)
		}
	})
}

// dotTileUnits is dotTile for a block-format b: each unit of every b row
// is decoded once and multiplied into the accumulators of every a row.
func (g *gen) dotTileUnits(aRows, bRows []value.Value, k int64, shift bool) []value.Value {
	init := make([]value.Value, len(aRows)*len(bRows))
	for i := range init {
		init[i] = cf(0)
	}
	units := k / 4
	return g.loopAcc(c64(0), c64(units), init, func(u value.Value, acc []value.Value) []value.Value {
		bu := u
		if shift {
			bu = g.wrapNext(u, units)
		}
		var av [][4]value.Value
		for _, off := range aRows {
			var x [4]value.Value
			for l := range x {
				x[l] = g.ldF(0, g.add(off, g.addi(g.muli(u, 4), int64(l))))
			}
			av = append(av, x)
		}
		next := append([]value.Value{}, acc...)
		for c, off := range bRows {
			bv := g.unit(1, g.add(off, g.muli(bu, 4)))
			for r := range aRows {
				i := r*len(bRows) + c
				for l := range bv {
					next[i] = g.ov(g.faddFast(next[i], g.fmulFast(av[r][l], bv[l])))
				}
			}
		}
		return next
	})
}
