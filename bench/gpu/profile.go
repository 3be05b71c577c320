package main

import (
	"cmp"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/tapml/tapml/codegen/wgsl"
	"github.com/tapml/tapml/runtime/llm"
	"github.com/tapml/tapml/runtime/vulkan"
)

// tunable is a device whose kernel tuning can be changed.
type tunable interface {
	Tuning() wgsl.Tuning
	SetTuning(wgsl.Tuning)
}

// profiler is a device that times each command on the GPU (the vulkan
// target's device).
type profiler interface {
	Profile(on bool) error
	Profiled() ([]vulkan.KernelTime, time.Duration)
}

// profileCmd prints where a prefill and a decode step spend GPU time on the
// vulkan target, by kind of command (op, input types and grid), beside the
// wall time of an unprofiled warm run: the gap between the two is host
// time and submission latency.
func profileCmd(args []string) error {
	fs := flag.NewFlagSet("profile", flag.ExitOnError)
	model := fs.String("model", "", "model file (a GGUF file)")
	prefill := fs.Int("prefill", 128, "prompt tokens")
	decode := fs.Int("decode", 32, "decode steps profiled")
	rows := fs.Int("rows", 25, "rows of each table")
	knobs := tuningFlags(fs)
	vs := fs.String("vs", "", `tunings to compare in this one process, separated by ';', each a set of this command's tuning flags over the others ("-mma 32x64x32/16x32*4; -mma-f32-blocks"; an empty one is the base): their prefills run in turn, -rounds times, and a table gives each one's GPU time`)
	rounds := fs.Int("rounds", 3, "with -vs: rounds, each tuning's prefills in turn")
	reps := fs.Int("reps", 4, "with -vs: profiled prefills of a tuning back to back in each round")
	tgt := fs.String("target", "vulkan", "vulkan, vulkan/f16 for f16 compute, or vulkan/webgpu for the webgpu target's model and kernels (no f16, subgroup operations or subgroup matrices) timed on the vulkan device")
	fs.Parse(args)
	if *model == "" || *prefill < 1 || *decode < 1 || *rows < 1 {
		return fmt.Errorf("profile: -model is required; -prefill, -decode and -rows must be positive")
	}
	if *tgt != "vulkan" && *tgt != "vulkan/f16" && *tgt != webgpuKernels {
		return fmt.Errorf("profile: -target %q: want vulkan, vulkan/f16 or %s", *tgt, webgpuKernels)
	}
	if _, err := knobs.apply(wgsl.Tuning{}); err != nil {
		return fmt.Errorf("profile: %w", err)
	}
	var variants []tuningVariant
	if *vs != "" {
		if *rounds < 1 || *reps < 1 {
			return fmt.Errorf("profile: -rounds and -reps must be positive")
		}
		var err error
		if variants, err = parseVariants(*vs); err != nil {
			return fmt.Errorf("profile: -vs: %w", err)
		}
	}
	tm, err := openTapml(*tgt, *model, *prefill+2*(*decode)+16)
	if err != nil {
		return err
	}
	defer tm.close()
	d, ok := tm.dev.(tunable)
	if !ok {
		return fmt.Errorf("profile: %s has no tuning to set", tm.dev.Name())
	}
	base, err := knobs.apply(d.Tuning())
	if err != nil {
		return fmt.Errorf("profile: %w", err)
	}
	if base != d.Tuning() {
		d.SetTuning(base)
		logf("decode GEMVs: %s", orDash(wgsl.GEMVString(base)))
		logf("matmul tuning: %s (first with >= %d groups), subgroup matrices %s, at f32 compute %s (first with >= %d groups)",
			base.Matmul, base.MatmulMinGroups, cmp.Or(base.MatmulMMA, "off"), cmp.Or(base.MatmulMMAF32, "off"), base.MatmulMMAMinGroups)
	}
	p, ok := tm.dev.(profiler)
	if !ok {
		return fmt.Errorf("profile: %s cannot time commands", tm.dev.Name())
	}
	prompt := peerPrompt(*prefill, tm.vocab)
	if variants != nil {
		return compareTunings(os.Stdout, *model, tm, d, p, base, variants, prompt, *rounds, *reps)
	}
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

// writeProfile writes one phase's tables: by op, input types and grid,
// then by op, each per step (of steps profiled).
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
	table("op, inputs and grid", kinds)
}

// tuningKnobs are profile's flags that change the device's tuning.
type tuningKnobs struct {
	matmul, mma, gemv                                *string
	minGroups, mmaMinGroups, mmaF32BlocksMinWG       *int
	noMMABlocks, noMMAF32, mmaF32Blocks, noMMAScaled *bool
}

// tuningFlags declares the tuning flags on fs.
func tuningFlags(fs *flag.FlagSet) tuningKnobs {
	return tuningKnobs{
		matmul:            fs.String("matmul", "", "the device's Tuning.Matmul instead of its default (a blocking or a comma list, see wgsl.MatmulTiles)"),
		minGroups:         fs.Int("min-groups", 0, "Tuning.MatmulMinGroups, and MatmulMMAMinGroups unless -mma-min-groups (0 keeps the device's)"),
		mmaMinGroups:      fs.Int("mma-min-groups", 0, "Tuning.MatmulMMAMinGroups (0 keeps the device's, or -min-groups)"),
		mmaF32BlocksMinWG: fs.Int("mma-f32-blocks-min-workgroups", 0, "at f32 compute block-format products whose subgroup-matrix grid has fewer workgroups than this (slices not counted) keep the vec4 kernel (Tuning.MatmulMMAF32BlocksMinWorkgroups; 0 keeps the device's)"),
		mma:               fs.String("mma", "", "the device's Tuning.MatmulMMA and MatmulMMAF32 instead of their defaults (a blocking or a comma list, see wgsl.MatmulMMATiles; used where the device has subgroup matrices: at f16 compute, and at f32 compute over f16, Q4_0, Q5_0 and Q8_0 weights), or off"),
		noMMABlocks:       fs.Bool("no-mma-blocks", false, "block-format weights keep the vec4 kernel at f16 compute (Tuning.MatmulMMABlocks off)"),
		noMMAF32:          fs.Bool("no-mma-f32", false, "f16 weights' products keep the vec4 kernel at f32 compute (Tuning.MatmulMMAF32 empty)"),
		mmaF32Blocks:      fs.Bool("mma-f32-blocks", false, "at f32 compute the split block formats' products (all but Q4_0, Q5_0 and Q8_0, which take them by default as integers) take subgroup matrices too, each value split into two f16 parts (Tuning.MatmulMMAF32Blocks)"),
		noMMAScaled:       fs.Bool("no-mma-scaled", false, "Q4_0, Q5_0 and Q8_0 weights on subgroup matrices are split into two f16 parts like other block formats, not taken as their integers with each block's scale applied to its partial sums (Tuning.MatmulMMAScaled off; at f32 compute they then keep the vec4 kernel unless -mma-f32-blocks)"),
		gemv:              fs.String("gemv", "", `decode GEMV knobs over the device's tuning, as wgsl.GEMVString writes them ("GEMVBatch: 4, GEMVRows: 8")`),
	}
}

// apply returns tu changed by the flags given.
func (k tuningKnobs) apply(tu wgsl.Tuning) (wgsl.Tuning, error) {
	if err := wgsl.ValidMatmulTile(*k.matmul); err != nil {
		return tu, fmt.Errorf("-matmul: %w", err)
	}
	mma := *k.mma
	if mma == "off" {
		mma = ""
	}
	if err := wgsl.ValidMatmulMMA(mma); err != nil {
		return tu, fmt.Errorf("-mma: %w", err)
	}
	gemv, err := wgsl.ParseGEMV(*k.gemv)
	if err != nil {
		return tu, fmt.Errorf("-gemv: %w", err)
	}
	if *k.matmul != "" {
		tu.Matmul = *k.matmul
	}
	if *k.mma != "" {
		tu.MatmulMMA, tu.MatmulMMAF32 = mma, mma
	}
	tu.MatmulMMABlocks = tu.MatmulMMABlocks && !*k.noMMABlocks
	if *k.noMMAF32 {
		tu.MatmulMMAF32 = ""
	}
	tu.MatmulMMAF32Blocks = tu.MatmulMMAF32Blocks || *k.mmaF32Blocks
	tu.MatmulMMAScaled = tu.MatmulMMAScaled && !*k.noMMAScaled
	if *k.minGroups > 0 {
		tu.MatmulMinGroups, tu.MatmulMMAMinGroups = *k.minGroups, *k.minGroups
	}
	if *k.mmaMinGroups > 0 {
		tu.MatmulMMAMinGroups = *k.mmaMinGroups
	}
	if *k.mmaF32BlocksMinWG > 0 {
		tu.MatmulMMAF32BlocksMinWorkgroups = *k.mmaF32BlocksMinWG
	}
	wgsl.GEMVVariant{Tuning: gemv}.Apply(&tu)
	return tu, nil
}

// tuningVariant is one entry of -vs: its flags, applied over the base
// tuning when it runs.
type tuningVariant struct {
	name string
	args []string
}

// parseVariants splits -vs into its tunings and checks each one's flags.
func parseVariants(list string) ([]tuningVariant, error) {
	var out []tuningVariant
	for _, v := range strings.Split(list, ";") {
		args := strings.Fields(v)
		if _, err := variantTuning(args, wgsl.Tuning{}); err != nil {
			return nil, err
		}
		name := strings.Join(args, " ")
		if name == "" {
			name = "(base)"
		}
		out = append(out, tuningVariant{name, args})
	}
	return out, nil
}

// variantTuning applies a variant's flags to base.
func variantTuning(args []string, base wgsl.Tuning) (wgsl.Tuning, error) {
	fs := flag.NewFlagSet("-vs", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	k := tuningFlags(fs)
	if err := fs.Parse(args); err != nil {
		return base, fmt.Errorf("%q: %w", strings.Join(args, " "), err)
	}
	if fs.NArg() > 0 {
		return base, fmt.Errorf("%q: %q is not a tuning flag", strings.Join(args, " "), fs.Arg(0))
	}
	tu, err := k.apply(base)
	if err != nil {
		return base, fmt.Errorf("%q: %w", strings.Join(args, " "), err)
	}
	return tu, nil
}

// compareTunings profiles the prompt's prefill under each variant in turn,
// rounds times over, reps prefills back to back each time, in one process,
// and writes a table: each variant's prefill GPU time (min, median, max),
// its products' time per call by inputs and grid (min) and how its prompt logits
// compare with the first variant's. The minima are the figures to compare: the H200's
// SM clock idles at 345 MHz against 1980, and most prefills between host
// work ran 3-5x slow (bench/results/2026-12-04-h200-tile-sweep.md).
func compareTunings(w io.Writer, model string, tm *tapmlModel, d tunable, p profiler, base wgsl.Tuning, vs []tuningVariant, prompt []int, rounds, reps int) error {
	type result struct {
		gpu   []time.Duration
		calls map[string]int
		best  map[string]time.Duration // per call
	}
	res := make([]result, len(vs))
	tus := make([]wgsl.Tuning, len(vs))
	for i, v := range vs {
		var err error
		if tus[i], err = variantTuning(v.args, base); err != nil {
			return err
		}
	}
	checks, err := checkTunings(tm, d, vs, tus, prompt)
	if err != nil {
		return err
	}
	for r := range rounds {
		for i, v := range vs {
			d.SetTuning(tus[i])
			// Kernels made and recordings recorded for this tuning.
			if _, err := generate(tm.exec, prompt, 1); err != nil {
				return fmt.Errorf("%s: %w", v.name, err)
			}
			rs := &res[i]
			if rs.best == nil {
				rs.calls, rs.best = map[string]int{}, map[string]time.Duration{}
			}
			// Back-to-back prefills: the GPU's clocks drop while it waits
			// for host work, so only the fastest samples compare.
			for range reps {
				kinds, gpu, err := profiledPrefill(tm, p, prompt)
				if err != nil {
					return fmt.Errorf("%s: %w", v.name, err)
				}
				rs.gpu = append(rs.gpu, gpu)
				logf("round %d, %s: %.2f ms", r+1, v.name, float64(gpu)/1e6)
				for _, k := range kinds {
					if !strings.Contains(k.Name, "matmul") || k.Calls == 0 {
						continue
					}
					per := k.Time / time.Duration(k.Calls)
					if b, ok := rs.best[k.Name]; !ok || per < b {
						rs.best[k.Name] = per
					}
					rs.calls[k.Name] = k.Calls
				}
			}
		}
	}
	ms := func(t time.Duration) string { return fmt.Sprintf("%.2f", float64(t)/1e6) }
	fmt.Fprintf(w, "# Tunings compared: %s on %s\n\n", model, tm.dev.Name())
	fmt.Fprintf(w, "Prefill of %d tokens under each tuning in turn, %d rounds of %d back to back, in one process; GPU time by\n"+
		"timestamps around each command. The products: microseconds per call (min over all prefills) and calls, by op, inputs\n"+
		"and grid. Logits: the prompt's next-token logits against the first tuning's, max |difference| over max |logit| (%s).\n\n",
		len(prompt), rounds, reps, logitsRule)
	fmt.Fprintf(w, "| tuning | GPU ms min | median | max | logits | products, us per call (calls) |\n|---|---:|---:|---:|---|---|\n")
	for i, v := range vs {
		rs := res[i]
		g := slices.Clone(rs.gpu)
		slices.Sort(g)
		names := make([]string, 0, len(rs.best))
		for n := range rs.best {
			names = append(names, n)
		}
		// The largest total first.
		sort.Slice(names, func(a, b int) bool {
			ta, tb := rs.best[names[a]]*time.Duration(rs.calls[names[a]]), rs.best[names[b]]*time.Duration(rs.calls[names[b]])
			return ta > tb || ta == tb && names[a] < names[b]
		})
		var parts []string
		for _, n := range names {
			parts = append(parts, fmt.Sprintf("%s %.1f (%d)", n, float64(rs.best[n])/1e3, rs.calls[n]))
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s |\n", v.name, ms(g[0]), ms(g[len(g)/2]), ms(g[len(g)-1]), checks[i], strings.Join(parts, "; "))
	}
	return nil
}

// profiledPrefill runs the prompt's prefill alone (no decode step launched
// ahead) with every command timed, and returns the times.
func profiledPrefill(tm *tapmlModel, p profiler, prompt []int) ([]vulkan.KernelTime, time.Duration, error) {
	s, err := llm.NewSession(tm.exec)
	if err != nil {
		return nil, 0, err
	}
	defer s.Close()
	s.Horizon = len(prompt)
	if err := p.Profile(true); err != nil {
		return nil, 0, err
	}
	if _, err := s.Next(prompt, llm.NewSampler(0, 0, 1)); err != nil {
		p.Profile(false)
		return nil, 0, err
	}
	kinds, gpu := p.Profiled()
	return kinds, gpu, p.Profile(false)
}

// logitsRule says when a tuning's logits are wrong. Tunings change only
// how kernels block and order their f32 sums: on lavapipe two blockings'
// logits agree to 1e-7 of their range at f32 compute; f16 compute rounds
// activations to f16 between ops, which lets reordered sums move them
// further (2^-11 a rounding, over 16-22 layers). A wrong kernel moves them
// by their whole range: 0.1 lies well between.
const logitsRule = "over 0.1 is WRONG: a wrong kernel moves them by their range, reordered sums far less"

// checkTunings runs the prompt's prefill once under each tuning and
// compares its logits with the first tuning's: a cell per tuning.
func checkTunings(tm *tapmlModel, d tunable, vs []tuningVariant, tus []wgsl.Tuning, prompt []int) ([]string, error) {
	var first []float32
	cells := make([]string, len(vs))
	for i, v := range vs {
		d.SetTuning(tus[i])
		s, err := llm.NewSession(tm.exec)
		if err != nil {
			return nil, err
		}
		logits, err := s.Forward(prompt)
		s.Close()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", v.name, err)
		}
		if i == 0 {
			first, cells[i] = logits, "the reference"
			continue
		}
		cells[i] = compareLogits(logits, first)
		if strings.HasPrefix(cells[i], "WRONG") {
			logf("%s: logits %s", v.name, cells[i])
		}
	}
	return cells, nil
}

// compareLogits is max |got - want| over max |want| (0 where they are
// equal), with whether the argmax agrees; "WRONG" first where that is over
// 0.1 or not finite.
func compareLogits(got, want []float32) string {
	if len(got) != len(want) {
		return fmt.Sprintf("WRONG: %d logits, want %d", len(got), len(want))
	}
	var diff, scale float64
	for i := range want {
		diff = max(diff, math.Abs(float64(got[i])-float64(want[i])))
		scale = max(scale, math.Abs(float64(want[i])))
		if math.IsNaN(float64(got[i])) || math.IsInf(float64(got[i]), 0) {
			diff = math.Inf(1)
		}
	}
	rel := 0.0 // equal, all-zero logits included
	if diff != 0 {
		rel = diff / scale
	}
	cell := fmt.Sprintf("%.1e", rel)
	if llm.Argmax(got) != llm.Argmax(want) {
		cell += ", another argmax"
	}
	if !(rel <= 0.1) {
		cell = "WRONG " + cell
	}
	return cell
}
