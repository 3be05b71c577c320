package onnx

import (
	"bytes"
	"path/filepath"
	"testing"
	"time"

	"github.com/tapml/tapml/carve"
	"github.com/tapml/tapml/internal/testenv"
	"github.com/tapml/tapml/ir"
	"github.com/tapml/tapml/runtime"
)

// TestCarveAndReplay carves mnist and PP-OCR cls, rec and det (one call of
// @main each, on seeded inputs: uniform noise, a page of text marks for
// det) through carve.CarveCalls, as `tapmlc carve` does, and replays every
// case on cpu and webgpu under the bundle's own tolerances (the policy's
// reduction lengths of conv2d, conv_transpose2d, pool2d, reduce_* and
// resize; no overrides).
func TestCarveAndReplay(t *testing.T) {
	models := []struct {
		path    string
		shape   []int64
		pattern string
	}{
		{testenv.Model(t, "mnist-8_cntk.onnx"), nil, ""},
		{ocrModel(t, "ch_ppocr_mobile_v2.0_cls_infer.onnx"), []int64{1, 3, 48, 192}, ""},
		{ocrModel(t, "ch_PP-OCRv4_rec_infer.onnx"), []int64{1, 3, 48, 320}, ""},
		{ocrModel(t, "ch_PP-OCRv4_det_infer.onnx"), []int64{1, 3, 96, 128}, carve.PatternText},
	}
	for _, mc := range models {
		t.Run(filepath.Base(mc.path), func(t *testing.T) {
			opts := Options{}
			if mc.shape != nil {
				opts.Shapes = map[string][]int64{"x": mc.shape}
			}
			m, err := Load(mc.path, opts)
			if err != nil {
				t.Fatal(err)
			}
			dir := filepath.Join(t.TempDir(), "bundle")
			co := carve.CallOptions{Seed: 7}
			if mc.pattern != "" {
				co.Inputs = map[string]carve.Input{"x": {Pattern: mc.pattern}}
			}
			rec, err := carve.CarveCalls(m, co)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := rec.Write(dir); err != nil {
				t.Fatal(err)
			}
			t.Logf("carved %d calls into %d cases: %s", rec.Stats.Calls, len(rec.Cases), carve.OpCounts(rec.Cases))
			b, err := carve.Open(dir)
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			if len(b.Manifest.Inputs) != 1 || b.Manifest.Seed != 7 {
				t.Errorf("manifest inputs %+v, seed %d", b.Manifest.Inputs, b.Manifest.Seed)
			}
			for _, dev := range []func(testing.TB) runtime.Device{func(testing.TB) runtime.Device { return cpuDev }, gpu} {
				d := dev(t)
				start := time.Now()
				rep, err := b.Test(d, carve.TestOptions{})
				if err != nil {
					t.Fatal(err)
				}
				t.Logf("%s: %s (%v)", d.Name(), rep.Summary(), time.Since(start).Round(time.Millisecond))
				for _, f := range rep.Failures() {
					t.Errorf("%s: case %s: %s %+v (tolerance %+v)", d.Name(), f.Case, f.Err, f.Metrics, f.Tolerance)
				}
			}
		})
	}
}

// carve.Rand gives the inputs scripts/ort_run.mjs gives ONNX Runtime for
// the same seed: uniform noise and the text page, bit for bit.
func TestRandMatchesORTRun(t *testing.T) {
	path := ocrModel(t, "ch_ppocr_mobile_v2.0_cls_infer.onnx")
	shape := []int64{1, 3, 48, 192}
	for _, pattern := range []string{"", carve.PatternText} {
		ref := runORT(t, path, 11, pattern, map[string][]int64{"x": shape})
		want := ref.load(t, ref.Inputs[0])
		got, err := carve.NewRand(11).Tensor(ir.T(ir.F32, ir.S(shape...)), pattern)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got.Data, want.Data) {
			t.Errorf("pattern %q: carve.Rand differs from ort_run.mjs", pattern)
		}
	}
}
