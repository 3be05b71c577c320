package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/tapml/tapml/carve"
	"github.com/tapml/tapml/frontend"
	"github.com/tapml/tapml/frontend/onnx"
	"github.com/tapml/tapml/ir"
	"github.com/tapml/tapml/tensor"
)

// Models that are not language models (ONNX models) take tensors: their
// dynamic dims get sizes from --input-shape NAME=D0,D1,... (or from the
// shape of an --input file), and run and carve read their values with
// --input NAME=FILE or generate them (--seed).

const inputShapeHelp = "shape of an ONNX model's input, NAME=D0,D1,... (repeatable); needed for dynamic dims (a leading batch dim defaults to 1)"

const inputHelp = "values of a model input, NAME=FILE (repeatable; NAME= may be left out when the model has one input): " +
	"a .npy file, an ONNX TensorProto .pb, or raw little-endian values of the input's dtype in its shape; " +
	"NAME=VALUE (a number, true, false or [a, b, ...]) fixes an ONNX model's input at import, so what depends on it folds (an If on a flag); " +
	"NAME=@uniform, @text (an [N,C,H,W] page of text-like marks, for text detectors) or @zeros generate them. " +
	"Inputs not given are seeded random values (uniform in [-1, 1), floats; zeros, integers)"

// modelInputs holds the --input-shape, --input and --inputs flags, and
// --quantize.
type modelInputs struct {
	shapes    []string
	inputs    []string
	hasInputs bool // the command has --input
	setsDir   string
	sets      []carve.InputSet          // read from setsDir by loadModel
	fixed     map[string]*tensor.Tensor // --input NAME=VALUE: fixed at import
	quantize  quantizeFlag
}

func (m *modelInputs) registerShapes(f *pflag.FlagSet) {
	f.StringArrayVar(&m.shapes, "input-shape", nil, inputShapeHelp)
}

func (m *modelInputs) registerSets(f *pflag.FlagSet) {
	f.StringVar(&m.setsDir, "inputs", "", "folder of several input sets, one subfolder each holding a file per input (NAME.npy, NAME.pb, raw; "+
		"input_K.pb as in the ONNX model zoo's test_data_set_N folders): every set is carved, and their calls deduplicated together")
}

func (m *modelInputs) registerInputs(f *pflag.FlagSet) {
	f.StringArrayVar(&m.inputs, "input", nil, inputHelp)
	m.hasInputs = true
}

// shapeMap parses --input-shape.
func (m *modelInputs) shapeMap() (map[string][]int64, error) {
	out := map[string][]int64{}
	for _, s := range m.shapes {
		name, dims, ok := strings.Cut(s, "=")
		name = strings.TrimSpace(name)
		if !ok || name == "" {
			return nil, fmt.Errorf("--input-shape %q: want NAME=D0,D1,... (e.g. x=1,3,48,320)", s)
		}
		var shape []int64
		for _, d := range strings.Split(dims, ",") {
			if d = strings.TrimSpace(d); d == "" {
				continue
			}
			n, err := strconv.ParseInt(d, 10, 64)
			if err != nil || n < 1 {
				return nil, fmt.Errorf("--input-shape %q: dim %q is not a positive integer", s, d)
			}
			shape = append(shape, n)
		}
		if _, dup := out[name]; dup {
			return nil, fmt.Errorf("--input-shape: %s given twice", name)
		}
		out[name] = shape
	}
	return out, nil
}

// inputMap parses --input: files with a shape (.npy, .pb) are read now, so
// their shapes can fix the model's dims; raw files are read once the
// input's type is known.
func (m *modelInputs) inputMap() (map[string]carve.Input, error) {
	out := map[string]carve.Input{}
	for _, s := range m.inputs {
		name, val, ok := strings.Cut(s, "=")
		if !ok {
			name, val = "", s
		}
		name = strings.TrimSpace(name)
		if val == "" {
			return nil, fmt.Errorf("--input %q: want NAME=FILE or NAME=@PATTERN", s)
		}
		if _, dup := out[name]; dup {
			if name == "" {
				return nil, fmt.Errorf("--input: several inputs without a name: write NAME=FILE")
			}
			return nil, fmt.Errorf("--input: %s given twice", name)
		}
		if p, ok := strings.CutPrefix(val, "@"); ok {
			if !slices.Contains(carve.Patterns, p) {
				return nil, fmt.Errorf("--input %s: unknown pattern @%s (known: @%s)", s, p, strings.Join(carve.Patterns, ", @"))
			}
			out[name] = carve.Input{Pattern: p}
			continue
		}
		in := carve.Input{File: val}
		if _, err := os.Stat(val); err != nil {
			lit, ok := carve.ParseValue(val)
			if !ok {
				return nil, fmt.Errorf("--input %s: %w (or give a value: a number, true, false, or [a, b, ...])", s, err)
			}
			if name == "" {
				return nil, fmt.Errorf("--input %s: a fixed value needs the input's name: NAME=%s", s, val)
			}
			if m.fixed == nil {
				m.fixed = map[string]*tensor.Tensor{}
			}
			m.fixed[name] = lit
			continue
		}
		if carve.HasShape(val) {
			t, err := carve.ReadTensor(val)
			if err != nil {
				return nil, fmt.Errorf("--input %s: %w", s, err)
			}
			in.Tensor = t
		}
		out[name] = in
	}
	return out, nil
}

// loadModel loads MODEL (args[0]; none: the built-in tiny model) with the
// shapes of --input-shape and of shaped --input files, quantized as
// --quantize says, and returns it with the parsed --input values.
func loadModel(args []string, tokPath string, mi *modelInputs) (*frontend.Model, map[string]carve.Input, error) {
	model, given, err := loadModelAsStored(args, tokPath, mi)
	if err == nil {
		err = mi.quantize.apply(model)
	}
	return model, given, err
}

// loadModelAsStored is loadModel without --quantize.
func loadModelAsStored(args []string, tokPath string, mi *modelInputs) (*frontend.Model, map[string]carve.Input, error) {
	shapes, err := mi.shapeMap()
	if err != nil {
		return nil, nil, err
	}
	given, err := mi.inputMap()
	if err != nil {
		return nil, nil, err
	}
	if mi.setsDir != "" {
		if mi.sets, err = carve.ReadInputSets(mi.setsDir); err != nil {
			return nil, nil, fmt.Errorf("--inputs: %w", err)
		}
	}
	if len(args) == 0 {
		if len(shapes) > 0 || len(mi.fixed) > 0 {
			return nil, nil, fmt.Errorf("--input-shape and fixed --input values apply to ONNX models, not to the built-in model")
		}
		model, err := frontend.BuiltinTiny()
		return model, given, err
	}
	path := args[0]
	format := ""
	if st, err := os.Stat(path); err == nil && !st.IsDir() {
		if format, err = frontend.Sniff(path); err != nil {
			return nil, nil, err
		}
	}
	if format != "onnx" {
		if len(shapes) > 0 {
			what := "a " + format + " file"
			if format == "" {
				what = "not an ONNX model file"
			}
			return nil, nil, fmt.Errorf("--input-shape applies to ONNX model files; %s is %s, whose shapes are fixed", path, what)
		}
		if len(mi.fixed) > 0 {
			return nil, nil, fmt.Errorf("an --input fixed to a value applies to ONNX model files (for an input file, give its path)")
		}
		model, err := frontend.Load(path, frontend.Options{Tokenizer: tokPath})
		return model, given, err
	}
	// The shapes of .npy/.pb inputs fix the dims --input-shape leaves open
	// (those of --input, then the first input set's).
	fromFile := map[string]string{}
	sources := []map[string]carve.Input{given}
	if len(mi.sets) > 0 {
		sources = append(sources, mi.sets[0].Inputs)
	}
	for _, src := range sources {
		for name, in := range src {
			if name != "" && in.Tensor != nil && shapes[name] == nil {
				s := make([]int64, len(in.Tensor.Shape))
				for i, d := range in.Tensor.Shape {
					s[i] = int64(d)
				}
				shapes[name] = s
				fromFile[name] = in.File
			}
		}
	}
	for name := range mi.fixed {
		delete(shapes, name) // a fixed input is no parameter
	}
	model, err := frontend.Load(path, frontend.Options{Tokenizer: tokPath, ONNX: onnx.Options{Shapes: shapes, Constants: mi.fixed}})
	if err != nil {
		return nil, nil, shapeHint(err, fromFile, mi.hasInputs)
	}
	var names []string
	for _, f := range model.Module.Funcs {
		for _, p := range f.Params {
			names = append(names, p.Name)
		}
	}
	for name := range shapes {
		if slices.Contains(names, name) {
			continue
		}
		switch f, ok := fromFile[name]; {
		case !ok:
			return nil, nil, fmt.Errorf("--input-shape %s: %s has no input %q (its inputs: %s)", name, path, name, strings.Join(names, ", "))
		case len(mi.sets) > 0 && strings.HasPrefix(f, mi.setsDir):
			if !strings.HasPrefix(name, "input_") {
				return nil, nil, fmt.Errorf("--inputs: %s: %s has no input %q (its inputs: %s)", f, path, name, strings.Join(names, ", "))
			}
		default:
			return nil, nil, fmt.Errorf("--input %s=%s: %s has no input %q (its inputs: %s)", name, f, path, name, strings.Join(names, ", "))
		}
	}
	return model, given, nil
}

var (
	shapesRef  = regexp.MustCompile(`Options\.Shapes\["([^"]*)"\]`)
	graphInput = regexp.MustCompile(`graph input "([^"]*)"`)
)

// shapeHint rewrites the ONNX importer's advice (which names its Options)
// in terms of the command line's flags.
func shapeHint(err error, fromFile map[string]string, hasInputs bool) error {
	msg := err.Error()
	if !strings.Contains(msg, "Options.") {
		return err
	}
	name := "NAME"
	if m := graphInput.FindStringSubmatch(msg); m != nil {
		name = m[1]
	}
	flag := fmt.Sprintf("--input-shape %s=D0,D1,...", name)
	if hasInputs {
		flag += fmt.Sprintf(" (or --input %s=FILE.npy, whose shape is used)", name)
	}
	msg = strings.ReplaceAll(msg, "give sizes with Options.Shapes or Options.Dims", "give its shape with "+flag)
	msg = strings.ReplaceAll(msg, "give one with Options.Shapes", "give one with "+flag)
	msg = shapesRef.ReplaceAllStringFunc(msg, func(s string) string {
		n := shapesRef.FindStringSubmatch(s)[1]
		if f, ok := fromFile[n]; ok {
			return fmt.Sprintf("the shape of --input %s=%s", n, f)
		}
		return "--input-shape " + n
	})
	return fmt.Errorf("%s", msg)
}

// languageFlagsUnset returns an error naming the first of the language
// model flags that was given for model, which is not a language model.
func languageFlagsUnset(cmd *cobra.Command, model *frontend.Model, flags ...string) error {
	for _, f := range flags {
		if cmd.Flags().Changed(f) {
			return fmt.Errorf("--%s is for language models; %s has no @prefill/@decode (%s): it runs on its inputs (--input NAME=FILE, or seeded random values)",
				f, model.Path, funcSignatures(model.Module))
		}
	}
	return nil
}

// describeInputs writes one line per argument of a carved or run call.
func describeInputs(infos []carve.InputInfo) string {
	var b strings.Builder
	for _, in := range infos {
		shape := make([]string, len(in.Shape))
		for i, d := range in.Shape {
			shape[i] = strconv.Itoa(d)
		}
		fmt.Fprintf(&b, "input %s of @%s: %s[%s], %s\n", in.Name, in.Func, in.DType, strings.Join(shape, ", "), in.Source)
	}
	return b.String()
}

// outputFile is the .npy file name of a function's result in --output.
func outputFile(dir, fn, name string, multiFunc bool, taken map[string]bool) string {
	clean := strings.Map(func(r rune) rune {
		if r == '.' || r == '-' || r == '_' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' {
			return r
		}
		return '_'
	}, name)
	if multiFunc {
		clean = fn + "." + clean
	}
	base := clean
	for i := 2; taken[clean]; i++ {
		clean = fmt.Sprintf("%s.%d", base, i)
	}
	taken[clean] = true
	return filepath.Join(dir, clean+".npy")
}

// funcSignatures lists a module's functions with their parameters.
func funcSignatures(m *ir.Module) string {
	var sigs []string
	for _, f := range m.Funcs {
		var ps []string
		for _, p := range f.Params {
			ps = append(ps, p.Name+": "+p.Type.String())
		}
		sigs = append(sigs, "@"+f.Name+"("+strings.Join(ps, ", ")+")")
	}
	return strings.Join(sigs, ", ")
}
