package webgpu

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/tapml/tapml/codegen"
	"github.com/tapml/tapml/ir"
	"github.com/tapml/tapml/runtime"
	"github.com/tapml/tapml/tensor"
)

// smallModule is f(x f32[4, 8], y f32[8]) = softmax(mul(add(x, y), add(x, y))).
func smallModule(t *testing.T) (*ir.Module, map[ir.Op]*ir.Node) {
	t.Helper()
	m := ir.NewModule("small")
	b := ir.NewFunction(m, "f")
	x := b.Param("x", ir.T(ir.F32, ir.S(4, 8)))
	y := b.Param("y", ir.T(ir.F32, ir.S(8)))
	a := b.At("blk.add").Add(x, y)
	p := b.At("blk.mul").Mul(a, a)
	s := b.At("blk.softmax").Op(ir.OpSoftmax, []*ir.Value{p}, nil)
	b.Return(s)
	if err := b.Err(); err != nil {
		t.Fatal(err)
	}
	nodes := map[ir.Op]*ir.Node{}
	for _, n := range b.F.Nodes {
		nodes[n.Op] = n
	}
	return m, nodes
}

func smallArgs(t *testing.T, d runtime.Device) []*runtime.Buffer {
	t.Helper()
	r := newRand(3)
	x, err := d.Upload(randF32(r, -1, 1, 4, 8))
	if err != nil {
		t.Fatal(err)
	}
	y, err := d.Upload(randF32(r, -1, 1, 8))
	if err != nil {
		t.Fatal(err)
	}
	return []*runtime.Buffer{x, y}
}

// callSmall runs the small module and downloads its result.
func callSmall(t *testing.T, exec *runtime.Executor) (*tensor.Tensor, error) {
	t.Helper()
	d := exec.Device("")
	args := smallArgs(t, d)
	defer func() {
		for _, a := range args {
			d.Free(a)
		}
	}()
	out, err := exec.Call("f", args...)
	if err != nil {
		return nil, err
	}
	defer d.Free(out[0])
	return d.Download(out[0])
}

// withHook installs a kernel hook on the shared device for one test.
func withHook(t *testing.T, h func(k *codegen.Kernel)) {
	testDev.mu.Lock()
	testDev.hook = h
	testDev.mu.Unlock()
	t.Cleanup(func() {
		testDev.mu.Lock()
		testDev.hook = nil
		testDev.mu.Unlock()
	})
}

// wantKernelError checks that err is a KernelError naming node n, and that
// its message names the op, the node and the given detail.
func wantKernelError(t *testing.T, err error, n *ir.Node, detail string) {
	t.Helper()
	var ke *runtime.KernelError
	if !errors.As(err, &ke) {
		t.Fatalf("got %v (%T), want a *runtime.KernelError", err, err)
	}
	if ke.Node != n {
		t.Errorf("error names node %v, want %v", ke.Node, n)
	}
	msg := err.Error()
	for _, s := range []string{n.Op.String(), n.Prov, "#" + strconv.Itoa(n.ID), detail} {
		if !strings.Contains(msg, s) {
			t.Errorf("error %q does not mention %q", msg, s)
		}
	}
	t.Logf("error: %v", err)
}

// TestInvalidShaderIsAnError breaks the WGSL of one node: the executor's
// call fails with a KernelError naming that node and the compiler's
// line:column, the process survives, and the device works afterwards.
func TestInvalidShaderIsAnError(t *testing.T) {
	m, nodes := smallModule(t)
	mul := nodes[ir.OpMul]
	withHook(t, func(k *codegen.Kernel) {
		if k.NodeID == mul.ID {
			k.Source = append(k.Source, []byte("\nfn broken() -> f32 { return 1u; }\n")...)
		}
	})
	exec := runtime.NewExecutor(m, testDev)
	_, err := callSmall(t, exec)
	wantKernelError(t, err, mul, "shader module")
	if err == nil || !strings.Contains(err.Error(), ":") {
		t.Errorf("error lacks a source position: %v", err)
	}
	// Prepare reports the same node before anything runs.
	m2, nodes2 := smallModule(t)
	mul2 := nodes2[ir.OpMul]
	withHook(t, func(k *codegen.Kernel) {
		if k.NodeID == mul2.ID {
			k.Source = []byte("this is not WGSL")
		}
	})
	err = runtime.NewExecutor(m2, testDev).Prepare("f")
	wantKernelError(t, err, mul2, "shader module")

	withHook(t, nil)
	want := referenceSmall(t, m)
	got, err := callSmall(t, runtime.NewExecutor(m, testDev))
	if err != nil {
		t.Fatalf("device unusable after a shader error: %v", err)
	}
	compare(t, "after error", want, got, reduction)
}

func referenceSmall(t *testing.T, m *ir.Module) *tensor.Tensor {
	t.Helper()
	x, err := callSmall(t, runtime.NewExecutor(m, refDev))
	if err != nil {
		t.Fatal(err)
	}
	return x
}

// TestInvalidDispatchIsAnError makes one dispatch exceed the device's grid
// limit. wgpu rejects it when its compute pass ends, before anything is
// submitted (a validation error inside Submit would abort the process).
// By default dispatches share a pass, so the error comes from the Download
// that submits the batch; with SafeDispatch it comes from the launch
// itself, and the work recorded before it in the batch is reported lost at
// the next call. Either way it is a KernelError naming the node, and the
// device works afterwards.
func TestInvalidDispatchIsAnError(t *testing.T) {
	safe, err := Open(Options{SafeDispatch: true})
	if err != nil {
		t.Fatal(err)
	}
	defer safe.Close()
	for _, d := range []*Device{testDev, safe} {
		t.Run(fmt.Sprintf("safe=%v", d.opts.SafeDispatch), func(t *testing.T) {
			m, nodes := smallModule(t)
			sm := nodes[ir.OpSoftmax]
			setHook(d, func(k *codegen.Kernel) {
				if k.NodeID == sm.ID {
					k.Grid[0] = int(d.limits.MaxComputeWorkgroupsPerDimension) + 1
				}
			})
			_, err := callSmall(t, runtime.NewExecutor(m, d))
			wantKernelError(t, err, sm, "dispatch")
			err = d.Sync()
			if d.opts.SafeDispatch {
				// add and mul were recorded in the dropped encoder.
				if err == nil || !strings.Contains(err.Error(), "dropped") {
					t.Errorf("Sync after a dropped batch: got %v, want an error about dropped work", err)
				}
				err = d.Sync()
			}
			if err != nil {
				t.Errorf("Sync: %v", err)
			}
			setHook(d, nil)
			m2, _ := smallModule(t)
			got, err := callSmall(t, runtime.NewExecutor(m2, d))
			if err != nil {
				t.Fatalf("device unusable after a dispatch error: %v", err)
			}
			compare(t, "after error", referenceSmall(t, m2), got, reduction)
		})
	}
}

func setHook(d *Device, h func(k *codegen.Kernel)) {
	d.mu.Lock()
	d.hook = h
	d.mu.Unlock()
}

// TestFreedBufferIsAnError checks that using a freed buffer is an error.
func TestFreedBufferIsAnError(t *testing.T) {
	b, err := testDev.Upload(tensor.FromFloat32([]int{3}, []float32{1, 2, 3}))
	if err != nil {
		t.Fatal(err)
	}
	testDev.Free(b)
	if _, err := testDev.Download(b); err == nil {
		t.Error("download of a freed buffer succeeded")
	}
	n, outs := mkNode(t, 1, ir.OpNeg, nil, ir.T(ir.F32, ir.S(3)))
	if _, err := testDev.Launch(n, []*runtime.Buffer{b}, outs); err == nil {
		t.Error("launch on a freed buffer succeeded")
	}
	// i64 tensors have no kernels; f16 and block formats are weights'
	// storage dtypes, uploaded as their bytes.
	if _, err := testDev.Upload(tensor.New(ir.I64, []int{2})); err == nil || !strings.Contains(err.Error(), "only f32 and i32 tensors, and weights in f16, bf16, q4_0") {
		t.Errorf("upload of i64: %v", err)
	}
	for _, dt := range []ir.DType{ir.F16, ir.Q4_K} {
		e, _ := dt.Block()
		x := tensor.New(dt, []int{2, e})
		for i := range x.Data {
			x.Data[i] = byte(i)
		}
		b, err := testDev.Upload(x)
		if err != nil {
			t.Fatalf("upload of %s: %v", x, err)
		}
		if got, err := testDev.Download(b); err != nil || !bytes.Equal(got.Data, x.Data) {
			t.Errorf("%s: the bytes do not round trip (%v)", x, err)
		}
		testDev.Free(b)
	}
}

// A dispatch whose batch is submitted at once (MaxBatch 1) and fails
// validation returns its freshly allocated output to the pool.
func TestFailedSubmitFreesOutputs(t *testing.T) {
	d := testDev
	d.SetMaxBatch(1)
	defer d.SetMaxBatch(0)
	n, outs := mkNode(t, 1, ir.OpNeg, nil, ir.T(ir.F32, ir.S(1000)))
	setHook(d, func(k *codegen.Kernel) {
		if k.NodeID == n.ID {
			k.Grid[0] = int(d.limits.MaxComputeWorkgroupsPerDimension) + 1
		}
	})
	defer setHook(d, nil)
	x, err := d.Upload(tensor.New(ir.F32, []int{1000}))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Free(x)
	spare, err := d.Upload(tensor.New(ir.F32, []int{1000}))
	if err != nil {
		t.Fatal(err)
	}
	d.Free(spare) // the pool now holds a buffer of the output's size class
	d.mu.Lock()
	before := d.bufs.Pool.Bytes()
	d.mu.Unlock()
	if _, err := d.Launch(n, []*runtime.Buffer{x}, outs); err == nil {
		t.Fatal("a dispatch over the grid limit succeeded")
	}
	d.mu.Lock()
	after := d.bufs.Pool.Bytes()
	d.mu.Unlock()
	if after != before {
		t.Errorf("pooled bytes: %d before the failed launch, %d after (its output leaked)", before, after)
	}
	if err := d.Sync(); err != nil {
		t.Errorf("Sync after the failed launch: %v", err)
	}
}
