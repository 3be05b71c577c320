package onnx

import (
	"math/rand/v2"
	"path/filepath"
	"testing"
	"time"

	"github.com/tapml/tapml/carve"
	"github.com/tapml/tapml/ir"
	"github.com/tapml/tapml/runtime"
	"github.com/tapml/tapml/tensor"
)

// carveMain carves an imported model the way `tapmlc carve` would for a
// model of one function (@main, no prefill/decode): compile with probes,
// one recorded call on seeded inputs, the cases written as a bundle.
func carveMain(t *testing.T, m *ir.Module, dir string) *carve.Recording {
	t.Helper()
	pm, names, err := carve.Compile(m, nil, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	r := carve.NewRecorder(pm, 1, carve.Policy{}, true)
	defer r.Close()
	rng := rand.New(rand.NewPCG(1, 2))
	var args []*runtime.Buffer
	for _, p := range pm.Func("main").Params {
		x := tensor.New(p.Type.DType, p.Type.Shape.Sizes())
		for i := range x.NumElements() {
			x.SetFloat64At(i, 2*rng.Float64()-1)
		}
		b, err := r.Exec.Upload("", x)
		if err != nil {
			t.Fatal(err)
		}
		args = append(args, b)
	}
	if _, err := r.Call("main", args...); err != nil {
		t.Fatal(err)
	}
	rec := &carve.Recording{Module: pm, Cases: r.Cases(), Stats: r.Stats, Model: m.Name, Keep: r.Keep, Pipeline: names}
	if _, err := rec.Write(dir); err != nil {
		t.Fatal(err)
	}
	return rec
}

// TestCarveAndReplay carves mnist and PP-OCR cls, rec and det (a call of
// @main each) and replays every case on cpu and webgpu as `tapmlc test
// --tolerances testdata/conv_tolerances.yaml` does.
func TestCarveAndReplay(t *testing.T) {
	over, err := carve.LoadOverrides("testdata/conv_tolerances.yaml")
	if err != nil {
		t.Fatal(err)
	}
	models := []struct {
		path  string
		shape []int64
	}{
		{modelsDir + "mnist-8_cntk.onnx", nil},
		{ocrDir + "ch_ppocr_mobile_v2.0_cls_infer.onnx", []int64{1, 3, 48, 192}},
		{ocrDir + "ch_PP-OCRv4_rec_infer.onnx", []int64{1, 3, 48, 320}},
		{ocrDir + "ch_PP-OCRv4_det_infer.onnx", []int64{1, 3, 64, 96}},
	}
	for _, mc := range models {
		t.Run(filepath.Base(mc.path), func(t *testing.T) {
			opts := Options{}
			if mc.shape != nil {
				opts.Shapes = map[string][]int64{"x": mc.shape}
			}
			m, err := Load(mc.path, opts)
			if err != nil {
				t.Skip(err)
			}
			dir := filepath.Join(t.TempDir(), "bundle")
			rec := carveMain(t, m, dir)
			t.Logf("carved %d calls into %d cases: %s", rec.Stats.Calls, len(rec.Cases), carve.OpCounts(rec.Cases))
			b, err := carve.Open(dir)
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			for _, dev := range []func(testing.TB) runtime.Device{func(testing.TB) runtime.Device { return cpuDev }, gpu} {
				d := dev(t)
				start := time.Now()
				rep, err := b.Test(d, carve.TestOptions{Overrides: over})
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
