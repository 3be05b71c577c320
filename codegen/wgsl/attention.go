package wgsl

import (
	"fmt"
	"strings"

	"github.com/tapml/tapml/codegen"
)

// attnUnroll is the number of keys whose rows a lane loads at once.
const attnUnroll = 8

// genAttention computes scaled dot-product attention with grouped heads,
// soft-capped scores and a sliding window when the attributes ask: one
// workgroup per (query row s, head h). A decode step has few such rows (32
// for a 32-head model), so the kernel is built for latency: each
// invocation issues its loads together, reads of a key or value row are
// coalesced, and the workgroup meets at few barriers.
//
// The invocations form NS key slots of LANES lanes: slot ks takes keys ks,
// ks+NS, ..., and its lane j owns vectors j, j+LANES, ... of a head row
// (vec4 when the head dim allows), so that a slot's lanes read each of its
// key and value rows together. Keys are visited in chunks of CH rows, so
// that any cache length fits in a fixed amount of workgroup memory; for
// each chunk:
//
//   - the slot's first value rows are loaded (they do not depend on the
//     scores: their loads fly with the keys');
//   - partial scores: each lane's share of q·k for the slot's keys, 8 keys'
//     loads at a time, into part (a row per key);
//   - scores: invocation li sums the partials of keys li, li+WG, ..., and
//     stores the score, scaled and soft-capped, beside them;
//   - values: each slot keeps its own online softmax over its keys (running
//     max m, sum l and output row acc, rescaled by exp(m_old - m_new) at
//     each step of 8 keys), loading the next 8 keys' value rows as it goes.
//
// Last, the slots' (m, l, acc) merge in a tree of fan-in 4 through
// workgroup memory, one barrier a level, and slot 0 writes acc / l. A slot
// starts with m at the lowest finite f32, not -inf, so that a slot without
// keys merges as zeros rather than NaN.
func genAttention(g *gen) (*codegen.Kernel, error) {
	q, k := sizes(g.in[0]), sizes(g.in[1])
	s, h, dh := q[0], q[1], q[2]
	t, kh := k[0], k[1]
	grp := h / kh
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
	// A decode step (S = 1) has one workgroup per head: make each large.
	// Prefill rows are many and see few keys on average (a 128-token
	// prompt: 64; 8 slots of 16 lanes load that many at once), so small
	// workgroups let more of them run at a time.
	want := 128
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
	// with fewer slots while they would take more than half of it, then
	// for as many keys as fit a row of the lanes' partial scores and the
	// score, PL = LANES+1 f32s (for even LANES an odd stride: invocations
	// summing a row each then read distinct banks).
	mem := g.lim.MaxWorkgroupStorageSize / 4
	merge := func() int { return (ns - 1) * (vecs*w + 2) }
	for ns > 1 && 2*merge() > mem {
		ns /= 2
	}
	pl := lanes + 1
	ch := min(max(t, 1), 2048, (mem-merge())/pl)
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
	g.p("const PL: u32 = %du; // a key's row of part: LANES partial scores, then the score", pl)
	g.p("const NS: u32 = %du;", ns)
	g.p("const SCALE: f32 = %s;", f32Lit(scale))
	g.p("var<workgroup> part: array<f32, %d>;", ch*pl)
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
	if g.attrs.Bool("causal") {
		g.p("  let len = min(p + s + 1u, T);")
	} else {
		g.p("  let len = min(p + S, T);")
	}
	first := "0u" // the first key row: a sliding window keeps rows > p+s-window
	if win := g.attrs.Int("window"); win > 0 {
		first = fmt.Sprintf("select(0u, p + s + 1u - %du, p + s + 1u > %du)", win, win)
	}
	g.p("  let ks = li / LANES; // key slot")
	g.p("  let j = li %% LANES; // lane")

	// Lane j's vectors (q0.., k<u>_<i>, v<u>_<i>, acc0..) are unrolled
	// here, so that the compiler need not unroll loops over arrays to keep
	// them in registers. Only the last may fall outside the row: its loads
	// are clamped into the row and its products and stores skipped.
	vec := func(i int) string { return plus("j", i*lanes) }
	last := func(i int) bool { return i == dpt-1 && vecs%lanes != 0 }
	inRow := func(i int) string {
		if last(i) {
			return fmt.Sprintf("min(%s, G - 1u)", vec(i))
		}
		return vec(i)
	}
	guard := func(i int, body string) string {
		if last(i) {
			return fmt.Sprintf("if (%s < G) { %s }", vec(i), body)
		}
		return body
	}
	g.p("  let qb = row * G;")
	for i := range dpt {
		g.p("  let q%d = in0[qb + %s];", i, inRow(i))
	}
	acc := g.accType()
	g.p("  var m = f32_bits(0xff7fffffu); // the lowest finite f32")
	g.p("  var ls = %s(0); // the slot's softmax sum", acc)
	for i := range dpt {
		g.p("  var acc%d = %s(0.0f);", i, vt)
	}
	// load loads rows of the slot's keys t0, t0+NS, ... (clamped into the
	// chunk, so that every load is in bounds) from buf into the variables
	// (or, with decl, new constants) <name><u>_<i>.
	load := func(indent, buf, name, t0 string, row func(string) string, decl string) {
		for u := range attnUnroll {
			g.p("%slet r%d = (%s * KH + kvh) * G;", indent, u, row(fmt.Sprintf("c0 + min(%s, cn - 1u)", plus(t0, u*ns))))
			for i := range dpt {
				g.p("%s%s%s%d_%d = %s[r%d + %s];", indent, decl, name, u, i, buf, u, inRow(i))
			}
		}
	}
	vrow := func(r string) string { return "(" + r + ")" }
	krow := vrow
	if g.faultIs(FaultWrongIndex) {
		krow = func(r string) string { return "min(" + r + " + 1u, T - 1u)" }
	}
	g.p("  for (var c0 = %s; c0 < len; c0 += CH) {", first)
	g.p("    let cn = min(CH, len - c0);")
	for u := range attnUnroll {
		for i := range dpt {
			g.p("    var v%d_%d: %s;", u, i, vt)
		}
	}
	g.p("    {")
	load("      ", "in2", "v", "ks", vrow, "")
	g.p("    }")
	g.p("    if (ks < NS) {")
	g.p("      for (var t = ks; t < cn; t += %du) {", attnUnroll*ns)
	load("        ", "in1", "k", "t", krow, "let ")
	for u := range attnUnroll {
		var terms []string
		for i := range dpt {
			term := fmt.Sprintf("dot(q%d, k%d_%d)", i, u, i)
			if w == 1 {
				term = fmt.Sprintf("q%d * k%d_%d", i, u, i)
			}
			if acc != "f32" {
				// Options.Accumulate: the dot product in f16, as a careless
				// port writes it; it overflows where a score passes 65504.
				a, b := fmt.Sprintf("q%d", i), fmt.Sprintf("k%d_%d", u, i)
				if w == 1 {
					term = fmt.Sprintf("%s(%s) * %s(%s)", acc, a, acc, b)
				} else {
					var cs []string
					for _, c := range "xyzw" {
						cs = append(cs, fmt.Sprintf("%s(%s.%c) * %s(%s.%c)", acc, a, c, acc, b, c))
					}
					term = strings.Join(cs, " + ")
				}
			}
			if last(i) {
				term = fmt.Sprintf("select(%s(0), %s, %s < G)", acc, term, vec(i))
			}
			terms = append(terms, term)
		}
		tu := plus("t", u*ns)
		g.p("        if (%s < cn) { part[(%s) * PL + j] = %s; }", tu, tu, g.ov("f32("+strings.Join(terms, " + ")+")"))
	}
	g.p("      }")
	g.p("    }")
	g.barrier(true)
	g.p("    for (var t = li; t < cn; t += WG) {")
	g.p("      var d = %s(0);", acc)
	add := "part[t * PL + %s]"
	if acc != "f32" {
		add = acc + "(" + add + ")"
	}
	if lanes <= 32 {
		for x := range lanes {
			g.p("      d = %s;", g.ov("d + "+fmt.Sprintf(add, u(x))))
		}
	} else {
		g.p("      for (var x = 0u; x < LANES; x++) { d = %s; }", g.ov("d + "+fmt.Sprintf(add, "x")))
	}
	score := "d"
	if acc != "f32" {
		score = "f32(d)"
	}
	if c := g.attrs.Float("softcap"); c > 0 {
		// Soft-capping as transformers computes it: cap·tanh(score/cap).
		g.useHelper("tanh_")
		g.p("      part[t * PL + LANES] = tanh_(%s * SCALE / %s) * %s;", score, f32Lit(c), f32Lit(c))
	} else {
		g.p("      part[t * PL + LANES] = %s * SCALE;", score)
	}
	g.p("    }")
	g.p("    workgroupBarrier();")
	// Each step of 8 keys raises the slot's max by theirs (keys past the
	// chunk count as m), rescales, and adds the keys in.
	g.p("    if (ks < NS) {")
	g.p("      for (var t = ks; t < cn; t += %du) {", attnUnroll*ns)
	cm, ls := "m", "ls * alpha"
	if acc != "f32" {
		ls = "ls * " + acc + "(alpha)"
	}
	for u := range attnUnroll {
		tu := plus("t", u*ns)
		g.p("        let s%d = select(m, part[min(%s, cn - 1u) * PL + LANES], %s < cn);", u, tu, tu)
		cm = fmt.Sprintf("max(%s, s%d)", cm, u)
		if acc == "f32" {
			ls += fmt.Sprintf(" + e%d", u)
		} else {
			ls += fmt.Sprintf(" + %s(e%d)", acc, u)
		}
	}
	g.p("        let cm = %s;", cm)
	g.p("        let alpha = exp(m - cm);")
	g.p("        m = cm;")
	for u := range attnUnroll {
		tu := plus("t", u*ns)
		g.p("        let e%d = select(0.0f, exp(s%d - m), %s < cn);", u, u, tu)
	}
	g.p("        ls = %s;", ls)
	for i := range dpt {
		sum := fmt.Sprintf("acc%d * alpha", i)
		for u := range attnUnroll {
			sum += fmt.Sprintf(" + e%d * v%d_%d", u, u, i)
		}
		g.p("        acc%d = %s;", i, ovv(sum))
	}
	g.p("        if (%s < cn) {", plus("t", attnUnroll*ns))
	load("          ", "in2", "v", plus("t", attnUnroll*ns), vrow, "")
	g.p("        }")
	g.p("      }")
	g.p("    }")
	if t > ch {
		g.p("    if (c0 + CH < len) { workgroupBarrier(); } // the next chunk rewrites part")
	}
	g.p("  }")
	g.p("  var l = f32(ls);")
	// The merge: at each level the n slots left fold into n/f (f = 4, or
	// 2 for the last level of an odd power of two): slots [n/f, n) write
	// rows n/f-1.. of racc and rml, and slot ks < n/f merges in those of
	// slots ks + n/f, ks + 2n/f, ... The levels' rows are disjoint, so one
	// barrier a level suffices.
	for n := ns; n > 1; {
		f := 4
		if n%4 != 0 {
			f = 2
		}
		gs := n / f
		g.p("  if (ks >= %du && ks < %du) {", gs, n)
		for i := range dpt {
			g.p("    %s", guard(i, fmt.Sprintf("racc[(ks - 1u) * G + %s] = acc%d;", vec(i), i)))
		}
		g.p("    if (j == 0u) { rml[ks - 1u] = vec2<f32>(m, l); }")
		g.p("  }")
		g.p("  workgroupBarrier();")
		g.p("  if (ks < %du) {", gs)
		mm := "m"
		for x := 1; x < f; x++ {
			g.p("    let o%d = rml[%s];", x, plus("ks", x*gs-1))
			mm = fmt.Sprintf("max(%s, o%d.x)", mm, x)
		}
		g.p("    let mm = %s;", mm)
		g.p("    let a = exp(m - mm);")
		ls := "l * a"
		for x := 1; x < f; x++ {
			g.p("    let b%d = exp(o%d.x - mm);", x, x)
			ls += fmt.Sprintf(" + o%d.y * b%d", x, x)
		}
		g.p("    m = mm;")
		g.p("    l = %s;", ls)
		for i := range dpt {
			sum := fmt.Sprintf("acc%d * a", i)
			for x := 1; x < f; x++ {
				sum += fmt.Sprintf(" + racc[(%s) * G + %s] * b%d", plus("ks", x*gs-1), inRow(i), x)
			}
			g.p("    acc%d = %s;", i, sum)
		}
		g.p("  }")
		n = gs
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
