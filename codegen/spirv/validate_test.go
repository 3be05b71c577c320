package spirv

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/tapml/tapml/codegen"
	"github.com/tapml/tapml/internal/testenv"
	"github.com/tapml/tapml/ir"
)

// spirvVal runs `spirv-val --target-env vulkan1.1` on a module. The test
// fails (not skips) when spirv-val is missing: CI installs spirv-tools.
func spirvVal(t *testing.T, code []byte) error {
	t.Helper()
	path := testenv.Tool(t, "spirv-val")
	f := filepath.Join(t.TempDir(), "k.spv")
	if err := os.WriteFile(f, code, 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(path, "--target-env", "vulkan1.1", f).CombinedOutput()
	if err != nil {
		return &valError{msg: strings.TrimSpace(string(out)), dis: disassemble(f)}
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
	w, _ := WordsOf(k.Source)
	if w[0] != 0x07230203 || w[1] != Version {
		t.Errorf("header %#x %#x", w[0], w[1])
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
	if len(ins) != len(c.in) || len(outs) != 1 {
		t.Errorf("bindings %+v do not cover %d inputs and 1 output", k.Bindings, len(c.in))
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

// TestValidate generates every test case's kernel and runs spirv-val on it.
func TestValidate(t *testing.T) {
	for _, c := range testCases() {
		t.Run(c.name, func(t *testing.T) {
			k := generate(t, c, Options{})
			checkKernel(t, c, k)
			if err := spirvVal(t, k.Source); err != nil {
				t.Fatalf("spirv-val: %v", err)
			}
		})
	}
}

// TestValidateFaults generates every applicable fault of every case: the
// module must still be valid SPIR-V (faults are wrong numbers, not broken
// code), and a fault that does not apply must be an error that says so.
func TestValidateFaults(t *testing.T) {
	applied := map[string]int{}
	for _, c := range testCases() {
		for _, f := range FaultNames() {
			k, err := Generate(c.node(), c.in, nil, Options{Tuning: c.tune, Fault: f})
			if err != nil {
				if !strings.Contains(err.Error(), "does not apply") && !strings.Contains(err.Error(), "wrong_index needs") {
					t.Errorf("%s with %s: %v", c.name, f, err)
				}
				continue
			}
			applied[f]++
			if err := spirvVal(t, k.Source); err != nil {
				t.Errorf("%s with %s: spirv-val: %v", c.name, f, err)
			}
		}
	}
	for _, f := range FaultNames() {
		if applied[f] == 0 {
			t.Errorf("fault %s applies to no test case", f)
		}
	}
	if _, err := Generate(testCases()[0].node(), testCases()[0].in, nil, Options{Fault: "bogus"}); err == nil {
		t.Errorf("unknown fault accepted")
	}
}

// TestEveryOpHasKernel fails when an op of the registry lacks a SPIR-V
// kernel or a test case.
func TestEveryOpHasKernel(t *testing.T) {
	tested := map[ir.Op]bool{}
	for _, c := range testCases() {
		tested[c.op] = true
	}
	for _, d := range ir.Ops() {
		if slices.Contains(PendingTranslation, d.Op) {
			continue
		}
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
	if err := spirvVal(t, k.Source); err != nil {
		t.Fatal(err)
	}
	c = testCase{op: ir.OpSoftmax, in: []ir.Type{f32(70000, 8)}}
	k, err = Generate(c.node(), c.in, nil, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if k.Grid[0]*k.Grid[1] < 70000 || k.Grid[0] > 65535 {
		t.Errorf("grid %v", k.Grid)
	}
	if err := spirvVal(t, k.Source); err != nil {
		t.Fatal(err)
	}
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
		if _, err := Generate(c.n, c.in, nil, Options{}); err == nil {
			t.Errorf("%s: no error", c.name)
		}
	}
}

// TestNaga runs the naga CLI (a newer naga than wgpu's, when installed) on
// every kernel: it parses the SPIR-V as wgpu does and validates the IR. It
// skips when naga is not installed; spirv-val is the required check.
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
