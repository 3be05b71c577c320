package wgsl

import (
	"fmt"
	"slices"
	"strings"

	"github.com/tapml/tapml/codegen"
	"github.com/tapml/tapml/ir"
)

// Kernels of the ops of ir/ops_nn.go: iota, conv2d, conv_transpose2d,
// pool2d, resize and the reductions over axes. All f32 but iota (i32).
//
// The convolutions are register-blocked: each invocation computes OT output
// channels of one group for PX neighbouring pixels of one output row, so a
// tap of x is loaded once for OT channels and a weight once for PX pixels.
// Each output is one f32 sum over (c, i, j) in that order, plus the bias;
// no workgroup memory, no barriers (slow on CPU drivers).
//
// Faults: wrong_index applies to conv2d, conv_transpose2d (a weight read one
// tap further) and pool2d (windows shifted by one column).

func init() {
	for op, fn := range map[ir.Op]generator{
		ir.OpIota:            genIota,
		ir.OpConv2D:          genConv,
		ir.OpConvTranspose2D: genConv,
		ir.OpPool2D:          genPool,
		ir.OpResize:          genResize,
		ir.OpReduceSum:       genReduce,
		ir.OpReduceMean:      genReduce,
		ir.OpReduceMax:       genReduce,
	} {
		generators[op] = fn
	}
}

// genIota writes start + the index along axis.
func genIota(g *gen) (*codegen.Kernel, error) {
	g.bindAll()
	out := sizes(g.out[0])
	axis := ir.NormAxis(g.attrs.Int("axis"), len(out))
	_, dim, inner := outerInner(out, axis)
	return g.elementwise(numel(g.out[0]), func() {
		g.p("  out0[i] = in0[0] + i32((i / %du) %% %du);", max(inner, 1), max(dim, 1))
	}), nil
}

// Register tiles of the convolutions.
const (
	convOT = 8 // output channels per invocation (at most)
	convPX = 4 // pixels of a row per invocation (at most)
)

// genConv generates conv2d and conv_transpose2d.
func genConv(g *gen) (*codegen.Kernel, error) {
	sp, err := ir.Spatial(g.attrs)
	if err != nil {
		return nil, err
	}
	transpose := g.op == ir.OpConvTranspose2D
	g.bindAll()
	g.f16Helper()
	xs, ws, os := sizes(g.in[0]), sizes(g.in[1]), sizes(g.out[0])
	n, c, h, w := xs[0], xs[1], xs[2], xs[3]
	o, ho, wo := os[1], os[2], os[3]
	kh, kw := ws[2], ws[3]
	groups := int(g.attrs.Int("groups"))
	cg, og := c/groups, o/groups
	ot, px := min(convOT, og), min(convPX, wo)
	otiles, xtiles := ceilDiv(og, ot), ceilDiv(wo, px)
	total := n * groups * otiles * ho * xtiles
	hasBias := len(g.in) > 2
	wgx := g.threads(64)
	grid, gid := g.fold(ceilDiv(total, wgx))
	if total == 0 {
		grid = [3]int{0, 1, 1}
	}
	for _, kv := range [][2]any{{"C", c}, {"H", h}, {"W", w}, {"O", o}, {"HO", ho}, {"WO", wo}, {"KH", kh}, {"KW", kw},
		{"CG", cg}, {"OG", og}, {"OTILES", otiles}, {"XTILES", xtiles}, {"GROUPS", groups}, {"TOTAL", total}} {
		g.p("const %s: u32 = %du;", kv[0], kv[1])
	}
	g.p("const SH: i32 = %di;", sp.Strides[0])
	g.p("const SW: i32 = %di;", sp.Strides[1])
	g.p("const DH: i32 = %di;", sp.Dilations[0])
	g.p("const DW: i32 = %di;", sp.Dilations[1])
	g.p("const PT: i32 = %di;", sp.Pads[0])
	g.p("const PL: i32 = %di;", sp.Pads[1])
	g.entry([3]int{wgx, 1, 1})
	g.p("  let t = %s * %du + li;", gid, wgx)
	g.p("  if (t >= TOTAL) { return; }")
	g.p("  let xt = t %% XTILES;")
	g.p("  let y = (t / XTILES) %% HO;")
	g.p("  let otile = (t / (XTILES * HO)) %% (GROUPS * OTILES);")
	g.p("  let nn = t / (XTILES * HO * GROUPS * OTILES);")
	g.p("  let grp = otile / OTILES;")
	g.p("  let obase = (otile %% OTILES) * %du;", ot)
	g.p("  let x0 = xt * %du;", px)
	// Weight row offsets of the tile's channels (clamped to the group).
	for a := 0; a < ot; a++ {
		g.p("  let ol%d = min(obase + %du, OG - 1u);", a, a)
		for b := 0; b < px; b++ {
			g.p("  var acc%d_%d = 0.0f;", a, b)
		}
	}
	bump := ""
	if g.faultIs(FaultWrongIndex) {
		bump = " + 1u"
	}
	g.p("  for (var c = 0u; c < CG; c++) {")
	g.p("    let xc = (nn * C + grp * CG + c) * H * W;")
	g.p("    for (var i = 0u; i < KH; i++) {")
	if transpose {
		g.p("      let ty = i32(y) + PT - i32(i) * DH;")
		g.p("      let iy = ty / SH;")
		g.p("      let rowok = ty >= 0 && ty %% SH == 0 && iy < i32(H);")
	} else {
		g.p("      let iy = i32(y) * SH - PT + i32(i) * DH;")
		g.p("      let rowok = iy >= 0 && iy < i32(H);")
	}
	g.p("      if (!rowok) { continue; }")
	g.p("      for (var j = 0u; j < KW; j++) {")
	for b := 0; b < px; b++ {
		if transpose {
			g.p("        let tx%d = i32(x0 + %du) + PL - i32(j) * DW;", b, b)
			g.p("        let ix%d = tx%d / SW;", b, b)
			g.p("        var v%d = 0.0f;", b)
			g.p("        if (tx%d >= 0 && tx%d %% SW == 0 && ix%d < i32(W)) { v%d = in0[xc + u32(iy) * W + u32(ix%d)]; }", b, b, b, b, b)
		} else {
			g.p("        let ix%d = i32(x0 + %du) * SW - PL + i32(j) * DW;", b, b)
			g.p("        var v%d = 0.0f;", b)
			g.p("        if (ix%d >= 0 && ix%d < i32(W)) { v%d = in0[xc + u32(iy) * W + u32(ix%d)]; }", b, b, b, b)
		}
	}
	for a := 0; a < ot; a++ {
		if transpose { // w[C, O/groups, kh, kw]
			g.p("        let w%d = in1[(((grp * CG + c) * OG + ol%d) * KH + i) * KW + j%s];", a, a, bump)
		} else { // w[O, C/groups, kh, kw]
			g.p("        let w%d = in1[(((grp * OG + ol%d) * CG + c) * KH + i) * KW + j%s];", a, a, bump)
		}
		for b := 0; b < px; b++ {
			g.p("        acc%d_%d = %s;", a, b, g.ov(fmt.Sprintf("acc%d_%d + v%d * w%d", a, b, b, a)))
		}
	}
	g.p("      }")
	g.p("    }")
	g.p("  }")
	for a := 0; a < ot; a++ {
		g.p("  if (obase + %du < OG) {", a)
		g.p("    let oc = grp * OG + obase + %du;", a)
		bias := ""
		if hasBias {
			bias = " + in2[oc]"
		}
		g.p("    let ob = ((nn * O + oc) * HO + y) * WO + x0;")
		for b := 0; b < px; b++ {
			g.p("    if (x0 + %du < WO) { out0[ob + %du] = acc%d_%d%s; }", b, b, a, b, bias)
		}
		g.p("  }")
	}
	g.p("}")
	return g.kernel([3]int{wgx, 1, 1}, grid), nil
}

// genPool generates pool2d: one invocation per output element.
func genPool(g *gen) (*codegen.Kernel, error) {
	sp, err := ir.Spatial(g.attrs)
	if err != nil {
		return nil, err
	}
	g.bindAll()
	xs, os := sizes(g.in[0]), sizes(g.out[0])
	h, w, ho, wo := xs[2], xs[3], os[2], os[3]
	k := g.attrs.Ints("kernel")
	avg := g.attrs.String("mode") == "avg"
	g.p("const H: i32 = %di;", h)
	g.p("const W: i32 = %di;", w)
	shift := ""
	if g.faultIs(FaultWrongIndex) {
		shift = " + 1"
	}
	return g.elementwise(numel(g.out[0]), func() {
		g.p("  let xx = i32(i %% %du);", wo)
		g.p("  let y = i32((i / %du) %% %du);", wo, ho)
		g.p("  let plane = (i / %du) * %du;", wo*ho, h*w)
		g.p("  let y0 = y * %d - %d;", sp.Strides[0], sp.Pads[0])
		g.p("  let x0 = xx * %d - %d%s;", sp.Strides[1], sp.Pads[1], shift)
		if avg {
			g.p("  var s = 0.0f;")
			g.p("  var cnt = 0;")
		} else {
			g.p("  var m = f32_bits(0xff800000u);")
		}
		g.p("  for (var a = 0; a < %d; a++) {", k[0])
		g.p("    let iy = y0 + a * %d;", sp.Dilations[0])
		g.p("    if (iy < 0 || iy >= H) { continue; }")
		g.p("    for (var b = 0; b < %d; b++) {", k[1])
		g.p("      let ix = x0 + b * %d;", sp.Dilations[1])
		g.p("      if (ix < 0 || ix >= W) { continue; }")
		g.p("      let v = in0[plane + u32(iy * W + ix)];")
		if avg {
			g.p("      s = s + v;")
			g.p("      cnt = cnt + 1;")
		} else {
			g.p("      if (v > m) { m = v; }")
		}
		g.p("    }")
		g.p("  }")
		switch {
		case !avg:
			g.p("  out0[i] = m;")
		case g.attrs.Bool("count_include_pad"):
			g.p("  let full = (min(y0 + %d, H + %d) - y0) * (min(x0 + %d, W + %d) - x0);", k[0], sp.Pads[2], k[1], sp.Pads[3])
			g.p("  out0[i] = s / f32(full);")
		default:
			g.p("  out0[i] = s / f32(cnt);")
		}
	}), nil
}

// resizeCoordExpr is the WGSL of the CPU reference's ResizeCoord: the
// input coordinate of output index xo (a u32 expression) in f32.
func resizeCoordExpr(mode, xo string, in int, out, scale float32) string {
	sc := f32Lit(float64(scale))
	x := "f32(" + xo + ")"
	switch mode {
	case "half_pixel":
		return fmt.Sprintf("((%s + 0.5f) / %s - 0.5f)", x, sc)
	case "pytorch_half_pixel":
		if out > 1 {
			return fmt.Sprintf("((%s + 0.5f) / %s - 0.5f)", x, sc)
		}
		return "0.0f"
	case "align_corners":
		if out > 1 {
			return fmt.Sprintf("(f32(%s * %du) / %s)", xo, in-1, f32Lit(float64(out-1)))
		}
		return "0.0f"
	case "asymmetric":
		return fmt.Sprintf("(%s / %s)", x, sc)
	}
	return fmt.Sprintf("((%s + 0.5f) / %s)", x, sc) // tf_half_pixel_for_nn
}

// nearestExpr rounds f32 coordinate x by mode and clamps it to [0, in-1].
func nearestExpr(mode, x string, in int) string {
	var r string
	switch mode {
	case "floor":
		r = "floor(" + x + ")"
	case "ceil":
		r = "ceil(" + x + ")"
	case "round_prefer_floor":
		r = fmt.Sprintf("select(round_(%s), floor(%s), %s - floor(%s) == 0.5f)", x, x, x, x)
	default:
		r = fmt.Sprintf("select(round_(%s), floor(%s) + 1.0f, %s - floor(%s) == 0.5f)", x, x, x, x)
	}
	return fmt.Sprintf("u32(clamp(%s, 0.0f, %s))", r, f32Lit(float64(in-1)))
}

// genResize generates resize: one invocation per output element.
func genResize(g *gen) (*codegen.Kernel, error) {
	g.bindAll()
	xs, os := sizes(g.in[0]), sizes(g.out[0])
	h, w, ho, wo := xs[2], xs[3], os[2], os[3]
	scales := [2]float32{float32(ho) / float32(h), float32(wo) / float32(w)}
	lengths := [2]float32{float32(ho), float32(wo)}
	if sc := g.attrs.Floats("scales"); len(sc) == 2 {
		scales = [2]float32{float32(sc[0]), float32(sc[1])}
		lengths = [2]float32{float32(h) * scales[0], float32(w) * scales[1]}
	}
	coord := g.attrs.String("coord")
	linear := g.attrs.String("mode") == "linear"
	if !linear {
		// WGSL's round() rounds half to even; the modes handle ties
		// themselves, so any rounding of non-ties will do.
		g.p("fn round_(x: f32) -> f32 { return floor(x + 0.5f); }")
	}
	return g.elementwise(numel(g.out[0]), func() {
		g.p("  let xo = i %% %du;", wo)
		g.p("  let yo = (i / %du) %% %du;", wo, ho)
		g.p("  let plane = (i / %du) * %du;", wo*ho, h*w)
		g.p("  let cy = %s;", resizeCoordExpr(coord, "yo", h, lengths[0], scales[0]))
		g.p("  let cx = %s;", resizeCoordExpr(coord, "xo", w, lengths[1], scales[1]))
		if !linear {
			near := g.attrs.String("nearest")
			g.p("  out0[i] = in0[plane + %s * %du + %s];", nearestExpr(near, "cy", h), w, nearestExpr(near, "cx", w))
			return
		}
		for _, ax := range []struct {
			v  string
			in int
		}{{"y", h}, {"x", w}} {
			g.p("  var k%s = clamp(c%s, 0.0f, %s);", ax.v, ax.v, f32Lit(float64(ax.in-1)))
			g.p("  if (k%s != k%s) { k%s = 0.0f; }", ax.v, ax.v, ax.v)
			g.p("  let f%s = floor(k%s);", ax.v, ax.v)
			g.p("  let %s0 = u32(f%s);", ax.v, ax.v)
			g.p("  let %s1 = min(%s0 + 1u, %du);", ax.v, ax.v, ax.in-1)
			g.p("  let l%s = k%s - f%s;", ax.v, ax.v, ax.v)
		}
		g.p("  let a0 = in0[plane + y0 * %du + x0];", w)
		g.p("  let a1 = in0[plane + y0 * %du + x1];", w)
		g.p("  let b0 = in0[plane + y1 * %du + x0];", w)
		g.p("  let b1 = in0[plane + y1 * %du + x1];", w)
		g.p("  let top = a0 + lx * (a1 - a0);")
		g.p("  let bot = b0 + lx * (b1 - b0);")
		g.p("  out0[i] = top + ly * (bot - top);")
	}), nil
}

// genReduce generates reduce_sum, reduce_mean and reduce_max: one
// invocation per output element folds its elements in row-major order.
func genReduce(g *gen) (*codegen.Kernel, error) {
	xs := sizes(g.in[0])
	axes, err := ir.ReduceAxes(g.attrs.Ints("axes"), len(xs))
	if err != nil {
		return nil, err
	}
	g.bindAll()
	g.f16Helper()
	st := strides(xs)
	var kept []int // kept input dims, in order
	count := 1
	for d := range xs {
		if slices.Contains(axes, d) {
			count *= xs[d]
		} else {
			kept = append(kept, d)
		}
	}
	keptSizes := make([]int, len(kept))
	for k, d := range kept {
		keptSizes[k] = xs[d]
	}
	isMax := g.op == ir.OpReduceMax
	return g.elementwise(numel(g.out[0]), func() {
		coords := g.coords(keptSizes, "i")
		var terms []string
		for k, d := range kept {
			terms = append(terms, fmt.Sprintf("%s * %du", coords[k], st[d]))
		}
		base := "0u"
		if len(terms) > 0 {
			base = strings.Join(terms, " + ")
		}
		g.p("  let base = %s;", base)
		if isMax {
			g.p("  var acc = f32_bits(0xff800000u);")
		} else {
			g.p("  var acc = 0.0f;")
		}
		off := []string{"base"}
		indent := "  "
		for k, d := range axes {
			g.p("%sfor (var r%d = 0u; r%d < %du; r%d++) {", indent, k, k, xs[d], k)
			indent += "  "
			off = append(off, fmt.Sprintf("r%d * %du", k, st[d]))
		}
		g.p("%slet v = in0[%s];", indent, strings.Join(off, " + "))
		if isMax {
			g.p("%sif (v > acc || v != v) { acc = v; }", indent)
		} else {
			g.p("%sacc = %s;", indent, g.ov("acc + v"))
		}
		for range axes {
			indent = indent[2:]
			g.p("%s}", indent)
		}
		if g.op == ir.OpReduceMean {
			g.p("  out0[i] = acc / %s;", f32Lit(float64(count)))
		} else {
			g.p("  out0[i] = acc;")
		}
	}), nil
}
