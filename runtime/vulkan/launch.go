package vulkan

import (
	"errors"
	"fmt"
	goruntime "runtime"
	"strings"
	"sync"
	"sync/atomic"
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
// function), as PrepareTypes does; nodes with symbolic shapes compile when
// a call fixes them (PrepareTypes again, or their first Launch).
func (d *Device) Prepare(m *ir.Module, f *ir.Function, nodes []*ir.Node) error {
	var static []*ir.Node
	var types [][]ir.Type
	for _, n := range nodes {
		if in, ok := devkit.StaticInputs(n); ok {
			static, types = append(static, n), append(types, in)
		}
	}
	return d.PrepareTypes(static, types, nil)
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
	k, err := d.generate(n, in, out, key.Fault)
	if err == nil {
		err = d.made(k)
	}
	if err != nil {
		return nil, err
	}
	vp, err := d.pipeline(k)
	if err != nil {
		return nil, err
	}
	return d.addPlan(key, in, k, vp), nil
}

// generate makes the kernel of n. It reads only its arguments and the
// device's options, so PrepareTypes runs it on several goroutines.
func (d *Device) generate(n *ir.Node, in, out []ir.Type, fault string) (*codegen.Kernel, error) {
	return d.opts.Generate(n, in, out, wgsl.Options{Limits: d.cgLimits, Tuning: d.opts.Tuning, Features: d.wfeats, Fault: fault,
		Compute: d.opts.Compute, Accumulate: d.opts.Accumulate})
}

// made counts a kernel just generated, passes it to the tests' hook and
// checks its bindings' layout (must hold d.mu).
func (d *Device) made(k *codegen.Kernel) error {
	d.stats.KernelsMade++
	if d.hook != nil {
		d.hook(k)
	}
	return devkit.CheckLayout(k)
}

// addPlan keeps kernel k, with pipeline vp, as the plan of key, whose
// input types are in (must hold d.mu).
func (d *Device) addPlan(key devkit.PlanKey, in []ir.Type, k *codegen.Kernel, vp *vkPipeline) *plan {
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
	return p
}

// PrepareTypes makes the kernels of nodes on the input types in and output
// types out (in[i] and out[i] are nodes[i]'s; out may be nil, or an entry
// nil: inferred) that the device has not made yet, generating them and
// creating their pipelines on up to GOMAXPROCS goroutines, where first
// launches would make each in turn: a GPU's driver takes a large kernel
// a good part of a second to compile, and a prefill has a dozen or two.
// Views are passed over; a failure names its node.
func (d *Device) PrepareTypes(nodes []*ir.Node, in, out [][]ir.Type) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.usable(); err != nil {
		return err
	}
	if d.opts.Generate == nil {
		return nil // launches say why
	}
	type job struct {
		n       *ir.Node
		in, out []ir.Type
		key     devkit.PlanKey
		k       *codegen.Kernel
		vp      *vkPipeline
		err     error
	}
	var jobs []*job
	seen := map[devkit.PlanKey]bool{}
	for i, n := range nodes {
		if d.isView(n) {
			continue
		}
		key := devkit.KeyOf(n, in[i], d.faults[n.ID])
		if _, ok := d.plans[key]; ok || seen[key] {
			continue
		}
		seen[key] = true
		j := &job{n: n, in: in[i], key: key}
		if out != nil {
			j.out = out[i]
		}
		jobs = append(jobs, j)
	}
	if len(jobs) == 0 {
		return nil
	}
	start := time.Now()
	defer func() { d.stats.CompileTime += time.Since(start) }()
	parallel(len(jobs), func(i int) {
		j := jobs[i]
		j.k, j.err = d.generate(j.n, j.in, j.out, j.key.Fault)
	})
	// The pipelines not made yet, each once (nodes of one shape in
	// different layers share a kernel).
	var fresh []*job
	made := map[string]bool{}
	for _, j := range jobs {
		if j.err == nil {
			j.err = d.made(j.k)
		}
		if j.err != nil {
			return devkit.NodeError(d.name, j.n, j.err)
		}
		if src := string(j.k.Source); d.pipelines[src] == nil && !made[src] {
			made[src] = true
			fresh = append(fresh, j)
		}
	}
	parallel(len(fresh), func(i int) {
		j := fresh[i]
		j.vp, j.err = d.newPipeline(j.k)
	})
	var first error
	for _, j := range fresh {
		if j.err == nil {
			d.addPipeline(j.k, j.vp)
		} else if first == nil {
			first = devkit.NodeError(d.name, j.n, j.err)
		}
	}
	if first != nil {
		return first
	}
	for _, j := range jobs {
		vp, err := d.pipeline(j.k)
		if err != nil {
			return devkit.NodeError(d.name, j.n, err)
		}
		d.addPlan(j.key, j.in, j.k, vp)
	}
	return nil
}

// parallel runs f(0) .. f(n-1) on up to GOMAXPROCS goroutines and waits
// for them.
func parallel(n int, f func(i int)) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(n, goruntime.GOMAXPROCS(0)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1) - 1); i < n; i = int(next.Add(1) - 1) {
				f(i)
			}
		}()
	}
	wg.Wait()
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
	p, err := d.newPipeline(k)
	if err != nil {
		return nil, err
	}
	d.addPipeline(k, p)
	return p, nil
}

// newPipeline checks a kernel against the device and creates its pipeline
// (through the device's pipeline cache, which Vulkan synchronizes: several
// goroutines may create pipelines at once).
func (d *Device) newPipeline(k *codegen.Kernel) (*vkPipeline, error) {
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
	p.op = k.Op.String()
	return p, nil
}

// addPipeline keeps a new pipeline for its kernel's source (must hold
// d.mu).
func (d *Device) addPipeline(k *codegen.Kernel, p *vkPipeline) {
	d.stats.Pipelines++
	d.pipelines[string(k.Source)] = p
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
