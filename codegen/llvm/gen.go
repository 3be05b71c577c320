package llvm

import (
	"fmt"
	"math"

	lir "github.com/llir/llvm/ir"
	"github.com/llir/llvm/ir/constant"
	"github.com/llir/llvm/ir/enum"
	"github.com/llir/llvm/ir/types"
	"github.com/llir/llvm/ir/value"

	"github.com/tapml/tapml/codegen"
	"github.com/tapml/tapml/ir"
)

// gen holds the state of generating one kernel function.
type gen struct {
	node    *ir.Node
	op      ir.Op
	attrs   ir.Attrs
	in, out []ir.Type

	fault        string
	faultApplied bool

	m        *lir.Module
	f        *lir.Func
	cur      *lir.Block
	entry    *lir.Block
	nblocks  int
	prefix   string
	bufs     value.Value
	lo, hi   value.Value // the item range, clamped to [0, items]
	rawLo    value.Value
	rawHi    value.Value
	items    int64
	bindings []codegen.Binding
	ptr      []value.Value // typed pointer of each binding
	retBlock map[int32]*lir.Block
	// hiClamp is the select that clamps hi; its items operand is patched
	// once the generator has set g.items.
	loClamp, hiClamp *lir.InstSelect
	loCmp, hiCmp     *lir.InstICmp
}

var (
	i8p  = types.NewPointer(types.I8)
	i8pp = types.NewPointer(i8p)
)

func newGen(n *ir.Node, attrs ir.Attrs, in, out []ir.Type, fault, entry string) *gen {
	g := &gen{node: n, op: n.Op, attrs: attrs, in: in, out: out, fault: fault, prefix: entry,
		m: lir.NewModule(), retBlock: map[int32]*lir.Block{}}
	bufs := lir.NewParam("bufs", i8pp)
	bufs.Attrs = append(bufs.Attrs, enum.ParamAttrNoCapture, enum.ParamAttrReadOnly)
	lo, hi := lir.NewParam("lo", types.I64), lir.NewParam("hi", types.I64)
	g.f = g.m.NewFunc(entry, types.I32, bufs, lo, hi)
	g.f.FuncAttrs = append(g.f.FuncAttrs, enum.FuncAttrNoUnwind)
	g.bufs, g.rawLo, g.rawHi = bufs, lo, hi
	g.entry = g.f.NewBlock("entry")
	g.cur = g.entry
	// lo = max(lo, 0); hi = min(hi, items): items is patched in finish.
	g.loCmp = g.cur.NewICmp(enum.IPredSLT, lo, c64(0))
	g.loClamp = g.cur.NewSelect(g.loCmp, c64(0), lo)
	g.hiCmp = g.cur.NewICmp(enum.IPredSGT, hi, c64(0))
	g.hiClamp = g.cur.NewSelect(g.hiCmp, c64(0), hi)
	g.lo, g.hi = g.loClamp, g.hiClamp
	return g
}

// setItems fixes the number of items of the kernel (the clamp of hi).
func (g *gen) setItems(n int64) {
	g.items = n
	g.hiCmp.Y = c64(n)
	g.hiClamp.ValueTrue = c64(n)
}

// faultIs reports whether fault f is injected, marking it applied.
func (g *gen) faultIs(f string) bool {
	if g.fault == f {
		g.faultApplied = true
		return true
	}
	return false
}

// faultOnce is faultIs for faults injected at one site only.
func (g *gen) faultOnce(f string) bool {
	if g.fault == f && !g.faultApplied {
		g.faultApplied = true
		return true
	}
	return false
}

// Constants.

func c64(n int64) *constant.Int    { return constant.NewInt(types.I64, n) }
func c32(n int64) *constant.Int    { return constant.NewInt(types.I32, n) }
func c8(n int64) *constant.Int     { return constant.NewInt(types.I8, n) }
func cf(v float32) *constant.Float { return constant.NewFloat(types.Float, float64(v)) }
func cd(v float64) *constant.Float { return constant.NewFloat(types.Double, v) }

func elemType(dt ir.DType) types.Type {
	switch dt {
	case ir.F32:
		return types.Float
	case ir.F16:
		return types.Half
	case ir.BF16:
		return types.I16
	case ir.I32:
		return types.I32
	case ir.I64:
		return types.I64
	case ir.Bool:
		return types.I8
	}
	if dt.IsBlock() {
		return types.I8 // bytes of blocks, decoded by unit
	}
	panic("llvm: no element type for " + dt.String())
}

// Bindings.

// bind adds a binding and loads its typed pointer in the entry block.
func (g *gen) bind(name string, access codegen.Access, t ir.Type, input, output int) {
	idx := len(g.bindings)
	g.bindings = append(g.bindings, codegen.Binding{Index: idx, Name: name, Access: access, Type: t, Input: input, Output: output})
	slot := g.entry.NewGetElementPtr(i8p, g.bufs, c64(int64(idx)))
	slot.InBounds = true
	raw := g.entry.NewLoad(i8p, slot)
	var p value.Value = raw
	if et := elemType(t.DType); !et.Equal(types.I8) {
		p = g.entry.NewBitCast(raw, types.NewPointer(et))
	}
	g.ptr = append(g.ptr, p)
}

// bindAll binds every input, then every output.
func (g *gen) bindAll() {
	for i, t := range g.in {
		g.bind(fmt.Sprintf("in%d", i), codegen.Read, t, i, -1)
	}
	for i, t := range g.out {
		g.bind(fmt.Sprintf("out%d", i), codegen.Write, t, -1, i)
	}
}

// outBinding is the binding index of output i (after all inputs).
func (g *gen) outBinding(i int) int { return len(g.in) + i }

// Blocks and control flow.

func (g *gen) block() *lir.Block {
	g.nblocks++
	return g.f.NewBlock(fmt.Sprintf("b%d", g.nblocks))
}

// finish returns 0 from the current block.
func (g *gen) finish() {
	g.cur.NewRet(c32(0))
}

// failIf returns status from the kernel when cond is true.
func (g *gen) failIf(cond value.Value, status int32) {
	rb, ok := g.retBlock[status]
	if !ok {
		rb = g.block()
		rb.NewRet(c32(int64(status)))
		g.retBlock[status] = rb
	}
	next := g.block()
	g.cur.NewCondBr(cond, rb, next)
	g.cur = next
}

// loop emits for i := lo; i < hi; i++ { body(i) }.
func (g *gen) loop(lo, hi value.Value, body func(i value.Value)) {
	g.loopAcc(lo, hi, nil, func(i value.Value, _ []value.Value) []value.Value {
		body(i)
		return nil
	})
}

// loopAcc emits a counted loop carrying values: acc starts at init, and
// body returns the next values. It returns the values after the loop.
func (g *gen) loopAcc(lo, hi value.Value, init []value.Value, body func(i value.Value, acc []value.Value) []value.Value) []value.Value {
	pre := g.cur
	head, bodyB, exit := g.block(), g.block(), g.block()
	pre.NewBr(head)
	i := head.NewPhi(lir.NewIncoming(lo, pre))
	phis := make([]*lir.InstPhi, len(init))
	accs := make([]value.Value, len(init))
	for j, v := range init {
		phis[j] = head.NewPhi(lir.NewIncoming(v, pre))
		accs[j] = phis[j]
	}
	head.NewCondBr(head.NewICmp(enum.IPredSLT, i, hi), bodyB, exit)
	g.cur = bodyB
	next := body(i, accs)
	latch := g.cur
	inc := g.cur.NewAdd(i, c64(1))
	inc.OverflowFlags = []enum.OverflowFlag{enum.OverflowFlagNSW}
	i.Incs = append(i.Incs, lir.NewIncoming(inc, latch))
	for j := range phis {
		phis[j].Incs = append(phis[j].Incs, lir.NewIncoming(next[j], latch))
	}
	g.cur.NewBr(head)
	g.cur = exit
	return accs
}

// ifThen emits if cond { then() }.
func (g *gen) ifThen(cond value.Value, then func()) {
	tb, join := g.block(), g.block()
	g.cur.NewCondBr(cond, tb, join)
	g.cur = tb
	then()
	g.cur.NewBr(join)
	g.cur = join
}

// Integer arithmetic (i64, no signed overflow: indices).

func (g *gen) add(a, b value.Value) value.Value {
	if x, ok := constInt(a); ok && x == 0 {
		return b
	}
	if y, ok := constInt(b); ok && y == 0 {
		return a
	}
	v := g.cur.NewAdd(a, b)
	v.OverflowFlags = []enum.OverflowFlag{enum.OverflowFlagNSW}
	return v
}

func (g *gen) sub(a, b value.Value) value.Value {
	v := g.cur.NewSub(a, b)
	v.OverflowFlags = []enum.OverflowFlag{enum.OverflowFlagNSW}
	return v
}

func (g *gen) mul(a, b value.Value) value.Value {
	if y, ok := constInt(b); ok && y == 1 {
		return a
	}
	if x, ok := constInt(a); ok && x == 1 {
		return b
	}
	if y, ok := constInt(b); ok && y == 0 {
		return c64(0)
	}
	v := g.cur.NewMul(a, b)
	v.OverflowFlags = []enum.OverflowFlag{enum.OverflowFlagNSW}
	return v
}

func (g *gen) muli(a value.Value, n int64) value.Value { return g.mul(a, c64(n)) }
func (g *gen) addi(a value.Value, n int64) value.Value { return g.add(a, c64(n)) }

func (g *gen) divi(a value.Value, n int64) value.Value {
	if n == 1 {
		return a
	}
	return g.cur.NewSDiv(a, c64(n))
}

func (g *gen) remi(a value.Value, n int64) value.Value {
	if n == 1 {
		return c64(0)
	}
	return g.cur.NewSRem(a, c64(n))
}

func (g *gen) icmp(p enum.IPred, a, b value.Value) value.Value { return g.cur.NewICmp(p, a, b) }
func (g *gen) sel(c, a, b value.Value) value.Value             { return g.cur.NewSelect(c, a, b) }

// wrapNext returns (i+1) mod n, an in-bounds off-by-one for faults.
func (g *gen) wrapNext(i value.Value, n int64) value.Value {
	if n <= 1 {
		return i
	}
	return g.cur.NewURem(g.addi(i, 1), c64(n))
}

func constInt(v value.Value) (int64, bool) {
	if c, ok := v.(*constant.Int); ok && c.X.IsInt64() {
		return c.X.Int64(), true
	}
	return 0, false
}

// Memory.

func (g *gen) gep(b int, idx value.Value) value.Value {
	et := elemType(g.bindings[b].Type.DType)
	p := g.cur.NewGetElementPtr(et, g.ptr[b], idx)
	p.InBounds = true
	return p
}

// ld loads element idx of binding b in its own type.
func (g *gen) ld(b int, idx value.Value) value.Value {
	return g.cur.NewLoad(elemType(g.bindings[b].Type.DType), g.gep(b, idx))
}

// st stores v (in the binding's element type) at idx.
func (g *gen) st(b int, idx, v value.Value) {
	g.cur.NewStore(v, g.gep(b, idx))
}

// ldF loads element idx of a float binding as f32.
func (g *gen) ldF(b int, idx value.Value) value.Value {
	return g.toF32(g.ld(b, idx), g.bindings[b].Type.DType)
}

// stF stores the f32 v at idx of a float binding, rounding it once.
func (g *gen) stF(b int, idx, v value.Value) {
	g.st(b, idx, g.fromF32(v, g.bindings[b].Type.DType))
}

// toF32 widens a float element to f32.
func (g *gen) toF32(v value.Value, dt ir.DType) value.Value {
	switch dt {
	case ir.F32:
		return v
	case ir.F16:
		return g.cur.NewFPExt(v, types.Float)
	case ir.BF16:
		w := g.cur.NewZExt(v, types.I32)
		return g.cur.NewBitCast(g.cur.NewShl(w, c32(16)), types.Float)
	}
	panic("llvm: toF32 of " + dt.String())
}

// fromF32 rounds an f32 to a float element type (to nearest even).
func (g *gen) fromF32(v value.Value, dt ir.DType) value.Value {
	switch dt {
	case ir.F32:
		return v
	case ir.F16:
		return g.cur.NewFPTrunc(v, types.Half)
	case ir.BF16:
		bits := g.cur.NewBitCast(v, types.I32)
		odd := g.cur.NewAnd(g.cur.NewLShr(bits, c32(16)), c32(1))
		r := g.cur.NewLShr(g.cur.NewAdd(g.cur.NewAdd(bits, c32(0x7fff)), odd), c32(16))
		nan := g.cur.NewOr(g.cur.NewLShr(bits, c32(16)), c32(0x40))
		isNaN := g.cur.NewFCmp(enum.FPredUNO, v, v)
		return g.cur.NewTrunc(g.sel(isNaN, nan, r), types.I16)
	}
	panic("llvm: fromF32 to " + dt.String())
}

// Float arithmetic (f32 unless noted).

func (g *gen) fadd(a, b value.Value) value.Value { return g.cur.NewFAdd(a, b) }
func (g *gen) fsub(a, b value.Value) value.Value { return g.cur.NewFSub(a, b) }
func (g *gen) fmul(a, b value.Value) value.Value { return g.cur.NewFMul(a, b) }
func (g *gen) fdiv(a, b value.Value) value.Value { return g.cur.NewFDiv(a, b) }

// faddFast and fmulFast may be reassociated and contracted (matmul only).
func (g *gen) faddFast(a, b value.Value) value.Value {
	v := g.cur.NewFAdd(a, b)
	v.FastMathFlags = []enum.FastMathFlag{enum.FastMathFlagReassoc, enum.FastMathFlagContract}
	return v
}

// faddReassoc may be reassociated (a vectorised sum) but not contracted.
func (g *gen) faddReassoc(a, b value.Value) value.Value {
	v := g.cur.NewFAdd(a, b)
	v.FastMathFlags = []enum.FastMathFlag{enum.FastMathFlagReassoc}
	return v
}

func (g *gen) fmulFast(a, b value.Value) value.Value {
	v := g.cur.NewFMul(a, b)
	v.FastMathFlags = []enum.FastMathFlag{enum.FastMathFlagReassoc, enum.FastMathFlagContract}
	return v
}

func (g *gen) sqrtf(x value.Value) value.Value { return g.call("llvm.sqrt.f32", types.Float, x) }

var i32t = types.I32

// fma is acc + x·y, which may be contracted into one fused multiply-add
// but not reassociated.
func (g *gen) fma(acc, x, y value.Value) value.Value {
	m := g.cur.NewFMul(x, y)
	m.FastMathFlags = []enum.FastMathFlag{enum.FastMathFlagContract}
	a := g.cur.NewFAdd(acc, m)
	a.FastMathFlags = []enum.FastMathFlag{enum.FastMathFlagContract}
	return a
}

func (g *gen) fcmp(p enum.FPred, a, b value.Value) value.Value { return g.cur.NewFCmp(p, a, b) }

// call calls an external function or intrinsic, declaring it once.
func (g *gen) call(name string, ret types.Type, args ...value.Value) value.Value {
	var callee *lir.Func
	for _, f := range g.m.Funcs {
		if f.Name() == name {
			callee = f
		}
	}
	if callee == nil {
		params := make([]*lir.Param, len(args))
		for i, a := range args {
			params[i] = lir.NewParam("", a.Type())
		}
		callee = g.m.NewFunc(name, ret, params...)
	}
	c := g.cur.NewCall(callee, args...)
	return c
}

// viaDouble computes float32(fn(float64(x), ...)) with a libm function of
// doubles, as the CPU reference computes transcendentals.
func (g *gen) viaDouble(fn string, xs ...value.Value) value.Value {
	ds := make([]value.Value, len(xs))
	for i, x := range xs {
		ds[i] = g.cur.NewFPExt(x, types.Double)
	}
	return g.cur.NewFPTrunc(g.call(fn, types.Double, ds...), types.Float)
}

// ov applies the f16_overflow fault: magnitudes above 65504 become ±inf.
func (g *gen) ov(v value.Value) value.Value {
	if !g.faultIs(FaultF16Overflow) {
		return v
	}
	abs := g.call("llvm.fabs.f32", types.Float, v)
	big := g.fcmp(enum.FPredOGT, abs, cf(65504))
	inf := g.call("llvm.copysign.f32", types.Float, cf(float32(math.Inf(1))), v)
	return g.sel(big, inf, v)
}

// global adds a private constant array to the module and returns a pointer
// to its first element.
func (g *gen) global(suffix string, elem types.Type, elems []constant.Constant) value.Value {
	at := types.NewArray(uint64(len(elems)), elem)
	gl := g.m.NewGlobalDef(g.prefix+"."+suffix, constant.NewArray(at, elems...))
	gl.Immutable = true
	gl.Linkage = enum.LinkagePrivate
	gl.Align = 16
	p := constant.NewGetElementPtr(at, gl, c64(0), c64(0))
	p.InBounds = true
	return p
}

// prod multiplies sizes.
func prod(s []int) int64 {
	n := int64(1)
	for _, d := range s {
		n *= int64(d)
	}
	return n
}

// sizes returns the static sizes of a type.
func sizes(t ir.Type) []int { return t.Shape.Sizes() }

func numel(t ir.Type) int64 { return t.Shape.NumElements() }
