package msl

import (
	"fmt"
	"math"
	"strings"

	"github.com/tapml/tapml/codegen"
)

// genRope rotates pairs of x[S, H, Dh] by position. One thread per pair
// slot: slots i < dims/2 rotate pair i by pos·freq[i], where freq[i] is
// the CPU reference's own f32 value 1/theta^(2i/dims); the remaining slots
// copy the elements beyond dims. The angle is reduced to [-π, π] (Cody-Waite,
// as codegen/wgsl does) before cos and sin, so the kernel stays accurate
// even when it is compiled with fast math.
func genRope(g *gen) (*codegen.Kernel, error) {
	g.bindAll()
	g.f16Helper()
	x := sizes(g.in[0])
	s, h, dh := x[0], x[1], x[2]
	dims := int(g.attrs.Int("dims"))
	if dims == 0 {
		dims = dh
	}
	theta := g.attrs.Float("theta")
	if g.faultIs(FaultWrongConstant) {
		theta *= 1.1
	}
	pairs := dims / 2
	freqs := make([]string, pairs)
	for i := range freqs {
		e := float32(2*i) / float32(dims)
		freqs[i] = f32Lit(float64(1 / float32(math.Pow(float64(float32(theta)), float64(e)))))
	}
	// 2π = C1 + C2 + C3 with C1 (8 bits) and C2 (9 bits) short enough that
	// k·C1 and k·C2 are exact for |k| < 2^15.
	const c1 = 6.28125
	d := 2*math.Pi - c1
	c2 := math.Float32frombits(math.Float32bits(float32(d)) &^ 0x7fff)
	c3 := float32(d - float64(c2))
	half := dh / 2
	g.p("constant uint H = %du;", h)
	g.p("constant uint DH = %du;", dh)
	g.p("constant uint HALF = %du;", half)
	g.p("constant uint PAIRS = %du;", pairs)
	g.p("constant uint DIMS = %du;", dims)
	g.p("constant float freq[%d] = {%s};", pairs, strings.Join(freqs, ", "))
	g.p("static inline float reduce_angle(float a) {")
	g.p("  const float k = rint(a * 0.15915494309189535f);")
	g.p("  return ((a - k * %s) - k * %s) - k * %s;", f32Lit(c1), f32Lit(float64(c2)), f32Lit(float64(c3)))
	g.p("}")
	fi := "pi"
	if g.faultIs(FaultWrongIndex) {
		fi = "min(pi + 1u, PAIRS - 1u)"
	}
	var pa, pb string
	if g.attrs.String("style") == "half" {
		pa, pb = "base + pi", "base + pi + PAIRS"
	} else {
		pa, pb = "base + 2u * pi", "base + 2u * pi + 1u"
	}
	return g.elementwise(s*h*half, func() {
		g.p("  const uint pi = i %% HALF;")
		g.p("  const uint sh = i / HALF;")
		g.p("  const uint base = sh * DH;")
		g.p("  const float pos = float(in1[0] + int(sh / H));")
		g.p("  if (pi < PAIRS) {")
		g.p("    const float ang = reduce_angle(pos * freq[%s]);", fi)
		g.p("    const float c = cos(ang);")
		g.p("    const float sn = sin(ang);")
		g.p("    const uint a = %s;", pa)
		g.p("    const uint b = %s;", pb)
		g.p("    const float x0 = in0[a];")
		g.p("    const float x1 = in0[b];")
		g.p("    out0[a] = %s;", g.ov("x0 * c - x1 * sn"))
		g.p("    out0[b] = %s;", g.ov("x0 * sn + x1 * c"))
		g.p("  } else {")
		g.p("    const uint e = base + DIMS + 2u * (pi - PAIRS);")
		g.p("    out0[e] = in0[e];")
		g.p("    out0[e + 1u] = in0[e + 1u];")
		g.p("  }")
	}), nil
}

// genKVWrite writes new[S, KH, Dh] into rows pos.. of cache[T, KH, Dh] in
// place: the cache is one read-write buffer carrying input 0 and output 0.
// When pos < 0 or pos+S > T (a run-time error of the op) nothing is written.
func genKVWrite(g *gen) (*codegen.Kernel, error) {
	cache, nw := sizes(g.in[0]), sizes(g.in[1])
	t, row := cache[0], cache[1]*cache[2]
	s := nw[0]
	g.bind("cache", codegen.ReadWrite, g.in[0], mslType(g.in[0].DType), 0, 0)
	g.bind("in1", codegen.Read, g.in[1], mslType(g.in[1].DType), 1, -1)
	g.bind("in2", codegen.Read, g.in[2], "int", 2, -1)
	g.p("constant uint T = %du;", t)
	g.p("constant uint S = %du;", s)
	g.p("constant uint ROW = %du;", row)
	p := "in2[0]"
	if g.faultIs(FaultWrongIndex) {
		p = "(in2[0] + 1)"
	}
	return g.elementwise(s*row, func() {
		g.p("  const int p = %s;", p)
		g.p("  if (p < 0 || uint(p) + S > T) { return; }")
		g.p("  cache[uint(p) * ROW + i] = in1[i];")
	}), nil
}

// genAttention computes scaled dot-product attention with grouped heads,
// one threadgroup per (query row s, head h). Keys are visited in chunks of
// CH rows: the chunk's scores go to threadgroup memory, and an online
// softmax (running max m and sum l, rescaled by exp(m_old - m_new))
// accumulates the output, so any cache length fits in a fixed amount of
// memory. Thread li owns output dims li, li+WG, ...
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
	budget := g.lim.MaxThreadgroupMemory/4 - dh - wg
	ch := min(max(t, 1), 2048, budget)
	if ch < 1 {
		return nil, fmt.Errorf("head dim %d leaves no threadgroup memory for scores", dh)
	}
	rows := s * h
	grid, gid := g.fold(rows)
	if rows == 0 {
		grid = [3]int{0, 1, 1}
	}
	g.p("constant uint S = %du;", s)
	g.p("constant uint H = %du;", h)
	g.p("constant uint KH = %du;", kh)
	g.p("constant uint DH = %du;", dh)
	g.p("constant uint T = %du;", t)
	g.p("constant uint GRP = %du;", grp)
	g.p("constant uint CH = %du;", ch)
	g.p("constant uint WG = %du;", wg)
	g.p("constant uint DPT = %du;", dpt)
	g.p("constant float SCALE = %s;", f32Lit(scale))
	g.share("float", "qs", dh)
	g.share("float", "sc", ch)
	g.share("float", "red", wg)
	g.entry()
	g.rowSetup(rows, gid)
	if causal {
		g.p("  const uint s = row / H;")
	}
	g.p("  const uint h = row %% H;")
	g.p("  const uint kvh = h / GRP;")
	g.p("  const uint p = uint(max(in3[0], 0));")
	if causal {
		g.p("  const uint len = min(p + s + 1u, T);")
	} else {
		g.p("  const uint len = min(p + S, T);")
	}
	g.p("  const uint qb = row * DH;")
	g.p("  for (uint d = li; d < DH; d += WG) { qs[d] = in0[qb + d]; }")
	g.p("  threadgroup_barrier(mem_flags::mem_threadgroup);")
	g.p("  float m = -INFINITY;")
	g.p("  float l = 0.0f;")
	g.p("  float acc[%d];", dpt)
	g.p("  for (uint j = 0u; j < DPT; j++) { acc[j] = 0.0f; }")
	krow := "c0 + t"
	if g.faultIs(FaultWrongIndex) {
		krow = "min(c0 + t + 1u, T - 1u)"
	}
	g.p("  for (uint c0 = 0u; c0 < len; c0 += CH) {")
	g.p("    const uint cn = min(CH, len - c0);")
	g.p("    for (uint t = li; t < cn; t += WG) {")
	g.p("      const uint kb = ((%s) * KH + kvh) * DH;", krow)
	g.p("      float dot_ = 0.0f;")
	g.p("      for (uint d = 0u; d < DH; d++) { dot_ = %s; }", g.ov("dot_ + qs[d] * in1[kb + d]"))
	g.p("      sc[t] = dot_ * SCALE;")
	g.p("    }")
	g.barrierIndent("    ", true)
	g.p("    float mx = -INFINITY;")
	g.p("    for (uint t = li; t < cn; t += WG) { mx = max(mx, sc[t]); }")
	g.p("    red[li] = mx;")
	g.p("    threadgroup_barrier(mem_flags::mem_threadgroup);")
	g.p("    for (uint s_ = WG / 2u; s_ > 0u; s_ >>= 1u) {")
	g.p("      if (li < s_) { red[li] = max(red[li], red[li + s_]); }")
	g.p("      threadgroup_barrier(mem_flags::mem_threadgroup);")
	g.p("    }")
	g.p("    const float mnew = max(m, red[0]);")
	g.p("    threadgroup_barrier(mem_flags::mem_threadgroup);")
	g.p("    float ps = 0.0f;")
	g.p("    for (uint t = li; t < cn; t += WG) { const float e = exp(sc[t] - mnew); sc[t] = e; ps = ps + e; }")
	g.p("    red[li] = ps;")
	g.p("    threadgroup_barrier(mem_flags::mem_threadgroup);")
	g.p("    for (uint s_ = WG / 2u; s_ > 0u; s_ >>= 1u) {")
	g.p("      if (li < s_) { red[li] = red[li] + red[li + s_]; }")
	g.p("      threadgroup_barrier(mem_flags::mem_threadgroup);")
	g.p("    }")
	g.p("    const float alpha = exp(m - mnew);")
	g.p("    l = l * alpha + red[0];")
	g.p("    for (uint j = 0u; j < DPT; j++) {")
	g.p("      const uint d = li + j * WG;")
	g.p("      if (d < DH) {")
	g.p("        float o = acc[j] * alpha;")
	g.p("        for (uint t = 0u; t < cn; t++) { o = %s; }", g.ov("o + sc[t] * in2[((c0 + t) * KH + kvh) * DH + d]"))
	g.p("        acc[j] = o;")
	g.p("      }")
	g.p("    }")
	g.p("    m = mnew;")
	g.p("    threadgroup_barrier(mem_flags::mem_threadgroup);")
	g.p("  }")
	g.p("  if (valid) {")
	g.p("    for (uint j = 0u; j < DPT; j++) {")
	g.p("      const uint d = li + j * WG;")
	g.p("      if (d < DH) { out0[qb + d] = acc[j] / l; }")
	g.p("    }")
	g.p("  }")
	g.p("}")
	return g.kernel([3]int{wg, 1, 1}, grid), nil
}
