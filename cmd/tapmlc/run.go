package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/tapml/tapml/carve"
	"github.com/tapml/tapml/frontend"
	"github.com/tapml/tapml/runtime"
	"github.com/tapml/tapml/runtime/llm"
	"github.com/tapml/tapml/runtime/target"
	"github.com/tapml/tapml/tensor"
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
		prec        precisionFlags
		mi          modelInputs
		outDir      string
		verbose     bool
	)
	cmd := &cobra.Command{
		Use:   "run [MODEL]",
		Short: "Generate text with a language model, or run any model on its inputs, on a target",
		Long: `Generate text with a language model, as llama2.c's run.c does: the prompt
(after BOS, when the tokenizer prepends one) is echoed, then tokens are
generated until --steps positions are processed or an end-of-generation token
is sampled: the model's EOS ids (a Hugging Face folder's generation_config.json
or config.json eos_token_id; GGUF's EOS, EOT and EOM ids), or BOS for llama2.c
checkpoints, as run.c stops. Only the text goes to stdout.

A model that is not a language model (no @prefill/@decode: an ONNX model's
@main) is called once per function on its inputs: --input NAME=FILE (.npy,
ONNX TensorProto .pb, or raw little-endian values of the input's dtype and
shape; NAME= may be left out for a single input), NAME=@uniform, @text or
@zeros, and seeded random values (--seed) for the others, as 'tapmlc carve'
makes them. Dynamic dims need --input-shape NAME=D0,D1,... unless an --input
file gives the shape. stdout gets each output's dtype, shape, range, argmax
and first values; --output DIR writes each output as DIR/NAME.npy.

MODEL is a llama2.c checkpoint, a GGUF file, an IR text file written by
'tapmlc import', a Hugging Face model folder (config.json, safetensors
weights, tokenizer.json), or a build folder from 'tapmlc compile'; files are
recognised by content. Without MODEL a tiny built-in LLaMA with random weights and a
byte-level tokenizer is used, so the command works with nothing downloaded.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			model, given, err := loadModel(args, tokPath, &mi)
			if err != nil {
				return err
			}
			buildTarget(cmd, model, &tgt)
			tgt.Precision = prec.p
			if !carve.IsLanguageModel(model.Module) {
				if err := languageFlagsUnset(cmd, model, "prompt", "steps", "temperature", "top-p", "tokenizer"); err != nil {
					return err
				}
				return runCalls(model, given, seed, &tgt, outDir)
			}
			if len(mi.inputs) > 0 || outDir != "" {
				return fmt.Errorf("--input and --output are for models without @prefill/@decode; %s is a language model: give --prompt", model.Path)
			}
			if model.Tokenizer == nil {
				return fmt.Errorf("%s has no tokenizer: give one with --tokenizer", args[0])
			}
			// The caches hold --steps positions, not the header's context.
			if err := llm.FitContext(model.Module, steps); err != nil {
				return err
			}
			dev, err := tgt.Open()
			if err != nil {
				return err
			}
			defer dev.Close()
			mod, fit, err := target.ForDevice(model.Module, dev, tgt.Target, model.Target != "")
			if err != nil {
				return fmt.Errorf("%s: %w", model.Path, err)
			}
			model.Module = mod
			if verbose {
				fmt.Fprintln(os.Stderr, fit)
			}
			exec := runtime.NewExecutor(model.Module, dev)
			exec.Capture = true // decode steps replay where the device records them
			defer exec.Close()
			// Weights go up first, so that the prompt's time is the prompt's.
			start := time.Now()
			if err := exec.UploadWeights("prefill", "decode"); err != nil {
				return err
			}
			upload := time.Since(start)
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
			if _, err := out.WriteString("\n"); err != nil {
				return err
			}
			out.Flush()
			reportSpeed(os.Stderr, upload, sess.Stats)
			if verbose {
				out.Flush()
				reportMemory(os.Stderr, exec, dev, tgt.Precision)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&tokPath, "tokenizer", "", "tokenizer file (llama2.c tok*.bin); GGUF files carry their own")
	f.StringVar(&prompt, "prompt", "", "text to start from")
	f.IntVar(&steps, "steps", 256, "positions to process, prompt included (0 or more than the context: the context length)")
	f.Float64Var(&temperature, "temperature", 1.0, "sampling temperature; 0 is greedy (argmax)")
	f.Float64Var(&topP, "top-p", 0.9, "nucleus sampling threshold (used when temperature > 0)")
	f.Uint64Var(&seed, "seed", 1, "random seed for sampling (a language model) or of the random inputs (any other model)")
	f.BoolVarP(&verbose, "verbose", "v", false, "print the device's buffer limits and the weights split to fit them, and after generating the weight bytes on the device (by storage dtype) and its buffer memory, when it reports it, on stderr")
	f.StringVar(&outDir, "output", "", "folder to write each output of a model that is not a language model to, as NAME.npy")
	mi.registerInputs(f)
	mi.registerShapes(f)
	mi.quantize.register(f)
	prec.register(f, true)
	tgt.Register(f)
	rootCmd.AddCommand(cmd)
}

// reportSpeed prints what llama.cpp and llama2.c print after the text: the
// time the weights took to upload, the prompt's and the decode steps'
// tokens per second, and the part of those times spent compiling kernels
// (a process's first calls of each shape compile them).
func reportSpeed(w io.Writer, upload time.Duration, st llm.Stats) {
	fmt.Fprintf(w, "tapmlc: weights uploaded in %.1f ms\n", ms(upload))
	phase := func(name string, n int, took, compile time.Duration) {
		fmt.Fprintf(w, "tapmlc: %s: %d tokens in %.1f ms, %.2f tokens/s (%.1f ms of it compiling kernels)\n",
			name, n, ms(took), llm.TokensPerSecond(n, took), ms(compile))
	}
	phase("prompt", st.PromptTokens, st.PromptTime, st.PromptCompile)
	if st.DecodeTokens > 0 {
		phase("decode", st.DecodeTokens, st.DecodeTime, st.DecodeCompile)
		fmt.Fprintf(w, "tapmlc: decode without compiling kernels: %.2f tokens/s\n", llm.TokensPerSecond(st.DecodeTokens, st.DecodeTime-st.DecodeCompile))
	}
	fmt.Fprintf(w, "tapmlc: kernels compiled in %.1f ms\n", ms(st.PromptCompile+st.DecodeCompile))
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// buildTarget runs a build folder on the target it was compiled for unless
// --target says otherwise, and says which on stderr.
func buildTarget(cmd *cobra.Command, model *frontend.Model, tgt *target.Flags) {
	switch {
	case model.Target == "":
	case !cmd.Flags().Changed("target"):
		tgt.Target = model.Target
		fmt.Fprintf(os.Stderr, "tapmlc: running %s on %s, the target it was compiled for\n", model.Path, model.Target)
	case tgt.Target != model.Target:
		fmt.Fprintf(os.Stderr, "tapmlc: note: %s was compiled for %s; running it on %s, as --target asks\n", model.Path, model.Target, tgt.Target)
	}
}

// runCalls runs a model that is not a language model: each function once
// on the target, on the given or seeded inputs; a summary of each output
// goes to stdout, and with outDir each output to outDir/NAME.npy.
func runCalls(model *frontend.Model, given map[string]carve.Input, seed uint64, tgt *target.Flags, outDir string) error {
	m := model.Module
	fns, err := carve.Funcs(m, nil)
	if err != nil {
		return err
	}
	if err := carve.CheckInputs(m, fns, given); err != nil {
		return err
	}
	dev, err := tgt.Open()
	if err != nil {
		return err
	}
	defer dev.Close()
	if _, err := target.FitWeights(m, dev); err != nil {
		return fmt.Errorf("%s: %w", model.Path, err)
	}
	exec := runtime.NewExecutor(m, dev)
	defer exec.Close()
	if outDir != "" {
		if err := os.MkdirAll(outDir, 0o755); err != nil {
			return err
		}
	}
	out := bufio.NewWriter(os.Stdout)
	defer out.Flush()
	rng := carve.NewRand(seed)
	taken := map[string]bool{}
	for _, fn := range fns {
		f := m.Func(fn)
		args, infos, err := carve.Arguments(f, given, rng)
		if err != nil {
			return err
		}
		fmt.Fprint(os.Stderr, describeInputs(infos))
		res, err := carve.CallOnHost(exec, fn, args)
		if err != nil {
			return fmt.Errorf("@%s: %w", fn, err)
		}
		for i, t := range res {
			name := carve.ResultName(f, i)
			label := name
			if len(fns) > 1 {
				label = "@" + fn + " " + name
			}
			fmt.Fprint(out, summarize(label, t))
			if outDir != "" {
				path := outputFile(outDir, fn, name, len(fns) > 1, taken)
				if err := carve.WriteNPYFile(path, t); err != nil {
					return err
				}
				fmt.Fprintf(os.Stderr, "wrote %s\n", path)
			}
		}
	}
	return nil
}

// summarize describes a result in two lines: dtype, shape, range, argmax;
// then its first values.
func summarize(name string, t *tensor.Tensor) string {
	n := t.NumElements()
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %s", name, t.Type())
	if n > 0 {
		lo, hi, arg := t.Float64At(0), t.Float64At(0), 0
		for i := 1; i < n; i++ {
			v := t.Float64At(i)
			lo = min(lo, v)
			if v > hi {
				hi, arg = v, i
			}
		}
		fmt.Fprintf(&b, " min %.6g max %.6g argmax %d", lo, hi, arg)
	}
	b.WriteString("\n ")
	const first = 10
	for i := range min(n, first) {
		fmt.Fprintf(&b, " %.6g", t.Float64At(i))
	}
	if n > first {
		fmt.Fprintf(&b, " ... (%d values)", n)
	}
	b.WriteString("\n")
	return b.String()
}
