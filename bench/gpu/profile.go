package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/tapml/tapml/codegen/wgsl"
	"github.com/tapml/tapml/runtime/llm"
	"github.com/tapml/tapml/runtime/vulkan"
)

// profiler is a device that times each command on the GPU (the vulkan
// target's device).
type profiler interface {
	Profile(on bool) error
	Profiled() ([]vulkan.KernelTime, time.Duration)
}

// profileCmd prints where a prefill and a decode step spend GPU time on the
// vulkan target, by kind of command (op and grid), beside the wall time of
// an unprofiled warm run: the gap between the two is host time and
// submission latency.
func profileCmd(args []string) error {
	fs := flag.NewFlagSet("profile", flag.ExitOnError)
	model := fs.String("model", "", "model file (a GGUF file)")
	prefill := fs.Int("prefill", 128, "prompt tokens")
	decode := fs.Int("decode", 32, "decode steps profiled")
	rows := fs.Int("rows", 25, "rows of each table")
	matmul := fs.String("matmul", "", "the device's Tuning.Matmul instead of its default (a blocking or a comma list, see wgsl.MatmulTiles)")
	minGroups := fs.Int("min-groups", 0, "with -matmul or -mma: Tuning.MatmulMinGroups (0 keeps the device's)")
	mma := fs.String("mma", "", "the device's Tuning.MatmulMMA instead of its default (a blocking or a comma list, see wgsl.MatmulMMATiles; used where the device has subgroup matrices, at f16 compute and over f16 weights at f32 compute), or off")
	noMMABlocks := fs.Bool("no-mma-blocks", false, "block-format weights keep the vec4 kernel at f16 compute (Tuning.MatmulMMABlocks off)")
	noMMAF32 := fs.Bool("no-mma-f32", false, "f16 weights' products keep the vec4 kernel at f32 compute (Tuning.MatmulMMAF32 off)")
	mmaF32Blocks := fs.Bool("mma-f32-blocks", false, "at f32 compute quantized weights' products take subgroup matrices too, each value split into two f16 parts (Tuning.MatmulMMAF32Blocks)")
	gemv := fs.String("gemv", "", `decode GEMV knobs over the device's tuning, as wgsl.GEMVString writes them ("GEMVBatch: 4, GEMVRows: 8")`)
	tgt := fs.String("target", "vulkan", "vulkan, or vulkan/f16 for f16 compute")
	fs.Parse(args)
	if *model == "" || *prefill < 1 || *decode < 1 || *rows < 1 {
		return fmt.Errorf("profile: -model is required; -prefill, -decode and -rows must be positive")
	}
	if err := wgsl.ValidMatmulTile(*matmul); err != nil {
		return fmt.Errorf("profile: -matmul: %w", err)
	}
	mmaList := *mma // the value of Tuning.MatmulMMA when -mma is given
	if mmaList == "off" {
		mmaList = ""
	}
	if err := wgsl.ValidMatmulMMA(mmaList); err != nil {
		return fmt.Errorf("profile: -mma: %w", err)
	}
	gemvKnobs, err := wgsl.ParseGEMV(*gemv)
	if err != nil {
		return fmt.Errorf("profile: -gemv: %w", err)
	}
	if *tgt != "vulkan" && *tgt != "vulkan/f16" {
		return fmt.Errorf("profile: -target %q: want vulkan or vulkan/f16", *tgt)
	}
	tm, err := openTapml(*tgt, *model, *prefill+2*(*decode)+16)
	if err != nil {
		return err
	}
	defer tm.close()
	if *matmul != "" || *mma != "" || *noMMABlocks || *noMMAF32 || *mmaF32Blocks || *gemv != "" {
		d, ok := tm.dev.(interface {
			Tuning() wgsl.Tuning
			SetTuning(wgsl.Tuning)
		})
		if !ok {
			return fmt.Errorf("profile: %s has no tuning to set", tm.dev.Name())
		}
		tu := d.Tuning()
		if *matmul != "" {
			tu.Matmul = *matmul
		}
		if *mma != "" {
			tu.MatmulMMA = mmaList
		}
		tu.MatmulMMABlocks = tu.MatmulMMABlocks && !*noMMABlocks
		tu.MatmulMMAF32 = tu.MatmulMMAF32 && !*noMMAF32
		tu.MatmulMMAF32Blocks = tu.MatmulMMAF32Blocks || *mmaF32Blocks
		if *minGroups > 0 {
			tu.MatmulMinGroups, tu.MatmulMMAMinGroups = *minGroups, *minGroups
		}
		wgsl.GEMVVariant{Tuning: gemvKnobs}.Apply(&tu)
		d.SetTuning(tu)
		logf("decode GEMVs: %s", orDash(wgsl.GEMVString(tu)))
		logf("matmul tuning: %s, subgroup matrices %s (first with >= %d groups)", tu.Matmul, tu.MatmulMMA, tu.MatmulMinGroups)
	}
	p, ok := tm.dev.(profiler)
	if !ok {
		return fmt.Errorf("profile: %s cannot time commands", tm.dev.Name())
	}
	prompt := peerPrompt(*prefill, tm.vocab)
	// Warm: kernels compiled, recordings made; this run's times are the
	// unprofiled baseline.
	var warm llm.Stats
	for range 2 {
		if warm, err = generate(tm.exec, prompt, *decode); err != nil {
			return err
		}
	}
	s, err := llm.NewSession(tm.exec)
	if err != nil {
		return err
	}
	defer s.Close()
	greedy := llm.NewSampler(0, 0, 1)
	if err := p.Profile(true); err != nil {
		return err
	}
	// No step launched ahead past the prompt (llm's lookahead), so that
	// the prefill's profile is the prefill's alone, and none past the
	// last decode step profiled.
	s.Horizon = *prefill
	tok, err := s.Next(prompt, greedy)
	if err != nil {
		return err
	}
	pre, preGPU := p.Profiled()
	if err := p.Profile(true); err != nil {
		return err
	}
	s.Horizon = *prefill + *decode
	for range *decode {
		if tok, err = s.Next([]int{tok}, greedy); err != nil {
			return err
		}
	}
	dec, decGPU := p.Profiled()
	if err := p.Profile(false); err != nil {
		return err
	}
	w := os.Stdout
	fmt.Fprintf(w, "# GPU time by command: %s on %s\n\n", *model, tm.dev.Name())
	fmt.Fprintf(w, "Each command is timed by GPU timestamps before and after it (its run, the barrier before it and\n"+
		"the launch gap); the wall times are of an unprofiled warm run of the same prompt.\n\n")
	writeProfile(w, fmt.Sprintf("prefill of %d tokens", *prefill), pre, preGPU, 1, warm.PromptTime, *rows)
	writeProfile(w, "decode step", dec, decGPU, *decode, warm.DecodeTime/time.Duration(max(warm.DecodeTokens, 1)), *rows)
	return nil
}

// writeProfile writes one phase's tables: by op and grid, then by op, each
// per step (of steps profiled).
func writeProfile(w io.Writer, phase string, kinds []vulkan.KernelTime, gpu time.Duration, steps int, wall time.Duration, rows int) {
	per := func(d time.Duration) float64 { return float64(d) / float64(steps) / 1e3 }
	calls := 0
	for _, k := range kinds {
		calls += k.Calls
	}
	fmt.Fprintf(w, "## %s\n\n", phase)
	fmt.Fprintf(w, "GPU %.1f us per step over %d commands; unprofiled wall time %.1f us (GPU busy %.0f%% of it)\n\n",
		per(gpu), calls/steps, float64(wall)/1e3, 100*per(gpu)*1e3/float64(max(wall, 1)))
	byOp := map[string]*vulkan.KernelTime{}
	for _, k := range kinds {
		op, _, _ := strings.Cut(k.Name, " ")
		b := byOp[op]
		if b == nil {
			b = &vulkan.KernelTime{Name: op}
			byOp[op] = b
		}
		b.Calls += k.Calls
		b.Time += k.Time
	}
	var ops []vulkan.KernelTime
	for _, b := range byOp {
		ops = append(ops, *b)
	}
	sort.Slice(ops, func(i, j int) bool { return ops[i].Time > ops[j].Time })
	table := func(title string, ks []vulkan.KernelTime) {
		fmt.Fprintf(w, "| %s | calls/step | us/step | us/call | share |\n|---|---:|---:|---:|---:|\n", title)
		for i, k := range ks {
			if i == rows {
				fmt.Fprintf(w, "| (%d more) | | | | |\n", len(ks)-rows)
				break
			}
			fmt.Fprintf(w, "| %s | %.1f | %.1f | %.2f | %.1f%% |\n", k.Name, float64(k.Calls)/float64(steps),
				per(k.Time), float64(k.Time)/float64(k.Calls)/1e3, 100*float64(k.Time)/float64(max(gpu, 1)))
		}
		fmt.Fprintln(w)
	}
	table("op", ops)
	table("op and grid", kinds)
}
