package vulkan

import (
	"errors"
	"fmt"

	"github.com/tapml/tapml/codegen"
	"github.com/tapml/tapml/codegen/wgsl"
	"github.com/tapml/tapml/ir"
	"github.com/tapml/tapml/runtime"
	"github.com/tapml/tapml/runtime/internal/devkit"
)

/*
#include "vk.h"
*/
import "C"

// plan is the kernel of one node on concrete input types, with its
// pipeline.
type plan struct {
	k *codegen.Kernel
	p *vkPipeline
}

type planKey struct {
	node  *ir.Node
	sig   string // input types
	fault string
}

// Prepare compiles the kernels of nodes whose types are static (the decode
// function); nodes with symbolic shapes compile on first Launch.
func (d *Device) Prepare(m *ir.Module, f *ir.Function, nodes []*ir.Node) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.usable(); err != nil {
		return err
	}
	for _, n := range nodes {
		if n.Op == ir.OpReshape {
			continue // shares its input's buffer
		}
		in, static := devkit.StaticInputs(n)
		if !static {
			continue
		}
		if _, err := d.planFor(n, in, nil); err != nil {
			return &runtime.KernelError{Device: d.name, Node: n, Err: err}
		}
	}
	return nil
}

// planFor returns the compiled kernel of n on input types in (must hold
// d.mu).
func (d *Device) planFor(n *ir.Node, in, out []ir.Type) (*plan, error) {
	key := planKey{node: n, sig: devkit.TypeSig(in), fault: d.faults[n.ID]}
	if p, ok := d.plans[key]; ok {
		return p, nil
	}
	if d.opts.Generate == nil {
		return nil, errors.New("the device has no kernel generator (Options.Generate)")
	}
	k, err := d.opts.Generate(n, in, out, wgsl.Options{Limits: d.cgLimits, Tuning: d.opts.Tuning, Features: d.wfeats, Fault: key.fault})
	if err != nil {
		return nil, err
	}
	d.stats.KernelsMade++
	if d.hook != nil {
		d.hook(k)
	}
	vp, err := d.pipeline(k)
	if err != nil {
		return nil, err
	}
	p := &plan{k: k, p: vp}
	d.plans[key] = p
	return p, nil
}

// pipeline creates (or finds) the pipeline of a kernel, after checking it
// against the device (must hold d.mu).
func (d *Device) pipeline(k *codegen.Kernel) (*vkPipeline, error) {
	if p, ok := d.pipelines[string(k.Source)]; ok {
		if p.bindings != len(k.Bindings) {
			return nil, fmt.Errorf("kernel %s has %d bindings; its SPIR-V was compiled with %d", k.Name(), len(k.Bindings), p.bindings)
		}
		return p, nil
	}
	if k.Language != "spirv" {
		return nil, fmt.Errorf("the vulkan device runs spirv kernels, not %q", k.Language)
	}
	entry := k.Entry
	if entry == "" {
		entry = "main"
	}
	mod, err := checkModule(k.Source, entry, d.feats)
	if err != nil {
		return nil, err
	}
	if err := d.checkKernel(k, mod.localSize); err != nil {
		return nil, err
	}
	p, err := d.x.createPipeline(mod.words, entry, len(k.Bindings), d.pcache)
	if err != nil {
		return nil, fmt.Errorf("pipeline of %s: %w", k.Name(), err)
	}
	d.stats.Pipelines++
	d.pipelines[string(k.Source)] = p
	return p, nil
}

// checkKernel checks a kernel's workgroup size (as its SPIR-V declares
// it) and number of bindings against the device limits; dispatch checks
// the grid and each binding.
func (d *Device) checkKernel(k *codegen.Kernel, wg [3]int) error {
	p := &d.phys
	if wg != k.WorkgroupSize {
		return fmt.Errorf("the kernel's workgroup size is %v, its SPIR-V's LocalSize %v", k.WorkgroupSize, wg)
	}
	if wg[0] < 1 || wg[1] < 1 || wg[2] < 1 || wg[0]*wg[1]*wg[2] > int(p.MaxInvocations) ||
		wg[0] > int(p.MaxWorkgroupSize[0]) || wg[1] > int(p.MaxWorkgroupSize[1]) || wg[2] > int(p.MaxWorkgroupSize[2]) {
		return fmt.Errorf("workgroup size %v exceeds the device's limits (%v, %d invocations)", wg, p.MaxWorkgroupSize, p.MaxInvocations)
	}
	if len(k.Bindings) == 0 || len(k.Bindings) > int(min(p.MaxStorageBuffers, maxBindings)) {
		return fmt.Errorf("kernel binds %d storage buffers; the device allows 1 to %d", len(k.Bindings), min(p.MaxStorageBuffers, maxBindings))
	}
	return nil
}

// Compile creates (or finds in the cache) the pipeline of a prebuilt
// kernel without running it.
func (d *Device) Compile(k *codegen.Kernel) error {
	if k == nil {
		return errors.New("vulkan: compile of a nil kernel")
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return errors.New("vulkan: device is closed")
	}
	_, err := d.pipeline(k)
	return err
}

// Launch records node n's kernel on inputs in. kv_write updates its cache
// in place and returns the cache buffer itself; reshape returns a buffer
// sharing its input's memory.
func (d *Device) Launch(n *ir.Node, in []*runtime.Buffer, outs []ir.Type) ([]*runtime.Buffer, error) {
	if n == nil {
		return nil, errors.New("vulkan: launch of a nil node")
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	res, err := d.launch(n, in, outs)
	return d.named(n, res, err)
}

// named makes err a KernelError naming n, unless it names a node already.
func (d *Device) named(n *ir.Node, res []*runtime.Buffer, err error) ([]*runtime.Buffer, error) {
	if err == nil {
		return res, nil
	}
	var ke *runtime.KernelError
	if errors.As(err, &ke) {
		return nil, err
	}
	return nil, &runtime.KernelError{Device: d.name, Node: n, Err: err}
}

func (d *Device) launch(n *ir.Node, in []*runtime.Buffer, outs []ir.Type) ([]*runtime.Buffer, error) {
	if err := d.usable(); err != nil {
		return nil, err
	}
	hs, err := d.handles(in)
	if err != nil {
		return nil, err
	}
	fault := d.faults[n.ID]
	// A node launched again on inputs of the same types (every decode
	// step) skips type inference and the plan lookup.
	if m := d.memos[n]; m != nil && m.matches(in, fault) {
		if m.p == nil {
			hs[0].refs++
			return []*runtime.Buffer{d.wrap(hs[0], m.outType.DType, m.outSizes)}, nil
		}
		return d.dispatch(m.p, in, hs)
	}
	types := make([]ir.Type, len(in))
	for i, b := range in {
		types[i] = b.Type()
	}
	if n.Op == ir.OpReshape && len(in) == 1 && fault == "" {
		want, _, err := ir.InferTypes(n.Op, types, n.BoundAttrs(types, outs))
		if err != nil {
			return nil, err
		}
		if outs != nil && (len(outs) != 1 || !outs[0].Equal(want[0])) {
			return nil, fmt.Errorf("output types %v, the input gives %s", outs, want[0])
		}
		if want[0].Bytes() > int64(hs[0].size) {
			return nil, fmt.Errorf("reshape to %s of a buffer of %d bytes", want[0], hs[0].size)
		}
		d.memos[n] = newLaunchMemo(in, fault, nil, want[0])
		hs[0].refs++
		return []*runtime.Buffer{d.wrap(hs[0], want[0].DType, want[0].Shape.Sizes())}, nil
	}
	p, err := d.planFor(n, types, outs)
	if err != nil {
		return nil, err
	}
	d.memos[n] = newLaunchMemo(in, fault, p, ir.Type{})
	return d.dispatch(p, in, hs)
}

func (d *Device) handles(in []*runtime.Buffer) ([]*vbuf, error) {
	hs := make([]*vbuf, len(in))
	for i, b := range in {
		h, err := d.handle(b)
		if err != nil {
			return nil, fmt.Errorf("input %d: %w", i, err)
		}
		hs[i] = h
	}
	return hs, nil
}

// LaunchKernel runs a prebuilt SPIR-V kernel as node n's on inputs in,
// like Launch does with the kernel it generates: outputs are allocated
// from the kernel's bindings, a ReadWrite binding updates its input in
// place. The pipeline is cached by SPIR-V.
func (d *Device) LaunchKernel(n *ir.Node, k *codegen.Kernel, in []*runtime.Buffer) ([]*runtime.Buffer, error) {
	if n == nil || k == nil {
		return nil, errors.New("vulkan: launch of a nil node or kernel")
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	res, err := d.launchKernel(k, in)
	return d.named(n, res, err)
}

func (d *Device) launchKernel(k *codegen.Kernel, in []*runtime.Buffer) ([]*runtime.Buffer, error) {
	if err := d.usable(); err != nil {
		return nil, err
	}
	hs, err := d.handles(in)
	if err != nil {
		return nil, err
	}
	p, err := d.pipeline(k)
	if err != nil {
		return nil, err
	}
	return d.dispatch(&plan{k: k, p: p}, in, hs)
}

// dispatch allocates the kernel's outputs and records its dispatch (must
// hold d.mu).
func (d *Device) dispatch(pl *plan, in []*runtime.Buffer, hs []*vbuf) ([]*runtime.Buffer, error) {
	k := pl.k
	nout := 0
	for _, b := range k.Bindings {
		nout = max(nout, b.Output+1)
	}
	res := make([]*runtime.Buffer, nout)
	bufs := make([]*vbuf, len(k.Bindings))
	var fresh []*vbuf
	fail := func(err error) ([]*runtime.Buffer, error) {
		for _, g := range fresh {
			d.release(g)
		}
		return nil, err
	}
	d.reads, d.writes = d.reads[:0], d.writes[:0]
	for i, b := range k.Bindings {
		switch {
		case b.Index != i:
			return fail(fmt.Errorf("kernel binding %d has index %d; bindings must be 0, 1, ... in order", i, b.Index))
		case b.Input >= len(in):
			return fail(fmt.Errorf("kernel binding %d reads input %d of %d", i, b.Input, len(in)))
		case b.Input >= 0:
			g := hs[b.Input]
			if uint64(b.Type.Bytes()) > g.size {
				return fail(fmt.Errorf("kernel binding %d expects %s, input %d holds %d bytes", i, b.Type, b.Input, g.size))
			}
			if b.Access != codegen.Read && g.weight {
				return fail(fmt.Errorf("kernel binding %d writes input %d, a weight", i, b.Input))
			}
			bufs[i] = g
			if b.Output >= 0 {
				res[b.Output] = in[b.Input] // in place
			}
		case b.Output < 0 || !b.Type.Shape.IsStatic():
			return fail(fmt.Errorf("kernel binding %d is neither an input nor a static output", i))
		default:
			g, _, err := d.alloc(uint64(b.Type.Bytes()), false)
			if err != nil {
				return fail(fmt.Errorf("output %d: %w", b.Output, err))
			}
			fresh = append(fresh, g)
			bufs[i] = g
			res[b.Output] = d.wrap(g, b.Type.DType, b.Type.Shape.Sizes())
		}
		if bufs[i].size > d.phys.MaxStorageRange {
			return fail(fmt.Errorf("kernel binding %d spans %d bytes, more than the device's maxStorageBufferRange (%d)", i, bufs[i].size, d.phys.MaxStorageRange))
		}
		acc := bufs[i].access()
		if b.Access != codegen.Write {
			d.reads = append(d.reads, acc)
		}
		if b.Access != codegen.Read {
			d.writes = append(d.writes, acc)
		}
	}
	for i, g := range k.Grid {
		if g < 0 || g > int(d.phys.MaxWorkgroups[i]) {
			return fail(fmt.Errorf("grid %v exceeds the device's %d workgroups in dimension %d", k.Grid, d.phys.MaxWorkgroups[i], i))
		}
	}
	if k.Grid[0]*k.Grid[1]*k.Grid[2] == 0 {
		return res, nil
	}
	set, err := d.descriptorSet(pl.p, bufs)
	if err != nil {
		return fail(err)
	}
	d.command(dispatchOp(pl.p, set, k.Grid), d.reads, d.writes)
	d.pending++
	d.stats.Dispatches++
	if d.pending >= d.batch {
		if err := d.submit(); err != nil {
			return fail(err) // nothing ran: the outputs are unused
		}
	}
	return res, nil
}
