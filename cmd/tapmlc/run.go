package main

import (
	"bufio"
	"fmt"
	"os"

	"github.com/spf13/cobra"
	"github.com/tapml/tapml/frontend"
	"github.com/tapml/tapml/runtime"
	"github.com/tapml/tapml/runtime/llm"
	"github.com/tapml/tapml/runtime/target"
)

func init() {
	var (
		tokPath     string
		prompt      string
		steps       int
		temperature float64
		topP        float64
		seed        uint64
		tgt         target.Flags
	)
	cmd := &cobra.Command{
		Use:   "run [MODEL]",
		Short: "Generate text with a language model on a target",
		Long: `Generate text with a language model, as llama2.c's run.c does: the prompt
(after BOS) is echoed, then tokens are generated until --steps positions are
processed or BOS is sampled. Only the text goes to stdout.

MODEL is a llama2.c checkpoint, a GGUF file, an IR text file written by
'tapmlc import', a Hugging Face model folder (config.json, safetensors
weights, tokenizer.json), or a build folder from 'tapmlc compile'; files are
recognised by content. Without MODEL a tiny built-in LLaMA with random weights and a
byte-level tokenizer is used, so the command works with nothing downloaded.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
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
				return fmt.Errorf("%s has no tokenizer: give one with --tokenizer", args[0])
			}
			dev, err := tgt.Open()
			if err != nil {
				return err
			}
			defer dev.Close()
			exec := runtime.NewExecutor(model.Module, dev)
			defer exec.Close()
			sess, err := llm.NewSession(exec)
			if err != nil {
				return err
			}
			defer sess.Close()
			out := bufio.NewWriter(os.Stdout)
			defer out.Flush()
			sampler := llm.NewSampler(temperature, topP, seed)
			_, err = llm.Generate(sess, model.Tokenizer, prompt, steps, sampler, func(piece string) error {
				if _, err := out.WriteString(piece); err != nil {
					return err
				}
				return out.Flush() // stream tokens as they come, like run.c
			})
			if err != nil {
				return err
			}
			_, err = out.WriteString("\n")
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&tokPath, "tokenizer", "", "tokenizer file (llama2.c tok*.bin); GGUF files carry their own")
	f.StringVar(&prompt, "prompt", "", "text to start from")
	f.IntVar(&steps, "steps", 256, "positions to process, prompt included (0 or more than the context: the context length)")
	f.Float64Var(&temperature, "temperature", 1.0, "sampling temperature; 0 is greedy (argmax)")
	f.Float64Var(&topP, "top-p", 0.9, "nucleus sampling threshold (used when temperature > 0)")
	f.Uint64Var(&seed, "seed", 1, "random seed for sampling")
	tgt.Register(f)
	rootCmd.AddCommand(cmd)
}
