// Package llvm is tapml's native CPU device: every node runs as a kernel of
// codegen/llvm, compiled by clang-14 (-O3 -march=native) into a shared
// object and called through purego (no cgo).
//
// Batch compilation. clang takes a while per file, so the device compiles
// the kernels of many nodes into one module: Prepare (called by
// runtime.Executor.Prepare) compiles every node of the function whose
// shapes are static (all of decode), and the first Launch of a node with
// new shapes (prefill, for each prompt length) compiles every node of its
// function that those shapes determine. Shared objects are cached on disk
// under a hash of the IR text, the flags, clang's version and the CPU
// (Options.CacheDir, by default os.UserCacheDir()/tapml/llvm), so a rerun
// loads them without compiling.
//
// Without Prepare (an executor that does not call it), launches of nodes
// whose kernels are not compiled are queued instead of run: the next Sync
// or Download compiles all of them in one module and runs the queue in
// order, so a run-time error of such a launch (an id out of range) is
// reported there, as a KernelError naming the node.
//
// Buffers are host memory: a Buffer's Handle is a *tensor.Tensor, as on the
// cpu device. Upload wraps the caller's tensor without copying it (the
// caller must not modify it afterwards; kv_write updates it in place);
// Download returns a copy. reshape returns a buffer sharing its input's
// memory unless Options.CopyReshape. kv_write writes into its cache input
// and returns that same buffer. The tensors a kernel uses are pinned while
// it runs.
//
// Threads. A kernel computes a range of independent items (see
// codegen/llvm); a launch with enough work is cut into contiguous chunks of
// items that Workers goroutines take in turn. Each output element is
// computed by one call with the same code whatever the chunking, so results
// do not depend on the number of workers or on which thread ran what.
package llvm

import (
	"errors"
	"fmt"
	goruntime "runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/ebitengine/purego"

	"github.com/tapml/tapml/codegen"
	cg "github.com/tapml/tapml/codegen/llvm"
	"github.com/tapml/tapml/ir"
	"github.com/tapml/tapml/runtime"
	"github.com/tapml/tapml/runtime/internal/devkit"
	"github.com/tapml/tapml/tensor"
)

// Options configure a device.
type Options struct {
	// Clang is the compiler to run (a name in PATH or a path); empty means
	// $TAPML_CLANG, else clang-14, else clang.
	Clang string
	// CacheDir holds compiled kernels; empty means
	// os.UserCacheDir()/tapml/llvm.
	CacheDir string
	// Workers is the number of goroutines a large launch is split over;
	// 0 means GOMAXPROCS.
	Workers int
	// CopyReshape makes reshape (and probe and transfer, which executors
	// handle themselves) run its copy kernel; by default the output shares
	// the input's memory.
	CopyReshape bool
	// Faults maps node ids to a codegen/llvm fault injected into that
	// node's kernel. For tests of the carving and migration tools only.
	Faults map[int]string
}

// Stats counts a device's work.
type Stats struct {
	KernelsMade int // kernels generated
	// CompileTime is the time spent generating and compiling modules.
	CompileTime time.Duration
	Modules     int // modules built (compiled or found in the cache)
	Compiles    int // clang runs that produced a shared object
	CacheHits   int // modules loaded from the disk cache
	Launches    int
}

// chunksPerWorker is how many chunks per worker a split launch is cut into.
const chunksPerWorker = 8

// maxQueue bounds the launches queued before a sync (they are then run).
const maxQueue = 4096

// parallelWork is the smallest estimated work (the registry's Cost) of a
// launch that is split over goroutines.
const parallelWork = 1 << 18

// Device runs kernels natively. Its methods are safe for concurrent use
// (they serialise on one lock).
type Device struct {
	mu      sync.Mutex
	opts    Options
	comp    *compiler
	workers int
	faults  map[int]string

	funcs   map[*ir.Node]*ir.Function          // the function of each prepared node
	placed  map[*ir.Function]map[*ir.Node]bool // the prepared nodes of each function
	kernels map[kernelKey]*kernel
	last    map[*ir.Node]*lastLaunch
	queue   []pending // launches of unprepared nodes, run at the next sync
	libs    []uintptr
	stats   Stats
	closed  bool

	// breakNodes makes the kernels of these node ids invalid IR (tests).
	breakNodes map[int]bool
}

type kernelKey struct {
	node  *ir.Node
	sig   string
	fault string
}

type kernel struct {
	k    *codegen.Kernel
	fn   uintptr
	work int64
}

var (
	_ runtime.Device   = (*Device)(nil)
	_ runtime.Preparer = (*Device)(nil)
)

// New opens a device with default options.
func New() (*Device, error) { return Open(Options{}) }

// Open opens a device. It fails when no clang is found.
func Open(opts Options) (*Device, error) {
	clang, err := findClang(opts.Clang)
	if err != nil {
		return nil, fmt.Errorf("llvm: %w", err)
	}
	dir := opts.CacheDir
	if dir == "" {
		dir = defaultCacheDir()
	}
	w := opts.Workers
	if w <= 0 {
		w = goruntime.GOMAXPROCS(0)
	}
	d := &Device{
		opts: opts, comp: &compiler{clang: clang, dir: dir}, workers: w, faults: map[int]string{},
		funcs: map[*ir.Node]*ir.Function{}, placed: map[*ir.Function]map[*ir.Node]bool{},
		kernels: map[kernelKey]*kernel{}, last: map[*ir.Node]*lastLaunch{}, breakNodes: map[int]bool{},
	}
	for id, f := range opts.Faults {
		d.faults[id] = f
	}
	return d, nil
}

// Name returns "llvm".
func (d *Device) Name() string { return "llvm" }

// Stats returns counters of the device's work so far.
func (d *Device) Stats() Stats {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.stats
}

// CompileTime returns the time spent making kernels so far
// (runtime.KernelCompiler).
func (d *Device) CompileTime() time.Duration { return d.Stats().CompileTime }

// SetFault injects a codegen/llvm fault into the kernel of node id (""
// removes it). For tests only.
func (d *Device) SetFault(id int, fault string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if fault == "" {
		delete(d.faults, id)
	} else {
		d.faults[id] = fault
	}
	d.last = map[*ir.Node]*lastLaunch{}
}

// Upload wraps t in a buffer without copying it (unless its data is not
// 8-byte aligned). The caller must not modify t afterwards.
func (d *Device) Upload(t *tensor.Tensor) (*runtime.Buffer, error) {
	if t == nil {
		return nil, errors.New("llvm: upload of a nil tensor")
	}
	if err := devkit.CheckTensor(t); err != nil {
		return nil, fmt.Errorf("llvm: upload: %w", err)
	}
	if len(t.Data) > 0 && uintptr(unsafe.Pointer(&t.Data[0]))%8 != 0 {
		t = t.Clone()
	}
	return d.wrap(t), nil
}

func (d *Device) wrap(t *tensor.Tensor) *runtime.Buffer {
	return &runtime.Buffer{Dev: d, DType: t.DType, Shape: append([]int{}, t.Shape...), Handle: t}
}

// Download returns a copy of the buffer's tensor, after running queued
// launches.
func (d *Device) Download(b *runtime.Buffer) (*tensor.Tensor, error) {
	if err := d.Sync(); err != nil {
		return nil, err
	}
	t, err := d.handle(b)
	if err != nil {
		return nil, fmt.Errorf("llvm: download: %w", err)
	}
	return t.Clone(), nil
}

// Tensor returns the tensor behind a buffer of this device without copying.
func Tensor(b *runtime.Buffer) (*tensor.Tensor, error) {
	if b == nil || b.Handle == nil {
		return nil, errors.New("llvm: nil or freed buffer")
	}
	t, ok := b.Handle.(*tensor.Tensor)
	if !ok {
		return nil, fmt.Errorf("llvm: buffer %s is not a host buffer (handle %T)", b, b.Handle)
	}
	return t, nil
}

// Sync runs the queued launches of unprepared nodes (see the package
// doc); a run-time error of one of them is returned here, naming its node.
func (d *Device) Sync() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.flush()
}

// Free drops the buffer's reference to its tensor.
func (d *Device) Free(b *runtime.Buffer) {
	if b != nil && b.Dev == runtime.Device(d) {
		b.Handle = nil
	}
}

// Close unloads the compiled kernels. Buffers stay readable.
func (d *Device) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil
	}
	errs := []error{d.flush()}
	d.closed = true
	for _, h := range d.libs {
		if err := purego.Dlclose(h); err != nil {
			errs = append(errs, err)
		}
	}
	d.libs = nil
	d.kernels = map[kernelKey]*kernel{}
	d.last = map[*ir.Node]*lastLaunch{}
	return errors.Join(errs...)
}

func (d *Device) handle(b *runtime.Buffer) (*tensor.Tensor, error) {
	if b == nil {
		return nil, errors.New("nil buffer")
	}
	if b.Dev != runtime.Device(d) {
		return nil, fmt.Errorf("buffer %s is not on this device", b)
	}
	if b.Handle == nil {
		return nil, fmt.Errorf("buffer %s was freed", b)
	}
	t, ok := b.Handle.(*tensor.Tensor)
	if !ok {
		return nil, fmt.Errorf("buffer %s has handle %T", b, b.Handle)
	}
	return t, nil
}

// Prepare records the nodes of f placed on this device and compiles, in
// one module, the kernels of those whose shapes are static. Nodes whose
// shapes depend on the arguments compile at their first Launch.
func (d *Device) Prepare(m *ir.Module, f *ir.Function, nodes []*ir.Node) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return errors.New("llvm: device is closed")
	}
	set := d.placed[f]
	if set == nil {
		set = map[*ir.Node]bool{}
		d.placed[f] = set
	}
	for _, n := range nodes {
		set[n] = true
		d.funcs[n] = f
	}
	return d.buildFunc(f, map[string]int64{}, nil, true)
}

// buildFunc generates and compiles, as one module, the kernels of the
// prepared nodes of f that env determines and that are not compiled yet.
// With strict, a node whose kernel cannot be generated is an error; else
// it is left out (its own launch reports it). must, when set, is a node
// the batch has to include.
func (d *Device) buildFunc(f *ir.Function, env map[string]int64, must *ir.Node, strict bool) error {
	types := map[*ir.Value]ir.Type{}
	known := func(v *ir.Value) (ir.Type, bool) {
		if v.IsWeight() {
			return v.Type, v.Type.Shape.IsStatic()
		}
		t, ok := types[v]
		return t, ok
	}
	for _, p := range f.Params {
		if t := ir.T(p.Type.DType, p.Type.Shape.Bind(env)); t.Shape.IsStatic() {
			types[p] = t
		}
	}
	type job struct {
		n       *ir.Node
		in, out []ir.Type
	}
	var jobs []job
	for _, n := range f.Nodes {
		in := make([]ir.Type, len(n.Inputs))
		ok := true
		for i, v := range n.Inputs {
			if in[i], ok = known(v); !ok {
				break
			}
		}
		if !ok {
			continue
		}
		out, _, err := ir.InferTypes(n.Op, in, n.Attrs.BindShapes(env))
		if err != nil {
			if strict && d.placed[f][n] {
				return &runtime.KernelError{Device: d.Name(), Node: n, Err: err}
			}
			continue
		}
		for i, o := range n.Outputs {
			if i < len(out) && out[i].Shape.IsStatic() {
				types[o] = out[i]
			}
		}
		if !d.placed[f][n] || d.skipKernel(n) {
			continue
		}
		if _, done := d.kernels[d.key(n, in, out)]; done {
			continue
		}
		jobs = append(jobs, job{n, in, out})
	}
	var nodes []*ir.Node
	var ins, outs [][]ir.Type
	for _, j := range jobs {
		nodes, ins, outs = append(nodes, j.n), append(ins, j.in), append(outs, j.out)
	}
	return d.build(nodes, ins, outs, must, strict)
}

// skipKernel reports whether n runs without a kernel of its own.
func (d *Device) skipKernel(n *ir.Node) bool {
	return !d.opts.CopyReshape && (n.Op == ir.OpReshape || n.Op == ir.OpProbe || n.Op == ir.OpTransfer)
}

func (d *Device) key(n *ir.Node, in, out []ir.Type) kernelKey {
	return kernelKey{node: n, sig: devkit.TypeSig(in) + ">" + devkit.TypeSig(out), fault: d.faults[n.ID]}
}

// build generates the kernels of nodes into one module, compiles and loads
// it, and registers the kernels.
func (d *Device) build(nodes []*ir.Node, ins, outs [][]ir.Type, must *ir.Node, strict bool) error {
	if len(nodes) == 0 {
		return nil
	}
	start := time.Now()
	defer func() { d.stats.CompileTime += time.Since(start) }()
	mod := cg.NewModule(cg.Options{})
	type added struct {
		n       *ir.Node
		in, out []ir.Type
		k       *codegen.Kernel
		work    int64
	}
	var ks []added
	for i, n := range nodes {
		k, err := mod.Add(n, ins[i], outs[i], cg.Options{Fault: d.faults[n.ID]})
		if err != nil {
			if strict || n == must {
				return &runtime.KernelError{Device: d.Name(), Node: n, Err: err}
			}
			continue
		}
		d.stats.KernelsMade++
		ks = append(ks, added{n, ins[i], outs[i], k, n.Def().Cost.Of(ir.Call{In: ins[i], Out: outs[i], Attrs: n.Attrs})})
	}
	if len(ks) == 0 {
		return nil
	}
	src := mod.Source()
	for _, a := range ks {
		if d.breakNodes[a.n.ID] {
			src = breakEntry(src, a.k.Entry)
		}
	}
	path, cached, err := d.comp.build(src)
	if err != nil {
		var ce *ClangError
		if !errors.As(err, &ce) {
			return fmt.Errorf("llvm: %w", err)
		}
		// find the kernel clang rejects, to name its node
		for _, a := range ks {
			one := cg.NewModule(cg.Options{})
			if _, gerr := one.Add(a.n, a.in, a.out, cg.Options{Fault: d.faults[a.n.ID]}); gerr != nil {
				continue
			}
			s := one.Source()
			if d.breakNodes[a.n.ID] {
				s = breakEntry(s, a.k.Entry)
			}
			if cerr := d.comp.check(s); cerr != nil {
				return &runtime.KernelError{Device: d.Name(), Node: a.n, Err: fmt.Errorf("op %s: %w", a.n.Op, cerr)}
			}
		}
		n := ks[0].n
		if must != nil {
			n = must
		}
		return &runtime.KernelError{Device: d.Name(), Node: n, Err: fmt.Errorf("module of %d kernels: %w", len(ks), err)}
	}
	d.stats.Modules++
	if cached {
		d.stats.CacheHits++
	} else {
		d.stats.Compiles++
	}
	h, err := purego.Dlopen(path, purego.RTLD_NOW|purego.RTLD_LOCAL)
	if err != nil {
		return fmt.Errorf("llvm: loading %s: %w", path, err)
	}
	d.libs = append(d.libs, h)
	for _, a := range ks {
		fn, err := purego.Dlsym(h, a.k.Entry)
		if err != nil {
			return &runtime.KernelError{Device: d.Name(), Node: a.n, Err: fmt.Errorf("symbol %s: %w", a.k.Entry, err)}
		}
		d.kernels[d.key(a.n, a.in, a.out)] = &kernel{k: a.k, fn: fn, work: a.work}
	}
	return nil
}

// breakEntry makes the function entry of an IR text invalid (its first
// "ret i32 0" returns an undefined value), for tests of error reporting.
func breakEntry(src []byte, entry string) []byte {
	s := string(src)
	i := strings.Index(s, "define i32 @"+entry+"(")
	if i < 0 {
		return src
	}
	j := strings.Index(s[i:], "ret i32 0")
	if j < 0 {
		return src
	}
	return []byte(s[:i+j] + "ret i32 %tapml_undefined" + s[i+j+len("ret i32 0"):])
}

// kernelFor returns the compiled kernel of n on input types in (output
// types out), building it, with the rest of its function's kernels that
// these shapes determine, when needed. Must hold d.mu.
func (d *Device) kernelFor(n *ir.Node, in, out []ir.Type) (*kernel, error) {
	key := d.key(n, in, out)
	if k, ok := d.kernels[key]; ok {
		return k, nil
	}
	if f := d.funcs[n]; f != nil {
		if env, ok := bindNode(n, in, out); ok {
			if err := d.buildFunc(f, env, n, false); err != nil {
				return nil, err
			}
			if k, ok := d.kernels[key]; ok {
				return k, nil
			}
		}
	}
	if err := d.build([]*ir.Node{n}, [][]ir.Type{in}, [][]ir.Type{out}, n, true); err != nil {
		return nil, err
	}
	if k, ok := d.kernels[key]; ok {
		return k, nil
	}
	return nil, fmt.Errorf("no kernel was built for node %s", n)
}

// bindNode binds the symbols of n's declared input types (and of its
// outputs and shape attributes) to the concrete sizes in and out; false
// when the inputs do not fit them.
func bindNode(n *ir.Node, in, out []ir.Type) (map[string]int64, bool) {
	env := n.SymbolSizes(nil, out)
	for i, v := range n.Inputs {
		if v == nil || i >= len(in) || v.Type.Shape.Rank() != in[i].Shape.Rank() {
			return nil, false
		}
		for j, dim := range v.Type.Shape {
			if dim.IsStatic() {
				continue
			}
			if prev, ok := env[dim.Sym]; ok && prev != in[i].Shape[j].Size {
				return nil, false
			}
			env[dim.Sym] = in[i].Shape[j].Size
		}
	}
	return env, true
}

// Launch runs node n on inputs in and returns its outputs; the work is done
// when it returns.
func (d *Device) Launch(n *ir.Node, in []*runtime.Buffer, outs []ir.Type) ([]*runtime.Buffer, error) {
	if n == nil {
		return nil, errors.New("llvm: launch of a nil node")
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	res, err := d.launch(n, in, outs)
	return res, devkit.NodeError(d.Name(), n, err)
}

func (d *Device) launch(n *ir.Node, in []*runtime.Buffer, outs []ir.Type) ([]*runtime.Buffer, error) {
	if d.closed {
		return nil, errors.New("device is closed")
	}
	ts := make([]*tensor.Tensor, len(in))
	for i, b := range in {
		t, err := d.handle(b)
		if err != nil {
			return nil, fmt.Errorf("input %d: %w", i, err)
		}
		if err := devkit.CheckTensor(t); err != nil {
			return nil, fmt.Errorf("input %d: %w", i, err)
		}
		ts[i] = t
	}
	// The types of a node's launches rarely change (decode): the last
	// launch's inference and kernel are reused when its input types match.
	var types, want []ir.Type
	var k *kernel
	if l := d.last[n]; l != nil && sameTypes(ts, l.in) && len(outs) == len(l.out) {
		types, want, k = l.in, l.out, l.k
	} else {
		types = make([]ir.Type, len(in))
		for i, t := range ts {
			types[i] = t.Type()
		}
		var err error
		if want, _, err = ir.InferTypes(n.Op, types, n.BoundAttrs(types, outs)); err != nil {
			return nil, err
		}
		for i := range outs {
			if i < len(want) && outs[i].Shape.IsStatic() && !outs[i].Equal(want[i]) {
				return nil, fmt.Errorf("output %d is %s, the caller expects %s", i, want[i], outs[i])
			}
		}
		k = d.kernels[d.key(n, types, want)]
		if k != nil || d.skipKernel(n) {
			d.last[n] = &lastLaunch{in: types, out: want, k: k}
		}
	}
	d.stats.Launches++
	if d.skipKernel(n) && len(in) == 1 {
		// identities: reshape (unless CopyReshape), probe, transfer
		return []*runtime.Buffer{d.wrap(ts[0].Reshaped(want[0].Shape.Sizes()))}, nil
	}
	res := make([]*runtime.Buffer, len(want))
	outT := make([]*tensor.Tensor, len(want))
	if d := n.Def(); d != nil {
		for i := range d.InPlace.Count() { // output i is input i updated in place (kv_write's cache)
			outT[i], res[i] = ts[i], in[i]
		}
	}
	for i, t := range want {
		if outT[i] == nil {
			outT[i] = tensor.New(t.DType, t.Shape.Sizes())
			res[i] = d.wrap(outT[i])
		}
	}
	if k == nil && d.funcs[n] != nil && len(d.queue) == 0 {
		// a prepared function: build its kernels for these shapes now
		var err error
		if k, err = d.kernelFor(n, types, want); err != nil {
			return nil, err
		}
	}
	if k == nil || len(d.queue) > 0 {
		// unprepared: run at the next Sync or Download, when the kernels
		// of every queued node are compiled in one module
		d.queue = append(d.queue, pending{n: n, in: types, out: want, ts: ts, outT: outT})
		if len(d.queue) >= maxQueue {
			if err := d.flush(); err != nil {
				return nil, err
			}
		}
		return res, nil
	}
	if err := d.run(k, ts, outT); err != nil {
		return nil, err
	}
	return res, nil
}

// lastLaunch is the types and kernel of a node's last launch.
type lastLaunch struct {
	in, out []ir.Type
	k       *kernel
}

// sameTypes reports whether the tensors have exactly the types ts.
func sameTypes(ts []*tensor.Tensor, types []ir.Type) bool {
	if len(ts) != len(types) {
		return false
	}
	for i, t := range ts {
		if t.DType != types[i].DType || len(t.Shape) != len(types[i].Shape) {
			return false
		}
		for j, d := range t.Shape {
			if types[i].Shape[j].Size != int64(d) || !types[i].Shape[j].IsStatic() {
				return false
			}
		}
	}
	return true
}

// pending is a launch whose kernel was not compiled yet.
type pending struct {
	n        *ir.Node
	in, out  []ir.Type
	ts, outT []*tensor.Tensor
}

// flush compiles the kernels of the queued launches (one module) and runs
// them in order. Must hold d.mu.
func (d *Device) flush() error {
	if len(d.queue) == 0 {
		return nil
	}
	q := d.queue
	d.queue = nil
	// One module per round: a node queued with two shape sets (two calls
	// of a function before a sync) has its second kernel in a second module,
	// as entry names are per node.
	todo := q
	for len(todo) > 0 {
		var nodes []*ir.Node
		var ins, outs [][]ir.Type
		var later []pending
		seen := map[kernelKey]bool{}
		inRound := map[*ir.Node]bool{}
		for _, p := range todo {
			key := d.key(p.n, p.in, p.out)
			switch {
			case d.kernels[key] != nil || seen[key]:
			case inRound[p.n]:
				later = append(later, p)
			default:
				seen[key], inRound[p.n] = true, true
				nodes, ins, outs = append(nodes, p.n), append(ins, p.in), append(outs, p.out)
			}
		}
		if err := d.build(nodes, ins, outs, nil, true); err != nil {
			return err
		}
		todo = later
	}
	for _, p := range q {
		k := d.kernels[d.key(p.n, p.in, p.out)]
		if k == nil {
			return &runtime.KernelError{Device: d.Name(), Node: p.n, Err: errors.New("no kernel was built")}
		}
		if err := d.run(k, p.ts, p.outT); err != nil {
			return &runtime.KernelError{Device: d.Name(), Node: p.n, Err: err}
		}
	}
	return nil
}

// run calls a kernel over all its items, split over goroutines when the
// work pays for them.
func (d *Device) run(k *kernel, in, out []*tensor.Tensor) error {
	items := int64(k.k.Grid[0])
	if items <= 0 {
		return nil
	}
	var pin goruntime.Pinner
	defer pin.Unpin()
	ptrs := make([]uintptr, len(k.k.Bindings)+1) // +1: never empty
	for i, b := range k.k.Bindings {
		var t *tensor.Tensor
		if b.Access == codegen.Write {
			t = out[b.Output]
		} else {
			t = in[b.Input]
		}
		if len(t.Data) > 0 {
			pin.Pin(&t.Data[0])
			ptrs[i] = uintptr(unsafe.Pointer(&t.Data[0]))
		}
	}
	pin.Pin(&ptrs[0])
	arg := uintptr(unsafe.Pointer(&ptrs[0]))
	w := int64(d.workers)
	if k.work < parallelWork {
		w = 1
	}
	w = min(w, items)
	if w <= 1 {
		return status(k, call(k.fn, arg, 0, items))
	}
	// Chunks are handed out dynamically (a thread slowed down by other
	// work on its core takes fewer); every item is computed by the same
	// code whatever the chunking, so the bits do not depend on it.
	chunks := min(items, chunksPerWorker*w)
	var next atomic.Int64
	st := make([]int32, w)
	work := func(i int64) {
		for {
			c := next.Add(1) - 1
			if c >= chunks {
				return
			}
			if s := call(k.fn, arg, c*items/chunks, (c+1)*items/chunks); s != 0 && st[i] == 0 {
				st[i] = s
			}
		}
	}
	var wg sync.WaitGroup
	for i := int64(1); i < w; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			work(i)
		}()
	}
	work(0)
	wg.Wait()
	for _, s := range st {
		if err := status(k, s); err != nil {
			return err
		}
	}
	return nil
}

func call(fn, bufs uintptr, lo, hi int64) int32 {
	r, _, _ := purego.SyscallN(fn, bufs, uintptr(lo), uintptr(hi))
	return int32(uint32(r))
}

func status(k *kernel, s int32) error {
	if s == 0 {
		return nil
	}
	return cg.StatusError(k.k.Op, s)
}
