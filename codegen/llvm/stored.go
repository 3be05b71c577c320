package llvm

import (
	"fmt"

	"github.com/llir/llvm/ir/enum"
	"github.com/llir/llvm/ir/types"
	"github.com/llir/llvm/ir/value"

	"github.com/tapml/tapml/codegen/dequant"
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
	lanes := []value.Value{c64(0), c64(1), c64(2), c64(3)}
	konst := func(k uint32) value.Value { return c64(int64(k)) }
	p := unitPrinter{g: g, base: g.ptr[b]}
	return [4]value.Value(dequant.Walk(dequant.Unit(dt), dequant.Leaves[value.Value]{Block: blk, Elem: j, Lanes: lanes, Const: konst}, p.node))
}

// unitPrinter emits the ops of a dequant expression as LLVM instructions.
type unitPrinter struct {
	g    *gen
	base value.Value // i8* of the binding
}

// load loads a t at byte offset off (i64) of the binding, unaligned.
func (p unitPrinter) load(t types.Type, off value.Value) value.Value {
	g := p.g
	at := g.cur.NewGetElementPtr(types.I8, p.base, off)
	at.InBounds = true
	ld := g.cur.NewLoad(t, g.cur.NewBitCast(at, types.NewPointer(t)))
	ld.Align = 1
	return ld
}

// node emits op e over its arguments' values.
func (p unitPrinter) node(e *dequant.Expr, a []value.Value) value.Value {
	g := p.g
	binary := map[dequant.Op]func(x, y value.Value) value.Value{
		dequant.Add: g.add, dequant.Sub: g.sub, dequant.Mul: g.mul,
		dequant.FMul: g.fmul, dequant.FAdd: g.fadd, dequant.FSub: g.fsub,
		dequant.Shl: func(x, y value.Value) value.Value { return g.cur.NewShl(x, y) },
		dequant.Shr: func(x, y value.Value) value.Value { return g.cur.NewLShr(x, y) },
		dequant.And: func(x, y value.Value) value.Value { return g.cur.NewAnd(x, y) },
		dequant.Or:  func(x, y value.Value) value.Value { return g.cur.NewOr(x, y) },
	}
	switch e.Op {
	case dequant.Word:
		return g.cur.NewZExt(p.load(types.I32, a[0]), types.I64)
	case dequant.Byte:
		return g.cur.NewZExt(p.load(types.I8, a[0]), types.I64)
	case dequant.Half:
		return g.cur.NewFPExt(g.cur.NewBitCast(p.load(types.I16, a[0]), types.Half), types.Float)
	case dequant.Select:
		return g.sel(g.icmp(enum.IPredULT, a[0], c64(4)), a[1], a[2])
	case dequant.ToF32:
		return g.cur.NewSIToFP(a[0], types.Float)
	case dequant.I8ToF32:
		return g.cur.NewSIToFP(g.cur.NewTrunc(a[0], types.I8), types.Float)
	}
	f, ok := binary[e.Op]
	if !ok {
		panic(fmt.Sprintf("llvm: dequant op %d", e.Op))
	}
	return f(a[0], a[1])
}

// genDequantize decodes a tensor in a storage dtype to f32 (an f32 input
// is copied): an item is a unit of a block format, an element otherwise.
func genDequantize(g *gen) error {
	if !g.in[0].DType.IsBlock() {
		return genCopy(g) // f32, or f16/bf16 widened
	}
	g.bindAll()
	n := numel(g.in[0])
	shift := g.faultOnce(FaultWrongIndex)
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
func (g *gen) dotTileUnits(aRows, bRows []value.Value, k int64, shift bool, a aLoader, bb int) []value.Value {
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
				x[l] = a(off, g.addi(g.muli(u, 4), int64(l)))
			}
			av = append(av, x)
		}
		next := append([]value.Value{}, acc...)
		for c, off := range bRows {
			bv := g.unit(bb, g.add(off, g.muli(bu, 4)))
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
