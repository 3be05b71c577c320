package vulkan

import (
	"bytes"
	"testing"

	"github.com/tapml/tapml/tensor"
)

// TestClearFreed checks that a range freed by one tensor and handed out
// again after ClearFreed holds zeroes, not the tensor's bytes, on
// host-visible memory and through the staging buffer (a discrete GPU's
// path), and that a live tensor keeps its data.
func TestClearFreed(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts Options
	}{{"host memory", Options{}}, {"staging", Options{ForceStaging: true, StagingBytes: 1 << 10}}} {
		t.Run(tc.name, func(t *testing.T) {
			d := openTest(t, tc.opts)
			vals := make([]float32, 3000) // more than one staging chunk
			for i := range vals {
				vals[i] = float32(i + 1)
			}
			src := tensor.FromFloat32([]int{len(vals)}, vals)
			keep, err := d.Upload(tensor.FromFloat32([]int{2}, []float32{7, 8}))
			if err != nil {
				t.Fatal(err)
			}
			old, err := d.Upload(src)
			if err != nil {
				t.Fatal(err)
			}
			d.Free(old)
			if err := d.ClearFreed(); err != nil {
				t.Fatal(err)
			}
			d.mu.Lock()
			g, fresh, err := d.alloc(uint64(len(src.Data)), false) // first fit: the freed range
			var got []byte
			if err == nil {
				got = make([]byte, len(src.Data))
				err = d.read(g, got)
				d.release(g)
			}
			d.mu.Unlock()
			if err != nil {
				t.Fatal(err)
			}
			if fresh {
				t.Fatal("the allocation after the free got a new range, not the freed one")
			}
			if !bytes.Equal(got, make([]byte, len(got))) {
				t.Errorf("a freed range holds nonzero bytes after ClearFreed")
			}
			back, err := d.Download(keep)
			if err != nil {
				t.Fatal(err)
			}
			if v := back.Float32s(); v[0] != 7 || v[1] != 8 {
				t.Errorf("a live tensor holds %v after ClearFreed, want [7 8]", v)
			}
		})
	}
}
