package carve

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/tapml/tapml/internal/testenv/webgputest"
)

func TestReplayStoriesWebGPU(t *testing.T) {
	dir, _ := carvedStories(t)
	dev := webgputest.Device(t)
	b, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	rep, err := b.Test(dev, TestOptions{Target: "webgpu"})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rep.Results {
		if !r.Passed() {
			t.Errorf("case %s: %s (ratio %g) %s", r.Case, r.Status(), r.Metrics.Ratio, r.Err)
		}
	}
	t.Log(rep.Summary())
}

// TestFaultInjection plants a deliberate bug (codegen/wgsl's test-only
// faults) in the kernel of every node of one op and checks that exactly
// that op's cases fail, and that the report names them.
func TestFaultInjection(t *testing.T) {
	dir, _ := carvedStories(t)
	dev := webgputest.Device(t)
	b, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	for _, tc := range []struct{ op, fault string }{
		{"rope", "wrong_index"},
		{"rms_norm", "wrong_constant"},
		{"matmul", "wrong_index"},
	} {
		t.Run(tc.op+"/"+tc.fault, func(t *testing.T) {
			want := map[string]bool{}
			for _, c := range b.Manifest.Cases {
				if c.Op == tc.op {
					want[c.ID] = true
					dev.SetFault(c.Node, tc.fault)
				}
			}
			defer func() {
				for _, c := range b.Manifest.Cases {
					dev.SetFault(c.Node, "")
				}
			}()
			if len(want) == 0 {
				t.Fatalf("the bundle has no %s cases", tc.op)
			}
			rep, err := b.Test(dev, TestOptions{Target: "webgpu"})
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]bool{}
			for _, f := range rep.Failures() {
				got[f.Case.ID] = true
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("failing cases (-want +got):\n%s", diff)
			}
			if s := rep.Summary(); !strings.Contains(s, fmt.Sprintf("failing ops: %s %d", tc.op, len(want))) {
				t.Errorf("summary does not name the failing op: %s", s)
			}
			var table strings.Builder
			if err := rep.WriteTable(&table); err != nil {
				t.Fatal(err)
			}
			for _, line := range strings.Split(table.String(), "\n") {
				f := strings.Fields(line)
				if len(f) > 2 && strings.HasPrefix(f[0], "c0") {
					if failed := strings.Contains(line, "FAIL"); failed != want[f[0]] {
						t.Errorf("table row %q: FAIL shown %v, want %v", line, failed, want[f[0]])
					}
				}
			}
		})
	}
}
