package wgsl

import (
	"strconv"

	"github.com/tapml/tapml/codegen"
)

// The recurrent ops walk the rows of a call in order. Channels are
// independent, so one invocation owns one channel: it reads its slice of
// the state, runs the rows and writes the state back in place. No other
// invocation touches that channel, so the in-place update needs no
// barrier.

// bindState declares input 0 as the state, one read_write binding that
// carries input 0 and output 0, the other inputs as in1.., and the other
// outputs as out1...
func (g *gen) bindState() {
	g.bind("state", codegen.ReadWrite, g.in[0], wgslType(g.in[0].DType), 0, 0)
	for i := 1; i < len(g.in); i++ {
		g.bind("in"+strconv.Itoa(i), codegen.Read, g.in[i], wgslType(g.in[i].DType), i, -1)
	}
	for i := 1; i < len(g.out); i++ {
		g.bind("out"+strconv.Itoa(i), codegen.Write, g.out[i], wgslType(g.out[i].DType), -1, i)
	}
}

// genTokenShift moves x[S, C] down one row, row 0 from prev[1, C].
func genTokenShift(g *gen) (*codegen.Kernel, error) {
	g.bindAll()
	c := sizes(g.in[0])[1]
	src := "in0[i - C]"
	if g.faultIs(FaultWrongIndex) {
		src = "in0[i - C + 1u]"
	}
	g.p("const C: u32 = %du;", c)
	return g.elementwise(numel(g.out[0]), func() {
		g.p("  if (i < C) { out0[i] = in1[i]; } else { out0[i] = %s; }", src)
	}), nil
}

// genCausalConv1D: invocation c computes y[s, c] = Σ_j w[c, j]·u[s+j, c]
// for every row s (u: the K-1 state rows, then x's), then moves the last
// K-1 rows of u into the state.
func genCausalConv1D(g *gen) (*codegen.Kernel, error) {
	g.bindState()
	g.f16Helper()
	xs, ws := sizes(g.in[1]), sizes(g.in[2])
	s, c, k := xs[0], xs[1], ws[1]
	g.p("const S: u32 = %du;", s)
	g.p("const C: u32 = %du;", c)
	g.p("const K: u32 = %du;", k)
	tap := "j"
	if g.faultIs(FaultWrongIndex) {
		tap = "min(j + 1u, K - 1u)"
	}
	// u(row) is row of the state rows followed by x's (MSL kernels cannot
	// read buffers in helper functions, so it is written out twice).
	u := func(dst, row string) {
		g.p("    var %s = 0.0f;", dst)
		g.p("    if (%s < K - 1u) { %s = state[(%s) * C + i]; } else { %s = in1[(%s - (K - 1u)) * C + i]; }", row, dst, row, dst, row)
	}
	return g.elementwise(c, func() {
		g.p("  for (var r = 0u; r < S; r++) {")
		g.p("    var acc = 0.0f;")
		g.p("    for (var j = 0u; j < K; j++) {")
		u("x", "r + j")
		g.p("      acc = %s;", g.ov("acc + in2[i * K + "+tap+"] * x"))
		g.p("    }")
		g.p("    out1[r * C + i] = acc;")
		g.p("  }")
		// Ascending rows read rows at or after their own.
		g.p("  for (var r = 0u; r + 1u < K; r++) {")
		u("x", "S + r")
		g.p("    state[r * C + i] = x;")
		g.p("  }")
	}), nil
}

// genWKV: invocation c runs RWKV's WKV recurrence over the rows of its
// channel in transformers' order of operations (see the op's doc).
func genWKV(g *gen) (*codegen.Kernel, error) {
	g.bindState()
	g.f16Helper()
	ks := sizes(g.in[1])
	s, c := ks[0], ks[1]
	g.p("const S: u32 = %du;", s)
	g.p("const C: u32 = %du;", c)
	row := "r"
	if g.faultIs(FaultWrongIndex) {
		row = "min(r + 1u, S - 1u)"
	}
	return g.elementwise(c, func() {
		g.p("  if (S == 0u) { return; }")
		g.p("  var a = state[i];")
		g.p("  var b = state[C + i];")
		g.p("  var p = select(state[2u * C + i], %s, b == 0.0f); // no history", f32Lit(-1e38))
		g.p("  let w = in3[i];")
		g.p("  let u = in4[i];")
		g.p("  for (var r = 0u; r < S; r++) {")
		g.p("    let k = in1[%s * C + i];", row)
		g.p("    let v = in2[r * C + i];")
		g.p("    let uk = u + k;")
		g.p("    var q = max(p, uk);")
		g.p("    var e1 = exp(p - q);")
		g.p("    var e2 = exp(uk - q);")
		g.p("    out1[r * C + i] = %s;", g.ov("(e1 * a + e2 * v) / (e1 * b + e2)"))
		g.p("    let pw = p + w;")
		g.p("    q = max(pw, k);")
		g.p("    e1 = exp(pw - q);")
		g.p("    e2 = exp(k - q);")
		g.p("    a = %s;", g.ov("e1 * a + e2 * v"))
		g.p("    b = %s;", g.ov("e1 * b + e2"))
		g.p("    p = q;")
		g.p("  }")
		g.p("  state[i] = a;")
		g.p("  state[C + i] = b;")
		g.p("  state[2u * C + i] = p;")
	}), nil
}

// genSelectiveScan: invocation c keeps h[c, :] in registers and runs the
// rows of its channel: h = exp(A·dt)·h + (dt·B)·x, y = Σ_n h·Cm.
func genSelectiveScan(g *gen) (*codegen.Kernel, error) {
	g.bindState()
	g.f16Helper()
	xs, as := sizes(g.in[1]), sizes(g.in[3])
	s, c, n := xs[0], xs[1], as[1]
	g.p("const S: u32 = %du;", s)
	g.p("const C: u32 = %du;", c)
	g.p("const N: u32 = %du;", n)
	bi := "r * N + j"
	if g.faultIs(FaultWrongIndex) {
		bi = "r * N + min(j + 1u, N - 1u)"
	}
	return g.elementwise(c, func() {
		g.p("  var h: array<f32, %d>;", max(n, 1))
		g.p("  for (var j = 0u; j < N; j++) { h[j] = state[i * N + j]; }")
		g.p("  for (var r = 0u; r < S; r++) {")
		g.p("    let dt = in2[r * C + i];")
		g.p("    let x = in1[r * C + i];")
		g.p("    var acc = 0.0f;")
		g.p("    for (var j = 0u; j < N; j++) {")
		g.p("      h[j] = %s;", g.ov("exp(in3[i * N + j] * dt) * h[j] + (dt * in4["+bi+"]) * x"))
		g.p("      acc = %s;", g.ov("acc + h[j] * in5[r * N + j]"))
		g.p("    }")
		g.p("    out1[r * C + i] = acc;")
		g.p("  }")
		g.p("  for (var j = 0u; j < N; j++) { state[i * N + j] = h[j]; }")
	}), nil
}
