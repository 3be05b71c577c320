package llvm

import (
	"fmt"
	"slices"

	"github.com/llir/llvm/ir/enum"
	"github.com/llir/llvm/ir/types"
	"github.com/llir/llvm/ir/value"

	"github.com/tapml/tapml/codegen/wgsl"
	"github.com/tapml/tapml/ir"
)

// bcast walks an output of numpy-broadcast inputs as rows: the output is
// split into rows of `inner` consecutive elements; along a row each input
// either advances by one (unit) or repeats one element. Dims of size 1 are
// dropped and neighbouring dims in which every input behaves alike are
// merged, so rows are as long as possible.
type bcast struct {
	n       int64
	inner   int64
	unit    []bool
	dims    []int64   // outer dims, outermost first
	strides [][]int64 // per input, per outer dim (0 when broadcast)
}

func planBroadcast(out []int, shapes [][]int) *bcast {
	nin := len(shapes)
	b := &bcast{n: prod(out), unit: make([]bool, nin), strides: make([][]int64, nin)}
	natural := make([][]int64, nin)
	for i, s := range shapes {
		st := make([]int64, len(s))
		acc := int64(1)
		for j := len(s) - 1; j >= 0; j-- {
			st[j] = acc
			acc *= int64(s[j])
		}
		natural[i] = st
	}
	type group struct {
		size    int64
		flags   []bool
		strides []int64
	}
	var groups []group
	r := len(out)
	for j := 0; j < r; j++ {
		if out[j] == 1 {
			continue
		}
		gr := group{size: int64(out[j]), flags: make([]bool, nin), strides: make([]int64, nin)}
		for i, s := range shapes {
			if p := j - (r - len(s)); p >= 0 && s[p] != 1 {
				gr.flags[i], gr.strides[i] = true, natural[i][p]
			}
		}
		if k := len(groups) - 1; k >= 0 && slices.Equal(groups[k].flags, gr.flags) {
			groups[k].size *= gr.size
			groups[k].strides = gr.strides
			continue
		}
		groups = append(groups, gr)
	}
	if len(groups) == 0 {
		gr := group{size: 1, flags: make([]bool, nin), strides: make([]int64, nin)}
		for i := range gr.flags {
			gr.flags[i] = true
		}
		groups = append(groups, gr)
	}
	last := groups[len(groups)-1]
	b.inner = last.size
	copy(b.unit, last.flags)
	for _, gr := range groups[:len(groups)-1] {
		b.dims = append(b.dims, gr.size)
	}
	for i := range shapes {
		b.strides[i] = make([]int64, len(b.dims))
		for k, gr := range groups[:len(groups)-1] {
			b.strides[i][k] = gr.strides[i]
		}
	}
	return b
}

// broadcastLoop emits the loops over the items of a broadcast elementwise
// kernel: body gets each input's element index and the output's. Items are
// output elements when the plan has one dim, rows otherwise.
func (g *gen) broadcastLoop(b *bcast, body func(in []value.Value, out value.Value)) {
	idx := make([]value.Value, len(b.unit))
	if b.n == 0 {
		g.setItems(0)
		return
	}
	if len(b.dims) == 0 {
		g.setItems(b.n)
		g.loop(g.lo, g.hi, func(i value.Value) {
			for k, u := range b.unit {
				idx[k] = c64(0)
				if u {
					idx[k] = i
				}
			}
			body(idx, i)
		})
		return
	}
	rows := b.n / b.inner
	g.setItems(rows)
	g.loop(g.lo, g.hi, func(r value.Value) {
		base := make([]value.Value, len(b.unit))
		for k := range base {
			base[k] = c64(0)
		}
		div := int64(1)
		for d := len(b.dims) - 1; d >= 0; d-- {
			c := g.remi(g.divi(r, div), b.dims[d])
			for k := range base {
				if s := b.strides[k][d]; s != 0 {
					base[k] = g.add(base[k], g.muli(c, s))
				}
			}
			div *= b.dims[d]
		}
		obase := g.muli(r, b.inner)
		g.loop(c64(0), c64(b.inner), func(j value.Value) {
			for k, u := range b.unit {
				idx[k] = base[k]
				if u {
					idx[k] = g.add(base[k], j)
				}
			}
			body(idx, g.add(obase, j))
		})
	})
}

func genElementwise(g *gen) error {
	var e *ir.Expr
	switch {
	case g.op == ir.OpFusedElementwise:
		var err error
		if e, err = ir.ParseExpr(g.attrs.String("expr")); err != nil {
			return err
		}
	case slices.Contains(ir.UnaryOps, g.op):
		e = &ir.Expr{Op: g.op, Input: -1, Args: []*ir.Expr{{Input: 0}}}
	default:
		e = &ir.Expr{Op: g.op, Input: -1, Args: []*ir.Expr{{Input: 0}, {Input: 1}}}
	}
	dt := g.in[0].DType
	for i, t := range g.in {
		if t.DType != dt {
			return fmt.Errorf("input %d is %s, input 0 is %s", i, t.DType, dt)
		}
	}
	isInt := dt == ir.I32 || dt == ir.I64
	switch {
	case isInt && ir.LookupOp(g.op).Compute == ir.ComputeF32OrInt:
	case dt.IsFloat():
	default:
		return fmt.Errorf("%s is not supported on %s (f32, f16 and bf16 are; i32 and i64 for %v)", g.op, dt, ir.OpsComputing(ir.ComputeF32OrInt))
	}
	if g.out[0].DType != dt {
		return fmt.Errorf("output is %s, want %s", g.out[0].DType, dt)
	}
	g.bindAll()
	shapes := make([][]int, len(g.in))
	for i, t := range g.in {
		shapes[i] = sizes(t)
	}
	b := planBroadcast(sizes(g.out[0]), shapes)
	n0 := numel(g.in[0])
	shift := g.faultOnce(FaultWrongIndex)
	ints := types.Type(types.I32)
	if dt == ir.I64 {
		ints = types.I64
	}
	ob := g.outBinding(0)
	var genErr error
	g.broadcastLoop(b, func(idx []value.Value, o value.Value) {
		vals := make([]value.Value, len(idx))
		load := func(k int) value.Value {
			if vals[k] == nil {
				at := idx[k]
				if k == 0 && shift {
					at = g.wrapNext(at, n0)
				}
				if isInt {
					vals[k] = g.ld(k, at)
				} else {
					vals[k] = g.ldF(k, at)
				}
			}
			return vals[k]
		}
		var walk func(e *ir.Expr) (value.Value, error)
		walk = func(e *ir.Expr) (value.Value, error) {
			switch {
			case e.IsInput():
				return load(e.Input), nil
			case e.IsConst():
				return cf(float32(g.perturb(e.Const))), nil
			}
			env := formulaEnv{ints: ints}
			for _, a := range e.Args {
				v, err := walk(a)
				if err != nil {
					return nil, err
				}
				env.vals = append(env.vals, v)
			}
			f, vars, err := wgsl.Formula(e.Op, isInt)
			if err != nil {
				return nil, err
			}
			env.vars = vars
			v, err := g.formula(f, env)
			if err != nil || isInt {
				return v, err
			}
			return g.ov(v), nil
		}
		v, err := walk(e)
		switch {
		case err != nil:
			genErr = err
		case isInt:
			g.st(ob, o, v)
		default:
			g.stF(ob, o, v)
		}
	})
	if genErr != nil {
		return genErr
	}
	g.finish()
	return nil
}

// maxMin is Go's math.Max/Min on f32: NaN if either is NaN, and
// max(+0, -0) = +0, min(+0, -0) = -0.
func (g *gen) maxMin(isMax bool, x, y value.Value) value.Value {
	pred := enum.FPredOGT
	if !isMax {
		pred = enum.FPredOLT
	}
	pick := g.sel(g.fcmp(pred, x, y), x, y)
	// equal values (both zeros of either sign): combine the sign bits
	xb, yb := g.cur.NewBitCast(x, types.I32), g.cur.NewBitCast(y, types.I32)
	var bits value.Value
	if isMax {
		bits = g.cur.NewAnd(xb, yb)
	} else {
		bits = g.cur.NewOr(xb, yb)
	}
	eq := g.fcmp(enum.FPredOEQ, x, y)
	pick = g.sel(eq, g.cur.NewBitCast(bits, types.Float), pick)
	nan := g.fcmp(enum.FPredUNO, x, y)
	return g.sel(nan, g.fadd(x, y), pick)
}

// genCast converts every element through float64, as the reference's
// generic path does (Float64At, then SetFloat64At); a cast to the same
// dtype copies the bits.
func genCast(g *gen) error {
	from, to := g.in[0].DType, g.out[0].DType
	g.bindAll()
	n := numel(g.in[0])
	g.setItems(n)
	shift := g.faultOnce(FaultWrongIndex)
	g.loop(g.lo, g.hi, func(i value.Value) {
		at := i
		if shift {
			at = g.wrapNext(i, n)
		}
		v := g.ld(0, at)
		if from == to {
			g.st(1, i, v)
			return
		}
		var d value.Value
		switch from {
		case ir.F32, ir.F16:
			d = g.cur.NewFPExt(v, types.Double)
		case ir.BF16:
			d = g.cur.NewFPExt(g.toF32(v, ir.BF16), types.Double)
		case ir.I32, ir.I64:
			d = g.cur.NewSIToFP(v, types.Double)
		case ir.Bool:
			d = g.sel(g.icmp(enum.IPredNE, v, c8(0)), cd(1), cd(0))
		default:
			panic("llvm: cast from " + from.String())
		}
		var r value.Value
		switch to {
		case ir.F32:
			r = g.cur.NewFPTrunc(d, types.Float)
		case ir.F16, ir.BF16:
			r = g.fromF32(g.cur.NewFPTrunc(d, types.Float), to)
		case ir.I32:
			// via i64, so that values beyond i32 wrap instead of being poison
			r = g.cur.NewTrunc(g.fptosi64(d), types.I32)
		case ir.I64:
			r = g.fptosi64(d)
		case ir.Bool:
			r = g.cur.NewZExt(g.fcmp(enum.FPredUNE, d, cd(0)), types.I8)
		default:
			panic("llvm: cast to " + to.String())
		}
		g.st(1, i, r)
	})
	g.finish()
	return nil
}

// fptosi64 truncates a double toward zero into an i64; NaN and values
// beyond i64 give the minimum i64 (what x86's cvttsd2si gives) instead of
// poison.
func (g *gen) fptosi64(d value.Value) value.Value {
	inRange := g.cur.NewAnd(g.fcmp(enum.FPredOGE, d, cd(-9223372036854775808.0)), g.fcmp(enum.FPredOLT, d, cd(9223372036854775808.0)))
	safe := g.sel(inRange, d, cd(0))
	return g.sel(inRange, g.cur.NewFPToSI(safe, types.I64), c64(-1<<63))
}
