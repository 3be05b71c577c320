package artifact

import (
	"fmt"
	"io"

	"github.com/tapml/tapml/frontend/tokenizer/sentencepiece"
	"github.com/tapml/tapml/ir"
	"github.com/tapml/tapml/passes"
)

// CompileOptions are the settings of `tapmlc compile`.
type CompileOptions struct {
	Target string // the target's name ("cpu", "webgpu", ...)
	// Supports is the target's kernel table, for the legalize pass.
	Supports func(op ir.Op) bool
	// Pipeline is a pipeline YAML file; "" runs the default pipeline.
	Pipeline string
	// Probe adds the probe pass (before legalize, or at the end) when the
	// pipeline does not run it already.
	Probe bool
	// Out is the build folder to write.
	Out string
	// Source is the model file or folder, recorded with its checksum.
	Source string
	// Kernels generates the target's kernels; nil for targets without
	// ahead-of-time kernels (cpu).
	Kernels KernelEmitter
	// Tokenizer is stored in the build when set.
	Tokenizer *sentencepiece.Tokenizer
	// PrintAfter and PrintTo are passes.RunConfig's.
	PrintAfter string
	PrintTo    io.Writer
}

// LoadPipeline returns the pipeline of opts: the file, or the default, with
// the probe pass added when asked and legalize given the target's table.
func LoadPipeline(opts CompileOptions) (*passes.Pipeline, error) {
	var p *passes.Pipeline
	var err error
	if opts.Pipeline != "" {
		p, err = passes.Load(opts.Pipeline)
	} else {
		p, err = passes.Default()
	}
	if err != nil {
		return nil, err
	}
	if opts.Probe && !p.Has("probe") {
		if err := p.Append("probe", nil, "legalize"); err != nil {
			return nil, err
		}
	}
	if p.Has("legalize") {
		if opts.Supports == nil {
			return nil, fmt.Errorf("compile: no kernel table for target %q", opts.Target)
		}
		if err := p.Set("legalize", "supports", opts.Supports); err != nil {
			return nil, err
		}
		if err := p.Set("legalize", "target", opts.Target); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// Lower returns a copy of m after the default pipeline, legalized for
// target: what a build folder for target holds, without writing one.
// tapmlc run runs a model through it, so that its speed is a build's
// (fusion: fewer kernels per step).
func Lower(m *ir.Module, target string, supports func(ir.Op) bool) (*ir.Module, error) {
	p, err := LoadPipeline(CompileOptions{Target: target, Supports: supports})
	if err != nil {
		return nil, err
	}
	lowered := m.Clone()
	if _, err := p.Run(lowered, passes.RunConfig{}); err != nil {
		return nil, err
	}
	return lowered, nil
}

// Compile runs the pipeline on a copy of m (m is not changed) and writes
// the build folder opts.Out. The report has the per-pass times and node
// counts (--time-passes, --stats).
func Compile(m *ir.Module, opts CompileOptions) (*passes.Report, *Manifest, error) {
	if opts.Out == "" {
		return nil, nil, fmt.Errorf("compile: no output folder")
	}
	p, err := LoadPipeline(opts)
	if err != nil {
		return nil, nil, err
	}
	lowered := m.Clone()
	rep, err := p.Run(lowered, passes.RunConfig{PrintAfter: opts.PrintAfter, PrintTo: opts.PrintTo})
	if err != nil {
		return nil, nil, err
	}
	lowered.Meta["target"] = opts.Target
	man, err := Write(opts.Out, Build{
		Module:    lowered,
		Target:    opts.Target,
		Source:    opts.Source,
		Pipeline:  p.Summary(),
		Probed:    p.Has("probe"),
		Kernels:   opts.Kernels,
		Tokenizer: opts.Tokenizer,
	})
	if err != nil {
		return rep, nil, err
	}
	return rep, man, nil
}
