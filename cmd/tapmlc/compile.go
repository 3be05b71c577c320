package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"github.com/tapml/tapml/artifact"
	"github.com/tapml/tapml/codegen"
	"github.com/tapml/tapml/codegen/msl"
	"github.com/tapml/tapml/codegen/wgsl"
	"github.com/tapml/tapml/frontend/tokenizer/sentencepiece"
	"github.com/tapml/tapml/ir"
	"github.com/tapml/tapml/passes"
	"github.com/tapml/tapml/runtime"
	"github.com/tapml/tapml/runtime/metal"
	"github.com/tapml/tapml/runtime/target"
)

// kernelEmitter returns the ahead-of-time kernel generator of a target, or
// nil for targets that need none (cpu). Metal kernels take precision p
// (Metal has half; the metal device runs the same kernels at p); webgpu's
// are f32 (naga rejects f16).
func kernelEmitter(t string, p runtime.Precision) artifact.KernelEmitter {
	switch t {
	case "webgpu":
		return &artifact.StaticEmitter{Ext: "wgsl", Generate: func(n *ir.Node, in, out []ir.Type) (*codegen.Kernel, error) {
			return wgsl.Generate(n, in, out, wgsl.Options{Limits: wgsl.DefaultLimits()})
		}}
	case "metal": // .metal files; prefill kernels (symbolic seq) are generated at run time
		o := metal.KernelOptions(msl.DefaultLimits(), p) // what run --target metal generates
		return &artifact.StaticEmitter{Ext: "metal", Generate: func(n *ir.Node, in, out []ir.Type) (*codegen.Kernel, error) {
			return msl.Generate(n, in, out, o)
		}}
	}
	return nil
}

func init() {
	var (
		tgt, pipeline, out, printAfter, tokPath string
		probe, timePasses, stats                bool
		mi                                      modelInputs
		prec                                    precisionFlags
	)
	cmd := &cobra.Command{
		Use:   "compile [MODEL] --target T [--pipeline p.yaml] [--probe] -o build/",
		Short: "Lower a model for a target and write a build folder",
		Long: `Import a model (recognised by content), run the pass pipeline for a target and
write a build folder: model.tir (the lowered IR), weights.safetensors,
kernels/ (one file per generated kernel; none for cpu), the tokenizer when the
model has one, and manifest.yaml (provenance, pipeline, target, checksums).
The folder is written atomically: a failed compile leaves no half folder and
keeps an existing build. 'tapmlc run build/' runs it.

The pipeline is passes/default.yaml unless --pipeline gives a YAML file of
the same form. --probe adds the probe pass (one probe after every op), for
carving. An ONNX model's dynamic dims need --input-shape NAME=D0,D1,...
(the build has static shapes). Without MODEL the built-in tiny model is
compiled.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if out == "" {
				return fmt.Errorf("compile: -o DIR is required")
			}
			known := false
			for _, n := range target.Names {
				known = known || n == tgt
			}
			if !known {
				return fmt.Errorf("compile: unknown target %q (known: %s)", tgt, strings.Join(target.Names, ", "))
			}
			model, _, err := loadModel(args, tokPath, &mi)
			if err != nil {
				return err
			}
			source := "builtin"
			if model.Format != "builtin" {
				if source, err = filepath.Abs(model.Path); err != nil {
					return err
				}
			}
			// Builds store llama2.c-format tokenizers only; others (a
			// Hugging Face tokenizer.json) are left out with a note.
			tok, _ := model.Tokenizer.(*sentencepiece.Tokenizer)
			if model.Tokenizer != nil && tok == nil {
				fmt.Fprintf(os.Stderr, "note: the model's %T tokenizer is not stored in the build; run it with --tokenizer\n", model.Tokenizer)
			}
			if prec.p.Normal() != runtime.F32 {
				switch tgt {
				case "metal":
				case "webgpu":
					fmt.Fprintf(os.Stderr, "webgpu: %s; the kernels compute in f32\n", target.WebGPUNoF16)
				default:
					fmt.Fprintf(os.Stderr, "note: a %s build keeps no precision; run it with --compute %s\n", tgt, prec.p.Compute)
				}
			}
			limit, err := target.CompileLimit(tgt)
			if err != nil {
				return err
			}
			if limit > 0 {
				st, err := passes.SplitWeights(model.Module, limit)
				if err != nil {
					return fmt.Errorf("%s: %w", model.Path, err)
				}
				if st.Weights > 0 {
					fmt.Fprintf(os.Stderr, "split %d weights over %d bytes (the %s target's buffer limit) into %d shards\n", st.Weights, limit, tgt, st.Shards)
				}
			}
			t := tgt
			rep, man, err := artifact.Compile(model.Module, artifact.CompileOptions{
				Target:     tgt,
				Supports:   func(op ir.Op) bool { return target.Supports(t, op) },
				Pipeline:   pipeline,
				Probe:      probe,
				Out:        out,
				Source:     source,
				Kernels:    kernelEmitter(tgt, prec.p),
				Tokenizer:  tok,
				PrintAfter: printAfter,
				PrintTo:    os.Stderr,
			})
			if rep != nil && timePasses {
				rep.WriteTimes(os.Stderr)
			}
			if rep != nil && stats {
				rep.WriteStats(os.Stderr)
			}
			if err != nil {
				return err
			}
			nodes := passes.NodeCount(model.Module)
			if len(rep.Steps) > 0 {
				nodes = rep.Steps[len(rep.Steps)-1].NodesAfter
			}
			fmt.Fprintf(os.Stderr, "wrote %s for %s: %d nodes, %d kernel files\n", out, tgt, nodes, len(man.Kernels))
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&tgt, "target", "cpu", "target to compile for: "+strings.Join(target.Names, ", "))
	f.StringVar(&pipeline, "pipeline", "", "pass pipeline YAML file (default: the built-in passes/default.yaml)")
	f.BoolVar(&probe, "probe", false, "insert a probe after every op (for carving tests)")
	f.StringVarP(&out, "output", "o", "", "build folder to write")
	f.StringVar(&printAfter, "print-after", "", "print the IR to stderr after a pass (NAME, NAME,NAME or all)")
	f.BoolVar(&timePasses, "time-passes", false, "print each pass's time and node counts to stderr")
	f.BoolVar(&stats, "stats", false, "print the node count of every op before and after the pipeline to stderr")
	f.StringVar(&tokPath, "tokenizer", "", "tokenizer file for formats that don't carry one (llama2.c tok*.bin); stored in the build")
	mi.registerShapes(f)
	mi.quantize.register(f)
	prec.register(f, true)
	rootCmd.AddCommand(cmd)
}
