package carve

import (
	"fmt"
	"sort"
	"strings"

	"github.com/tapml/tapml/ir"
	"github.com/tapml/tapml/passes"
	"github.com/tapml/tapml/runtime"
	"github.com/tapml/tapml/runtime/cpu"
	"github.com/tapml/tapml/runtime/llm"
	"github.com/tapml/tapml/tensor"
)

// Options configure carving.
type Options struct {
	// Prompt is run through prefill; Steps is the number of positions to
	// process, prompt included, as `tapmlc run --steps` counts them (0 or
	// more than the context: the context length). Decoding is greedy.
	// Prompts, when set, replaces Prompt with several prompts, each run
	// the same way, their calls deduplicated together.
	Prompt  string
	Prompts []string
	Steps   int
	// Keep is the number of cases kept per content key (default 1).
	Keep int
	// Pipeline compiles the model (nil: the default pipeline); the probe
	// pass is added before legalize. Probe sets the probe pass's options
	// (ops, kinds, nodes, prov) to carve only some ops.
	Pipeline *passes.Pipeline
	Probe    passes.Options
	// Policy derives each case's tolerance (zero: DefaultPolicy).
	Policy Policy
	// Compute is the compute dtype the cases are carved for: f32 (zero) or
	// f16, under which the reference emulates f16 storage
	// (cpu.Options.Round16) and each case records compute f16 and the f16
	// tolerance (Policy.ForCompute).
	Compute ir.DType
	// Progress, when set, is called after each call of the model with the
	// positions processed and Steps.
	Progress func(done, total int)
}

// Stats count what a carving run saw and kept.
type Stats struct {
	Calls    int `yaml:"calls" json:"calls"`       // op calls run (meta ops not counted)
	Recorded int `yaml:"recorded" json:"recorded"` // op calls whose inputs and outputs were all observed
	Keys     int `yaml:"keys" json:"keys"`         // distinct content keys
	Kept     int `yaml:"kept" json:"kept"`         // cases kept
	Steps    int `yaml:"steps" json:"steps"`       // calls of the model's functions (prefill, decode steps)
}

// Compile runs the pipeline (nil: the default one) with the probe pass
// added before legalize (probe options as given) on a copy of m, with
// legalize checking against the CPU reference's kernels. probe false
// compiles the same module without probes (for the plain run that carving
// overhead is measured against).
// It returns the compiled module and the names of the passes run.
func Compile(m *ir.Module, pipe *passes.Pipeline, probe bool, probeOpts passes.Options) (*ir.Module, []string, error) {
	if pipe == nil {
		var err error
		if pipe, err = passes.Default(); err != nil {
			return nil, nil, err
		}
	} else {
		pipe = &passes.Pipeline{File: pipe.File, Steps: append([]*passes.Step(nil), pipe.Steps...)}
	}
	if probe && !pipe.Has("probe") {
		before := ""
		if pipe.Has("legalize") {
			before = "legalize"
		}
		if err := pipe.Append("probe", probeOpts, before); err != nil {
			return nil, nil, err
		}
	}
	if pipe.Has("legalize") {
		if err := pipe.Set("legalize", "supports", passes.Supports(cpu.Supports)); err != nil {
			return nil, nil, err
		}
		if err := pipe.Set("legalize", "target", "cpu"); err != nil {
			return nil, nil, err
		}
	}
	c := m.Clone()
	if _, err := pipe.Run(c, passes.RunConfig{}); err != nil {
		return nil, nil, err
	}
	names := make([]string, len(pipe.Steps))
	for i, st := range pipe.Steps {
		names[i] = st.Pass.Name
	}
	return c, names, nil
}

// Recorder runs a compiled module on the CPU reference and records every
// op call: the outputs from the probes, the inputs from earlier outputs,
// the call's arguments (snapshot when the call starts, since kv_write
// updates caches in place) and the module's weights. Calls are
// deduplicated by content key as they come; the first Keep of each key
// are kept.
type Recorder struct {
	Module  *ir.Module
	Keep    int
	Policy  Policy
	Compute ir.DType // f32 or f16 (the reference emulates f16 storage)
	Exec    *runtime.Executor
	Stats   Stats

	// Set is the input set in progress (see SetInfo), recorded in cases.
	Set int

	record  bool
	step    int
	cur     map[*ir.Value]*tensor.Tensor // values of the call in progress
	probed  map[*ir.Value]bool           // values of the call a probe observed
	weights map[*ir.Weight]*tensor.Tensor
	fps     map[*tensor.Tensor]Fingerprint // of the call in progress
	wfps    map[*tensor.Tensor]Fingerprint // of weights
	keys    map[string]*keyInfo
	cases   []*Case
}

type keyInfo struct {
	seen  int
	cases []*Case
}

// NewRecorder returns a recorder of m (compiled, with probes) on a new CPU
// reference device. With record false it only runs m (no snapshots, no
// hooks): the plain run.
func NewRecorder(m *ir.Module, keep int, policy Policy, record bool) *Recorder {
	return NewRecorderAt(m, keep, policy, record, ir.F32)
}

// NewRecorderAt is NewRecorder for compute dtype compute (f32, or f16: the
// reference then emulates f16 storage, cpu.Options.Round16).
func NewRecorderAt(m *ir.Module, keep int, policy Policy, record bool, compute ir.DType) *Recorder {
	if compute == ir.Invalid {
		compute = ir.F32
	}
	if keep <= 0 {
		keep = 1
	}
	if policy == (Policy{}) {
		policy = DefaultPolicy()
	}
	r := &Recorder{
		Module: m, Keep: keep, Policy: policy, Compute: compute, record: record,
		Exec:    runtime.NewExecutor(m, cpu.NewWith(cpu.Options{Round16: compute == ir.F16})),
		weights: map[*ir.Weight]*tensor.Tensor{}, fps: map[*tensor.Tensor]Fingerprint{}, wfps: map[*tensor.Tensor]Fingerprint{}, keys: map[string]*keyInfo{},
	}
	if record {
		r.Exec.OnProbe = r.onProbe
		r.Exec.OnNode = r.onNode
	}
	return r
}

// onNode captures the inputs of a node that no probe or argument snapshot
// observed (when the probe pass probed only some ops). It runs right after
// the node, so its inputs are as the node read them, except the cache that
// kv_write updates in place, which is left unrecorded.
func (r *Recorder) onNode(n *ir.Node, in, _ []*runtime.Buffer) error {
	for i, v := range n.Inputs {
		if v.IsWeight() || r.cur[v] != nil || n.UpdatesInPlace(i) {
			continue
		}
		t, err := runtime.Download(in[i])
		if err != nil {
			return err
		}
		r.cur[v] = t
	}
	return nil
}

// Close releases the executor's buffers.
func (r *Recorder) Close() { r.Exec.Close() }

func (r *Recorder) onProbe(n *ir.Node, b *runtime.Buffer) error {
	t, err := runtime.Download(b)
	if err != nil {
		return err
	}
	r.cur[n.Inputs[0]] = t
	r.cur[n.Outputs[0]] = t
	r.probed[n.Inputs[0]] = true
	return nil
}

// Call runs function fn on args and records its op calls. The results are
// returned as the executor gives them.
func (r *Recorder) Call(fn string, args ...*runtime.Buffer) ([]*runtime.Buffer, error) {
	f := r.Module.Func(fn)
	if f == nil {
		return nil, fmt.Errorf("module %q has no function @%s", r.Module.Name, fn)
	}
	step := r.step
	r.step++
	r.Stats.Steps++
	if !r.record {
		return r.Exec.Call(fn, args...)
	}
	if len(args) != len(f.Params) {
		return nil, fmt.Errorf("func @%s takes %d arguments, got %d", fn, len(f.Params), len(args))
	}
	r.cur = map[*ir.Value]*tensor.Tensor{}
	r.probed = map[*ir.Value]bool{}
	r.fps = map[*tensor.Tensor]Fingerprint{}
	env := map[string]int64{}
	pos := -1
	for i, p := range f.Params {
		t, err := runtime.Download(args[i])
		if err != nil {
			return nil, fmt.Errorf("snapshot of argument %s: %w", p.Ref(), err)
		}
		r.cur[p] = t
		for j, d := range p.Type.Shape {
			if !d.IsStatic() && j < len(t.Shape) {
				env[d.Sym] = int64(t.Shape[j])
			}
		}
		if p.Name == "pos" && t.DType == ir.I32 && t.NumElements() == 1 {
			pos = int(t.Int32s()[0])
		}
	}
	res, err := r.Exec.Call(fn, args...)
	if err != nil {
		return nil, err
	}
	for _, n := range f.Nodes {
		if d := n.Def(); d == nil || d.Kind == ir.KindMeta {
			continue
		}
		r.Stats.Calls++
		if err := r.recordNode(f, n, env, step, pos); err != nil {
			return nil, err
		}
	}
	r.cur, r.probed = nil, nil
	return res, nil
}

// weight returns the data of a weight as a tensor (loaded once).
func (r *Recorder) weight(w *ir.Weight) (*tensor.Tensor, error) {
	if t, ok := r.weights[w]; ok {
		return t, nil
	}
	if w.Source == nil {
		return nil, fmt.Errorf("weight @%s has no data attached", w.Name)
	}
	raw, err := w.Source.Bytes()
	if err != nil {
		return nil, fmt.Errorf("weight @%s: %w", w.Name, err)
	}
	t, err := tensor.FromBytes(w.Type.DType, w.Type.Shape.Sizes(), raw)
	if err != nil {
		return nil, fmt.Errorf("weight @%s: %w", w.Name, err)
	}
	if r.Compute == ir.F16 {
		// The values an f16 target holds (and the emulating reference
		// read), so that a target that falls back to f32 replays the
		// case on the same inputs.
		t = cpu.Round16(t)
	}
	r.weights[w] = t
	return t, nil
}

func (r *Recorder) fingerprint(t *tensor.Tensor) Fingerprint {
	if fp, ok := r.wfps[t]; ok {
		return fp
	}
	if fp, ok := r.fps[t]; ok {
		return fp
	}
	fp := FingerprintOf(t)
	r.fps[t] = fp
	return fp
}

// recordNode turns one executed node into a case candidate and keeps it
// when its key has fewer than Keep cases.
func (r *Recorder) recordNode(f *ir.Function, n *ir.Node, env map[string]int64, step, pos int) error {
	ins := make([]*tensor.Tensor, len(n.Inputs))
	for i, v := range n.Inputs {
		if v.IsWeight() {
			t, err := r.weight(v.Weight)
			if err != nil {
				return err
			}
			ins[i] = t
			r.weightFP(t)
			continue
		}
		if ins[i] = r.cur[v]; ins[i] == nil {
			return nil // an input nobody probed: the call cannot be replayed alone
		}
	}
	outs := make([]*tensor.Tensor, len(n.Outputs))
	for i, o := range n.Outputs {
		if outs[i] = r.cur[o]; outs[i] == nil || !r.probed[o] {
			return nil // an output not probed: the op was not selected
		}
	}
	r.Stats.Recorded++
	attrs := n.Attrs.BindShapes(env)
	key := ContentKey(n.Op.String(), attrs, ins, outs, r.fingerprint)
	ki := r.keys[key]
	if ki == nil {
		ki = &keyInfo{}
		r.keys[key] = ki
		r.Stats.Keys++
	}
	ki.seen++
	for _, c := range ki.cases {
		c.Seen = ki.seen
	}
	if len(ki.cases) >= r.Keep {
		return nil
	}
	c := &Case{
		Op: n.Op.String(), Kind: string(n.Def().Kind), Attrs: EncodeAttrs(attrs),
		Node: n.ID, NodeText: ir.NodeText(n), Prov: n.Prov,
		Func: f.Name, Step: step, Pos: pos, Set: r.Set, Key: key, Seen: ki.seen,
		Tolerance: r.Policy.ForCompute(n.Op, attrs, ins, outs, r.Compute),
	}
	if r.Compute != ir.F32 {
		c.Compute = r.Compute.String()
	}
	for i, v := range n.Inputs {
		op := Operand{Name: v.Ref(), DType: ins[i].DType.String(), Shape: append([]int{}, ins[i].Shape...), t: ins[i]}
		if v.IsWeight() {
			op.Weight = v.Weight.Name
		}
		c.Inputs = append(c.Inputs, op)
	}
	for i, o := range n.Outputs {
		c.Outputs = append(c.Outputs, Operand{Name: o.Ref(), DType: outs[i].DType.String(), Shape: append([]int{}, outs[i].Shape...), t: outs[i]})
	}
	ki.cases = append(ki.cases, c)
	r.cases = append(r.cases, c)
	r.Stats.Kept++
	return nil
}

// weightFP keeps the fingerprints of weights across calls (r.fps is reset
// per call; weights are fingerprinted once).
func (r *Recorder) weightFP(t *tensor.Tensor) {
	if _, ok := r.wfps[t]; !ok {
		r.wfps[t] = FingerprintOf(t)
	}
}

// Cases returns the cases kept so far, numbered c0001, c0002, ... in the
// order they were first met.
func (r *Recorder) Cases() []*Case {
	for i, c := range r.cases {
		c.ID = fmt.Sprintf("c%04d", i+1)
	}
	return r.cases
}

// Generate runs a language model (the LLM calling convention of
// runtime/llm) greedily: the prompt's tokens (after BOS, when the
// tokenizer prepends one) through prefill (decode when it is one token),
// then one decode step per generated token until steps positions are
// processed or an end-of-generation token comes out. It returns the
// generated ids. progress, when set, gets the positions done after each call.
func (r *Recorder) Generate(tok llm.Tokenizer, prompt string, steps int, progress func(done, total int)) ([]int, error) {
	m := r.Module
	dec, pre := m.Func("decode"), m.Func("prefill")
	if dec == nil || pre == nil || len(dec.Params) < 2 {
		return nil, fmt.Errorf("module %q is not a language model: it needs functions @prefill and @decode (tokens, pos, caches...)", m.Name)
	}
	maxSeq, err := llm.ContextLength(m)
	if err != nil {
		return nil, err
	}
	var caches []*runtime.Buffer
	for _, p := range dec.Params[2:] {
		if !p.Type.Shape.IsStatic() || p.Type.Shape.Rank() == 0 {
			return nil, fmt.Errorf("module %q: cache %s of @decode must have a static shape", m.Name, p.Ref())
		}
		sizes := p.Type.Shape.Sizes()
		b, err := r.Exec.Upload("", tensor.New(p.Type.DType, sizes))
		if err != nil {
			return nil, err
		}
		caches = append(caches, b)
	}
	defer func() {
		for _, c := range caches {
			c.Dev.Free(c)
		}
	}()
	if steps <= 0 || steps > maxSeq {
		steps = maxSeq
	}
	ids := tok.Encode(prompt, true, false)
	if len(ids) == 0 {
		return nil, fmt.Errorf("the prompt encodes to no tokens")
	}
	if len(ids) > steps {
		ids = ids[:steps]
	}
	pos := 0
	forward := func(tokens []int) ([]float32, error) {
		fn := "decode"
		if len(tokens) > 1 {
			fn = "prefill"
		}
		t32 := make([]int32, len(tokens))
		for i, t := range tokens {
			t32[i] = int32(t)
		}
		tb, err := r.Exec.Upload("", tensor.FromInt32([]int{len(t32)}, t32))
		if err != nil {
			return nil, err
		}
		pb, err := r.Exec.Upload("", tensor.ScalarInt32(int32(pos)))
		if err != nil {
			return nil, err
		}
		out, err := r.Call(fn, append([]*runtime.Buffer{tb, pb}, caches...)...)
		tb.Dev.Free(tb)
		pb.Dev.Free(pb)
		if err != nil {
			return nil, fmt.Errorf("%s at position %d: %w", fn, pos, err)
		}
		if len(out) != len(caches)+1 {
			return nil, fmt.Errorf("%s returned %d results, want logits and %d caches", fn, len(out), len(caches))
		}
		for i, c := range out[1:] {
			if c != caches[i] {
				caches[i].Dev.Free(caches[i])
				caches[i] = c
			}
		}
		logits, err := runtime.Download(out[0])
		out[0].Dev.Free(out[0])
		if err != nil {
			return nil, err
		}
		pos += len(tokens)
		if progress != nil {
			progress(pos, steps)
		}
		return logits.Convert(ir.F32).Float32s(), nil
	}
	logits, err := forward(ids)
	if err != nil {
		return nil, err
	}
	var gen []int
	for pos < steps {
		next := llm.Argmax(logits)
		if tok.IsEOG(next) {
			break
		}
		gen = append(gen, next)
		if logits, err = forward([]int{next}); err != nil {
			return gen, err
		}
	}
	if progress != nil && pos < steps {
		progress(steps, steps) // stopped early (end of generation): the run is complete
	}
	return gen, nil
}

// Recording is the result of a carving run: the kept cases with their
// tensors, ready to be written as a bundle.
type Recording struct {
	Module    *ir.Module // the compiled, probed module the cases come from
	Cases     []*Case
	Stats     Stats
	Model     string
	Prompt    string
	Steps     int
	Keep      int
	Generated []int
	Pipeline  []string
	// Seed and Inputs record the arguments of a CarveCalls run (a model
	// that is not a language model): the seed of the random ones and each
	// argument's source.
	Seed   uint64
	Inputs []InputInfo
	// Faults are the test-only faults planted in the target when the
	// recording was written (see Manifest.Faults).
	Faults []Fault
	// Sets describe the input sets when there were several (Prompt,
	// Generated, Seed and Inputs are then the first's).
	Sets []SetInfo
}

// Fault is a test-only fault planted in the kernel of one node (see
// runtime/target.Injection).
type Fault struct {
	Node  int    `yaml:"node" json:"node"`
	Op    string `yaml:"op" json:"op"`
	Fault string `yaml:"fault" json:"fault"`
}

// Carve compiles m with probes, runs it on the CPU reference through
// prefill and the decode steps of o.Prompt, and returns the recorded,
// deduplicated cases.
func Carve(m *ir.Module, tok llm.Tokenizer, o Options) (*Recording, error) {
	if tok == nil {
		return nil, fmt.Errorf("carving a language model needs its tokenizer")
	}
	pm, names, err := Compile(m, o.Pipeline, true, o.Probe)
	if err != nil {
		return nil, err
	}
	r := NewRecorderAt(pm, o.Keep, o.Policy, true, o.Compute)
	defer r.Close()
	prompts := o.Prompts
	if len(prompts) == 0 {
		prompts = []string{o.Prompt}
	}
	rec := &Recording{Module: pm, Model: m.Name, Prompt: prompts[0], Steps: o.Steps, Keep: r.Keep, Pipeline: names}
	for i, p := range prompts {
		r.Set = i
		progress := o.Progress
		if progress != nil && len(prompts) > 1 {
			progress = func(done, total int) { o.Progress(i*total+done, len(prompts)*total) }
		}
		gen, err := r.Generate(tok, p, o.Steps, progress)
		if err != nil {
			return nil, fmt.Errorf("prompt %d (%q): %w", i+1, p, err)
		}
		if i == 0 {
			rec.Generated = gen
		}
		if len(prompts) > 1 {
			rec.Sets = append(rec.Sets, SetInfo{Prompt: p, Generated: gen})
		}
	}
	rec.Cases, rec.Stats = r.Cases(), r.Stats
	return rec, nil
}

// SetInfo records one input set of a recording carved from several (the
// prompts of a language model, the input sets of another model): its
// prompt and generated tokens, or its inputs. Cases say which set they
// came from (Case.Set); calls of every set are deduplicated together.
type SetInfo struct {
	Prompt    string      `yaml:"prompt,omitempty" json:"prompt,omitempty"`
	Generated []int       `yaml:"generated,flow,omitempty" json:"generated,omitempty"`
	Name      string      `yaml:"name,omitempty" json:"name,omitempty"`
	Inputs    []InputInfo `yaml:"inputs,omitempty" json:"inputs,omitempty"`
}

// OpCounts counts cases per op, for summaries.
func OpCounts(cases []*Case) string {
	c := map[string]int{}
	for _, k := range cases {
		c[k.Op]++
	}
	ops := make([]string, 0, len(c))
	for op := range c {
		ops = append(ops, op)
	}
	sort.Strings(ops)
	parts := make([]string, len(ops))
	for i, op := range ops {
		parts[i] = fmt.Sprintf("%s %d", op, c[op])
	}
	return strings.Join(parts, ", ")
}
