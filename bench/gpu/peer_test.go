package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/tapml/tapml/frontend/gguf"
	"github.com/tapml/tapml/runtime/llm"
	"github.com/tapml/tapml/runtime/vulkan"
)

var update = flag.Bool("update", false, "rewrite testdata/")

// llamabench's run lines become runs, in order; anything else is skipped.
func TestParseLlamaRuns(t *testing.T) {
	for _, tc := range []struct {
		name, out string
		want      []peerRun
	}{
		{"two runs", "......\nrun 1 prefill_tok_s 4267.0 decode_tok_s 205.0 decode_median_tok_s 155.4 tokens 11713,24354\n" +
			"run 2 prefill_tok_s 10292.2 decode_tok_s 468.4 decode_median_tok_s 475.0 tokens 11713,24354\n",
			[]peerRun{{PrefillTokS: 4267, DecodeTokS: 205}, {PrefillTokS: 10292.2, DecodeTokS: 468.4}}},
		{"no runs", "llamabench: llama.cpp cannot load x.gguf\n", nil},
		{"a cut line", "run 1 prefill_tok_s 12.5 decode_tok_s\n", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := parseLlamaRuns(strings.NewReader(tc.out))
			if diff := cmp.Diff(tc.want, got.Runs); diff != "" {
				t.Errorf("runs (-want +got):\n%s", diff)
			}
		})
	}
}

func FuzzParseLlamaRuns(f *testing.F) {
	f.Add("run 1 prefill_tok_s 4267.0 decode_tok_s 205.0 decode_median_tok_s 155.4 tokens 1,2\n")
	f.Add("run 9 prefill_tok_s 1e400 decode_tok_s 0.\n")
	f.Fuzz(func(t *testing.T, out string) {
		for _, r := range parseLlamaRuns(strings.NewReader(out)).Runs {
			if r.PrefillTokS < 0 || r.DecodeTokS < 0 {
				t.Errorf("a negative rate from %q", out)
			}
		}
	})
}

// Warm is the median prefill and decode rates of the runs after the
// first, with their ranges; cold the first.
func TestWarmCold(t *testing.T) {
	r := peerResult{Runs: []peerRun{{PrefillTokS: 1, DecodeTokS: 1}, {PrefillTokS: 5, DecodeTokS: 30}, {PrefillTokS: 6, DecodeTokS: 10}, {PrefillTokS: 7, DecodeTokS: 20}}}
	if c, ok := r.cold(); !ok || c.DecodeTokS != 1 {
		t.Errorf("cold %+v, %v; want the first run", c, ok)
	}
	med, lo, hi, ok := r.warm()
	if !ok || med.PrefillTokS != 6 || med.DecodeTokS != 20 || lo.PrefillTokS != 5 || hi.PrefillTokS != 7 || lo.DecodeTokS != 10 || hi.DecodeTokS != 30 {
		t.Errorf("warm %+v in %+v-%+v (%v); want the median prefill 6 (5-7) and decode 20 tok/s (10-30)", med, lo, hi, ok)
	}
	if _, _, _, ok := (peerResult{Runs: r.Runs[:1]}).warm(); ok {
		t.Error("one run has a warm figure")
	}
}

// The table of issue 16, from fixed figures: warm and cold rows per file,
// ratios to the peer, a failed target named under the table.
func TestPeerTable(t *testing.T) {
	tab := peerTable{Peer: "llama.cpp Vulkan", Targets: []string{"vulkan", "webgpu"}, Prefill: 128, Decode: 64, Date: "2026-12-03 10:00 UTC"}
	runs := func(rs ...peerRun) peerResult { return peerResult{Runs: rs} }
	tab.Rows = []peerRow{
		{File: "tinyllama-f32.gguf",
			Peer: runs(peerRun{PrefillTokS: 4267, DecodeTokS: 205}, peerRun{PrefillTokS: 10292.2, DecodeTokS: 468.4}, peerRun{PrefillTokS: 10100, DecodeTokS: 470}),
			Tapml: map[string]peerResult{
				"vulkan": runs(peerRun{Device: "vulkan:NVIDIA H200", PrefillTokS: 900, DecodeTokS: 200, CompileMS: 812.5}, peerRun{PrefillTokS: 5580, DecodeTokS: 283.3}, peerRun{PrefillTokS: 5554, DecodeTokS: 304}),
				"webgpu": {Err: "benchgpu tapml -target webgpu: exit status 1"},
			}},
	}
	var b bytes.Buffer
	tab.write(&b, true)
	golden := filepath.Join("testdata", "peer.md")
	if *update {
		os.WriteFile(golden, b.Bytes(), 0o644)
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(string(want), b.String()); diff != "" {
		t.Errorf("table (-want +got):\n%s", diff)
	}
}

// tapml's side runs here on lavapipe: a tiny GGUF file through the vulkan
// target as tapmlc run drives it, one JSON line per session, the first
// compiling kernels, the second finding them.
func TestMeasureTapml(t *testing.T) {
	file := filepath.Join(t.TempDir(), "tiny-q4_0.gguf")
	if err := gguf.WriteLlama(file, ggufShapes["tiny"], randomWeights(ggufShapes["tiny"]), gguf.GGMLQ4_0); err != nil {
		t.Fatal(err)
	}
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	var out bytes.Buffer
	if err := measureTapml(&out, "vulkan", file, 8, 4, 2, ""); err != nil {
		t.Fatal(err)
	}
	var runs []peerRun
	dec := json.NewDecoder(&out)
	for dec.More() {
		var r peerRun
		if err := dec.Decode(&r); err != nil {
			t.Fatal(err)
		}
		runs = append(runs, r)
	}
	if len(runs) != 2 {
		t.Fatalf("%d sessions reported, want 2:\n%s", len(runs), out.String())
	}
	for i, r := range runs {
		if r.PrefillTokS <= 0 || r.DecodeTokS <= 0 || !strings.HasPrefix(r.Device, "vulkan:") {
			t.Errorf("session %d: %+v", i, r)
		}
	}
	// A warm session makes only its argmax's kernel again (a new node).
	if runs[0].CompileMS <= 0 || runs[1].CompileMS > runs[0].CompileMS/10 {
		t.Errorf("kernel compilation %g ms cold, %g ms warm; want some, then next to none", runs[0].CompileMS, runs[1].CompileMS)
	}
	if err := measureTapml(&out, "vulkan", file, 0, 4, 2, ""); err == nil {
		t.Error("a prompt of 0 tokens was measured")
	}
	// vulkan/f16 is the vulkan target at f16 compute (lavapipe has f16);
	// webgpu computes in f32 only, which is an error here, not a
	// silently f32 row in an f16 column.
	out.Reset()
	if err := measureTapml(&out, "vulkan/f16", file, 8, 4, 1, ""); err != nil || !strings.Contains(out.String(), `"prefill_tok_s"`) {
		t.Errorf("vulkan/f16: %v\n%s", err, out.String())
	}
	if err := measureTapml(&out, "webgpu/f16", file, 8, 4, 1, ""); err == nil || !strings.Contains(err.Error(), "does not compute in f16") {
		t.Errorf("webgpu/f16: %v, want an error saying it does not compute in f16", err)
	}
}

// TestProfileFlags checks that profile refuses bad knobs before it opens a
// device or a model: each error names its flag.
func TestProfileFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		flag string
	}{
		{[]string{"-gemv", "GEMVBatch: x"}, "-gemv"},
		{[]string{"-gemv", "Rows: 4"}, "-gemv"},
		{[]string{"-mma", "64x64"}, "-mma"},
		{[]string{"-matmul", "7x7x7/1x1"}, "-matmul"},
		{[]string{"-target", "webgpu"}, "-target"},
	} {
		err := profileCmd(append([]string{"-model", "missing.gguf"}, c.args...))
		if err == nil || !strings.Contains(err.Error(), c.flag) {
			t.Errorf("profile %v: error %v, want one naming %s", c.args, err, c.flag)
		}
	}
}

// profile -vs on lavapipe: each tuning's prefill profiled, its logits
// checked against the first tuning's (two vec4 blockings agree to f32
// rounding).
func TestCompareTunings(t *testing.T) {
	file := filepath.Join(t.TempDir(), "tiny-f16.gguf")
	if err := gguf.WriteLlama(file, ggufShapes["tiny"], randomWeights(ggufShapes["tiny"]), gguf.GGMLF16); err != nil {
		t.Fatal(err)
	}
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	tm, err := openTapml("vulkan", file, 64)
	if err != nil {
		t.Fatal(err)
	}
	defer tm.close()
	d := tm.dev.(tunable)
	vs, err := parseVariants("; -matmul 32x32x16/4x4+p")
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := compareTunings(&out, file, tm, d, tm.dev.(profiler), d.Tuning(), vs, peerPrompt(16, tm.vocab), 1, 2); err != nil {
		t.Fatal(err)
	}
	base := regexp.MustCompile(`(?m)^\| \(base\) \|( [0-9.]+ \|){3} the reference \| matmul `)
	other := regexp.MustCompile(`(?m)^\| -matmul 32x32x16/4x4\+p \|( [0-9.]+ \|){3} [0-9.]+e[-+]\d\d \| matmul `)
	if !base.MatchString(out.String()) || !other.MatchString(out.String()) || strings.Contains(out.String(), "| WRONG") {
		t.Errorf("table:\n%s", out.String())
	}
}

// Logits that differ by a wrong kernel's error, or are not finite, are
// WRONG; reordered sums are not.
func TestCompareLogits(t *testing.T) {
	want := []float32{1, -4, 2, 0.5}
	for _, c := range []struct {
		got  []float32
		cell string
	}{
		{[]float32{1, -4, 2, 0.5}, "0.0e+00"},
		{[]float32{1, -4.00002, 2, 0.5}, "5.0e-06"},
		{[]float32{1, -4, 2, 2.5}, "WRONG 5.0e-01, another argmax"},
		{[]float32{1, -4, float32(math.NaN()), 0.5}, "WRONG +Inf, another argmax"},
		{[]float32{1, -4}, "WRONG: 2 logits, want 4"},
	} {
		if got := compareLogits(c.got, want); got != c.cell {
			t.Errorf("compareLogits(%v): %q, want %q", c.got, got, c.cell)
		}
	}
	// Against all-zero logits: equal ones agree, any others are WRONG.
	zero := []float32{0, 0}
	for _, c := range []struct {
		got  []float32
		cell string
	}{{[]float32{0, 0}, "0.0e+00"}, {[]float32{0, 1e-9}, "WRONG +Inf, another argmax"}} {
		if got := compareLogits(c.got, zero); got != c.cell {
			t.Errorf("compareLogits(%v): %q, want %q", c.got, got, c.cell)
		}
	}
}

// vulkan/webgpu runs the webgpu target's model and kernels on the vulkan
// device: without f16, subgroup operations or subgroup matrices, and with
// the webgpu target's own prompt logits (the same WGSL, translated by
// naga there and by codegen/spirv here; sums in the same order, so equal
// to f32 rounding: 1e-6 of their range).
func TestWebGPUKernels(t *testing.T) {
	file := filepath.Join(t.TempDir(), "tiny-q4_0.gguf")
	if err := gguf.WriteLlama(file, ggufShapes["tiny"], randomWeights(ggufShapes["tiny"]), gguf.GGMLQ4_0); err != nil {
		t.Fatal(err)
	}
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	var logits [2][]float32
	for i, tgt := range []string{webgpuKernels, "webgpu"} {
		tm, err := openTapml(tgt, file, 64)
		if err != nil {
			t.Fatalf("%s: %v", tgt, err)
		}
		if d, ok := tm.dev.(*vulkan.Device); ok {
			if f := d.Features(); f.F16 || f.Subgroups || f.SubgroupMatrix {
				t.Errorf("%s: features %+v, want none", tgt, f)
			}
		} else if i == 0 {
			t.Errorf("%s opened %s, not the vulkan device", tgt, tm.dev.Name())
		}
		s, err := llm.NewSession(tm.exec)
		if err != nil {
			t.Fatal(err)
		}
		logits[i], err = s.Forward(peerPrompt(16, tm.vocab))
		s.Close()
		tm.close()
		if err != nil {
			t.Fatalf("%s: %v", tgt, err)
		}
	}
	var rel float64
	cell := compareLogits(logits[0], logits[1])
	if _, err := fmt.Sscanf(cell, "%g", &rel); err != nil || rel > 1e-6 || strings.Contains(cell, "argmax") {
		t.Errorf("the logits of %s against webgpu's: %s", webgpuKernels, cell)
	}
	if _, err := openTapml(webgpuKernels+"/f16", file, 64); err == nil || !strings.Contains(err.Error(), "does not compute in f16") {
		t.Errorf("%s/f16: %v, want an error saying it does not compute in f16", webgpuKernels, err)
	}
}
