package cpu

import (
	"fmt"
	goruntime "runtime"
	"sync"

	"github.com/tapml/tapml/ir"
	"github.com/tapml/tapml/runtime"
	"github.com/tapml/tapml/runtime/internal/devkit"
	"github.com/tapml/tapml/tensor"
)

// Device is the CPU reference device. Its methods are safe for concurrent
// use.
type Device struct {
	// workers is the number of goroutines a large loop is split over. The
	// partition never changes results: each output element is computed by
	// exactly one goroutine with the same code whatever the split.
	workers int

	mu    sync.Mutex
	exprs map[string]*program // compiled fused_elementwise expressions
	// weights are the tensors uploaded as weights (immutable), mapped to
	// their f32 decoding once an op that computes in f32 has read them
	// (nil until then): a stored weight is decoded once, not per call.
	weights map[*tensor.Tensor]*tensor.Tensor

	// round16 emulates a target that stores f32 tensors as f16
	// (Options.Round16).
	round16 bool
}

// Options configure the CPU reference.
type Options struct {
	// Round16 emulates f16 compute as the GPU targets do it (f16 storage,
	// f32 arithmetic inside each op): every f32 tensor uploaded (inputs,
	// f32 weights) and every f32 output of an op is rounded to the nearest
	// f16 (ties to even; beyond 65504 to infinity), while each op still
	// computes in f32 from the rounded values. So a case can be judged
	// against what correct f16 code gives, not only against the f32
	// truth. Stored weights (f16, bf16, block formats) are decoded exactly
	// as always.
	Round16 bool
}

// NewWith returns a CPU reference device with options o.
func NewWith(o Options) *Device {
	d := New()
	d.round16 = o.Round16
	return d
}

var (
	_ runtime.Device         = (*Device)(nil)
	_ runtime.Preparer       = (*Device)(nil)
	_ runtime.WeightUploader = (*Device)(nil)
)

// New returns a CPU device that uses up to GOMAXPROCS goroutines.
func New() *Device {
	return &Device{workers: max(1, goruntime.GOMAXPROCS(0)), exprs: map[string]*program{}, weights: map[*tensor.Tensor]*tensor.Tensor{}}
}

// UploadWeight wraps a weight as Upload does and remembers that it never
// changes, so that its f32 decoding (of an f16, bf16 or block-format
// weight) is computed once and kept until the buffer is freed.
func (d *Device) UploadWeight(_ string, t *tensor.Tensor) (*runtime.Buffer, error) {
	b, err := d.Upload(t)
	if err != nil {
		return nil, err
	}
	d.mu.Lock()
	d.weights[t] = nil
	d.mu.Unlock()
	return b, nil
}

// widened returns t as f32: its cached decoding when t is a weight.
func (d *Device) widened(t *tensor.Tensor) *tensor.Tensor {
	d.mu.Lock()
	w, isWeight := d.weights[t]
	d.mu.Unlock()
	if w != nil {
		return w
	}
	w = t.Convert(ir.F32)
	if isWeight {
		d.mu.Lock()
		d.weights[t] = w
		d.mu.Unlock()
	}
	return w
}

// Name returns "cpu".
func (d *Device) Name() string { return "cpu" }

// Upload wraps t in a buffer without copying it. The caller must not modify
// t afterwards; ops that work in place (kv_write) modify t.
func (d *Device) Upload(t *tensor.Tensor) (*runtime.Buffer, error) {
	if t == nil {
		return nil, fmt.Errorf("cpu: upload of a nil tensor")
	}
	if err := devkit.CheckTensor(t); err != nil {
		return nil, fmt.Errorf("cpu: upload: %w", err)
	}
	if d.round16 {
		t = Round16(t) // a copy: the caller's tensor (a mapped weight) stays as it is
	}
	return d.wrap(t), nil
}

func (d *Device) wrap(t *tensor.Tensor) *runtime.Buffer {
	return &runtime.Buffer{Dev: d, DType: t.DType, Shape: append([]int{}, t.Shape...), Handle: t}
}

// Download returns a copy of the buffer's tensor.
func (d *Device) Download(b *runtime.Buffer) (*tensor.Tensor, error) {
	t, err := handle(b)
	if err != nil {
		return nil, fmt.Errorf("cpu: download: %w", err)
	}
	return t.Clone(), nil
}

// Tensor returns the tensor behind a CPU buffer without copying it (the
// device may still update it in place). Tests and the carve recorder use it.
func Tensor(b *runtime.Buffer) (*tensor.Tensor, error) { return handle(b) }

// Sync does nothing: Launch finishes its work before it returns.
func (d *Device) Sync() error { return nil }

// Free drops the buffer's reference to its tensor (and a weight's f32
// decoding).
func (d *Device) Free(b *runtime.Buffer) {
	if b == nil {
		return
	}
	if t, ok := b.Handle.(*tensor.Tensor); ok {
		d.mu.Lock()
		delete(d.weights, t)
		d.mu.Unlock()
	}
	b.Handle = nil
}

// Close does nothing; the device holds no resources.
func (d *Device) Close() error { return nil }

func handle(b *runtime.Buffer) (*tensor.Tensor, error) {
	if b == nil {
		return nil, fmt.Errorf("nil buffer")
	}
	if b.Handle == nil {
		return nil, fmt.Errorf("buffer %s was freed", b)
	}
	t, ok := b.Handle.(*tensor.Tensor)
	if !ok {
		return nil, fmt.Errorf("buffer %s is not a CPU buffer (handle %T)", b, b.Handle)
	}
	return t, nil
}

// call is one launch of a node: its inputs as tensors, its normalized
// attributes and the expected output types (nil when the caller gave none).
type call struct {
	op    ir.Op
	attrs ir.Attrs
	in    []*tensor.Tensor
	outs  []ir.Type
}

// kernel computes a node's outputs. It may return one of its inputs
// (identity ops, kv_write's in-place update) or a view sharing its data.
type kernel func(d *Device, c *call) ([]*tensor.Tensor, error)

var kernels = map[ir.Op]kernel{}

func init() {
	for _, op := range ir.UnaryOps {
		kernels[op] = unaryKernel
	}
	for _, op := range ir.BinaryOps {
		kernels[op] = binaryKernel
	}
	for op, k := range map[ir.Op]kernel{
		ir.OpConstant: constantKernel, ir.OpCast: castKernel, ir.OpGather: gatherKernel, ir.OpDequantize: dequantizeKernel,
		ir.OpMatmul: matmulKernel, ir.OpRMSNorm: rmsNormKernel, ir.OpRMSNormMatmul: rmsNormMatmulKernel, ir.OpRMSNormSwiGLU: rmsNormSwiGLUKernel, ir.OpRMSNormQKV: rmsNormQKVKernel, ir.OpLayerNorm: layerNormKernel,
		ir.OpSoftmax: softmaxKernel, ir.OpArgmax: argmaxKernel, ir.OpRope: ropeKernel, ir.OpRopeKVWrite: ropeKVWriteKernel,
		ir.OpKVWrite: kvWriteKernel, ir.OpAttention: attentionKernel,
		ir.OpReshape: reshapeKernel, ir.OpTranspose: transposeKernel, ir.OpSlice: sliceKernel,
		ir.OpConcat: concatKernel, ir.OpProbe: identityKernel, ir.OpTransfer: identityKernel,
		ir.OpFusedElementwise: fusedKernel, ir.OpCompare: compareKernel, ir.OpWhere: whereKernel,
		ir.OpTopK: topkKernel, ir.OpExpertMatmul: expertMatmulKernel,
		ir.OpTokenShift: tokenShiftKernel, ir.OpCausalConv1D: causalConv1DKernel, ir.OpWKV: wkvKernel,
		ir.OpSelectiveScan: selectiveScanKernel,
	} {
		kernels[op] = k
	}
}

// Prepare checks, before a run, that every node has a kernel and valid
// attributes, and compiles the expressions of fused_elementwise nodes. It
// reports the first problem as a *runtime.KernelError naming the node.
func (d *Device) Prepare(_ *ir.Module, _ *ir.Function, nodes []*ir.Node) error {
	for _, n := range nodes {
		fail := func(err error) error { return &runtime.KernelError{Device: d.Name(), Node: n, Err: err} }
		def := ir.LookupOp(n.Op)
		if def == nil || kernels[n.Op] == nil {
			return fail(fmt.Errorf("no kernel for op %q", n.Op))
		}
		a, err := normAttrs(def, n.Attrs)
		if err != nil {
			return fail(err)
		}
		if n.Op == ir.OpFusedElementwise {
			if _, err := d.program(a.String("expr")); err != nil {
				return fail(err)
			}
		}
	}
	return nil
}

// Supports reports whether the device has a kernel for op.
func Supports(op ir.Op) bool { return kernels[op] != nil }

// Launch runs node n on its inputs and returns its outputs. The work is
// done when Launch returns. kv_write updates its cache input in place and
// returns that same buffer as its output. Errors are *runtime.KernelError
// values naming the node.
func (d *Device) Launch(n *ir.Node, in []*runtime.Buffer, outs []ir.Type) ([]*runtime.Buffer, error) {
	if n == nil {
		return nil, fmt.Errorf("cpu: launch of a nil node")
	}
	res, err := d.launch(n, in, outs)
	if err != nil {
		return nil, &runtime.KernelError{Device: d.Name(), Node: n, Err: err}
	}
	return res, nil
}

func (d *Device) launch(n *ir.Node, in []*runtime.Buffer, outs []ir.Type) (res []*runtime.Buffer, err error) {
	def := ir.LookupOp(n.Op)
	if def == nil {
		return nil, fmt.Errorf("unknown op %q", n.Op)
	}
	k := kernels[n.Op]
	if k == nil {
		return nil, fmt.Errorf("no kernel for op %s", n.Op)
	}
	if len(in) < def.MinInputs || (def.MaxInputs >= 0 && len(in) > def.MaxInputs) {
		return nil, fmt.Errorf("got %d inputs, want %d to %d", len(in), def.MinInputs, def.MaxInputs)
	}
	c := &call{op: n.Op, in: make([]*tensor.Tensor, len(in)), outs: outs}
	for i, b := range in {
		t, err := handle(b)
		if err != nil {
			return nil, fmt.Errorf("input %d: %w", i, err)
		}
		if err := devkit.CheckTensor(t); err != nil {
			return nil, fmt.Errorf("input %d: %w", i, err)
		}
		c.in[i] = t
	}
	if c.attrs, err = normAttrs(def, n.Attrs); err != nil {
		return nil, err
	}
	// Kernels check what they index; this turns a kernel bug into an error
	// rather than a crash of the caller.
	defer func() {
		if r := recover(); r != nil {
			res, err = nil, fmt.Errorf("internal error: %v", r)
		}
	}()
	ts, err := d.run(k, c)
	if err != nil {
		return nil, err
	}
	res = make([]*runtime.Buffer, len(ts))
	for i, t := range ts {
		if d.round16 && t.DType == ir.F32 {
			roundTo16(t)
		}
		if i < len(outs) && outs[i].Shape.IsStatic() && !hasType(t, outs[i]) {
			return nil, fmt.Errorf("output %d is %s, the caller expects %s", i, t.Type(), outs[i])
		}
		for j, x := range c.in {
			if x == t {
				res[i] = in[j] // identity or in-place update: the same buffer
			}
		}
		if res[i] == nil {
			res[i] = d.wrap(t)
		}
	}
	return res, nil
}

// hasType reports whether t has the static type want.
func hasType(t *tensor.Tensor, want ir.Type) bool {
	if t.DType != want.DType || len(t.Shape) != len(want.Shape) {
		return false
	}
	for i, d := range want.Shape {
		if d.Sym != "" || int64(t.Shape[i]) != d.Size {
			return false
		}
	}
	return true
}

// run calls k, widening the f16/bf16 inputs of ops that compute in f32
// (the registry's Compute), and the inputs in a storage dtype that the op
// reads (its Storage fact: decoded exactly as ggml does), and narrowing
// float outputs back to the expected dtype (that of the first widened
// input that is not stored, when the caller gives none).
func (d *Device) run(k kernel, c *call) ([]*tensor.Tensor, error) {
	def := ir.LookupOp(c.op)
	if def.Compute == ir.ComputeStored {
		return k(d, c)
	}
	types := make([]ir.Type, len(c.in))
	for i, t := range c.in {
		types[i] = t.Type()
	}
	st := def.Storage.Of(ir.Call{In: types, Attrs: c.attrs})
	narrow, widen := ir.Invalid, false
	wide := append([]*tensor.Tensor{}, c.in...)
	for i, t := range c.in {
		switch {
		case st.Accepts(i, t.DType):
			wide[i], widen = d.widened(t), true
		case t.DType == ir.F16 || t.DType == ir.BF16:
			wide[i], widen = d.widened(t), true
			if narrow == ir.Invalid {
				narrow = t.DType
			}
		}
	}
	if !widen {
		return k(d, c)
	}
	if narrow == ir.Invalid {
		narrow = ir.F32
	}
	wc := *c
	wc.in = wide
	wc.outs = nil
	ts, err := k(d, &wc)
	if err != nil {
		return nil, err
	}
	for i, t := range ts {
		want := narrow
		if i < len(c.outs) {
			want = c.outs[i].DType
		}
		if t.DType == ir.F32 && want != ir.F32 && want.IsFloat() {
			ts[i] = t.Convert(want)
		}
	}
	return ts, nil
}

// normAttrs returns a's attributes with defaults filled in; a itself when it
// is already normalized (the common case: nodes from a Builder or Parse).
func normAttrs(def *ir.OpDef, a ir.Attrs) (ir.Attrs, error) {
	if len(a) == len(def.Attrs) {
		ok := true
		for i := range def.Attrs {
			v, has := a[def.Attrs[i].Name]
			if !has || v.Kind != def.Attrs[i].Kind {
				ok = false
				break
			}
		}
		if ok {
			return a, nil
		}
	}
	return def.NormalizeAttrs(a)
}

// outShape returns the expected static shape of output i, or nil.
func (c *call) outShape(i int) []int {
	if i < len(c.outs) && c.outs[i].Shape.IsStatic() {
		return c.outs[i].Shape.Sizes()
	}
	return nil
}

// parallel runs fn over [0, n) split into contiguous ranges, one per
// goroutine, when work (a rough count of operations) is large enough to pay
// for them. fn must compute each index independently of the split.
func (d *Device) parallel(n, work int, fn func(lo, hi int)) {
	w := min(d.workers, n)
	if w <= 1 || work < parallelWork {
		fn(0, n)
		return
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var perr any
	for i := 1; i < w; i++ {
		lo, hi := i*n/w, (i+1)*n/w
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() {
				if r := recover(); r != nil {
					mu.Lock()
					perr = r
					mu.Unlock()
				}
			}()
			fn(lo, hi)
		}()
	}
	fn(0, n/w)
	wg.Wait()
	if perr != nil {
		panic(perr) // recovered by Launch
	}
}

// parallelWork is the smallest amount of work split over goroutines.
const parallelWork = 1 << 18
