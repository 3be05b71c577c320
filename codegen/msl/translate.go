package msl

import (
	"fmt"
	"sort"
	"strings"
)

// translate turns a WGSL compute kernel of codegen/wgsl into an MSL
// kernel whose function is named entry. Like Tint and naga, it parses the
// WGSL (parse.go), types it (types.go) and prints the tree as MSL
// (emit.go). It accepts the subset of WGSL that codegen/wgsl writes, and
// returns an error naming the line of anything else:
//
//   - Module scope: `const NAME: T = expr;` (a `constant`), a
//     `var<private>` table with an array<T, N>(...) initializer (a
//     `constant` array; it is never written), `var<workgroup> name:
//     array<T, N>;` (a `threadgroup` array, declared at the top of the
//     kernel), `@group(0) @binding(i) var<storage, read|read_write> name:
//     array<T>;` (the kernel's `device [const] T*` argument `[[buffer(i)]]`),
//     helper functions (`static inline`, put before their callers) and one
//     `@compute @workgroup_size(x, y, z)` entry point whose parameters are
//     @builtin(workgroup_id | local_invocation_id | local_invocation_index
//     | global_invocation_id | num_workgroups).
//   - Statements: let, var (zero-initialised when it has no initializer,
//     as WGSL's are), assignment and compound assignment, ++ and --, if /
//     else if / else, for, blocks, return, break, continue,
//     workgroupBarrier(), line comments.
//   - Types: bool, i32, u32, f32, vec2/3/4 of i32, u32 or f32, arrays.
//   - Expressions: literals with suffix (i, u, f) or abstract integers
//     (which take their context's type and are evaluated), unary - and !,
//   - - * / (% on integers), comparisons, && ||, << >>, conversions
//     i32(), u32(), f32(), vector constructors, bitcast<f32|i32>(u32),
//     indexing, vector components .x .y .z .w, and the builtins abs, max,
//     min, clamp, select, exp, exp2, log, log2, sqrt, inverseSqrt, floor,
//     ceil, trunc, round, fract, sign, sin, cos, tanh, fma, dot.
//
// The MSL computes what WGSL defines where C++ leaves it undefined: i32 +,
// -, *, negation, ++, -- and += & co. wrap around (they are computed in
// uint); integer division by zero gives the dividend and remainder by zero
// 0, and i32 MIN / -1 wraps (helpers div_i32, rem_i32, div_u32, rem_u32,
// unless the divisor is a constant that needs none); abs of the most
// negative i32 is itself; shifts take the amount modulo 32. Where WGSL
// leaves a float result to the implementation, the MSL gives the CPU
// reference's (runtime/cpu): f32 max and min propagate NaN and order -0
// below +0 (helpers max_f32, min_f32; Metal's fmax would drop the NaN),
// so relu and maximum keep NaNs. round is round-half-to-even (Metal's
// rint), x != x is isnan(x) and integer x == x is true; fract is Metal's
// (below 1, where WGSL's may round up to 1). WGSL's zero-initialised
// workgroup memory is not reproduced: the kernels write it before they
// read it.
//
// Locals never read are left out, and so are assignments to them (MSL's
// -Wall rejects them; WGSL does not); names that MSL reserves get a
// trailing underscore. It returns the source (from `using namespace
// metal;` on; the caller adds the header), the workgroup size of the
// entry point and the bytes of threadgroup memory the kernel declares.
func translate(src, entry string) (out string, wgSize [3]int, shared int, err error) {
	defer func() {
		if r := recover(); r != nil {
			f, ok := r.(failure)
			if !ok {
				panic(r)
			}
			err = f.err
		}
	}()
	m := parse(src)
	check(m)
	var main *fn
	var storage, groups []*decl
	for _, it := range m.items {
		switch {
		case it.fn != nil && it.fn.entry:
			if main != nil {
				failf(it.fn.line, "a second entry point")
			}
			main = it.fn
		case it.decl != nil && it.decl.kind == declStorage:
			storage = append(storage, it.decl)
		case it.decl != nil && it.decl.kind == declWorkgroup:
			groups = append(groups, it.decl)
			shared += it.decl.typ.size()
		}
	}
	if main == nil {
		failf(1, "no @compute entry point")
	}
	if len(main.wgSize) == 0 || len(main.wgSize) > 3 {
		failf(main.line, "the entry point needs @workgroup_size(x, y, z)")
	}
	wgSize = [3]int{1, 1, 1}
	copy(wgSize[:], main.wgSize)
	sort.SliceStable(storage, func(i, j int) bool { return storage[i].binding < storage[j].binding })
	for i, d := range storage {
		if d.binding != i {
			failf(d.line, "bindings are not 0, 1, ... in order (%s is @binding(%d))", d.name, d.binding)
		}
	}
	for _, p := range main.params {
		if want, ok := builtinAttrs[p.builtin]; !ok || !p.typ.eq(want.typ) {
			failf(p.line, "@builtin(%s) %s is outside the subset", p.builtin, p.typ)
		}
	}
	rename(m, main, entry)

	w := &emitter{helpers: map[string]bool{}}
	// The kernel first: it decides which helpers are used.
	var k strings.Builder
	fmt.Fprintf(&k, "kernel void %s(\n", main.out)
	var params []string
	for _, d := range storage {
		cst := "const "
		if d.access == "read_write" {
			cst = ""
		}
		params = append(params, fmt.Sprintf("device %s%s* %s [[buffer(%d)]]", cst, mslType(d.typ.elem), d.out, d.binding))
	}
	for _, p := range main.params {
		params = append(params, fmt.Sprintf("%s %s [[%s]]", mslType(p.typ), p.out, builtinAttrs[p.builtin].attr))
	}
	k.WriteString("    " + strings.Join(params, ",\n    ") + ") {\n")
	w.indent = 1
	for _, d := range groups {
		w.line(&k, "threadgroup "+declarator(d.typ, d.out)+";", d.comment)
	}
	w.stmts(&k, main.body)
	k.WriteString("}\n")

	// Then the helper functions it calls, callees first.
	var fk strings.Builder
	done := map[*fn]bool{}
	var emitFn func(f *fn)
	emitFn = func(f *fn) {
		if done[f] {
			return
		}
		done[f] = true
		var ps []string
		for _, p := range f.params {
			ps = append(ps, mslType(p.typ)+" "+p.out)
		}
		ret := "void"
		if f.ret != nil {
			ret = mslType(f.ret)
		}
		var body strings.Builder
		fmt.Fprintf(&body, "static inline %s %s(%s) {\n", ret, f.out, strings.Join(ps, ", "))
		w.indent, w.calls = 1, nil
		w.stmts(&body, f.body)
		body.WriteString("}\n")
		for _, g := range w.calls {
			emitFn(g)
		}
		fk.WriteString(body.String())
	}
	for _, f := range w.calls {
		emitFn(f)
	}

	// Then the constants, and above all the helpers that any of it used.
	var g strings.Builder
	w.indent = 0
	for _, it := range m.items {
		switch {
		case it.decl == nil && it.fn == nil:
			w.line(&g, "", it.comment)
		case it.decl != nil && (it.decl.kind == declConst || it.decl.kind == declPrivate):
			w.line(&g, "constant "+declarator(it.decl.typ, it.decl.out)+" = "+w.expr(it.decl.init)+";", it.decl.comment)
		}
	}
	var b strings.Builder
	b.WriteString("using namespace metal;\n")
	var names []string
	for h := range w.helpers {
		names = append(names, h)
	}
	sort.Strings(names)
	for _, h := range names {
		b.WriteString(mslHelpers[h] + "\n")
	}
	b.WriteString(g.String() + fk.String() + k.String())
	return b.String(), wgSize, shared, nil
}

var builtinAttrs = map[string]struct {
	attr string
	typ  *typ
}{
	"workgroup_id":           {"threadgroup_position_in_grid", vecOf(tU32, 3)},
	"local_invocation_id":    {"thread_position_in_threadgroup", vecOf(tU32, 3)},
	"local_invocation_index": {"thread_index_in_threadgroup", tU32},
	"global_invocation_id":   {"thread_position_in_grid", vecOf(tU32, 3)},
	"num_workgroups":         {"threadgroups_per_grid", vecOf(tU32, 3)},
}

// reserved are the names a WGSL declaration may not keep in MSL: C++ and
// Metal keywords, OpenCL's (the syntax check parses OpenCL C++), the Metal
// standard library's types, functions and macros that the kernels use or
// could meet, and the helpers of emit.go.
var reserved = map[string]bool{}

func init() {
	for _, w := range strings.Fields(`
		alignas alignof and and_eq asm auto bitand bitor bool break case catch char char16_t char32_t class
		compl const constexpr const_cast continue decltype default delete do double dynamic_cast else enum
		explicit export extern false float for friend goto if inline int long mutable namespace new noexcept
		not not_eq nullptr operator or or_eq private protected public register reinterpret_cast return short
		signed sizeof static static_assert static_cast struct switch template this thread_local throw true try
		typedef typeid typename union unsigned using virtual void volatile wchar_t while xor xor_eq
		device constant threadgroup thread kernel vertex fragment metal half uint uchar ushort ulong size_t ptrdiff_t
		global local read_only write_only read_write
		float2 float3 float4 int2 int3 int4 uint2 uint3 uint4 bool2 bool3 bool4 half2 half3 half4
		abs acos asin atan atan2 ceil clamp copysign cos cosh dot exp exp2 exp10 fabs fdim floor fma fmax fmin
		fmod fract isfinite isinf isnan log log2 log10 max min mix pow powr rint round rsqrt select sign signbit
		sin sinh sqrt step tan tanh trunc as_type mem_flags threadgroup_barrier simdgroup_barrier
		INFINITY NAN MAXFLOAT FLT_MAX M_PI_F INT_MAX INT_MIN UINT_MAX`) {
		reserved[w] = true
	}
	for h := range mslHelpers {
		reserved[h] = true
	}
}

// rename sets the MSL name of every declaration: its WGSL name, with
// underscores appended while that is reserved or another WGSL name; the
// entry point is named entry.
func rename(m *module, main *fn, entry string) {
	used := map[string]bool{entry: true}
	var decls []*decl
	var fns []*fn
	for _, it := range m.items {
		if it.decl != nil {
			decls = append(decls, it.decl)
		}
		if it.fn != nil {
			fns = append(fns, it.fn)
			decls = append(decls, it.fn.params...)
			walkStmts(it.fn.body, func(s *stmt) {
				if s.kind == stmtDecl {
					decls = append(decls, s.decl)
				}
			})
		}
	}
	for _, d := range decls {
		used[d.name] = true
	}
	for _, f := range fns {
		used[f.name] = true
	}
	name := func(n string) string {
		if !reserved[n] && n != entry {
			return n
		}
		out := n + "_"
		for reserved[out] || used[out] {
			out += "_"
		}
		used[out] = true
		return out
	}
	outs := map[string]string{} // one MSL name per WGSL name
	for _, d := range decls {
		if outs[d.name] == "" {
			outs[d.name] = name(d.name)
		}
		d.out = outs[d.name]
	}
	for _, f := range fns {
		if outs[f.name] == "" {
			outs[f.name] = name(f.name)
		}
		f.out = outs[f.name]
	}
	main.out = entry
}
