package vulkan

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/tapml/tapml/ir"
	"github.com/tapml/tapml/runtime"
	"github.com/tapml/tapml/tensor"
)

// startDownload starts a download of b and fails the test on an error.
func startDownload(t *testing.T, d *Device, b *runtime.Buffer) func() (*tensor.Tensor, error) {
	t.Helper()
	wait, err := d.StartDownload(b)
	if err != nil {
		t.Fatal(err)
	}
	return wait
}

// waited calls wait and returns its data as f32s.
func waited(t *testing.T, wait func() (*tensor.Tensor, error)) []float32 {
	t.Helper()
	x, err := wait()
	if err != nil {
		t.Fatal(err)
	}
	return x.Float32s()
}

// TestStartDownload checks, with tensors in host-visible memory and with
// every transfer staged, that a download started before a write returns
// the data from before it; that its wait waits for its own submission
// only (a later one is still listed in flight, not retired: the serials
// say so, whatever the timing); and that its staging region survives
// transfers that fill the staging buffer several times over meanwhile.
func TestStartDownload(t *testing.T) {
	for _, c := range []struct {
		name string
		opts Options
	}{
		{"host memory", Options{StagingBytes: 4096}},
		{"staging", Options{ForceStaging: true, StagingBytes: 4096}},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := openTest(t, c.opts)
			first, second := seq(1, 8), seq(100, 8)
			x := upload(t, d, first)
			wait1 := startDownload(t, d, x)
			s1 := d.serial
			if err := d.Write(x, second); err != nil {
				t.Fatal(err)
			}
			wait2 := startDownload(t, d, x)
			if d.serial <= s1 {
				t.Fatalf("the second download submitted nothing (serial %d, first %d)", d.serial, s1)
			}
			if diff := cmp.Diff(first.Float32s(), waited(t, wait1)); diff != "" {
				t.Errorf("first download (-want +got):\n%s", diff)
			}
			if d.done != s1 || len(d.inflight) != 1 || d.inflight[0].serial != d.serial {
				t.Errorf("after the first wait: done %d (want %d), %d submissions listed in flight (want the second's, %d)", d.done, s1, len(d.inflight), d.serial)
			}
			// Fill the staging buffer (when staged) three times over.
			for range 3 {
				b := upload(t, d, seq(-7, 1024))
				if got := download(t, d, b); got.Float32s()[1023] != 1016 {
					t.Fatalf("download through the staging buffer: %v", got.Float32s()[1020:])
				}
				d.Free(b)
			}
			if diff := cmp.Diff(second.Float32s(), waited(t, wait2)); diff != "" {
				t.Errorf("second download, after the staging buffer was reused (-want +got):\n%s", diff)
			}
			for _, r := range d.staging.regions {
				if r.held {
					t.Errorf("staging region held after every download was waited for: %+v", r)
				}
			}
		})
	}
}

// TestStartDownloadLimits checks the edges: downloads held beyond the
// staging buffer's room fail with a message until one is waited for; a
// download too large to hold is read at once; a wait after Close fails.
func TestStartDownloadLimits(t *testing.T) {
	d := openTest(t, Options{ForceStaging: true, StagingBytes: 4096})
	quarter := upload(t, d, seq(0, 256)) // 1 KiB: the largest download held
	var waits []func() (*tensor.Tensor, error)
	for range 4 {
		waits = append(waits, startDownload(t, d, quarter))
	}
	if _, err := d.StartDownload(quarter); err == nil || !strings.Contains(err.Error(), "held by downloads") {
		t.Errorf("a fifth pending download of a quarter of the staging buffer: %v; want an error naming the held staging buffer", err)
	}
	for _, w := range waits {
		if got := waited(t, w); got[255] != 255 {
			t.Errorf("held download: %v", got[250:])
		}
	}
	big := upload(t, d, seq(0, 2048))
	w := startDownload(t, d, big)
	if got := waited(t, w); got[2047] != 2047 {
		t.Errorf("download larger than the staging buffer: %v", got[2040:])
	}
	pending := startDownload(t, d, quarter)
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := pending(); err == nil {
		t.Error("a wait after Close succeeded")
	}
}

// TestCopyBuffer checks that a copy is ordered between the writes around
// it and that mismatched or weight destinations are refused.
func TestCopyBuffer(t *testing.T) {
	d := openTest(t, Options{ForceStaging: true, StagingBytes: 4096})
	dst, src := upload(t, d, seq(0, 4)), upload(t, d, seq(10, 4))
	if err := d.CopyBuffer(dst, src); err != nil {
		t.Fatal(err)
	}
	if err := d.Write(src, seq(20, 4)); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(seq(10, 4).Float32s(), download(t, d, dst).Float32s()); diff != "" {
		t.Errorf("copied buffer (-want +got):\n%s", diff)
	}
	other := upload(t, d, tensor.New(ir.I32, []int{4}))
	w, err := d.UploadWeight("w", seq(0, 4))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name     string
		dst, src *runtime.Buffer
		want     string
	}{
		{"dtype", other, src, "copy of f32[4]"},
		{"weight", w, src, "a weight"},
	} {
		if err := d.CopyBuffer(c.dst, c.src); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v; want an error with %q", c.name, err, c.want)
		}
	}
}
