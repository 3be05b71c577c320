package main

import (
	"errors"
	"fmt"
	"os"
	"regexp"

	"github.com/spf13/cobra"
	"github.com/tapml/tapml/carve"
	"github.com/tapml/tapml/codegen/msl"
	"github.com/tapml/tapml/ir"
	"github.com/tapml/tapml/runtime/metal"
	"github.com/tapml/tapml/runtime/target"
)

func init() {
	var (
		run        string
		jsonPath   string
		junitPath  string
		htmlPath   string
		tolerances string
		tgt        target.Flags
	)
	cmd := &cobra.Command{
		Use:   "test BUNDLE --target T [--run REGEX] [--json F] [--junit F] [--html F] [--tolerances F]",
		Short: "Replay carved operator tests on a target",
		Long: `Replay each case of a test bundle (written by 'tapmlc carve') alone on the
target, as a one-op function, and compare its outputs with the reference's.
The table (case, op, provenance, max abs and rel error, ULP, cosine, result)
goes to stdout; --json, --junit and --html write reports too. Tolerances come
from the bundle (a policy per op kind, dtype and reduction length) and can be
overridden with --tolerances FILE (YAML). The exit code is 0 only when every
selected case passes.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts := carve.TestOptions{Target: tgt.Target, Progress: carve.ProgressBar(os.Stderr, "testing")}
			if run != "" {
				re, err := regexp.Compile(run)
				if err != nil {
					return fmt.Errorf("--run: %w", err)
				}
				opts.Run = re
			}
			if tolerances != "" {
				o, err := carve.LoadOverrides(tolerances)
				if err != nil {
					return err
				}
				opts.Overrides = o
			}
			b, err := carve.Open(args[0])
			if err != nil {
				return err
			}
			defer b.Close()
			dev, err := tgt.Open()
			if errors.Is(err, metal.ErrUnsupported) {
				return checkMetal(b, opts)
			}
			if err != nil {
				return err
			}
			defer dev.Close()
			rep, err := b.Test(dev, opts)
			if err != nil {
				return err
			}
			if err := rep.WriteTable(os.Stdout); err != nil {
				return err
			}
			if err := rep.WriteFiles(jsonPath, junitPath, htmlPath); err != nil {
				return err
			}
			if len(rep.Results) == 0 {
				return fmt.Errorf("--run %q selects none of the %d cases", run, rep.Total)
			}
			if !rep.OK() {
				return fmt.Errorf("%d of %d cases failed on %s", rep.Failed, len(rep.Results), tgt.Target)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&run, "run", "", "replay only cases whose id, op or provenance matches this regular expression")
	f.StringVar(&jsonPath, "json", "", "write a JSON report to this file")
	f.StringVar(&junitPath, "junit", "", "write a JUnit XML report to this file")
	f.StringVar(&htmlPath, "html", "", "write an HTML report (plots, table, IR nodes) to this file")
	f.StringVar(&tolerances, "tolerances", "", "YAML file overriding tolerances (by op, kind, case, key, provenance regex)")
	tgt.Register(f)
	rootCmd.AddCommand(cmd)
}

// checkMetal is `tapmlc test --target metal` where Metal cannot run: every
// selected case's kernel goes through the approximate MSL syntax check
// (clang-14 against a stub metal_stdlib); numerics need a Mac.
func checkMetal(b *carve.Bundle, opts carve.TestOptions) error {
	var mods []*ir.Module
	for _, c := range b.Manifest.Cases {
		if !opts.Selected(c) {
			continue
		}
		m, err := b.Module(c)
		if err != nil {
			return err
		}
		mods = append(mods, m)
	}
	if len(mods) == 0 {
		return fmt.Errorf("--run selects none of the %d cases", len(b.Manifest.Cases))
	}
	fmt.Fprintln(os.Stderr, "tapmlc: Metal runs only on macOS; checking the kernels' syntax instead (clang-14, approximate)")
	n, err := msl.CheckModules(mods, msl.Options{})
	if err != nil {
		return err
	}
	fmt.Printf("%d Metal kernels of %d cases pass the syntax check; numerics were not run (needs macOS)\n", n, len(mods))
	return nil
}
