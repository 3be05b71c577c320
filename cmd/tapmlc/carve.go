package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"github.com/tapml/tapml/carve"
	"github.com/tapml/tapml/passes"
	"github.com/tapml/tapml/runtime/llm"
)

func init() {
	var (
		tokPath  string
		prompt   string
		prompts  string
		steps    int
		keep     int
		out      string
		pipeline string
		seed     uint64
		mi       modelInputs
	)
	cmd := &cobra.Command{
		Use:   "carve [MODEL] (--prompt TEXT | --prompts FILE) --steps N | [--input NAME=FILE] [--inputs DIR] [--input-shape NAME=D0,D1,...] [--seed N]) -o tests/",
		Short: "Carve per-operator tests from a reference run",
		Long: `Compile MODEL with probes, run it on the CPU reference and record every op
call: its inputs, attributes and reference outputs. Calls are deduplicated by
content key (op, attributes, dtypes, shapes and a coarse fingerprint of the
values); the first --keep of each key are kept. The cases are written as a
test bundle (see 'tapmlc test'), atomically: a failure leaves -o as it was.

A language model (functions @prefill and @decode) runs through prefill and
the decode steps of --prompt (greedy), --steps positions in all; --prompts
FILE runs each line of FILE as a prompt, one after another, and keeps the
first --keep calls of each content key over all of them, so that values
only some prompts produce are carved too.

Any other model (an ONNX model: one function, @main) is called once per
function, on inputs given with --input NAME=FILE (.npy, ONNX TensorProto .pb,
or raw little-endian values of the input's dtype and shape) or on seeded
random values: floats uniform in [-1, 1) from xorshift32 seeded with --seed
(the values scripts/ort_run.mjs gives ONNX Runtime for the same seed), or
--input NAME=@text, a page of text-like marks, for text detectors; integers
are zeros. Dynamic dims need --input-shape NAME=D0,D1,... unless an --input
file gives the shape. --inputs DIR carves several input sets (one subfolder
per set, a file per input; the ONNX model zoo's test_data_set_N folders
work as they are), deduplicated together. No tokenizer is needed. The
manifest records each input's source, and each case its set.

MODEL is recognised by content, as for 'tapmlc run'; without it the built-in
tiny model is carved. The summary (calls seen, cases kept, bytes written)
goes to stdout.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if out == "" {
				return fmt.Errorf("carve: -o FOLDER is required")
			}
			model, given, err := loadModel(args, tokPath, &mi)
			if err != nil {
				return err
			}
			var pipe *passes.Pipeline
			if pipeline != "" {
				if pipe, err = passes.Load(pipeline); err != nil {
					return err
				}
			}
			var rec *carve.Recording
			if carve.IsLanguageModel(model.Module) {
				if len(mi.inputs) > 0 {
					return fmt.Errorf("--input is for models without @prefill/@decode; %s is a language model: give --prompt", model.Path)
				}
				if model.Tokenizer == nil {
					return fmt.Errorf("%s has no tokenizer: give one with --tokenizer", model.Path)
				}
				if mi.setsDir != "" {
					return fmt.Errorf("--inputs is for models without @prefill/@decode; %s is a language model: give --prompts", model.Path)
				}
				// The caches hold --steps positions, not the header's context.
				if err := llm.FitContext(model.Module, steps); err != nil {
					return err
				}
				opts := carve.Options{Prompt: prompt, Steps: steps, Keep: keep, Pipeline: pipe, Progress: carve.ProgressBar(os.Stderr, "carving")}
				if prompts != "" {
					if cmd.Flags().Changed("prompt") {
						return fmt.Errorf("give --prompt or --prompts, not both")
					}
					if opts.Prompts, err = readPrompts(prompts); err != nil {
						return err
					}
				}
				if rec, err = carve.Carve(model.Module, model.Tokenizer, opts); err != nil {
					return err
				}
			} else {
				if err := languageFlagsUnset(cmd, model, "prompt", "prompts", "steps", "tokenizer"); err != nil {
					return err
				}
				opts := carve.CallOptions{Inputs: given, InputSets: mi.sets, Seed: seed, Keep: keep, Pipeline: pipe, Progress: carve.ProgressBar(os.Stderr, "carving")}
				if rec, err = carve.CarveCalls(model.Module, opts); err != nil {
					return err
				}
			}
			n, err := rec.Write(out)
			if err != nil {
				return err
			}
			fmt.Printf("calls seen %d, unique cases kept %d (%d content keys, keep %d), bytes written %d to %s\n",
				rec.Stats.Calls, rec.Stats.Kept, rec.Stats.Keys, rec.Keep, n, out)
			fmt.Printf("cases per op: %s\n", carve.OpCounts(rec.Cases))
			if len(rec.Sets) > 1 {
				fmt.Printf("input sets %d (deduplicated together); cases per set: %s\n", len(rec.Sets), casesPerSet(rec))
			}
			if len(rec.Sets) > 1 && len(rec.Inputs) > 0 {
				for _, set := range rec.Sets {
					fmt.Printf("set %s:\n%s", set.Name, describeInputs(set.Inputs))
				}
			} else {
				fmt.Print(describeInputs(rec.Inputs))
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&tokPath, "tokenizer", "", "tokenizer file (llama2.c tok*.bin); GGUF files carry their own")
	f.StringVar(&prompt, "prompt", "", "text to run through a language model")
	f.StringVar(&prompts, "prompts", "", "file of prompts, one a line, each run through a language model (cases deduplicated over all)")
	f.IntVar(&steps, "steps", 64, "positions to process, prompt included (0 or more than the context: the context length)")
	f.IntVar(&keep, "keep", 1, "cases kept per content key")
	f.StringVarP(&out, "output", "o", "", "the test bundle folder to write")
	f.StringVar(&pipeline, "pipeline", "", "pass pipeline YAML (default: the built-in one); the probe pass is added")
	f.Uint64Var(&seed, "seed", 1, "seed of the random inputs of a model that is not a language model")
	mi.registerInputs(f)
	mi.registerSets(f)
	mi.registerShapes(f)
	mi.quantize.register(f)
	rootCmd.AddCommand(cmd)
}

// readPrompts reads a file of prompts, one a line (blank lines are
// skipped; a line's trailing \r is dropped).
func readPrompts(path string) ([]string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--prompts: %w", err)
	}
	var out []string
	for _, line := range strings.Split(string(data), "\n") {
		if line = strings.TrimSuffix(line, "\r"); strings.TrimSpace(line) != "" {
			out = append(out, line)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("--prompts %s: no prompts (want one a line)", path)
	}
	return out, nil
}

// casesPerSet counts the kept cases each input set contributed.
func casesPerSet(rec *carve.Recording) string {
	counts := make([]int, len(rec.Sets))
	for _, c := range rec.Cases {
		if c.Set < len(counts) {
			counts[c.Set]++
		}
	}
	parts := make([]string, len(counts))
	for i, n := range counts {
		parts[i] = fmt.Sprint(n)
	}
	return strings.Join(parts, ", ")
}
