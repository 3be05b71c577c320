package runtime_test

import (
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/tapml/tapml/frontend/arch"
	"github.com/tapml/tapml/frontend/arch/llama"
	"github.com/tapml/tapml/ir"
	"github.com/tapml/tapml/passes"
	"github.com/tapml/tapml/runtime"
	"github.com/tapml/tapml/runtime/cpu"
	"github.com/tapml/tapml/runtime/llm"
	"github.com/tapml/tapml/tensor"
)

// countingDevice wraps a device and counts live buffers, so tests can see
// leaks and double frees.
type countingDevice struct {
	runtime.Device
	name string
	live map[*runtime.Buffer]bool
	t    *testing.T
}

func newCounting(t *testing.T, name string) *countingDevice {
	return &countingDevice{Device: cpu.New(), name: name, live: map[*runtime.Buffer]bool{}, t: t}
}

func (d *countingDevice) Name() string { return d.name }

func (d *countingDevice) wrap(b *runtime.Buffer) *runtime.Buffer {
	b.Dev = d
	d.live[b] = true
	return b
}

func (d *countingDevice) Upload(t *tensor.Tensor) (*runtime.Buffer, error) {
	b, err := d.Device.Upload(t)
	if err != nil {
		return nil, err
	}
	return d.wrap(b), nil
}

func (d *countingDevice) Download(b *runtime.Buffer) (*tensor.Tensor, error) {
	if !d.live[b] {
		d.t.Errorf("%s: download of a buffer that is not live", d.name)
	}
	return d.Device.Download(b)
}

func (d *countingDevice) Launch(n *ir.Node, in []*runtime.Buffer, outs []ir.Type) ([]*runtime.Buffer, error) {
	for _, b := range in {
		if !d.live[b] {
			d.t.Fatalf("%s: node %s reads a buffer that was freed or lives elsewhere", d.name, n)
		}
	}
	res, err := d.Device.Launch(n, in, outs)
	for _, b := range res {
		if !d.live[b] {
			d.wrap(b)
		}
	}
	return res, err
}

func (d *countingDevice) Free(b *runtime.Buffer) {
	if !d.live[b] {
		d.t.Errorf("%s: double free or foreign buffer", d.name)
	}
	delete(d.live, b)
	d.Device.Free(b)
}

// A model split over two devices gives the same logits as one device, moves
// tensors only at transfer nodes, and leaves no intermediate alive.
func TestMixedPlacement(t *testing.T) {
	m, err := arch.Build("tiny", llama.Tiny, llama.RandomWeights(llama.Tiny, 3))
	if err != nil {
		t.Fatal(err)
	}
	split := m.Clone()
	pipe, err := passes.Parse("split.yaml", []byte("passes:\n  - shape_inference\n  - partition: {policy: layers, layers: \"1\"}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pipe.Run(split, passes.RunConfig{}); err != nil {
		t.Fatal(err)
	}
	transfers := 0
	for _, n := range split.Func("decode").Nodes {
		if n.Op == ir.OpTransfer {
			transfers++
		}
	}
	if transfers == 0 {
		t.Fatal("partition inserted no transfers")
	}

	run := func(exec *runtime.Executor) [][]float32 {
		s, err := llm.NewSession(exec)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		var all [][]float32
		logits, err := s.Forward([]int{1, 5, 9, 2})
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, logits)
		for i := 0; i < 3; i++ {
			if logits, err = s.Forward([]int{llm.Argmax(logits)}); err != nil {
				t.Fatal(err)
			}
			all = append(all, logits)
		}
		return all
	}
	want := run(runtime.NewExecutor(m, cpu.New()))

	src, tgt := newCounting(t, "src"), newCounting(t, "tgt")
	exec := runtime.NewExecutor(split, src)
	exec.SetDevice("source", src)
	exec.SetDevice("target", tgt)
	got := run(exec)
	for i := range want {
		for j := range want[i] {
			// Both devices are the CPU reference: the split must be bit-exact.
			if got[i][j] != want[i][j] {
				t.Fatalf("step %d logit %d: %g on two devices, %g on one", i, j, got[i][j], want[i][j])
			}
		}
	}
	if len(tgt.live) == 0 {
		t.Error("nothing ran on the target device")
	}
	exec.Close()
	if len(src.live) != 0 || len(tgt.live) != 0 {
		t.Errorf("buffers left alive after the session and executor closed: source %d, target %d", len(src.live), len(tgt.live))
	}
}

// Caches that prefill updated on the target come back as arguments of
// decode, whose kv_write runs on the source: the executor moves them and
// kv_write updates the moved copy in place. That copy must live on as
// kv_write's output (it was freed with the argument, and attention read a
// freed buffer).
func TestCachesMovedBackToSource(t *testing.T) {
	m, err := arch.Build("tiny", llama.Tiny, llama.RandomWeights(llama.Tiny, 3))
	if err != nil {
		t.Fatal(err)
	}
	var pre []string
	for _, n := range m.Func("prefill").Nodes {
		pre = append(pre, strconv.Itoa(n.ID))
	}
	split := m.Clone()
	pipe, err := passes.Parse("split.yaml", []byte("passes:\n  - shape_inference\n  - partition: {policy: nodes, nodes: ["+strings.Join(pre, ", ")+"]}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pipe.Run(split, passes.RunConfig{}); err != nil {
		t.Fatal(err)
	}
	run := func(exec *runtime.Executor) [][]float32 {
		s, err := llm.NewSession(exec)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		logits, err := s.Forward([]int{1, 5, 9, 2})
		if err != nil {
			t.Fatal(err)
		}
		all := [][]float32{logits}
		for i := 0; i < 3; i++ {
			if logits, err = s.Forward([]int{llm.Argmax(logits)}); err != nil {
				t.Fatal(err)
			}
			all = append(all, logits)
		}
		return all
	}
	want := run(runtime.NewExecutor(m, cpu.New()))
	src, tgt := newCounting(t, "src"), newCounting(t, "tgt")
	exec := runtime.NewExecutor(split, src)
	exec.SetDevice("source", src)
	exec.SetDevice("target", tgt)
	got := run(exec)
	for i := range want {
		for j := range want[i] {
			if got[i][j] != want[i][j] {
				t.Fatalf("step %d logit %d: %g with prefill on the target, %g on one device", i, j, got[i][j], want[i][j])
			}
		}
	}
	exec.Close()
	if len(src.live) != 0 || len(tgt.live) != 0 {
		t.Errorf("buffers left alive: source %d, target %d", len(src.live), len(tgt.live))
	}
}

// A call that fails midway frees the buffers it allocated; the arguments
// (tokens, position, caches) stay.
func TestFailedCallFreesIntermediates(t *testing.T) {
	m, err := arch.Build("tiny", llama.Tiny, llama.RandomWeights(llama.Tiny, 3))
	if err != nil {
		t.Fatal(err)
	}
	dev := newCounting(t, "dev")
	exec := runtime.NewExecutor(m, dev)
	defer exec.Close()
	s, err := llm.NewSession(exec)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	before := len(dev.live)
	// Position past the cache: kv_write fails after gather, norms and matmuls ran.
	tok, _ := dev.Upload(tensor.FromInt32([]int{1}, []int32{3}))
	pos, _ := dev.Upload(tensor.ScalarInt32(int32(s.MaxSeq)))
	f := m.Func("decode")
	args := []*runtime.Buffer{tok, pos}
	for _, p := range f.Params[2:] {
		b, err := dev.Upload(tensor.New(p.Type.DType, p.Type.Shape.Sizes()))
		if err != nil {
			t.Fatal(err)
		}
		args = append(args, b)
	}
	weightsBefore := len(dev.live)
	if _, err := exec.Call("decode", args...); err == nil {
		t.Fatal("decode past the cache succeeded")
	}
	// Weights uploaded during the call stay cached in the executor.
	weights := 0
	for _, w := range m.Weights {
		if _, err := exec.WeightBuffer(w, dev); err == nil {
			weights++
		}
	}
	if got, want := len(dev.live), weightsBefore+weights; got > want {
		t.Errorf("%d buffers live after the failed call, want at most %d (args and weights; %d before the session)", got, want, before)
	}
}

// A call stopped by its OnNode hook frees the outputs of the node the hook
// refused too, not only those of the nodes before it.
func TestOnNodeErrorFreesOutputs(t *testing.T) {
	m, err := arch.Build("tiny", llama.Tiny, llama.RandomWeights(llama.Tiny, 3))
	if err != nil {
		t.Fatal(err)
	}
	dev := newCounting(t, "dev")
	exec := runtime.NewExecutor(m, dev)
	defer exec.Close()
	s, err := llm.NewSession(exec)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	exec.OnNode = func(n *ir.Node, in, out []*runtime.Buffer) error {
		if n.Op == ir.OpMatmul {
			return errStop
		}
		return nil
	}
	before := len(dev.live)
	if _, err := s.Forward([]int{1, 5}); err == nil {
		t.Fatal("the hook's error was not returned")
	}
	weights := 0
	for _, w := range m.Weights {
		if _, err := exec.WeightBuffer(w, dev); err == nil {
			weights++
		}
	}
	if got, want := len(dev.live), before+weights; got > want {
		t.Errorf("%d buffers live after the failed call, want at most %d (caches and weights)", got, want)
	}
}

var errStop = errors.New("stop")

// A result that a node on another device also reads (moved there without a
// transfer node) leaves no copy behind once the call returns.
func TestMovedCopyOfResultFreed(t *testing.T) {
	m := ir.NewModule("moved")
	b := ir.NewFunction(m, "f")
	x := b.Param("x", ir.T(ir.F32, ir.S(4)))
	y := b.Op(ir.OpNeg, []*ir.Value{x}, nil)
	z := b.Op(ir.OpExp, []*ir.Value{y}, nil)
	b.Return(y, z)
	if err := b.Err(); err != nil {
		t.Fatal(err)
	}
	z.Def.Place = "target"
	src, tgt := newCounting(t, "src"), newCounting(t, "tgt")
	exec := runtime.NewExecutor(m, src)
	exec.SetDevice("target", tgt)
	arg, err := src.Upload(tensor.FromFloat32([]int{4}, []float32{1, 2, 3, 4}))
	if err != nil {
		t.Fatal(err)
	}
	res, err := exec.Call("f", arg)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		r.Dev.Free(r)
	}
	src.Free(arg)
	if len(src.live) != 0 || len(tgt.live) != 0 {
		t.Errorf("buffers left alive after the results and argument were freed: source %d, target %d", len(src.live), len(tgt.live))
	}
}

// A probe that observes a weight directly (possible in hand-written IR)
// passes the cached weight buffer on; the call must not free it.
func TestProbeOfWeightKeepsWeight(t *testing.T) {
	m := ir.NewModule("w")
	w := m.AddWeight("w", ir.T(ir.F32, ir.S(2)), ir.BytesSource(tensor.FromFloat32([]int{2}, []float32{1, 2}).Data))
	b := ir.NewFunction(m, "f")
	x := b.Param("x", ir.T(ir.F32, ir.S(2)))
	p := b.Op(ir.OpProbe, []*ir.Value{w}, nil)
	b.Return(b.Add(x, p))
	if err := b.Err(); err != nil {
		t.Fatal(err)
	}
	dev := newCounting(t, "dev")
	exec := runtime.NewExecutor(m, dev)
	for i := 0; i < 2; i++ {
		arg, _ := dev.Upload(tensor.FromFloat32([]int{2}, []float32{10, 20}))
		out, err := exec.Call("f", arg)
		if err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
		got, _ := runtime.Download(out[0])
		if got.Float32s()[1] != 22 {
			t.Fatalf("call %d: got %v", i, got.Float32s())
		}
	}
}

// UploadWeights puts every weight the functions read on the device before
// any call, so a first call uploads nothing more; an unknown function is an
// error naming it.
func TestUploadWeights(t *testing.T) {
	m, err := arch.Build("tiny", llama.Tiny, llama.RandomWeights(llama.Tiny, 3))
	if err != nil {
		t.Fatal(err)
	}
	dev := newCounting(t, "dev")
	exec := runtime.NewExecutor(m, dev)
	defer exec.Close()
	if err := exec.UploadWeights("prefill", "decode"); err != nil {
		t.Fatal(err)
	}
	var want int64
	for _, w := range m.Weights {
		want += w.Type.Bytes()
	}
	if got, _ := exec.WeightBytes(dev); got != want {
		t.Errorf("%d weight bytes on the device after UploadWeights, want all %d", got, want)
	}
	if err := exec.UploadWeights("nope"); err == nil || !strings.Contains(err.Error(), "@nope") {
		t.Errorf("UploadWeights of an unknown function: %v, want an error naming @nope", err)
	}
}
