package msl

import (
	"bytes"
	_ "embed"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/tapml/tapml/ir"
)

// stubHeader is stub/metal_stdlib, the header the syntax check compiles
// kernels against.
//
//go:embed stub/metal_stdlib
var stubHeader []byte

// StubHeader returns the stub metal_stdlib of the syntax check (for tools
// that run the check themselves).
func StubHeader() []byte { return bytes.Clone(stubHeader) }

// CheckCompiler is the compiler the syntax check runs.
const CheckCompiler = "clang-14"

// ErrNoCompiler is returned (wrapped) by Check when clang-14 is missing.
var ErrNoCompiler = errors.New("msl: clang-14 is not installed (scripts/setup.sh installs it); the MSL syntax check needs it")

// CheckArgs are clang-14's arguments of the syntax check, before the
// include folder and the file: MSL parsed as C++ for OpenCL 1.0 with no
// OpenCL header (only the stub declares library functions), warnings as
// errors.
var CheckArgs = []string{"-x", "clcpp", "-cl-std=clc++1.0", "-cl-no-stdinc", "-fsyntax-only", "-Wall", "-Werror"}

// Check runs the approximate MSL syntax check on Linux: clang-14 parses
// src as C++ for OpenCL against the stub metal_stdlib (see the package
// doc). It catches undeclared names, type errors, misspelt attributes and
// Metal library functions used with the wrong types, but not everything
// the Metal compiler would reject; real checks need macOS (`xcrun metal`).
// name labels the source in messages. The error holds clang's diagnostics.
func Check(name string, src []byte) error {
	errs, err := CheckAll([]Source{{Name: name, Src: src}})
	if err != nil {
		return err
	}
	return errs[0]
}

// Source is one kernel source for CheckAll.
type Source struct {
	Name string
	Src  []byte
}

// checkBatch is the number of kernels CheckAll parses in one clang run.
const checkBatch = 64

// CheckAll runs Check on many sources and returns one error per source
// (nil for those that pass), or an error when the check cannot run at all
// (ErrNoCompiler). Starting clang once per kernel is slow, so up to 64
// kernels are parsed as one file, each in its own namespace with its entry
// renamed by a macro; when that batch fails, each of its kernels is checked
// alone, unchanged, so every error names its kernel.
func CheckAll(srcs []Source) ([]error, error) {
	clang, err := exec.LookPath(CheckCompiler)
	if err != nil {
		return nil, ErrNoCompiler
	}
	dir, err := os.MkdirTemp("", "tapml-msl-check-")
	if err != nil {
		return nil, fmt.Errorf("msl: check: %w", err)
	}
	defer os.RemoveAll(dir)
	if err := os.WriteFile(filepath.Join(dir, "metal_stdlib"), stubHeader, 0o644); err != nil {
		return nil, fmt.Errorf("msl: check: %w", err)
	}
	run := func(file string, src []byte) (string, bool, error) {
		path := filepath.Join(dir, file)
		if err := os.WriteFile(path, src, 0o644); err != nil {
			return "", false, fmt.Errorf("msl: check: %w", err)
		}
		args := append(append([]string{}, CheckArgs...), "-I", dir, path)
		out, err := exec.Command(clang, args...).CombinedOutput()
		if _, exit := err.(*exec.ExitError); err != nil && !exit {
			return "", false, fmt.Errorf("msl: check: running %s: %w", CheckCompiler, err)
		}
		msg := strings.TrimSpace(strings.ReplaceAll(string(out), dir+string(filepath.Separator), ""))
		return msg, err == nil, nil
	}
	errs := make([]error, len(srcs))
	alone := func(i int) error {
		msg, ok, err := run(fileName(srcs[i].Name, i), srcs[i].Src)
		if err != nil {
			return err
		}
		if !ok {
			errs[i] = fmt.Errorf("msl: %s does not pass the syntax check:\n%s", srcs[i].Name, msg)
		}
		return nil
	}
	for lo := 0; lo < len(srcs); lo += checkBatch {
		hi := min(lo+checkBatch, len(srcs))
		if hi-lo > 1 {
			var b bytes.Buffer
			b.WriteString("#include <metal_stdlib>\n")
			for i := lo; i < hi; i++ {
				fmt.Fprintf(&b, "#define %s %s_%d\nnamespace tapml_k%d {\n", Entry, Entry, i, i)
				for _, line := range strings.SplitAfter(string(srcs[i].Src), "\n") {
					if strings.HasPrefix(strings.TrimSpace(line), "#include <metal_stdlib>") {
						continue
					}
					b.WriteString(line)
				}
				fmt.Fprintf(&b, "\n} // namespace tapml_k%d\n#undef %s\n", i, Entry)
			}
			if _, ok, err := run(fmt.Sprintf("batch%d.metal", lo), b.Bytes()); err != nil {
				return nil, err
			} else if ok {
				continue
			}
		}
		for i := lo; i < hi; i++ {
			if err := alone(i); err != nil {
				return nil, err
			}
		}
	}
	return errs, nil
}

// fileName is a file name for source i that keeps its name readable.
func fileName(name string, i int) string {
	base := strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_', r == '-', r == '.':
			return r
		}
		return '_'
	}, name)
	if base == "" {
		base = "kernel"
	}
	return fmt.Sprintf("%s.%d.metal", strings.TrimSuffix(base, ".metal"), i)
}

// CheckModules generates the MSL kernel of every node of ms whose input and
// output shapes are all static (meta ops included: they run as copies) and
// runs the syntax check on all of them at once. It returns the number of
// kernels checked and an error naming every node whose kernel could not be
// generated or does not pass. Nodes with symbolic shapes (a prefill
// function's) are skipped: their kernels exist only for concrete lengths.
// Carved one-op case modules (carve.Bundle.Module) are all static, so
// CheckModules is the metal target's `tapmlc test` where no Metal exists.
func CheckModules(ms []*ir.Module, opts Options) (int, error) {
	var srcs []Source
	var errs []error
	for mi, m := range ms {
		for _, f := range m.Funcs {
		nodes:
			for _, n := range f.Nodes {
				in := make([]ir.Type, len(n.Inputs))
				for i, v := range n.Inputs {
					if !v.Type.Shape.IsStatic() {
						continue nodes
					}
					in[i] = v.Type
				}
				out := make([]ir.Type, len(n.Outputs))
				for i, v := range n.Outputs {
					if !v.Type.Shape.IsStatic() {
						continue nodes
					}
					out[i] = v.Type
				}
				k, err := Generate(n, in, out, opts)
				if err != nil {
					errs = append(errs, fmt.Errorf("module %d (%s): func @%s: %w", mi, m.Name, f.Name, err))
					continue
				}
				srcs = append(srcs, Source{Name: fmt.Sprintf("%s.%s.%s", m.Name, f.Name, k.Name()), Src: k.Source})
			}
		}
	}
	res, err := CheckAll(srcs)
	if err != nil {
		return 0, err
	}
	for _, e := range res {
		if e != nil {
			errs = append(errs, e)
		}
	}
	return len(srcs), errors.Join(errs...)
}
