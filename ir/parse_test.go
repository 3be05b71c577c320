package ir

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// wrap puts node lines (from line 4 on, indented 4) into a module with a
// weight @w : f32[4] and a func @f(%x: f32[2, 4], %pos: i32[]) of no results.
func wrap(body string) string {
	return "module \"m\" {\n  weight @w : f32[4]\n  func @f(%x: f32[2, 4], %pos: i32[]) -> () {\n" +
		body + "\n    return\n  }\n}\n"
}

func TestParseErrors(t *testing.T) {
	tests := []struct{ name, text, want string }{
		// the module
		{"empty", "", "1:1: expected 'module', found end of file"},
		{"only a comment", "// nothing\n", "2:1: expected 'module', found end of file"},
		{"not a module", "modul \"m\" {}", `1:1: expected 'module', found "modul"`},
		{"unquoted module name", "module m {}", `1:8: expected a quoted module name, found "m"`},
		{"no brace", `module "m" }`, `1:12: expected '{', found "}"`},
		{"unclosed module", `module "m" {`, "1:13: expected 'meta', 'weight', 'func' or '}', found end of file"},
		{"garbage inside", "module \"m\" {\n  frob\n}", `2:3: expected 'meta', 'weight', 'func' or '}', found "frob"`},
		{"text after the module", `module "m" {} x`, `1:15: unexpected "x" after the module`},
		{"second module", "module \"m\" {}\nmodule \"n\" {}", `2:1: unexpected "module" after the module`},

		// lexical errors
		{"unterminated string", `module "m`, "1:8: unterminated string"},
		{"string across lines", "module \"m\n\" {}", "1:8: unterminated string"},
		{"backslash at the end", `module "m\`, "1:8: unterminated string"},
		{"bad escape", `module "\q" {}`, `1:8: bad string "\q"`},
		{"unexpected character", `module "m" { $ }`, "1:14: unexpected character '$'"},
		{"unexpected letter", "module \"m\" {\n  é\n}", "2:3: unexpected character 'é'"},
		{"invalid UTF-8", "module \"m\" {\xff}", "1:13: unexpected byte 0xff"},
		{"single slash", `module "m" { / }`, "1:14: unexpected character '/'"},
		{"percent without name", wrap("    % = neg(%x) : f32[2, 4] #1"), "4:6: expected a name"},
		{"at without name", wrap("    %0 = neg(@) : f32[2, 4] #1"), "4:15: expected a name"},
		{"hash without id", wrap("    %0 = neg(%x) : f32[2, 4] #x"), "4:30: expected a node id after '#'"},

		// meta
		{"meta key unquoted", `module "m" { meta a = "b" }`, `1:19: expected a quoted meta key, found "a"`},
		{"meta without value", `module "m" { meta "a" = }`, `1:25: expected a quoted meta value, found "}"`},
		{"meta twice", "module \"m\" {\n  meta \"a\" = \"1\"\n  meta \"a\" = \"2\"\n}", `3:8: meta "a" given twice`},

		// weights
		{"weight without @", `module "m" { weight w : f32[4] }`, `1:21: expected a weight name (@name), found "w"`},
		{"weight without type", `module "m" { weight @w }`, `1:24: expected ':', found "}"`},
		{"weight of unknown dtype", `module "m" { weight @w : q8[4] }`, `1:26: unknown dtype "q8"`},
		{"weight without shape", `module "m" { weight @w : f32 }`, `1:30: expected '[', found "}"`},
		{"weight declared twice", "module \"m\" {\n  weight @w : f32[4]\n  weight @w : f32[4]\n}", "3:10: weight @w declared twice"},
		{"weight with symbolic shape", `module "m" { weight @"a/b" : f32[n] }`, `1:21: weight @"a/b" must have a static shape, got [n]`},
		{"negative dim", `module "m" { weight @w : f32[-1] }`, "1:30: bad dim -1"},
		{"dim too large for int64", `module "m" { weight @w : f32[99999999999999999999] }`, "1:30: bad dim 99999999999999999999"},
		{"float dim", `module "m" { weight @w : f32[2.5] }`, "1:30: bad dim 2.5"},
		{"type too large", `module "m" { weight @w : f32[4611686018427387904, 4] }`, "1:26: type f32[4611686018427387904, 4]: too large (its size in bytes overflows int64)"},
		{"block format not whole blocks", `module "m" { weight @w : q4_0[3, 40] }`, "1:26: type q4_0[3, 40]: a q4_0 tensor's last dim must be a static multiple of its block size 32"},
		{"block format of rank 0", `module "m" { weight @w : q6_k[] }`, "1:26: type q6_k[]: a q6_k tensor's last dim must be a static multiple of its block size 256"},
		{"symbol named inf", `module "m" { weight @w : f32[inf] }`, `1:26: type f32[inf]: symbol "inf" is not an identifier ([A-Za-z_][A-Za-z0-9_.]*, not inf or nan)`},
		{"unclosed shape", `module "m" { weight @w : f32[4 }`, `1:32: expected ',', found "}"`},
		{"string dim", `module "m" { weight @w : f32["n"] }`, `1:30: expected a dim (a size or a symbol), found "n"`},

		// functions
		{"func without @", `module "m" { func f() -> () { return } }`, `1:19: expected a function name (@name), found "f"`},
		{"func declared twice", "module \"m\" {\n  func @f() -> () {\n    return\n  }\n  func @f() -> () {\n    return\n  }\n}", "5:8: func @f declared twice"},
		{"parameter without %", `module "m" { func @f(x: f32[]) -> () { return } }`, `1:22: expected a parameter (%name), found "x"`},
		{"parameter without type", `module "m" { func @f(%x) -> () { return } }`, `1:24: expected ':', found ")"`},
		{"parameter twice", `module "m" { func @f(%x: f32[], %x: f32[]) -> () { return } }`, "1:33: parameter %x defined twice"},
		{"parameter with bad symbol", `module "m" { func @f(%x: f32[nan]) -> () { return } }`, `1:26: type f32[nan]: symbol "nan" is not an identifier ([A-Za-z_][A-Za-z0-9_.]*, not inf or nan)`},
		{"missing arrow", `module "m" { func @f() () { return } }`, `1:24: expected '->', found "("`},
		{"results without parens", `module "m" { func @f() -> %x { return } }`, `1:27: expected '(', found %x`},
		{"result that is a number", `module "m" { func @f() -> (1) { return } }`, `1:28: expected a result (%name or @weight), found "1"`},
		{"no return", `module "m" { func @f() -> () { } }`, `1:32: expected a node's output (%name) or 'return', found "}"`},
		{"return of the wrong value", `module "m" { func @f(%x: f32[], %y: f32[]) -> (%x) { return %y } }`, "1:61: return %y does not match declared result %x"},
		{"return of a weight for a value", "module \"m\" {\n  weight @x : f32[]\n  func @f(%x: f32[]) -> (%x) {\n    return @x\n  }\n}", "4:12: return @x does not match declared result %x"},
		{"return of too few", `module "m" { func @f(%x: f32[]) -> (%x, %x) { return %x } }`, "1:19: func @f declares 2 results but returns 1"},
		{"return of too many", `module "m" { func @f(%x: f32[]) -> () { return %x } }`, "1:19: func @f declares 0 results but returns 1"},
		{"undefined result", `module "m" { func @f() -> (%nope) { return %nope } }`, "1:28: result %nope is not defined in func @f"},
		{"undeclared weight result", `module "m" { func @f() -> (@nope) { return @nope } }`, "1:28: result @nope is not a declared weight"},
		{"return then junk", `module "m" { func @f(%x: f32[]) -> (%x) { return %x, } }`, `1:54: expected a returned value (%name or @weight), found "}"`},

		// nodes: syntax
		{"node without =", wrap("    %0 neg(%x) : f32[2, 4] #1"), `4:8: expected '=', found "neg"`},
		{"node without op", wrap("    %0 = (%x) : f32[2, 4] #1"), `4:10: expected an op name, found "("`},
		{"unknown op", wrap("    %0 = frob(%x) : f32[2, 4] #1"), `4:10: unknown op "frob"`},
		{"input that is a number", wrap("    %0 = neg(1) : f32[2, 4] #1"), `4:14: expected an input (%name or @weight), found "1"`},
		{"inputs without comma", wrap("    %0 = add(%x %x) : f32[2, 4] #1"), "4:17: expected ',', found %x"},
		{"undefined input", wrap("    %0 = neg(%nope) : f32[2, 4] #1"), "4:14: %nope is not defined (before this node)"},
		{"input defined later", wrap("    %0 = neg(%1) : f32[2, 4] #1\n    %1 = neg(%x) : f32[2, 4] #2"), "4:14: %1 is not defined (before this node)"},
		{"undeclared weight input", wrap(`    %0 = neg(@"w 2") : f32[4] #1`), `4:14: @"w 2" is not a declared weight`},
		{"no types", wrap("    %0 = neg(%x) #1"), `4:18: expected ':', found #1`},
		{"no id", wrap("    %0 = neg(%x) : f32[2, 4]"), `5:5: expected a node id (#N), found "return"`},
		{"id zero", wrap("    %0 = neg(%x) : f32[2, 4] #0"), "4:30: bad node id #0"},
		{"id too large", wrap("    %0 = neg(%x) : f32[2, 4] #99999999999999999999"), "4:30: bad node id #99999999999999999999"},
		{"id used twice", wrap("    %0 = neg(%x) : f32[2, 4] #1\n    %1 = neg(%0) : f32[2, 4] #1"), "5:30: node id #1 already used in func @f"},
		{"id used in another func", "module \"m\" {\n  func @f(%x: f32[]) -> () {\n    %0 = neg(%x) : f32[] #7\n    return\n  }\n  func @g(%x: f32[]) -> () {\n    %0 = neg(%x) : f32[] #7\n    return\n  }\n}", "7:26: node id #7 already used in func @f"},
		{"loc without string", wrap("    %0 = neg(%x) : f32[2, 4] #1 loc(x)"), `4:37: expected a quoted provenance, found "x"`},
		{"loc unclosed", wrap(`    %0 = neg(%x) : f32[2, 4] #1 loc("x"`), `5:5: expected ')', found "return"`},
		{"unknown placement", wrap("    %0 = neg(%x) : f32[2, 4] #1 on(gpu)"), `4:36: placement "gpu" is neither source nor target`},
		{"placement that is a string", wrap(`    %0 = neg(%x) : f32[2, 4] #1 on("source")`), `4:36: expected a placement (source or target), found "source"`},
		{"junk after the node", wrap("    %0 = neg(%x) : f32[2, 4] #1 foo"), `4:33: expected a node's output (%name) or 'return', found "foo"`},
		{"output defined twice", wrap("    %0 = neg(%x) : f32[2, 4] #1\n    %0 = neg(%x) : f32[2, 4] #2"), "5:5: %0 defined twice"},
		{"output named like a parameter", wrap("    %x = neg(%x) : f32[2, 4] #1"), "4:5: %x defined twice"},
		{"more types than outputs", wrap("    %0 = neg(%x) : f32[2, 4], f32[2, 4] #1"), "4:5: 1 outputs but 2 types"},
		{"more outputs than the op has", wrap("    %0, %1 = neg(%x) : f32[2, 4], f32[2, 4] #1"), "4:5: op neg has 1 outputs, 2 given"},

		// nodes: attributes
		{"attribute without name", wrap("    %0 = softmax(%x) {= 1} : f32[2, 4] #1"), `4:23: expected an attribute name, found "="`},
		{"attribute without value", wrap("    %0 = softmax(%x) {axis} : f32[2, 4] #1"), `4:27: expected '=', found "}"`},
		{"attribute value missing", wrap("    %0 = softmax(%x) {axis = } : f32[2, 4] #1"), `4:30: expected an attribute value, found "}"`},
		{"attributes without comma", wrap("    %0 = softmax(%x) {axis = 1 axis = 0} : f32[2, 4] #1"), `4:32: expected ',', found "axis"`},
		{"attribute given twice", wrap("    %0 = softmax(%x) {axis = 1, axis = 0} : f32[2, 4] #1"), `4:33: attribute "axis" given twice`},
		{"bad attribute word", wrap("    %0 = softmax(%x) {axis = foo} : f32[2, 4] #1"), `4:30: bad attribute value "foo"`},
		{"bad integer", wrap("    %0 = softmax(%x) {axis = 12abc} : f32[2, 4] #1"), "4:30: bad integer 12abc"},
		{"integer too large", wrap("    %0 = softmax(%x) {axis = 9223372036854775808} : f32[2, 4] #1"), "4:30: bad integer 9223372036854775808"},
		{"lone minus", wrap("    %0 = softmax(%x) {axis = -} : f32[2, 4] #1"), "4:30: bad integer -"},
		{"bad float", wrap("    %0 = rms_norm(%x, @w) {eps = 1.2.3} : f32[2, 4] #1"), "4:34: bad number 1.2.3"},
		{"string in a list", wrap(`    %0 = transpose(%x) {perm = ["a"]} : f32[4, 2] #1`), `4:33: expected a number or a dim symbol in a list, found "a"`},
		{"float in a shape", wrap("    %0 = reshape(%x) {shape = [seq, 2.5]} : f32[8] #1"), "4:31: a shape holds sizes and symbols only"},
		{"unclosed list", wrap("    %0 = transpose(%x) {perm = [1, 0} : f32[4, 2] #1"), `4:37: expected ',', found "}"`},
		{"unknown attribute", wrap("    %0 = softmax(%x) {dim = 0} : f32[2, 4] #1"), `4:10: op softmax has no attribute "dim" (it has: axis)`},
		{"quoted unknown attribute", wrap(`    %0 = softmax(%x) {"a b" = 0} : f32[2, 4] #1`), `4:10: op softmax has no attribute "a b" (it has: axis)`},
		{"attribute of the wrong kind", wrap(`    %0 = softmax(%x) {axis = "0"} : f32[2, 4] #1`), `4:10: op softmax: attribute "axis" must be int, got string "0"`},
		{"float for an int", wrap("    %0 = softmax(%x) {axis = 1.0} : f32[2, 4] #1"), `4:10: op softmax: attribute "axis" must be int, got float 1.0`},
		{"missing attribute", wrap("    %0 = reshape(%x) : f32[8] #1"), `4:10: op reshape: missing required attribute "shape" (shape)`},
		{"dtype attribute invalid", wrap("    %0 = cast(%x) {to = invalid} : f32[2, 4] #1"), `4:25: bad attribute value "invalid"`},

		// nodes: types
		{"declared type differs", wrap("    %0 = neg(%x) : f32[4, 2] #1"), "4:5: %0 is declared f32[4, 2], but neg infers f32[2, 4]"},
		{"declared dtype differs", wrap("    %0 = neg(%x) : f16[2, 4] #1"), "4:5: %0 is declared f16[2, 4], but neg infers f32[2, 4]"},
		{"inference error", wrap("    %0 = softmax(%x) {axis = 2} : f32[2, 4] #1"), "4:10: op softmax: axis 2 out of range for rank 2"},
		{"broadcast error", wrap("    %0 = add(%x, %pos) : f32[2, 4] #1"), "4:10: op add: input dtypes differ: f32 and i32"},
		{"arity error", wrap("    %0 = add(%x) : f32[2, 4] #1"), "4:10: op add takes 2 inputs, got 1"},
		{"bad fused expr", wrap(`    %0 = fused_elementwise(%x) {expr = "frob($0)"} : f32[2, 4] #1`), `4:10: op fused_elementwise: expr "frob($0)": "frob" is not an elementwise op`},
		{"bad type in a node", wrap("    %0 = neg(%x) : f32[2, -4] #1"), "4:27: bad dim -4"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m, err := Parse("t.tir", tc.text)
			if err == nil {
				t.Fatalf("parsed:\n%s", Text(m))
			}
			if got, want := err.Error(), "t.tir:"+tc.want; got != want {
				t.Errorf("error\n got: %s\nwant: %s\ntext:\n%s", got, want, tc.text)
			}
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Errorf("error %v is not a *ParseError", err)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("error has more than one line: %q", err)
			}
		})
	}
}

// TestParseAccepts covers forms the printer does not produce but the parser
// reads: comments, tabs and CRLF, ints for floats, empty attribute braces,
// quoted attribute names, signs and a weight declared after a function.
func TestParseAccepts(t *testing.T) {
	text := "// a module\r\nmodule \"m\" { // trailing\r\n" +
		"\tweight @w : f32[4]\n" +
		"  func @f(%x: f32[seq, 4], %p: i32[]) -> (%2, @w) {\n" +
		"    %0 = rms_norm(%x, @w) {\"eps\" = 1} : f32[seq, 4] #+5 loc(\"a\")\n" +
		"    %1 = neg(%0) {} : f32[seq, 4] #3 on(source)\n" +
		"    %2 = constant() {value = [+1, -2, 3e2, 4.5], shape = [+4]} : f32[4] #9\n" +
		"    return %2, @w\n" +
		"  }\n" +
		"  weight @late : i64[]\n" +
		"}"
	// '#+5' is not a node id; fix it up and check the rest.
	if _, err := Parse("a.tir", text); err == nil || !strings.Contains(err.Error(), "expected a node id after '#'") {
		t.Fatalf("#+5: %v", err)
	}
	text = strings.Replace(text, "#+5", "#5", 1)
	m, err := Parse("a.tir", text)
	if err != nil {
		t.Fatal(err)
	}
	want := `module "m" {
  weight @w : f32[4]
  weight @late : i64[]
  func @f(%x: f32[seq, 4], %p: i32[]) -> (%2, @w) {
    %0 = rms_norm(%x, @w) {eps = 1.0} : f32[seq, 4] #5 loc("a")
    %1 = neg(%0) : f32[seq, 4] #3 on(source)
    %2 = constant() {dtype = f32, shape = [4], value = [1.0, -2.0, 300.0, 4.5]} : f32[4] #9
    return %2, @w
  }
}
`
	if got := Text(m); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	if id := m.NewID(); id != 10 {
		t.Errorf("NewID after parse = %d, want 10", id)
	}
	if m.Funcs[0].Results[1] != m.Weight("w").Value() {
		t.Error("the weight result is not the weight's value")
	}
}

func TestParseErrorPositionInVerifyFallback(t *testing.T) {
	// Every error the verifier could find is found by the parser first, with
	// a position; spot-check that Parse returns *ParseError for an error the
	// verifier also knows (a placement).
	_, err := Parse("x.tir", wrap("    %0 = neg(%x) : f32[2, 4] #1 on(elsewhere)"))
	var pe *ParseError
	if !errors.As(err, &pe) || pe.Line != 4 {
		t.Errorf("got %v", err)
	}
}

// seedTexts are the golden files and snippets that seed the fuzzers.
func seedTexts(t testing.TB) []string {
	var seeds []string
	files, _ := filepath.Glob("testdata/*.tir")
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		seeds = append(seeds, string(b))
	}
	seeds = append(seeds,
		`module "m" {}`,
		wrap("    %0 = neg(%x) : f32[2, 4] #1"),
		wrap(`    %0 = constant() {value = [nan, -inf, -0.0, 1e308], shape = [4]} : f32[4] #2`),
		wrap(`    %0 = reshape(%x) {shape = [-1, 2]} : f32[4, 2] #1 loc("a\"b") on(target)`),
		wrap(`    %0 = fused_elementwise(%x, @w) {expr = "add($0, mul($1, 2))"} : f32[2, 4] #3`),
		"module \"m\" {\n  func @f(%x: f32[seq, 8]) -> (%0) {\n    %0 = slice(%x) {axis = 0, start = -1, end = 2147483647} : f32[1, 8] #1\n    return %0\n  }\n}",
	)
	return seeds
}

func FuzzParse(f *testing.F) {
	for _, s := range seedTexts(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		m, err := Parse("fuzz.tir", text)
		if err != nil {
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("error without a position: %v", err)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("more than one error: %q", err)
			}
			return
		}
		if err := Verify(m); err != nil {
			t.Fatalf("parsed module does not verify: %v", err)
		}
		txt := Text(m)
		m2, err := Parse("fuzz2.tir", txt)
		if err != nil {
			t.Fatalf("printed module does not parse: %v\n%s", err, txt)
		}
		if got := Text(m2); got != txt {
			t.Fatalf("text differs after a second round trip:\n%s\nvs\n%s", txt, got)
		}
		if d := diffModules(m, m2); d != "" {
			t.Fatalf("structure differs after a round trip:\n%s", d)
		}
	})
}

// TestParseSeeds runs the fuzz property over the seeds in normal test runs
// (go test runs FuzzParse's seeds too; this also checks they all parse).
func TestParseSeeds(t *testing.T) {
	for i, s := range seedTexts(t) {
		if _, err := Parse("seed.tir", s); err != nil {
			t.Errorf("seed %d: %v", i, err)
		}
	}
}
