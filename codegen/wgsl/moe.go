package wgsl

import (
	"fmt"

	"github.com/tapml/tapml/codegen"
	"github.com/tapml/tapml/ir"
)

// genTopK keeps the k largest elements of each row along axis, one
// invocation per row: pass j scans the row for the best element that ranks
// below pass j-1's pick (rank: NaN above numbers, then value, then the
// lower index), so it needs no memory beyond the previous pick and costs
// N·k reads, which suits a router's few experts.
func genTopK(g *gen) (*codegen.Kernel, error) {
	g.bindAll()
	shape := sizes(g.in[0])
	axis := ir.NormAxis(g.attrs.Int("axis"), len(shape))
	outer, n, inner := outerInner(shape, axis)
	k := int(g.attrs.Int("k"))
	g.p("const N: u32 = %du;", n)
	g.p("const K: u32 = %du;", k)
	g.p("const INNER: u32 = %du;", inner)
	// above(a, b): a ranks above b by value (equal values rank by index).
	// NaN is told by x != x, as argmax does.
	g.p("fn above(a: f32, b: f32) -> bool { return (a != a && b == b) || a > b; }")
	g.p("fn same(a: f32, b: f32) -> bool { return (a != a && b != b) || a == b; }")
	start := "0u"
	if g.faultIs(FaultWrongIndex) {
		start = "1u"
	}
	return g.elementwise(outer*inner, func() {
		g.p("  let base = (i / INNER) * N * INNER + i %% INNER;")
		g.p("  let obase = (i / INNER) * K * INNER + i %% INNER;")
		g.p("  var pv = 0.0f;")
		g.p("  var pi = -1i;")
		g.p("  for (var j = 0u; j < K; j++) {")
		g.p("    var bv = 0.0f;")
		g.p("    var bi = -1i;")
		g.p("    for (var t = %s; t < N; t++) {", start)
		g.p("      let v = in0[base + t * INNER];")
		g.p("      let below = pi < 0i || above(pv, v) || (same(v, pv) && i32(t) > pi);")
		g.p("      if (below && (bi < 0i || above(v, bv))) { bv = v; bi = i32(t); }")
		g.p("    }")
		g.p("    out0[obase + j * INNER] = bv;")
		g.p("    out1[obase + j * INNER] = bi;")
		g.p("    pv = bv;")
		g.p("    pi = bi;")
		g.p("  }")
	}), nil
}

// genExpertMatmul computes out[p, o] = w[ids[p]][o] · x[row(p)] for each
// routed pair p = s·k + j, as the transposed GEMV does: L lanes share one
// output, striding over K (in vec4 units when K allows), and a tree in
// workgroup memory adds their partial sums; a workgroup holds several
// outputs of one pair. Decode (one token) reads exactly its k experts'
// weights. An id out of range gives NaN (the GPU cannot raise the error).
func genExpertMatmul(g *gen) (*codegen.Kernel, error) {
	if g.in[0].DType != ir.F32 || g.in[1].DType != ir.F32 {
		return nil, fmt.Errorf("expert_matmul needs f32 inputs, got %s and %s", g.in[0], g.in[1])
	}
	w, ids := sizes(g.in[1]), sizes(g.in[2])
	e, n, kk := w[0], w[1], w[2]
	pairs, perToken := ids[0]*ids[1], ids[1]
	if len(sizes(g.in[0])) == 3 {
		perToken = 1 // x has a row per pair
	}
	vec := kk%4 == 0 && kk > 0
	units, elem := kk, "f32"
	if vec {
		units, elem = kk/4, "vec4<f32>"
	}
	l := 1
	for l*2 <= 32 && l*2*16 <= units {
		l *= 2
	}
	wg := g.threads(256)
	l = min(l, wg)
	r := wg / l
	blocks := ceilDiv(n, r)
	grid, gid := g.fold(pairs * blocks)
	if pairs*n == 0 {
		grid = [3]int{0, 1, 1}
	}
	g.bind("in0", codegen.Read, g.in[0], elem, 0, -1)
	g.bind("in1", codegen.Read, g.in[1], elem, 1, -1)
	g.bind("in2", codegen.Read, g.in[2], "i32", 2, -1)
	g.bind("out0", codegen.Write, g.out[0], "f32", -1, 0)
	g.f16Helper()
	g.p("const E: i32 = %di;", e)
	g.p("const N: u32 = %du;", n)
	g.p("const KU: u32 = %du; // K in units of %s", units, elem)
	g.p("const L: u32 = %du; // lanes per output", l)
	g.p("const P: u32 = %du; // routed pairs", pairs)
	g.p("var<workgroup> red: array<f32, %d>;", wg)
	g.entry([3]int{wg, 1, 1})
	g.p("  let grp = %s;", gid)
	g.p("  let p = min(grp / %du, P - 1u);", blocks)
	g.p("  let n_ = (grp %% %du) * %du + li / L;", blocks, r)
	g.p("  let valid = grp < P * %du && n_ < N;", blocks)
	g.p("  let o = min(n_, N - 1u);")
	g.p("  let lane = li %% L;")
	id := "in2[p]"
	if g.faultIs(FaultWrongIndex) {
		id = "(in2[p] + 1i) % E"
	}
	g.p("  let id = %s;", id)
	g.p("  let ok = id >= 0i && id < E;")
	g.p("  let xb = (p / %du) * KU;", perToken)
	g.p("  let wb = (u32(clamp(id, 0i, E - 1i)) * N + o) * KU;")
	g.p("  var acc = 0.0f;")
	term := "in0[xb + k] * in1[wb + k]"
	if vec {
		term = "dot(in0[xb + k], in1[wb + k])"
	}
	g.p("  for (var k = lane; k < KU; k += L) { acc = %s; }", g.ov("acc + "+term))
	g.p("  red[li] = acc;")
	g.barrier(true)
	g.p("  for (var s_ = L / 2u; s_ > 0u; s_ = s_ >> 1u) {")
	g.p("    if (lane < s_) { red[li] = red[li] + red[li + s_]; }")
	g.p("    workgroupBarrier();")
	g.p("  }")
	g.p("  if (valid && lane == 0u) { out0[p * N + o] = select(f32_bits(0x7fc00000u), red[li], ok); }")
	g.p("}")
	return g.kernel([3]int{wg, 1, 1}, grid), nil
}
