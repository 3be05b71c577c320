package ir

import (
	"flag"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

// golden compares got with testdata/name, or rewrites the file with -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./ir -update to create it)", err)
	}
	if d := cmp.Diff(string(want), got); d != "" {
		t.Errorf("%s differs from the golden file (-want +got; go test ./ir -update rewrites it):\n%s", path, d)
	}
}

// The plain* types mirror a module without pointers, so go-cmp can compare
// two modules (the Value.Def <-> Node cycle is replaced by references that
// name the defining node).

type plainModule struct {
	Name    string
	Meta    map[string]string
	Weights []plainValue
	Funcs   []plainFunc
}

type plainFunc struct {
	Name    string
	Params  []plainValue
	Nodes   []plainNode
	Results []string
}

type plainValue struct {
	Name string
	Type Type
}

type plainNode struct {
	ID      int
	Op      Op
	Inputs  []string
	Outputs []plainValue
	Attrs   map[string]plainAttr
	Prov    string
	Place   string
}

// plainAttr holds floats as bits (NaN canonical), so that -0 differs from 0.
type plainAttr struct {
	Kind   AttrKind
	Int    int64
	Float  uint64
	Str    string
	Bool   bool
	Ints   []int64
	Floats []uint64
	Shape  Shape
	DType  DType
}

func floatBits(f float64) uint64 {
	if math.IsNaN(f) {
		return math.Float64bits(math.NaN())
	}
	return math.Float64bits(f)
}

// ref names a value with where it comes from: "@w", "%x<-param",
// "%x<-#12" or "%x<-?" for a value defined nowhere.
func ref(v *Value) string {
	switch {
	case v == nil:
		return "<nil>"
	case v.Weight != nil:
		return "@" + v.Weight.Name
	case v.Def != nil:
		return "%" + v.Name + "<-#" + strconv.Itoa(v.Def.ID)
	}
	return "%" + v.Name + "<-param"
}

// plainShape and plainType make empty shapes nil, so DeepEqual can compare.
func plainShape(s Shape) Shape {
	if len(s) == 0 {
		return nil
	}
	return s
}

func plainType(t Type) Type { return Type{t.DType, plainShape(t.Shape)} }

func plain(m *Module) plainModule {
	pm := plainModule{Name: m.Name, Meta: m.Meta}
	if len(pm.Meta) == 0 {
		pm.Meta = nil
	}
	for _, w := range m.Weights {
		pm.Weights = append(pm.Weights, plainValue{w.Name, plainType(w.Type)})
	}
	for _, f := range m.Funcs {
		pf := plainFunc{Name: f.Name}
		for _, p := range f.Params {
			pf.Params = append(pf.Params, plainValue{p.Name, plainType(p.Type)})
		}
		for _, n := range f.Nodes {
			pn := plainNode{ID: n.ID, Op: n.Op, Prov: n.Prov, Place: n.Place}
			if len(n.Attrs) > 0 {
				pn.Attrs = map[string]plainAttr{}
			}
			for _, in := range n.Inputs {
				pn.Inputs = append(pn.Inputs, ref(in))
			}
			for _, o := range n.Outputs {
				pn.Outputs = append(pn.Outputs, plainValue{o.Name, plainType(o.Type)})
			}
			for k, a := range n.Attrs {
				pa := plainAttr{Kind: a.Kind, Int: a.Int, Float: floatBits(a.Float), Str: a.Str, Bool: a.Bool,
					DType: a.DType}
				if len(a.Ints) > 0 {
					pa.Ints = a.Ints
				}
				if len(a.Shape) > 0 {
					pa.Shape = plainShape(a.Shape)
				}
				for _, f := range a.Floats {
					pa.Floats = append(pa.Floats, floatBits(f))
				}
				pn.Attrs[k] = pa
			}
			pf.Nodes = append(pf.Nodes, pn)
		}
		for _, r := range f.Results {
			pf.Results = append(pf.Results, ref(r))
		}
		pm.Funcs = append(pm.Funcs, pf)
	}
	return pm
}

// diffModules returns a go-cmp diff of two modules' structure, "" when equal.
// Nil and empty slices and maps are the same. (reflect.DeepEqual answers
// the common equal case quickly; go-cmp explains a difference.)
func diffModules(a, b *Module) string {
	pa, pb := plain(a), plain(b)
	if reflect.DeepEqual(pa, pb) {
		return ""
	}
	return cmp.Diff(pa, pb, cmpopts.EquateEmpty())
}

// roundTrip checks Text(Parse(Text(m))) == Text(m) and that the parsed
// module equals m structurally; it returns the parsed module.
func roundTrip(t *testing.T, m *Module) *Module {
	t.Helper()
	txt := Text(m)
	m2, err := Parse("roundtrip.tir", txt)
	if err != nil {
		t.Fatalf("parse of printed module: %v\n%s", err, txt)
	}
	if got := Text(m2); got != txt {
		t.Fatalf("text round trip differs:\n%s", cmp.Diff(txt, got))
	}
	if d := diffModules(m, m2); d != "" {
		t.Fatalf("structure differs after round trip (-built +parsed):\n%s", d)
	}
	return m2
}
