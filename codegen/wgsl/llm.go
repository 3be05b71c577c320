package wgsl

import (
	"fmt"

	"github.com/tapml/tapml/codegen"
)

// genRope rotates pairs of x[S, H, Dh] by position. One invocation per pair
// slot: slots i < dims/2 rotate pair i by pos·freq[i] (the reference's f32
// frequencies, baked in, or those of the freqs input's row for the length
// the call reaches) and scale it by the attention factor; the remaining
// slots copy the elements beyond dims.
func genRope(g *gen) (*codegen.Kernel, error) {
	g.bindAll()
	g.f16Helper()
	x := sizes(g.in[0])
	s, h, dh := x[0], x[1], x[2]
	table, tableRows := "", 0
	if len(g.in) == 3 {
		table, tableRows = "in2", int(g.in[2].Shape[0].Size)
	}
	g.p("const H: u32 = %du;", h)
	rc := g.ropeHeader(s, dh, table, tableRows)
	return g.elementwise(s*h*(dh/2), func() {
		g.p("  let pi = i %% HALF;")
		g.p("  let sh = i / HALF;")
		g.p("  let base = sh * DH;")
		g.p("  let pos = f32(in1[0] + i32(sh / H));")
		g.rotate(rc, "in0", "out0", "", "in1")
	}), nil
}

// genKVWrite writes new[S, KH, Dh] into rows pos.. of cache[T, KH, Dh] in
// place: the cache is one read_write binding carrying input 0 and output 0.
// When pos < 0 or pos+S > T (a run-time error of the op) nothing is written.
func genKVWrite(g *gen) (*codegen.Kernel, error) {
	cache, nw := sizes(g.in[0]), sizes(g.in[1])
	t, row := cache[0], cache[1]*cache[2]
	s := nw[0]
	g.bind("cache", codegen.ReadWrite, g.in[0], wgslType(g.in[0].DType), 0, 0)
	g.bind("in1", codegen.Read, g.in[1], wgslType(g.in[1].DType), 1, -1)
	g.bind("in2", codegen.Read, g.in[2], "i32", 2, -1)
	g.p("const T: u32 = %du;", t)
	g.p("const S: u32 = %du;", s)
	g.p("const ROW: u32 = %du;", row)
	p := "in2[0]"
	if g.faultIs(FaultWrongIndex) {
		p = "(in2[0] + 1i)"
	}
	return g.elementwise(s*row, func() {
		g.p("  let p = %s;", p)
		g.p("  if (p < 0i || u32(p) + S > T) { return; }")
		g.p("  cache[u32(p) * ROW + i] = in1[i];")
	}), nil
}

// genAttention computes scaled dot-product attention with grouped heads,
// one workgroup per (query row s, head h), soft-capped scores and a sliding
// window when the attributes ask. Keys are visited in chunks of
// CH rows: the chunk's scores go to workgroup memory, and an online softmax
// (running max m and sum l, rescaled by exp(m_old - m_new)) accumulates
// the output, so any cache length fits in a fixed amount of memory.
// Invocation li owns output dims li, li+WG, ...
func genAttention(g *gen) (*codegen.Kernel, error) {
	g.bindAll()
	g.f16Helper()
	q, k := sizes(g.in[0]), sizes(g.in[1])
	s, h, dh := q[0], q[1], q[2]
	t, kh := k[0], k[1]
	grp := h / kh
	scale := g.attrs.Float("scale")
	if g.faultIs(FaultWrongConstant) {
		scale *= 1.1
	}
	causal := g.attrs.Bool("causal")
	wg := g.threads(128)
	dpt := ceilDiv(dh, wg)
	budget := g.lim.MaxWorkgroupStorageSize/4 - dh - wg
	ch := min(max(t, 1), 2048, budget)
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
	g.p("const DH: u32 = %du;", dh)
	g.p("const T: u32 = %du;", t)
	g.p("const GRP: u32 = %du;", grp)
	g.p("const CH: u32 = %du;", ch)
	g.p("const WG: u32 = %du;", wg)
	g.p("const DPT: u32 = %du;", dpt)
	g.p("const SCALE: f32 = %s;", f32Lit(scale))
	g.p("var<workgroup> qs: array<f32, %d>;", dh)
	g.p("var<workgroup> sc: array<f32, %d>;", ch)
	g.p("var<workgroup> red: array<f32, %d>;", wg)
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
	if w := g.attrs.Int("window"); w > 0 {
		first = fmt.Sprintf("select(0u, p + s + 1u - %du, p + s + 1u > %du)", w, w)
	}
	g.p("  let qb = row * DH;")
	g.p("  for (var d = li; d < DH; d += WG) { qs[d] = in0[qb + d]; }")
	g.p("  workgroupBarrier();")
	g.p("  var m = f32_bits(0xff800000u);")
	g.p("  var l = 0.0f;")
	g.p("  var acc: array<f32, %d>;", dpt)
	krow := "c0 + t"
	if g.faultIs(FaultWrongIndex) {
		krow = "min(c0 + t + 1u, T - 1u)"
	}
	g.p("  for (var c0 = %s; c0 < len; c0 += CH) {", first)
	g.p("    let cn = min(CH, len - c0);")
	g.p("    for (var t = li; t < cn; t += WG) {")
	g.p("      let kb = ((%s) * KH + kvh) * DH;", krow)
	score := "dot"
	if acc := g.accType(); acc == "f32" {
		g.p("      var dot = 0.0f;")
		g.p("      for (var d = 0u; d < DH; d++) { dot = %s; }", g.ov("dot + qs[d] * in1[kb + d]"))
	} else {
		// Options.Accumulate: the dot product in f16, as a careless port
		// writes it; it overflows where a score passes 65504.
		g.p("      var dot = %s(0.0f);", acc)
		g.p("      for (var d = 0u; d < DH; d++) { dot = dot + %s(qs[d]) * %s(in1[kb + d]); }", acc, acc)
		score = "f32(dot)"
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
	g.p("    var mx = f32_bits(0xff800000u);")
	g.p("    for (var t = li; t < cn; t += WG) { mx = max(mx, sc[t]); }")
	g.p("    red[li] = mx;")
	g.p("    workgroupBarrier();")
	g.p("    for (var s_ = WG / 2u; s_ > 0u; s_ = s_ >> 1u) {")
	g.p("      if (li < s_) { red[li] = max(red[li], red[li + s_]); }")
	g.p("      workgroupBarrier();")
	g.p("    }")
	g.p("    let mnew = max(m, red[0]);")
	g.p("    workgroupBarrier();")
	if acc := g.accType(); acc == "f32" {
		g.p("    var ps = 0.0f;")
		g.p("    for (var t = li; t < cn; t += WG) { let e = exp(sc[t] - mnew); sc[t] = e; ps = ps + e; }")
		g.p("    red[li] = ps;")
	} else {
		g.p("    var ps = %s(0.0f);", acc)
		g.p("    for (var t = li; t < cn; t += WG) { let e = exp(sc[t] - mnew); sc[t] = e; ps = ps + %s(e); }", acc)
		g.p("    red[li] = f32(ps);")
	}
	g.p("    workgroupBarrier();")
	g.p("    for (var s_ = WG / 2u; s_ > 0u; s_ = s_ >> 1u) {")
	g.p("      if (li < s_) { red[li] = red[li] + red[li + s_]; }")
	g.p("      workgroupBarrier();")
	g.p("    }")
	g.p("    let alpha = exp(m - mnew);")
	g.p("    l = l * alpha + red[0];")
	g.p("    for (var j = 0u; j < DPT; j++) {")
	g.p("      let d = li + j * WG;")
	g.p("      if (d < DH) {")
	g.p("        var o = acc[j] * alpha;")
	g.p("        for (var t = 0u; t < cn; t++) { o = %s; }", g.ov("o + sc[t] * in2[((c0 + t) * KH + kvh) * DH + d]"))
	g.p("        acc[j] = o;")
	g.p("      }")
	g.p("    }")
	g.p("    m = mnew;")
	g.p("    workgroupBarrier();")
	g.p("  }")
	g.p("  if (valid) {")
	g.p("    for (var j = 0u; j < DPT; j++) {")
	g.p("      let d = li + j * WG;")
	g.p("      if (d < DH) { out0[qb + d] = acc[j] / l; }")
	g.p("    }")
	g.p("  }")
	g.p("}")
	return g.kernel([3]int{wg, 1, 1}, grid), nil
}
