package cpu

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/tapml/tapml/ir"
	"github.com/tapml/tapml/runtime"
	"github.com/tapml/tapml/tensor"
)

// node builds a node of op over inputs of the tensors' types the way a
// Builder does (attributes normalized) and returns it with its inferred
// output types.
func node(t testing.TB, op ir.Op, attrs ir.Attrs, ins ...*tensor.Tensor) (*ir.Node, []ir.Type) {
	t.Helper()
	types := make([]ir.Type, len(ins))
	for i, x := range ins {
		types[i] = x.Type()
	}
	outs, na, err := ir.InferTypes(op, types, attrs)
	if err != nil {
		t.Fatalf("%s: infer: %v", op, err)
	}
	return &ir.Node{ID: 1, Op: op, Attrs: na}, outs
}

// launch runs an op of one output on the device and returns it.
func launch(t testing.TB, d *Device, op ir.Op, attrs ir.Attrs, ins ...*tensor.Tensor) *tensor.Tensor {
	t.Helper()
	got := launchN(t, d, op, attrs, ins...)
	if len(got) != 1 {
		t.Fatalf("%s: %d outputs", op, len(got))
	}
	return got[0]
}

// launchN runs op on the device and returns its downloaded outputs, each
// checked against its inferred type. An op that updates an input in place
// updates ins's tensor.
func launchN(t testing.TB, d *Device, op ir.Op, attrs ir.Attrs, ins ...*tensor.Tensor) []*tensor.Tensor {
	t.Helper()
	n, outs := node(t, op, attrs, ins...)
	bufs := make([]*runtime.Buffer, len(ins))
	for i, x := range ins {
		b, err := d.Upload(x)
		if err != nil {
			t.Fatal(err)
		}
		bufs[i] = b
	}
	res, err := d.Launch(n, bufs, outs)
	if err != nil {
		t.Fatalf("%s: %v", op, err)
	}
	if len(res) != len(outs) {
		t.Fatalf("%s: %d outputs, inferred %d", op, len(res), len(outs))
	}
	var got []*tensor.Tensor
	for i, b := range res {
		x, err := d.Download(b)
		if err != nil {
			t.Fatal(err)
		}
		if !x.Type().Equal(outs[i]) {
			t.Fatalf("%s: output %d %s, inferred %s", op, i, x.Type(), outs[i])
		}
		got = append(got, x)
	}
	return got
}

// launchRaw runs op without type inference (so bad inputs reach the
// kernel) and returns the error.
func launchRaw(d *Device, op ir.Op, attrs ir.Attrs, ins ...*tensor.Tensor) error {
	_, err := d.Launch(&ir.Node{ID: 1, Op: op, Attrs: attrs}, bufs(d, ins), nil)
	return err
}

func randF32(r *rand.Rand, shape ...int) *tensor.Tensor {
	x := tensor.New(ir.F32, shape)
	for i := range x.Float32s() {
		x.Float32s()[i] = float32(2*r.Float64() - 1)
	}
	return x
}

func newRand(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, 42)) }

func f64s(x *tensor.Tensor) []float64 {
	out := make([]float64, x.NumElements())
	for i := range out {
		out[i] = x.Float64At(i)
	}
	return out
}

// approx compares float slices with relative and absolute tolerance.
func approx(t testing.TB, what string, want, got []float64, rel, abs float64) {
	t.Helper()
	if diff := cmp.Diff(want, got, cmpopts.EquateApprox(rel, abs), cmpopts.EquateNaNs()); diff != "" {
		t.Errorf("%s: mismatch (-want +got):\n%s", what, diff)
	}
}

func checkShape(t testing.TB, what string, got *tensor.Tensor, want []int) {
	t.Helper()
	if diff := cmp.Diff(want, got.Shape, cmpopts.EquateEmpty()); diff != "" {
		t.Fatalf("%s: shape (-want +got):\n%s", what, diff)
	}
}

// unravel returns the multi-index of flat index i in shape.
func unravel(i int, shape []int) []int {
	idx := make([]int, len(shape))
	for j := len(shape) - 1; j >= 0; j-- {
		if shape[j] > 0 {
			idx[j] = i % shape[j]
			i /= shape[j]
		}
	}
	return idx
}

// ravelBroadcast returns the flat index in shape (right-aligned against
// idx, size-1 dims broadcast) of the element that idx reads.
func ravelBroadcast(idx, shape []int) int {
	off, r := 0, len(idx)-len(shape)
	for j, s := range shape {
		v := idx[r+j]
		if s == 1 {
			v = 0
		}
		off = off*s + v
	}
	return off
}

func naiveBroadcastShape(shapes ...[]int) []int {
	r := 0
	for _, s := range shapes {
		r = max(r, len(s))
	}
	out := make([]int, r)
	for j := range out {
		out[j] = 1
		for _, s := range shapes {
			if k := j - (r - len(s)); k >= 0 && s[k] != 1 {
				out[j] = s[k]
			}
		}
	}
	return out
}

func naiveUnary(op ir.Op, x float64) float64 {
	switch op {
	case ir.OpNeg:
		return -x
	case ir.OpExp:
		return math.Exp(x)
	case ir.OpLog:
		return math.Log(x)
	case ir.OpSqrt:
		return math.Sqrt(x)
	case ir.OpRsqrt:
		return 1 / math.Sqrt(x)
	case ir.OpAbs:
		return math.Abs(x)
	case ir.OpSilu:
		return x / (1 + math.Exp(-x))
	case ir.OpSigmoid:
		return 1 / (1 + math.Exp(-x))
	case ir.OpTanh:
		return math.Tanh(x)
	case ir.OpRelu:
		return math.Max(x, 0)
	case ir.OpGelu:
		return 0.5 * x * (1 + math.Tanh(math.Sqrt(2/math.Pi)*(x+0.044715*x*x*x)))
	case ir.OpErf:
		return math.Erf(x)
	case ir.OpSoftplus:
		return math.Log(1 + math.Exp(x))
	}
	panic("naiveUnary: " + op.String())
}

func naiveBinary(op ir.Op, a, b float64) float64 {
	switch op {
	case ir.OpAdd:
		return a + b
	case ir.OpSub:
		return a - b
	case ir.OpMul:
		return a * b
	case ir.OpDiv:
		return a / b
	case ir.OpPow:
		return math.Pow(a, b)
	case ir.OpMaximum:
		return math.Max(a, b)
	case ir.OpMinimum:
		return math.Min(a, b)
	}
	panic("naiveBinary: " + op.String())
}

// naiveElementwise applies fn over broadcast inputs.
func naiveElementwise(fn func(args []float64) float64, ins ...*tensor.Tensor) ([]int, []float64) {
	shapes := make([][]int, len(ins))
	vals := make([][]float64, len(ins))
	for i, x := range ins {
		shapes[i], vals[i] = x.Shape, f64s(x)
	}
	shape := naiveBroadcastShape(shapes...)
	out := make([]float64, tensor.NumElements(shape))
	args := make([]float64, len(ins))
	for i := range out {
		idx := unravel(i, shape)
		for k := range ins {
			args[k] = vals[k][ravelBroadcast(idx, shapes[k])]
		}
		out[i] = fn(args)
	}
	return shape, out
}

func bufs(d *Device, ts []*tensor.Tensor) []*runtime.Buffer {
	out := make([]*runtime.Buffer, len(ts))
	for i, x := range ts {
		out[i] = &runtime.Buffer{Dev: d, DType: x.DType, Shape: x.Shape, Handle: x}
	}
	return out
}
