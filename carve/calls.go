package carve

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/tapml/tapml/ir"
	"github.com/tapml/tapml/passes"
	"github.com/tapml/tapml/runtime"
	"github.com/tapml/tapml/tensor"
)

// Models that are not language models (ONNX vision models, any module
// whose functions do not follow the prefill/decode convention) are carved
// from one call of each of their functions (usually just @main) on inputs
// that are given (files, tensors) or seeded random values:
//
//   - float inputs, pattern "uniform" (the default): values uniform in
//     [-1, 1) from a xorshift32 generator (x ^= x<<13; x ^= x>>17;
//     x ^= x<<5; value = x/2^31 - 1) seeded with the seed (mod 2^32; 0 is
//     taken as 1), one stream for every random input in parameter order,
//     functions in module order. These are the values scripts/ort_run.mjs
//     gives ONNX Runtime for the same seed and inputs listed in the same
//     order, so a carved model can be checked against ONNX Runtime.
//   - float inputs of shape [N, C, H, W], pattern "text": a page of
//     text-like marks (a light background of 1.5, lines of dark -1.5
//     glyph-like strokes, noise of ±0.1, the same in every channel), as
//     ort_run.mjs's ":text": what a text detector such as PP-OCR det
//     reacts to (on uniform noise it finds nothing).
//   - integer inputs: zeros (valid indices for any table); bool: false.
//     Give real values from a file.

// IsLanguageModel reports whether m follows the language-model calling
// convention of runtime/llm (functions @prefill and @decode), which Carve
// runs; other modules are carved with CarveCalls.
func IsLanguageModel(m *ir.Module) bool {
	return m.Func("prefill") != nil && m.Func("decode") != nil
}

// Input patterns of seeded random inputs.
const (
	PatternUniform = "uniform"
	PatternText    = "text"
	PatternZeros   = "zeros"
)

// Patterns lists the patterns of random inputs.
var Patterns = []string{PatternUniform, PatternText, PatternZeros}

// Input says where the values of one function argument come from: a
// tensor, a file (see ReadInput), or else seeded random values of a
// pattern ("" is uniform for floats, zeros for integers).
type Input struct {
	Tensor  *tensor.Tensor
	File    string
	Pattern string
}

// InputInfo records an argument of a carving run in the bundle manifest.
type InputInfo struct {
	Func   string `yaml:"func" json:"func"`
	Name   string `yaml:"name" json:"name"`
	DType  string `yaml:"dtype" json:"dtype"`
	Shape  []int  `yaml:"shape,flow" json:"shape"`
	Source string `yaml:"source" json:"source"`
}

// Rand is the generator of seeded inputs: xorshift32, mapped to [-1, 1),
// the generator of scripts/ort_run.mjs.
type Rand struct {
	Seed  uint64
	state uint32
}

// NewRand returns a generator seeded with seed (mod 2^32; 0 is taken as 1).
func NewRand(seed uint64) *Rand {
	s := uint32(seed)
	if s == 0 {
		s = 1
	}
	return &Rand{Seed: seed, state: s}
}

// Next returns the next value, uniform in [-1, 1).
func (r *Rand) Next() float64 {
	s := r.state
	s ^= s << 13
	s ^= s >> 17
	s ^= s << 5
	r.state = s
	return float64(s)/2147483648 - 1
}

// Tensor returns a random tensor of type t (static shape) in a pattern.
func (r *Rand) Tensor(t ir.Type, pattern string) (*tensor.Tensor, error) {
	if !t.Shape.IsStatic() {
		return nil, fmt.Errorf("random values need a static shape, got %s", t)
	}
	sizes := t.Shape.Sizes()
	if n := t.Shape.NumElements(); n > maxInputElements {
		return nil, fmt.Errorf("%s has more than 2^31 elements", t)
	}
	x := tensor.New(t.DType, sizes)
	if pattern == "" {
		pattern = PatternUniform
		if !t.DType.IsFloat() {
			pattern = PatternZeros
		}
	}
	switch pattern {
	case PatternZeros:
	case PatternUniform:
		if !t.DType.IsFloat() {
			return nil, fmt.Errorf("pattern %s is for float inputs, not %s", pattern, t)
		}
		for i := range x.NumElements() {
			x.SetFloat64At(i, r.Next())
		}
	case PatternText:
		if !t.DType.IsFloat() || len(sizes) != 4 {
			return nil, fmt.Errorf("pattern text is for float images [N, C, H, W], not %s", t)
		}
		r.textPage(x)
	default:
		return nil, fmt.Errorf("unknown input pattern %q (known: %s)", pattern, strings.Join(Patterns, ", "))
	}
	return x, nil
}

// textPage fills an [N, C, H, W] tensor with lines of glyph-like strokes,
// exactly as scripts/ort_run.mjs's textPage does (the same doubles, in the
// same order).
func (r *Rand) textPage(x *tensor.Tensor) {
	n, c, h, w := x.Shape[0], x.Shape[1], x.Shape[2], x.Shape[3]
	img := make([]float32, h*w)
	for i := range img {
		img[i] = 1.5
	}
	floor := func(v float64) int { return int(math.Floor(v)) }
	lineH := max(8, h/8)
	for y0 := lineH / 2; y0+lineH <= h; y0 += 2 * lineH {
		xx0 := w/16 + floor((r.Next()+1)*float64(w)/16)
		end := w - floor((r.Next()+1)*float64(w)/8)
		for xx0 < end {
			gw := max(3, floor(float64(lineH)*(0.5+(r.Next()+1)/4)))
			for range 3 {
				vertical := r.Next() > 0
				sx := xx0 + floor((r.Next()+1)/2*float64(gw-2))
				sy := y0 + floor((r.Next()+1)/2*float64(lineH-2))
				ln := floor(float64(lineH) * (0.4 + (r.Next()+1)/4))
				for k := 0; k < ln; k++ {
					for t := 0; t < 2; t++ {
						var yy, xx int
						if vertical {
							yy, xx = y0+k*(lineH-1)/ln, sx+t
						} else {
							yy, xx = sy+t, xx0+k*(gw-1)/ln
						}
						if yy < h && xx < w {
							img[yy*w+xx] = -1.5
						}
					}
				}
			}
			xx0 += gw + 2
			if r.Next() > 0.8 {
				xx0 += gw
			}
		}
	}
	for i := 0; i < n*c; i++ {
		for j := 0; j < h*w; j++ {
			x.SetFloat64At(i*h*w+j, float64(img[j])+0.1*r.Next())
		}
	}
}

// Arguments returns the arguments of one call of f: each parameter's
// Input from given (by parameter name; the name "" stands for the only
// parameter of a function that has one), or random values from rng. It
// also returns what each argument is, for the manifest.
func Arguments(f *ir.Function, given map[string]Input, rng *Rand) ([]*tensor.Tensor, []InputInfo, error) {
	args := make([]*tensor.Tensor, len(f.Params))
	infos := make([]InputInfo, len(f.Params))
	for i, p := range f.Params {
		in, ok := given[p.Name]
		if !ok {
			in, ok = given[positional(i)]
		}
		if !ok && len(f.Params) == 1 {
			in, ok = given[""]
		}
		var (
			t   *tensor.Tensor
			src string
			err error
		)
		switch {
		case ok && in.Tensor != nil:
			t, err = FitInput(in.Tensor, p.Type)
			src = "given"
			if in.File != "" {
				src = "file " + in.File
			}
		case ok && in.File != "":
			t, err = ReadInput(in.File, p.Type)
			src = "file " + in.File
		default:
			if !p.Type.Shape.IsStatic() {
				return nil, nil, fmt.Errorf("input %s of @%s has the shape %s, with symbolic dims: random values need a static shape; give its values", p.Name, f.Name, p.Type)
			}
			t, err = rng.Tensor(p.Type, in.Pattern)
			pat := in.Pattern
			if pat == "" {
				pat = PatternUniform
				if !p.Type.DType.IsFloat() {
					pat = PatternZeros
				}
			}
			switch pat {
			case PatternUniform:
				src = fmt.Sprintf("random: uniform [-1, 1), xorshift32 seed %d", rng.Seed)
			case PatternText:
				src = fmt.Sprintf("random: text page, xorshift32 seed %d", rng.Seed)
			default:
				src = pat
			}
		}
		if err != nil {
			return nil, nil, fmt.Errorf("input %s of @%s: %w", p.Name, f.Name, err)
		}
		args[i] = t
		infos[i] = InputInfo{Func: f.Name, Name: p.Name, DType: t.DType.String(), Shape: slices.Clone(t.Shape), Source: src}
	}
	return args, infos, nil
}

// CheckInputs returns an error when given names an input that none of the
// functions fns of m has (the name "" must find a function of one
// parameter).
func CheckInputs(m *ir.Module, fns []string, given map[string]Input) error {
	names := map[string]bool{}
	var all []string
	single := false
	for _, fn := range fns {
		f := m.Func(fn)
		if f == nil {
			continue
		}
		single = single || len(f.Params) == 1
		for _, p := range f.Params {
			if !names[p.Name] {
				all = append(all, p.Name)
			}
			names[p.Name] = true
		}
	}
	for name := range given {
		if k, ok := positionalIndex(name); ok && !names[name] {
			if k >= len(all) {
				return fmt.Errorf("%s names input %d, but the model has %d inputs (%s)", name, k, len(all), strings.Join(all, ", "))
			}
			continue
		}
		if name == "" && !single {
			return fmt.Errorf("an input without a name, but the model has several inputs (%s): name it", strings.Join(all, ", "))
		}
		if name != "" && !names[name] {
			return fmt.Errorf("the model has no input %q (its inputs: %s)", name, strings.Join(all, ", "))
		}
	}
	return nil
}

// positional is the name that stands for a function's k-th input where an
// input file has no name of its own: input_<k>, as in the ONNX model
// zoo's test_data_set folders (an input really named so takes precedence).
func positional(k int) string { return fmt.Sprintf("input_%d", k) }

// positionalIndex reads positional's name back.
func positionalIndex(name string) (int, bool) {
	rest, ok := strings.CutPrefix(name, "input_")
	if !ok {
		return 0, false
	}
	k, err := strconv.Atoi(rest)
	return k, err == nil && k >= 0
}

// Funcs returns the functions to call: fns when given (each must exist),
// else every function of m in module order.
func Funcs(m *ir.Module, fns []string) ([]string, error) {
	if len(fns) == 0 {
		for _, f := range m.Funcs {
			fns = append(fns, f.Name)
		}
		return fns, nil
	}
	for _, fn := range fns {
		if m.Func(fn) == nil {
			var have []string
			for _, f := range m.Funcs {
				have = append(have, "@"+f.Name)
			}
			return nil, fmt.Errorf("module %q has no function @%s (it has %s)", m.Name, fn, strings.Join(have, ", "))
		}
	}
	return fns, nil
}

// CallOptions configure CarveCalls.
type CallOptions struct {
	// Funcs are the functions called once each, in order (nil: every
	// function of the module, in module order).
	Funcs []string
	// Inputs gives arguments by parameter name (see Arguments); the others
	// are seeded random values from Seed. InputSets, when set, carve
	// several input sets, each a call of every function, their values
	// over Inputs', deduplicated together (see SetInfo).
	Inputs    map[string]Input
	InputSets []InputSet
	Seed      uint64
	// Keep, Pipeline, Probe, Policy and Compute are as in Options.
	Keep     int
	Pipeline *passes.Pipeline
	Probe    passes.Options
	Policy   Policy
	Compute  ir.DType
	// Progress, when set, is called after each call with the calls done
	// and the calls to make.
	Progress func(done, total int)
}

// CarveCalls carves a model that is not a language model: it compiles m
// with probes, calls each function once on the CPU reference on the given
// or seeded inputs, and returns the recorded, deduplicated cases. The
// recording lists each argument's source (Recording.Inputs).
func CarveCalls(m *ir.Module, o CallOptions) (*Recording, error) {
	fns, err := Funcs(m, o.Funcs)
	if err != nil {
		return nil, err
	}
	sets := o.InputSets
	if len(sets) == 0 {
		sets = []InputSet{{}}
	}
	for i := range sets {
		sets[i].Inputs = mergeInputs(o.Inputs, sets[i].Inputs)
		if err := CheckInputs(m, fns, sets[i].Inputs); err != nil {
			return nil, setError(sets, i, err)
		}
	}
	pm, names, err := Compile(m, o.Pipeline, true, o.Probe)
	if err != nil {
		return nil, err
	}
	r := NewRecorderAt(pm, o.Keep, o.Policy, true, o.Compute)
	defer r.Close()
	rng := NewRand(o.Seed)
	rec := &Recording{Module: pm, Model: m.Name, Keep: r.Keep, Pipeline: names, Seed: o.Seed}
	calls := len(fns) * len(sets)
	for si, set := range sets {
		r.Set = si
		var infos []InputInfo
		for i, fn := range fns {
			f := pm.Func(fn)
			if f == nil {
				return nil, fmt.Errorf("the compiled module has no function @%s", fn)
			}
			args, in, err := Arguments(f, set.Inputs, rng)
			if err != nil {
				return nil, setError(sets, si, err)
			}
			infos = append(infos, in...)
			if err := r.CallHost(fn, args); err != nil {
				return nil, setError(sets, si, err)
			}
			if o.Progress != nil {
				o.Progress(si*len(fns)+i+1, calls)
			}
		}
		if si == 0 {
			rec.Inputs = infos
		}
		if len(sets) > 1 {
			rec.Sets = append(rec.Sets, SetInfo{Name: set.Name, Inputs: infos})
		}
	}
	rec.Cases, rec.Stats = r.Cases(), r.Stats
	return rec, nil
}

// mergeInputs returns base with over's inputs added or replacing.
func mergeInputs(base, over map[string]Input) map[string]Input {
	out := map[string]Input{}
	for k, v := range base {
		out[k] = v
	}
	for k, v := range over {
		out[k] = v
	}
	return out
}

// setError names the input set of an error when there are several.
func setError(sets []InputSet, i int, err error) error {
	if len(sets) == 1 {
		return err
	}
	return fmt.Errorf("input set %s: %w", sets[i].Name, err)
}

// CallHost records one call of function fn on host arguments (uploaded
// for the call and freed after it, with its results).
func (r *Recorder) CallHost(fn string, args []*tensor.Tensor) error {
	bufs := make([]*runtime.Buffer, 0, len(args))
	defer func() {
		for _, b := range bufs {
			b.Dev.Free(b)
		}
	}()
	for _, a := range args {
		b, err := r.Exec.Upload("", a)
		if err != nil {
			return err
		}
		bufs = append(bufs, b)
	}
	res, err := r.Call(fn, bufs...)
	if err != nil {
		return fmt.Errorf("@%s: %w", fn, err)
	}
	freeResults(r.Module.Func(fn), res, bufs)
	return nil
}

// ResultName names result k of function f in reports and file names: its
// value's name, or "output<k>" when the value is named by number (%10).
func ResultName(f *ir.Function, k int) string {
	if k < len(f.Results) && strings.Trim(f.Results[k].Name, "0123456789") != "" {
		return f.Results[k].Name
	}
	return fmt.Sprintf("output%d", k)
}

// CallOnHost calls function fn of exec's module with host tensors and
// returns its results on the host. The arguments are uploaded to exec's
// default device and freed after the call.
func CallOnHost(exec *runtime.Executor, fn string, args []*tensor.Tensor) ([]*tensor.Tensor, error) {
	bufs := make([]*runtime.Buffer, 0, len(args))
	defer func() {
		for _, b := range bufs {
			b.Dev.Free(b)
		}
	}()
	for _, a := range args {
		b, err := exec.Upload("", a)
		if err != nil {
			return nil, err
		}
		bufs = append(bufs, b)
	}
	res, err := exec.Call(fn, bufs...)
	if err != nil {
		return nil, err
	}
	defer freeResults(exec.Module.Func(fn), res, bufs)
	out := make([]*tensor.Tensor, len(res))
	for i, b := range res {
		if out[i], err = runtime.Download(b); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// freeResults frees the result buffers of a call of f, except arguments,
// weights and buffers returned twice.
func freeResults(f *ir.Function, res, args []*runtime.Buffer) {
	for i, b := range res {
		if isAmong(b, args) || isAmong(b, res[:i]) || f == nil || i >= len(f.Results) || f.Results[i].IsWeight() {
			continue
		}
		b.Dev.Free(b)
	}
}
