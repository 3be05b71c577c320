package spirv

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/tapml/tapml/codegen"
	"github.com/tapml/tapml/codegen/fault"
	"github.com/tapml/tapml/codegen/internal/kerneltest"
	"github.com/tapml/tapml/codegen/wgsl"
	"github.com/tapml/tapml/internal/testenv"
	"github.com/tapml/tapml/ir"
)

// spirvVal runs `spirv-val --target-env vulkan1.1` on a module. The test
// fails (not skips) when spirv-val is missing: CI installs spirv-tools.
func spirvVal(t *testing.T, code []byte) error {
	t.Helper()
	path := testenv.Tool(t, "spirv-val")
	f, err := os.CreateTemp(t.TempDir(), "k*.spv")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(code); err != nil {
		t.Fatal(err)
	}
	f.Close()
	out, err := exec.Command(path, "--target-env", "vulkan1.1", f.Name()).CombinedOutput()
	if err != nil {
		return &valError{msg: strings.TrimSpace(string(out)), dis: disassemble(f.Name())}
	}
	return nil
}

type valError struct{ msg, dis string }

func (e *valError) Error() string { return e.msg + "\n" + e.dis }

// disassemble returns spirv-dis's text of a module, for failure messages.
func disassemble(file string) string {
	out, err := exec.Command("spirv-dis", file).CombinedOutput()
	if err != nil {
		return "(spirv-dis: " + err.Error() + ")"
	}
	return string(out)
}

// spv is a module to validate.
type spv struct {
	name string
	code []byte
}

// validateAll runs spirv-val on every module, two at a time, and reports
// each that fails.
func validateAll(t *testing.T, mods []spv) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make([]error, len(mods))
	sem := make(chan struct{}, 2)
	testenv.Tool(t, "spirv-val") // here, not in a goroutine: t.Fatal there would leave sem held
	for i, m := range mods {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			errs[i] = spirvVal(t, m.code)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("%s: spirv-val: %v", mods[i].name, err)
		}
	}
}

func generate(t *testing.T, c testCase, opts Options) *codegen.Kernel {
	t.Helper()
	opts.Tuning = c.tune
	k, err := Generate(c.node(), c.in, nil, opts)
	if err != nil {
		t.Fatalf("Generate: %v", err)
	}
	return k
}

// checkKernel checks the kernel model's invariants.
func checkKernel(t *testing.T, c testCase, k *codegen.Kernel) {
	t.Helper()
	if k.Language != "spirv" || k.Entry != Entry || k.Op != c.op || k.NodeID != 1 {
		t.Errorf("kernel header %q %q %q %d", k.Language, k.Entry, k.Op, k.NodeID)
	}
	if len(k.Source)%4 != 0 || len(k.Source) < 20 {
		t.Fatalf("source of %d bytes", len(k.Source))
	}
	if magic, v := binary.LittleEndian.Uint32(k.Source), binary.LittleEndian.Uint32(k.Source[4:]); magic != 0x07230203 || v != Version {
		t.Errorf("header %#x %#x", magic, v)
	}
	ins, outs := map[int]bool{}, map[int]bool{}
	for i, bd := range k.Bindings {
		if bd.Index != i {
			t.Errorf("binding %d has index %d", i, bd.Index)
		}
		if bd.Input >= 0 {
			ins[bd.Input] = true
			if !bd.Type.Equal(c.in[bd.Input]) {
				t.Errorf("binding %d type %s, input %d is %s", i, bd.Type, bd.Input, c.in[bd.Input])
			}
		}
		if bd.Output >= 0 {
			outs[bd.Output] = true
		}
		if (bd.Access == codegen.Read) != (bd.Output < 0) || (bd.Access == codegen.ReadWrite) != (bd.Input >= 0 && bd.Output >= 0) {
			t.Errorf("binding %d: access %s for input %d output %d", i, bd.Access, bd.Input, bd.Output)
		}
	}
	if nout := ir.LookupOp(c.op).Outputs; len(ins) != len(c.in) || len(outs) != nout {
		t.Errorf("bindings %+v do not cover %d inputs and %d outputs", k.Bindings, len(c.in), nout)
	}
	wg := k.WorkgroupSize[0] * k.WorkgroupSize[1] * k.WorkgroupSize[2]
	if wg < 1 || wg > 256 {
		t.Errorf("workgroup size %v", k.WorkgroupSize)
	}
	for _, g := range k.Grid {
		if g < 0 || g > 65535 {
			t.Errorf("grid %v", k.Grid)
		}
	}
}

// tunings are the tunings the validation generates kernels under: the
// automatic one, the discrete GPUs' one, the CPU drivers' GEMV (one lane
// per output) and others that select every matmul variant.
var tunings = []wgsl.Tuning{{}, wgsl.DiscreteTuning(), {GEMVLanes: 1},
	{Matmul: "64x64x16/4x4+d,32x32x16/4x4", GEMVUnroll: 4, GEMVLanes: 64},
	{Matmul: "128x64x16/8x4", GEMVUnroll: 2},
	// K split among slices of a workgroup: prefetch with 4 slices of 128
	// invocations, double buffering with 8, plain loads with 2; vec4
	// stores of 4 rows.
	{Matmul: "128x32x8/8x4+p*4"}, {Matmul: "32x32x8/4x4+d*8"}, {Matmul: "16x16x16/4x4*2"}, {Matmul: "64x64x16/4x4+p*2"},
	{Matmul: "32x32x16/4x4+d+t*4,64x64x8/8x8+t", MatmulMinGroups: 8}}

// smallLimits fold grids and shrink workgroups and tiles.
var smallLimits = Limits{MaxInvocationsPerWorkgroup: 64, MaxWorkgroupSizeX: 64, MaxWorkgroupSizeY: 64, MaxWorkgroupSizeZ: 64,
	MaxWorkgroupStorageSize: 8192, MaxWorkgroupsPerDimension: 7, MaxStorageBuffersPerShaderStage: 8}

// TestValidate generates the kernel of every case (this package's device
// cases and the generator cases of codegen/internal/kerneltest) under the
// default limits and small ones, under every tuning, and with every fault
// that applies, and runs spirv-val on each distinct module: every kernel
// the translator writes.
func TestValidate(t *testing.T) {
	var mods []spv
	seen := map[string]bool{}
	add := func(name string, k *codegen.Kernel) {
		if !seen[string(k.Source)] {
			seen[string(k.Source)] = true
			mods = append(mods, spv{name, k.Source})
		}
	}
	for _, c := range testCases() {
		k := generate(t, c, Options{})
		checkKernel(t, c, k)
		add(c.name, k)
	}
	for _, c := range kerneltest.Cases() {
		for _, lim := range []Limits{{}, smallLimits} {
			for i, tu := range tunings {
				k, err := Generate(c.Node(t), c.In, nil, Options{Limits: lim, Tuning: tu})
				if err != nil {
					if lim == smallLimits && strings.Contains(err.Error(), "grid") {
						continue // a grid that cannot fold (matmul batch/tiles) is reported, not emitted
					}
					t.Fatalf("%s: %v", c.Name, err)
				}
				add(fmt.Sprintf("%s (tuning %d, limits %v)", c.Name, i, lim), k)
			}
		}
	}
	// f16 compute: every float buffer f16 (each generator's kernel, under
	// each tuning), and attention accumulating in f16.
	half := Options{Features: wgsl.Features{F16: true}, Compute: ir.F16}
	for _, c := range kerneltest.Cases() {
		for i, tu := range tunings {
			o := half
			o.Tuning = tu
			if c.Op == ir.OpAttention {
				o.Accumulate = ir.F16
			}
			k, err := Generate(c.Node(t), c.In, nil, o)
			if err != nil {
				t.Fatalf("%s, f16 compute: %v", c.Name, err)
			}
			add(fmt.Sprintf("%s (tuning %d, f16 compute)", c.Name, i), k)
		}
	}
	// The device's features with f32 compute (the vulkan target): f16
	// weights bound as f16.
	feat := Options{Features: wgsl.Features{F16: true, Subgroups: true}}
	for _, c := range kerneltest.StoredCases() {
		for i, tu := range tunings {
			o := feat
			o.Tuning = tu
			k, err := Generate(c.Node(t), c.In, nil, o)
			if err != nil {
				t.Fatalf("%s, f16 and subgroups: %v", c.Name, err)
			}
			add(fmt.Sprintf("%s (tuning %d, f16 and subgroups)", c.Name, i), k)
		}
	}
	// Subgroup matrices (f16 compute on an NVIDIA-like device): the
	// stored-weight products and f32 ones under each blocking.
	mma := Options{Features: wgsl.Features{F16: true, Subgroups: true, SubgroupMatrix: true}, Compute: ir.F16}
	chose := map[ir.DType]int{}
	for _, c := range append(kerneltest.StoredCases(), kerneltest.Cases()...) {
		if c.Op != ir.OpMatmul {
			continue
		}
		for i, tile := range wgsl.MatmulMMATiles {
			// f32 compute too (a split by rows) on every other blocking.
			for _, compute := range []ir.DType{ir.F16, ir.F32}[:1+i%2] {
				o := mma
				o.Compute = compute
				o.Tuning = wgsl.Tuning{MatmulMMA: tile, MatmulMMABlocks: i%2 == 1 || i%3 == 1, MatmulMMAF32: tile, MatmulMMAF32Blocks: true,
					MatmulMMAScaled: i%4 != 0}
				k, err := Generate(c.Node(t), c.In, nil, o)
				if err != nil {
					t.Fatalf("%s, subgroup matrices %s, %s compute: %v", c.Name, tile, compute, err)
				}
				if bytes.Contains(k.Source, []byte("SPV_NV_cooperative_matrix")) {
					chose[compute]++
				}
				add(fmt.Sprintf("%s (subgroup matrices %s, %s compute)", c.Name, tile, compute), k)
			}
		}
	}
	if chose[ir.F16] == 0 || chose[ir.F32] == 0 {
		t.Errorf("cases that took the subgroup-matrix kernel, by compute dtype: %v", chose)
	}
	applied := map[string]int{}
	for _, c := range testCases() {
		for _, f := range fault.Of(fault.WGSL) {
			k, err := Generate(c.node(), c.in, nil, Options{Tuning: c.tune, Fault: f})
			if err != nil {
				if !strings.Contains(err.Error(), "does not apply") && !strings.Contains(err.Error(), "wrong_index needs") {
					t.Errorf("%s with %s: %v", c.name, f, err)
				}
				continue
			}
			applied[f]++
			add(c.name+"+"+f, k)
		}
	}
	for _, f := range fault.Of(fault.WGSL) {
		if applied[f] == 0 {
			t.Errorf("fault %s applies to no test case", f)
		}
	}
	validateAll(t, mods)
	t.Logf("%d distinct modules pass spirv-val", len(mods))
}

// TestDialect translates the kernel that uses f16 and subgroup operations:
// spirv-val accepts it, with the capabilities they need, while a kernel
// without them declares the Shader capability alone.
func TestDialect(t *testing.T) {
	code, _, err := Translate(kerneltest.DialectKernel)
	if err != nil {
		t.Fatal(err)
	}
	add, err := Generate(testCases()[0].node(), testCases()[0].in, nil, Options{})
	if err != nil {
		t.Fatal(err)
	}
	validateAll(t, []spv{{"dialect", code}, {"add", add.Source}})
	for _, c := range []struct {
		code []byte
		want []string
	}{
		{code, []string{"Shader", "StorageBuffer16BitAccess", "Float16", "GroupNonUniform", "GroupNonUniformArithmetic",
			"GroupNonUniformBallot", "GroupNonUniformShuffle", "GroupNonUniformShuffleRelative"}},
		{add.Source, []string{"Shader"}},
	} {
		f := filepath.Join(t.TempDir(), "k.spv")
		if err := os.WriteFile(f, c.code, 0o644); err != nil {
			t.Fatal(err)
		}
		var caps []string
		for _, line := range strings.Split(disassemble(f), "\n") {
			if c, ok := strings.CutPrefix(strings.TrimSpace(line), "OpCapability "); ok {
				caps = append(caps, c)
			}
		}
		if fmt.Sprint(caps) != fmt.Sprint(c.want) {
			t.Errorf("capabilities %v, want %v", caps, c.want)
		}
	}
}

// TestTranslateErrors checks that a module the front end rejects, or one
// SPIR-V cannot encode, is an error naming the line (and that constant
// expressions the front end takes translate).
func TestTranslateErrors(t *testing.T) {
	kernel := func(decls, body string) string {
		return "@group(0) @binding(0) var<storage, read_write> out0: array<f32>;\n" + decls +
			"\n@compute @workgroup_size(1)\nfn main(@builtin(local_invocation_index) li: u32) {\n" + body + "\n}\n"
	}
	long := "var<private> t: array<f32, 70000> = array<f32, 70000>(" + strings.Repeat("1.0f, ", 69999) + "1.0f);"
	for _, c := range []struct{ name, src, want string }{
		{"front end", kernel("", "out0[li] = y;"), "5:12: y is not declared"},
		{"long table", kernel(long, "out0[li] = t[li];"), "2:1: table t has 70000 elements"},
		{"infinite constant", kernel("const BIG: f32 = f32(1e300f);", "out0[li] = BIG;"), "bad literal"},
		{"constant arithmetic", kernel("const N: u32 = 7u;\nconst M: u32 = N * 2u + 1u;\nvar<private> t: array<f32, 2> = array<f32, 2>(f32(M), -f32(N));", "out0[li] = t[li] + f32(M / 3u);"), ""},
		{"matrix without enable", kernel("", "var m: subgroup_matrix_result<f32, 16, 16>;"), "5:8: subgroup_matrix_result needs `enable chromium_experimental_subgroup_matrix;`"},
		{"matrix col_major", "enable chromium_experimental_subgroup_matrix;\n" + kernel("", "var m: subgroup_matrix_result<f32, 16, 16>;\nsubgroupMatrixStore(&out0, 0u, m, li > 0u, 16u);"),
			"7:38: subgroupMatrixStore: col_major must be true or false"},
		{"infinite f16 constant", "enable f16;\n" + kernel("const BIG: f16 = f16(1e30f);", "out0[li] = f32(BIG);"), "is not a finite f16"},
	} {
		code, _, err := Translate(c.src)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.want == "":
			validateAll(t, []spv{{c.name, code}})
		case err == nil || !strings.Contains(err.Error(), c.want):
			t.Errorf("%s: got %v, want an error containing %q", c.name, err, c.want)
		}
	}
}

// TestEveryOpHasKernel fails when an op of the registry lacks a SPIR-V
// kernel or a device test case.
func TestEveryOpHasKernel(t *testing.T) {
	tested := map[ir.Op]bool{}
	for _, c := range testCases() {
		tested[c.op] = true
	}
	for _, d := range ir.Ops() {
		if !Supports(d.Op) {
			t.Errorf("op %s has no SPIR-V kernel", d.Name)
		}
		if !tested[d.Op] {
			t.Errorf("op %s has no test case", d.Name)
		}
	}
	if Supports(ir.OpNone) {
		t.Errorf("Supports(OpNone)")
	}
}

// TestLimits checks that kernels follow smaller device limits and fold
// large grids.
func TestLimits(t *testing.T) {
	c := testCase{op: ir.OpAdd, in: []ir.Type{f32(70000, 40), f32(40)}}
	k, err := Generate(c.node(), c.in, nil, Options{Limits: Limits{MaxInvocationsPerWorkgroup: 64, MaxWorkgroupsPerDimension: 1000}})
	if err != nil {
		t.Fatal(err)
	}
	if k.WorkgroupSize[0] != 64 || k.Grid[0] > 1000 || k.Grid[1] < 2 || k.Grid[0]*k.Grid[1]*64 < 70000*40 {
		t.Errorf("workgroup %v grid %v", k.WorkgroupSize, k.Grid)
	}
	c2 := testCase{op: ir.OpSoftmax, in: []ir.Type{f32(70000, 8)}}
	k2, err := Generate(c2.node(), c2.in, nil, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if k2.Grid[0]*k2.Grid[1] < 70000 || k2.Grid[0] > 65535 {
		t.Errorf("grid %v", k2.Grid)
	}
	validateAll(t, []spv{{"add", k.Source}, {"softmax", k2.Source}})
}

// TestErrors checks that unsupported inputs are errors, not panics.
func TestErrors(t *testing.T) {
	for _, c := range []struct {
		name string
		n    *ir.Node
		in   []ir.Type
	}{
		{"unknown op", &ir.Node{Op: ir.OpNone}, nil},
		{"f16", &ir.Node{Op: ir.OpExp}, []ir.Type{ir.T(ir.F16, ir.S(4))}},
		{"symbolic", &ir.Node{Op: ir.OpExp}, []ir.Type{ir.T(ir.F32, ir.Shape{ir.Sym("seq")})}},
		{"bad types", &ir.Node{Op: ir.OpAdd}, []ir.Type{f32(3), f32(4)}},
		{"int exp", &ir.Node{Op: ir.OpExp}, []ir.Type{i32(3)}},
		{"nil node", nil, nil},
	} {
		if _, err := Generate(c.n, c.in, nil, Options{}); err == nil || !strings.HasPrefix(err.Error(), "spirv: ") {
			t.Errorf("%s: got %v, want a spirv error", c.name, err)
		}
	}
}

// TestNaga runs the naga CLI (when installed) on every kernel: a second
// reader of the SPIR-V, as wgpu-based hosts would load it. It skips when
// naga is not installed; spirv-val is the required check, and the device
// tests run every kernel on the Vulkan device.
func TestNaga(t *testing.T) {
	path, err := exec.LookPath("naga")
	if err != nil {
		// An optional extra check: naga's CLI has no Debian package, so
		// scripts/setup.sh does not install it (cargo install naga-cli).
		t.Skip("naga CLI not installed")
	}
	dir := t.TempDir()
	for _, c := range testCases() {
		k := generate(t, c, Options{})
		f := filepath.Join(dir, "k.spv")
		if err := os.WriteFile(f, k.Source, 0o644); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command(path, f).CombinedOutput(); err != nil {
			t.Errorf("%s: naga: %v\n%s", c.name, err, out)
		}
	}
}
