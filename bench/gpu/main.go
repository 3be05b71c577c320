// Command benchgpu measures tapml's WebGPU kernels and generated LLaMA
// models on a real GPU, to be set side by side with the native stack
// (PyTorch/cuBLAS and Hugging Face transformers, bench/gpu/native.py) run on
// the same GPU. bench/gpu/run.sh runs both and the table.
//
//	benchgpu run -out DIR -hf DIR [-quick] [-target vulkan] [-defaults]  # ours: DIR/ours.json, HF folders of the same weights
//	benchgpu table -ours F -native F [-smi F]                           # the table, markdown, on stdout
//	benchgpu gguf -shape tinyllama -type F16 -o F                        # a GGUF file of that shape, random weights
//	benchgpu peer -files A.gguf,B.gguf [-llamabench BIN -backends DIR]    # tapml's targets against llama.cpp: issue 16's table
//	benchgpu tapml -target vulkan -model F                                # one target, as tapmlc run drives it (peer runs it)
//	benchgpu profile -model F                                             # GPU time of a prefill and a decode step by command (vulkan)
//	benchgpu gemv -o F [-models tinyllama,llama1b|tiny] [-types F32,Q4_0]  # the decode GEMVs under each wgsl.GEMVVariants (vulkan)
//
// "run" measures f32 matmul GFLOP/s of every candidate kernel tuning
// (wgsl.MatmulTiles, GEMV unrolls), picks the best, then times prefill and
// decode of LLaMA models of TinyLlama-1.1B's and stories15M's shapes (random
// weights, f32) under a few tunings and submission batch sizes. It writes
// each model's weights as a Hugging Face folder (frontend/hf.WriteLlama) so
// that transformers loads exactly the same function, and the logits of the
// prompt's last token and the greedy tokens, for native.py to compare.
package main

import (
	"encoding/binary"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	goruntime "runtime"
	"runtime/pprof"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/tapml/tapml/codegen/spirv"
	"github.com/tapml/tapml/codegen/wgsl"
	"github.com/tapml/tapml/frontend/arch"
	"github.com/tapml/tapml/frontend/arch/llama"
	"github.com/tapml/tapml/frontend/hf"
	"github.com/tapml/tapml/ir"
	"github.com/tapml/tapml/passes"
	"github.com/tapml/tapml/runtime"
	"github.com/tapml/tapml/runtime/llm"
	"github.com/tapml/tapml/runtime/vulkan"
	"github.com/tapml/tapml/runtime/webgpu"
	"github.com/tapml/tapml/tensor"
	"github.com/tapml/tapml/tensor/quant"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: benchgpu run|table|gguf|peer|tapml|profile|gemv [flags]")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "run":
		err = runCmd(os.Args[2:])
	case "table":
		err = tableCmd(os.Args[2:])
	case "gguf":
		err = ggufCmd(os.Args[2:])
	case "peer":
		err = peerCmd(os.Args[2:])
	case "tapml":
		err = tapmlCmd(os.Args[2:])
	case "profile":
		err = profileCmd(os.Args[2:])
	case "gemv":
		err = gemvCmd(os.Args[2:])
	default:
		err = fmt.Errorf("unknown command %q (run, table, gguf, peer, tapml, profile, gemv)", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchgpu:", err)
		os.Exit(1)
	}
}

// MatmulShape is one product: [M, K] × [K, N], or × [N, K]ᵀ when T; b is
// stored in dtype B ("" for f32, else a storage dtype with T, such as
// "f16" or "q4_0", decoded by the kernel as it reads it).
type MatmulShape struct {
	Name    string `json:"name"`
	M, N, K int
	T       bool   `json:"transpose_b"`
	B       string `json:"b_dtype,omitempty"`
}

// Variant is one measurement of a kernel tuning.
type Variant struct {
	Tuning  string  `json:"tuning"`
	GFLOPS  float64 `json:"gflops,omitempty"`
	RelErr  float64 `json:"rel_err,omitempty"`
	Err     string  `json:"error,omitempty"`
	Seconds float64 `json:"seconds,omitempty"` // per product
}

// MatmulResult holds every variant of one shape.
type MatmulResult struct {
	Shape    MatmulShape `json:"shape"`
	Variants []Variant   `json:"variants"`
	Best     Variant     `json:"best"`
	Before   Variant     `json:"before"`  // the kernels before this tuning work (scalar tile, GEMV unroll 1)
	Default  Variant     `json:"default"` // the device's default tuning
}

// LLMRun is one measured session of a model under one configuration.
type LLMRun struct {
	Config        string  `json:"config"`
	PrefillTokS   float64 `json:"prefill_tok_s"`
	DecodeTokS    float64 `json:"decode_tok_s"` // tokens / total decode time
	DecodeMedTokS float64 `json:"decode_median_tok_s"`
	Err           string  `json:"error,omitempty"`
}

// LLMResult holds a model's runs and what the bound needs.
type LLMResult struct {
	Model         string   `json:"model"`
	Config        string   `json:"config"`
	HFDir         string   `json:"hf_dir"`
	Prompt        []int    `json:"prompt"`
	Decode        int      `json:"decode_steps"`
	Tokens        []int    `json:"greedy_tokens"` // greedy continuation (default config)
	LogitsFile    string   `json:"logits_file"`   // f32 little-endian logits of the prompt's last token
	WeightBytes   float64  `json:"weight_bytes_per_token"`
	KVBytes       float64  `json:"kv_bytes_per_token"` // at the mean decode position
	Runs          []LLMRun `json:"runs"`
	Best          LLMRun   `json:"best"`
	Before        LLMRun   `json:"before"`
	Default       LLMRun   `json:"default"`
	DefaultTuning string   `json:"default_tuning"`
}

// Ours is what "run" writes.
type Ours struct {
	Date     string         `json:"date"`
	Adapter  string         `json:"adapter"`
	Driver   string         `json:"driver"`
	Matmul   []MatmulResult `json:"matmul"`
	LLM      []LLMResult    `json:"llm"`
	Defaults string         `json:"device_defaults"`
}

// llmConfig is one configuration of the device for a model session.
type llmConfig struct {
	tu          wgsl.Tuning
	batch, ramp int
	wait        vulkan.WaitMode // how the vulkan device waits (WaitAuto: its default)
}

// apply sets the configuration on dev; false when dev cannot take it.
func (cf llmConfig) apply(dev gpuDevice) bool {
	w, ok := dev.(interface{ SetWait(vulkan.WaitMode) })
	if cf.wait != vulkan.WaitAuto && !ok {
		return false
	}
	dev.SetTuning(cf.tu)
	dev.SetMaxBatch(cf.batch)
	dev.SetBatchRamp(cf.ramp)
	if ok {
		w.SetWait(cf.wait)
	}
	return true
}

func (cf llmConfig) String() string {
	s := tuningString(cf.tu, cf.batch, cf.ramp)
	switch cf.wait {
	case vulkan.WaitBlock:
		s += " wait=block"
	case vulkan.WaitPoll:
		s += " wait=poll"
	}
	return s
}

func tuningString(t wgsl.Tuning, batch, ramp int) string {
	s := fmt.Sprintf("matmul=%s", orDash(t.Matmul))
	if strings.Contains(t.Matmul, ",") {
		s += fmt.Sprintf(" (first with >=%d groups)", t.MatmulMinGroups)
	}
	s += fmt.Sprintf(" gemv_unroll=%d", max(t.GEMVUnroll, 1))
	if t.GEMVMinGroups > 0 {
		s += fmt.Sprintf(" gemv_min_groups=%d", t.GEMVMinGroups)
	}
	if t.GEMVLanes > 0 {
		s += fmt.Sprintf(" lanes=%d", t.GEMVLanes)
	}
	if batch > 0 {
		s += fmt.Sprintf(" batch=%d", batch)
		if ramp > 0 {
			s += fmt.Sprintf(" ramp=%d", ramp)
		}
	}
	return s
}

func orDash(s string) string {
	if s == "" {
		return "scalar"
	}
	return s
}

func runCmd(args []string) error {
	fs := flag.NewFlagSet("run", flag.ExitOnError)
	out := fs.String("out", "bench-out", "folder for ours.json and logits")
	hfDir := fs.String("hf", "", "folder for the Hugging Face copies of the models (default: OUT/hf)")
	quick := fs.Bool("quick", false, "small shapes and models (a check on a CPU driver)")
	models := fs.String("models", "stories15M,tinyllama", "models: stories15M, tinyllama, tiny")
	prefill := fs.Int("prefill", 128, "prompt tokens")
	decode := fs.Int("decode", 64, "decode steps")
	cpuprofile := fs.String("cpuprofile", "", "write a CPU profile of one decode session of the last model (device defaults) here")
	targetName := fs.String("target", "webgpu", "the target whose kernels to measure: webgpu (WGSL) or vulkan (SPIR-V)")
	onlyDefaults := fs.Bool("defaults", false, "measure the device's default tuning only (no variants)")
	quantize := fs.String("quantize", "", "store the models' matrices as Q4_0, Q8_0, Q4_K or F16 (tapmlc's --quantize; the native side keeps f32, so its tokens may differ)")
	weights := fs.String("weights", "f16,q4_0", "storage dtypes of b the prefill products are also measured in (comma-separated: f16, q4_0, q8_0, q4_k, ...; empty for f32 only)")
	tileList := fs.String("tiles", "", "the tunings.Matmul values every M > 1 product is measured under, separated by ';' (each a blocking or a comma list of them; default: scalar and every wgsl.MatmulTiles)")
	minGroups := fs.Int("min-groups", 264, "MatmulMinGroups of the -tiles values that are lists")
	prefillOnly := fs.Bool("prefill-only", false, "measure TinyLlama's prefill products only (no other products, no models)")
	fs.Parse(args)
	stored, err := parseDTypes(*weights)
	if err != nil {
		return err
	}
	var q passes.Quantization
	if *quantize != "" {
		var err error
		if q, err = passes.ParseQuantization(*quantize); err != nil {
			return err
		}
	}
	if *hfDir == "" {
		*hfDir = filepath.Join(*out, "hf")
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		return err
	}
	dev, err := openTarget(*targetName)
	if err != nil {
		return err
	}
	defer dev.Close()
	res := &Ours{Date: time.Now().UTC().Format(time.RFC3339), Adapter: dev.Name(), Driver: driverOf(dev)}
	defaults := dev.Tuning()
	defBatch := dev.MaxBatch()
	defRamp := dev.BatchRamp()
	res.Defaults = tuningString(defaults, defBatch, defRamp)
	logf("device %s (%s), defaults %s", dev.Name(), res.Driver, res.Defaults)
	save := func() error {
		b, err := json.MarshalIndent(res, "", "  ")
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(*out, "ours.json"), b, 0o644)
	}

	// Matmul variants: every M > 1 product under every candidate tiling,
	// the GEMVs under their unrolls and lanes. TinyLlama's prefill
	// products (128 tokens) also with b stored as a weight file stores it.
	shapes := []MatmulShape{
		{"1024³", 1024, 1024, 1024, false, ""},
		{"4096³", 4096, 4096, 4096, false, ""},
		{"8192³", 8192, 8192, 8192, false, ""},
		{"decode GEMV 1x4096x4096ᵀ", 1, 4096, 4096, true, ""},
		{"prefill 128x4096x11008ᵀ", 128, 11008, 4096, true, ""},
		{"TinyLlama GEMV q/o 1x2048x2048ᵀ", 1, 2048, 2048, true, ""},
		{"TinyLlama GEMV w1/w3 1x5632x2048ᵀ", 1, 5632, 2048, true, ""},
		{"TinyLlama GEMV w2 1x2048x5632ᵀ", 1, 2048, 5632, true, ""},
		{"TinyLlama GEMV classifier 1x32000x2048ᵀ", 1, 32000, 2048, true, ""},
	}
	prefillShapes := []MatmulShape{
		{"TinyLlama q/o 128x2048x2048ᵀ", 128, 2048, 2048, true, ""},
		{"TinyLlama k/v 128x256x2048ᵀ", 128, 256, 2048, true, ""},
		{"TinyLlama w1/w3 128x5632x2048ᵀ", 128, 5632, 2048, true, ""},
		{"TinyLlama w2 128x2048x5632ᵀ", 128, 2048, 5632, true, ""},
	}
	if *quick {
		shapes = []MatmulShape{
			{"128³", 128, 128, 128, false, ""},
			{"decode GEMV 1x512x256ᵀ", 1, 512, 256, true, ""},
		}
		prefillShapes = []MatmulShape{
			{"prefill 32x256x512ᵀ", 32, 512, 256, true, ""},
			{"TinyLlama-ish 40x64x256ᵀ", 40, 64, 256, true, ""},
		}
	}
	if *prefillOnly {
		shapes, *models = nil, ""
	}
	shapes = append(shapes, prefillShapes...)
	for _, dt := range stored {
		for _, s := range prefillShapes {
			s.Name += " " + dt.String()
			s.B = dt.String()
			shapes = append(shapes, s)
		}
	}
	tiles := append([]string{"scalar"}, wgsl.MatmulTiles...)
	if *tileList != "" {
		tiles = strings.Split(*tileList, ";")
	}
	var tiled []wgsl.Tuning
	for _, t := range tiles {
		t = strings.TrimSpace(t)
		if err := wgsl.ValidMatmulTile(t); err != nil {
			return err
		}
		tu := wgsl.Tuning{Matmul: t}
		if strings.Contains(t, ",") {
			tu.MatmulMinGroups = *minGroups
		}
		tiled = append(tiled, tu)
	}
	tiled = append(tiled, defaults)
	gemv := []wgsl.Tuning{{GEMVUnroll: 1}, {GEMVUnroll: 2}, {GEMVUnroll: 4}, {GEMVLanes: 64, GEMVUnroll: 1}, {GEMVLanes: 64, GEMVUnroll: 2}, {GEMVLanes: 16, GEMVUnroll: 4}, defaults}
	if *onlyDefaults {
		tiled, gemv = []wgsl.Tuning{defaults}, []wgsl.Tuning{defaults}
	}
	for _, s := range shapes {
		vs := tiled
		if s.M == 1 {
			vs = gemv
		}
		r := MatmulResult{Shape: s}
		in, err := newMatmulInputs(dev, s)
		if err != nil {
			return fmt.Errorf("matmul %s: %w", s.Name, err)
		}
		for _, tu := range vs {
			var v Variant
			// A single blocking over the device's limits would measure
			// the scalar kernel under the blocking's name.
			if t := tu.Matmul; t != "" && t != "scalar" && !strings.Contains(t, ",") && !wgsl.MatmulTileFits(t, dev.Limits()) {
				v.Err = "over the device's workgroup limits"
			} else {
				dev.SetTuning(tu)
				v = measureMatmul(dev, s, in)
			}
			v.Tuning = tuningString(tu, 0, 0)
			if tu == defaults {
				v.Tuning = "defaults: " + v.Tuning
			}
			logf("matmul %s %s: %.0f GFLOP/s (rel err %.1e) %s", s.Name, v.Tuning, v.GFLOPS, v.RelErr, v.Err)
			r.Variants = append(r.Variants, v)
			if v.Err == "" && v.GFLOPS > r.Best.GFLOPS {
				r.Best = v
			}
		}
		in.free(dev)
		r.Before = r.Variants[0]
		r.Default = r.Variants[len(r.Variants)-1]
		logf("matmul %s: best %s, %.0f GFLOP/s (%.1f us); the defaults %.0f GFLOP/s", s.Name, r.Best.Tuning, r.Best.GFLOPS, r.Best.Seconds*1e6, r.Default.GFLOPS)
		res.Matmul = append(res.Matmul, r)
		if err := save(); err != nil {
			return err
		}
	}

	// Models.
	with := func(f func(t *wgsl.Tuning)) wgsl.Tuning { t := defaults; f(&t); return t }
	conf := func(tu wgsl.Tuning, batch, ramp int) llmConfig { return llmConfig{tu: tu, batch: batch, ramp: ramp} }
	waiting := func(w vulkan.WaitMode) llmConfig { return llmConfig{defaults, defBatch, defRamp, w} }
	configs := []llmConfig{
		conf(wgsl.Tuning{Matmul: "scalar", GEMVUnroll: 1}, 64, -1), // before
		conf(defaults, defBatch, defRamp),                          // the device's defaults
		conf(defaults, 32, defRamp),
		conf(defaults, 128, defRamp),
		conf(defaults, defBatch, -1),
		conf(defaults, 1<<20, -1), // one submission per step (vulkan replays it whole)
		conf(with(func(t *wgsl.Tuning) { t.GEMVMinGroups = 0 }), defBatch, defRamp),
		conf(with(func(t *wgsl.Tuning) { t.GEMVUnroll = 4 }), defBatch, defRamp),
		conf(with(func(t *wgsl.Tuning) { t.Matmul = "128x128x8/8x8+p,64x64x16/4x4+p" }), defBatch, defRamp),
		waiting(vulkan.WaitBlock),         // (vulkan only) the host waits in vkWaitForFences
		waiting(vulkan.WaitPoll),          // (vulkan only) or polls the fence
		conf(defaults, defBatch, defRamp), // again: the spread between two runs of one configuration
	}
	if *onlyDefaults {
		configs = []llmConfig{conf(defaults, defBatch, defRamp)}
	}
	names := strings.Split(*models, ",")
	for mi, name := range names {
		var c llama.Config
		switch strings.TrimSpace(name) {
		case "tinyllama":
			c = llama.TinyLlama
		case "stories15M":
			c = llama.Stories15M
		case "tiny":
			c = llama.Tiny
		case "":
			continue
		default:
			return fmt.Errorf("unknown model %q", name)
		}
		p, d := *prefill, *decode
		if *quick {
			p, d = min(p, 16), min(d, 8)
		}
		if p+d+4 > c.MaxSeq {
			return fmt.Errorf("%s: %d+%d tokens exceed the cache of %d", name, p, d, c.MaxSeq)
		}
		prof := ""
		if mi == len(names)-1 {
			prof = *cpuprofile
		}
		r, err := measureModel(dev, name, c, q.Weights, filepath.Join(*hfDir, name), *out, p, d, configs, prof)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		r.DefaultTuning = res.Defaults
		llmConfig{tu: defaults}.apply(dev) // the defaults again
		res.LLM = append(res.LLM, *r)
		if err := save(); err != nil {
			return err
		}
	}
	return save()
}

// gpuDevice is what the benchmark needs of a GPU target's device: the
// webgpu device (WGSL on wgpu) and the vulkan one (SPIR-V on Vulkan).
type gpuDevice interface {
	runtime.Device
	Limits() wgsl.Limits
	Tuning() wgsl.Tuning
	SetTuning(wgsl.Tuning)
	MaxBatch() int
	SetMaxBatch(int)
	BatchRamp() int
	SetBatchRamp(int)
}

// openTarget opens the device of a GPU target: webgpu or vulkan.
func openTarget(name string) (gpuDevice, error) {
	switch name {
	case "webgpu":
		return webgpu.Open(webgpu.Options{})
	case "vulkan":
		return vulkan.Open(vulkan.Options{Generate: spirv.Generate})
	}
	return nil, fmt.Errorf("unknown target %q (webgpu, vulkan)", name)
}

// driverOf describes the driver a device runs on.
func driverOf(dev gpuDevice) string {
	switch d := dev.(type) {
	case *webgpu.Device:
		return d.Adapter().DriverDescription
	case *vulkan.Device:
		in := d.Info()
		return fmt.Sprintf("%s, Vulkan %s, driver %#x, f16 %v, subgroups %v (size %d), subgroup matrices %v",
			in.Name, in.API, in.Driver, in.F16, in.Subgroups, in.SubgroupSize, in.SubgroupMatrix)
	}
	return ""
}

// startCPUProfile writes a CPU profile to path until stop is called.
func startCPUProfile(path string) (stop func(), err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}, nil
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
}

// parseDTypes parses -weights: storage dtypes b may have.
func parseDTypes(list string) ([]ir.DType, error) {
	var out []ir.DType
	for _, f := range strings.Split(list, ",") {
		if f = strings.ToLower(strings.TrimSpace(f)); f == "" {
			continue
		}
		dt, err := ir.ParseDType(f)
		if err != nil {
			return nil, fmt.Errorf("-weights: %w", err)
		}
		if dt != ir.F16 && !slices.Contains(quant.Encodes, dt) {
			return nil, fmt.Errorf("-weights: %s: only f16 and the block formats tensor/quant encodes (%v)", dt, quant.Encodes)
		}
		out = append(out, dt)
	}
	return out, nil
}

// bDType is the dtype b of shape s is stored in.
func (s MatmulShape) bDType() ir.DType {
	if s.B == "" {
		return ir.F32
	}
	dt, _ := ir.ParseDType(s.B) // made by the run from parseDTypes' names
	return dt
}

// matmulNode is a one-node matmul over inputs of the shape's types.
func matmulNode(s MatmulShape) (*ir.Node, []ir.Type, error) {
	at := ir.T(ir.F32, ir.S(int64(s.M), int64(s.K)))
	bt := ir.T(s.bDType(), ir.S(int64(s.K), int64(s.N)))
	if s.T {
		bt = ir.T(s.bDType(), ir.S(int64(s.N), int64(s.K)))
	}
	attrs := ir.Attrs{"transpose_b": ir.BoolAttr(s.T)}
	outs, na, err := ir.InferTypes(ir.OpMatmul, []ir.Type{at, bt}, attrs)
	if err != nil {
		return nil, nil, err
	}
	n := &ir.Node{ID: 1, Op: ir.OpMatmul, Attrs: na, Prov: "bench.matmul"}
	for i, t := range []ir.Type{at, bt} {
		n.Inputs = append(n.Inputs, &ir.Value{Name: fmt.Sprintf("x%d", i), Type: t})
	}
	n.Outputs = []*ir.Value{{Name: "y", Type: outs[0], Def: n}}
	return n, outs, nil
}

func randTensor(r *rand.Rand, shape ...int) *tensor.Tensor {
	n := 1
	for _, d := range shape {
		n *= d
	}
	data := make([]float32, n)
	for i := range data {
		data[i] = float32(2*r.Float64() - 1)
	}
	return tensor.FromFloat32(shape, data)
}

// matmulInputs are a shape's random operands, on the host and the device.
type matmulInputs struct {
	a, b   *tensor.Tensor
	ab, bb *runtime.Buffer
}

func newMatmulInputs(dev gpuDevice, s MatmulShape) (*matmulInputs, error) {
	r := rand.New(rand.NewPCG(uint64(s.M*31+s.N), uint64(s.K)))
	in := &matmulInputs{a: randTensor(r, s.M, s.K)}
	bShape := []int{s.K, s.N}
	if s.T {
		bShape = []int{s.N, s.K}
	}
	in.b = randTensor(r, bShape...)
	up := in.b
	if dt := s.bDType(); dt != ir.F32 {
		// b as a weight file stores it; the check multiplies by what
		// it decodes to.
		var err error
		if up, err = storedAs(in.b, dt); err != nil {
			return nil, err
		}
		in.b = up.Convert(ir.F32)
	}
	var err error
	if in.ab, err = dev.Upload(in.a); err != nil {
		return nil, err
	}
	if in.bb, err = dev.Upload(up); err != nil {
		dev.Free(in.ab)
		return nil, err
	}
	return in, nil
}

// storedAs encodes f32 t in storage dtype dt: f16, or a block format as
// ggml's reference quantizers do.
func storedAs(t *tensor.Tensor, dt ir.DType) (*tensor.Tensor, error) {
	if !dt.IsBlock() {
		return t.Convert(dt), nil
	}
	raw, err := quant.Quantize(dt, t.Float32s())
	if err != nil {
		return nil, err
	}
	return tensor.FromBytes(dt, t.Shape, raw)
}

func (in *matmulInputs) free(dev gpuDevice) {
	dev.Free(in.ab)
	dev.Free(in.bb)
}

// measureMatmul checks the product on 256 sampled outputs against float64
// and times it: launches batched (as a model records them), the clock
// stopped after the device drains; the median of three batches.
func measureMatmul(dev gpuDevice, s MatmulShape, in *matmulInputs) (v Variant) {
	fail := func(err error) Variant { v.Err = err.Error(); return v }
	r := rand.New(rand.NewPCG(7, uint64(s.K)))
	a, b, ab, bb := in.a, in.b, in.ab, in.bb
	n, outs, err := matmulNode(s)
	if err != nil {
		return fail(err)
	}
	launch := func() error {
		res, err := dev.Launch(n, []*runtime.Buffer{ab, bb}, outs)
		if err != nil {
			return err
		}
		dev.Free(res[0])
		return nil
	}
	// Check (and compile).
	res, err := dev.Launch(n, []*runtime.Buffer{ab, bb}, outs)
	if err != nil {
		return fail(err)
	}
	got, err := dev.Download(res[0])
	dev.Free(res[0])
	if err != nil {
		return fail(err)
	}
	y := got.Float32s()
	av, bv := a.Float32s(), b.Float32s()
	var num, den float64
	for i := 0; i < 256; i++ {
		m, j := r.IntN(s.M), r.IntN(s.N)
		var ref float64
		for k := 0; k < s.K; k++ {
			bk := float64(bv[k*s.N+j])
			if s.T {
				bk = float64(bv[j*s.K+k])
			}
			ref += float64(av[m*s.K+k]) * bk
		}
		d := float64(y[m*s.N+j]) - ref
		num += d * d
		den += ref * ref
	}
	v.RelErr = math.Sqrt(num / den)
	if !(v.RelErr < 1e-4) {
		return fail(fmt.Errorf("wrong result: relative error %.3g", v.RelErr))
	}
	// Calibrate, then three batches of about 0.1 s.
	time.Sleep(0)
	start := time.Now()
	for i := 0; i < 3; i++ {
		if err := launch(); err != nil {
			return fail(err)
		}
	}
	if err := dev.Sync(); err != nil {
		return fail(err)
	}
	per := time.Since(start).Seconds() / 3
	reps := int(math.Max(1, math.Min(2000, 0.1/per)))
	var times []float64
	for b := 0; b < 3; b++ {
		start := time.Now()
		for i := 0; i < reps; i++ {
			if err := launch(); err != nil {
				return fail(err)
			}
		}
		if err := dev.Sync(); err != nil {
			return fail(err)
		}
		times = append(times, time.Since(start).Seconds()/float64(reps))
	}
	sort.Float64s(times)
	v.Seconds = times[1]
	v.GFLOPS = 2 * float64(s.M) * float64(s.N) * float64(s.K) / v.Seconds / 1e9
	return v
}

// measureModel builds a model of shape c with random weights, writes it as
// a Hugging Face folder, and times sessions under each configuration.
func measureModel(dev gpuDevice, name string, c llama.Config, quantize ir.DType, hfDir, out string, p, d int, configs []llmConfig, cpuprofile string) (*LLMResult, error) {
	logf("%s: building (random weights)", name)
	weights := randomWeights(c)
	m, err := arch.Build(name, c, weights)
	if err != nil {
		return nil, err
	}
	if quantize != ir.Invalid {
		st, err := passes.Quantize(m, quantize)
		if err != nil {
			return nil, err
		}
		logf("%s: %d matrices quantized to %s, %.0f MB -> %.0f MB", name, st.Weights, quantize, float64(st.BytesBefore)/1e6, float64(st.BytesAfter)/1e6)
	}
	logf("%s: writing the Hugging Face folder %s", name, hfDir)
	if err := os.MkdirAll(hfDir, 0o755); err != nil {
		return nil, err
	}
	if err := hf.WriteLlama(hfDir, c, weights, hf.WriteOptions{BOS: -1, EOS: -1}); err != nil {
		return nil, err
	}
	r := &LLMResult{Model: name, Config: m.Meta["config"], HFDir: hfDir, Decode: d}
	for i := 0; i < p; i++ {
		r.Prompt = append(r.Prompt, (i*7919+13)%c.Vocab)
	}
	// Bytes a decode step reads: every weight but the embedding table (one
	// row), the classifier in full (tied or not), and the KV cache up to
	// the mean position.
	var wb float64
	for _, w := range m.Weights {
		n := float64(w.Type.Bytes()) // in its storage dtype
		if w.Name == "tok_embeddings" {
			if c.TiedEmbeddings {
				wb += n
			}
			wb += n / float64(c.Vocab)
			continue
		}
		wb += n
	}
	r.WeightBytes = wb
	r.KVBytes = 2 * float64(c.Layers) * (float64(p) + float64(d)/2) * float64(c.KVHeads*c.HeadDim()) * 4
	exec := runtime.NewExecutor(m, dev)
	defer exec.Close()
	logf("%s: uploading weights", name)
	if err := exec.Prepare("decode"); err != nil {
		return nil, err
	}
	for ci, cf := range configs {
		if !cf.apply(dev) {
			continue
		}
		run := LLMRun{Config: cf.String()}
		if _, err := session(exec, r.Prompt[:p], 2, nil); err != nil { // warm-up: kernels
			run.Err = err.Error()
		} else {
			var st stats
			toks, err := session(exec, r.Prompt[:p], d, &st)
			if err != nil {
				run.Err = err.Error()
			} else {
				run.PrefillTokS = float64(p) / st.prefill
				run.DecodeTokS = float64(d) / st.decodeTotal
				run.DecodeMedTokS = 1 / st.decodeMedian
				if ci == 1 { // the device's defaults: the tokens native.py compares
					r.Tokens = toks
					r.LogitsFile = name + ".logits.f32"
					if err := os.WriteFile(filepath.Join(out, r.LogitsFile), f32Bytes(st.logits), 0o644); err != nil {
						return nil, err
					}
				}
			}
		}
		logf("%s %s: prefill %.1f tok/s, decode %.1f tok/s (median step %.1f) %s", name, run.Config, run.PrefillTokS, run.DecodeTokS, run.DecodeMedTokS, run.Err)
		r.Runs = append(r.Runs, run)
		if ci == 1 {
			r.Default = run
		}
		if ci == 0 {
			r.Before = run
		} else if run.Err == "" && run.DecodeTokS > r.Best.DecodeTokS {
			r.Best = run
		}
	}
	if cpuprofile != "" {
		configs[1].apply(dev)
		stop, err := startCPUProfile(cpuprofile)
		if err != nil {
			return nil, err
		}
		var st stats
		_, err = session(exec, r.Prompt[:p], 4*d, &st)
		stop()
		if err != nil {
			return nil, err
		}
		logf("%s: profiled session, decode %.1f tok/s", name, float64(4*d)/st.decodeTotal)
	}
	return r, nil
}

// randomWeights is llama.RandomWeights' distribution (linear and embedding
// weights uniform in ±1/√in, norm weights 1), drawn in parallel: a PCG
// stream per tensor and chunk, so the same on every run. (1.1B draws take
// half a minute on one core.)
func randomWeights(c llama.Config) map[string]ir.WeightSource {
	out := map[string]ir.WeightSource{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, goruntime.NumCPU())
	const chunk = 1 << 22
	for ti, ns := range c.WeightShapes() {
		n := 1
		for _, d := range ns.Shape {
			n *= d
		}
		buf := make([]byte, 4*n)
		mu.Lock()
		out[ns.Name] = ir.BytesSource(buf)
		mu.Unlock()
		bound := 1 / math.Sqrt(float64(ns.Shape[len(ns.Shape)-1]))
		for lo := 0; lo < n; lo += chunk {
			wg.Add(1)
			sem <- struct{}{}
			go func(ti, lo, hi int) {
				defer wg.Done()
				defer func() { <-sem }()
				r := rand.New(rand.NewPCG(uint64(ti), uint64(lo)))
				for i := lo; i < hi; i++ {
					v := float32(1)
					if len(ns.Shape) > 1 {
						v = float32((2*r.Float64() - 1) * bound)
					}
					binary.LittleEndian.PutUint32(buf[4*i:], math.Float32bits(v))
				}
			}(ti, lo, min(lo+chunk, n))
		}
	}
	wg.Wait()
	return out
}

type stats struct {
	prefill, decodeTotal, decodeMedian float64
	logits                             []float32
}

// session runs a prompt and n greedy decode steps, returning the tokens.
func session(exec *runtime.Executor, prompt []int, n int, st *stats) ([]int, error) {
	s, err := llm.NewSession(exec)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	start := time.Now()
	logits, err := s.Forward(prompt)
	if err != nil {
		return nil, err
	}
	pre := time.Since(start).Seconds()
	first := append([]float32(nil), logits...)
	var toks []int
	var steps []float64
	dstart := time.Now()
	for i := 0; i < n; i++ {
		t := llm.Argmax(logits)
		toks = append(toks, t)
		t0 := time.Now()
		if logits, err = s.Forward([]int{t}); err != nil {
			return nil, err
		}
		steps = append(steps, time.Since(t0).Seconds())
	}
	total := time.Since(dstart).Seconds()
	if st != nil {
		sort.Float64s(steps)
		*st = stats{prefill: pre, decodeTotal: total, logits: first}
		if len(steps) > 0 {
			st.decodeMedian = steps[len(steps)/2]
		}
	}
	return toks, nil
}

func f32Bytes(x []float32) []byte {
	b := make([]byte, 4*len(x))
	for i, v := range x {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
	}
	return b
}
