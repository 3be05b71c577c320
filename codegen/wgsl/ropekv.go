package wgsl

import (
	"fmt"
	"math"
	"strings"

	"github.com/tapml/tapml/codegen"
	"github.com/tapml/tapml/ir"
)

// ropeCode is what a rope rotation emits per pair slot, shared by genRope
// and genRopeKVWrite: the frequency expression (a format of the pair
// index), the pair's element offsets in a head and the cos/sin scale.
type ropeCode struct {
	freq, fi, offA, offB, scale string
	table                       string // the freqs table's binding ("" for baked frequencies)
}

// ropeHeader emits the constants and functions of a rotation of heads of
// dh elements, s rows a call: DH, HALF, PAIRS, DIMS, the frequencies (the
// reference's f32 values baked in, or the table binding's row for the
// length the call reaches, tableRows rows) and the angle reduction and
// sin/cos. table is the freqs binding's name, "" without one.
func (g *gen) ropeHeader(s, dh int, table string, tableRows int) ropeCode {
	dims := int(g.attrs.Int("dims"))
	if dims == 0 {
		dims = dh
	}
	pairs := dims / 2
	rc := ropeCode{freq: "freq[%s]", fi: "pi", table: table}
	var freqs []string
	if table != "" {
		// The row is the same for every invocation: the length pos+S past
		// original_max, clamped to the table's R rows.
		rc.freq = table + "[ROW * PAIRS + %s]"
		if g.faultIs(FaultWrongConstant) {
			rc.freq += " * 1.1f"
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
	g.p("const DH: u32 = %du;", dh)
	g.p("const HALF: u32 = %du;", dh/2)
	g.p("const PAIRS: u32 = %du;", pairs)
	g.p("const DIMS: u32 = %du;", dims)
	if table != "" {
		g.p("const S: i32 = %di;", s)
		g.p("const ORIG: i32 = %di;", g.attrs.Int("original_max"))
		g.p("const ROWS: i32 = %di;", tableRows)
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
	if g.faultIs(FaultWrongIndex) {
		rc.fi = "min(pi + 1u, PAIRS - 1u)"
	}
	if g.attrs.String("style") == "half" {
		rc.offA, rc.offB = "pi", "pi + PAIRS"
	} else {
		rc.offA, rc.offB = "2u * pi", "2u * pi + 1u"
	}
	if m := g.attrs.Float("attention_factor"); m != 1 {
		rc.scale = " * " + f32Lit(m)
	}
	return rc
}

// rotate emits the body of one pair slot pi of a head at src[base..]: pair
// pi < PAIRS rotated by the angle pos·freq (pos an f32 let, the pos
// binding posIn read for a table's row), the slots beyond copying the
// elements past DIMS. The results go to dst at dstOff plus the source
// index ("" for the same index).
func (g *gen) rotate(rc ropeCode, src, dst, dstOff, posIn string) {
	at := func(idx string) string {
		if dstOff == "" {
			return dst + "[" + idx + "]"
		}
		return dst + "[" + dstOff + " + " + idx + "]"
	}
	if rc.table != "" {
		g.p("  let ROW = u32(clamp(%s[0] + S - ORIG, 0i, ROWS - 1i));", posIn)
	}
	g.p("  if (pi < PAIRS) {")
	g.p("    let sc = sincos_(reduce(pos * %s));", fmt.Sprintf(rc.freq, rc.fi))
	g.p("    let c = sc.y%s;", rc.scale)
	g.p("    let sn = sc.x%s;", rc.scale)
	g.p("    let a = base + %s;", rc.offA)
	g.p("    let b = base + %s;", rc.offB)
	g.p("    let x0 = %s[a];", src)
	g.p("    let x1 = %s[b];", src)
	g.p("    %s = %s;", at("a"), g.ov("x0 * c - x1 * sn"))
	g.p("    %s = %s;", at("b"), g.ov("x0 * sn + x1 * c"))
	g.p("  } else {")
	g.p("    let e = base + DIMS + 2u * (pi - PAIRS);")
	g.p("    %s = %s[e];", at("e"), src)
	g.p("    %s = %s[e + 1u];", at("e + 1u"), src)
	g.p("  }")
}

// genRopeKVWrite is rope_kv_write in one dispatch: invocations
// 0..S·H·HALF-1 rotate q's pair slots into out2 (as genRope does),
// the next S·KH·HALF rotate k's into rows pos.. of the k cache, the last
// S·KH·DH copy v's elements into rows pos.. of the v cache. Both caches
// are read_write bindings, each carrying its input and output (as
// genKVWrite's); when pos < 0 or pos+S > T no cache row is written.
func genRopeKVWrite(g *gen) (*codegen.Kernel, error) {
	kc, vc := g.in[0], g.in[1]
	g.bind("k_cache", codegen.ReadWrite, kc, wgslType(kc.DType), 0, 0)
	g.bind("v_cache", codegen.ReadWrite, vc, wgslType(vc.DType), 1, 1)
	for i, t := range g.in[2:] {
		g.bind(fmt.Sprint("in", i+2), codegen.Read, t, wgslType(t.DType), i+2, -1)
	}
	g.bind("out2", codegen.Write, g.out[2], wgslType(g.out[2].DType), -1, 2)
	g.f16Helper()
	q, k := sizes(g.in[2]), sizes(g.in[3])
	s, h, dh := q[0], q[1], q[2]
	kh := k[1]
	table, tableRows := "", 0
	if len(g.in) == 7 {
		table, tableRows = "in6", int(g.in[6].Shape[0].Size)
	}
	rc := g.ropeHeader(s, dh, table, tableRows)
	half := dh / 2
	nq, nk, nv := s*h*half, s*kh*half, s*kh*dh
	g.p("const H: u32 = %du;", h)
	g.p("const KH: u32 = %du;", kh)
	g.p("const NQ: u32 = %du;", nq)
	g.p("const NK: u32 = %du;", nk)
	g.p("const T: u32 = %du;", sizes(kc)[0])
	g.p("const ROWS_KV: u32 = %du;", s)
	g.p("const KVROW: u32 = %du;", kh*dh)
	return g.elementwise(nq+nk+nv, func() {
		g.p("  let p = in5[0];")
		g.p("  let fits = p >= 0i && u32(p) + ROWS_KV <= T;")
		g.p("  if (i < NQ) {")
		g.p("  let pi = i %% HALF;")
		g.p("  let sh = i / HALF;")
		g.p("  let base = sh * DH;")
		g.p("  let pos = f32(p + i32(sh / H));")
		g.rotate(rc, "in2", "out2", "", "in5")
		g.p("  } else if (i < NQ + NK) {")
		g.p("  if (!fits) { return; }")
		g.p("  let pi = (i - NQ) %% HALF;")
		g.p("  let sh = (i - NQ) / HALF;")
		g.p("  let base = sh * DH;")
		g.p("  let pos = f32(p + i32(sh / KH));")
		g.rotate(rc, "in3", "k_cache", "u32(p) * KVROW", "in5")
		g.p("  } else {")
		g.p("  if (!fits) { return; }")
		g.p("  let e = i - NQ - NK;")
		g.p("  v_cache[u32(p) * KVROW + e] = in4[e];")
		g.p("  }")
	}), nil
}
