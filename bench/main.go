// Command bench measures tapml's targets side by side in one run and prints
// a table: prefill and decode tokens/s of LLaMA models, and the GFLOP/s of
// the matmul kernel. Ratios are against the CPU reference measured in the
// same run; absolute numbers on shared machines are noisy. A model runs as
// tapmlc run runs it (lowered by the default pipeline, decode steps
// replayed, greedy argmax on the device): cold is the first generation of
// the process (kernels compiled during it), warm the second.
//
//	go run ./bench [-targets cpu,webgpu] [-models stories260K,stories15M] [-matmul 512,1024,4096]
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	goruntime "runtime"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/tapml/tapml/frontend"
	"github.com/tapml/tapml/frontend/arch"
	"github.com/tapml/tapml/frontend/arch/llama"
	"github.com/tapml/tapml/ir"
	"github.com/tapml/tapml/runtime"
	"github.com/tapml/tapml/runtime/llm"
	"github.com/tapml/tapml/runtime/target"
	"github.com/tapml/tapml/tensor"
)

func main() {
	targets := flag.String("targets", "cpu,webgpu", "targets to measure, comma-separated")
	models := flag.String("models", "stories260K,stories15M", "models: stories260K (../shared/models), stories15M (generated, random weights), tiny, or a model file")
	prefill := flag.Int("prefill", 32, "prompt tokens per prefill")
	decode := flag.Int("decode", 32, "decode steps")
	matmul := flag.String("matmul", "512,1024,4096", "square matmul sizes to time (empty: none)")
	backend := flag.String("backend", "vulkan", "webgpu backend")
	flag.Parse()
	if err := run(split(*targets), split(*models), *prefill, *decode, split(*matmul), *backend); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func split(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

func run(targets, models []string, prefill, decode int, sizes []string, backend string) error {
	// Each device is opened once: some drivers dislike a second instance in
	// one process.
	devices := map[string]runtime.Device{}
	for _, t := range targets {
		dev, err := target.Open(t, backend)
		if err != nil {
			return err
		}
		defer dev.Close()
		devices[t] = dev
	}
	fmt.Printf("tapml bench %s, %s/%s, %d CPUs\n\n", time.Now().Format("2006-01-02 15:04"), goruntime.GOOS, goruntime.GOARCH, goruntime.NumCPU())
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "model\ttarget\tdevice\tprefill tok/s\tdecode tok/s\tcold prefill\tcold decode\tdecode vs cpu\t")
	for _, name := range models {
		m, err := loadModel(name)
		if err != nil {
			return err
		}
		// Every target first, so that the ratios do not depend on where
		// cpu is in the list.
		warm, cold := make([]llm.Stats, len(targets)), make([]llm.Stats, len(targets))
		var cpuDecode float64
		for i, t := range targets {
			var err error
			cold[i], warm[i], err = measureLLM(m, t, devices[t], prefill, decode)
			if err != nil {
				return fmt.Errorf("%s on %s: %w", name, t, err)
			}
			if t == "cpu" {
				cpuDecode = decodeRate(warm[i])
			}
			fmt.Fprintf(os.Stderr, "bench: %s on %s done\n", name, t)
		}
		for i, t := range targets {
			ratio := "-"
			if cpuDecode > 0 {
				ratio = fmt.Sprintf("%.2fx", decodeRate(warm[i])/cpuDecode)
			}
			fmt.Fprintf(w, "%s\t%s\t%s\t%.1f\t%.1f\t%.1f\t%.1f\t%s\t\n", name, t, devices[t].Name(),
				prefillRate(warm[i]), decodeRate(warm[i]), prefillRate(cold[i]), decodeRate(cold[i]), ratio)
		}
	}
	if len(sizes) == 0 {
		return w.Flush()
	}
	fmt.Fprintln(w, "\t\t\t\t\t\t")
	fmt.Fprintln(w, "matmul\ttarget\tGFLOP/s\tvs cpu\t")
	for _, s := range sizes {
		n, err := strconv.Atoi(s)
		if err != nil || n <= 0 {
			return fmt.Errorf("bad matmul size %q", s)
		}
		rates := make([]float64, len(targets))
		var cpuRate float64
		for i, t := range targets {
			rate, err := measureMatmul(devices[t], n)
			if err != nil {
				return fmt.Errorf("matmul %d on %s: %w", n, t, err)
			}
			rates[i] = rate
			if t == "cpu" {
				cpuRate = rate
			}
			fmt.Fprintf(os.Stderr, "bench: matmul %d on %s done\n", n, t)
		}
		for i, t := range targets {
			ratio := "-"
			if cpuRate > 0 {
				ratio = fmt.Sprintf("%.2fx", rates[i]/cpuRate)
			}
			fmt.Fprintf(w, "%dx%dx%d\t%s\t%.2f\t%s\t\n", n, n, n, t, rates[i], ratio)
		}
	}
	return w.Flush()
}

func loadModel(name string) (*ir.Module, error) {
	switch name {
	case "tiny":
		m, err := frontend.BuiltinTiny()
		if err != nil {
			return nil, err
		}
		return m.Module, nil
	case "stories15M":
		return arch.Build("stories15M-shape", llama.Stories15M, llama.RandomWeights(llama.Stories15M, 1))
	case "stories260K":
		name = filepath.Join(sharedModels(), "stories260K.bin")
	}
	m, err := frontend.Load(name, frontend.Options{})
	if err != nil {
		return nil, err
	}
	return m.Module, nil
}

// sharedModels finds ../shared/models above the working directory.
func sharedModels() string {
	dir, _ := os.Getwd()
	for d := dir; ; d = filepath.Dir(d) {
		p := filepath.Join(d, "..", "shared", "models")
		if _, err := os.Stat(p); err == nil {
			return p
		}
		if filepath.Dir(d) == d {
			return filepath.Join("..", "shared", "models")
		}
	}
}

// measureLLM runs two generations of a prompt of prefill tokens and decode
// greedy steps on target's device, as tapmlc run does: the first (cold)
// compiles the kernels, the second (warm) finds them.
func measureLLM(m *ir.Module, tgt string, dev runtime.Device, prefill, decode int) (cold, warm llm.Stats, err error) {
	lowered, _, err := target.ForDevice(m.Clone(), dev, tgt, false) // a clone: m serves every target
	if err != nil {
		return cold, warm, err
	}
	exec := runtime.NewExecutor(lowered, dev)
	exec.Capture = true
	defer exec.Close()
	if err := exec.UploadWeights("prefill", "decode"); err != nil {
		return cold, warm, err
	}
	if cold, err = generate(exec, prefill, decode); err != nil {
		return cold, warm, err
	}
	warm, err = generate(exec, prefill, decode)
	return cold, warm, err
}

// generate feeds a prompt of n tokens and steps greedy decode steps.
func generate(exec *runtime.Executor, n, steps int) (llm.Stats, error) {
	s, err := llm.NewSession(exec)
	if err != nil {
		return llm.Stats{}, err
	}
	defer s.Close()
	prompt := make([]int, n)
	for i := range prompt {
		prompt[i] = 1 + i%7
	}
	_, err = s.Continue(prompt, steps, llm.NewSampler(0, 0, 1))
	return s.Stats, err
}

func prefillRate(st llm.Stats) float64 { return llm.TokensPerSecond(st.PromptTokens, st.PromptTime) }
func decodeRate(st llm.Stats) float64  { return llm.TokensPerSecond(st.DecodeTokens, st.DecodeTime) }

// measureMatmul times an n×n×n f32 matmul node on dev (after a warm-up)
// and returns GFLOP/s.
func measureMatmul(dev runtime.Device, n int) (float64, error) {
	mod := ir.NewModule("matmul")
	b := ir.NewFunction(mod, "mm")
	x := b.Param("a", ir.T(ir.F32, ir.S(int64(n), int64(n))))
	y := b.Param("b", ir.T(ir.F32, ir.S(int64(n), int64(n))))
	b.Return(b.Op(ir.OpMatmul, []*ir.Value{x, y}, nil))
	if err := b.Err(); err != nil {
		return 0, err
	}
	exec := runtime.NewExecutor(mod, dev)
	defer exec.Close()
	data := make([]float32, n*n)
	for i := range data {
		data[i] = float32(i%17) / 17
	}
	a, err := dev.Upload(tensor.FromFloat32([]int{n, n}, data))
	if err != nil {
		return 0, err
	}
	c, err := dev.Upload(tensor.FromFloat32([]int{n, n}, data))
	if err != nil {
		return 0, err
	}
	defer dev.Free(a)
	defer dev.Free(c)
	call := func() error {
		out, err := exec.Call("mm", a, c)
		if err != nil {
			return err
		}
		if err := dev.Sync(); err != nil {
			return err
		}
		dev.Free(out[0])
		return nil
	}
	if err := call(); err != nil { // warm-up: compile
		return 0, err
	}
	reps, start := 0, time.Now()
	for reps == 0 || (time.Since(start) < 2*time.Second && reps < 50) {
		if err := call(); err != nil {
			return 0, err
		}
		reps++
	}
	secs := time.Since(start).Seconds() / float64(reps)
	return 2 * float64(n) * float64(n) * float64(n) / secs / 1e9, nil
}
