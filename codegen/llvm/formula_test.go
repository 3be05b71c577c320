package llvm

import (
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	lir "github.com/llir/llvm/ir"
	"github.com/llir/llvm/ir/types"
	"github.com/llir/llvm/ir/value"

	"github.com/tapml/tapml/codegen/wgslfront"
	"github.com/tapml/tapml/internal/testenv"
)

// formulaVars are the variables of the expressions of TestFormulaSemantics.
var formulaVars = []wgslfront.Var{{Name: "x", Type: "f32"}, {Name: "y", Type: "f32"}, {Name: "n", Type: "i32"}, {Name: "m", Type: "i32"}}

// formulaLib is a library of one helper that has a C library function
// (codegen/wgsl's pow_) and one that has none.
const formulaLib = `fn pow_(a: f32, b: f32) -> f32 { return a; }
fn twice(a: f32) -> f32 { return 2.0f * a; }`

// TestFormulaSemantics compiles expressions with formula, links them with
// a C driver that calls them on every combination of special values, and
// compares each result with WGSL's semantics computed in Go: exactly, but
// for the C library's transcendentals (within 1 ulp of f32: glibc and Go's
// math may differ by an ulp of a double, which can move the f32 rounding).
// The i32 expressions run on i32 and on i64 values.
func TestFormulaSemantics(t *testing.T) {
	cc := testenv.Tool(t, "clang-14")
	type ref func(x, y float32, n, m int64, bits int) any
	f := func(v float32) any { return v }
	b := func(v bool) any { return v }
	div := func(n, m int64, bits int, rem bool) any {
		minInt := int64(math.MinInt64) >> (64 - bits)
		switch {
		case m == 0 && rem, n == minInt && m == -1 && rem:
			return int64(0)
		case m == 0:
			return n
		case n == minInt && m == -1:
			return n
		case rem:
			return n % m
		}
		return n / m
	}
	wrap := func(v int64, bits int) any { return v << (64 - bits) >> (64 - bits) }
	cases := []struct {
		src  string
		libm bool // computed by the C library: within 1 f32 ulp
		want ref
	}{
		{src: "x * (1.0f / (1.0f + y)) - x", want: func(x, y float32, _, _ int64, _ int) any { return f(x*(1/(1+y)) - x) }},
		{src: "-x", want: func(x, _ float32, _, _ int64, _ int) any { return f(-x) }},
		{src: "x / y", want: func(x, y float32, _, _ int64, _ int) any { return f(x / y) }},
		{src: "select(x, y, x < y)", want: func(x, y float32, _, _ int64, _ int) any { return f(map[bool]float32{true: y, false: x}[x < y]) }},
		{src: "x == y", want: func(x, y float32, _, _ int64, _ int) any { return b(x == y) }},
		{src: "x != y", want: func(x, y float32, _, _ int64, _ int) any { return b(x != y) }},
		{src: "x >= y || !(x <= y) && x > 0.0f", want: func(x, y float32, _, _ int64, _ int) any { return b(x >= y || !(x <= y) && x > 0) }},
		{src: "max(x, y)", want: func(x, y float32, _, _ int64, _ int) any { return f(nanMinMax(math.Max, x, y)) }},
		{src: "min(x, y)", want: func(x, y float32, _, _ int64, _ int) any { return f(nanMinMax(math.Min, x, y)) }},
		{src: "abs(x)", want: func(x, _ float32, _, _ int64, _ int) any { return f(float32(math.Abs(float64(x)))) }},
		{src: "sqrt(x) + inverseSqrt(y)", want: func(x, y float32, _, _ int64, _ int) any {
			return f(float32(math.Sqrt(float64(x))) + 1/float32(math.Sqrt(float64(y))))
		}},
		{src: "exp(x)", libm: true, want: func(x, _ float32, _, _ int64, _ int) any { return f(float32(math.Exp(float64(x)))) }},
		{src: "exp2(x) + log2(y)", libm: true, want: func(x, y float32, _, _ int64, _ int) any {
			return f(float32(math.Exp2(float64(x))) + float32(math.Log2(float64(y))))
		}},
		{src: "log(x) * tanh(y)", libm: true, want: func(x, y float32, _, _ int64, _ int) any {
			return f(float32(math.Log(float64(x))) * float32(math.Tanh(float64(y))))
		}},
		{src: "sin(x) - cos(y)", libm: true, want: func(x, y float32, _, _ int64, _ int) any {
			return f(float32(math.Sin(float64(x))) - float32(math.Cos(float64(y))))
		}},
		{src: "pow_(x, y)", libm: true, want: func(x, y float32, _, _ int64, _ int) any { return f(float32(math.Pow(float64(x), float64(y)))) }},
		{src: "n / m", want: func(_, _ float32, n, m int64, bits int) any { return div(n, m, bits, false) }},
		{src: "n % m", want: func(_, _ float32, n, m int64, bits int) any { return div(n, m, bits, true) }},
		{src: "n * m + -n - 3i", want: func(_, _ float32, n, m int64, bits int) any { return wrap(n*m-n-3, bits) }},
		{src: "(n & m) | (n ^ -m)", want: func(_, _ float32, n, m int64, bits int) any { return wrap((n&m)|(n^-m), bits) }},
		{src: "abs(n)", want: func(_, _ float32, n, _ int64, bits int) any { return wrap(max(n, -n), bits) }},
		{src: "max(n, m) - min(n, 2)", want: func(_, _ float32, n, m int64, bits int) any { return wrap(max(n, m)-min(n, 2), bits) }},
		{src: "select(n / m, 0i, m == 0i)", want: func(_, _ float32, n, m int64, bits int) any {
			if m == 0 {
				return int64(0)
			}
			return div(n, m, bits, false)
		}},
		{src: "n < m && n != 0i || n >= 5i", want: func(_, _ float32, n, m int64, _ int) any { return b(n < m && n != 0 || n >= 5) }},
		{src: "select(x, y, n <= m)", want: func(x, y float32, n, m int64, _ int) any { return f(map[bool]float32{true: y, false: x}[n <= m]) }},
	}
	floats := []float32{0, float32(math.Copysign(0, -1)), 1, -1, 2.5, -3, 0.1, 100, float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1)), 1e-40}
	for _, bits := range []int{32, 64} {
		ints := []int64{0, 1, -1, 2, -7, 7, 100, math.MinInt64 >> (64 - bits), math.MaxInt64 >> (64 - bits)}
		lib, err := wgslfront.ParseLibrary(formulaLib)
		if err != nil {
			t.Fatal(err)
		}
		mod := lir.NewModule()
		it := types.NewInt(uint64(bits))
		cty := map[int]string{32: "int32_t", 64: "int64_t"}[bits]
		var decls, calls strings.Builder
		runs := 0
		for i, c := range cases {
			e, err := wgslfront.ParseExpr(c.src, formulaVars, lib)
			if err != nil {
				t.Fatalf("%s: %v", c.src, err)
			}
			params := []*lir.Param{lir.NewParam("x", types.Float), lir.NewParam("y", types.Float), lir.NewParam("n", it), lir.NewParam("m", it)}
			ret, ctype, format := types.Type(types.Float), "float", `printf("%d %d %d %d %d %a\n", `
			switch e.Type.Kind {
			case wgslfront.I32:
				ret, ctype, format = it, cty, `printf("%d %d %d %d %d %lld\n", `
			case wgslfront.Bool:
				ret, ctype, format = types.I8, "int8_t", `printf("%d %d %d %d %d %d\n", `
			}
			g := &gen{m: mod}
			g.f = mod.NewFunc(fmt.Sprint("f", i), ret, params...)
			g.cur = g.f.NewBlock("")
			v, err := g.formula(e, formulaEnv{vars: []string{"x", "y", "n", "m"}, vals: []value.Value{params[0], params[1], params[2], params[3]}, ints: it})
			if err != nil {
				t.Fatalf("%s: %v", c.src, err)
			}
			if e.Type.Kind == wgslfront.Bool {
				v = g.cur.NewZExt(v, types.I8)
			}
			g.cur.NewRet(v)
			fmt.Fprintf(&decls, "%s f%d(float, float, %s, %s);\n", ctype, i, cty, cty)
			// Loop over the values of the variables the expression reads.
			bound := map[string]int{"x": 1, "y": 1, "n": 1, "m": 1}
			walkIdents(e, func(name string) { bound[name] = map[bool]int{true: len(floats), false: len(ints)}[name < "m"] })
			fmt.Fprintf(&calls, "  for (int a = 0; a < %d; a++) for (int b = 0; b < %d; b++) for (int c = 0; c < %d; c++) for (int d = 0; d < %d; d++)\n",
				bound["x"], bound["y"], bound["n"], bound["m"])
			fmt.Fprintf(&calls, "    %s %d, a, b, c, d, (%s)f%d(xs[a], xs[b], ns[c], ns[d]));\n", format, i,
				map[string]string{"float": "double", cty: "long long", "int8_t": "int"}[ctype], i)
			runs += bound["x"] * bound["y"] * bound["n"] * bound["m"]
		}
		var xs, ns []string
		for _, x := range floats {
			xs = append(xs, strconv.FormatFloat(float64(x), 'x', -1, 64))
			if math.IsNaN(float64(x)) {
				xs[len(xs)-1] = "NAN"
			} else if math.IsInf(float64(x), 0) {
				xs[len(xs)-1] = map[bool]string{true: "INFINITY", false: "-INFINITY"}[x > 0]
			}
		}
		for _, n := range ns0(ints) {
			ns = append(ns, n)
		}
		driver := fmt.Sprintf(`#include <stdio.h>
#include <stdint.h>
#include <math.h>
%s
static const float xs[] = {%s};
static const %s ns[] = {%s};
int main(void) {
%s  return 0;
}
`, decls.String(), strings.Join(xs, ", "), cty, strings.Join(ns, ", "), calls.String())
		dir := t.TempDir()
		ll, cfile, exe := filepath.Join(dir, "f.ll"), filepath.Join(dir, "main.c"), filepath.Join(dir, "main")
		if err := os.WriteFile(ll, []byte(mod.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(cfile, []byte(driver), 0o644); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command(cc, "-O0", "-Wno-override-module", ll, cfile, "-lm", "-o", exe).CombinedOutput(); err != nil {
			t.Fatalf("clang: %v\n%s", err, out)
		}
		out, err := exec.Command(exe).Output()
		if err != nil {
			t.Fatal(err)
		}
		checked := 0
		for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			var i, a, bb, c, d int
			var got string
			if _, err := fmt.Sscan(line, &i, &a, &bb, &c, &d, &got); err != nil {
				t.Fatalf("driver line %q: %v", line, err)
			}
			x, y, n, m := floats[a], floats[bb], ints[c], ints[d]
			want := cases[i].want(x, y, n, m, bits)
			if !sameResult(got, want, cases[i].libm) {
				t.Errorf("i%d: %s at x=%v y=%v n=%d m=%d: got %s, want %v", bits, cases[i].src, x, y, n, m, got, want)
			}
			checked++
		}
		t.Logf("i%d: %d results checked", bits, checked)
		if checked != runs {
			t.Errorf("i%d: %d results, want %d", bits, checked, runs)
		}
	}
}

// nanMinMax is max or min as the translators compute them: NaN if either
// operand is (Go's math.Max(NaN, +Inf) is +Inf), -0 below +0.
func nanMinMax(f func(a, b float64) float64, x, y float32) float32 {
	if x != x || y != y {
		return float32(math.NaN())
	}
	return float32(f(float64(x), float64(y)))
}

// walkIdents calls f with the name of every identifier in e.
func walkIdents(e *wgslfront.Expr, f func(string)) {
	if e.Kind == wgslfront.ExprIdent {
		f(e.Text)
	}
	for _, a := range e.Args {
		walkIdents(a, f)
	}
}

func ns0(ints []int64) []string {
	var s []string
	for _, n := range ints {
		if n == math.MinInt64 {
			s = append(s, "INT64_MIN")
		} else {
			s = append(s, strconv.FormatInt(n, 10)+"LL")
		}
	}
	return s
}

// sameResult compares a result the driver printed (%a of a float, an
// integer, 0 or 1 for a bool) with want.
func sameResult(got string, want any, libm bool) bool {
	switch w := want.(type) {
	case float32:
		g, err := strconv.ParseFloat(strings.TrimPrefix(got, "-"), 64) // printf writes NaN as nan or -nan
		if err != nil {
			return false
		}
		if strings.HasPrefix(got, "-") {
			g = -g
		}
		gf := float32(g)
		if math.IsNaN(float64(w)) || math.IsNaN(float64(gf)) {
			return math.IsNaN(float64(w)) && math.IsNaN(float64(gf))
		}
		if math.Float32bits(gf) == math.Float32bits(w) {
			return true
		}
		return libm && (math.Nextafter32(w, float32(math.Inf(1))) == gf || math.Nextafter32(w, float32(math.Inf(-1))) == gf)
	case int64:
		return got == strconv.FormatInt(w, 10)
	case bool:
		return got == map[bool]string{true: "1", false: "0"}[w]
	}
	return false
}

// TestFormulaErrors: what formula does not compile is an error naming it.
func TestFormulaErrors(t *testing.T) {
	lib, err := wgslfront.ParseLibrary(formulaLib)
	if err != nil {
		t.Fatal(err)
	}
	for _, src := range []string{"f32(n)", "floor(x)", "twice(x)", "n << 2u", "fma(x, y, x)"} {
		e, err := wgslfront.ParseExpr(src, formulaVars, lib)
		if err != nil {
			t.Fatalf("%s: %v", src, err)
		}
		mod := lir.NewModule()
		g := &gen{m: mod}
		g.f = mod.NewFunc("f", types.Float)
		g.cur = g.f.NewBlock("")
		zero := []value.Value{cf(0), cf(0), c32(0), c32(0)}
		if _, err := g.formula(e, formulaEnv{vars: []string{"x", "y", "n", "m"}, vals: zero, ints: types.I32}); err == nil {
			t.Errorf("%s: no error", src)
		} else if !strings.Contains(err.Error(), src) {
			t.Errorf("%s: error %q does not name the formula", src, err)
		}
	}
}
