package wgsl

import (
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
