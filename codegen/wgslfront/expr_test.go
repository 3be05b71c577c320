package wgslfront

import (
	"errors"
	"strings"
	"testing"
)

// testLib is a library of two helpers, the second calling the first.
const testLib = `fn twice(x: f32) -> f32 { return 2.0f * x; }
fn quad(x: f32) -> f32 {
  if (x == 0.0f) { return 0.0f; }
  return twice(twice(x));
}`

var testVars = []Var{{"x", "f32"}, {"y", "f32"}, {"n", "i32"}}

func TestParseExpr(t *testing.T) {
	lib, err := ParseLibrary(testLib)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		src, typ, err string
	}{
		{src: "x * (1.0f / (1.0f + exp(-x)))", typ: "f32"},
		{src: "select(x, 0.0f, x < 0.0f)", typ: "f32"},
		{src: "quad(x) + twice(y)", typ: "f32"},
		{src: "select(n / 3i, 0i, n == 0)", typ: "i32"},
		{src: "n * 2", typ: "i32"},
		{src: "2 + 3", typ: "i32"},
		{src: "x < y && n > 0i", typ: "bool"},
		{src: "x + n", err: "1:3: f32 + i32 is outside the dialect"},
		{src: "z + 1.0f", err: "1:1: z is not declared"},
		{src: "x +", err: "1:4: want an expression, found the end of the source"},
		{src: "x y", err: "1:3: want the end of the expression, found \"y\""},
		{src: "thrice(x)", err: "1:1: function thrice is outside the dialect"},
		{src: "twice(n)", err: "1:7: i32 where f32 is needed"},
		{src: "subgroupAdd(x)", err: "subgroupAdd needs `enable subgroups;`"},
		{src: "bitcast<u32>(x)", typ: "u32"},
		{src: "bitcast<f32>(bitcast<u32>(x) & 0xffffe000u)", typ: "f32"},
		{src: "bitcast<i32>(x)", err: "1:1: bitcast of [f32] is outside the dialect"},
		{src: "bitcast<u32>(n)", err: "1:1: bitcast of [i32] is outside the dialect"},
		{src: "x // a comment", typ: "f32"},
		{src: "- -x", typ: "f32"},
		{src: "1.5", err: "1:1: float literal 1.5 without suffix"},
		{src: strings.Repeat("(", 200) + "x" + strings.Repeat(")", 200), err: "nesting deeper than 128"},
		{src: "\xff", err: "1:1: invalid UTF-8"},
	} {
		e, err := ParseExpr(tc.src, testVars, lib)
		switch {
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%q: error %v, want %q", tc.src, err, tc.err)
		case tc.err == "" && err != nil:
			t.Errorf("%q: %v", tc.src, err)
		case tc.err == "" && e.Type.String() != tc.typ:
			t.Errorf("%q: type %s, want %s", tc.src, e.Type, tc.typ)
		}
	}
	// Variables refer to parameter declarations, calls to the library.
	e, err := ParseExpr("twice(x) + y", testVars, lib)
	if err != nil {
		t.Fatal(err)
	}
	call, y := e.Args[0], e.Args[1]
	if call.Func == nil || call.Func.Name != "twice" || y.Ref == nil || y.Ref.Kind != DeclParam || y.Ref.Name != "y" {
		t.Errorf("call %+v, variable %+v", call.Func, y.Ref)
	}
	for _, vars := range [][]Var{{{"x", "f32"}, {"x", "i32"}}, {{"h", "f16"}}, {{"v", "vec4"}}, {{"twice", "f32"}}, {{"f32", "f32"}}} {
		if _, err := ParseExpr("1i", vars, lib); err == nil {
			t.Errorf("variables %v: no error", vars)
		}
	}
}

func TestParseLibrary(t *testing.T) {
	for _, tc := range []struct{ src, err string }{
		{src: testLib},
		{src: "enable f16;\nfn h(x: f16) -> f16 { return x * 2.0h; }"},
		{src: "const k: f32 = 1.0f;", err: "1:1: k: a library declares helper functions only"},
		{src: "@compute @workgroup_size(1) fn main() {}", err: "1:1: main: a library has no entry point"},
		{src: "fn f(x: f32) -> f32 { return f(x); }", err: "function f calls itself"},
		{src: "fn f(x: f32) -> f32 { return y; }", err: "1:30: y is not declared"},
	} {
		_, err := ParseLibrary(tc.src)
		if tc.err == "" && err != nil || tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("%q: error %v, want %q", tc.src, err, tc.err)
		}
	}
}

func TestPrintSubstitutes(t *testing.T) {
	e, err := ParseExpr("x * (1.0f / (1.0f + exp(-x))) + select(y, 0.5f, n < 0i)", testVars, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := e.String(), "x * (1.0f / (1.0f + exp(-x))) + select(y, 0.5f, n < 0i)"; got != want {
		t.Errorf("String: %s, want %s", got, want)
	}
	got := e.Print(func(x *Expr) (string, bool) {
		switch {
		case x.Kind == ExprIdent && x.Ref.Kind == DeclParam:
			return x.Text + "0", true
		case x.Kind == ExprLit && x.Text == "0.5f":
			return "0.25f", true
		}
		return "", false
	})
	if want := "x0 * (1.0f / (1.0f + exp(-x0))) + select(y0, 0.25f, n0 < 0i)"; got != want {
		t.Errorf("Print: %s, want %s", got, want)
	}
}

// FuzzParseExpr checks that ParseExpr never panics, that every error is an
// *Error inside the source, and that a typed tree prints back to an
// expression of the same type.
func FuzzParseExpr(f *testing.F) {
	lib, err := ParseLibrary(testLib)
	if err != nil {
		f.Fatal(err)
	}
	for _, s := range []string{"x * (1.0f / (1.0f + exp(-x)))", "select(n / 3i, 0i, n == 0)", "quad(x) + twice(y)",
		"0.5f * x * (1.0f + tanh(0.7978845608028654f * (x + 0.044715f * x * x * x)))", "-n", "max(x, y) < 3.0f"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, src string) {
		e, err := ParseExpr(src, testVars, lib)
		if err != nil {
			var perr *Error
			if !errors.As(err, &perr) {
				t.Fatalf("error %v is not an *Error", err)
			}
			if strings.Contains(perr.Msg, "internal error") {
				t.Fatalf("%v", err)
			}
			if lines := strings.Count(src, "\n") + 1; perr.Pos.Line < 1 || perr.Pos.Line > lines || perr.Pos.Col < 1 {
				t.Fatalf("error %v outside the source's %d lines", err, lines)
			}
			return
		}
		again, err := ParseExpr(e.String(), testVars, lib)
		if err != nil {
			t.Fatalf("%q printed as %q: %v", src, e.String(), err)
		}
		if !again.Type.Eq(e.Type) {
			t.Fatalf("%q printed as %q: type %s, was %s", src, e.String(), again.Type, e.Type)
		}
	})
}
