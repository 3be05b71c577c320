package msl

import (
	"github.com/tapml/tapml/codegen"
	"github.com/tapml/tapml/ir"
)

// Row reductions (rms_norm, layer_norm, softmax, argmax) run one
// threadgroup per row: each thread folds a strided part of the row, then a
// tree in threadgroup memory combines the partial results. Rows beyond the
// last (the slack of a folded grid) compute on the last row and write
// nothing, so every thread reaches every barrier.

// rowSetup declares the row index: row (clamped) and valid.
func (g *gen) rowSetup(rows int, gid string) {
	g.p("  const uint row_ = %s;", gid)
	g.p("  const bool valid = row_ < %du;", rows)
	g.p("  const uint row = min(row_, %du);", max(rows-1, 0))
}

// treeReduce combines red[0..wg) into red[0] with combine(a, b), an MSL
// expression over a and b; the first barrier is the one the
// missing_barrier fault drops. It ends with every thread past the tree;
// the caller reads red[0] and must barrier before writing red again.
func (g *gen) treeReduce(wg int, combine func(a, b string) string) {
	g.barrier(true)
	if wg == 1 {
		return
	}
	g.p("  for (uint s_ = %du; s_ > 0u; s_ >>= 1u) {", wg/2)
	g.p("    if (li < s_) { red[li] = %s; }", combine("red[li]", "red[li + s_]"))
	g.p("    threadgroup_barrier(mem_flags::mem_threadgroup);")
	g.p("  }")
}

func sum(a, b string) string { return a + " + " + b }

// rowThreads picks the threadgroup size of a row reduction of length d.
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
	g.p("constant uint D = %du;", d)
	g.p("constant float EPS = %s;", f32Lit(eps))
	g.share("float", "red", wg)
	g.entry()
	g.rowSetup(rows, gid)
	g.p("  const uint base = row * D;")
	read := "in0[base + j]"
	if g.faultIs(FaultWrongIndex) {
		read = "in0[base + j + 1u]"
	}
	if g.op == "layer_norm" {
		g.p("  float acc = 0.0f;")
		g.p("  for (uint j = li; j < D; j += %du) { acc = %s; }", wg, g.ov("acc + "+read))
		g.p("  red[li] = acc;")
		g.treeReduce(wg, sum)
		g.p("  const float mean = red[0] / float(D);")
		g.p("  threadgroup_barrier(mem_flags::mem_threadgroup);")
		g.p("  float acc2 = 0.0f;")
		g.p("  for (uint j = li; j < D; j += %du) { const float v = %s - mean; acc2 = %s; }", wg, read, g.ov("acc2 + v * v"))
		g.p("  red[li] = acc2;")
		g.treeReduce(wg, sum)
		g.p("  const float inv = 1.0f / sqrt(red[0] / float(D) + EPS);")
		g.p("  if (valid) {")
		g.p("    for (uint j = li; j < D; j += %du) { out0[base + j] = (in0[base + j] - mean) * inv * in1[j] + in2[j]; }", wg)
		g.p("  }")
	} else {
		// As llama2.c: o = w * (x / sqrt(mean(x²) + eps)).
		g.p("  float acc = 0.0f;")
		g.p("  for (uint j = li; j < D; j += %du) { const float v = %s; acc = %s; }", wg, read, g.ov("acc + v * v"))
		g.p("  red[li] = acc;")
		g.treeReduce(wg, sum)
		g.p("  const float inv = 1.0f / sqrt(red[0] / float(D) + EPS);")
		g.p("  if (valid) {")
		g.p("    for (uint j = li; j < D; j += %du) { out0[base + j] = in1[j] * (inv * in0[base + j]); }", wg)
		g.p("  }")
	}
	g.p("}")
	return g.kernel([3]int{wg, 1, 1}, grid), nil
}

// axisRows describes rows along axis of a shape: rows = outer·inner, row r
// starts at (r / inner)·A·inner + r % inner and steps by inner.
func (g *gen) axisRows(shape []int, axis int, gid string) {
	outer, a, inner := outerInner(shape, axis)
	rows := outer * inner
	if a == 0 {
		rows = 0
	}
	g.rowSetup(rows, gid)
	g.p("  const uint base = (row / %du) * %du + row %% %du;", max(inner, 1), a*inner, max(inner, 1))
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
	g.p("constant uint A = %du;", a)
	g.p("constant uint INNER = %du;", inner)
	g.share("float", "red", wg)
	g.entry()
	g.axisRows(shape, axis, gid)
	read := "in0[base + j * INNER]"
	if g.faultIs(FaultWrongIndex) {
		read = "in0[base + j * INNER + 1u]"
	}
	g.p("  float mx = -INFINITY;")
	g.p("  for (uint j = li; j < A; j += %du) { mx = max(mx, %s); }", wg, g.ov(read))
	g.p("  red[li] = mx;")
	g.treeReduce(wg, func(a, b string) string { return "max(" + a + ", " + b + ")" })
	g.p("  const float m = red[0];")
	g.p("  threadgroup_barrier(mem_flags::mem_threadgroup);")
	g.p("  float s = 0.0f;")
	g.p("  for (uint j = li; j < A; j += %du) {", wg)
	g.p("    const float e = exp(%s - m);", g.ov(read))
	g.p("    if (valid) { out0[base + j * INNER] = e; }")
	g.p("    s = %s;", g.ov("s + e"))
	g.p("  }")
	g.p("  red[li] = s;")
	g.treeReduce(wg, sum)
	g.p("  const float total = red[0];")
	g.p("  if (valid) {")
	g.p("    for (uint j = li; j < A; j += %du) { out0[base + j * INNER] = out0[base + j * INNER] / total; }", wg)
	g.p("  }")
	g.p("}")
	return g.kernel([3]int{wg, 1, 1}, grid), nil
}

// genArgmax generates argmax along any axis: the first index of the largest
// element (NaNs are never chosen unless the row holds nothing else).
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
	ty := mslType(g.in[0].DType)
	lowest := "(-INFINITY)"
	if ty == "int" {
		lowest = "(-2147483647 - 1)"
	}
	g.p("constant uint A = %du;", a)
	g.p("constant uint INNER = %du;", inner)
	g.p("constant uint NONE = 0xffffffffu;")
	g.share(ty, "redv", wg)
	g.share("uint", "redi", wg)
	g.entry()
	g.axisRows(shape, axis, gid)
	start := "li"
	if g.faultIs(FaultWrongIndex) {
		start = "li + 1u"
	}
	g.p("  %s bv = %s;", ty, lowest)
	g.p("  uint bi = NONE;")
	g.p("  for (uint j = %s; j < A; j += %du) {", start, wg)
	g.p("    const %s v = in0[base + j * INNER];", ty)
	if ty == "int" {
		g.p("    if (v > bv || bi == NONE) { bv = v; bi = j; }")
	} else {
		g.p("    if (v > bv || (bi == NONE && !isnan(v))) { bv = v; bi = j; }")
	}
	g.p("  }")
	g.p("  redv[li] = bv;")
	g.p("  redi[li] = bi;")
	g.barrier(true)
	if wg > 1 {
		g.p("  for (uint s_ = %du; s_ > 0u; s_ >>= 1u) {", wg/2)
		g.p("    if (li < s_) {")
		g.p("      const %s v = redv[li + s_]; const uint k = redi[li + s_];", ty)
		g.p("      const uint cur = redi[li];")
		g.p("      if (k != NONE && (cur == NONE || v > redv[li] || (v == redv[li] && k < cur))) { redv[li] = v; redi[li] = k; }")
		g.p("    }")
		g.p("    threadgroup_barrier(mem_flags::mem_threadgroup);")
		g.p("  }")
	}
	g.p("  if (valid && li == 0u) { out0[row] = redi[0] == NONE ? 0 : int(redi[0]); }")
	g.p("}")
	return g.kernel([3]int{wg, 1, 1}, grid), nil
}
