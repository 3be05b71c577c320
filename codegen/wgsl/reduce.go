package wgsl

import (
	"github.com/tapml/tapml/codegen"
	"github.com/tapml/tapml/ir"
)

// Row reductions (rms_norm, layer_norm, softmax, argmax) run one workgroup
// per row: each invocation folds a strided part of the row, then a tree in
// workgroup memory combines the partial results. Rows beyond the last (the
// slack of a folded grid) compute on the last row and write nothing, so
// every invocation reaches every barrier.

// rowSetup declares the row index: `row` (clamped) and `valid`.
func (g *gen) rowSetup(rows int, gid string) {
	g.p("  let row_ = %s;", gid)
	g.p("  let valid = row_ < %du;", rows)
	g.p("  let row = min(row_, %du);", max(rows-1, 0))
}

// treeReduce combines red[0..wg) into red[0] with combine(a, b), a WGSL
// expression over the names a and b; the first barrier is the one the
// missing_barrier fault drops. It ends with every invocation past the tree;
// the caller reads red[0] and must barrier before writing red again.
func (g *gen) treeReduce(wg int, combine func(a, b string) string) {
	g.barrier(true)
	if wg == 1 {
		return
	}
	g.p("  for (var s_ = %du; s_ > 0u; s_ = s_ >> 1u) {", wg/2)
	g.p("    if (li < s_) { red[li] = %s; }", combine("red[li]", "red[li + s_]"))
	g.p("    workgroupBarrier();")
	g.p("  }")
}

func sum(a, b string) string { return a + " + " + b }

// rowThreads picks the workgroup size of a row reduction of length d.
func (g *gen) rowThreads(d int) int { return g.threads(min(max(d, 1), 256)) }

// genNorm generates rms_norm and layer_norm over the last axis.
func genNorm(g *gen) (*codegen.Kernel, error) {
	g.bindAll()
	g.f16Helper()
	shape := sizes(g.in[0])
	d := shape[len(shape)-1]
	rows := prod(shape[:len(shape)-1])
	if d == 0 {
		rows = 0
	}
	eps := g.attrs.Float("eps")
	if g.faultIs(FaultWrongConstant) {
		eps = eps*1000 + 1e-3
	}
	wg := g.rowThreads(d)
	grid, gid := g.fold(rows)
	g.p("const D: u32 = %du;", d)
	g.p("const EPS: f32 = %s;", f32Lit(eps))
	g.p("var<workgroup> red: array<f32, %d>;", wg)
	g.entry([3]int{wg, 1, 1})
	g.rowSetup(rows, gid)
	g.p("  let base = row * D;")
	read := "in0[base + j]"
	if g.faultIs(FaultWrongIndex) {
		read = "in0[base + j + 1u]"
	}
	if g.op == ir.OpLayerNorm {
		g.p("  var acc = 0.0f;")
		g.p("  for (var j = li; j < D; j += %du) { acc = %s; }", wg, g.ov("acc + "+read))
		g.p("  red[li] = acc;")
		g.treeReduce(wg, sum)
		g.p("  let mean = red[0] / f32(D);")
		g.p("  workgroupBarrier();")
		g.p("  var acc2 = 0.0f;")
		g.p("  for (var j = li; j < D; j += %du) { let v = %s - mean; acc2 = %s; }", wg, read, g.ov("acc2 + v * v"))
		g.p("  red[li] = acc2;")
		g.treeReduce(wg, sum)
		g.p("  let inv = 1.0f / sqrt(red[0] / f32(D) + EPS);")
		g.p("  if (valid) {")
		bias := ""
		if len(g.in) == 3 {
			bias = " + in2[j]"
		}
		g.p("    for (var j = li; j < D; j += %du) { out0[base + j] = (in0[base + j] - mean) * inv * in1[j]%s; }", wg, bias)
		g.p("  }")
	} else {
		// As llama2.c: o = w * (x / sqrt(mean(x²) + eps)).
		g.p("  var acc = 0.0f;")
		g.p("  for (var j = li; j < D; j += %du) { let v = %s; acc = %s; }", wg, read, g.ov("acc + v * v"))
		g.p("  red[li] = acc;")
		g.treeReduce(wg, sum)
		g.p("  let inv = 1.0f / sqrt(red[0] / f32(D) + EPS);")
		g.p("  if (valid) {")
		g.p("    for (var j = li; j < D; j += %du) { out0[base + j] = in1[j] * (inv * in0[base + j]); }", wg)
		g.p("  }")
	}
	g.p("}")
	return g.kernel([3]int{wg, 1, 1}, grid), nil
}

// axisRows describes rows along axis of a shape: rows = outer·inner, row r
// starts at (r / inner)·A·inner + r % inner and steps by inner.
func (g *gen) axisRows(shape []int, axis int, gid string) (rows, a, inner int) {
	outer, a, inner := outerInner(shape, axis)
	rows = outer * inner
	if a == 0 {
		rows = 0
	}
	g.rowSetup(rows, gid)
	g.p("  let base = (row / %du) * %du + row %% %du;", inner, a*inner, inner)
	return rows, a, inner
}

// genSoftmax generates softmax along any axis (as llama2.c: subtract the
// max, exponentiate, divide by the sum).
func genSoftmax(g *gen) (*codegen.Kernel, error) {
	g.bindAll()
	g.f16Helper()
	shape := sizes(g.in[0])
	axis := ir.NormAxis(g.attrs.Int("axis"), len(shape))
	outer, a, inner := outerInner(shape, axis)
	rows := outer * inner
	if a == 0 {
		rows = 0
	}
	wg := g.rowThreads(a)
	grid, gid := g.fold(rows)
	g.p("const A: u32 = %du;", a)
	g.p("const INNER: u32 = %du;", inner)
	g.p("var<workgroup> red: array<f32, %d>;", wg)
	g.entry([3]int{wg, 1, 1})
	g.axisRows(shape, axis, gid)
	read := "in0[base + j * INNER]"
	if g.faultIs(FaultWrongIndex) {
		read = "in0[base + j * INNER + 1u]"
	}
	g.p("  var mx = f32_bits(0xff800000u);")
	g.p("  for (var j = li; j < A; j += %du) { mx = max(mx, %s); }", wg, g.ov(read))
	g.p("  red[li] = mx;")
	g.treeReduce(wg, func(a, b string) string { return "max(" + a + ", " + b + ")" })
	g.p("  let m = red[0];")
	g.p("  workgroupBarrier();")
	g.p("  var s = 0.0f;")
	g.p("  for (var j = li; j < A; j += %du) {", wg)
	g.p("    let e = exp(%s - m);", g.ov(read))
	g.p("    if (valid) { out0[base + j * INNER] = e; }")
	g.p("    s = %s;", g.ov("s + e"))
	g.p("  }")
	g.p("  red[li] = s;")
	g.treeReduce(wg, sum)
	g.p("  let total = red[0];")
	g.p("  if (valid) {")
	g.p("    for (var j = li; j < A; j += %du) { out0[base + j * INNER] = out0[base + j * INNER] / total; }", wg)
	g.p("  }")
	g.p("}")
	return g.kernel([3]int{wg, 1, 1}, grid), nil
}

// genArgmax generates argmax along any axis: the first index of the largest
// element, NaNs passed over unless the row starts with one (then 0), as the
// CPU reference's scan.
func genArgmax(g *gen) (*codegen.Kernel, error) {
	g.bindAll()
	shape := sizes(g.in[0])
	axis := ir.NormAxis(g.attrs.Int("axis"), len(shape))
	outer, a, inner := outerInner(shape, axis)
	rows := outer * inner
	if a == 0 {
		rows = 0
	}
	wg := g.rowThreads(a)
	grid, gid := g.fold(rows)
	ty := wgslType(g.in[0].DType)
	lowest := "f32_bits(0xff800000u)"
	if ty == "i32" {
		lowest = "i32(-2147483647 - 1)"
	}
	g.p("const A: u32 = %du;", a)
	g.p("const INNER: u32 = %du;", inner)
	g.p("const NONE: u32 = 0xffffffffu;")
	g.p("var<workgroup> redv: array<%s, %d>;", ty, wg)
	g.p("var<workgroup> redi: array<u32, %d>;", wg)
	g.entry([3]int{wg, 1, 1})
	g.axisRows(shape, axis, gid)
	// A lane's first value is taken even if -inf, a NaN never. NaNs are
	// told by their bits: on lavapipe x != x was false for a NaN (an
	// ordered comparison), and WGSL leaves NaN handling to implementations.
	takes, nanFirst := "bi == NONE", ""
	if ty != "i32" {
		nan := func(x string) string { return "(bitcast<u32>(f32(" + x + ")) & 0x7fffffffu) > 0x7f800000u" }
		takes += " && !(" + nan("v") + ")"
		nanFirst = " || " + nan("in0[base]")
	}
	start := "li"
	if g.faultIs(FaultWrongIndex) {
		start = "li + 1u"
	}
	g.p("  var bv: %s = %s;", ty, lowest)
	g.p("  var bi = NONE;")
	g.p("  for (var j = %s; j < A; j += %du) {", start, wg)
	g.p("    let v = in0[base + j * INNER];")
	g.p("    if (v > bv || (%s)) { bv = v; bi = j; }", takes)
	g.p("  }")
	g.p("  redv[li] = bv;")
	g.p("  redi[li] = bi;")
	g.barrier(true)
	if wg > 1 {
		g.p("  for (var s_ = %du; s_ > 0u; s_ = s_ >> 1u) {", wg/2)
		g.p("    if (li < s_) {")
		g.p("      let v = redv[li + s_]; let k = redi[li + s_];")
		g.p("      let cur = redi[li];")
		g.p("      if (k != NONE && (cur == NONE || v > redv[li] || (v == redv[li] && k < cur))) { redv[li] = v; redi[li] = k; }")
		g.p("    }")
		g.p("    workgroupBarrier();")
		g.p("  }")
	}
	// As the CPU reference's scan: a NaN first is never replaced (no value
	// compares greater), any later NaN is passed over.
	g.p("  if (valid && li == 0u) { out0[row] = i32(select(redi[0], 0u, redi[0] == NONE%s)); }", nanFirst)
	g.p("}")
	return g.kernel([3]int{wg, 1, 1}, grid), nil
}
