package msl

import (
	"fmt"
	"sort"
	"strings"

	"github.com/tapml/tapml/codegen/wgsl"
	"github.com/tapml/tapml/codegen/wgslfront"
)

// translate turns a WGSL compute kernel of codegen/wgsl (its entry point
// wgsl.Entry) into an MSL kernel whose function is named Entry. Like Tint
// and naga, it parses and types the WGSL (codegen/wgslfront, which says
// what the dialect is and names the line and column of anything else) and
// prints the tree as MSL (emit.go).
//
// The MSL computes what WGSL defines where C++ leaves it undefined: i32 +,
// -, *, negation, ++, -- and += & co. wrap around (they are computed in
// uint); integer division by zero gives the dividend and remainder by zero
// 0, and i32 MIN / -1 wraps (helpers div_i32, rem_i32, div_u32, rem_u32,
// unless the divisor is a constant that needs none); abs of the most
// negative i32 is itself; shifts take the amount modulo 32. Where WGSL
// leaves a float result to the implementation, the MSL gives the CPU
// reference's (runtime/cpu): f32 and f16 max and min propagate NaN and
// order -0 below +0 (helpers max_f32, min_f32, max_f16, min_f16; Metal's
// fmax would drop the NaN), so relu and maximum keep NaNs. round is
// round-half-to-even (Metal's rint), x != x is isnan(x) and integer x == x
// is true; fract is Metal's (below 1, where WGSL's may round up to 1).
// WGSL's zero-initialised workgroup memory is not reproduced: the kernels
// write it before they read it. f16 is Metal's half; the subgroup
// operations are Metal's SIMD-group functions (simd_sum, simd_max,
// simd_shuffle_xor, ...), subgroup_size and subgroup_invocation_id its
// threads_per_simdgroup and thread_index_in_simdgroup.
//
// Locals never read are left out, and so are assignments to them (MSL's
// -Wall rejects them; WGSL does not); names that MSL reserves get a
// trailing underscore. It returns the source (from `using namespace
// metal;` on; the caller adds the header) and the checked module.
func translate(src string) (out string, m *wgslfront.Module, err error) {
	m, err = wgslfront.Parse(src, wgsl.Entry)
	if err != nil {
		return "", nil, err
	}
	if m.SubgroupMatrix {
		// Metal's simdgroup_matrix would take them; no device runs them yet.
		return "", nil, fmt.Errorf("the kernel enables %s: subgroup matrices are not translated to MSL", wgslfront.SubgroupMatrixExt)
	}
	defer func() {
		if r := recover(); r != nil { // a bug; an error, so that no kernel takes the process down
			out, m, err = "", nil, fmt.Errorf("internal error: %v", r)
		}
	}()
	w := &emitter{helpers: map[string]bool{}, names: map[any]string{}}
	w.rename(m)
	main := m.Entry
	// The kernel first: it decides which helpers are used.
	var k strings.Builder
	fmt.Fprintf(&k, "kernel void %s(\n", Entry)
	var params []string
	for _, d := range m.Buffers {
		cst := "const "
		if d.Access == "read_write" {
			cst = ""
		}
		params = append(params, fmt.Sprintf("device %s%s* %s [[buffer(%d)]]", cst, mslType(d.Type.Elem), w.names[d], d.Binding))
	}
	for _, p := range main.Params {
		params = append(params, fmt.Sprintf("%s %s [[%s]]", mslType(p.Type), w.names[p], builtinAttrs[p.Builtin]))
	}
	k.WriteString("    " + strings.Join(params, ",\n    ") + ") {\n")
	w.indent = 1
	for _, d := range m.Workgroup {
		w.line(&k, "threadgroup "+declarator(d.Type, w.names[d])+";", d.Comment)
	}
	w.stmts(&k, main.Body)
	k.WriteString("}\n")

	// Then the helper functions it calls, callees first.
	var fk strings.Builder
	done := map[*wgslfront.Fn]bool{}
	var emitFn func(f *wgslfront.Fn)
	emitFn = func(f *wgslfront.Fn) {
		if done[f] {
			return
		}
		done[f] = true
		var ps []string
		for _, p := range f.Params {
			ps = append(ps, mslType(p.Type)+" "+w.names[p])
		}
		var body strings.Builder
		fmt.Fprintf(&body, "static inline %s %s(%s) {\n", mslType(f.Result), w.names[f], strings.Join(ps, ", "))
		w.indent, w.calls = 1, nil
		w.stmts(&body, f.Body)
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
	for _, it := range m.Items {
		switch {
		case it.Decl == nil && it.Fn == nil:
			w.line(&g, "", it.Comment)
		case it.Decl != nil && (it.Decl.Kind == wgslfront.DeclConst || it.Decl.Kind == wgslfront.DeclPrivate):
			w.line(&g, "constant "+declarator(it.Decl.Type, w.names[it.Decl])+" = "+w.expr(it.Decl.Init)+";", it.Decl.Comment)
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
	return b.String(), m, nil
}

// builtinAttrs are the MSL attributes of the entry point's builtins.
var builtinAttrs = map[string]string{
	"workgroup_id":           "threadgroup_position_in_grid",
	"local_invocation_id":    "thread_position_in_threadgroup",
	"local_invocation_index": "thread_index_in_threadgroup",
	"global_invocation_id":   "thread_position_in_grid",
	"num_workgroups":         "threadgroups_per_grid",
	"subgroup_size":          "threads_per_simdgroup",
	"subgroup_invocation_id": "thread_index_in_simdgroup",
}

// reserved are the names a WGSL declaration may not keep in MSL: C++ and
// Metal keywords, OpenCL's (the syntax check parses OpenCL C++), the Metal
// standard library's types, functions and macros that the kernels use or
// could meet, and the helpers of emit.go.
var reserved = map[string]bool{Entry: true}

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
		simd_sum simd_max simd_min simd_broadcast simd_broadcast_first simd_shuffle simd_shuffle_xor
		simd_shuffle_up simd_shuffle_down
		INFINITY NAN MAXFLOAT FLT_MAX M_PI_F INT_MAX INT_MIN UINT_MAX`) {
		reserved[w] = true
	}
	for h := range mslHelpers {
		reserved[h] = true
	}
}

// rename gives every declaration and function its MSL name: its WGSL
// name, with underscores appended while that is reserved or another WGSL
// name.
func (w *emitter) rename(m *wgslfront.Module) {
	used := map[string]bool{}
	var decls []*wgslfront.Decl
	var fns []*wgslfront.Fn
	for _, it := range m.Items {
		if it.Decl != nil {
			decls = append(decls, it.Decl)
		}
		if it.Fn != nil {
			fns = append(fns, it.Fn)
			decls = append(decls, it.Fn.Params...)
			wgslfront.Walk(it.Fn.Body, func(s *wgslfront.Stmt) {
				if s.Kind == wgslfront.StmtDecl {
					decls = append(decls, s.Decl)
				}
			})
		}
	}
	for _, d := range decls {
		used[d.Name] = true
	}
	for _, f := range fns {
		used[f.Name] = true
	}
	outs := map[string]string{} // one MSL name per WGSL name
	name := func(n string) string {
		if outs[n] != "" {
			return outs[n]
		}
		out := n
		if reserved[n] {
			out = n + "_"
			for reserved[out] || used[out] {
				out += "_"
			}
			used[out] = true
		}
		outs[n] = out
		return out
	}
	for _, d := range decls {
		w.names[d] = name(d.Name)
	}
	for _, f := range fns {
		w.names[f] = name(f.Name)
	}
}
