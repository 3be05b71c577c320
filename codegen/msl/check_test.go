package msl

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/tapml/tapml/codegen/fault"
	"github.com/tapml/tapml/codegen/internal/kerneltest"
	"github.com/tapml/tapml/codegen/wgsl"
	"github.com/tapml/tapml/ir"
)

// checkAll runs the syntax check and fails (never skips) the test when
// clang-14 is missing: CI must run it.
func checkAll(t *testing.T, srcs []Source) []error {
	t.Helper()
	errs, err := CheckAll(srcs)
	if errors.Is(err, ErrNoCompiler) {
		t.Fatalf("%v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	return errs
}

// TestSyntaxCheck passes every case's kernel through the approximate MSL
// syntax check: under the default limits, under small limits (folded
// grids, small threadgroups and tiles), under every tuning and with every
// fault that applies.
func TestSyntaxCheck(t *testing.T) {
	var srcs []Source
	seen := map[string]bool{}
	add := func(name string, src []byte) {
		if !seen[string(src)] {
			seen[string(src)] = true
			srcs = append(srcs, Source{Name: name, Src: src})
		}
	}
	for _, c := range kerneltest.Cases() {
		for _, lim := range []Limits{{}, smallLimits} {
			for i, tu := range tunings {
				k, err := generate(t, c, Options{Limits: lim, Tuning: tu})
				if err != nil {
					if lim == smallLimits && strings.Contains(err.Error(), "grid") {
						continue
					}
					t.Fatalf("%s: %v", c.Name, err)
				}
				add(fmt.Sprintf("%s (tuning %d)", c.Name, i), k.Source)
			}
		}
		half := Options{Features: wgsl.Features{F16: true}, Compute: ir.F16}
		if c.Op == ir.OpAttention {
			half.Accumulate = ir.F16
		}
		k, err := generate(t, c, half)
		if err != nil {
			t.Fatalf("%s, f16 compute: %v", c.Name, err)
		}
		add(c.Name+" (f16 compute)", k.Source)
		if c.Op == ir.OpMatmul {
			// The tiled kernels too (f16 weights bound as vec4<f16>).
			for i, tu := range tunings {
				o := half
				o.Tuning = tu
				k, err := generate(t, c, o)
				if err != nil {
					t.Fatalf("%s, f16 compute, tuning %d: %v", c.Name, i, err)
				}
				add(fmt.Sprintf("%s (f16 compute, tuning %d)", c.Name, i), k.Source)
			}
		}
		for _, f := range fault.Of(fault.WGSL) {
			if k, err := generate(t, c, Options{Fault: f}); err == nil {
				add(c.Name+"+"+f, k.Source)
			}
		}
	}
	errs := checkAll(t, srcs)
	for i, err := range errs {
		if err != nil {
			t.Errorf("%v\n--- %s ---\n%s", err, srcs[i].Name, srcs[i].Src)
		}
	}
	t.Logf("%d kernels pass the syntax check", len(srcs))
}

// TestSyntaxCheckRejects checks that the stub is strict enough to catch
// real mistakes: each broken kernel must fail, alone and inside a batch
// of good ones (which must still pass).
func TestSyntaxCheckRejects(t *testing.T) {
	k, err := generate(t, kerneltest.ByName(t, "rms_norm"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	good := string(k.Source)
	breaks := []struct{ name, old, new string }{
		{"undeclared name", "const float inv = ", "const float inv = undeclared_x + "},
		{"OpenCL builtin", "const uint row_ = ", "const uint row_ = get_global_id(0) + "},
		{"misspelt attribute", "[[buffer(0)]]", "[[bufer(0)]]"},
		{"misspelt position attribute", "[[thread_index_in_threadgroup]]", "[[thread_index_in_group]]"},
		{"barrier without mem_flags", "threadgroup_barrier(mem_flags::mem_threadgroup);", "threadgroup_barrier(mem_threadgroup);"},
		{"wrong barrier argument", "threadgroup_barrier(mem_flags::mem_threadgroup);", "threadgroup_barrier(1);"},
		{"vector into scalar", "float acc = 0.0f;", "float acc = float4(0.0f);"},
		{"vector constructor of the wrong size", "const float inv = ", "const float inv = float2(1.0f, 2.0f, 3.0f).x + "},
		{"write to a const buffer", "out0[base + j] = ", "in0[base + j] = "},
		{"threadgroup memory in a nested scope", "  float acc = 0.0f;", "  { threadgroup float nested[4]; nested[0] = 1.0f; }\n  float acc = 0.0f;"},
		{"ambiguous min of uint and int", "min(row_, ", "min(row_, (int)"},
		{"missing semicolon", "const uint base = row * D;", "const uint base = row * D"},
		{"unknown math function", "sqrt(", "sqrtf_("},
		{"double (Metal has none)", "float acc = 0.0f;", "double acc = 0.0;"},
		{"misspelt SIMD-group function", "const float inv = ", "const float inv = simd_add(1.0f) + "},
	}
	srcs := []Source{{Name: "good", Src: k.Source}}
	for _, b := range breaks {
		if !strings.Contains(good, b.old) {
			t.Fatalf("%s: the kernel has no %q", b.name, b.old)
		}
		srcs = append(srcs, Source{Name: b.name, Src: []byte(strings.Replace(good, b.old, b.new, 1))})
	}
	srcs = append(srcs, Source{Name: "good again", Src: k.Source})
	errs := checkAll(t, srcs)
	if errs[0] != nil || errs[len(errs)-1] != nil {
		t.Errorf("the unbroken kernel fails: %v %v", errs[0], errs[len(errs)-1])
	}
	for i, b := range breaks {
		if errs[i+1] == nil {
			t.Errorf("%s: the broken kernel passes the syntax check", b.name)
		} else if !strings.Contains(errs[i+1].Error(), "error") {
			t.Errorf("%s: %v has no diagnostic", b.name, errs[i+1])
		}
	}
	if err := Check("alone", srcs[1].Src); err == nil {
		t.Errorf("%s: passes when checked alone", breaks[0].name)
	}
	if err := Check("good", k.Source); err != nil {
		t.Errorf("good kernel alone: %v", err)
	}
}

// TestCheckModules checks a module's static nodes, skips symbolic ones and
// reports nodes without a kernel.
func TestCheckModules(t *testing.T) {
	m := ir.NewModule("m")
	fb := ir.NewFunction(m, "f")
	x := fb.Param("x", f32(4, 8))
	w := fb.Param("w", f32(8))
	y := fb.Op(ir.OpRMSNorm, []*ir.Value{x, w}, nil)
	fb.Return(fb.Op(ir.OpSoftmax, []*ir.Value{y}, nil))
	pb := ir.NewFunction(m, "p")
	s := pb.Param("s", ir.T(ir.F32, ir.Shape{ir.Sym("seq"), ir.D(8)}))
	pb.Return(pb.Op(ir.OpExp, []*ir.Value{s}, nil))
	hb := ir.NewFunction(m, "h")
	h := hb.Param("h", ir.T(ir.F16, ir.S(3)))
	hb.Return(hb.Op(ir.OpNeg, []*ir.Value{h}, nil))
	for _, b := range []*ir.Builder{fb, pb, hb} {
		if err := b.Err(); err != nil {
			t.Fatal(err)
		}
	}
	n, err := CheckModules([]*ir.Module{m}, Options{})
	if errors.Is(err, ErrNoCompiler) {
		t.Fatal(err)
	}
	if n != 2 {
		t.Errorf("%d kernels checked, want 2 (rms_norm, softmax)", n)
	}
	if err == nil || !strings.Contains(err.Error(), "func @h") || !strings.Contains(err.Error(), "f16") {
		t.Errorf("got %v, want an error naming @h's f16 node", err)
	}
}
