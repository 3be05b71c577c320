package target

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/tapml/tapml/ir"
	"github.com/tapml/tapml/runtime/cpu"
)

func TestParseInjection(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Injection
		err  string
	}{
		{"op=matmul,fault=wrong_index", Injection{Op: ir.OpMatmul, Fault: "wrong_index"}, ""},
		{" fault=missing_barrier , op=rms_norm", Injection{Op: ir.OpRMSNorm, Fault: "missing_barrier"}, ""},
		{"node=42,fault=f16_overflow", Injection{Node: 42, Fault: "f16_overflow"}, ""},
		{"op=matmul", Injection{}, "no fault="},
		{"fault=wrong_index", Injection{}, "exactly one of op= and node="},
		{"op=matmul,node=3,fault=wrong_index", Injection{}, "exactly one"},
		{"op=nope,fault=wrong_index", Injection{}, `unknown op "nope"`},
		{"op=matmul,fault=typo", Injection{}, `unknown fault "typo"`},
		{"node=-1,fault=wrong_index", Injection{}, "positive node id"},
		{"node=x,fault=wrong_index", Injection{}, "positive node id"},
		{"op=matmul,op=add,fault=wrong_index", Injection{}, "op given twice"},
		{"op=matmul,fault=wrong_index,fault=wrong_index", Injection{}, "fault given twice"},
		{"op=matmul,colour=red,fault=wrong_index", Injection{}, `unknown key "colour"`},
		{"matmul", Injection{}, "not key=value"},
		{"", Injection{}, "not key=value"},
	} {
		got, err := ParseInjection(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("ParseInjection(%q) error %v, want %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("ParseInjection(%q): %v", tc.in, err)
			continue
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("ParseInjection(%q) (-want +got):\n%s", tc.in, diff)
		}
		if back, err := ParseInjection(got.String()); err != nil || back != got {
			t.Errorf("round trip of %q: %+v, %v", got.String(), back, err)
		}
	}
}

func TestInjectableTargets(t *testing.T) {
	if err := Injectable("cpu", cpu.New()); err == nil || !strings.Contains(err.Error(), "only on the webgpu, vulkan, remote: and llvm targets") {
		t.Errorf("cpu: %v", err)
	}
	for _, target := range []string{"webgpu", "vulkan", "remote:ws://127.0.0.1:1", "llvm"} {
		if err := InjectableTarget(target); err != nil {
			t.Errorf("%s: %v", target, err)
		}
	}
	if err := InjectableTarget("metal"); err == nil {
		t.Error("metal: injectable")
	}
}

func FuzzParseInjection(f *testing.F) {
	for _, s := range []string{"op=matmul,fault=wrong_index", "node=1,fault=wrong_constant", "op=,fault=", "=,=,"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		in, err := ParseInjection(s)
		if err != nil {
			return
		}
		if (in.Op == ir.OpNone) == (in.Node == 0) || in.Fault == "" {
			t.Fatalf("%q parsed to an invalid injection %+v", s, in)
		}
	})
}
