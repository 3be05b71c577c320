package migrate

import (
	"fmt"

	"github.com/tapml/tapml/carve"
	"github.com/tapml/tapml/ir"
	"github.com/tapml/tapml/runtime"
	"github.com/tapml/tapml/runtime/llm"
	"github.com/tapml/tapml/tensor"
)

// A workload is what every run of a migration does with the model: the
// greedy generation of a prompt (a language model, generation), or one
// call of each function on fixed inputs (any other model, calls). Each
// call of the model (a forward, a function call) is one step; the driver's
// step counter follows it so that hooks know which call they see.
type workload interface {
	// funcs are the functions the runs call, in the candidates' order.
	funcs() []string
	// run runs the model once on exec. With force nil it is the
	// reference run; otherwise it repeats force's calls (teacher forcing).
	run(exec *runtime.Executor, force *Trace, step *int) (*Trace, error)
	// record makes the same calls on a probed module's recorder (carving
	// the suspects) and returns what it generated (nil for calls).
	record(rec *carve.Recorder) ([]int, error)
	// describe fills in what the runs were in a recording (prompt and
	// steps, or seed and inputs).
	describe(r *carve.Recording)
}

// Trace is what one run produced, per call of the model: for a language
// model the tokens fed, the logits and the greedy next token; for any
// other model each function's results.
type Trace struct {
	Funcs   []string           // function each call ran
	Calls   [][]int            // language models: tokens fed to each forward (the prompt first)
	Logits  [][]float32        // language models: logits after each forward
	Greedy  []int              // language models: argmax of each forward's logits
	Outputs [][]*tensor.Tensor // other models: the results of each call
	Names   [][]string         // other models: the names of the results (carve.ResultName)
}

// Generated returns the tokens the trace generated: the greedy token of
// each forward, up to (not including) the first that ends generation.
func (t *Trace) Generated(isEOG func(int) bool) []int {
	var out []int
	for _, g := range t.Greedy {
		if isEOG(g) {
			break
		}
		out = append(out, g)
	}
	return out
}

// generation is the workload of a language model: greedy decoding of a
// prompt for a number of positions.
type generation struct {
	tok    llm.Tokenizer
	prompt string
	steps  int
}

func (g *generation) funcs() []string { return []string{"prefill", "decode"} }

func (g *generation) run(exec *runtime.Executor, force *Trace, step *int) (*Trace, error) {
	s, err := llm.NewSession(exec)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	tr := &Trace{}
	forward := func(tokens []int) error {
		fn := "decode"
		if len(tokens) > 1 {
			fn = "prefill"
		}
		*step = len(tr.Calls)
		logits, err := s.Forward(tokens)
		if err != nil {
			return fmt.Errorf("%s at position %d: %w", fn, s.Pos, err)
		}
		tr.Calls = append(tr.Calls, tokens)
		tr.Funcs = append(tr.Funcs, fn)
		tr.Logits = append(tr.Logits, logits)
		tr.Greedy = append(tr.Greedy, llm.Argmax(logits))
		return nil
	}
	if force != nil {
		for _, c := range force.Calls {
			if err := forward(c); err != nil {
				return tr, err
			}
		}
		return tr, nil
	}
	steps := g.steps
	if steps <= 0 || steps > s.MaxSeq {
		steps = s.MaxSeq
	}
	ids := g.tok.Encode(g.prompt, true, false)
	if len(ids) == 0 {
		return nil, fmt.Errorf("the prompt encodes to no tokens")
	}
	if len(ids) > steps {
		ids = ids[:steps] // as carving does: the prompt is cut to steps
	}
	if err := forward(ids); err != nil {
		return nil, err
	}
	for s.Pos < steps {
		next := tr.Greedy[len(tr.Greedy)-1]
		if g.tok.IsEOG(next) {
			break
		}
		if err := forward([]int{next}); err != nil {
			return nil, err
		}
	}
	return tr, nil
}

func (g *generation) record(rec *carve.Recorder) ([]int, error) {
	return rec.Generate(g.tok, g.prompt, g.steps, nil)
}

func (g *generation) describe(r *carve.Recording) { r.Prompt, r.Steps = g.prompt, g.steps }

// calls is the workload of a model that is not a language model: each
// function called once, in module order, on arguments fixed when the
// driver starts (given values, files, or seeded random ones, as `tapmlc
// run` makes them).
type calls struct {
	fns   []string
	args  [][]*tensor.Tensor // per function
	infos []carve.InputInfo
	seed  uint64
}

// newCalls prepares the arguments of every function of m.
func newCalls(m *ir.Module, given map[string]carve.Input, seed uint64) (*calls, error) {
	fns, err := carve.Funcs(m, nil)
	if err != nil {
		return nil, err
	}
	if err := carve.CheckInputs(m, fns, given); err != nil {
		return nil, err
	}
	c := &calls{fns: fns, seed: seed}
	rng := carve.NewRand(seed)
	for _, fn := range fns {
		args, infos, err := carve.Arguments(m.Func(fn), given, rng)
		if err != nil {
			return nil, err
		}
		c.args = append(c.args, args)
		c.infos = append(c.infos, infos...)
	}
	return c, nil
}

func (c *calls) funcs() []string { return c.fns }

func (c *calls) run(exec *runtime.Executor, _ *Trace, step *int) (*Trace, error) {
	tr := &Trace{}
	for i, fn := range c.fns {
		*step = i
		res, err := carve.CallOnHost(exec, fn, c.args[i])
		if err != nil {
			return tr, fmt.Errorf("@%s: %w", fn, err)
		}
		names := make([]string, len(res))
		for k := range res {
			names[k] = carve.ResultName(exec.Module.Func(fn), k)
		}
		tr.Funcs = append(tr.Funcs, fn)
		tr.Outputs = append(tr.Outputs, res)
		tr.Names = append(tr.Names, names)
	}
	return tr, nil
}

func (c *calls) record(rec *carve.Recorder) ([]int, error) {
	for i, fn := range c.fns {
		if err := rec.CallHost(fn, c.args[i]); err != nil {
			return nil, err
		}
	}
	return nil, nil
}

func (c *calls) describe(r *carve.Recording) { r.Seed, r.Inputs = c.seed, c.infos }
