package cpu

import (
	"fmt"
	"math"
	"unsafe"

	"github.com/tapml/tapml/ir"
	"github.com/tapml/tapml/tensor"
)

// Elementwise ops. Every unary and binary op, and fused_elementwise, runs
// through one evaluator: a fused expression is compiled once into a list of
// instructions, and a plain op is the one-instruction program. Each op
// rounds its result to f32, so a fused chain gives exactly the bits of the
// unfused ops. Transcendentals are computed in float64 and rounded to f32
// (within one ulp of C's expf, logf, tanhf, powf).
//
// Dtypes: f32 for every op (f16/bf16 through f32). Integers (i32, i64) for
// neg, abs, relu, add, sub, mul, maximum and minimum; other ops on integers
// are an error.

type opcode uint8

const (
	opNeg opcode = iota
	opExp
	opLog
	opSqrt
	opRsqrt
	opAbs
	opSilu
	opSigmoid
	opTanh
	opRelu
	opGelu
	opErf
	opSoftplus
	opAdd
	opSub
	opMul
	opDiv
	opPow
	opMax
	opMin
)

var opcodes = map[ir.Op]opcode{
	ir.OpNeg: opNeg, ir.OpExp: opExp, ir.OpLog: opLog, ir.OpSqrt: opSqrt, ir.OpRsqrt: opRsqrt, ir.OpAbs: opAbs,
	ir.OpSilu: opSilu, ir.OpSigmoid: opSigmoid, ir.OpTanh: opTanh, ir.OpRelu: opRelu, ir.OpGelu: opGelu, ir.OpErf: opErf,
	ir.OpSoftplus: opSoftplus,
	ir.OpAdd:      opAdd, ir.OpSub: opSub, ir.OpMul: opMul, ir.OpDiv: opDiv, ir.OpPow: opPow,
	ir.OpMaximum: opMax, ir.OpMinimum: opMin,
}

func (o opcode) binary() bool { return o >= opAdd }

func expf(x float32) float32 { return float32(math.Exp(float64(x))) }

// unaryF32 sets dst[i] = op(x[i]).
func unaryF32(op opcode, dst, x []float32) {
	x = x[:len(dst)]
	switch op {
	case opNeg:
		for i, v := range x {
			dst[i] = -v
		}
	case opExp:
		for i, v := range x {
			dst[i] = expf(v)
		}
	case opLog:
		for i, v := range x {
			dst[i] = float32(math.Log(float64(v)))
		}
	case opSqrt:
		for i, v := range x {
			dst[i] = float32(math.Sqrt(float64(v)))
		}
	case opRsqrt:
		for i, v := range x {
			dst[i] = 1 / float32(math.Sqrt(float64(v)))
		}
	case opAbs:
		for i, v := range x {
			dst[i] = math.Float32frombits(math.Float32bits(v) &^ (1 << 31))
		}
	case opSilu: // run.c: val *= (1.0f / (1.0f + expf(-val)))
		for i, v := range x {
			dst[i] = v * (1 / (1 + expf(-v)))
		}
	case opSigmoid:
		for i, v := range x {
			dst[i] = 1 / (1 + expf(-v))
		}
	case opTanh:
		for i, v := range x {
			dst[i] = float32(math.Tanh(float64(v)))
		}
	case opRelu: // NaN stays NaN
		for i, v := range x {
			if v < 0 {
				v = 0
			}
			dst[i] = v
		}
	case opGelu: // 0.5·x·(1+tanh(√(2/π)·(x+0.044715·x³))), each step rounded to f32
		const c = float32(0.7978845608028654) // √(2/π)
		for i, v := range x {
			cube := float32(float32(float32(0.044715*v)*v) * v)
			t := float32(math.Tanh(float64(c * (v + cube))))
			dst[i] = float32(0.5*v) * (1 + t)
		}
	case opErf:
		for i, v := range x {
			dst[i] = float32(math.Erf(float64(v)))
		}
	case opSoftplus: // torch: x > 20 ? x : log1p(exp(x))
		for i, v := range x {
			if v > 20 {
				dst[i] = v
			} else {
				dst[i] = float32(math.Log1p(float64(expf(v))))
			}
		}
	default:
		panic(fmt.Sprintf("unaryF32: opcode %d", op))
	}
}

// binaryF32 sets dst[i] = op(a[i], b[i]).
func binaryF32(op opcode, dst, a, b []float32) {
	a, b = a[:len(dst)], b[:len(dst)]
	switch op {
	case opAdd:
		for i := range dst {
			dst[i] = a[i] + b[i]
		}
	case opSub:
		for i := range dst {
			dst[i] = a[i] - b[i]
		}
	case opMul:
		for i := range dst {
			dst[i] = a[i] * b[i]
		}
	case opDiv:
		for i := range dst {
			dst[i] = a[i] / b[i]
		}
	case opPow:
		for i := range dst {
			dst[i] = float32(math.Pow(float64(a[i]), float64(b[i])))
		}
	case opMax: // NaN if either is NaN; max(+0, -0) = +0
		for i := range dst {
			dst[i] = float32(math.Max(float64(a[i]), float64(b[i])))
		}
	case opMin:
		for i := range dst {
			dst[i] = float32(math.Min(float64(a[i]), float64(b[i])))
		}
	default:
		panic(fmt.Sprintf("binaryF32: opcode %d", op))
	}
}

type integer interface{ ~int32 | ~int64 }

func unaryInt[T integer](op opcode, x T) T {
	switch op {
	case opNeg:
		return -x
	case opAbs:
		if x < 0 {
			return -x
		}
	case opRelu:
		if x < 0 {
			return 0
		}
	}
	return x
}

func binaryInt[T integer](op opcode, a, b T) T {
	switch op {
	case opAdd:
		return a + b
	case opSub:
		return a - b
	case opMul:
		return a * b
	case opMax:
		return max(a, b)
	case opMin:
		return min(a, b)
	}
	panic(fmt.Sprintf("binaryInt: opcode %d", op))
}

// view returns t's elements as a []T without copying.
func view[T any](t *tensor.Tensor) []T {
	var z T
	n := len(t.Data) / int(unsafe.Sizeof(z))
	if n == 0 {
		return nil
	}
	return unsafe.Slice((*T)(unsafe.Pointer(&t.Data[0])), n)
}

// broadcast is a plan for walking an output of numpy-broadcast inputs as
// runs: the output is split into runs of `inner` consecutive elements, and
// along a run each input either advances by one (unit) or repeats one
// element. Dims of size 1 are dropped and neighbouring dims in which every
// input behaves alike are merged, so runs are as long as possible.
type broadcast struct {
	shape   []int
	n       int
	inner   int
	unit    []bool
	dims    []int   // outer dims, outermost first
	strides [][]int // per input, per outer dim: element stride (0 when broadcast)
}

func broadcastShape(shapes ...[]int) ([]int, error) {
	r := 0
	for _, s := range shapes {
		r = max(r, len(s))
	}
	out := make([]int, r)
	for j := range out {
		out[j] = 1
	}
	for _, s := range shapes {
		for j, d := range s {
			o := &out[r-len(s)+j]
			switch {
			case d == *o || d == 1:
			case *o == 1:
				*o = d
			default:
				return nil, fmt.Errorf("shapes %v do not broadcast", shapes)
			}
		}
	}
	return out, nil
}

func newBroadcast(shapes ...[]int) (*broadcast, error) {
	out, err := broadcastShape(shapes...)
	if err != nil {
		return nil, err
	}
	nin := len(shapes)
	b := &broadcast{shape: out, n: tensor.NumElements(out), unit: make([]bool, nin), strides: make([][]int, nin)}
	// natural strides of each input
	inStrides := make([][]int, nin)
	for i, s := range shapes {
		st := make([]int, len(s))
		acc := 1
		for j := len(s) - 1; j >= 0; j-- {
			st[j] = acc
			acc *= s[j]
		}
		inStrides[i] = st
	}
	type group struct {
		size    int
		flags   []bool
		strides []int
	}
	var groups []group
	r := len(out)
	for j := 0; j < r; j++ {
		if out[j] == 1 {
			continue
		}
		g := group{size: out[j], flags: make([]bool, nin), strides: make([]int, nin)}
		for i, s := range shapes {
			if p := j - (r - len(s)); p >= 0 && s[p] != 1 {
				g.flags[i], g.strides[i] = true, inStrides[i][p]
			}
		}
		if k := len(groups) - 1; k >= 0 && equalBools(groups[k].flags, g.flags) {
			groups[k].size *= g.size
			groups[k].strides = g.strides
			continue
		}
		groups = append(groups, g)
	}
	if len(groups) == 0 { // every input holds one element
		g := group{size: 1, flags: make([]bool, nin), strides: make([]int, nin)}
		for i := range g.flags {
			g.flags[i] = true
		}
		groups = append(groups, g)
	}
	last := groups[len(groups)-1]
	b.inner = last.size
	copy(b.unit, last.flags)
	for _, g := range groups[:len(groups)-1] {
		b.dims = append(b.dims, g.size)
	}
	for i := range shapes {
		b.strides[i] = make([]int, len(b.dims))
		for k, g := range groups[:len(groups)-1] {
			b.strides[i][k] = g.strides[i]
		}
	}
	return b, nil
}

func equalBools(a, b []bool) bool {
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// runs calls fn for each run with the run's output offset and each input's
// offset (fn must not keep offs).
func (b *broadcast) runs(fn func(o int, offs []int)) {
	if b.n == 0 {
		return
	}
	idx := make([]int, len(b.dims))
	offs := make([]int, len(b.strides))
	for o := 0; o < b.n; o += b.inner {
		fn(o, offs)
		for k := len(b.dims) - 1; k >= 0; k-- {
			idx[k]++
			for i := range offs {
				offs[i] += b.strides[i][k]
			}
			if idx[k] < b.dims[k] {
				break
			}
			for i := range offs {
				offs[i] -= b.strides[i][k] * b.dims[k]
			}
			idx[k] = 0
		}
	}
}

// program is a compiled elementwise expression: instructions in evaluation
// order, instruction i leaving its result in register i; the last one is
// the result.
type program struct {
	code []instr
	nin  int
}

type instrKind uint8

const (
	kInput instrKind = iota
	kConst
	kUnary
	kBinary
)

type instr struct {
	kind  instrKind
	op    opcode
	a, b  int // operand registers
	input int
	c     float32
}

func compile(e *ir.Expr) (*program, error) {
	p := &program{nin: e.MaxInput() + 1}
	var walk func(e *ir.Expr) (int, error)
	walk = func(e *ir.Expr) (int, error) {
		switch {
		case e.IsInput():
			p.code = append(p.code, instr{kind: kInput, input: e.Input})
		case e.IsConst():
			p.code = append(p.code, instr{kind: kConst, c: float32(e.Const)})
		default:
			op, ok := opcodes[e.Op]
			if !ok || op.binary() != (len(e.Args) == 2) || len(e.Args) < 1 || len(e.Args) > 2 {
				return 0, fmt.Errorf("expr: %q with %d operands is not an elementwise op", e.Op, len(e.Args))
			}
			in := instr{kind: kUnary, op: op}
			var err error
			if in.a, err = walk(e.Args[0]); err != nil {
				return 0, err
			}
			if op.binary() {
				in.kind = kBinary
				if in.b, err = walk(e.Args[1]); err != nil {
					return 0, err
				}
			}
			p.code = append(p.code, in)
		}
		return len(p.code) - 1, nil
	}
	if _, err := walk(e); err != nil {
		return nil, err
	}
	return p, nil
}

// maxChunk bounds the registers of a program (elements per register).
const maxChunk = 1024

// evalF32 evaluates p over f32 inputs broadcast together.
func (p *program) evalF32(in []*tensor.Tensor) (*tensor.Tensor, error) {
	if len(in) < p.nin {
		return nil, fmt.Errorf("expression reads %d inputs, got %d", p.nin, len(in))
	}
	shapes := make([][]int, len(in))
	data := make([][]float32, len(in))
	for i, t := range in {
		if t.DType != ir.F32 {
			return nil, fmt.Errorf("input %d is %s; this op computes on f32, f16 and bf16", i, t.DType)
		}
		shapes[i], data[i] = t.Shape, t.Float32s()
	}
	bc, err := newBroadcast(shapes...)
	if err != nil {
		return nil, err
	}
	out := tensor.New(ir.F32, bc.shape)
	dst := out.Float32s()
	chunk := max(1, min(bc.inner, maxChunk))
	last := len(p.code) - 1
	// Registers that need memory: constants, broadcast inputs and results
	// other than the last, which is written straight to the output.
	scratch := make([][]float32, len(p.code))
	need := 0
	for pc, ins := range p.code {
		if ins.kind == kConst || ins.kind == kInput && !bc.unit[ins.input] || ins.kind >= kUnary && pc != last {
			need++
		}
	}
	block := make([]float32, need*chunk)
	for pc, ins := range p.code {
		if ins.kind == kConst || ins.kind == kInput && !bc.unit[ins.input] || ins.kind >= kUnary && pc != last {
			scratch[pc], block = block[:chunk:chunk], block[chunk:]
		}
		if ins.kind == kConst {
			for i := range scratch[pc] {
				scratch[pc][i] = ins.c
			}
		}
	}
	regs := make([][]float32, len(p.code))
	bc.runs(func(o int, offs []int) {
		for start := 0; start < bc.inner; start += chunk {
			l := min(chunk, bc.inner-start)
			for pc, ins := range p.code {
				var reg []float32
				if pc == last && ins.kind >= kUnary {
					reg = dst[o+start : o+start+l]
				} else if scratch[pc] != nil {
					reg = scratch[pc][:l]
				}
				switch ins.kind {
				case kInput:
					src, off := data[ins.input], offs[ins.input]
					if bc.unit[ins.input] {
						reg = src[off+start : off+start+l]
					} else {
						v := src[off]
						for i := range reg {
							reg[i] = v
						}
					}
				case kUnary:
					unaryF32(ins.op, reg, regs[ins.a])
				case kBinary:
					binaryF32(ins.op, reg, regs[ins.a], regs[ins.b])
				}
				regs[pc] = reg
			}
			if p.code[last].kind < kUnary {
				copy(dst[o+start:o+start+l], regs[last])
			}
		}
	})
	return out, nil
}

// evalInt evaluates a one-op program (unary or binary) on integers.
func evalInt[T integer](op opcode, dt ir.DType, in []*tensor.Tensor) (*tensor.Tensor, error) {
	shapes := make([][]int, len(in))
	data := make([][]T, len(in))
	for i, t := range in {
		shapes[i], data[i] = t.Shape, view[T](t)
	}
	bc, err := newBroadcast(shapes...)
	if err != nil {
		return nil, err
	}
	out := tensor.New(dt, bc.shape)
	dst := view[T](out)
	step := func(i int) int {
		if bc.unit[i] {
			return 1
		}
		return 0
	}
	if len(in) == 1 {
		for i, v := range data[0] {
			dst[i] = unaryInt(op, v)
		}
		return out, nil
	}
	sa, sb := step(0), step(1)
	bc.runs(func(o int, offs []int) {
		a, b := data[0][offs[0]:], data[1][offs[1]:]
		for j := 0; j < bc.inner; j++ {
			dst[o+j] = binaryInt(op, a[j*sa], b[j*sb])
		}
	})
	return out, nil
}

var unaryPrograms, binaryPrograms = map[opcode]*program{}, map[opcode]*program{}

func init() {
	for _, op := range opcodes {
		if op.binary() {
			binaryPrograms[op] = &program{nin: 2, code: []instr{{kind: kInput, input: 0}, {kind: kInput, input: 1}, {kind: kBinary, op: op, a: 0, b: 1}}}
		} else {
			unaryPrograms[op] = &program{nin: 1, code: []instr{{kind: kInput, input: 0}, {kind: kUnary, op: op, a: 0}}}
		}
	}
}

func elementwise(c *call) ([]*tensor.Tensor, error) {
	op, ok := opcodes[c.op]
	if !ok {
		return nil, fmt.Errorf("no elementwise kernel for %s", c.op)
	}
	if !op.binary() && len(c.in) != 1 || op.binary() && len(c.in) != 2 {
		return nil, fmt.Errorf("got %d inputs", len(c.in))
	}
	dt := c.in[0].DType
	for _, t := range c.in[1:] {
		if t.DType != dt {
			return nil, fmt.Errorf("input dtypes differ: %s and %s", dt, t.DType)
		}
	}
	var out *tensor.Tensor
	var err error
	switch {
	case dt == ir.F32 && op.binary():
		out, err = binaryPrograms[op].evalF32(c.in)
	case dt == ir.F32:
		out, err = unaryPrograms[op].evalF32(c.in)
	case (dt == ir.I32 || dt == ir.I64) && ir.LookupOp(c.op).Compute == ir.ComputeF32OrInt:
		if dt == ir.I32 {
			out, err = evalInt[int32](op, dt, c.in)
		} else {
			out, err = evalInt[int64](op, dt, c.in)
		}
	default:
		return nil, fmt.Errorf("%s is not supported on %s (f32, f16 and bf16 are; i32 and i64 for %v)", c.op, dt, ir.OpsComputing(ir.ComputeF32OrInt))
	}
	if err != nil {
		return nil, err
	}
	return []*tensor.Tensor{out}, nil
}

func unaryKernel(_ *Device, c *call) ([]*tensor.Tensor, error)  { return elementwise(c) }
func binaryKernel(_ *Device, c *call) ([]*tensor.Tensor, error) { return elementwise(c) }

// fusedKernel evaluates fused_elementwise. The expression is parsed and
// compiled once per distinct expr string and cached on the device.
func fusedKernel(d *Device, c *call) ([]*tensor.Tensor, error) {
	src := c.attrs.String("expr")
	p, err := d.program(src)
	if err != nil {
		return nil, err
	}
	if p.nin != len(c.in) {
		return nil, fmt.Errorf("expr %q reads %d inputs, the node has %d", src, p.nin, len(c.in))
	}
	for _, t := range c.in[1:] {
		if t.DType != c.in[0].DType {
			return nil, fmt.Errorf("input dtypes differ: %s and %s", c.in[0].DType, t.DType)
		}
	}
	out, err := p.evalF32(c.in)
	if err != nil {
		return nil, err
	}
	return []*tensor.Tensor{out}, nil
}

// program returns the compiled form of a fused expression, compiling it
// the first time.
func (d *Device) program(src string) (*program, error) {
	d.mu.Lock()
	p := d.exprs[src]
	d.mu.Unlock()
	if p != nil {
		return p, nil
	}
	e, err := ir.ParseExpr(src)
	if err != nil {
		return nil, err
	}
	if p, err = compile(e); err != nil {
		return nil, err
	}
	d.mu.Lock()
	d.exprs[src] = p
	d.mu.Unlock()
	return p, nil
}
