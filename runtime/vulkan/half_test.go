package vulkan

import (
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/tapml/tapml/ir"
	"github.com/tapml/tapml/tensor"
)

// TestF16Storage checks that under f16 compute an f32 tensor takes two
// bytes an element on the device and comes back rounded to f16 (to
// nearest even, beyond 65504 to infinity), while i32 tensors keep theirs.
func TestF16Storage(t *testing.T) {
	d := openTest(t, Options{Compute: ir.F16})
	in := []float32{1, 1 + 0x1p-12, 1 + 0x1p-10, 65504, 70000, -3.14159}
	want := []float32{1, 1, 1 + 0x1p-10, 65504, float32(math.Inf(1)), -3.140625}
	b, err := d.Upload(tensor.FromFloat32([]int{len(in)}, in))
	if err != nil {
		t.Fatal(err)
	}
	if got := d.Stats().InUse; got < 2*uint64(len(in)) || got >= 4*uint64(len(in)) {
		t.Errorf("%d bytes in use for %d f32 values stored as f16", got, len(in))
	}
	got, err := d.Download(b)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got.Float32s()); diff != "" {
		t.Errorf("f32 through f16 storage (-want +got):\n%s", diff)
	}
	ids, err := d.Upload(tensor.FromInt32([]int{2}, []int32{70000, -1}))
	if err != nil {
		t.Fatal(err)
	}
	back, err := d.Download(ids)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]int32{70000, -1}, back.Int32s()); diff != "" {
		t.Errorf("i32 under f16 compute (-want +got):\n%s", diff)
	}
}
