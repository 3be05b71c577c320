package wgslfront

import (
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/tapml/tapml/codegen/internal/kerneltest"
)

// kernel is a module of the dialect around a kernel body; the body
// starts on line 8, column 1.
var kernel = kerneltest.WGSLKernel

// TestParse checks the facts Parse gives about a module and the marks the
// checker leaves on the tree.
func TestParse(t *testing.T) {
	src := kernel("var<workgroup> a: array<vec4<f32>, 8>;\nvar<workgroup> b: array<u32, 3>;\nvar<workgroup> c: array<vec3<f32>, 2>;",
		`var dead = 1u; dead = 2u; let also = dead + 1u; let k = i % 4u;
let same = in0[k] == in0[k]; let nan = out0[k] != out0[k];
a[li] = vec4<f32>(0.0f); b[0] = 1u; out0[i] = a[0].x + f32(b[0]) + select(0.0f, 1.0f, same && nan) + f32(-2 * 3);`)
	m, err := Parse(src, "main")
	if err != nil {
		t.Fatal(err)
	}
	type facts struct {
		WorkgroupSize [3]int
		Buffers       []string
		Workgroup     []string
		SharedBytes   int
		F16           bool
	}
	got := facts{m.WorkgroupSize, nil, nil, m.SharedBytes, m.F16}
	for _, d := range m.Buffers {
		got.Buffers = append(got.Buffers, d.Name)
	}
	for _, d := range m.Workgroup {
		got.Workgroup = append(got.Workgroup, d.Name)
	}
	want := facts{[3]int{64, 1, 1}, []string{"in0", "in1", "out0"}, []string{"a", "b", "c"}, 8*16 + 3*4 + 2*16, false}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("module facts (-want +got):\n%s", diff)
	}
	unused := map[string]bool{}
	var same, consts []string
	var walk func(e *Expr)
	walk = func(e *Expr) {
		if e.Same {
			same = append(same, e.String())
		}
		if e.Const != nil {
			consts = append(consts, e.Type.String()+":"+strconv.FormatInt(*e.Const, 10))
		}
		for _, a := range e.Args {
			walk(a)
		}
	}
	Walk(m.Entry.Body, func(s *Stmt) {
		if s.Kind == StmtDecl {
			unused[s.Decl.Name] = s.Decl.Unused
		}
		if s.Kind == StmtAssign && s.LHS.Text == "dead" && !s.Unused {
			t.Error("the assignment to the unused var is not marked")
		}
		for _, e := range []*Expr{s.X, s.LHS} {
			if e != nil {
				walk(e)
			}
		}
		if s.Decl != nil && s.Decl.Init != nil {
			walk(s.Decl.Init)
		}
	})
	// k is read only by the integer comparison with itself, which is a
	// constant: k stays read by out0[k] != out0[k], a float NaN test.
	if diff := cmp.Diff(map[string]bool{"i": false, "dead": true, "also": true, "k": false, "same": false, "nan": false}, unused); diff != "" {
		t.Errorf("unused locals (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"in0[k] == in0[k]", "out0[k] != out0[k]"}, same); diff != "" {
		t.Errorf("self comparisons (-want +got):\n%s", diff)
	}
	// Abstract integers take their context's type: indices i32, f32(...)'s
	// argument f32.
	if diff := cmp.Diff([]string{"i32:0", "i32:0", "i32:0", "f32:-6"}, consts); diff != "" {
		t.Errorf("evaluated constants (-want +got):\n%s", diff)
	}
}

// TestParseErrors checks that source outside the dialect is an *Error
// naming what is wrong and where (line:column).
func TestParseErrors(t *testing.T) {
	replace := func(src, old, new string) string { return strings.Replace(src, old, new, 1) }
	cases := []struct{ name, src, want string }{
		{"loop", kernel("", "loop { break; }"), "8:6: want a statement"},
		{"switch", kernel("", "switch (i) { default: {} }"), "8:12: want a statement"},
		{"uniform", kernel("@group(0) @binding(3) var<uniform> u: f32;", ""), "4:1: var<uniform> is outside the dialect"},
		{"texture call", kernel("", "out0[i] = textureLoad(i);"), "8:11: function textureLoad is outside the dialect"},
		{"f16 without enable", kernel("", "let h: f16 = 1.0h;"), "8:8: f16 needs `enable f16;`"},
		{"f16 literal without enable", kernel("", "let h = 1.0h;"), "8:9: f16 literal 1.0h needs `enable f16;`"},
		{"f16 out of range", "enable f16;\n" + kernel("", "let h = 70000.0h;"), "9:9: 70000.0h is out of the range of f16"},
		{"subgroups without enable", kernel("", "let s = subgroupAdd(1.0f);"), "8:9: subgroupAdd needs `enable subgroups;`"},
		{"unknown extension", "enable chromium_experimental;\n" + kernel("", ""), "1:8: enable chromium_experimental"},
		{"subgroup broadcast lane", "enable subgroups;\n" + kernel("", "let s = subgroupBroadcast(1.0f, li);"), "9:33: the lane of subgroupBroadcast must be a constant"},
		{"subgroup after &&", "enable subgroups;\n" + kernel("", "let s = li > 3u && subgroupAdd(1.0f) > 0.0f;"), "9:20: a subgroup operation on the right of &&"},
		{"subgroup in a helper", "enable subgroups;\n" + kernel("fn h(x: f32) -> f32 { return subgroupAdd(x); }", "out0[i] = h(1.0f);"), "5:30: subgroupAdd outside the entry point"},
		{"block comment", kernel("/* no */", ""), "4:1: block comments"},
		{"control character in a comment", kernel("// a\rb", ""), "4:5: control or line-break character U+000D"},
		{"line separator in a comment", kernel("// a\u2028b", ""), "4:5: control or line-break character U+2028"},
		{"non-ASCII code", kernel("", "let é = 1u;"), "8:5: unexpected character 'é'"},
		{"undeclared", kernel("", "out0[i] = y;"), "8:11: y is not declared"},
		{"assign to let", kernel("", "i = 2u;"), "8:1: i cannot be assigned"},
		{"write to read buffer", kernel("", "in0[i] = 2i;"), "8:4: in0 cannot be assigned"},
		{"helper writes a buffer", kernel("fn h(x: f32) -> f32 { out0[0] = x; return x; }", "out0[i] = h(1.0f);"), "4:27: helper functions cannot write buffers (out0)"},
		{"helper without return", kernel("fn h(x: f32) -> f32 { if (x > 0.0f) { return x; } }", "out0[i] = h(1.0f);"), "4:1: helper function h may end without returning a value"},
		{"recursion", kernel("fn h(x: f32) -> f32 { return g(x); }\nfn g(x: f32) -> f32 { return h(x); }", "out0[i] = h(1.0f);"), "calls itself"},
		{"type mismatch", kernel("", "out0[i] = i;"), "8:11: u32 where f32 is needed"},
		{"float literal without suffix", kernel("", "out0[i] = 1.5;"), "8:11: float literal 1.5 without suffix is outside the dialect"},
		{"octal-looking literal", kernel("", "let a = 017u;"), "8:9: bad literal 017u"},
		{"literal out of range", kernel("", "let a = 4294967296u;"), "8:9: bad literal"},
		{"abstract overflow", kernel("", "let a = u32(9223372036854775807 * 2);"), "8:33: cannot evaluate"},
		{"bitwise on floats", kernel("", "let a = 1.0f & 1.0f;"), "8:14: f32 & f32 is outside the dialect"},
		{"bitwise and compare", kernel("", "let a = i & 1u == 1u;"), "8:16: WGSL needs parentheses around == as an operand of &"},
		{"bitwise and shift", kernel("", "let a = i >> 2u & 1u;"), "8:11: WGSL needs parentheses around >> as an operand of &"},
		{"bitwise mixed", kernel("", "let a = i & 3u | 4u;"), "8:11: WGSL needs parentheses around & as an operand of |"},
		{"lone ampersand", kernel("", "let a = &i;"), "8:9: & (an address) is only the first argument of subgroupMatrixLoad"},
		{"float remainder", kernel("", "out0[i] = out0[i] % 2.0f;"), "8:19: f32 % f32 is outside the dialect"},
		{"mixed operands", kernel("", "out0[i] = f32(in0[i] + i);"), "8:22: i32 + u32"},
		{"float vector max", kernel("", "let v = max(vec4<f32>(1.0f), vec4<f32>(2.0f)); out0[i] = v.x;"), "8:9: max of float vectors is outside the dialect"},
		{"array constructor in code", kernel("", "let a = array<f32, 2>(1.0f, 2.0f);"), "8:9: array constructors are only for var<private> tables"},
		{"array as a value", kernel("var<workgroup> w: array<f32, 4>;", "let a = w;"), "8:1: a: a local array must be a fixed-size var without initializer"},
		{"array arithmetic", kernel("var<workgroup> w: array<f32, 4>;", "let a = w == w;"), "8:9: w is an array"},
		{"nested array", kernel("var<workgroup> w: array<array<f32, 2>, 4>;", ""), "4:19: array<array<f32, 2>> is outside the dialect"},
		{"constant index out of bounds", kernel("var<workgroup> w: array<f32, 4>;", "w[4] = 1.0f;"), "8:3: index 4 out of the bounds of array<f32, 4>"},
		{"table of non-constants", kernel("fn h() -> f32 { return 1.0f; }\nvar<private> t: array<f32, 2> = array<f32, 2>(h(), 1.0f);", ""), "5:47: table t: h() is not a constant expression"},
		{"workgroup memory in a helper", kernel("var<workgroup> w: array<f32, 4>;\nfn h() -> f32 { return w[0]; }", "out0[i] = h();"), "5:24: helper functions cannot use workgroup memory"},
		{"barrier in a helper", kernel("fn h() -> f32 { workgroupBarrier(); return 1.0f; }", "out0[i] = h();"), "4:17: workgroupBarrier outside the entry point"},
		{"builtin type", replace(kernel("", ""), "li: u32", "li: i32"), "6:81: @builtin(local_invocation_index) i32 is outside the dialect"},
		{"subgroup builtin without enable", replace(kernel("", ""), "local_invocation_index) li", "subgroup_size) li"), "6:72: @builtin(subgroup_size) needs `enable subgroups;`"},
		{"binding gap", replace(kernel("", ""), "@binding(1)", "@binding(5)"), "3:1: bindings are not 0, 1, ... in order (out0 is @binding(2))"},
		{"group 1", replace(kernel("", ""), "@group(0) @binding(1)", "@group(1) @binding(1)"), "2:1: storage buffer in1 needs @group(0) @binding(i)"},
		{"no entry point", "const N: u32 = 1u;", "1:1: no @compute entry point"},
		{"other entry point", kernel("", ""), "5:1: the entry point is main, not tapml"},
		{"two entry points", kernel("@compute @workgroup_size(1) fn other() {}", ""), "a second entry point"},
		{"no workgroup size", replace(kernel("", ""), "@workgroup_size(64, 1, 1)", ""), "5:1: the entry point needs @workgroup_size"},
		{"zero workgroup size", replace(kernel("", ""), "@workgroup_size(64, 1, 1)", "@workgroup_size(64, 0, 1)"), "has a zero"},
		{"huge workgroup size", replace(kernel("", ""), "@workgroup_size(64, 1, 1)", "@workgroup_size(99999999999)"), "5:26: want an integer from 0 to 65536"},
		{"huge array", kernel("var<workgroup> w: array<f32, 4294967297>;", ""), "4:30: want an integer from 0 to 16777216"},
		{"redeclared", kernel("", "let a = 1u; let a = 2u;"), "8:13: a is declared twice in one scope"},
		{"type name", kernel("", "let f32 = 1u;"), "8:1: f32 is a type name"},
		{"reserved identifier", kernel("", "let __x = 1u;"), "8:5: __x is not a WGSL identifier"},
		{"private without table", kernel("var<private> p: f32;", ""), "4:1: p: a module-scope const or var<private> needs an initializer"},
		{"unterminated", "@compute @workgroup_size(1) fn main() {", "1:40: unterminated block"},
	}
	cases = append(cases, matrixErrors...)
	for _, c := range cases {
		entry := "main"
		if c.name == "other entry point" {
			entry = "tapml"
		}
		_, err := Parse(c.src, entry)
		var perr *Error
		switch {
		case err == nil:
			t.Errorf("%s: no error, want %q", c.name, c.want)
		case !errors.As(err, &perr):
			t.Errorf("%s: error %v is not an *Error", c.name, err)
		case !strings.Contains(err.Error(), c.want):
			t.Errorf("%s: got %q, want an error containing %q", c.name, err, c.want)
		}
	}
}

// TestParseHostile checks that input built to exhaust the parser's stack,
// memory or arithmetic is an error, not a crash or a hang.
func TestParseHostile(t *testing.T) {
	const n = 100_000
	cases := []struct{ name, src, want string }{
		{"nested parentheses", kernel("", "let a = "+strings.Repeat("(", n)+"1"+strings.Repeat(")", n)+";"), "8:"},
		{"nested blocks", kernel("", strings.Repeat("{", n)+strings.Repeat("}", n)), "nesting deeper than 128"},
		{"nested negations", kernel("", "let a = "+strings.Repeat("- ", n)+"1;"), "nesting deeper than 128"},
		{"long sum", kernel("", "let a = 1u"+strings.Repeat(" + 1u", n)+";"), "expression nested deeper than 128"},
		{"long index chain", kernel("var<workgroup> w: array<u32, 4>;", "let a = "+strings.Repeat("w[", n)+"0"+strings.Repeat("]", n)+";"), "nesting deeper than 128"},
		{"else-if chain", kernel("", "if (i == 0u) {}"+strings.Repeat(" else if (i == 0u) {}", n/10)), "nesting deeper than 128"},
		{"too big", strings.Repeat(" ", MaxSourceBytes+1), "the limit is"},
		{"invalid UTF-8", kernel("// fine\n// bad \xff here", ""), "5:8: invalid UTF-8"},
		{"NUL", kernel("", "let a\x00 = 1u;"), "8:6: unexpected character '\\x00'"},
	}
	for _, c := range cases {
		err := Validate(c.src, "main")
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want an error containing %q", c.name, err, c.want)
		}
	}
	// Many statements in one function: the unused-local analysis must stay
	// linear (each let reads the previous one, and only the last is unused).
	var b strings.Builder
	b.WriteString("let v0 = i;\n")
	for k := 1; k < 20000; k++ {
		b.WriteString("let v" + strconv.Itoa(k) + " = v" + strconv.Itoa(k-1) + " + 1u;\n")
	}
	m, err := Parse(kernel("", b.String()), "main")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range m.Entry.Body {
		if s.Kind == StmtDecl && s.Decl.Name != "i" && !s.Decl.Unused {
			t.Fatalf("%s is not marked unused", s.Decl.Name)
		}
	}
}

// Subgroup matrices: matrix(decls, body) is a kernel that enables them
// (and f16), with workgroup arrays wh (f16) and wf (f32) and the body
// on line 11.
func matrix(decls, body string) string {
	return "enable f16;\nenable chromium_experimental_subgroup_matrix;\n" +
		kernel("var<workgroup> wh: array<f16, 256>;\nvar<workgroup> wf: array<f32, 256>;"+decls, body)
}

const (
	left   = "subgroup_matrix_left<f16, 16, 16>"
	right  = "subgroup_matrix_right<f16, 16, 16>"
	result = "subgroup_matrix_result<f32, 16, 16>"
	loadL  = "subgroupMatrixLoad<" + left + ">"
	loadR  = "subgroupMatrixLoad<" + right + ">"
)

var matrixErrors = []struct{ name, src, want string }{
	{"matrix without enable", "enable f16;\n" + kernel("", "let a = "+loadL+"(&in0, 0u, false, 16u);"), "9:28: subgroup_matrix_left needs `enable chromium_experimental_subgroup_matrix;`"},
	{"matrix call without enable", kernel("", "subgroupMatrixStore(&out0, 0u, 1.0f, false, 16u);"), "8:1: subgroupMatrixStore needs `enable chromium_experimental_subgroup_matrix;`"},
	{"matrix of i32", matrix("", "var m: subgroup_matrix_left<i32, 16, 16>;"), "11:8: subgroup_matrix_left of i32: the elements are f16 or f32"},
	{"matrix of f16 without enable", "enable chromium_experimental_subgroup_matrix;\n" + kernel("", "var m: "+left+";"), "9:29: f16 needs `enable f16;`"},
	{"matrix size", matrix("", "var m: subgroup_matrix_left<f16, 12, 16>;"), "11:34: subgroup_matrix_left: a size of 12; sizes are 8, 16 or 32"},
	{"element type", matrix("", "let a = "+loadL+"(&wf, 0u, false, 16u);"), "11:63: subgroupMatrixLoad: wf is array<f32, 256>, and the matrix's elements are f16"},
	{"vector element type", matrix("var<workgroup> wv: array<vec4<f32>, 64>;", "let a = "+loadL+"(&wv, 0u, false, 4u);"), "11:63: subgroupMatrixLoad: wv is array<vec4<f32>, 64>, and the matrix's elements are f16"},
	{"buffer element type", matrix("", "let a = "+loadL+"(&in0, 0u, false, 16u);"), "11:63: subgroupMatrixLoad: in0 is array<i32>, and the matrix's elements are f16"},
	{"store to a read buffer", matrix("", "var m = "+result+"();\nsubgroupMatrixStore(&in0, 0u, m, false, 16u);"), "12:21: subgroupMatrixStore to in0, a read-only buffer"},
	{"load from a let", matrix("", "let a = "+loadL+"(&i, 0u, false, 16u);"), "11:63: subgroupMatrixLoad of i: not a workgroup array or a storage buffer"},
	{"load without &", matrix("", "let a = "+loadL+"(wh, 0u, false, 16u);"), "11:63: subgroupMatrixLoad takes &array (a workgroup array or a storage buffer) first"},
	{"load of an element", matrix("", "let a = "+loadL+"(&wh[0], 0u, false, 16u);"), "11:63: subgroupMatrixLoad takes &array (a workgroup array or a storage buffer) first"},
	{"load without type", matrix("", "let a = subgroupMatrixLoad(&wh, 0u, false, 16u);"), "11:9: subgroupMatrixLoad needs its type: subgroupMatrixLoad<subgroup_matrix_...<T, C, R>>(...)"},
	{"load of a non-matrix", matrix("", "let a = subgroupMatrixLoad<f16>(&wh, 0u, false, 16u);"), "11:9: subgroupMatrixLoad of f16, not a subgroup matrix type"},
	{"non-constant col_major", matrix("", "let a = "+loadL+"(&wh, 0u, li == 0u, 16u);"), "11:75: subgroupMatrixLoad: col_major must be true or false, not li == 0u"},
	{"i32 stride", matrix("", "let a = "+loadL+"(&wh, 0u, false, 16i);"), "11:79: i32 where u32 is needed"},
	{"argument count", matrix("", "let a = "+loadL+"(&wh, 0u, false);"), "11:9: subgroupMatrixLoad takes 4 arguments, not 3"},
	{"dims mismatch", matrix("", "let a = "+loadL+"(&wh, 0u, false, 16u);\nlet b = subgroupMatrixLoad<subgroup_matrix_right<f16, 8, 16>>(&wh, 0u, false, 16u);\n"+
		"var c = "+result+"();\nc = subgroupMatrixMultiplyAccumulate(a, b, c);"), "14:5: subgroupMatrixMultiplyAccumulate: subgroup_matrix_left<f16, 16, 16> times subgroup_matrix_righ"},
	{"roles swapped", matrix("", "let a = "+loadL+"(&wh, 0u, false, 16u);\nlet b = "+loadR+"(&wh, 0u, false, 16u);\n"+
		"var c = "+result+"();\nc = subgroupMatrixMultiplyAccumulate(b, a, c);"), "14:5: subgroupMatrixMultiplyAccumulate of subgroup_matrix_right<f16, 16, 16>, subgroup_matrix_left<f"},
	{"operand types differ", matrix("", "let a = "+loadL+"(&wh, 0u, false, 16u);\nlet b = subgroupMatrixLoad<subgroup_matrix_right<f32, 16, 16>>(&wf, 0u, false, 16u);\n"+
		"var c = "+result+"();\nc = subgroupMatrixMultiplyAccumulate(a, b, c);"), "14:5: subgroupMatrixMultiplyAccumulate: the left matrix is of f16 and the right of f32"},
	{"scalar operand", matrix("", "var c = "+result+"();\nc = subgroupMatrixMultiplyAccumulate(1.0h, 1.0h, c);"), "12:38: subgroupMatrixMultiplyAccumulate takes a subgroup matrix here, not f16"},
	{"matrix product by *", matrix("", "var c = "+result+"();\nc = c * c;"), "12:7: subgroup_matrix_result<f32, 16, 16> * subgroup_matrix_result<f32, 16, 16>: matrices take +, - and / with a result matrix of their type, and * by a scalar of their element type"},
	{"matrix times a scalar of another type", matrix("", "var c = "+result+"();\nc = c * 2.0h;"), "12:7: subgroup_matrix_result<f32, 16, 16> * f16: matrices take +, - and / with a result matrix of their type, and * by a scalar of their element type"},
	{"scalar times a matrix", matrix("", "var c = "+result+"();\nc = 2.0f * c;"), "12:10: f32 * subgroup_matrix_result<f32, 16, 16>: matrices take +, - and / with a result matrix of their type, and * by a scalar of their element type"},
	{"matrix compound assignment", matrix("", "var c = "+result+"();\nc *= c;"), "12:1: subgroup_matrix_result<f32, 16, 16> * subgroup_matrix_result<f32, 16, 16> is outside the dialect"},
	{"matrix plus a scalar", matrix("", "var c = "+result+"();\nc = c + 1.0f;"), "12:7: subgroup_matrix_result<f32, 16, 16> + f32: matrices take +, - and / with a result matrix of their type, and * by a scalar of their element type"},
	{"scalar plus a matrix", matrix("", "var c = "+result+"();\nc = 1.0f + c;"), "12:10: f32 + subgroup_matrix_result<f32, 16, 16>: matrices take +, - and / with a result matrix of their type, and * by a scalar of their element type"},
	{"left matrix arithmetic", matrix("", "let a = "+loadL+"(&wh, 0u, false, 16u);\nlet b = a + a;"), "12:11: subgroup_matrix_left<f16, 16, 16> + subgroup_matrix_left<f16, 16, 16>: matrices take +, - and / with a result matrix of their type, and * by a scalar of their element type"},
	{"matrices of two types", matrix("", "var c = "+result+"();\nvar d = subgroup_matrix_result<f16, 16, 16>();\nc = c / d;"), "13:7: subgroup_matrix_result<f32, 16, 16> / subgroup_matrix_result<f16, 16, 16>: matrices take +, - and / with a result matrix of their type, and * by a scalar of their element type"},
	{"matrix negation", matrix("", "var c = "+result+"();\nc = -c;"), "12:5: - on subgroup_matrix_result<f32, 16, 16>"},
	{"matrix comparison", matrix("", "var c = "+result+"();\nif (c == c) {}"), "12:7: subgroup_matrix_result<f32, 16, 16> == subgroup_matrix_result<f32, 16, 16>: matrices take +, - and / with a result matrix of their type, and * by a scalar of their element type"},
	{"matrix in a builtin", matrix("", "var c = "+result+"();\nc = abs(c);"), "12:9: abs of subgroup_matrix_result<f32, 16, 16> is outside the dialect"},
	{"matrix index", matrix("", "var c = "+result+"();\nout0[i] = c[0];"), "12:12: subgroup_matrix_result<f32, 16, 16> indexed by abstract-int"},
	{"matrix constructor with values", matrix("", "var c = "+result+"(1.0f);"), "11:9: subgroup_matrix_result<f32, 16, 16> takes no arguments (it is the zero matrix)"},
	{"matrix constructor without sizes", matrix("", "var c = subgroup_matrix_result();"), "11:9: subgroup_matrix_result needs its <T, C, R>"},
	{"bitcast to a matrix", matrix("", "var c = bitcast<"+result+">();"), "11:9: bitcast of [] is outside the dialect"},
	{"array of matrices", matrix("", "var c: array<"+result+", 2>;"), "11:8: array<subgroup_matrix_result<f32, 16, 16>> is outside the dialect (arrays hold numbers or vectors)"},
	{"workgroup matrix", matrix("var<workgroup> wm: "+result+";", ""), "7:36: var<workgroup> wm must be a fixed-size array without initializer"},
	{"matrix in a helper", matrix("fn h() -> f32 { let a = "+loadL+"(&wh, 0u, false, 16u); return 1.0f; }", "out0[i] = h();"), "7:60: subgroupMatrixLoad outside the entry point"},
	{"matrix var in a helper", matrix("fn h() -> f32 { var m: "+result+"; return 1.0f; }", "out0[i] = h();"), "7:52: m: subgroup matrices live in the entry point only"},
	{"matrix parameter", matrix("fn h(m: "+result+") -> f32 { return 1.0f; }", ""), "7:41: parameter m is subgroup_matrix_result<f32, 16, 16>; parameters are scalars or vectors"},
	{"matrix result", matrix("fn h() -> "+result+" { return "+result+"(); }", ""), "7:36: helper function h must return a scalar or a vector"},
	{"store as a value", matrix("", "var c = "+result+"();\nlet x = subgroupMatrixStore(&wf, 0u, c, false, 16u);"), "12:9: subgroupMatrixStore is a statement, not a value"},
	{"load as a statement", matrix("", loadL+"(&wh, 0u, false, 16u);"), "11:1: a call as a statement: only subgroupMatrixStore is one"},
	{"call statement", matrix("", "abs(1.0f);"), "11:1: a call as a statement: only subgroupMatrixStore is one"},
	{"true as a name", matrix("", "let true = 1u;"), "11:1: true is a type name"},
	{"matrix operand of &&", matrix("", "let x = li > 3u && subgroupMatrixLoad<"+left+">(&wh, 0u, false, 16u);"), "11:17: bool && subgroup_matrix_left<f16, 16, 16>: matrices take +, - and / with a result matrix of their type, and * by a scalar of their element type"},
}
