package msl

import (
	"flag"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/tapml/tapml/codegen"
	"github.com/tapml/tapml/codegen/fault"
	"github.com/tapml/tapml/codegen/internal/kerneltest"
	"github.com/tapml/tapml/codegen/wgsl"
	"github.com/tapml/tapml/ir"
)

var update = flag.Bool("update", false, "rewrite the golden kernels in testdata/")

var f32, i32 = kerneltest.F32, kerneltest.I32

var smallLimits = Limits{MaxThreadsPerThreadgroup: 64, MaxThreadgroupMemory: 8192, MaxThreadgroupsPerDimension: 7, MaxBuffers: 8}

// tunings are the tunings the tests generate kernels under: the automatic
// one, the discrete GPUs' one and others that select every matmul variant.
var tunings = []wgsl.Tuning{{}, wgsl.DiscreteTuning(),
	{Matmul: "64x64x16/4x4+d,32x32x16/4x4", GEMVUnroll: 4, GEMVLanes: 64},
	{Matmul: "128x64x16/8x4", GEMVUnroll: 2}, {Matmul: "32x32x16/4x4+p+t*4"}}

func generate(t testing.TB, c kerneltest.Case, opts Options) (*codegen.Kernel, error) {
	t.Helper()
	return Generate(c.Node(t), c.In, nil, opts)
}

func TestEveryOpHasGenerator(t *testing.T) {
	for _, d := range ir.Ops() {
		if !Supports(d.Op) {
			t.Errorf("op %s has no MSL kernel", d.Name)
		}
	}
}

// TestKernels generates every case under the default limits and under
// small ones, and checks the kernel's shape: bindings in ascending order
// (inputs, then outputs) declared as [[buffer(i)]] in that order, the
// threadgroup and grid within the limits.
func TestKernels(t *testing.T) {
	for _, lim := range []Limits{{}, smallLimits} {
		l := lim.withDefaults()
		for _, c := range kerneltest.Cases() {
			k, err := generate(t, c, Options{Limits: lim})
			if err != nil {
				if lim == smallLimits && strings.Contains(err.Error(), "grid") {
					continue // a grid that cannot fold (matmul batch/tiles) is reported, not emitted
				}
				t.Errorf("%s: %v", c.Name, err)
				continue
			}
			checkKernel(t, c, k, l)
		}
	}
}

func checkKernel(t *testing.T, c kerneltest.Case, k *codegen.Kernel, l Limits) {
	t.Helper()
	src := string(k.Source)
	wg := k.WorkgroupSize
	if wg[0]*wg[1]*wg[2] > l.MaxThreadsPerThreadgroup || wg[0] < 1 || wg[1] != 1 || wg[2] != 1 {
		t.Errorf("%s: threadgroup %v exceeds %d threads", c.Name, wg, l.MaxThreadsPerThreadgroup)
	}
	for i, g := range k.Grid {
		if g > l.MaxThreadgroupsPerDimension {
			t.Errorf("%s: grid %v exceeds %d in dim %d", c.Name, k.Grid, l.MaxThreadgroupsPerDimension, i)
		}
	}
	if k.Language != Language || k.Entry != Entry || k.Op != c.Op || k.NodeID != 7 {
		t.Errorf("%s: kernel header %q %q %q %d", c.Name, k.Language, k.Entry, k.Op, k.NodeID)
	}
	if !strings.Contains(src, "kernel void "+Entry+"(") || !strings.Contains(src, "#include <metal_stdlib>") {
		t.Errorf("%s: source lacks the include or the kernel entry", c.Name)
	}
	at := 0
	for i, b := range k.Bindings {
		m := regexp.MustCompile(fmt.Sprintf(`device (const )?\w+\* %s \[\[buffer\(%d\)\]\]`, b.Name, i)).FindStringSubmatchIndex(src)
		if m == nil || m[0] < at {
			t.Errorf("%s: source does not declare buffer %d (%s) after the previous one", c.Name, i, b.Name)
			continue
		}
		at = m[0]
		if isConst := m[2] >= 0; isConst != (b.Access == codegen.Read) {
			t.Errorf("%s: binding %d is %s but declared const=%v", c.Name, i, b.Access, isConst)
		}
	}
	kerneltest.CheckBindings(t, c, k)
	if strings.Contains(src, "threadgroup_barrier") != strings.Contains(src, "  threadgroup ") {
		t.Errorf("%s: barriers without threadgroup memory or the reverse", c.Name)
	}
}

// TestFaults checks that the faults are codegen/wgsl's: one applies to an
// MSL kernel where it applies to the WGSL kernel, and then changes it.
func TestFaults(t *testing.T) {
	wopts := func(f string) wgsl.Options { return wgsl.Options{Fault: f, Limits: Limits{}.withDefaults().wgsl()} }
	for _, c := range kerneltest.Cases() {
		base, err := generate(t, c, Options{})
		if err != nil {
			t.Fatal(err)
		}
		wbase, err := wgsl.Generate(c.Node(t), c.In, nil, wopts(""))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range fault.Of(fault.WGSL) {
			k, err := generate(t, c, Options{Fault: f})
			wk, werr := wgsl.Generate(c.Node(t), c.In, nil, wopts(f))
			switch {
			case (err == nil) != (werr == nil):
				t.Errorf("%s on %s: MSL %v, WGSL %v", f, c.Name, err, werr)
			case err == nil && (string(k.Source) == string(base.Source)) != (string(wk.Source) == string(wbase.Source)):
				t.Errorf("%s on %s: changes the MSL kernel: %v, the WGSL kernel: %v", f, c.Name,
					string(k.Source) != string(base.Source), string(wk.Source) != string(wbase.Source))
			}
		}
	}
	if _, err := generate(t, kerneltest.ByName(t, "add"), Options{Fault: "cosmic_ray"}); err == nil {
		t.Error("unknown fault accepted")
	}
}

// TestErrors checks that Generate reports bad requests, and the limits of
// Metal, instead of emitting kernels.
func TestErrors(t *testing.T) {
	if _, err := Generate(nil, nil, nil, Options{}); err == nil {
		t.Error("nil node accepted")
	}
	n := &ir.Node{ID: 1, Op: ir.OpAdd, Attrs: ir.Attrs{}}
	if _, err := Generate(n, []ir.Type{ir.T(ir.F16, ir.S(3)), ir.T(ir.F16, ir.S(3))}, nil, Options{}); err == nil || !strings.HasPrefix(err.Error(), "msl: ") {
		t.Errorf("f16: got %v, want an msl error", err)
	}
	if _, err := Generate(n, []ir.Type{f32(1<<16, 1<<16), f32(1)}, nil, Options{}); err == nil || !strings.Contains(err.Error(), "2^32") {
		t.Errorf("2^32 elements: got %v, want an error", err)
	}
	cat := &ir.Node{ID: 3, Op: ir.OpConcat, Attrs: ir.Attrs{"axis": ir.IntAttr(0)}}
	many := make([]ir.Type, 32)
	for i := range many {
		many[i] = f32(2)
	}
	if _, err := Generate(cat, many, nil, Options{}); err == nil || !strings.Contains(err.Error(), "buffers") {
		t.Errorf("concat of 32 inputs: got %v, want a buffer limit error", err)
	}
	if _, err := Generate(cat, many[:30], nil, Options{}); err != nil {
		t.Errorf("concat of 30 inputs: %v", err)
	}
	att := kerneltest.Case{Name: "attention", Op: ir.OpAttention, Attrs: ir.Attrs{"scale": ir.FloatAttr(0.125)}, In: []ir.Type{f32(1, 8, 4096), f32(16, 4, 4096), f32(16, 4, 4096), i32()}}
	// Attention keeps scores and its slots' partial rows in threadgroup
	// memory, never a head row: any head dim fits, but not a memory too
	// small for one score.
	if _, err := generate(t, att, Options{Limits: Limits{MaxThreadgroupMemory: 2}}); err == nil {
		t.Error("attention in 2 bytes of threadgroup memory accepted")
	}
	if _, err := generate(t, att, Options{Limits: Limits{MaxThreadgroupMemory: 16384}}); err != nil {
		t.Errorf("attention with head dim 4096 in 16 KiB: %v", err)
	}
}

// TestGolden compares a few kernels with the files in testdata/ (go test
// -update rewrites them), so that changes to generated code show in diffs.
func TestGolden(t *testing.T) {
	for _, name := range []string{"add", "rms_norm", "gemv_t", "tiled", "attention", "rope", "conv2d_dilated", "neg_i32"} {
		k, err := generate(t, kerneltest.ByName(t, name), Options{})
		if err != nil {
			t.Fatal(err)
		}
		kerneltest.Golden(t, filepath.Join("testdata", name+".metal"), k.Source, *update)
	}
	k, err := generate(t, kerneltest.ByName(t, "tiled_vec"), Options{Tuning: wgsl.DiscreteTuning()})
	if err != nil {
		t.Fatal(err)
	}
	kerneltest.Golden(t, filepath.Join("testdata", "tiled_vec.metal"), k.Source, *update)
}
