package fault

import (
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/tapml/tapml/ir"
)

// TestTable: one row per name, each saying what it does and reaching some
// op; Names, Of and Check agree with the rows; Help documents every row.
func TestTable(t *testing.T) {
	if got, want := Names(), []string{F16Overflow, MissingBarrier, WrongConstant, WrongIndex}; !slices.Equal(got, want) {
		t.Errorf("Names() = %v, want %v", got, want)
	}
	for _, f := range Table {
		if f.Does == "" || len(f.Ops[WGSL])+len(f.Ops[LLVM]) == 0 {
			t.Errorf("%s: no description or no op", f.Name)
		}
		for g, ops := range f.Ops {
			if len(slices.Compact(slices.Sorted(slices.Values(ops)))) != len(ops) {
				t.Errorf("%s: %s lists an op twice", f.Name, g)
			}
		}
		if !strings.Contains(Help(), "  "+f.Name+" (") {
			t.Errorf("Help does not document %s", f.Name)
		}
	}
	if got := Of(LLVM); slices.Contains(got, MissingBarrier) || len(got) != 3 {
		t.Errorf("Of(LLVM) = %v", got)
	}
	if err := Check(LLVM, MissingBarrier); err == nil || !strings.Contains(err.Error(), "known: f16_overflow, wrong_constant, wrong_index") {
		t.Errorf("Check(LLVM, missing_barrier) = %v", err)
	}
	if err := Check(WGSL, MissingBarrier); err != nil {
		t.Error(err)
	}
	for line := range strings.Lines(Help()) {
		if len([]rune(strings.TrimSuffix(line, "\n"))) > 80 {
			t.Errorf("Help line longer than 80 columns: %q", line)
		}
	}
}

func TestReaches(t *testing.T) {
	constant := func(op ir.Op) bool { return op == ir.OpSilu }
	for _, f := range Table {
		got := f.Reaches(LLVM, constant)
		switch f.Name {
		case WrongIndex, F16Overflow:
			if !slices.Contains(got, ir.OpExp) || !slices.Contains(got, ir.OpAdd) {
				t.Errorf("%s reaches %v: not every elementwise op", f.Name, got)
			}
		case WrongConstant:
			if !slices.Contains(got, ir.OpSilu) || slices.Contains(got, ir.OpExp) || !slices.Contains(got, ir.OpRope) {
				t.Errorf("%s reaches %v", f.Name, got)
			}
		case MissingBarrier:
			if len(got) != 0 {
				t.Errorf("%s reaches %v on llvm", f.Name, got)
			}
		}
		if !slices.IsSorted(got) {
			t.Errorf("%s: %v is not sorted", f.Name, got)
		}
	}
	for v, want := range map[float64]bool{0: false, 1: true, -0.5: true, math.Inf(1): false, math.NaN(): false} {
		if Perturbable(v) != want {
			t.Errorf("Perturbable(%v) = %v", v, !want)
		}
	}
}

func TestGeneratorOf(t *testing.T) {
	for target, want := range map[string]Generator{"webgpu": WGSL, "vulkan": WGSL, "remote:ws://127.0.0.1:9000": WGSL,
		"llvm": LLVM, "cpu": "", "metal": "", "remote": "", "webgpux": ""} {
		got, ok := GeneratorOf(target)
		if got != want || ok != (want != "") {
			t.Errorf("GeneratorOf(%q) = %q, %v; want %q", target, got, ok, want)
		}
	}
}
