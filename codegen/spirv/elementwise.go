package spirv

import (
	"fmt"
	"math"
	"slices"

	"github.com/tapml/tapml/codegen"
	"github.com/tapml/tapml/ir"
)

// Elementwise kernels (unary, binary, fused_elementwise, cast, constant)
// and the data-movement kernels (copies, transpose, slice, concat, gather,
// kv_write): one invocation per output element.

// unaryF32 emits a unary op on an f32 value, following the CPU reference's
// formulas.
func (k *kern) unaryF32(op ir.Op, x Value) (Value, error) {
	b := k.b
	one := b.F(1)
	switch op {
	case ir.OpNeg:
		return b.Neg(x), nil
	case ir.OpExp:
		return b.Ext(glslExp, x), nil
	case ir.OpLog:
		return b.Ext(glslLog, x), nil
	case ir.OpSqrt:
		return b.Ext(glslSqrt, x), nil
	case ir.OpRsqrt:
		return b.Div(one, b.Ext(glslSqrt, x)), nil
	case ir.OpAbs:
		return b.Ext(glslFAbs, x), nil
	case ir.OpSilu:
		return b.Mul(x, b.Div(one, b.Add(one, b.Ext(glslExp, b.Neg(x))))), nil
	case ir.OpSigmoid:
		return b.Div(one, b.Add(one, b.Ext(glslExp, b.Neg(x)))), nil
	case ir.OpTanh:
		return k.tanh(x), nil
	case ir.OpRelu: // NaN stays NaN
		return b.Select(b.Lt(x, b.F(0)), b.F(0), x), nil
	case ir.OpGelu:
		c := float32(0.044715)
		if k.faultIs(FaultWrongConstant) {
			c = 0.05
		}
		cube := b.Mul(b.Mul(b.Mul(b.F(c), x), x), x)
		t := k.tanh(b.Mul(b.F(0.7978845608028654), b.Add(x, cube)))
		return b.Mul(b.Mul(b.F(0.5), x), b.Add(one, t)), nil
	}
	return Value{}, fmt.Errorf("unknown unary op %s", op)
}

// tanh is GLSL's Tanh on the argument clamped to ±10 (tanh(10) rounds to 1
// in f32), so that no implementation overflows inside.
func (k *kern) tanh(x Value) Value {
	b := k.b
	return b.Ext(glslTanh, b.Ext(glslFClamp, x, b.F(-10), b.F(10)))
}

// binaryF32 emits a binary op on f32 values.
func (k *kern) binaryF32(op ir.Op, x, y Value) (Value, error) {
	b := k.b
	switch op {
	case ir.OpAdd:
		return b.Add(x, y), nil
	case ir.OpSub:
		return b.Sub(x, y), nil
	case ir.OpMul:
		return b.Mul(x, y), nil
	case ir.OpDiv:
		return b.Div(x, y), nil
	case ir.OpPow:
		return k.pow(x, y), nil
	case ir.OpMaximum, ir.OpMinimum: // NaN if either is NaN, as math.Max
		var r Value
		if op == ir.OpMaximum {
			r = b.Ext(glslFMax, x, y)
		} else {
			r = b.Ext(glslFMin, x, y)
		}
		return b.Select(b.Or(b.IsNan(x), b.IsNan(y)), b.Add(x, y), r), nil
	}
	return Value{}, fmt.Errorf("unknown binary op %s", op)
}

// pow is a^b with C's conventions where GLSL's Pow is undefined: a
// negative base takes integer exponents (the sign from the exponent's
// parity) and gives NaN otherwise; 0^b is 0 for b > 0, inf for b < 0; x^0
// is 1.
func (k *kern) pow(x, y Value) Value {
	b := k.b
	zero := b.F(0)
	p := b.Ext(glslExp2, b.Mul(y, b.Ext(glslLog2, b.Ext(glslFAbs, x))))
	isInt := b.Eq(b.Ext(glslFloor, y), y)
	half := b.Mul(y, b.F(0.5))
	odd := b.Ne(b.Ext(glslFloor, half), half)
	neg := b.Select(isInt, b.Select(odd, b.Neg(p), p), k.nan())
	r := b.Select(b.Lt(x, zero), neg, p)
	// 0^b is 0 for b > 0 and +inf (1/|x|, made at run time) for b < 0.
	inf := b.Div(b.F(1), b.Ext(glslFAbs, x))
	r = b.Select(b.Eq(x, zero), b.Select(b.Gt(y, zero), zero, inf), r)
	r = b.Select(b.Eq(y, b.F(1)), x, r)
	r = b.Select(b.Eq(y, b.F(2)), b.Mul(x, x), r)
	return b.Select(b.Eq(y, zero), b.F(1), r)
}

// intOp emits an elementwise op on i32 values.
func (k *kern) intOp(op ir.Op, a []Value) (Value, error) {
	b := k.b
	zero := b.I(0)
	switch op {
	case ir.OpNeg:
		return b.Neg(a[0]), nil
	case ir.OpAbs:
		return b.Select(b.Lt(a[0], zero), b.Neg(a[0]), a[0]), nil
	case ir.OpRelu:
		return b.Max(a[0], zero), nil
	case ir.OpAdd:
		return b.Add(a[0], a[1]), nil
	case ir.OpSub:
		return b.Sub(a[0], a[1]), nil
	case ir.OpMul:
		return b.Mul(a[0], a[1]), nil
	case ir.OpDiv: // truncates toward zero; x/0 is 0
		den := b.Select(b.Eq(a[1], zero), b.I(1), a[1])
		return b.Select(b.Eq(a[1], zero), zero, b.Div(a[0], den)), nil
	case ir.OpMaximum:
		return b.Max(a[0], a[1]), nil
	case ir.OpMinimum:
		return b.Min(a[0], a[1]), nil
	}
	return Value{}, fmt.Errorf("op %s has no i32 kernel (only neg, abs, relu, add, sub, mul, div, maximum, minimum)", op)
}

// clampIndex returns min(i, n-1) (for faults that read one element too
// far).
func (k *kern) clampIndex(i Value, n int) Value { return k.b.MinU(i, max(n-1, 0)) }

// inputOffsets returns, for each input, the offset that feeds output
// element i under broadcasting.
func (k *kern) inputOffsets(i Value) []Value {
	out := sizes(k.out[0])
	offs := make([]Value, len(k.in))
	var coords []Value
	for j, t := range k.in {
		s := sizes(t)
		switch {
		case slices.Equal(s, out):
			offs[j] = i
		case prod(s) == 1:
			offs[j] = k.b.U(0)
		default:
			if coords == nil {
				coords = k.coords(out, i)
			}
			offs[j] = k.broadcastOffset(out, s, coords)
		}
	}
	return offs
}

func usesInput(e *ir.Expr, j int) bool {
	if e.IsInput() {
		return e.Input == j
	}
	for _, a := range e.Args {
		if usesInput(a, j) {
			return true
		}
	}
	return false
}

// genElementwise generates unary, binary and fused_elementwise kernels.
func genElementwise(k *kern) error {
	dt := k.in[0].DType
	var expr *ir.Expr
	if k.op == ir.OpFusedElementwise {
		var err error
		if expr, err = ir.ParseExpr(k.attrs.String("expr")); err != nil {
			return err
		}
	} else {
		expr = &ir.Expr{Op: k.op, Input: -1}
		for j := range k.in {
			expr.Args = append(expr.Args, &ir.Expr{Input: j})
		}
	}
	k.bindAll()
	b := k.b
	var genErr error
	k.elementwise(numel(k.out[0]), func(i Value) {
		offs := k.inputOffsets(i)
		if k.faultIs(FaultWrongIndex) {
			offs[0] = k.clampIndex(b.AddU(offs[0], 1), numel(k.in[0]))
		}
		xs := make([]Value, len(k.in))
		for j := range k.in {
			if usesInput(expr, j) {
				xs[j] = b.Load(k.ins[j], offs[j])
			}
		}
		constFault := k.op == ir.OpFusedElementwise && k.fault == FaultWrongConstant
		var walk func(e *ir.Expr) (Value, error)
		walk = func(e *ir.Expr) (Value, error) {
			switch {
			case e.IsInput():
				return xs[e.Input], nil
			case e.IsConst():
				v := e.Const
				if constFault && k.faultIs(FaultWrongConstant) {
					v *= 1.1
					constFault = false
				}
				if dt == ir.I32 {
					return b.I(int32(max(min(v, math.MaxInt32), math.MinInt32))), nil
				}
				if f := float32(v); math.IsInf(float64(f), 0) || math.IsNaN(v) {
					return Value{}, fmt.Errorf("constant %g is not a finite f32", v)
				}
				return b.F(float32(v)), nil
			}
			args := make([]Value, len(e.Args))
			for a, arg := range e.Args {
				v, err := walk(arg)
				if err != nil {
					return Value{}, err
				}
				args[a] = v
			}
			switch {
			case dt == ir.I32:
				return k.intOp(e.Op, args)
			case len(args) == 1:
				v, err := k.unaryF32(e.Op, args[0])
				return k.ov(v), err
			default:
				v, err := k.binaryF32(e.Op, args[0], args[1])
				return k.ov(v), err
			}
		}
		res, err := walk(expr)
		if err != nil {
			genErr = err
			return
		}
		b.Store(k.outs[0], i, res)
	})
	return genErr
}

// constBits returns the 32 bits of v in dtype dt.
func constBits(dt ir.DType, v float64) (uint32, error) {
	if dt == ir.I32 {
		return uint32(int32(max(min(v, math.MaxInt32), math.MinInt32))), nil
	}
	f := float32(v)
	if math.IsInf(float64(f), 0) || math.IsNaN(v) {
		return 0, fmt.Errorf("value %g is not a finite f32", v)
	}
	return math.Float32bits(f), nil
}

// genConstant fills its output with the node's values (one repeated, or a
// table of every element).
func genConstant(k *kern) error {
	k.bindAll()
	b := k.b
	vals := k.attrs.Floats("value")
	dt := k.out[0].DType
	et := k.elemType(dt)
	bits := make([]uint32, len(vals))
	for i, v := range vals {
		if k.faultIs(FaultWrongConstant) {
			v++
		}
		var err error
		if bits[i], err = constBits(dt, v); err != nil {
			return err
		}
	}
	n := numel(k.out[0])
	if len(vals) == 1 {
		if k.fault == FaultWrongIndex {
			return fmt.Errorf("wrong_index needs a constant with more than one value")
		}
		v := Value{ID: k.m.constant(et, bits[0]), T: et}
		k.elementwise(n, func(i Value) { b.Store(k.outs[0], i, v) })
		return nil
	}
	if len(vals) > 16384 {
		return fmt.Errorf("a constant of %d values is too large to bake into a kernel (at most 16384)", len(vals))
	}
	table := k.m.Table(et, bits, "vals")
	k.elementwise(n, func(i Value) {
		if k.faultIs(FaultWrongIndex) {
			i2 := k.clampIndex(b.AddU(i, 1), len(vals))
			b.Store(k.outs[0], i, b.Load(table, i2))
			return
		}
		b.Store(k.outs[0], i, b.Load(table, i))
	})
	return nil
}

// genCast converts between f32 and i32 (float to int truncates toward
// zero, saturating at the i32 range; NaN gives 0).
func genCast(k *kern) error {
	k.bindAll()
	b := k.b
	from, to := k.in[0].DType, k.out[0].DType
	n := numel(k.out[0])
	k.elementwise(n, func(i Value) {
		src := i
		if k.faultIs(FaultWrongIndex) {
			src = k.clampIndex(b.AddU(i, 1), n)
		}
		x := b.Load(k.ins[0], src)
		switch {
		case from == to:
		case from == ir.F32 && to == ir.I32:
			c := b.ToI(b.Ext(glslFClamp, x, b.F(-2147483648), b.F(2147483520)))
			x = b.Select(b.IsNan(x), b.I(0), c)
		case from == ir.I32 && to == ir.F32:
			x = b.ToF(x)
		}
		b.Store(k.outs[0], i, x)
	})
	return nil
}

// genCopy copies its input (reshape, probe, transfer).
func genCopy(k *kern) error {
	k.bindAll()
	b := k.b
	n := numel(k.out[0])
	k.elementwise(n, func(i Value) {
		src := i
		if k.faultIs(FaultWrongIndex) {
			src = k.clampIndex(b.AddU(i, 1), n)
		}
		b.Store(k.outs[0], i, b.Load(k.ins[0], src))
	})
	return nil
}

// genTranspose permutes dims: output dim d is input dim perm[d].
func genTranspose(k *kern) error {
	k.bindAll()
	b := k.b
	perm := k.attrs.Ints("perm")
	in, out := sizes(k.in[0]), sizes(k.out[0])
	ist := strides(in)
	n := numel(k.out[0])
	k.elementwise(n, func(i Value) {
		c := k.coords(out, i)
		off := b.U(0)
		for d := range out {
			if out[d] == 1 {
				continue
			}
			off = b.Add(off, b.MulU(c[d], ist[perm[d]]))
		}
		if k.faultIs(FaultWrongIndex) {
			off = k.clampIndex(b.AddU(off, 1), n)
		}
		b.Store(k.outs[0], i, b.Load(k.ins[0], off))
	})
	return nil
}

// genSlice takes start, start+step, ... along axis.
func genSlice(k *kern) error {
	k.bindAll()
	b := k.b
	in := sizes(k.in[0])
	axis := ir.NormAxis(k.attrs.Int("axis"), len(in))
	step := int(k.attrs.Int("step"))
	first, _ := ir.SliceBounds(k.attrs.Int("start"), k.attrs.Int("end"), int64(step), int64(in[axis]))
	_, dout, inner := outerInner(sizes(k.out[0]), axis)
	din := in[axis]
	k.elementwise(numel(k.out[0]), func(i Value) {
		c := b.RemU(i, inner)
		j := b.RemU(b.DivU(i, inner), max(dout, 1))
		o := b.DivU(i, inner*max(dout, 1))
		row := b.AddU(b.Add(b.MulU(o, din), b.MulU(j, step)), int(first))
		off := b.Add(b.MulU(row, inner), c)
		if k.faultIs(FaultWrongIndex) {
			off = k.clampIndex(b.AddU(off, 1), numel(k.in[0]))
		}
		b.Store(k.outs[0], i, b.Load(k.ins[0], off))
	})
	return nil
}

// genConcat joins its inputs along axis.
func genConcat(k *kern) error {
	k.bindAll()
	b := k.b
	out := sizes(k.out[0])
	axis := ir.NormAxis(k.attrs.Int("axis"), len(out))
	_, dout, inner := outerInner(out, axis)
	k.elementwise(numel(k.out[0]), func(i Value) {
		c := b.RemU(i, inner)
		j := b.RemU(b.DivU(i, inner), max(dout, 1))
		o := b.DivU(i, inner*max(dout, 1))
		bump := k.faultIs(FaultWrongIndex)
		start := 0
		for q, t := range k.in {
			dq := sizes(t)[axis]
			if dq == 0 {
				continue
			}
			lo, hi := start, start+dq
			cond := b.Lt(j, b.U(hi))
			if lo > 0 {
				cond = b.And(b.Ge(j, b.U(lo)), cond)
			}
			b.If(cond, func() {
				off := b.Add(b.MulU(b.Add(b.MulU(o, dq), b.Sub(j, b.U(lo))), inner), c)
				if bump {
					off = k.clampIndex(b.AddU(off, 1), numel(t))
				}
				b.Store(k.outs[0], i, b.Load(k.ins[q], off))
			})
			start = hi
		}
	})
	return nil
}

// genGather looks up rows of a table by integer ids. An id out of range
// gives NaN (f32 tables) or 0 (i32 tables): the GPU cannot raise the
// run-time error the op defines.
func genGather(k *kern) error {
	if k.in[1].DType != ir.I32 {
		return fmt.Errorf("ids are %s; SPIR-V gather takes i32 ids", k.in[1].DType)
	}
	k.bindAll()
	b := k.b
	table := sizes(k.in[0])
	axis := ir.NormAxis(k.attrs.Int("axis"), len(table))
	_, v, inner := outerInner(table, axis)
	nid := numel(k.in[1])
	k.elementwise(numel(k.out[0]), func(i Value) {
		c := b.RemU(i, inner)
		j := b.RemU(b.DivU(i, inner), max(nid, 1))
		o := b.DivU(i, inner*max(nid, 1))
		id := b.Load(k.ins[1], j)
		if k.faultIs(FaultWrongIndex) {
			id = b.Add(id, b.I(1))
		}
		ok := b.And(b.Ge(id, b.I(0)), b.Lt(id, b.I(int32(v))))
		b.IfElse(ok, func() {
			row := b.Add(b.MulU(o, v), b.Bitcast(k.m.U32, id))
			b.Store(k.outs[0], i, b.Load(k.ins[0], b.Add(b.MulU(row, inner), c)))
		}, func() {
			bad := b.I(0)
			if k.in[0].DType == ir.F32 {
				bad = k.nan()
			}
			b.Store(k.outs[0], i, bad)
		})
	})
	return nil
}

// loadPos reads an i32 position scalar as u32 (negative positions wrap to
// huge values, which the kernels' range checks then reject).
func (k *kern) loadPos(arr Array) Value {
	return k.b.Bitcast(k.m.U32, k.b.Load(arr, k.b.U(0)))
}

// genKVWrite copies new[S, KH, Dh] into rows pos.. of the cache, in place:
// the cache is one read-write binding (input 0 and output 0). Rows past the
// cache's end are not written (the op defines them as a run-time error).
func genKVWrite(k *kern) error {
	cache, nw, pos := k.in[0], k.in[1], k.in[2]
	cacheArr := k.bind("in0", codegen.ReadWrite, cache, 0, 0)
	nwArr := k.bind("in1", codegen.Read, nw, 1, -1)
	posArr := k.bind("in2", codegen.Read, pos, 2, -1)
	b := k.b
	t := sizes(cache)[0]
	row := sizes(cache)[1] * sizes(cache)[2]
	n := numel(nw)
	k.elementwise(n, func(i Value) {
		p := k.loadPos(posArr)
		if k.faultIs(FaultWrongIndex) {
			p = b.AddU(p, 1)
		}
		r := b.Add(p, b.DivU(i, row))
		b.If(b.And(b.Lt(p, b.U(t)), b.Lt(r, b.U(t))), func() {
			dst := b.Add(b.MulU(r, row), b.RemU(i, row))
			b.Store(cacheArr, dst, b.Load(nwArr, i))
		})
	})
	return nil
}
