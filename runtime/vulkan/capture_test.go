package vulkan

import (
	"slices"
	"testing"

	"github.com/tapml/tapml/artifact"
	"github.com/tapml/tapml/codegen/spirv"
	"github.com/tapml/tapml/frontend/arch"
	"github.com/tapml/tapml/frontend/arch/llama"
	"github.com/tapml/tapml/ir"
	"github.com/tapml/tapml/runtime"
	"github.com/tapml/tapml/tensor"
)

// TestCapturedDecode runs the same generation through two sessions on one
// device, one whose executor captures calls: the logits are bit for bit
// the same (the same kernels on the same data; only where intermediates
// live differs), the second decode step is recorded, and from the third
// on every step is replayed: no command buffer recorded, one submission,
// the same dispatches. Changing the kernels (SetTuning) makes the
// recording stale: the next step records again and stays right. The model
// runs as built and lowered as tapmlc run lowers it (fused decode kernels,
// rope_kv_write updating both caches in place).
func TestCapturedDecode(t *testing.T) {
	built, err := arch.Build("tiny", llama.Tiny, llama.RandomWeights(llama.Tiny, 3))
	if err != nil {
		t.Fatal(err)
	}
	lowered, err := artifact.Lower(built, "vulkan", spirv.Supports)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		m    *ir.Module
		dev  func() *Device
	}{
		{"shared", built, func() *Device { return testDev }},
		{"staging", built, func() *Device { return openTest(t, Options{ForceStaging: true, StagingBytes: 4096}) }},
		{"lowered", lowered, func() *Device { return testDev }},
	} {
		m := c.m
		t.Run(c.name, func(t *testing.T) {
			d := c.dev()
			plain := newSession(t, m, d)
			captured := newSession(t, m, d)
			captured.Exec.Capture = true
			prompt := []int{1, 72, 101, 108, 108}
			want, got := forward(t, plain, prompt), forward(t, captured, prompt)
			var stepDispatches int
			for step := 0; step < 8; step++ {
				if !slices.Equal(got, want) {
					t.Fatalf("step %d: captured logits differ from the plain session's", step)
				}
				tok := []int{argmax(want)}
				b0 := d.Stats()
				want = forward(t, plain, tok)
				b1 := d.Stats()
				got = forward(t, captured, tok)
				b2 := d.Stats()
				if step == 5 {
					d.SetTuning(d.Tuning()) // same kernels, but recordings are stale
				}
				rec, rep := b2.CallsRecorded-b1.CallsRecorded, b2.CallsReplayed-b1.CallsReplayed
				switch {
				case step == 1 || step == 6:
					if rec != 1 || rep != 0 {
						t.Errorf("decode step %d: %d calls recorded, %d replayed; want it recorded", step, rec, rep)
					}
				case step >= 2:
					if rec != 0 || rep != 1 || b2.Recorded != b1.Recorded || b2.Submits-b1.Submits != 1 {
						t.Errorf("decode step %d: %d calls recorded, %d replayed, %d command buffers recorded, %d submissions; "+
							"want one replay in one submission of a recorded command buffer", step, rec, rep, b2.Recorded-b1.Recorded, b2.Submits-b1.Submits)
					}
					if got, want := b2.Dispatches-b1.Dispatches, b1.Dispatches-b0.Dispatches; got != want {
						t.Errorf("decode step %d: %d dispatches replayed, the plain step ran %d", step, got, want)
					}
					stepDispatches = b2.Dispatches - b1.Dispatches
				}
			}
			t.Logf("%d dispatches per step; %+v", stepDispatches, d.Stats())
		})
	}
}

// TestCaptureNotReplayable: a capture that a copy or a submission
// interrupts cannot be replayed, and EndCapture says so by returning nil;
// buffers freed meanwhile are released, not leaked.
func TestCaptureNotReplayable(t *testing.T) {
	d := openTest(t, Options{ForceStaging: true})
	x := upload(t, d, seq(1, 4))
	n, outs := mkNode(t, 1, ir.OpExp, nil, f32(4))
	for _, interrupt := range []string{"write", "download"} {
		inUse := d.Stats().InUse
		if err := d.BeginCapture([]*runtime.Buffer{x}); err != nil {
			t.Fatal(err)
		}
		y := launch(t, d, n, outs, x)[0]
		switch interrupt {
		case "write":
			if err := d.Write(x, seq(2, 4)); err != nil {
				t.Fatal(err)
			}
		case "download":
			download(t, d, y)
		}
		d.Free(y)
		rec, err := d.EndCapture(nil)
		if err != nil || rec != nil {
			t.Errorf("%s during a capture: EndCapture gave %v, %v; want nil, nil", interrupt, rec, err)
		}
		if got := d.Stats().InUse; got != inUse {
			t.Errorf("%s during a capture: %d bytes in use after it, %d before", interrupt, got, inUse)
		}
	}
	// Writes outside captures land.
	if err := d.Write(x, tensor.FromFloat32([]int{4}, []float32{9, 8, 7, 6})); err != nil {
		t.Fatal(err)
	}
	if got := download(t, d, x).Float32s(); !slices.Equal(got, []float32{9, 8, 7, 6}) {
		t.Errorf("after Write: %v", got)
	}
	if err := d.Write(x, seq(0, 5)); err == nil {
		t.Error("a write of 5 elements into 4 succeeded")
	}
}
