package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"

	"github.com/spf13/cobra"
	"github.com/tapml/tapml/carve"
	"github.com/tapml/tapml/codegen/msl"
	"github.com/tapml/tapml/ir"
	"github.com/tapml/tapml/runtime"
	"github.com/tapml/tapml/runtime/metal"
	"github.com/tapml/tapml/runtime/target"
	"github.com/tapml/tapml/tensor"
)

// Exit statuses of `tapmlc test`.
const (
	testPassed   = 0 // every selected case passed
	testFailed   = 1 // a case failed, varied between runs, or could not run
	testError    = 2 // the command could not run (flags, bundle, device)
	testNotFired = 3 // injected faults never changed an output: nothing was tested
)

// testFlags are the flags of `tapmlc test`.
type testFlags struct {
	run, jsonPath, junitPath, htmlPath string
	tolerances, reference, dump        string
	injects                            []string
	repeat                             int
	time                               bool
	tgt                                target.Flags
}

func init() {
	fl := &testFlags{}
	cmd := &cobra.Command{
		Use:   "test BUNDLE --target T [--run REGEX] [--reference T] [--time] [--repeat N] [--inject op=KIND,fault=NAME] [--dump DIR] [--json F] [--junit F] [--html F] [--tolerances F]",
		Short: "Replay carved operator tests on a target",
		Long: `Replay each case of a test bundle (written by 'tapmlc carve') alone on the
target, as a one-op function, and compare its outputs with the reference's:
the recorded CPU outputs, or --reference TARGET's (the case run there too,
to compare two targets directly). The table (case, op, provenance, max abs
and rel error, ULP, cosine, result) goes to stdout, and for each failing
case where in its output grid the error sits; --json, --junit and --html
write reports too (the HTML shows got against want and a heat map of the
error for failing cases). Tolerances come from the bundle (a policy per op
kind, dtype and reduction length) and can be overridden with --tolerances
FILE (YAML, see the README).

--time measures each case's kernel warm (compiled and uploaded before, the
launch and its wait timed, median of several runs) and prints the time per
op, ranked by total. --repeat N runs each case N times and fails a case
whose outputs differ between runs (a race), saying where the differences
are. --dump DIR writes the inputs, got and want of every failing case as
.npy files. Faults a bundle records (a migration's regression bundle under
--inject) are planted again on targets that take them; --inject plants more.
Each case of a faulted node also runs without its fault, to tell whether
the fault fired.

Exit status: 0 every selected case passed; 1 a case failed, varied between
runs or could not run; 2 the command could not run (bad flags, bundle,
device); 3 injected faults never fired (nothing was tested).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			code, err := runTest(args[0], fl)
			if err != nil {
				fmt.Fprintln(os.Stderr, "tapmlc test:", err)
				os.Exit(testError)
			}
			if code != testPassed {
				os.Exit(code)
			}
			return nil
		},
	}
	cmd.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		fmt.Fprintln(os.Stderr, "tapmlc test:", err)
		os.Exit(testError)
		return err
	})
	f := cmd.Flags()
	f.StringVar(&fl.run, "run", "", "replay only cases whose id, op or provenance matches this regular expression")
	f.StringVar(&fl.jsonPath, "json", "", "write a JSON report to this file")
	f.StringVar(&fl.junitPath, "junit", "", "write a JUnit XML report to this file")
	f.StringVar(&fl.htmlPath, "html", "", "write an HTML report (plots by op, got vs want and error heat maps of failing cases, table, IR nodes) to this file")
	f.StringVar(&fl.tolerances, "tolerances", "", "YAML file overriding tolerances (by op, kind, case, key, provenance regex)")
	f.StringVar(&fl.reference, "reference", "", "compare with this target's outputs (the case run there too) instead of the recorded CPU ones")
	f.StringVar(&fl.dump, "dump", "", "write the inputs, got and want of each failing case as .npy files in this folder")
	registerInject(f, &fl.injects)
	f.IntVar(&fl.repeat, "repeat", 1, "run each case this many times; a case whose outputs differ between runs fails")
	f.BoolVar(&fl.time, "time", false, "measure each case's warm kernel time and print the time per op")
	fl.tgt.Register(f)
	rootCmd.AddCommand(cmd)
}

func runTest(bundle string, fl *testFlags) (int, error) {
	opts := carve.TestOptions{Target: fl.tgt.Target, Progress: carve.ProgressBar(os.Stderr, "testing"),
		Replay: carve.ReplayOptions{Repeat: fl.repeat, Time: fl.time, Keep: fl.dump != "" || fl.htmlPath != "",
			Fit: func(m *ir.Module, dev runtime.Device) error { _, err := target.FitWeights(m, dev); return err }}}
	if fl.repeat < 1 {
		return 0, fmt.Errorf("--repeat %d: want 1 or more runs", fl.repeat)
	}
	if fl.run != "" {
		re, err := regexp.Compile(fl.run)
		if err != nil {
			return 0, fmt.Errorf("--run: %w", err)
		}
		opts.Run = re
	}
	if fl.tolerances != "" {
		o, err := carve.LoadOverrides(fl.tolerances)
		if err != nil {
			return 0, err
		}
		opts.Overrides = o
	}
	injs, err := parseInjections(fl.injects, fl.tgt.Target)
	if err != nil {
		return 0, err
	}
	if fl.reference != "" && fl.reference == fl.tgt.Target {
		return 0, fmt.Errorf("--reference %s is the target itself: compare two different targets", fl.reference)
	}
	b, err := carve.Open(bundle)
	if err != nil {
		return 0, err
	}
	defer b.Close()
	// Cases replay at the compute dtype they were carved under.
	if fl.tgt.Precision.Compute, err = b.Compute(); err != nil {
		return 0, err
	}
	dev, err := fl.tgt.Open()
	if errors.Is(err, metal.ErrUnsupported) {
		return testPassed, checkMetal(b, opts, fl.tgt.Precision)
	}
	if err != nil {
		return 0, err
	}
	defer dev.Close()
	if fl.reference != "" {
		ref, err := openReference(fl.reference, fl.tgt)
		if err != nil {
			return 0, err
		}
		defer ref.Close()
		opts.Replay.Reference = ref
	}
	if opts.Faults, err = caseFaults(b, opts, injs, fl.tgt.Target, dev); err != nil {
		return 0, err
	}
	rep, err := b.Test(dev, opts)
	if err != nil {
		return 0, err
	}
	if err := rep.WriteTable(os.Stdout); err != nil {
		return 0, err
	}
	if err := rep.WriteFiles(fl.jsonPath, fl.junitPath, fl.htmlPath); err != nil {
		return 0, err
	}
	if fl.dump != "" {
		n, err := dumpFailures(fl.dump, rep)
		if err != nil {
			return 0, err
		}
		fmt.Fprintf(os.Stderr, "wrote the inputs, got and want of %d failing cases to %s\n", n, fl.dump)
	}
	switch {
	case len(rep.Results) == 0:
		return 0, fmt.Errorf("--run %q selects none of the %d cases", fl.run, rep.Total)
	case !rep.OK():
		fmt.Fprintf(os.Stderr, "tapmlc test: %d of %d cases failed on %s\n", rep.Failed, len(rep.Results), fl.tgt.Target)
		return testFailed, nil
	case rep.NotFired():
		fmt.Fprintln(os.Stderr, "tapmlc test: the injected faults never fired: the faulted kernels computed exactly what the fault-free ones do, so nothing was tested")
		return testNotFired, nil
	}
	return testPassed, nil
}

// caseFaults are the faults to plant: those the bundle records, and those
// of --inject, an op's in every selected case of it whose kernel the
// fault changes on this target (it must change one), a node's in its
// cases. On a target that takes no faults, recorded ones are left out
// with a note.
func caseFaults(b *carve.Bundle, opts carve.TestOptions, injs []target.Injection, tgt string, dev runtime.Device) ([]carve.Fault, error) {
	faults := b.Manifest.Faults
	if len(faults) > 0 && target.Injectable(tgt, dev) != nil {
		fmt.Fprintf(os.Stderr, "tapmlc test: %s records %d injected faults; the %s target takes none, so they are not planted\n", b.Dir, len(faults), tgt)
		faults = nil
	}
	planted := map[int]bool{}
	for _, f := range faults {
		planted[f.Node] = true
	}
	for _, in := range injs {
		n := 0
		for _, c := range b.Manifest.Cases {
			if !opts.Selected(c) || (in.Node > 0 && c.Node != in.Node) || (in.Node == 0 && c.Op != in.Op.String()) {
				continue
			}
			if planted[c.Node] {
				n++ // another case of a node already faulted
				continue
			}
			m, err := b.Module(c)
			if err != nil {
				return nil, err
			}
			f := m.Func(carve.CaseFunc)
			node := f.Nodes[len(f.Nodes)-1]
			if target.FaultApplies(tgt, dev, node, valueTypes(node.Inputs), valueTypes(node.Outputs), in.Fault) != nil {
				continue
			}
			faults = append(faults, carve.Fault{Node: c.Node, Op: c.Op, Fault: in.Fault})
			planted[c.Node] = true
			n++
		}
		if n == 0 {
			return nil, fmt.Errorf("--inject %s: the fault applies to none of the selected cases' kernels", in)
		}
	}
	return faults, nil
}

func valueTypes(vs []*ir.Value) []ir.Type {
	out := make([]ir.Type, len(vs))
	for i, v := range vs {
		out[i] = v.Type
	}
	return out
}

// dumpFailures writes the inputs, got and want of every failing case that
// kept its tensors as DIR/<case>.in<k>.npy, <case>.out<k>.got.npy and
// <case>.out<k>.want.npy (the inputs that are not weights).
func dumpFailures(dir string, rep *carve.Report) (int, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return 0, err
	}
	n := 0
	for _, x := range rep.Results {
		if len(x.Got) == 0 {
			continue
		}
		n++
		files := map[string]*tensor.Tensor{}
		for k, t := range x.In {
			files[fmt.Sprintf("%s.in%d.npy", x.Case.ID, k)] = t
		}
		for k := range x.Got {
			files[fmt.Sprintf("%s.out%d.got.npy", x.Case.ID, k)] = x.Got[k]
			files[fmt.Sprintf("%s.out%d.want.npy", x.Case.ID, k)] = x.Want[k]
		}
		for name, t := range files {
			if err := carve.WriteNPYFile(filepath.Join(dir, name), t); err != nil {
				return n, err
			}
		}
	}
	return n, nil
}

// checkMetal is `tapmlc test --target metal` where Metal cannot run: every
// selected case's kernel, at precision p (the bundle's, as the metal
// device would run it), goes through the approximate MSL syntax check
// (clang-14 against a stub metal_stdlib); numerics need a Mac.
func checkMetal(b *carve.Bundle, opts carve.TestOptions, p runtime.Precision) error {
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
	n, err := msl.CheckModules(mods, metal.KernelOptions(msl.DefaultLimits(), p))
	if err != nil {
		return err
	}
	fmt.Printf("%d Metal kernels (compute %s) of %d cases pass the syntax check; numerics were not run (needs macOS)\n", n, p.Normal(), len(mods))
	return nil
}
