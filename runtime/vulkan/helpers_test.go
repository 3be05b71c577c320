package vulkan

import (
	"fmt"
	"os"
	"testing"

	"github.com/tapml/tapml/codegen/spirv"
	"github.com/tapml/tapml/ir"
	"github.com/tapml/tapml/runtime"
	"github.com/tapml/tapml/tensor"
)

// The tests share one device with default options (lavapipe on the
// project's machines, a CPU driver whose tensors live in host-visible
// memory), and open others where they need other options.
var testDev *Device

// testCacheDir holds the shared device's pipeline cache.
var testCacheDir string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "tapml-vulkan-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	testCacheDir = dir
	d, err := Open(Options{Generate: spirv.Generate, PipelineCacheDir: dir})
	if err != nil {
		// scripts/setup.sh installs lavapipe: a machine without it fails.
		fmt.Fprintln(os.Stderr, "vulkan:", err)
		os.Exit(1)
	}
	testDev = d
	code := m.Run()
	if err := d.Close(); err != nil {
		fmt.Fprintln(os.Stderr, "close:", err)
		code = 1
	}
	os.RemoveAll(dir)
	os.Exit(code)
}

// openTest opens a device with opts (and the SPIR-V generator), closed
// when the test ends.
func openTest(t *testing.T, opts Options) *Device {
	t.Helper()
	opts.Generate = spirv.Generate
	if opts.PipelineCacheDir == "" {
		opts.PipelineCacheDir = "-"
	}
	d, err := Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := d.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return d
}

// mkNode builds a node of op over inputs of the given types, normalized as
// a Builder would, with its inferred output types.
func mkNode(t testing.TB, id int, op ir.Op, attrs ir.Attrs, types ...ir.Type) (*ir.Node, []ir.Type) {
	t.Helper()
	outs, na, err := ir.InferTypes(op, types, attrs)
	if err != nil {
		t.Fatalf("%s: infer: %v", op, err)
	}
	n := &ir.Node{ID: id, Op: op, Attrs: na, Prov: "test." + op.String()}
	for i, ty := range types {
		n.Inputs = append(n.Inputs, &ir.Value{Name: fmt.Sprintf("x%d", i), Type: ty})
	}
	for i, ty := range outs {
		n.Outputs = append(n.Outputs, &ir.Value{Name: fmt.Sprintf("y%d", i), Type: ty, Def: n})
	}
	return n, outs
}

func f32(s ...int64) ir.Type { return ir.T(ir.F32, ir.S(s...)) }

// seq is an f32 tensor of shape holding start, start+1, ...
func seq(start float32, shape ...int) *tensor.Tensor {
	t := tensor.New(ir.F32, shape)
	for i := range t.Float32s() {
		t.Float32s()[i] = start + float32(i)
	}
	return t
}

func upload(t testing.TB, d runtime.Device, x *tensor.Tensor) *runtime.Buffer {
	t.Helper()
	b, err := d.Upload(x)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func download(t testing.TB, d runtime.Device, b *runtime.Buffer) *tensor.Tensor {
	t.Helper()
	x, err := d.Download(b)
	if err != nil {
		t.Fatal(err)
	}
	return x
}

// launch runs n on d and fails the test on an error.
func launch(t testing.TB, d runtime.Device, n *ir.Node, outs []ir.Type, in ...*runtime.Buffer) []*runtime.Buffer {
	t.Helper()
	res, err := d.Launch(n, in, outs)
	if err != nil {
		t.Fatal(err)
	}
	return res
}
