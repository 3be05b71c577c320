package main

import (
	"fmt"
	"math"
	"os"

	"github.com/spf13/cobra"
	"github.com/tapml/tapml/frontend"
	"github.com/tapml/tapml/migrate"
	"github.com/tapml/tapml/passes"
	"github.com/tapml/tapml/runtime/target"
)

func init() {
	var (
		tokPath    string
		prompt     string
		steps      int
		strategy   string
		jsonPath   string
		htmlPath   string
		regression string
		pipeline   string
		injects    []string
		th         = migrate.DefaultThresholds()
		tgt        target.Flags
		quantize   quantizeFlag
	)
	cmd := &cobra.Command{
		Use:   "migrate [MODEL] --target T --prompt TEXT --steps N [--strategy incremental|bisect]",
		Short: "Move a model to a target step by step and localise the op that makes it diverge",
		Long: `Run the model on the CPU reference once (greedy, --steps positions), then run
it with more and more of its nodes on --target, comparing every step with the
reference: the greedy tokens, the largest logit error and the KL divergence
of the next-token distributions (runs are teacher-forced with the reference's
tokens). A run diverges when a token differs, a logit differs by more than
--max-logit-err, or a KL exceeds --max-kl.

--strategy incremental moves op kinds one at a time (data movement, then
elementwise, reductions, contractions); at the first diverging op its nodes
move layer by layer, then the diverging layer is bisected. --strategy bisect
runs everything on the target and, if that diverges, binary-searches the
topological order for the smallest diverging set (about log2(nodes) runs).
The culprit is named by node id and provenance, with its isolated error
(alone on the target, reference inputs), accumulated error (in the mixed
run) and their ratio; --regression DIR writes its carved cases as a test
bundle for 'tapmlc test'.

--inject op=KIND,fault=NAME (or node=ID,fault=NAME; repeatable) plants a
test-only fault (wrong_index, wrong_constant, missing_barrier,
f16_overflow) in the target's kernels, on the webgpu, vulkan and remote:
targets only, to check the tool.

The report goes to stdout (--json and --html write files too); progress to
stderr. Exit code: 0 when every node runs on the target with tokens
identical to the reference (within the thresholds), 1 when a divergence was
found (the culprit is printed), 2 when the migration could not run (bad
arguments, model, device, reference run).`,
		RunE: func(cmd *cobra.Command, args []string) error {
			code, err := runMigrate(args, tokPath, prompt, steps, strategy, jsonPath, htmlPath, regression, pipeline, injects, th, tgt, quantize)
			if err != nil {
				fmt.Fprintln(os.Stderr, "tapmlc migrate:", err)
				os.Exit(migrate.ExitError)
			}
			if code != 0 {
				os.Exit(code)
			}
			return nil
		},
	}
	// Usage errors exit 2 as well, like every failure of the command itself.
	cmd.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		fmt.Fprintln(os.Stderr, "tapmlc migrate:", err)
		os.Exit(migrate.ExitError)
		return err
	})
	f := cmd.Flags()
	f.StringVar(&tokPath, "tokenizer", "", "tokenizer file (llama2.c tok*.bin); GGUF files carry their own")
	f.StringVar(&prompt, "prompt", "", "text to start from")
	f.IntVar(&steps, "steps", 32, "positions to process, prompt included (0 or more than the context: the context length)")
	f.StringVar(&strategy, "strategy", migrate.Incremental, "incremental or bisect")
	f.StringVar(&jsonPath, "json", "", "write a JSON report to this file")
	f.StringVar(&htmlPath, "html", "", "write an HTML report (migration curve plots, culprit) to this file")
	f.StringVar(&regression, "regression", "", "write the culprit's carved cases as a test bundle in this folder")
	f.StringVar(&pipeline, "pipeline", "", "pass pipeline YAML (default: the built-in one)")
	f.StringArrayVar(&injects, "inject", nil, "plant a test-only fault: op=KIND,fault=NAME or node=ID,fault=NAME (webgpu, vulkan and remote: targets; repeatable)")
	f.Float64Var(&th.MaxLogitErr, "max-logit-err", th.MaxLogitErr, "a logit error above this diverges")
	f.Float64Var(&th.MaxKL, "max-kl", th.MaxKL, "a next-token KL divergence above this diverges")
	tgt.Register(f)
	quantize.register(f)
	f.Lookup("target").DefValue = "webgpu"
	_ = f.Set("target", "webgpu")
	rootCmd.AddCommand(cmd)
}

func runMigrate(args []string, tokPath, prompt string, steps int, strategy, jsonPath, htmlPath, regression, pipeline string,
	injects []string, th migrate.Thresholds, tgt target.Flags, quantize quantizeFlag) (int, error) {
	if len(args) > 1 {
		return 0, fmt.Errorf("takes at most one MODEL, got %d arguments", len(args))
	}
	if strategy != migrate.Incremental && strategy != migrate.Bisect {
		return 0, fmt.Errorf("--strategy %q: want %s or %s", strategy, migrate.Incremental, migrate.Bisect)
	}
	if th.MaxLogitErr < 0 || th.MaxKL < 0 {
		return 0, fmt.Errorf("--max-logit-err and --max-kl must not be negative")
	}
	var injs []target.Injection
	for _, s := range injects {
		in, err := target.ParseInjection(s)
		if err != nil {
			return 0, err
		}
		injs = append(injs, in)
	}
	if len(injs) > 0 {
		if err := target.InjectableTarget(tgt.Target); err != nil {
			return 0, fmt.Errorf("--inject: %w", err)
		}
	}
	var model *frontend.Model
	var err error
	if len(args) == 0 {
		model, err = frontend.BuiltinTiny()
	} else {
		model, err = frontend.Load(args[0], frontend.Options{Tokenizer: tokPath})
	}
	if err == nil {
		err = quantize.apply(model)
	}
	if err != nil {
		return 0, err
	}
	if model.Tokenizer == nil {
		return 0, fmt.Errorf("%s has no tokenizer: give one with --tokenizer", model.Path)
	}
	opts := migrate.Options{Prompt: prompt, Steps: steps, Target: tgt.Target, Thresholds: th, Regression: regression, Log: os.Stderr}
	if th == (migrate.Thresholds{}) {
		// Both zero: bit-exact logits (the package reads zero as "default").
		opts.Thresholds = migrate.Thresholds{MaxLogitErr: math.SmallestNonzeroFloat64, MaxKL: math.SmallestNonzeroFloat64}
	}
	if pipeline != "" {
		if opts.Pipeline, err = passes.Load(pipeline); err != nil {
			return 0, err
		}
	}
	dev, err := tgt.Open()
	if err != nil {
		return 0, err
	}
	defer dev.Close()
	d, err := migrate.New(model.Module, model.Tokenizer, dev, opts)
	if err != nil {
		return 0, err
	}
	defer d.Close()
	if _, err := d.Inject(injs); err != nil {
		return 0, err
	}
	rep, err := d.Run(strategy)
	if err != nil {
		return 0, err
	}
	if err := rep.WriteText(os.Stdout); err != nil {
		return 0, err
	}
	if err := rep.WriteFiles(jsonPath, htmlPath); err != nil {
		return 0, err
	}
	return rep.ExitCode(), nil
}
