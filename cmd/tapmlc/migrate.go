package main

import (
	"fmt"
	"math"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/tapml/tapml/carve"
	"github.com/tapml/tapml/codegen/fault"
	"github.com/tapml/tapml/ir"
	"github.com/tapml/tapml/migrate"
	"github.com/tapml/tapml/passes"
	"github.com/tapml/tapml/runtime"
	"github.com/tapml/tapml/runtime/llm"
	"github.com/tapml/tapml/runtime/target"
)

// migrateFlags are the flags of `tapmlc migrate`.
type migrateFlags struct {
	tokPath, prompt            string
	steps                      int
	strategy                   string
	jsonPath, htmlPath         string
	regression, pipeline, dump string
	reference                  string
	injects                    []string
	seed                       uint64
	th                         migrate.Thresholds
	tgt                        target.Flags
	mi                         modelInputs
}

func init() {
	fl := &migrateFlags{th: migrate.DefaultThresholds()}
	cmd := &cobra.Command{
		Use:   "migrate [MODEL] --target T (--prompt TEXT --steps N | [--input NAME=FILE] [--seed N]) [--strategy incremental|bisect]",
		Short: "Move a model to a target step by step and localise the op that makes it diverge",
		Long: `Run the model on the reference once (the CPU, or --reference TARGET), then
run it with more and more of its nodes on --target, comparing every run with
the reference.

A language model (@prefill/@decode) runs the greedy generation of --prompt
for --steps positions; runs are teacher-forced with the reference's tokens,
and a run diverges when a token differs, a logit differs by more than
--max-logit-err, or a next-token KL exceeds --max-kl.

Any other model (an ONNX model) is called once per function on its inputs,
given as for 'tapmlc run': --input NAME=FILE (.npy, ONNX TensorProto .pb,
raw), NAME=@uniform|@text|@zeros, seeded random values (--seed) for the
rest, --input-shape for dynamic dims. A run diverges when an element of an
output differs from the reference's by more than atol + rtol·|want|, where
each output's rtol is the sum of the carving policy's per-op tolerances
along the worst path of ops that computes it (see carve.Chain); the report
states each output's tolerance and rule.

--strategy incremental moves op kinds one at a time (data movement, then
elementwise, reductions, contractions); at the first diverging op its nodes
move layer by layer, then the diverging layer is bisected. --strategy bisect
runs everything on the target and, if that diverges, binary-searches the
topological order for the smallest diverging set (about log2(nodes) runs).
The culprit is named by node id and provenance, with its isolated error
(alone on the target, reference inputs), accumulated error (in the mixed
run) and their ratio; --regression DIR writes its carved cases as a test
bundle for 'tapmlc test' (with any injected faults recorded, which 'test'
plants again). --dump DIR writes every target node's outputs in the final
placement and in the reference placement as .npy files, with index.tsv.
The report ends with the kernel time per op of the final placement.

--inject op=KIND,fault=NAME (or node=ID,fault=NAME; repeatable) plants a
test-only fault in the target's kernels, to check the tool. When nothing
diverges, the faulted kernels are run once more without their faults:
identical outputs mean the fault never fired. The faults
(codegen/fault's table):
` + fault.Help() + `

The report goes to stdout (--json and --html write files too); progress to
stderr. Exit status: 0 every node runs on the target and agrees with the
reference; 1 a divergence was found (the culprit is printed); 2 the
migration could not run (bad arguments, model, device, reference run);
3 an injected fault never fired (nothing was tested).`,
		RunE: func(cmd *cobra.Command, args []string) error {
			code, err := runMigrate(cmd, args, fl)
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
	usage := func(c *cobra.Command, err error) error {
		fmt.Fprintln(os.Stderr, "tapmlc migrate:", err)
		os.Exit(migrate.ExitError)
		return err
	}
	cmd.SetFlagErrorFunc(usage)
	cmd.PersistentPreRunE = func(c *cobra.Command, args []string) error {
		if err := checkNumbers(c); err != nil {
			return usage(c, err)
		}
		return nil
	}
	f := cmd.Flags()
	f.StringVar(&fl.tokPath, "tokenizer", "", "tokenizer file (llama2.c tok*.bin); GGUF files carry their own")
	f.StringVar(&fl.prompt, "prompt", "", "text to start from (language models)")
	f.IntVar(&fl.steps, "steps", 32, "positions to process, prompt included (0 or more than the context: the context length)")
	f.StringVar(&fl.strategy, "strategy", migrate.Incremental, "incremental or bisect")
	f.StringVar(&fl.jsonPath, "json", "", "write a JSON report to this file")
	f.StringVar(&fl.htmlPath, "html", "", "write an HTML report (migration curve plots, culprit) to this file")
	f.StringVar(&fl.regression, "regression", "", "write the culprit's carved cases as a test bundle in this folder")
	f.StringVar(&fl.dump, "dump", "", "write each target node's outputs in the final placement and the reference's as .npy files (and index.tsv) in this folder")
	f.StringVar(&fl.pipeline, "pipeline", "", "pass pipeline YAML (default: the built-in one)")
	f.StringVar(&fl.reference, "reference", "cpu", "the target to compare with (it runs every node not moved): cpu, or another target such as vulkan")
	registerInject(f, &fl.injects)
	f.Float64Var(&fl.th.MaxLogitErr, "max-logit-err", fl.th.MaxLogitErr, "a logit error above this diverges (language models)")
	f.Float64Var(&fl.th.MaxKL, "max-kl", fl.th.MaxKL, "a next-token KL divergence above this diverges (language models)")
	f.Uint64Var(&fl.seed, "seed", 1, "seed of the random inputs of a model that is not a language model")
	fl.mi.registerInputs(f)
	fl.mi.registerShapes(f)
	fl.tgt.Register(f)
	fl.mi.quantize.register(f)
	f.Lookup("target").DefValue = "webgpu"
	_ = f.Set("target", "webgpu")
	rootCmd.AddCommand(cmd)
}

func runMigrate(cmd *cobra.Command, args []string, fl *migrateFlags) (int, error) {
	if len(args) > 1 {
		return 0, fmt.Errorf("takes at most one MODEL, got %d arguments", len(args))
	}
	if fl.strategy != migrate.Incremental && fl.strategy != migrate.Bisect {
		return 0, fmt.Errorf("--strategy %q: want %s or %s", fl.strategy, migrate.Incremental, migrate.Bisect)
	}
	th := fl.th
	injs, err := parseInjections(fl.injects, fl.tgt.Target)
	if err != nil {
		return 0, err
	}
	if cmd.Flags().Changed("reference") && fl.reference == fl.tgt.Target {
		return 0, fmt.Errorf("--reference %s is the target itself: compare two different targets", fl.reference)
	}
	model, given, err := loadModel(args, fl.tokPath, &fl.mi)
	if err != nil {
		return 0, err
	}
	opts := migrate.Options{Prompt: fl.prompt, Steps: fl.steps, Target: fl.tgt.Target, Thresholds: th, Regression: fl.regression,
		Log: os.Stderr, Reference: fl.reference, Inputs: given, Seed: fl.seed}
	if carve.IsLanguageModel(model.Module) {
		if len(fl.mi.inputs) > 0 {
			return 0, fmt.Errorf("--input is for models without @prefill/@decode; %s is a language model: give --prompt", model.Path)
		}
		if model.Tokenizer == nil {
			return 0, fmt.Errorf("%s has no tokenizer: give one with --tokenizer", model.Path)
		}
	} else if err := languageFlagsUnset(cmd, model, "prompt", "steps", "tokenizer", "max-logit-err", "max-kl"); err != nil {
		return 0, err
	}
	if carve.IsLanguageModel(model.Module) {
		// The caches hold --steps positions, not the header's context.
		if err := llm.FitContext(model.Module, fl.steps); err != nil {
			return 0, err
		}
	}
	if th == (migrate.Thresholds{}) {
		// Both zero: bit-exact logits (the package reads zero as "default").
		opts.Thresholds = migrate.Thresholds{MaxLogitErr: math.SmallestNonzeroFloat64, MaxKL: math.SmallestNonzeroFloat64}
	}
	if fl.pipeline != "" {
		if opts.Pipeline, err = passes.Load(fl.pipeline); err != nil {
			return 0, err
		}
	}
	dev, err := fl.tgt.Open()
	if err != nil {
		return 0, err
	}
	defer dev.Close()
	if fl.reference != "cpu" {
		ref, err := openReference(fl.reference, fl.tgt)
		if err != nil {
			return 0, err
		}
		defer ref.Close()
		name := fl.reference
		opts.Source, opts.SourceSupports = ref, func(op ir.Op) bool { return target.Supports(name, op) }
	}
	d, err := migrate.New(model.Module, model.Tokenizer, dev, opts)
	if err != nil {
		return 0, err
	}
	defer d.Close()
	if _, err := d.Inject(injs); err != nil {
		return 0, err
	}
	rep, err := d.Run(fl.strategy)
	if err != nil {
		return 0, err
	}
	if fl.dump != "" {
		n, err := d.Dump(fl.dump, rep.FinalPlacement())
		if err != nil {
			return 0, err
		}
		fmt.Fprintf(os.Stderr, "wrote %d target/reference output pairs of the final placement to %s (index.tsv lists them)\n", n, fl.dump)
	}
	if err := rep.WriteText(os.Stdout); err != nil {
		return 0, err
	}
	if err := rep.WriteFiles(fl.jsonPath, fl.htmlPath); err != nil {
		return 0, err
	}
	return rep.ExitCode(), nil
}

// registerInject adds --inject.
func registerInject(f *pflag.FlagSet, injects *[]string) {
	f.StringArrayVar(injects, "inject", nil, "plant a test-only fault: op=KIND,fault=NAME or node=ID,fault=NAME ("+strings.Join(fault.InjectableTargets(), ", ")+" targets; repeatable)")
}

// openReference opens the device of --reference.
func openReference(name string, tgt target.Flags) (runtime.Device, error) {
	ref, err := target.Open(name, tgt.Backend)
	if err != nil {
		return nil, fmt.Errorf("--reference %s: %w", name, err)
	}
	return ref, nil
}

// parseInjections parses --inject values; faults exist on the webgpu and
// remote: targets only.
func parseInjections(values []string, tgt string) ([]target.Injection, error) {
	var injs []target.Injection
	for _, s := range values {
		in, err := target.ParseInjection(s)
		if err != nil {
			return nil, err
		}
		injs = append(injs, in)
	}
	if len(injs) > 0 {
		if err := target.InjectableTarget(tgt); err != nil {
			return nil, fmt.Errorf("--inject: %w", err)
		}
	}
	return injs, nil
}
