package carve

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/tapml/tapml/frontend"
	"github.com/tapml/tapml/passes"
	"github.com/tapml/tapml/runtime/cpu"
)

func FuzzParseManifest(f *testing.F) {
	f.Add([]byte("format: tapml-carve-bundle\nversion: 1\ncase_count: 0\ncases: []\nend: end of manifest\n"))
	f.Add([]byte("format: tapml-carve-bundle\nversion: 1\ncase_count: 1\ncases:\n  - id: c1\n    op: add\n"))
	f.Add([]byte("format: tapml-carve-bundle\nversion: 9\n"))
	f.Add([]byte("- [a, {b: c}]\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := ParseManifest("manifest.yaml", data)
		if err == nil && (m.CaseCount != len(m.Cases) || m.Version > FormatVersion) {
			t.Errorf("accepted an inconsistent manifest: %+v", m)
		}
	})
}

func FuzzParseOverrides(f *testing.F) {
	f.Add([]byte("policy:\n  contraction: 4\noverrides:\n  - op: matmul\n    rtol: 1e-3\n"))
	f.Add([]byte("overrides:\n  - prov: '^layers'\n    scale: 2\n"))
	f.Add([]byte("overrides: [1, 2]\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		o, err := ParseOverrides("tol.yaml", data)
		if err == nil {
			o.Apply(&Case{ID: "c1", Op: "add", Kind: "elementwise"}, Tolerance{ATol: 1, RTol: 1})
		}
	})
}

func FuzzDecodeAttrs(f *testing.F) {
	f.Add("reshape", "shape", "[seq, 8, -1]")
	f.Add("constant", "value", "[1, nan, -inf]")
	f.Add("rope", "theta", "1e4")
	f.Add("transpose", "perm", "[1, 0]")
	f.Fuzz(func(t *testing.T, op, name, value string) {
		a, err := DecodeAttrs(op, map[string]string{name: value})
		if err != nil {
			return
		}
		back, err := DecodeAttrs(op, EncodeAttrs(a))
		if err != nil || !back.Equal(a) {
			t.Errorf("%s %s=%q: decoded %v, round trip %v (%v)", op, name, value, a, back, err)
		}
	})
}

// A run that keeps no case still writes a bundle that opens and tests.
func TestEmptyBundle(t *testing.T) {
	model, err := frontend.BuiltinTiny()
	if err != nil {
		t.Fatal(err)
	}
	rec, err := Carve(model.Module, model.Tokenizer, Options{Prompt: "a", Steps: 4, Probe: passes.Options{"ops": []string{"softmax"}}})
	if err != nil {
		t.Fatal(err)
	}
	if len(rec.Cases) != 0 {
		t.Fatalf("%d cases of softmax, which the tiny model does not use", len(rec.Cases))
	}
	b := writeOpen(t, rec, "empty")
	rep, err := b.Test(cpu.New(), TestOptions{})
	if err != nil || len(rep.Results) != 0 || !rep.OK() {
		t.Errorf("%v, %v", rep, err)
	}
	if _, err := os.Stat(filepath.Join(b.Dir, ModuleFile)); err != nil {
		t.Error(err)
	}
	var html, junit bytes.Buffer
	if err := rep.WriteHTML(&html); err != nil {
		t.Error(err)
	}
	if err := rep.WriteJUnit(&junit); err != nil {
		t.Error(err)
	}
}

// FuzzParseValue: a command-line value parses to a scalar or a vector, or
// is refused; never a panic.
func FuzzParseValue(f *testing.F) {
	for _, s := range []string{"1", "-2.5", "true", "[1, 2, 3]", "[0.5,1e3]", "[]", "x.npy", "[1,,2]", "9223372036854775807"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, ok := ParseValue(s)
		if ok && (len(v.Shape) > 1 || v.NumElements() > maxValueItems) {
			t.Fatalf("%q parsed to %s", s, v)
		}
	})
}
