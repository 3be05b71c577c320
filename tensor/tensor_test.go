package tensor

import (
	"math"
	"testing"
	"unsafe"

	"github.com/google/go-cmp/cmp"
	"github.com/tapml/tapml/ir"
)

func TestNewIsAlignedAndZero(t *testing.T) {
	for _, dt := range []ir.DType{ir.F32, ir.F16, ir.BF16, ir.I32, ir.I64, ir.Bool} {
		x := New(dt, []int{3, 5})
		if len(x.Data) != 15*dt.Size() {
			t.Errorf("%s: %d bytes", dt, len(x.Data))
		}
		if uintptr(unsafe.Pointer(&x.Data[0]))%8 != 0 {
			t.Errorf("%s: data not 8-byte aligned", dt)
		}
		for i := 0; i < x.NumElements(); i++ {
			if x.Float64At(i) != 0 {
				t.Fatalf("%s: element %d not zero", dt, i)
			}
		}
	}
	if s := New(ir.F32, nil); s.NumElements() != 1 || len(s.Data) != 4 {
		t.Errorf("scalar: %d elements, %d bytes", s.NumElements(), len(s.Data))
	}
}

func TestFromBytesCopiesOnlyWhenMisaligned(t *testing.T) {
	buf := New(ir.F32, []int{5}).Data // aligned
	aligned, err := FromBytes(ir.F32, []int{4}, buf[:16])
	if err != nil {
		t.Fatal(err)
	}
	if &aligned.Data[0] != &buf[0] {
		t.Error("aligned bytes were copied")
	}
	mis, err := FromBytes(ir.F32, []int{4}, buf[4:20])
	if err != nil {
		t.Fatal(err)
	}
	if uintptr(unsafe.Pointer(&mis.Data[0]))%8 != 0 {
		t.Error("misaligned bytes were not realigned")
	}
	if _, err := FromBytes(ir.F32, []int{4}, buf[:12]); err == nil {
		t.Error("a short buffer was accepted")
	}
}

func TestConvertRoundTrips(t *testing.T) {
	vals := []float32{0, 1, -2.5, 65504, 1e-3, float32(math.Inf(1))}
	x := FromFloat32([]int{len(vals)}, vals)
	for _, tc := range []struct {
		dt  ir.DType
		tol float64 // relative error of one rounding to dt
	}{{ir.F16, 0x1p-11}, {ir.BF16, 0x1p-8}, {ir.F32, 0}} {
		back := x.Convert(tc.dt).Convert(ir.F32).Float32s()
		for i, v := range vals {
			if math.IsInf(float64(v), 0) {
				if back[i] != v {
					t.Errorf("%s: inf became %g", tc.dt, back[i])
				}
				continue
			}
			if d := math.Abs(float64(back[i] - v)); d > tc.tol*math.Abs(float64(v)) {
				t.Errorf("%s: %g became %g", tc.dt, v, back[i])
			}
		}
	}
	ints := x.Convert(ir.I32).Int32s()
	if diff := cmp.Diff([]int32{0, 1, -2, 65504, 0}, ints[:5]); diff != "" {
		t.Errorf("f32 to i32 truncates toward zero (-want +got):\n%s", diff)
	}
}

func TestF32ToBF16RoundsToNearestEven(t *testing.T) {
	for _, tc := range []struct {
		in   uint32
		want uint16
	}{
		{0x3f800000, 0x3f80}, // 1.0 exactly
		{0x3f808000, 0x3f80}, // halfway, even stays
		{0x3f818000, 0x3f82}, // halfway, odd rounds up
		{0x3f808001, 0x3f81}, // above halfway
	} {
		if got := F32ToBF16(math.Float32frombits(tc.in)); got != tc.want {
			t.Errorf("%#x: got %#x, want %#x", tc.in, got, tc.want)
		}
	}
	if got := F32ToBF16(float32(math.NaN())); got&0x7f80 != 0x7f80 || got&0x7f == 0 {
		t.Errorf("NaN became %#x, not a NaN", got)
	}
}

func TestReshapedSharesData(t *testing.T) {
	x := FromInt32([]int{2, 3}, []int32{1, 2, 3, 4, 5, 6})
	y := x.Reshaped([]int{3, 2})
	y.Int32s()[0] = 9
	if x.Int32s()[0] != 9 {
		t.Error("reshape copied the data")
	}
	c := x.Clone()
	c.Int32s()[1] = 7
	if x.Int32s()[1] == 7 {
		t.Error("clone shares data")
	}
}
