package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"
	"github.com/tapml/tapml/carve"
	"github.com/tapml/tapml/frontend"
	"github.com/tapml/tapml/passes"
)

func init() {
	var (
		tokPath  string
		prompt   string
		steps    int
		keep     int
		out      string
		pipeline string
	)
	cmd := &cobra.Command{
		Use:   "carve [MODEL] --prompt TEXT --steps N -o tests/",
		Short: "Carve per-operator tests from a reference run",
		Long: `Compile MODEL with probes, run it on the CPU reference through prefill and
the decode steps of --prompt (greedy), and record every op call: its inputs,
attributes and reference outputs. Calls are deduplicated by content key (op,
attributes, dtypes, shapes and a coarse fingerprint of the values); the first
--keep of each key are kept. The cases are written as a test bundle (see
'tapmlc test'), atomically: a failure leaves -o as it was.

MODEL is recognised by content, as for 'tapmlc run'; without it the built-in
tiny model is carved. The summary (calls seen, cases kept, bytes written)
goes to stdout.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if out == "" {
				return fmt.Errorf("carve: -o FOLDER is required")
			}
			var model *frontend.Model
			var err error
			if len(args) == 0 {
				model, err = frontend.BuiltinTiny()
			} else {
				model, err = frontend.Load(args[0], frontend.Options{Tokenizer: tokPath})
			}
			if err != nil {
				return err
			}
			if model.Tokenizer == nil {
				return fmt.Errorf("%s has no tokenizer: give one with --tokenizer", model.Path)
			}
			opts := carve.Options{Prompt: prompt, Steps: steps, Keep: keep, Progress: carve.ProgressBar(os.Stderr, "carving")}
			if pipeline != "" {
				if opts.Pipeline, err = passes.Load(pipeline); err != nil {
					return err
				}
			}
			rec, err := carve.Carve(model.Module, model.Tokenizer, opts)
			if err != nil {
				return err
			}
			n, err := rec.Write(out)
			if err != nil {
				return err
			}
			fmt.Printf("calls seen %d, unique cases kept %d (%d content keys, keep %d), bytes written %d to %s\n",
				rec.Stats.Calls, rec.Stats.Kept, rec.Stats.Keys, rec.Keep, n, out)
			fmt.Printf("cases per op: %s\n", carve.OpCounts(rec.Cases))
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&tokPath, "tokenizer", "", "tokenizer file (llama2.c tok*.bin); GGUF files carry their own")
	f.StringVar(&prompt, "prompt", "", "text to run through the model")
	f.IntVar(&steps, "steps", 64, "positions to process, prompt included (0 or more than the context: the context length)")
	f.IntVar(&keep, "keep", 1, "cases kept per content key")
	f.StringVarP(&out, "output", "o", "", "the test bundle folder to write")
	f.StringVar(&pipeline, "pipeline", "", "pass pipeline YAML (default: the built-in one); the probe pass is added")
	rootCmd.AddCommand(cmd)
}
