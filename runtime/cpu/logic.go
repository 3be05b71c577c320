package cpu

import (
	"fmt"

	"github.com/tapml/tapml/ir"
	"github.com/tapml/tapml/tensor"
)

// compareKernel writes 1 where a cmp b holds, else 0, as i32 (numpy
// broadcasting); comparisons with NaN are false, but ne.
func compareKernel(_ *Device, c *call) ([]*tensor.Tensor, error) {
	a, b := c.in[0], c.in[1]
	bc, err := newBroadcast(a.Shape, b.Shape)
	if err != nil {
		return nil, err
	}
	var holds func(x, y float64) bool
	switch cmp := c.attrs.String("cmp"); cmp {
	case "eq":
		holds = func(x, y float64) bool { return x == y }
	case "ne":
		holds = func(x, y float64) bool { return x != y }
	case "lt":
		holds = func(x, y float64) bool { return x < y }
	case "le":
		holds = func(x, y float64) bool { return x <= y }
	case "gt":
		holds = func(x, y float64) bool { return x > y }
	case "ge":
		holds = func(x, y float64) bool { return x >= y }
	default:
		return nil, fmt.Errorf("unknown comparison %q", cmp)
	}
	out := tensor.New(ir.I32, bc.shape)
	dst := view[int32](out)
	bc.runs(func(o int, offs []int) {
		ia, ib := offs[0], offs[1]
		for j := 0; j < bc.inner; j++ {
			if holds(a.Float64At(ia), b.Float64At(ib)) {
				dst[o+j] = 1
			}
			if bc.unit[0] {
				ia++
			}
			if bc.unit[1] {
				ib++
			}
		}
	})
	return []*tensor.Tensor{out}, nil
}

// whereKernel takes each element from a where cond is nonzero, else from
// b (numpy broadcasting over all three), copying its bytes.
func whereKernel(_ *Device, c *call) ([]*tensor.Tensor, error) {
	cond, a, b := c.in[0], c.in[1], c.in[2]
	bc, err := newBroadcast(cond.Shape, a.Shape, b.Shape)
	if err != nil {
		return nil, err
	}
	out := tensor.New(a.DType, bc.shape)
	size := a.DType.Size()
	cs := view[int32](cond)
	bc.runs(func(o int, offs []int) {
		ic, ia, ib := offs[0], offs[1], offs[2]
		for j := 0; j < bc.inner; j++ {
			src, at := b.Data, ib
			if cs[ic] != 0 {
				src, at = a.Data, ia
			}
			copy(out.Data[(o+j)*size:(o+j+1)*size], src[at*size:(at+1)*size])
			if bc.unit[0] {
				ic++
			}
			if bc.unit[1] {
				ia++
			}
			if bc.unit[2] {
				ib++
			}
		}
	})
	return []*tensor.Tensor{out}, nil
}
