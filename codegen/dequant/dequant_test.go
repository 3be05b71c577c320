package dequant

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/tapml/tapml/ir"
	"github.com/tapml/tapml/tensor/quant"
)

// eval computes e for the unit at element j of the block at byte offset
// blk of data, lane l: the meaning generators print.
func eval(e *Expr, data []byte, blk, j, l uint32) (u uint32, f float32) {
	arg := func(i int) uint32 { v, _ := eval(e.Args[i], data, blk, j, l); return v }
	farg := func(i int) float32 { _, v := eval(e.Args[i], data, blk, j, l); return v }
	switch e.Op {
	case Const:
		return e.K, 0
	case Block:
		return blk, 0
	case Elem:
		return j, 0
	case Lane:
		return l, 0
	case Word:
		return binary.LittleEndian.Uint32(data[arg(0):]), 0
	case Byte:
		return uint32(data[arg(0)]), 0
	case Half:
		return 0, quant.F16ToF32(binary.LittleEndian.Uint16(data[arg(0):]))
	case Add:
		return arg(0) + arg(1), 0
	case Sub:
		return arg(0) - arg(1), 0
	case Mul:
		return arg(0) * arg(1), 0
	case Shl:
		return arg(0) << arg(1), 0
	case Shr:
		return arg(0) >> arg(1), 0
	case And:
		return arg(0) & arg(1), 0
	case Or:
		return arg(0) | arg(1), 0
	case Select:
		if arg(0) < 4 {
			return arg(1), 0
		}
		return arg(2), 0
	case ToF32:
		return 0, float32(int32(arg(0)))
	case I8ToF32:
		return 0, float32(int8(arg(0)))
	case FMul:
		return 0, float32(farg(0) * farg(1))
	case FAdd:
		return 0, float32(farg(0) + farg(1))
	case FSub:
		return 0, float32(farg(0) - farg(1))
	}
	panic("eval: op " + string(rune('0'+e.Op)))
}

// TestUnitsMatchReference decodes random blocks (every bit pattern is a
// block) through each format's expression and requires tensor/quant's
// values, bit for bit: the descriptions kernels print are ggml's layouts.
func TestUnitsMatchReference(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, dt := range ir.BlockDTypes {
		e := Unit(dt)
		if e == nil || !e.IsFloat() || !e.DependsOnLane() {
			t.Fatalf("%s: no float expression that depends on the lane", dt)
		}
		elems, bytes := dt.Block()
		const blocks = 64
		data := make([]byte, blocks*bytes+4) // a Word may read past the last block's end
		for i := range data {
			data[i] = byte(r.Uint32())
		}
		want := make([]float32, blocks*elems)
		if err := quant.Dequantize(dt, data[:blocks*bytes], want); err != nil {
			t.Fatal(err)
		}
		for b := 0; b < blocks; b++ {
			for j := 0; j < elems; j += 4 {
				for l := 0; l < 4; l++ {
					_, got := eval(e, data, uint32(b*bytes), uint32(j), uint32(l))
					w := want[b*elems+j+l]
					if math.Float32bits(got) != math.Float32bits(w) && !(got != got && w != w) {
						t.Fatalf("%s: block %d element %d: %v, the reference %v", dt, b, j+l, got, w)
					}
				}
			}
		}
	}
	if Unit(ir.F32) != nil || Unit(ir.F16) != nil {
		t.Error("element dtypes have unit expressions")
	}
}

// TestScaled checks which formats split into an integer times their
// block's scale, and that the parts multiply to the unit, bit for bit,
// with integers exact in f16 (|q| <= 2048).
func TestScaled(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, dt := range ir.BlockDTypes {
		q, scale, ok := Scaled(dt)
		if want := dt == ir.Q4_0 || dt == ir.Q5_0 || dt == ir.Q8_0; ok != want {
			t.Errorf("%s: scaled %v, want %v", dt, ok, want)
		}
		if !ok {
			continue
		}
		elems, bytes := dt.Block()
		const blocks = 32
		data := make([]byte, blocks*bytes+4)
		for i := range data {
			data[i] = byte(r.Uint32())
		}
		for b := 0; b < blocks; b++ {
			for j := 0; j < elems; j += 4 {
				for l := 0; l < 4; l++ {
					at := func(e *Expr) float32 { _, v := eval(e, data, uint32(b*bytes), uint32(j), uint32(l)); return v }
					qv, sv, u := at(q), at(scale), at(Unit(dt))
					if qv != float32(int32(qv)) || math.Abs(float64(qv)) > 2048 {
						t.Fatalf("%s: block %d element %d: q = %v, not an integer within 2048", dt, b, j+l, qv)
					}
					if got := qv * sv; math.Float32bits(got) != math.Float32bits(u) && !(got != got && u != u) {
						t.Fatalf("%s: block %d element %d: q·scale = %v, the unit %v", dt, b, j+l, got, u)
					}
					if _, s0 := eval(scale, data, uint32(b*bytes), 0, 0); math.Float32bits(s0) != math.Float32bits(sv) && !(s0 != s0 && sv != sv) {
						t.Fatalf("%s: block %d: the scale differs between elements", dt, b)
					}
				}
			}
		}
	}
}
