package runtime

import (
	"fmt"

	"github.com/tapml/tapml/ir"
	"github.com/tapml/tapml/tensor"
)

// Executor runs the functions of a module. Each node runs on the device of
// its placement ("" for the default device, or "source"/"target" after the
// partition pass); transfer nodes move tensors between devices, probe nodes
// report their input to OnProbe. Weights are uploaded once per device.
type Executor struct {
	Module  *ir.Module
	devices map[string]Device
	weights map[weightKey]*Buffer

	// OnProbe, when set, is called for every probe node with the probed
	// buffer; it may download it. Probes are identities otherwise.
	OnProbe func(n *ir.Node, b *Buffer) error
	// OnNode, when set, is called after each node is launched, with its
	// inputs and outputs (before any of them is freed).
	OnNode func(n *ir.Node, in, out []*Buffer) error

	plans map[planKey]*plan
}

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

// Close frees the uploaded weights (devices are closed by their owners).
func (e *Executor) Close() {
	for k, b := range e.weights {
		k.dev.Free(b)
	}
	e.weights = map[weightKey]*Buffer{}
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
		in := make([]ir.Type, len(n.Inputs))
		for j, v := range n.Inputs {
			if v.IsWeight() {
				in[j] = v.Type
			} else {
				in[j] = p.types[v]
			}
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
	if e.plans == nil {
		e.plans = map[planKey]*plan{}
	}
	e.plans[key] = p
	return p, nil
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
	vals := map[*ir.Value]*Buffer{}
	owned := map[*Buffer]bool{} // buffers this call allocated (may be freed)
	defer func() {
		// A failed call frees what it allocated; the arguments stay.
		if err != nil {
			for b := range owned {
				b.Dev.Free(b)
			}
		}
	}()
	for i, v := range f.Params {
		vals[v] = args[i]
	}
	// copies of a value on other devices, made at placement boundaries
	moved := map[*ir.Value]map[Device]*Buffer{}
	get := func(v *ir.Value, d Device) (*Buffer, error) {
		if v.IsWeight() {
			return e.WeightBuffer(v.Weight, d)
		}
		b := vals[v]
		if b == nil {
			return nil, fmt.Errorf("func @%s: %s has no value", f.Name, v.Ref())
		}
		if b.Dev == d {
			return b, nil
		}
		if c := moved[v][d]; c != nil {
			return c, nil
		}
		c, err := transfer(b, d)
		if err != nil {
			return nil, fmt.Errorf("func @%s: moving %s to %s: %w", f.Name, v.Ref(), d.Name(), err)
		}
		if moved[v] == nil {
			moved[v] = map[Device]*Buffer{}
		}
		moved[v][d] = c
		owned[c] = true
		return c, nil
	}
	aliases := map[*Buffer]int{} // how many live values share a buffer
	for _, b := range vals {
		aliases[b]++
	}
	release := func(v *ir.Value) {
		b := vals[v]
		for _, c := range moved[v] {
			// A copy that a node's output aliases (kv_write updating a
			// cache moved to its device) lives on as that value.
			if owned[c] && aliases[c] == 0 {
				c.Dev.Free(c)
				delete(owned, c)
			}
		}
		delete(moved, v)
		if b == nil {
			return
		}
		aliases[b]--
		if aliases[b] <= 0 && owned[b] {
			b.Dev.Free(b)
			delete(owned, b)
		}
	}
	for i, n := range f.Nodes {
		var outs, launched []*Buffer // launched: the inputs of a launched node
		switch n.Op {
		case ir.OpProbe:
			b, err := get(n.Inputs[0], e.Device(n.Place))
			if err != nil {
				return nil, err
			}
			if e.OnProbe != nil {
				if err := e.OnProbe(n, b); err != nil {
					return nil, fmt.Errorf("func @%s: probe %s: %w", f.Name, n, err)
				}
			}
			outs = []*Buffer{b}
		case ir.OpTransfer:
			to := e.Device(n.Attrs.String("to"))
			b, err := get(n.Inputs[0], to)
			if err != nil {
				return nil, err
			}
			// The copy now belongs to the transfer's output, not to the
			// input's cache of copies (which is freed with the input).
			if m := moved[n.Inputs[0]]; m != nil && m[to] == b {
				delete(m, to)
			}
			outs = []*Buffer{b}
		default:
			d := e.Device(n.Place)
			in := make([]*Buffer, len(n.Inputs))
			for j, v := range n.Inputs {
				if in[j], err = get(v, d); err != nil {
					return nil, err
				}
			}
			types := make([]ir.Type, len(n.Outputs))
			for j, o := range n.Outputs {
				types[j] = p.types[o]
			}
			outs, err = d.Launch(n, in, types)
			if err != nil {
				if _, ok := err.(*KernelError); ok {
					return nil, err
				}
				return nil, &KernelError{Device: d.Name(), Node: n, Err: err}
			}
			launched = in
		}
		for j, o := range n.Outputs {
			b := outs[j]
			vals[o] = b
			if aliases[b] == 0 && !isArg(args, b) && !e.isWeight(b) {
				owned[b] = true
			}
			aliases[b]++
		}
		// The hook runs once the outputs are owned, so that its failure
		// frees them with the rest.
		if launched != nil && e.OnNode != nil {
			if err := e.OnNode(n, launched, outs); err != nil {
				return nil, err
			}
		}
		// Free values whose last reader was this node.
		for _, v := range n.Inputs {
			if !v.IsWeight() && p.lastUse[v] == i && !p.isResult[v] {
				release(v)
			}
		}
		for _, o := range n.Outputs {
			if _, used := p.lastUse[o]; !used && !p.isResult[o] {
				release(o)
			}
		}
	}
	results = make([]*Buffer, len(f.Results))
	for i, r := range f.Results {
		if r.IsWeight() {
			return nil, fmt.Errorf("func @%s: returning weight %s is not supported", f.Name, r.Ref())
		}
		results[i] = vals[r]
	}
	// Copies of results moved to other devices (results are never
	// released) are not needed any more, unless a result aliases one.
	for _, m := range moved {
		for _, c := range m {
			if owned[c] && aliases[c] == 0 {
				c.Dev.Free(c)
				delete(owned, c)
			}
		}
	}
	return results, nil
}

// isWeight reports whether b is a cached weight buffer, which a call must
// never free even when an identity (probe, transfer) passes it on.
func (e *Executor) isWeight(b *Buffer) bool {
	for k, w := range e.weights {
		if w == b && k.dev == b.Dev {
			return true
		}
	}
	return false
}

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
