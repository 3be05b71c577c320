package vulkan

import (
	"bytes"
	"encoding/binary"
	"errors"
	"strings"
	"testing"

	"github.com/tapml/tapml/codegen"
	"github.com/tapml/tapml/codegen/spirv"
	"github.com/tapml/tapml/ir"
	"github.com/tapml/tapml/runtime"
	"github.com/tapml/tapml/runtime/internal/devkit"
	"github.com/tapml/tapml/tensor"
)

// wantError checks that err contains each of want.
func wantError(t *testing.T, what string, err error, want ...string) {
	t.Helper()
	if err == nil {
		t.Errorf("%s: no error, want one containing %q", what, want)
		return
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("%s: error %q does not contain %q", what, err, w)
		}
	}
}

// setLocalSize makes a kernel's workgroup x wide, in its SPIR-V too.
func setLocalSize(t *testing.T, k *codegen.Kernel, x int) {
	k.Source = bytes.Clone(k.Source)
	for i := 4 * spirvHeaderWords; i+24 <= len(k.Source); {
		w := binary.LittleEndian.Uint32(k.Source[i:])
		if w&0xffff == opExecutionMode && binary.LittleEndian.Uint32(k.Source[i+8:]) == modeLocalSize {
			binary.LittleEndian.PutUint32(k.Source[i+12:], uint32(x))
			k.WorkgroupSize[0] = x
			return
		}
		i += 4 * int(w>>16)
	}
	t.Fatal("no LocalSize in the kernel")
}

// TestBadKernels: kernels the device cannot run are errors naming the
// node and the problem, found before the driver sees them; Prepare finds
// them ahead; the device works afterwards.
func TestBadKernels(t *testing.T) {
	d := openTest(t, Options{})
	n, outs := mkNode(t, 3, ir.OpAdd, nil, f32(8), f32(8))
	x := upload(t, d, seq(0, 8))
	for _, c := range []struct {
		name   string
		break_ func(k *codegen.Kernel)
		want   string
	}{
		{"truncated SPIR-V", func(k *codegen.Kernel) { k.Source = k.Source[:len(k.Source)/2] }, "SPIR-V instruction"},
		{"text, not SPIR-V", func(k *codegen.Kernel) { k.Source = []byte("this is not SPIR-V") }, "SPIR-V"},
		{"WGSL", func(k *codegen.Kernel) { k.Language = "wgsl" }, `runs spirv kernels, not "wgsl"`},
		{"workgroup unlike the SPIR-V's", func(k *codegen.Kernel) { k.WorkgroupSize = [3]int{4096, 1, 1} }, "its SPIR-V's LocalSize"},
		{"workgroup over the limit", func(k *codegen.Kernel) { setLocalSize(t, k, 4096) }, "workgroup size [4096 1 1] exceeds"},
		// y: GPUs allow 2^31-1 workgroups along x (NVIDIA does) but 65535 along y.
		{"grid", func(k *codegen.Kernel) { k.Grid = [3]int{1, 1 << 20, 1} }, "grid [1 1048576 1]"},
		{"bindings out of order", func(k *codegen.Kernel) { k.Bindings[0].Index = 1 }, "binding 0 has index 1"},
	} {
		d.mu.Lock()
		d.hook = c.break_
		d.plans, d.memos = map[devkit.PlanKey]*plan{}, map[*ir.Node]*launchMemo{}
		d.mu.Unlock()
		_, err := d.Launch(n, []*runtime.Buffer{x, x}, outs)
		var ke *runtime.KernelError
		if !errors.As(err, &ke) || ke.Node != n {
			t.Errorf("%s: got %v, want a KernelError naming the node", c.name, err)
		}
		wantError(t, c.name, err, "test.add", c.want)
	}
	m := ir.NewModule("m")
	b := ir.NewFunction(m, "f")
	p := b.Param("p", f32(8))
	b.Return(b.Add(p, p))
	if err := b.Err(); err != nil {
		t.Fatal(err)
	}
	d.hook = func(k *codegen.Kernel) { k.Source = []byte{1, 2, 3, 4} }
	wantError(t, "Prepare", runtime.NewExecutor(m, d).Prepare("f"), "add", "SPIR-V of 1 words")
	d.hook = nil
	d.plans, d.memos = map[devkit.PlanKey]*plan{}, map[*ir.Node]*launchMemo{}
	got := download(t, d, launch(t, d, n, outs, x, x)[0])
	if got.Float32s()[7] != 14 {
		t.Errorf("after the errors: %v", got.Float32s())
	}
}

// TestBadBuffers: inputs that are freed, of another device or too small,
// a kernel that writes a weight, a binding beyond the device's
// maxStorageBufferRange, a tensor whose data does not fit its shape.
func TestBadBuffers(t *testing.T) {
	d := openTest(t, Options{})
	n, outs := mkNode(t, 4, ir.OpAdd, nil, f32(8), f32(8))
	x := upload(t, d, seq(0, 8))
	freed := upload(t, d, seq(0, 8))
	d.Free(freed)
	_, err := d.Launch(n, []*runtime.Buffer{x, freed}, outs)
	wantError(t, "freed", err, "input 1", "was freed")
	_, err = d.Launch(n, []*runtime.Buffer{x, upload(t, testDev, seq(0, 8))}, outs)
	wantError(t, "other device", err, "is not on vulkan:")
	_, err = d.Download(freed)
	wantError(t, "download of a freed buffer", err, "was freed")

	kv, kvOuts := mkNode(t, 5, ir.OpKVWrite, nil, f32(4, 1, 2), f32(1, 1, 2), ir.T(ir.I32, nil))
	w, err := d.UploadWeight("cache", seq(0, 4, 1, 2))
	if err != nil {
		t.Fatal(err)
	}
	_, err = d.Launch(kv, []*runtime.Buffer{w, upload(t, d, seq(0, 1, 1, 2)), upload(t, d, tensor.ScalarInt32(1))}, kvOuts)
	wantError(t, "write a weight", err, "writes input 0, a weight")

	k, err := spirv.Generate(n, []ir.Type{f32(8), f32(8)}, outs, spirv.Options{})
	if err != nil {
		t.Fatal(err)
	}
	k.Bindings[0].Type = f32(1000)
	_, err = d.LaunchKernel(n, k, []*runtime.Buffer{x, x})
	wantError(t, "small input", err, "expects f32[1000], input 0 holds 32 bytes")

	d.mu.Lock()
	d.phys.MaxStorageRange = 16
	d.mu.Unlock()
	_, err = d.Launch(n, []*runtime.Buffer{x, x}, outs)
	wantError(t, "storage range", err, "maxStorageBufferRange (16)")

	_, err = d.Upload(&tensor.Tensor{DType: ir.F32, Shape: []int{4}, Data: make([]byte, 12)})
	wantError(t, "short tensor", err, "holds 12 bytes, its shape needs 16")
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	_, err = d.Upload(seq(0, 2))
	wantError(t, "closed", err, "device is closed")
}

// TestNoGenerator: a device opened without a kernel generator runs
// prebuilt kernels only, and says so at Launch.
func TestNoGenerator(t *testing.T) {
	d, err := Open(Options{PipelineCacheDir: "-"})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	n, outs := mkNode(t, 1, ir.OpAdd, nil, f32(2), f32(2))
	x := upload(t, d, seq(0, 2))
	_, err = d.Launch(n, []*runtime.Buffer{x, x}, outs)
	wantError(t, "launch", err, "no kernel generator")
}

// TestNoDriver: without a Vulkan driver (the loader pointed at no ICD) or
// without the loader, Open fails with an error naming the packages to
// install.
func TestNoDriver(t *testing.T) {
	t.Setenv("VK_ICD_FILENAMES", "/nonexistent/icd.json")
	t.Setenv("VK_DRIVER_FILES", "/nonexistent/icd.json")
	_, err := Open(Options{Generate: spirv.Generate, PipelineCacheDir: "-"})
	if !errors.Is(err, errNoVulkan) {
		t.Errorf("without a driver: %v does not wrap errNoVulkan", err)
	}
	wantError(t, "without a driver", err, "apt-get install -y libvulkan1 mesa-vulkan-drivers")
	err = loadLoader("libvulkan-missing.so.9")
	wantError(t, "without the loader", err, "libvulkan-missing.so.9", "apt-get install")
}
