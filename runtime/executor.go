package runtime

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/tapml/tapml/ir"
	"github.com/tapml/tapml/tensor"
)

// Executor runs the functions of a module. Each node runs on the device of
// its placement ("" for the default device, or "source"/"target" after the
// partition pass); transfer nodes move tensors between devices, probe nodes
// report their input to OnProbe. Weights are uploaded once per device.
type Executor struct {
	Module     *ir.Module
	devices    map[string]Device
	weights    map[weightKey]*Buffer
	weightBufs map[*Buffer]bool // the buffers of weights, for isWeight (a call's hot path)

	// OnProbe, when set, is called for every probe node with the probed
	// buffer; it may download it. Probes are identities otherwise.
	OnProbe func(n *ir.Node, b *Buffer) error
	// OnNode, when set, is called after each node is launched, with its
	// inputs and outputs (before any of them is freed).
	OnNode func(n *ir.Node, in, out []*Buffer) error

	// Capture lets Call record a call on a device that implements
	// Capturer and replay it without walking the graph: when a function is
	// called on the same argument buffers as its previous call (the decode
	// steps of a session, whose token, position and caches stay in the
	// same buffers), that call is recorded and later ones replay it. Only
	// calls that run wholly on one device, with no hooks, are captured.
	// The results of a replayed call share the capture's memory: the next
	// call of the function on the same buffers overwrites them.
	Capture bool

	plans    map[planKey]*plan
	captures map[string]*captured // by function and argument buffers
	lastCall map[*ir.Function]string
	capDevs  map[*ir.Function]Device // the device that can capture each function's calls, nil if none
	capTick  uint64
}

// captured is a recorded call: which results are arguments (argIndex >=
// 0), and the recording, whose replay gives the others in order.
type captured struct {
	rec      Capture
	args     []*Buffer // held, so that no other buffer takes their addresses (the key)
	argIndex []int
	used     uint64
}

// maxCaptures bounds the recorded calls an executor keeps (each holds its
// intermediates' memory).
const maxCaptures = 4

type weightKey struct {
	w   *ir.Weight
	dev Device
}

// NewExecutor returns an executor that runs unplaced nodes on def.
func NewExecutor(m *ir.Module, def Device) *Executor {
	return &Executor{Module: m, devices: map[string]Device{"": def}, weights: map[weightKey]*Buffer{}}
}

// SetDevice sets the device of a placement ("source" or "target").
func (e *Executor) SetDevice(place string, d Device) { e.devices[place] = d }

// Device returns the device of a placement, falling back to the default.
func (e *Executor) Device(place string) Device {
	if d, ok := e.devices[place]; ok && d != nil {
		return d
	}
	return e.devices[""]
}

// Upload copies a host tensor to the device of a placement.
func (e *Executor) Upload(place string, t *tensor.Tensor) (*Buffer, error) {
	return e.Device(place).Upload(t)
}

// Download copies a buffer to the host.
func Download(b *Buffer) (*tensor.Tensor, error) { return b.Dev.Download(b) }

// Prepare lets every device compile the kernels of the nodes placed on it.
func (e *Executor) Prepare(fn string) error {
	f := e.Module.Func(fn)
	if f == nil {
		return fmt.Errorf("module %q has no function @%s", e.Module.Name, fn)
	}
	byDev := map[Device][]*ir.Node{}
	for _, n := range f.Nodes {
		if n.Op == ir.OpProbe || n.Op == ir.OpTransfer {
			continue
		}
		d := e.Device(n.Place)
		byDev[d] = append(byDev[d], n)
	}
	for d, nodes := range byDev {
		if p, ok := d.(Preparer); ok {
			if err := p.Prepare(e.Module, f, nodes); err != nil {
				return err
			}
		}
	}
	return nil
}

// UploadWeights uploads the weights that the nodes of the functions read
// to those nodes' devices now rather than on the first call, so that a
// first call's time is the call's own.
func (e *Executor) UploadWeights(fns ...string) error {
	for _, fn := range fns {
		f := e.Module.Func(fn)
		if f == nil {
			return fmt.Errorf("module %q has no function @%s", e.Module.Name, fn)
		}
		for _, n := range f.Nodes {
			if n.Op == ir.OpProbe || n.Op == ir.OpTransfer {
				continue // they move values between devices; a call places those
			}
			for _, v := range n.Inputs {
				if v.IsWeight() {
					if _, err := e.WeightBuffer(v.Weight, e.Device(n.Place)); err != nil {
						return err
					}
				}
			}
		}
	}
	return nil
}

// WeightBuffer returns weight w on device d, uploading it the first time.
func (e *Executor) WeightBuffer(w *ir.Weight, d Device) (*Buffer, error) {
	k := weightKey{w, d}
	if b, ok := e.weights[k]; ok {
		return b, nil
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
	var b *Buffer
	if wu, ok := d.(WeightUploader); ok {
		b, err = wu.UploadWeight(w.Name, t)
	} else {
		b, err = d.Upload(t)
	}
	if err != nil {
		return nil, fmt.Errorf("weight @%s: upload to %s: %w", w.Name, d.Name(), err)
	}
	e.weights[k] = b
	if e.weightBufs == nil {
		e.weightBufs = map[*Buffer]bool{}
	}
	e.weightBufs[b] = true
	return b, nil
}

// WeightBytes returns the bytes of the weights uploaded to device d, in
// all and by dtype (the storage dtypes they keep: a quantized weight
// counts its blocks).
func (e *Executor) WeightBytes(d Device) (total int64, byDType map[ir.DType]int64) {
	byDType = map[ir.DType]int64{}
	for k, b := range e.weights {
		if k.dev == d {
			n := b.Type().Bytes()
			total += n
			byDType[b.DType] += n
		}
	}
	return total, byDType
}

// CompileTime returns the time the executor's devices have spent making
// kernels so far, summed over those that report it (KernelCompiler).
func (e *Executor) CompileTime() time.Duration {
	var total time.Duration
	seen := map[Device]bool{}
	for _, d := range e.devices {
		if kc, ok := d.(KernelCompiler); ok && !seen[d] {
			seen[d] = true
			total += kc.CompileTime()
		}
	}
	return total
}

// Close frees the uploaded weights and recorded calls (devices are closed
// by their owners).
func (e *Executor) Close() {
	for k, c := range e.captures {
		c.rec.Release()
		delete(e.captures, k)
	}
	e.lastCall = nil
	for k, b := range e.weights {
		k.dev.Free(b)
	}
	e.weights = map[weightKey]*Buffer{}
	e.weightBufs = nil
}

// plan is the per-shape-binding precomputation of a call: concrete output
// types of every node and the index of each value's last use.
type plan struct {
	types    map[*ir.Value]ir.Type
	lastUse  map[*ir.Value]int
	isResult map[*ir.Value]bool
}

type planKey struct {
	f   *ir.Function
	env string
}

// bind matches argument shapes against the parameter types, binding symbols.
func bind(f *ir.Function, args []*Buffer) (map[string]int64, error) {
	if len(args) != len(f.Params) {
		return nil, fmt.Errorf("func @%s takes %d arguments, got %d", f.Name, len(f.Params), len(args))
	}
	env := map[string]int64{}
	for i, p := range f.Params {
		a := args[i]
		if a == nil {
			return nil, fmt.Errorf("func @%s: argument %s is nil", f.Name, p.Ref())
		}
		if a.DType != p.Type.DType || len(a.Shape) != p.Type.Shape.Rank() {
			return nil, fmt.Errorf("func @%s: argument %s is %s, want %s", f.Name, p.Ref(), a.Type(), p.Type)
		}
		for j, d := range p.Type.Shape {
			n := int64(a.Shape[j])
			if d.IsStatic() {
				if d.Size != n {
					return nil, fmt.Errorf("func @%s: argument %s is %s, want %s", f.Name, p.Ref(), a.Type(), p.Type)
				}
			} else if prev, ok := env[d.Sym]; ok && prev != n {
				return nil, fmt.Errorf("func @%s: argument %s binds %s=%d, but it is already %d", f.Name, p.Ref(), d.Sym, n, prev)
			} else {
				env[d.Sym] = n
			}
		}
	}
	return env, nil
}

func (e *Executor) planFor(f *ir.Function, env map[string]int64) (*plan, error) {
	key := planKey{f, fmt.Sprint(env)}
	if p, ok := e.plans[key]; ok {
		return p, nil
	}
	p := &plan{types: map[*ir.Value]ir.Type{}, lastUse: map[*ir.Value]int{}, isResult: map[*ir.Value]bool{}}
	for _, v := range f.Params {
		p.types[v] = ir.T(v.Type.DType, v.Type.Shape.Bind(env))
	}
	for i, n := range f.Nodes {
		in := p.inputTypes(n)
		for _, v := range n.Inputs {
			p.lastUse[v] = i
		}
		outs, _, err := ir.InferTypes(n.Op, in, n.Attrs.BindShapes(env))
		if err != nil {
			return nil, fmt.Errorf("func @%s: node %s: %w", f.Name, n, err)
		}
		for j, o := range n.Outputs {
			if !outs[j].Shape.IsStatic() {
				return nil, fmt.Errorf("func @%s: node %s: output shape %s is not determined by the arguments", f.Name, n, outs[j].Shape)
			}
			p.types[o] = outs[j]
		}
	}
	for _, r := range f.Results {
		p.isResult[r] = true
	}
	if err := e.prepareTypes(f, p); err != nil {
		return nil, err
	}
	if e.plans == nil {
		e.plans = map[planKey]*plan{}
	}
	e.plans[key] = p
	return p, nil
}

// inputTypes are the types of n's inputs in the plan (a weight's its own).
func (p *plan) inputTypes(n *ir.Node) []ir.Type {
	in := make([]ir.Type, len(n.Inputs))
	for j, v := range n.Inputs {
		if v.IsWeight() {
			in[j] = v.Type
		} else {
			in[j] = p.types[v]
		}
	}
	return in
}

// prepareTypes hands each device that can make kernels ahead
// (TypedPreparer) the nodes of a new plan placed on it, with their input
// and output types, before the first of them runs.
func (e *Executor) prepareTypes(f *ir.Function, p *plan) error {
	type batch struct {
		nodes   []*ir.Node
		in, out [][]ir.Type
	}
	byDev := map[TypedPreparer]*batch{}
	var order []TypedPreparer
	for _, n := range f.Nodes {
		if n.Op == ir.OpProbe || n.Op == ir.OpTransfer {
			continue
		}
		tp, ok := e.Device(n.Place).(TypedPreparer)
		if !ok {
			continue
		}
		b := byDev[tp]
		if b == nil {
			b = &batch{}
			byDev[tp] = b
			order = append(order, tp)
		}
		in := p.inputTypes(n)
		// The outputs' types too: a node without inputs (iota) has its
		// shape from attributes that the call binds.
		out := make([]ir.Type, len(n.Outputs))
		for j, o := range n.Outputs {
			out[j] = p.types[o]
		}
		b.nodes, b.in, b.out = append(b.nodes, n), append(b.in, in), append(b.out, out)
	}
	for _, tp := range order {
		b := byDev[tp]
		if err := tp.PrepareTypes(b.nodes, b.in, b.out); err != nil {
			return err
		}
	}
	return nil
}

// Call runs function fn on args (buffers on any device) and returns its
// results as buffers on the devices that produced them. Arguments are moved
// to the device of the node that reads them when needed.
func (e *Executor) Call(fn string, args ...*Buffer) (results []*Buffer, err error) {
	f := e.Module.Func(fn)
	if f == nil {
		return nil, fmt.Errorf("module %q has no function @%s", e.Module.Name, fn)
	}
	env, err := bind(f, args)
	if err != nil {
		return nil, err
	}
	p, err := e.planFor(f, env)
	if err != nil {
		return nil, err
	}
	var capDev Capturer
	if e.Capture {
		var key string
		var done bool
		if capDev, key, results, done, err = e.replayOrCapture(f, args); done {
			return results, err
		}
		if capDev != nil {
			defer func() { results, err = e.endCapture(capDev, key, args, results, err) }()
		}
	}
	c := e.newCall(f, p, args)
	defer func() {
		if err != nil {
			c.freeOwned() // a failed call frees what it allocated; the arguments stay
		}
	}()
	for i, n := range f.Nodes {
		outs, launched, err := c.run(n)
		if err != nil {
			return nil, err
		}
		c.define(n, outs)
		// The hook runs once the outputs are owned, so that its failure
		// frees them with the rest.
		if launched != nil && e.OnNode != nil {
			if err := e.OnNode(n, launched, outs); err != nil {
				return nil, err
			}
		}
		c.releaseDead(n, i)
	}
	return c.results()
}

// replayOrCapture replays the recording of a call of f on args when there
// is one (done); otherwise it starts recording this call when the previous
// call of f was on the same buffers, returning the device and the key.
func (e *Executor) replayOrCapture(f *ir.Function, args []*Buffer) (Capturer, string, []*Buffer, bool, error) {
	dev := e.captureDevice(f)
	if dev == nil || e.OnNode != nil || e.OnProbe != nil {
		return nil, "", nil, false, nil
	}
	d := dev.(Capturer)
	var kb strings.Builder
	kb.WriteString(f.Name)
	for _, a := range args {
		if a.Dev != dev {
			return nil, "", nil, false, nil
		}
		fmt.Fprintf(&kb, " %p", a)
	}
	key := kb.String()
	if c := e.captures[key]; c != nil {
		res, err := c.rec.Replay(args)
		if err == nil {
			e.capTick++
			c.used = e.capTick
			results := make([]*Buffer, len(c.argIndex))
			for i, j := range c.argIndex {
				if j >= 0 {
					results[i] = args[j]
				} else {
					results[i], res = res[0], res[1:]
				}
			}
			return nil, "", results, true, nil
		}
		c.rec.Release()
		delete(e.captures, key)
		if !errors.Is(err, ErrStale) {
			return nil, "", nil, true, err
		}
		// Stale: walk the graph, recording again.
	} else if e.lastCall[f] != key {
		if e.lastCall == nil {
			e.lastCall = map[*ir.Function]string{}
		}
		e.lastCall[f] = key
		return nil, "", nil, false, nil
	}
	if err := d.BeginCapture(args); err != nil {
		return nil, "", nil, true, err
	}
	return d, key, nil, false, nil
}

// endCapture ends the recording of a call that returned results (or
// failed with err) and keeps it.
func (e *Executor) endCapture(d Capturer, key string, args, results []*Buffer, err error) ([]*Buffer, error) {
	c := &captured{args: slices.Clone(args), argIndex: make([]int, len(results))}
	var own []*Buffer
	for i, r := range results {
		c.argIndex[i] = slices.Index(args, r)
		if c.argIndex[i] < 0 {
			own = append(own, r)
		}
	}
	rec, cerr := d.EndCapture(own)
	if err != nil || cerr != nil || rec == nil {
		if rec != nil {
			rec.Release()
		}
		return results, errors.Join(err, cerr)
	}
	if len(e.captures) >= maxCaptures {
		var oldest string
		for k, o := range e.captures {
			if oldest == "" || o.used < e.captures[oldest].used {
				oldest = k
			}
		}
		e.captures[oldest].rec.Release()
		delete(e.captures, oldest)
	}
	if e.captures == nil {
		e.captures = map[string]*captured{}
	}
	e.capTick++
	c.rec, c.used = rec, e.capTick
	e.captures[key] = c
	return results, nil
}

// captureDevice returns the device that runs every node of f when it can
// capture calls (a Capturer), else nil.
func (e *Executor) captureDevice(f *ir.Function) Device {
	if d, ok := e.capDevs[f]; ok {
		return d
	}
	var dev Device
	for _, n := range f.Nodes {
		d := e.Device(n.Place)
		if n.Op == ir.OpTransfer || (dev != nil && d != dev) {
			dev = nil
			break
		}
		dev = d
	}
	if _, ok := dev.(Capturer); !ok {
		dev = nil
	}
	if e.capDevs == nil {
		e.capDevs = map[*ir.Function]Device{}
	}
	e.capDevs[f] = dev
	return dev
}

// call is the state of one Executor.Call: the buffer of every value, the
// copies made at placement boundaries, which buffers the call allocated
// (and may free) and how many live values share each buffer.
type call struct {
	e       *Executor
	f       *ir.Function
	p       *plan
	args    []*Buffer
	vals    map[*ir.Value]*Buffer
	moved   map[*ir.Value]map[Device]*Buffer
	owned   map[*Buffer]bool
	aliases map[*Buffer]int
}

func (e *Executor) newCall(f *ir.Function, p *plan, args []*Buffer) *call {
	c := &call{e: e, f: f, p: p, args: args, vals: map[*ir.Value]*Buffer{},
		moved: map[*ir.Value]map[Device]*Buffer{}, owned: map[*Buffer]bool{}, aliases: map[*Buffer]int{}}
	for i, v := range f.Params {
		c.vals[v] = args[i]
		c.aliases[args[i]]++
	}
	return c
}

// run executes node n: a probe reports its input, a transfer moves it, any
// other node is launched on the device of its placement. launched holds a
// launched node's inputs (nil for probes and transfers).
func (c *call) run(n *ir.Node) (outs, launched []*Buffer, err error) {
	switch n.Op {
	case ir.OpProbe:
		b, err := c.value(n.Inputs[0], c.e.Device(n.Place))
		if err != nil {
			return nil, nil, err
		}
		if c.e.OnProbe != nil {
			if err := c.e.OnProbe(n, b); err != nil {
				return nil, nil, fmt.Errorf("func @%s: probe %s: %w", c.f.Name, n, err)
			}
		}
		return []*Buffer{b}, nil, nil
	case ir.OpTransfer:
		to := c.e.Device(n.Attrs.String("to"))
		b, err := c.value(n.Inputs[0], to)
		if err != nil {
			return nil, nil, err
		}
		// The copy now belongs to the transfer's output, not to the input's
		// cache of copies (which is freed with the input).
		if m := c.moved[n.Inputs[0]]; m != nil && m[to] == b {
			delete(m, to)
		}
		return []*Buffer{b}, nil, nil
	}
	d := c.e.Device(n.Place)
	in := make([]*Buffer, len(n.Inputs))
	for j, v := range n.Inputs {
		if in[j], err = c.value(v, d); err != nil {
			return nil, nil, err
		}
	}
	types := make([]ir.Type, len(n.Outputs))
	for j, o := range n.Outputs {
		types[j] = c.p.types[o]
	}
	outs, err = d.Launch(n, in, types)
	if err != nil {
		if _, ok := err.(*KernelError); ok {
			return nil, nil, err
		}
		return nil, nil, &KernelError{Device: d.Name(), Node: n, Err: err}
	}
	return outs, in, nil
}

// value returns v's buffer on device d: a weight's upload, or the value's
// buffer, copied to d (once per call) when it lives elsewhere.
func (c *call) value(v *ir.Value, d Device) (*Buffer, error) {
	if v.IsWeight() {
		return c.e.WeightBuffer(v.Weight, d)
	}
	b := c.vals[v]
	if b == nil {
		return nil, fmt.Errorf("func @%s: %s has no value", c.f.Name, v.Ref())
	}
	if b.Dev == d {
		return b, nil
	}
	if cp := c.moved[v][d]; cp != nil {
		return cp, nil
	}
	cp, err := transfer(b, d)
	if err != nil {
		return nil, fmt.Errorf("func @%s: moving %s to %s: %w", c.f.Name, v.Ref(), d.Name(), err)
	}
	if c.moved[v] == nil {
		c.moved[v] = map[Device]*Buffer{}
	}
	c.moved[v][d] = cp
	c.owned[cp] = true
	return cp, nil
}

// define records n's output buffers; the call owns those that are neither
// arguments nor weights nor already shared with a live value.
func (c *call) define(n *ir.Node, outs []*Buffer) {
	for j, o := range n.Outputs {
		b := outs[j]
		c.vals[o] = b
		if c.aliases[b] == 0 && !isArg(c.args, b) && !c.e.isWeight(b) {
			c.owned[b] = true
		}
		c.aliases[b]++
	}
}

// releaseDead frees the values whose last reader was node i (n), and n's
// outputs that nothing reads.
func (c *call) releaseDead(n *ir.Node, i int) {
	for _, v := range n.Inputs {
		if !v.IsWeight() && c.p.lastUse[v] == i && !c.p.isResult[v] {
			c.release(v)
		}
	}
	for _, o := range n.Outputs {
		if _, used := c.p.lastUse[o]; !used && !c.p.isResult[o] {
			c.release(o)
		}
	}
}

// release drops v: its copies on other devices and, when no other live
// value shares it, its buffer, if the call owns them.
func (c *call) release(v *ir.Value) {
	for _, cp := range c.moved[v] {
		// A copy that a node's output aliases (kv_write updating a cache
		// moved to its device) lives on as that value.
		if c.owned[cp] && c.aliases[cp] == 0 {
			cp.Dev.Free(cp)
			delete(c.owned, cp)
		}
	}
	delete(c.moved, v)
	b := c.vals[v]
	if b == nil {
		return
	}
	c.aliases[b]--
	if c.aliases[b] <= 0 && c.owned[b] {
		b.Dev.Free(b)
		delete(c.owned, b)
	}
}

// results returns the function's results and frees the copies of results
// made for other devices (results are never released), unless a result
// aliases one.
func (c *call) results() ([]*Buffer, error) {
	results := make([]*Buffer, len(c.f.Results))
	for i, r := range c.f.Results {
		if r.IsWeight() {
			return nil, fmt.Errorf("func @%s: returning weight %s is not supported", c.f.Name, r.Ref())
		}
		results[i] = c.vals[r]
	}
	for _, m := range c.moved {
		for _, cp := range m {
			if c.owned[cp] && c.aliases[cp] == 0 {
				cp.Dev.Free(cp)
				delete(c.owned, cp)
			}
		}
	}
	return results, nil
}

// freeOwned frees every buffer the call allocated (after a failure).
func (c *call) freeOwned() {
	for b := range c.owned {
		b.Dev.Free(b)
	}
}

// isWeight reports whether b is a cached weight buffer, which a call must
// never free even when an identity (probe, transfer) passes it on.
func (e *Executor) isWeight(b *Buffer) bool { return e.weightBufs[b] }

func isArg(args []*Buffer, b *Buffer) bool {
	for _, a := range args {
		if a == b {
			return true
		}
	}
	return false
}

// transfer copies b to device d through the host.
func transfer(b *Buffer, d Device) (*Buffer, error) {
	t, err := b.Dev.Download(b)
	if err != nil {
		return nil, err
	}
	return d.Upload(t)
}
