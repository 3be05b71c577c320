package cpu

import (
	"fmt"
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/tapml/tapml/ir"
	"github.com/tapml/tapml/runtime"
	"github.com/tapml/tapml/tensor"
)

func TestConstant(t *testing.T) {
	d := New()
	cases := []struct {
		dtype ir.DType
		shape []int64
		value []float64
		want  []float64
	}{
		{ir.F32, []int64{2, 3}, []float64{1.5}, []float64{1.5, 1.5, 1.5, 1.5, 1.5, 1.5}},
		{ir.F32, []int64{3}, []float64{1, -2, 0.25}, []float64{1, -2, 0.25}},
		{ir.F32, nil, []float64{7}, []float64{7}},
		{ir.I32, []int64{4}, []float64{2.7, -2.7, 0, 5}, []float64{2, -2, 0, 5}},
		{ir.I64, []int64{2}, []float64{1 << 40}, []float64{1 << 40, 1 << 40}},
		{ir.F16, []int64{2}, []float64{0.5, 1000}, []float64{0.5, 1000}},
		{ir.Bool, []int64{3}, []float64{0, 2, -1}, []float64{0, 1, 1}},
	}
	for _, c := range cases {
		got := launch(t, d, ir.OpConstant, ir.Attrs{"dtype": ir.DTypeAttr(c.dtype), "shape": ir.ShapeAttr(ir.S(c.shape...)), "value": ir.FloatsAttr(c.value...)})
		approx(t, fmt.Sprintf("constant %s%v", c.dtype, c.shape), c.want, f64s(got), 0, 0)
	}
}

func TestCast(t *testing.T) {
	d := New()
	x := tensor.FromFloat32([]int{6}, []float32{-2.7, 2.7, 0.5, -0.5, 0, 1000.25})
	cases := []struct {
		in   *tensor.Tensor
		to   ir.DType
		want []float64
	}{
		{x, ir.I32, []float64{-2, 2, 0, 0, 0, 1000}},
		{x, ir.I64, []float64{-2, 2, 0, 0, 0, 1000}},
		{x, ir.Bool, []float64{1, 1, 1, 1, 0, 1}},
		{x, ir.F16, []float64{-2.69921875, 2.69921875, 0.5, -0.5, 0, 1000}},
		{x, ir.BF16, []float64{-2.703125, 2.703125, 0.5, -0.5, 0, 1000}},
		{x, ir.F32, f64s(x)},
		{intTensor(ir.I32, []int{3}, -4, 0, 9), ir.F32, []float64{-4, 0, 9}},
		{intTensor(ir.I64, []int{3}, -4, 0, 9), ir.I32, []float64{-4, 0, 9}},
		{intTensor(ir.Bool, []int{3}, 1, 0, 1), ir.F32, []float64{1, 0, 1}},
		{tensor.FromFloat32([]int{2}, []float32{1.5, -3}).Convert(ir.F16), ir.F32, []float64{1.5, -3}},
	}
	for _, c := range cases {
		got := launch(t, d, ir.OpCast, ir.Attrs{"to": ir.DTypeAttr(c.to)}, c.in)
		if got.DType != c.to {
			t.Errorf("cast to %s gave %s", c.to, got.DType)
		}
		approx(t, fmt.Sprintf("cast %s to %s", c.in.DType, c.to), c.want, f64s(got), 0, 0)
	}
}

func TestGather(t *testing.T) {
	d := New()
	r := newRand(20)
	cases := []struct {
		table []int
		dt    ir.DType
		ids   []int
		idv   []int64
		idt   ir.DType
		axis  int
	}{
		{[]int{10, 4}, ir.F32, []int{3}, []int64{0, 9, 3}, ir.I32, 0},
		{[]int{10, 4}, ir.F32, []int{2, 3}, []int64{1, 1, 2, 3, 5, 8}, ir.I64, 0},
		{[]int{3, 5, 2}, ir.F32, []int{4}, []int64{4, 0, 2, 2}, ir.I32, 1},
		{[]int{3, 5, 2}, ir.F16, []int{2}, []int64{1, 0}, ir.I32, -1},
		{[]int{7}, ir.F32, []int{}, []int64{6}, ir.I32, 0},
		{[]int{6, 3}, ir.I32, []int{1}, []int64{5}, ir.I32, -2},
	}
	for _, c := range cases {
		table := randF32(r, c.table...).Convert(c.dt)
		ids := intTensor(c.idt, c.ids, c.idv...)
		got := launch(t, d, ir.OpGather, ir.Attrs{"axis": ir.IntAttr(int64(c.axis))}, table, ids)
		ax := c.axis
		if ax < 0 {
			ax += len(c.table)
		}
		shape := append(append(append([]int{}, c.table[:ax]...), c.ids...), c.table[ax+1:]...)
		tv := f64s(table)
		want := make([]float64, tensor.NumElements(shape))
		for o := range want {
			idx := unravel(o, shape)
			src := append(append(append([]int{}, idx[:ax]...), int(c.idv[ravel(idx[ax:ax+len(c.ids)], c.ids)])), idx[ax+len(c.ids):]...)
			want[o] = tv[ravel(src, c.table)]
		}
		checkShape(t, "gather", got, shape)
		if got.DType != c.dt {
			t.Errorf("gather of %s gave %s", c.dt, got.DType)
		}
		approx(t, fmt.Sprintf("gather %+v", c), want, f64s(got), 0, 0)
	}
	for _, id := range []int64{10, -1} {
		if err := launchRaw(d, ir.OpGather, nil, randF32(r, 10, 4), intTensor(ir.I32, []int{2}, 0, id)); err == nil {
			t.Errorf("gather of id %d from 10 rows: no error", id)
		}
	}
}

func ravel(idx, shape []int) int {
	off := 0
	for j, s := range shape {
		off = off*s + idx[j]
	}
	return off
}

func TestReshape(t *testing.T) {
	d := New()
	x := randF32(newRand(21), 2, 3, 4)
	for _, c := range []struct {
		shape ir.Shape
		want  []int
	}{
		{ir.S(6, 4), []int{6, 4}},
		{ir.S(-1, 2), []int{12, 2}},
		{ir.S(24), []int{24}},
		{ir.S(1, 2, 12, 1), []int{1, 2, 12, 1}},
	} {
		got := launch(t, d, ir.OpReshape, ir.Attrs{"shape": ir.ShapeAttr(c.shape)}, x)
		checkShape(t, "reshape", got, c.want)
		approx(t, "reshape", f64s(x), f64s(got), 0, 0)
	}
	// Without an expected output type the kernel resolves -1 itself.
	b, _ := d.Upload(x)
	res, err := d.Launch(&ir.Node{Op: ir.OpReshape, Attrs: ir.Attrs{"shape": ir.ShapeAttr(ir.S(4, -1))}}, []*runtime.Buffer{b}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]int{4, 6}, res[0].Shape); diff != "" {
		t.Errorf("reshape to [4, -1]: %s", diff)
	}
	if err := launchRaw(d, ir.OpReshape, ir.Attrs{"shape": ir.ShapeAttr(ir.S(5, -1))}, x); err == nil {
		t.Error("reshape of 24 elements to [5, -1]: no error")
	}
}

func TestTranspose(t *testing.T) {
	d := New()
	r := newRand(22)
	cases := []struct {
		shape []int
		perm  []int64
		dt    ir.DType
	}{
		{[]int{2, 3, 4}, []int64{2, 0, 1}, ir.F32},
		{[]int{2, 3, 4}, []int64{1, 0, 2}, ir.F32},
		{[]int{2, 3, 4}, []int64{0, 1, 2}, ir.F32},
		{[]int{2, 3, 4}, []int64{2, 1, 0}, ir.F16},
		{[]int{5, 7}, []int64{1, 0}, ir.I64},
		{[]int{3, 1, 2, 5}, []int64{3, 2, 0, 1}, ir.Bool},
		{[]int{0, 3}, []int64{1, 0}, ir.F32},
		{[]int{}, []int64{}, ir.F32},
	}
	for _, c := range cases {
		x := randF32(r, c.shape...).Convert(c.dt)
		got := launch(t, d, ir.OpTranspose, ir.Attrs{"perm": ir.IntsAttr(c.perm...)}, x)
		shape := make([]int, len(c.perm))
		for i, p := range c.perm {
			shape[i] = c.shape[p]
		}
		xv := f64s(x)
		want := make([]float64, len(xv))
		for o := range want {
			idx := unravel(o, shape)
			src := make([]int, len(idx))
			for i, p := range c.perm {
				src[p] = idx[i]
			}
			want[o] = xv[ravel(src, c.shape)]
		}
		checkShape(t, "transpose", got, shape)
		approx(t, fmt.Sprintf("transpose %v %v", c.shape, c.perm), want, f64s(got), 0, 0)
	}
}

func TestSlice(t *testing.T) {
	d := New()
	r := newRand(23)
	cases := []struct {
		shape                  []int
		axis, start, end, step int64
	}{
		{[]int{10}, 0, 2, 7, 1},
		{[]int{10}, 0, -3, math.MaxInt32, 1},
		{[]int{10}, 0, 0, 10, 3},
		{[]int{10}, 0, -100, 100, 2},
		{[]int{10}, 0, 5, 2, 1},
		{[]int{10}, 0, 1, -1, 2},
		{[]int{3, 10, 2}, 1, -1, math.MaxInt32, 1},
		{[]int{3, 10, 2}, -2, 3, 9, 4},
		{[]int{3, 10, 2}, 0, 1, 2, 1},
		{[]int{3, 10, 2}, -1, 1, 5, 1},
		{[]int{4, 5}, 1, 12, 20, 1},
	}
	for _, c := range cases {
		x := randF32(r, c.shape...)
		got := launch(t, d, ir.OpSlice, ir.Attrs{"axis": ir.IntAttr(c.axis), "start": ir.IntAttr(c.start), "end": ir.IntAttr(c.end), "step": ir.IntAttr(c.step)}, x)
		ax := int(c.axis)
		if ax < 0 {
			ax += len(c.shape)
		}
		n := c.shape[ax]
		clamp := func(v int64) int {
			if v < 0 {
				v += int64(n)
			}
			return int(min(max(v, 0), int64(n)))
		}
		var take []int // python's range(start, end, step) after clamping
		for i := clamp(c.start); i < clamp(c.end); i += int(c.step) {
			take = append(take, i)
		}
		shape := append([]int{}, c.shape...)
		shape[ax] = len(take)
		xv := f64s(x)
		want := make([]float64, tensor.NumElements(shape))
		for o := range want {
			idx := unravel(o, shape)
			idx[ax] = take[idx[ax]]
			want[o] = xv[ravel(idx, c.shape)]
		}
		checkShape(t, "slice", got, shape)
		approx(t, fmt.Sprintf("slice %+v", c), want, f64s(got), 0, 0)
	}
}

func TestConcat(t *testing.T) {
	d := New()
	r := newRand(24)
	cases := []struct {
		shapes [][]int
		axis   int
		dt     ir.DType
	}{
		{[][]int{{2, 3}, {2, 5}}, 1, ir.F32},
		{[][]int{{2, 3}, {4, 3}, {1, 3}}, 0, ir.F32},
		{[][]int{{2, 3, 2}, {2, 3, 1}, {2, 3, 4}}, -1, ir.I32},
		{[][]int{{2, 1, 2}, {2, 4, 2}}, -2, ir.F16},
		{[][]int{{3}}, 0, ir.F32},
		{[][]int{{2, 0}, {2, 3}}, 1, ir.F32},
	}
	for _, c := range cases {
		ins := make([]*tensor.Tensor, len(c.shapes))
		for i, s := range c.shapes {
			ins[i] = randF32(r, s...)
			if c.dt == ir.I32 {
				for j := range ins[i].Float32s() {
					ins[i].Float32s()[j] *= 100
				}
			}
			ins[i] = ins[i].Convert(c.dt)
		}
		got := launch(t, d, ir.OpConcat, ir.Attrs{"axis": ir.IntAttr(int64(c.axis))}, ins...)
		ax := c.axis
		if ax < 0 {
			ax += len(c.shapes[0])
		}
		shape := append([]int{}, c.shapes[0]...)
		shape[ax] = 0
		for _, s := range c.shapes {
			shape[ax] += s[ax]
		}
		want := make([]float64, tensor.NumElements(shape))
		for o := range want {
			idx := unravel(o, shape)
			k := idx[ax]
			for i, s := range c.shapes {
				if k < s[ax] {
					idx[ax] = k
					want[o] = ins[i].Float64At(ravel(idx, s))
					break
				}
				k -= s[ax]
			}
		}
		checkShape(t, "concat", got, shape)
		approx(t, fmt.Sprintf("concat %v axis %d", c.shapes, c.axis), want, f64s(got), 0, 0)
	}
}

func TestIdentity(t *testing.T) {
	d := New()
	x := randF32(newRand(25), 3, 2)
	b, _ := d.Upload(x)
	for _, n := range []*ir.Node{
		{Op: ir.OpProbe, Attrs: ir.Attrs{"tag": ir.StringAttr("x")}},
		{Op: ir.OpTransfer, Attrs: ir.Attrs{"from": ir.StringAttr("source"), "to": ir.StringAttr("target")}},
	} {
		res, err := d.Launch(n, []*runtime.Buffer{b}, []ir.Type{x.Type()})
		if err != nil {
			t.Fatal(err)
		}
		if res[0] != b {
			t.Errorf("%s returned a new buffer, want its input", n.Op)
		}
	}
}

func TestBuffers(t *testing.T) {
	d := New()
	x := tensor.FromFloat32([]int{2}, []float32{1, 2})
	b, err := d.Upload(x)
	if err != nil {
		t.Fatal(err)
	}
	if h, _ := Tensor(b); h != x {
		t.Error("Upload copied the tensor; it should wrap it")
	}
	got, err := d.Download(b)
	if err != nil {
		t.Fatal(err)
	}
	x.Float32s()[0] = 9 // an in-place update after the download
	if got.Float32s()[0] != 1 {
		t.Error("Download shares memory with the buffer; it should copy")
	}
	d.Free(b)
	if _, err := d.Download(b); err == nil {
		t.Error("Download of a freed buffer: no error")
	}
	if _, err := d.Upload(&tensor.Tensor{DType: ir.F32, Shape: []int{3}, Data: make([]byte, 8)}); err == nil {
		t.Error("Upload of a tensor with short data: no error")
	}
	if err := d.Sync(); err != nil {
		t.Error(err)
	}
}
