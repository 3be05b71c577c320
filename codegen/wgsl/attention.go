package wgsl

import (
	"fmt"
	"strings"

	"github.com/tapml/tapml/codegen"
)

// genAttention computes scaled dot-product attention with grouped heads,
// soft-capped scores and a sliding window when the attributes ask: one
// workgroup per (query row s, head h). A decode step has few such rows (32
// for a 32-head model), so the kernel is built for latency: every
// invocation issues its loads together and the workgroup meets at few
// barriers.
//
// Keys are visited in chunks of CH rows (so any cache length fits in a
// fixed amount of workgroup memory). For each chunk:
//
//   - scores: invocation li computes the scores of keys li, li+WG, ...,
//     each a whole dot product of vec4 loads (q's row is the same for all
//     invocations and comes from the cache), into sc;
//   - values: the invocations form NS key slots of LANES lanes; slot ks
//     takes keys ks, ks+NS, ... and keeps its own online softmax (running
//     max m, sum l and output row acc, rescaled by exp(m_old - m_new)), its
//     lane j owning vectors j, j+LANES, ... of the output row, so that a
//     slot's lanes read one value row together and every lane has several
//     keys' loads in flight (4 a step).
//
// Last, the slots' (m, l, acc) merge in a tree of log2(NS) levels through
// workgroup memory, one barrier a level, and slot 0 writes acc / l. A slot
// starts with m at the lowest finite f32, not -inf, so that a slot without
// keys merges as zeros rather than NaN.
// attnUnroll is the number of keys whose value rows a lane loads at once.
const attnUnroll = 8

func genAttention(g *gen) (*codegen.Kernel, error) {
	q, k := sizes(g.in[0]), sizes(g.in[1])
	s, h, dh := q[0], q[1], q[2]
	t, kh := k[0], k[1]
	grp := h / kh
	// Rows are read as vec4 when the head dim allows it.
	w, vt := 1, "f32"
	if dh%4 == 0 {
		w, vt = 4, "vec4<f32>"
	}
	g.bind("in0", codegen.Read, g.in[0], vt, 0, -1)
	g.bind("in1", codegen.Read, g.in[1], vt, 1, -1)
	g.bind("in2", codegen.Read, g.in[2], vt, 2, -1)
	g.bind("in3", codegen.Read, g.in[3], "i32", 3, -1)
	g.bind("out0", codegen.Write, g.out[0], vt, -1, 0)
	g.f16Helper()
	scale := g.attrs.Float("scale")
	if g.faultIs(FaultWrongConstant) {
		scale *= 1.1
	}
	causal := g.attrs.Bool("causal")
	// A decode step (S = 1) has one workgroup per head: make each large.
	// Prefill rows are many and see few keys on average.
	want := 256
	if s == 1 {
		want = 512
	}
	wg := g.threads(want)
	vecs := dh / w // vectors in a head row
	lanes := max(min(vecs, wg), 1)
	dpt := ceilDiv(vecs, lanes)
	ns := 1
	for ns*2 <= wg/lanes {
		ns *= 2
	}
	// Workgroup memory (in f32s): the merge's ns-1 rows and (m, l) pairs,
	// fewer slots while they would take more than half, then as many
	// scores as fit.
	mem := g.lim.MaxWorkgroupStorageSize / 4
	for ns > 1 && 2*(ns-1)*(vecs*w+2) > mem {
		ns /= 2
	}
	ch := min(max(t, 1), 2048, mem-(ns-1)*(vecs*w+2))
	if ch < 1 {
		return nil, fmt.Errorf("head dim %d leaves no workgroup memory for scores", dh)
	}
	rows := s * h
	grid, gid := g.fold(rows)
	if rows == 0 {
		grid = [3]int{0, 1, 1}
	}
	g.p("const S: u32 = %du;", s)
	g.p("const H: u32 = %du;", h)
	g.p("const KH: u32 = %du;", kh)
	g.p("const T: u32 = %du;", t)
	g.p("const GRP: u32 = %du;", grp)
	g.p("const CH: u32 = %du;", ch)
	g.p("const WG: u32 = %du;", wg)
	g.p("const G: u32 = %du; // %s per head row", vecs, vt)
	g.p("const LANES: u32 = %du;", lanes)
	g.p("const NS: u32 = %du;", ns)
	g.p("const SCALE: f32 = %s;", f32Lit(scale))
	g.p("var<workgroup> sc: array<f32, %d>;", ch)
	if ns > 1 {
		g.p("var<workgroup> racc: array<%s, %d>;", vt, (ns-1)*vecs)
		g.p("var<workgroup> rml: array<vec2<f32>, %d>;", ns-1)
	}
	ovv := g.ov // wraps an accumulation of type vt in the f16_overflow filter
	if w == 4 && g.fault == FaultF16Overflow {
		g.p("fn ov4(v: vec4<f32>) -> vec4<f32> { return vec4<f32>(ov(v.x), ov(v.y), ov(v.z), ov(v.w)); }")
		ovv = func(e string) string { g.faultIs(FaultF16Overflow); return "ov4(" + e + ")" }
	}
	g.entry([3]int{wg, 1, 1})
	g.rowSetup(rows, gid)
	g.p("  let s = row / H;")
	g.p("  let h = row %% H;")
	g.p("  let kvh = h / GRP;")
	g.p("  let p = u32(max(in3[0], 0i));")
	if causal {
		g.p("  let len = min(p + s + 1u, T);")
	} else {
		g.p("  let len = min(p + S, T);")
	}
	first := "0u" // the first key row: a sliding window keeps rows > p+s-window
	if win := g.attrs.Int("window"); win > 0 {
		first = fmt.Sprintf("select(0u, p + s + 1u - %du, p + s + 1u > %du)", win, win)
	}
	g.p("  let qb = row * G;")
	g.p("  let ks = li / LANES; // key slot")
	g.p("  let j = li %% LANES; // lane: vectors j, j+LANES, ... of the row")
	g.p("  var m = f32_bits(0xff7fffffu); // the lowest finite f32")
	g.p("  var l = 0.0f;")
	// Lane j's vectors of a row, acc0.. and the value registers v<u>_<i>,
	// are unrolled here: the compiler need not unroll loops over
	// arrays to keep them in registers.
	vec := func(i int) string { return plus("j", i*lanes) }
	inRow := func(i int) string { // a vector index kept inside the row for loads
		if i == dpt-1 && vecs%lanes != 0 {
			return fmt.Sprintf("min(%s, G - 1u)", vec(i))
		}
		return vec(i)
	}
	guard := func(i int, body string) string { // only lane vectors inside the row are stored
		if i == dpt-1 && vecs%lanes != 0 {
			return fmt.Sprintf("if (%s < G) { %s }", vec(i), body)
		}
		return body
	}
	for i := range dpt {
		g.p("  var acc%d = %s(0.0f);", i, vt)
	}
	// loadValues loads the value rows of this slot's keys t0, t0+NS, ...
	// (clamped into the chunk, so every load is in bounds).
	loadValues := func(indent, t0 string) {
		for u := range attnUnroll {
			g.p("%slet r%d = ((c0 + min(%s, cn - 1u)) * KH + kvh) * G;", indent, u, plus(t0, u*ns))
			for i := range dpt {
				g.p("%sv%d_%d = in2[r%d + %s];", indent, u, i, u, inRow(i))
			}
		}
	}
	krow := "c0 + t"
	if g.faultIs(FaultWrongIndex) {
		krow = "min(c0 + t + 1u, T - 1u)"
	}
	g.p("  for (var c0 = %s; c0 < len; c0 += CH) {", first)
	g.p("    let cn = min(CH, len - c0);")
	g.p("    // The slot's first value rows: loaded before the scores, which")
	g.p("    // they do not depend on, so that both loads are in flight at once.")
	for u := range attnUnroll {
		for i := range dpt {
			g.p("    var v%d_%d: %s;", u, i, vt)
		}
	}
	g.p("    {")
	loadValues("      ", "ks")
	g.p("    }")
	g.p("    for (var t = li; t < cn; t += WG) {")
	g.p("      let kb = ((%s) * KH + kvh) * G;", krow)
	score := "d"
	acc := g.accType()
	if acc == "f32" {
		prod := "in0[qb + e] * in1[kb + e]"
		if w == 4 {
			prod = "dot(in0[qb + e], in1[kb + e])"
		}
		g.p("      var d = 0.0f;")
		if vecs <= 32 {
			// Unrolled, so that the row's loads are issued together.
			for e := range vecs {
				g.p("      d = %s;", g.ov("d + "+strings.ReplaceAll(prod, "+ e]", "+ "+u(e)+"]")))
			}
		} else {
			g.p("      for (var e = 0u; e < G; e++) { d = %s; }", g.ov("d + "+prod))
		}
	} else {
		// Options.Accumulate: the dot product in f16, as a careless port
		// writes it; it overflows where a score passes 65504.
		prod := "f16(a) * f16(b)"
		if w == 4 {
			prod = "f16(a.x) * f16(b.x) + f16(a.y) * f16(b.y) + f16(a.z) * f16(b.z) + f16(a.w) * f16(b.w)"
		}
		g.p("      var d = %s(0.0f);", acc)
		g.p("      for (var e = 0u; e < G; e++) { let a = in0[qb + e]; let b = in1[kb + e]; d = d + %s; }", prod)
		score = "f32(d)"
	}
	if c := g.attrs.Float("softcap"); c > 0 {
		// Soft-capping as transformers computes it: cap·tanh(score/cap).
		g.useHelper("tanh_")
		g.p("      sc[t] = tanh_(%s * SCALE / %s) * %s;", score, f32Lit(c), f32Lit(c))
	} else {
		g.p("      sc[t] = %s * SCALE;", score)
	}
	g.p("    }")
	g.barrier(true)
	g.p("    if (ks < NS) {")
	g.p("      var cm = m;")
	g.p("      for (var t = ks; t < cn; t += NS) { cm = max(cm, sc[t]); }")
	g.p("      let alpha = exp(m - cm);")
	g.p("      m = cm;")
	for i := range dpt {
		g.p("      acc%d = acc%d * alpha;", i, i)
	}
	g.p("      var ps = %s(0);", acc)
	g.p("      for (var t = ks; t < cn; t += %du) {", attnUnroll*ns)
	ps := "ps"
	for u := range attnUnroll {
		tu := plus("t", u*ns)
		g.p("        let e%d = select(0.0f, exp(sc[min(%s, cn - 1u)] - m), %s < cn);", u, tu, tu)
		if acc == "f32" {
			ps += fmt.Sprintf(" + e%d", u)
		} else {
			ps += fmt.Sprintf(" + %s(e%d)", acc, u)
		}
	}
	g.p("        ps = %s;", ps)
	for i := range dpt {
		sum := fmt.Sprintf("acc%d", i)
		for u := range attnUnroll {
			sum += fmt.Sprintf(" + e%d * v%d_%d", u, u, i)
		}
		g.p("        acc%d = %s;", i, ovv(sum))
	}
	g.p("        if (t + %du < cn) {", attnUnroll*ns)
	loadValues("          ", plus("t", attnUnroll*ns))
	g.p("        }")
	g.p("      }")
	g.p("      l = l * alpha + f32(ps);")
	g.p("    }")
	if t > ch {
		g.p("    workgroupBarrier(); // the next chunk rewrites sc")
	}
	g.p("  }")
	if ns > 1 {
		// Level hs: slots [hs, 2hs) write rows hs-1.. of racc and rml,
		// slots [0, hs) merge them in; the levels' rows are disjoint, so
		// one barrier a level suffices.
		g.p("  for (var hs = NS / 2u; hs > 0u; hs = hs >> 1u) {")
		g.p("    if (ks >= hs && ks < 2u * hs) {")
		for i := range dpt {
			g.p("      %s", guard(i, fmt.Sprintf("racc[(ks - 1u) * G + %s] = acc%d;", vec(i), i)))
		}
		g.p("      if (j == 0u) { rml[ks - 1u] = vec2<f32>(m, l); }")
		g.p("    }")
		g.p("    workgroupBarrier();")
		g.p("    if (ks < hs) {")
		g.p("      let o = rml[ks + hs - 1u];")
		g.p("      let mm = max(m, o.x);")
		g.p("      let a = exp(m - mm);")
		g.p("      let b = exp(o.x - mm);")
		g.p("      m = mm;")
		g.p("      l = l * a + o.y * b;")
		for i := range dpt {
			g.p("      acc%d = acc%d * a + racc[(ks + hs - 1u) * G + %s] * b;", i, i, inRow(i))
		}
		g.p("    }")
		g.p("  }")
	}
	g.p("  if (valid && ks == 0u) {")
	for i := range dpt {
		g.p("    %s", guard(i, fmt.Sprintf("out0[qb + %s] = acc%d / l;", vec(i), i)))
	}
	g.p("  }")
	g.p("}")
	return g.kernel([3]int{wg, 1, 1}, grid), nil
}

// plus is the WGSL sum of a u32 expression and a constant.
func plus(e string, n int) string {
	if n == 0 {
		return e
	}
	return fmt.Sprintf("%s + %du", e, n)
}
