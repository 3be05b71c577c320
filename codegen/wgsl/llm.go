package wgsl

import (
	"fmt"
	"math"
	"strings"

	"github.com/tapml/tapml/codegen"
	"github.com/tapml/tapml/ir"
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
	dims := int(g.attrs.Int("dims"))
	if dims == 0 {
		dims = dh
	}
	pairs := dims / 2
	table := len(g.in) == 3
	freq := "freq[%s]"
	var freqs []string
	if table {
		// The row is the same for every invocation: the length pos+S past
		// original_max, clamped to the table's R rows.
		freq = "in2[ROW * PAIRS + %s]"
		if g.faultIs(FaultWrongConstant) {
			freq += " * 1.1f"
		}
	} else {
		theta := g.attrs.Float("theta")
		if g.faultIs(FaultWrongConstant) {
			theta *= 1.1
		}
		for _, f := range ir.RopeFreqs(float32(theta), dims, g.attrs.Floats("freq_factors")) {
			freqs = append(freqs, f32Lit(float64(f))) // the reference's own f32 value
		}
	}
	// Cody-Waite reduction of the angle to [-π, π] before cos and sin (GPU
	// sin/cos are accurate only near zero: NVIDIA's were off by 4e-5 at
	// 511 rad). 2π = C1 + C2 + C3, with C1 (8 bits) and C2 (9 bits) short
	// enough that k·C1 and k·C2 are exact for |k| < 2^15, i.e. angles up
	// to about 2·10^5 rad.
	const c1 = 6.28125
	d := 2*math.Pi - c1
	c2 := math.Float32frombits(math.Float32bits(float32(d)) &^ 0x7fff)
	c3 := float32(d - float64(c2))
	half := dh / 2
	g.p("const H: u32 = %du;", h)
	g.p("const DH: u32 = %du;", dh)
	g.p("const HALF: u32 = %du;", half)
	g.p("const PAIRS: u32 = %du;", pairs)
	g.p("const DIMS: u32 = %du;", dims)
	if table {
		g.p("const S: i32 = %di;", s)
		g.p("const ORIG: i32 = %di;", g.attrs.Int("original_max"))
		g.p("const ROWS: i32 = %di;", g.in[2].Shape[0].Size)
	} else {
		g.p("var<private> freq: array<f32, %d> = array<f32, %d>(%s);", pairs, pairs, strings.Join(freqs, ", "))
	}
	g.p("fn reduce(a: f32) -> f32 {")
	g.p("  let k = round(a * 0.15915494309189535f);")
	g.p("  return ((a - k * %s) - k * %s) - k * %s;", f32Lit(c1), f32Lit(float64(c2)), f32Lit(float64(c3)))
	g.p("}")
	// sin and cos of a reduced angle by Cephes' sinf/cosf polynomials on
	// [-π/4, π/4] after a second reduction by π/2: about 1 ULP on any
	// driver, where the built-ins may be off by 2^-11 (Vulkan's bound,
	// which SwiftShader, Chrome's CPU WebGPU, comes close to).
	g.p("fn sincos_(a: f32) -> vec2<f32> {")
	g.p("  let j = round(a * 0.63661977236758134f);")
	g.p("  let r = ((a - j * 1.5703125f) - j * 4.837512969970703125e-4f) - j * 7.54978995489188216e-8f;")
	g.p("  let z = r * r;")
	g.p("  let s = r + r * z * (-1.6666654611e-1f + z * (8.3321608736e-3f + z * (-1.9515295891e-4f)));")
	g.p("  let c = 1.0f - 0.5f * z + z * z * (4.166664568298827e-2f + z * (-1.388731625493765e-3f + z * 2.443315711809948e-5f));")
	g.p("  let q = ((i32(j) %% 4i) + 4i) %% 4i;")
	g.p("  let sn = select(select(select(s, c, q == 1i), -s, q == 2i), -c, q == 3i);")
	g.p("  let cs = select(select(select(c, -s, q == 1i), -c, q == 2i), s, q == 3i);")
	g.p("  return vec2<f32>(sn, cs);")
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
	scale := ""
	if m := g.attrs.Float("attention_factor"); m != 1 {
		scale = " * " + f32Lit(m)
	}
	return g.elementwise(s*h*half, func() {
		g.p("  let pi = i %% HALF;")
		g.p("  let sh = i / HALF;")
		g.p("  let base = sh * DH;")
		g.p("  let pos = f32(in1[0] + i32(sh / H));")
		if table {
			g.p("  let ROW = u32(clamp(in1[0] + S - ORIG, 0i, ROWS - 1i));")
		}
		g.p("  if (pi < PAIRS) {")
		g.p("    let sc = sincos_(reduce(pos * %s));", fmt.Sprintf(freq, fi))
		g.p("    let c = sc.y%s;", scale)
		g.p("    let sn = sc.x%s;", scale)
		g.p("    let a = %s;", pa)
		g.p("    let b = %s;", pb)
		g.p("    let x0 = in0[a];")
		g.p("    let x1 = in0[b];")
		g.p("    out0[a] = %s;", g.ov("x0 * c - x1 * sn"))
		g.p("    out0[b] = %s;", g.ov("x0 * sn + x1 * c"))
		g.p("  } else {")
		g.p("    let e = base + DIMS + 2u * (pi - PAIRS);")
		g.p("    out0[e] = in0[e];")
		g.p("    out0[e + 1u] = in0[e + 1u];")
		g.p("  }")
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
