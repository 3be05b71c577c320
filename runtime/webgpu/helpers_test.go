package webgpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"testing"

	"github.com/tapml/tapml/ir"
	"github.com/tapml/tapml/runtime"
	"github.com/tapml/tapml/runtime/cpu"
	"github.com/tapml/tapml/tensor"
)

// The tests share one device on the Vulkan adapter (lavapipe on the
// project's machines).
var testDev *Device

func TestMain(m *testing.M) {
	d, err := Open(Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, "webgpu: no device, skipping:", err)
		os.Exit(0)
	}
	testDev = d
	code := m.Run()
	if err := d.Close(); err != nil {
		fmt.Fprintln(os.Stderr, "close:", err)
		code = 1
	}
	os.Exit(code)
}

// mkNode builds a node of op over inputs of the given types, normalized as
// a Builder would, with its inferred output types.
func mkNode(t testing.TB, id int, op ir.Op, attrs ir.Attrs, types ...ir.Type) (*ir.Node, []ir.Type) {
	t.Helper()
	outs, na, err := ir.InferTypes(op, types, attrs)
	if err != nil {
		t.Fatalf("%s: infer: %v", op, err)
	}
	n := &ir.Node{ID: id, Op: op, Attrs: na, Prov: "test." + op.String()}
	for i, ty := range types {
		n.Inputs = append(n.Inputs, &ir.Value{Name: fmt.Sprintf("x%d", i), Type: ty})
	}
	for i, ty := range outs {
		n.Outputs = append(n.Outputs, &ir.Value{Name: fmt.Sprintf("y%d", i), Type: ty, Def: n})
	}
	return n, outs
}

// run launches n on device d over host tensors and downloads its outputs.
func run(t testing.TB, d runtime.Device, n *ir.Node, outs []ir.Type, ins ...*tensor.Tensor) ([]*tensor.Tensor, error) {
	t.Helper()
	bufs := make([]*runtime.Buffer, len(ins))
	for i, x := range ins {
		b, err := d.Upload(x.Clone())
		if err != nil {
			t.Fatal(err)
		}
		bufs[i] = b
	}
	defer func() {
		for _, b := range bufs {
			d.Free(b)
		}
	}()
	res, err := d.Launch(n, bufs, outs)
	if err != nil {
		return nil, err
	}
	var got []*tensor.Tensor
	for _, b := range res {
		x, err := d.Download(b)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, x)
		if !isInput(bufs, b) {
			d.Free(b)
		}
	}
	return got, nil
}

func isInput(bufs []*runtime.Buffer, b *runtime.Buffer) bool {
	for _, x := range bufs {
		if x == b {
			return true
		}
	}
	return false
}

var refDev = cpu.New()

// reference runs n on the CPU reference device.
func reference(t testing.TB, n *ir.Node, outs []ir.Type, ins ...*tensor.Tensor) []*tensor.Tensor {
	t.Helper()
	got, err := run(t, refDev, n, outs, ins...)
	if err != nil {
		t.Fatalf("cpu reference: %v", err)
	}
	return got
}

func randF32(r *rand.Rand, lo, hi float64, shape ...int) *tensor.Tensor {
	x := tensor.New(ir.F32, shape)
	for i := range x.Float32s() {
		x.Float32s()[i] = float32(lo + (hi-lo)*r.Float64())
	}
	return x
}

func randI32(r *rand.Rand, lo, hi int, shape ...int) *tensor.Tensor {
	x := tensor.New(ir.I32, shape)
	for i := range x.Int32s() {
		x.Int32s()[i] = int32(lo + r.IntN(hi-lo))
	}
	return x
}

func newRand(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, 7)) }

// tol is a comparison tolerance: |got - want| <= Abs + Rel·|want|, or, for
// Exact, identical bits (NaNs equal).
type tol struct {
	Abs, Rel float64
	Exact    bool
}

// compare checks got against want and reports the worst element.
func compare(t testing.TB, what string, want, got *tensor.Tensor, tl tol) {
	t.Helper()
	if want.DType != got.DType || !equalInts(want.Shape, got.Shape) {
		t.Errorf("%s: got %s, want %s", what, got, want)
		return
	}
	worst, wi, bad := 0.0, -1, 0
	for i := 0; i < want.NumElements(); i++ {
		w, g := want.Float64At(i), got.Float64At(i)
		if math.IsNaN(w) && math.IsNaN(g) || w == g {
			continue
		}
		d := math.Abs(g - w)
		if tl.Exact || !(d <= tl.Abs+tl.Rel*math.Abs(w)) {
			bad++
			if math.IsNaN(d) || d > worst || wi < 0 {
				worst, wi = d, i
			}
		}
	}
	if bad > 0 {
		t.Errorf("%s: %d of %d elements differ beyond %+v; worst at %d: got %g, want %g",
			what, bad, want.NumElements(), tl, wi, got.Float64At(wi), want.Float64At(wi))
	}
}

// maxErr is the largest |got - want| (for reporting measured errors).
func maxErr(want, got *tensor.Tensor) float64 {
	m := 0.0
	for i := 0; i < want.NumElements(); i++ {
		m = math.Max(m, math.Abs(got.Float64At(i)-want.Float64At(i)))
	}
	return m
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
