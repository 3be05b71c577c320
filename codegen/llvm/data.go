package llvm

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/llir/llvm/ir/constant"
	"github.com/llir/llvm/ir/enum"
	"github.com/llir/llvm/ir/types"
	"github.com/llir/llvm/ir/value"

	"github.com/tapml/tapml/ir"
	"github.com/tapml/tapml/tensor"
)

// Data ops move elements without arithmetic and support every dtype: they
// copy the element bits.

// f32At returns element i of an f32 tensor (bit-exact, NaN payloads kept
// as far as LLVM's hex float form allows).
func f32At(t *tensor.Tensor, i int) float32 {
	return math.Float32frombits(binary.LittleEndian.Uint32(t.Data[4*i:]))
}

// genConstant fills the output with the value attribute (every element, or
// one repeated), converted to the dtype as tensor.SetFloat64At does. An
// item is an element.
func genConstant(g *gen) error {
	o := g.out[0]
	vals := g.attrs.Floats("value")
	n := numel(o)
	if len(vals) != 1 && int64(len(vals)) != n {
		return fmt.Errorf("value has %d elements, the output %d", len(vals), n)
	}
	g.bindAll()
	bump := 0.0
	if g.faultOnce(FaultWrongConstant) {
		bump = 1
	}
	t := tensor.New(o.DType, []int{len(vals)})
	for i, v := range vals {
		t.SetFloat64At(i, v+bump)
	}
	// the element constants, in the storage type (f16 and bf16 as their bits)
	et := elemType(o.DType)
	elems := make([]constant.Constant, len(vals))
	for i := range vals {
		switch o.DType {
		case ir.F32:
			elems[i] = cf(f32At(t, i))
		case ir.F16, ir.BF16:
			elems[i] = constant.NewInt(types.I16, int64(int16(binary.LittleEndian.Uint16(t.Data[2*i:]))))
		case ir.I32:
			elems[i] = c32(int64(t.Int32s()[i]))
		case ir.I64:
			elems[i] = c64(int64(binary.LittleEndian.Uint64(t.Data[8*i:])))
		case ir.Bool:
			elems[i] = c8(int64(t.Data[i]))
		default:
			return fmt.Errorf("constant of dtype %s", o.DType)
		}
	}
	// f16 elements are stored as their bits
	var dst value.Value = g.ptr[0]
	if o.DType == ir.F16 {
		dst = g.entry.NewBitCast(g.ptr[0], types.NewPointer(types.I16))
		et = types.I16
	}
	g.setItems(n)
	shift := len(vals) > 1 && g.faultOnce(FaultWrongIndex)
	var table value.Value
	if len(vals) > 1 {
		table = g.global("value", et, elems)
	}
	g.loop(g.lo, g.hi, func(i value.Value) {
		var v value.Value = elems[0]
		if table != nil {
			at := i
			if shift {
				at = g.wrapNext(i, n)
			}
			p := g.cur.NewGetElementPtr(et, table, at)
			p.InBounds = true
			v = g.cur.NewLoad(et, p)
		}
		p := g.cur.NewGetElementPtr(et, dst, i)
		p.InBounds = true
		g.cur.NewStore(v, p)
	})
	g.finish()
	return nil
}

// genCopy copies its input (reshape, probe, transfer). An item is an element.
func genCopy(g *gen) error {
	convert := g.in[0].DType != g.out[0].DType // dequantize of f16 or bf16
	if convert && !(g.op == ir.OpDequantize && g.in[0].DType.IsFloat()) {
		return fmt.Errorf("output is %s, input %s", g.out[0].DType, g.in[0].DType)
	}
	g.bindAll()
	n := numel(g.in[0])
	g.setItems(n)
	shift := g.faultOnce(FaultWrongIndex)
	g.loop(g.lo, g.hi, func(i value.Value) {
		at := i
		if shift {
			at = g.wrapNext(i, n)
		}
		if convert {
			g.stF(1, i, g.ldF(0, at))
		} else {
			g.st(1, i, g.ld(0, at))
		}
	})
	g.finish()
	return nil
}

// genGather: out = table[:axis] + ids + table[axis+1:]. An item is one
// (outer index, id) pair, which copies one slice of the table. An id
// outside [0, table dim) returns StatusIDRange.
func genGather(g *gen) error {
	table, ids := g.in[0], g.in[1]
	if ids.DType != ir.I32 && ids.DType != ir.I64 {
		return fmt.Errorf("ids must be i32 or i64, got %s", ids.DType)
	}
	g.bindAll()
	ts := sizes(table)
	ax := ir.NormAxis(g.attrs.Int("axis"), len(ts))
	outer, dim, inner := axisLayout(ts, ax)
	nid := numel(ids)
	g.setItems(outer * nid)
	shift := g.faultOnce(FaultWrongIndex)
	g.loop(g.lo, g.hi, func(it value.Value) {
		o, q := g.divi(it, nid), g.remi(it, nid)
		id := g.ld(1, q)
		if ids.DType == ir.I32 {
			id = g.cur.NewSExt(id, types.I64)
		}
		g.failIf(g.cur.NewOr(g.icmp(enum.IPredSLT, id, c64(0)), g.icmp(enum.IPredSGE, id, c64(dim))), StatusIDRange)
		if shift {
			id = g.wrapNext(id, dim)
		}
		src := g.muli(g.add(g.muli(o, dim), id), inner)
		dst := g.muli(it, inner)
		if table.DType != g.out[0].DType { // a table in a storage dtype: rows come out f32
			g.gatherRow(src, dst, inner)
			return
		}
		g.loop(c64(0), c64(inner), func(j value.Value) {
			g.st(2, g.add(dst, j), g.ld(0, g.add(src, j)))
		})
	})
	g.finish()
	return nil
}

// genTranspose: out dim i is input dim perm[i]. An item is a row of the
// output's last dim.
func genTranspose(g *gen) error {
	g.bindAll()
	xs, os := sizes(g.in[0]), sizes(g.out[0])
	perm := g.attrs.Ints("perm")
	r := len(os)
	n := prod(os)
	inStr := make([]int64, len(xs))
	acc := int64(1)
	for j := len(xs) - 1; j >= 0; j-- {
		inStr[j] = acc
		acc *= int64(xs[j])
	}
	shift := g.faultOnce(FaultWrongIndex)
	if r == 0 || n == 0 {
		g.setItems(min(n, 1))
		if n == 0 {
			g.setItems(0)
		}
		g.loop(g.lo, g.hi, func(i value.Value) { g.st(1, i, g.ld(0, i)) })
		g.finish()
		return nil
	}
	last := int64(os[r-1])
	g.setItems(n / last)
	lastStride := inStr[perm[r-1]]
	g.loop(g.lo, g.hi, func(row value.Value) {
		base := value.Value(c64(0))
		div := int64(1)
		for d := r - 2; d >= 0; d-- {
			c := g.remi(g.divi(row, div), int64(os[d]))
			base = g.add(base, g.muli(c, inStr[perm[d]]))
			div *= int64(os[d])
		}
		obase := g.muli(row, last)
		g.loop(c64(0), c64(last), func(j value.Value) {
			at := g.add(base, g.muli(j, lastStride))
			if shift {
				at = g.wrapNext(at, n)
			}
			g.st(1, g.add(obase, j), g.ld(0, at))
		})
	})
	g.finish()
	return nil
}

// genSlice: elements first, first+step, ... along axis. An item is one
// (outer index, taken index) pair, which copies `inner` elements.
func genSlice(g *gen) error {
	g.bindAll()
	xs := sizes(g.in[0])
	ax := ir.NormAxis(g.attrs.Int("axis"), len(xs))
	outer, dim, inner := axisLayout(xs, ax)
	first, count := ir.SliceBounds(g.attrs.Int("start"), g.attrs.Int("end"), g.attrs.Int("step"), dim)
	step := g.attrs.Int("step")
	if int64(sizes(g.out[0])[ax]) != count {
		return fmt.Errorf("output has %d elements along axis %d, the slice takes %d", sizes(g.out[0])[ax], ax, count)
	}
	n := numel(g.in[0])
	g.setItems(outer * count)
	shift := g.faultOnce(FaultWrongIndex)
	g.loop(g.lo, g.hi, func(it value.Value) {
		o, c := g.divi(it, count), g.remi(it, count)
		src := g.muli(g.add(g.muli(o, dim), g.addi(g.muli(c, step), first)), inner)
		dst := g.muli(it, inner)
		g.loop(c64(0), c64(inner), func(j value.Value) {
			at := g.add(src, j)
			if shift {
				at = g.wrapNext(at, n)
			}
			g.st(1, g.add(dst, j), g.ld(0, at))
		})
	})
	g.finish()
	return nil
}

// genConcat: an item is one outer index, which copies each input's block.
func genConcat(g *gen) error {
	for i, t := range g.in {
		if t.DType != g.out[0].DType {
			return fmt.Errorf("input %d is %s, the output %s", i, t.DType, g.out[0].DType)
		}
	}
	g.bindAll()
	os := sizes(g.out[0])
	ax := ir.NormAxis(g.attrs.Int("axis"), len(os))
	outer, dout, inner := axisLayout(os, ax)
	g.setItems(outer)
	if prod(os) == 0 {
		g.setItems(0)
	}
	shift := g.faultOnce(FaultWrongIndex)
	ob := g.outBinding(0)
	g.loop(g.lo, g.hi, func(o value.Value) {
		off := int64(0)
		for i, t := range g.in {
			a := int64(sizes(t)[ax])
			block := a * inner
			n := numel(t)
			src := g.muli(o, block)
			dst := g.addi(g.muli(o, dout*inner), off*inner)
			g.loop(c64(0), c64(block), func(j value.Value) {
				at := g.add(src, j)
				if shift && i == 0 {
					at = g.wrapNext(at, n)
				}
				g.st(ob, g.add(dst, j), g.ld(i, at))
			})
			off += a
		}
	})
	g.finish()
	return nil
}
