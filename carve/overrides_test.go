package carve

import (
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/tapml/tapml/runtime/cpu"
)

func TestOverridesApply(t *testing.T) {
	o, err := ParseOverrides("tol.yaml", []byte(`# comment
overrides:
  - op: matmul
    rtol: 1e-3
    atol: 0.5
  - prov: '^layers\.1\.'
    scale: 2
  - case: c0007
    atol: 0
  - kind: reduction
    key: "rms_norm{eps=1e-05}(x)"
    rtol: 7
`))
	if err != nil {
		t.Fatal(err)
	}
	base := Tolerance{ATol: 1, RTol: 0.25, Rule: "policy"}
	for _, tc := range []struct {
		c    Case
		want Tolerance
		line string
	}{
		{Case{ID: "c0001", Op: "add", Prov: "layers.0.x"}, base, ""},
		{Case{ID: "c0002", Op: "matmul", Prov: "layers.0.wq"}, Tolerance{ATol: 0.5, RTol: 1e-3}, "tol.yaml:3:"},
		{Case{ID: "c0003", Op: "matmul", Prov: "layers.1.wq"}, Tolerance{ATol: 1, RTol: 2e-3}, "tol.yaml:6:"},
		{Case{ID: "c0007", Op: "matmul", Prov: "layers.1.wq"}, Tolerance{ATol: 0, RTol: 2e-3}, "tol.yaml:8:"},
		{Case{ID: "c0008", Op: "rms_norm", Kind: "reduction", Key: "rms_norm{eps=1e-05}(x)"}, Tolerance{ATol: 1, RTol: 7}, "tol.yaml:10:"},
		{Case{ID: "c0009", Op: "rms_norm", Kind: "reduction", Key: "other"}, base, ""},
	} {
		got := o.Apply(&tc.c, base)
		if got.ATol != tc.want.ATol || math.Abs(got.RTol-tc.want.RTol) > 1e-15 {
			t.Errorf("%s: %+v, want atol %g rtol %g", tc.c.ID, got, tc.want.ATol, tc.want.RTol)
		}
		if tc.line != "" && !strings.Contains(got.Rule, tc.line) {
			t.Errorf("%s: rule %q does not name %s", tc.c.ID, got.Rule, tc.line)
		}
	}
	var nilO *Overrides
	if nilO.Apply(&Case{}, base) != base {
		t.Error("nil overrides changed a tolerance")
	}
}

func TestOverridesErrors(t *testing.T) {
	for _, tc := range []struct {
		text string
		want string
	}{
		{"overrides:\n  - op: matmul\n    rtol: [1\n", "tol.yaml:3: YAML syntax"},
		{"overides: []\n", `tol.yaml:1: unknown key "overides"`},
		{"overrides:\n  - op: matmull\n    rtol: 1\n", `tol.yaml:2: unknown op "matmull"`},
		{"overrides:\n  - op: matmul\n    rtol: -1\n", "tol.yaml:3: rtol must be between 0 and 1e+12, got -1"},
		// Numbers that are not numbers, and hostile sizes.
		{"overrides:\n  - op: matmul\n    atol: .nan\n", "tol.yaml:3: atol: must be a number"},
		{"overrides:\n  - op: matmul\n    rtol: NaN\n", "tol.yaml:3: rtol: must be finite"},
		{"overrides:\n  - op: matmul\n    scale: 1e308\n", "tol.yaml:3: scale must be between 0 and 1e+12"},
		{"overrides:\n  - op: matmul\n    scale: .inf\n", "tol.yaml:3: scale: must be a number"},
		{"policy:\n  contraction: -4\n", "tol.yaml:2: policy contraction must be between 0 and 1e+12"},
		{"policy:\n  contraction: .nan\n", "tol.yaml:2: policy contraction: must be a number"},
		{"overrides: " + strings.Repeat("[", 100000), "tol.yaml:1: nested more than 64 levels deep"},
		{strings.Repeat("#", 2<<20), "tol.yaml: 2097152 bytes, more than the 1048576"},
		{"overrides:\n  - op: matmul\n    rtol: lots\n", `tol.yaml:3: rtol: must be a number, got "lots"`},
		{"overrides:\n  - op: matmul\n\n    atl: 1\n", `tol.yaml:4: unknown key "atl" in a rule`},
		{"overrides:\n  - rtol: 1\n", "tol.yaml:2: the rule has no selector"},
		{"overrides:\n  - op: add\n", "tol.yaml:2: the rule has no action"},
		{"overrides:\n  - prov: '(('\n    scale: 2\n", "tol.yaml:2: prov: bad regular expression"},
		{"overrides:\n  - kind: convolution\n    scale: 2\n", `tol.yaml:2: unknown op kind "convolution"`},
		{"overrides:\n  - op: add\n    op: sub\n    scale: 1\n", `tol.yaml:3: YAML syntax: mapping key "op" already defined`},
		{"overrides: {op: add}\n", "tol.yaml:1: 'overrides' must be a list"},
		{"overrides:\n  - just a string\n", "tol.yaml:2: a rule is a mapping"},
		{"policy:\n  contraction: 4\n  reductions: 2\n", `tol.yaml:3: unknown policy constant "reductions"`},
		{"policy: 3\n", "tol.yaml:1: 'policy' must be a mapping"},
		{"- a\n", "tol.yaml:1: expected a mapping"},
	} {
		_, err := ParseOverrides("tol.yaml", []byte(tc.text))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want %q", tc.text, err, tc.want)
		}
	}
	if o, err := ParseOverrides("empty.yaml", []byte("# nothing\n")); err != nil || len(o.Rules) != 0 || o.Policy != nil {
		t.Errorf("empty file: %+v, %v", o, err)
	}
	if _, err := LoadOverrides(filepath.Join(t.TempDir(), "missing.yaml")); err == nil || !strings.Contains(err.Error(), "missing.yaml") {
		t.Errorf("missing file: %v", err)
	}
}

// With a zero tolerance for every case, CPU replays still pass (they are
// bit-exact); a policy override recomputes the tolerances.
func TestTestWithOverrides(t *testing.T) {
	dir, _ := carvedStories(t)
	b, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	path := filepath.Join(t.TempDir(), "tol.yaml")
	os.WriteFile(path, []byte("policy:\n  contraction: 1\noverrides:\n  - kind: elementwise\n    atol: 0\n    rtol: 0\n"), 0o644)
	o, err := LoadOverrides(path)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := b.Test(cpu.New(), TestOptions{Overrides: o, Run: regexpMust(t, "^(matmul|add)$")})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK() || len(rep.Results) == 0 {
		t.Fatalf("%s", rep.Summary())
	}
	for _, r := range rep.Results {
		switch r.Case.Op {
		case "add":
			if !r.Tolerance.Exact() || !strings.Contains(r.Tolerance.Rule, "tol.yaml:4") {
				t.Errorf("%s: tolerance %+v", r.Case, r.Tolerance)
			}
		case "matmul":
			if r.Tolerance.RTol != r.Case.Tolerance.RTol/8 {
				t.Errorf("%s: rtol %g with contraction 1, recorded %g with 8", r.Case, r.Tolerance.RTol, r.Case.Tolerance.RTol)
			}
		default:
			t.Errorf("%s selected by ^(matmul|add)$", r.Case)
		}
	}
}

func regexpMust(t *testing.T, s string) *regexp.Regexp {
	t.Helper()
	re, err := regexp.Compile(s)
	if err != nil {
		t.Fatal(err)
	}
	return re
}
