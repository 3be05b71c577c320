package vulkan

import (
	"errors"
	"fmt"
	"strings"
	"time"

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

// Prepare compiles the kernels of nodes whose types are static (the decode
// function); nodes with symbolic shapes compile on first Launch.
func (d *Device) Prepare(m *ir.Module, f *ir.Function, nodes []*ir.Node) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.usable(); err != nil {
		return err
	}
	return devkit.Prepare(d.name, nodes, d.isView, func(n *ir.Node, in []ir.Type) error {
		_, err := d.planFor(n, in, nil)
		return err
	})
}

// isView reports whether n runs as a view of its input (a reshape).
func (d *Device) isView(n *ir.Node) bool { return devkit.IsView(n, d.faults[n.ID]) }

// planFor returns the compiled kernel of n on input types in (must hold
// d.mu).
func (d *Device) planFor(n *ir.Node, in, out []ir.Type) (*plan, error) {
	key := devkit.KeyOf(n, in, d.faults[n.ID])
	if p, ok := d.plans[key]; ok {
		return p, nil
	}
	if d.opts.Generate == nil {
		return nil, errors.New("the device has no kernel generator (Options.Generate)")
	}
	start := time.Now()
	defer func() { d.stats.CompileTime += time.Since(start) }()
	k, err := d.opts.Generate(n, in, out, wgsl.Options{Limits: d.cgLimits, Tuning: d.opts.Tuning, Features: d.wfeats, Fault: key.Fault,
		Compute: d.opts.Compute, Accumulate: d.opts.Accumulate})
	if err != nil {
		return nil, err
	}
	d.stats.KernelsMade++
	if d.hook != nil {
		d.hook(k)
	}
	if err := devkit.CheckLayout(k); err != nil {
		return nil, err
	}
	vp, err := d.pipeline(k)
	if err != nil {
		return nil, err
	}
	if vp.inputs == "" {
		// Products of one op differ by their shapes (q, o and down all
		// have 2048 columns in Llama-3.2-1B, not the same K): a profile
		// tells them apart by their inputs.
		types := make([]string, len(in))
		for i, t := range in {
			types[i] = strings.ReplaceAll(t.String(), " ", "")
		}
		vp.inputs = strings.Join(types, ",")
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
	p.op = k.Op.String()
	d.pipelines[string(k.Source)] = p
	return p, nil
}

// checkKernel checks a kernel's workgroup size (as its SPIR-V declares
// it) and number of bindings against the device limits; dispatch checks
// the grid and the bound ranges.
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
	if err := devkit.CheckLayout(k); err != nil {
		return err
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
	return res, devkit.NodeError(d.name, n, err)
}

func (d *Device) launch(n *ir.Node, in []*runtime.Buffer, outs []ir.Type) ([]*runtime.Buffer, error) {
	if err := d.usable(); err != nil {
		return nil, err
	}
	hs := make([]*vbuf, len(in))
	if err := devkit.Handles(d, in, hs); err != nil {
		return nil, err
	}
	fault := d.faults[n.ID]
	// A node launched again on inputs of the same types (every decode
	// step) skips type inference and the plan lookup.
	if m := d.memos[n]; m != nil && m.matches(in, fault) {
		if m.p == nil {
			return []*runtime.Buffer{devkit.Alias(d, hs[0], m.outType.DType, m.outSizes)}, nil
		}
		return d.dispatch(m.p, in, hs)
	}
	types := devkit.Types(in)
	if d.isView(n) && len(in) == 1 {
		want, err := devkit.ViewType(n, types, outs)
		if err != nil {
			return nil, err
		}
		if d.store.Bytes(want) > int64(hs[0].Size) {
			return nil, fmt.Errorf("reshape to %s of a buffer of %d bytes", want, hs[0].Size)
		}
		d.memos[n] = newLaunchMemo(in, fault, nil, want)
		return []*runtime.Buffer{devkit.Alias(d, hs[0], want.DType, want.Shape.Sizes())}, nil
	}
	p, err := d.planFor(n, types, outs)
	if err != nil {
		return nil, err
	}
	d.memos[n] = newLaunchMemo(in, fault, p, ir.Type{})
	return d.dispatch(p, in, hs)
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
	return res, devkit.NodeError(d.name, n, err)
}

func (d *Device) launchKernel(k *codegen.Kernel, in []*runtime.Buffer) ([]*runtime.Buffer, error) {
	if err := d.usable(); err != nil {
		return nil, err
	}
	hs := make([]*vbuf, len(in))
	if err := devkit.Handles(d, in, hs); err != nil {
		return nil, err
	}
	if err := devkit.CheckBindings(k, hs); err != nil {
		return nil, err
	}
	p, err := d.pipeline(k)
	if err != nil {
		return nil, err
	}
	return d.dispatch(&plan{k: k, p: p}, in, hs)
}

// dispatch allocates the kernel's outputs and records its dispatch (must
// hold d.mu). The kernel's layout has been checked (devkit.CheckLayout).
func (d *Device) dispatch(pl *plan, in []*runtime.Buffer, hs []*vbuf) ([]*runtime.Buffer, error) {
	k := pl.k
	bound := make([]*vbuf, len(k.Bindings))
	fail := func(err error) ([]*runtime.Buffer, error) {
		for i, g := range bound {
			if g != nil && k.Bindings[i].Input < 0 {
				d.release(g)
			}
		}
		return nil, err
	}
	d.reads, d.writes = d.reads[:0], d.writes[:0]
	for i, b := range k.Bindings {
		if b.Input >= 0 {
			bound[i] = hs[b.Input]
			if b.Access != codegen.Read && bound[i].B.weight {
				return fail(fmt.Errorf("kernel binding %d writes input %d, a weight", i, b.Input))
			}
		} else {
			g, _, err := d.alloc(uint64(d.store.Bytes(b.Type)), false)
			if err != nil {
				return fail(fmt.Errorf("output %d: %w", b.Output, err))
			}
			bound[i] = g
		}
		if bound[i].Size > d.phys.MaxStorageRange {
			return fail(fmt.Errorf("kernel binding %d spans %d bytes, more than the device's maxStorageBufferRange (%d)", i, bound[i].Size, d.phys.MaxStorageRange))
		}
		acc := accessOf(bound[i])
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
	res := devkit.Outputs(d, k, in, bound)
	if k.Grid[0]*k.Grid[1]*k.Grid[2] == 0 {
		return res, nil
	}
	set, err := d.descriptorSet(pl.p, bound)
	if err != nil {
		return fail(err)
	}
	d.command(dispatchOp(pl.p, set, k.Grid), d.reads, d.writes)
	d.stats.Dispatches++
	// A call being captured is submitted whole, when it is replayed.
	if d.batch.Add() && d.capturing == nil {
		if err := d.submit(); err != nil {
			return fail(err) // nothing ran: the outputs are unused
		}
	}
	return res, nil
}
