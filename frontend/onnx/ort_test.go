package onnx

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tapml/tapml/internal/testenv"
	"github.com/tapml/tapml/ir"
	"github.com/tapml/tapml/runtime"
	"github.com/tapml/tapml/tensor"
)

// ONNX Runtime 1.30.0 (onnxruntime-node), installed by scripts/setup.sh
// into tools/npm, is the external reference.

type ortTensor struct {
	Name  string `json:"name"`
	Shape []int  `json:"shape"`
	File  string `json:"file"`
}

type ortRun struct {
	Inputs, Outputs []ortTensor
	dir             string
}

func (r *ortRun) load(t testing.TB, x ortTensor) *tensor.Tensor {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(r.dir, x.File))
	if err != nil {
		t.Fatal(err)
	}
	out := tensor.New(ir.F32, x.Shape)
	if len(b) != len(out.Data) {
		t.Fatalf("%s: %d bytes for %v", x.File, len(b), x.Shape)
	}
	f := out.Float32s()
	for i := range f {
		f[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return out
}

// runORT runs scripts/ort_run.mjs on a model with seeded inputs of the
// given shapes; pattern "text" makes them pages of text-like marks.
func runORT(t testing.TB, model string, seed int, pattern string, shapes map[string][]int64) *ortRun {
	t.Helper()
	node := testenv.Tool(t, "node")
	testenv.Installed(t, "tools/npm/node_modules/onnxruntime-node")
	dir := t.TempDir()
	args := []string{filepath.Join(testenv.Root(t), "scripts", "ort_run.mjs"), model, dir, fmt.Sprint(seed)}
	for name, s := range shapes {
		dims := make([]string, len(s))
		for i, d := range s {
			dims[i] = fmt.Sprint(d)
		}
		spec := name + "=" + strings.Join(dims, ",")
		if pattern != "" {
			spec += ":" + pattern
		}
		args = append(args, spec)
	}
	out, err := exec.Command(node, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("ort_run.mjs: %v\n%s", err, out)
	}
	b, err := os.ReadFile(filepath.Join(dir, "manifest.json"))
	if err != nil {
		t.Fatal(err)
	}
	r := &ortRun{dir: dir}
	if err := json.Unmarshal(b, r); err != nil {
		t.Fatal(err)
	}
	return r
}

type ocrCase struct {
	file    string
	shape   []int64
	pattern string  // of the input: "" (uniform noise) or "text"
	abs     float64 // max |error| of the output probabilities
	logit   float64 // max |error| of their logits, ln(p/(1-p)), where 1e-4 < p < 1-1e-4 (0: not checked)
}

// logitDiff is the largest difference of ln(p/(1-p)) between want and got
// over the elements where want is in (1e-4, 1-1e-4): the error of a
// sigmoid's input. (Below 1e-4 it measures ONNX Runtime's sigmoid, a
// polynomial approximation with an absolute error near 1e-7.)
func logitDiff(want, got *tensor.Tensor) float64 {
	logit := func(p float64) float64 { return math.Log(p / (1 - p)) }
	m := 0.0
	for i := 0; i < want.NumElements(); i++ {
		w, g := want.Float64At(i), got.Float64At(i)
		if w > 1e-4 && w < 1-1e-4 {
			d := math.Abs(logit(w) - logit(g))
			if math.IsNaN(d) {
				d = math.Inf(1)
			}
			m = math.Max(m, d)
		}
	}
	return m
}

// TestPPOCR imports PP-OCRv4 det, rec and cls and compares their outputs on
// cpu and webgpu with ONNX Runtime's on the same seeded inputs: uniform
// noise in [-1, 1) for rec and cls, a page of text-like marks for det (on
// noise it finds nothing: every probability stays below 1e-3). All three
// output probabilities (det: a sigmoid per pixel; rec, cls: softmax); det's
// logits are compared too.
func TestPPOCR(t *testing.T) {
	cases := []ocrCase{
		{"ch_ppocr_mobile_v2.0_cls_infer.onnx", []int64{1, 3, 48, 192}, "", 1e-5, 0},
		{"ch_PP-OCRv4_rec_infer.onnx", []int64{1, 3, 48, 320}, "", 5e-5, 0},
		{"ch_PP-OCRv4_det_infer.onnx", []int64{1, 3, 256, 320}, "text", 1e-4, 1e-2},
	}
	for _, c := range cases {
		t.Run(strings.TrimSuffix(c.file, ".onnx"), func(t *testing.T) {
			path := ocrModel(t, c.file)
			start := time.Now()
			m, err := Load(path, Options{Shapes: map[string][]int64{"x": c.shape}})
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("import: %d nodes, %d weights, %v", len(m.Funcs[0].Nodes), len(m.Weights), time.Since(start).Round(time.Millisecond))
			ref := runORT(t, path, 7, c.pattern, map[string][]int64{"x": c.shape})
			in := ref.load(t, ref.Inputs[0])
			for _, dev := range []func(testing.TB) runtime.Device{func(testing.TB) runtime.Device { return cpuDev }, gpu} {
				d := dev(t)
				start := time.Now()
				got := run(t, m, d, in)
				el := time.Since(start)
				for k, o := range ref.Outputs {
					want := ref.load(t, o)
					if !sameShape(want, got[k]) {
						t.Fatalf("%s: output %d is %v, ONNX Runtime's %v", d.Name(), k, got[k].Shape, want.Shape)
					}
					abs, _ := diff(want, got[k])
					lg := logitDiff(want, got[k])
					t.Logf("%s (%v): output %s%v: max abs error %.3g, max logit error %.3g", d.Name(), el.Round(time.Millisecond), o.Name, o.Shape, abs, lg)
					if abs > c.abs || (c.logit > 0 && lg > c.logit) {
						t.Errorf("%s: output %s: errors %.3g (abs), %.3g (logit) exceed %g, %g", d.Name(), o.Name, abs, lg, c.abs, c.logit)
					}
				}
			}
		})
	}
}
