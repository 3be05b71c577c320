package wgsl

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/tapml/tapml/codegen"
	"github.com/tapml/tapml/codegen/dequant"
	"github.com/tapml/tapml/ir"
)

// Kernels that read a weight in a storage dtype (f16, bf16, a block
// format: the inputs the registry's Storage fact accepts) bind it as
// array<u32> (naga has no 8- or 16-bit storage) and decode it in
// registers: a block format a unit of four consecutive elements at a time,
// as codegen/dequant describes it, reading whole 32-bit words (a word that
// straddles two is put together from both); f16 and bf16 a half-word at a
// time.

// half_to_f32 converts the f16 in the low 16 bits of h to f32 exactly,
// subnormals included (m·2^-24 is exact), infinities and NaNs kept.
const f16Helper = `fn half_to_f32(h: u32) -> f32 {
  let s = (h & 0x8000u) << 16u;
  let e = (h >> 10u) & 0x1fu;
  let m = h & 0x3ffu;
  let normal = bitcast<f32>(s | ((e + 112u) << 23u) | (m << 13u));
  let tiny = bitcast<f32>(s | 0x33800000u) * f32(m);
  let special = bitcast<f32>(s | 0x7f800000u | (m << 13u));
  return select(select(normal, special, e == 31u), tiny, e == 0u);
}`

func init() { helpers["half_to_f32"] = struct{ src, libm string }{src: f16Helper} }

// isStored reports whether dt is a storage dtype kernels decode.
func isStored(dt ir.DType) bool { return dt == ir.F16 || dt == ir.BF16 || dt.IsBlock() }

// stored is a bound input in a storage dtype.
type stored struct {
	name string
	dt   ir.DType
	last int // the index of its last u32 word
}

// bindStored declares input i, in a storage dtype, as array<u32>.
func (g *gen) bindStored(name string, i int) stored {
	t := g.in[i]
	g.bind(name, codegen.Read, t, "u32", i, -1)
	return stored{name: name, dt: t.DType, last: int(max(0, (t.Bytes()+3)/4-1))}
}

// elem returns a WGSL f32 expression of element idx (a u32 expression) of
// s, emitting the lets it needs; for f16 and bf16 it is one half-word, for
// a block format the lane idx%4 of its unit.
func (g *gen) elem(s stored, idx, ind string) string {
	if s.dt != ir.BF16 {
		g.useHelper("half_to_f32")
	}
	switch s.dt {
	case ir.F16, ir.BF16:
		v := g.fresh("h")
		g.p("%slet %s = %s;", ind, v, idx)
		return s.half(v, ind)
	}
	v := g.fresh("e")
	g.p("%slet %s = %s;", ind, v, idx)
	return g.units(s, "(("+v+" >> 2u) << 2u)", []string{"(" + v + " & 3u)"}, ind)[0]
}

// half is the f32 of the 16-bit element at element index v of an f16 or
// bf16 s (v a let).
func (s stored) half(v, ind string) string {
	h := fmt.Sprintf("((%s[%s >> 1u] >> ((%s & 1u) * 16u)) & 0xffffu)", s.name, v, v)
	if s.dt == ir.BF16 {
		return "bitcast<f32>(" + h + " << 16u)"
	}
	return "half_to_f32(" + h + ")"
}

// unit4 returns a vec4<f32> expression of elements el..el+3 of s (el, a
// u32 expression, a multiple of 4).
func (g *gen) unit4(s stored, el, ind string) string {
	if s.dt != ir.BF16 {
		g.useHelper("half_to_f32")
	}
	v := g.fresh("u")
	g.p("%slet %s = %s;", ind, v, el)
	var lanes []string
	switch s.dt {
	case ir.F16, ir.BF16:
		for l := 0; l < 4; l++ {
			lanes = append(lanes, s.half(fmt.Sprintf("(%s + %du)", v, l), ind))
		}
	default:
		lanes = g.units(s, v, []string{"0u", "1u", "2u", "3u"}, ind)
	}
	return "vec4<f32>(" + strings.Join(lanes, ", ") + ")"
}

// units emits the decoding of lanes of the unit of a block-format s whose
// first element has the flat index el (a multiple of 4), and returns the
// f32 expression of each lane.
func (g *gen) units(s stored, el string, lanes []string, ind string) []string {
	elems, bytes := s.dt.Block()
	blk := g.fresh("blk")
	g.p("%slet %s = (%s / %du) * %du;", ind, blk, el, elems, bytes)
	j := g.fresh("j")
	g.p("%slet %s = %s %% %du;", ind, j, el, elems)
	p := &unitPrinter{g: g, s: s, ind: ind, align: blockAlign(bytes)}
	u32 := func(k uint32) string { return strconv.FormatUint(uint64(k), 10) + "u" }
	return dequant.Walk(dequant.Unit(s.dt), dequant.Leaves[string]{Block: blk, Elem: j, Lanes: lanes, Const: u32}, p.node)
}

// blockAlign is the alignment (1, 2 or 4) of every block's offset.
func blockAlign(bytes int) int {
	for a := 4; a > 1; a /= 2 {
		if bytes%a == 0 {
			return a
		}
	}
	return 1
}

// fresh returns a new local name.
func (g *gen) fresh(base string) string {
	g.locals++
	return base + strconv.Itoa(g.locals)
}

// unitPrinter prints the ops of a dequant expression as WGSL lets.
type unitPrinter struct {
	g     *gen
	s     stored
	ind   string
	align int // alignment of the block offset
}

// alignOf is the largest of 1, 2, 4 that always divides integer e.
func (p *unitPrinter) alignOf(e *dequant.Expr) int {
	switch e.Op {
	case dequant.Const:
		switch {
		case e.K%4 == 0:
			return 4
		case e.K%2 == 0:
			return 2
		}
		return 1
	case dequant.Block:
		return p.align
	case dequant.Elem:
		return 4
	case dequant.Add, dequant.Sub:
		return min(p.alignOf(e.Args[0]), p.alignOf(e.Args[1]))
	case dequant.Mul:
		return min(4, p.alignOf(e.Args[0])*p.alignOf(e.Args[1]))
	}
	return 1
}

// infix are the ops printed as WGSL operators (integer or float, by their
// operands).
var infix = map[dequant.Op]string{
	dequant.Add: "+", dequant.Sub: "-", dequant.Mul: "*", dequant.Shl: "<<", dequant.Shr: ">>",
	dequant.And: "&", dequant.Or: "|", dequant.FMul: "*", dequant.FAdd: "+", dequant.FSub: "-",
}

// node emits a let of op e over its arguments' names and returns its name.
func (p *unitPrinter) node(e *dequant.Expr, a []string) string {
	buf := p.s.name
	var x string
	switch e.Op {
	case dequant.Word:
		if p.alignOf(e.Args[0]) == 4 {
			x = fmt.Sprintf("%s[%s >> 2u]", buf, a[0])
			break
		}
		o := p.let(a[0])
		sh := p.let(fmt.Sprintf("(%s & 3u) * 8u", o))
		x = fmt.Sprintf("(%s[%s >> 2u] >> %s) | ((%s[min((%s >> 2u) + 1u, %du)] << (31u - %s)) << 1u)", buf, o, sh, buf, o, p.s.last, sh)
	case dequant.Byte:
		o := p.let(a[0])
		x = fmt.Sprintf("(%s[%s >> 2u] >> ((%s & 3u) * 8u)) & 0xffu", buf, o, o)
	case dequant.Half:
		o := p.let(a[0])
		x = fmt.Sprintf("half_to_f32((%s[%s >> 2u] >> ((%s & 2u) * 8u)) & 0xffffu)", buf, o, o)
	case dequant.Select:
		x = fmt.Sprintf("select(%s, %s, %s < 4u)", a[2], a[1], a[0])
	case dequant.ToF32:
		x = fmt.Sprintf("f32(bitcast<i32>(%s))", a[0])
	case dequant.I8ToF32:
		x = fmt.Sprintf("f32(bitcast<i32>(%s << 24u) >> 24u)", a[0])
	default:
		op, ok := infix[e.Op]
		if !ok {
			panic(fmt.Sprintf("wgsl: dequant op %d", e.Op))
		}
		x = a[0] + " " + op + " " + a[1]
	}
	return p.let(x)
}

// let emits `let NAME = x;` and returns NAME.
func (p *unitPrinter) let(x string) string {
	v := p.g.fresh("d")
	p.g.p("%slet %s = %s;", p.ind, v, x)
	return v
}

// genDequantize decodes a tensor in a storage dtype to f32: a block format
// a unit (vec4) per invocation, f16 and bf16 an element per invocation;
// an f32 input is copied.
func genDequantize(g *gen) (*codegen.Kernel, error) {
	if !isStored(g.in[0].DType) {
		return genCopy(g)
	}
	s := g.bindStored("in0", 0)
	n := numel(g.out[0])
	items, at := n, "i" // the item (an element, or a unit of a block format) that invocation i decodes
	if s.dt.IsBlock() {
		items = n / 4
	}
	if g.faultIs(FaultWrongIndex) {
		at = fmt.Sprintf("min(i + 1u, %du)", max(items, 1)-1)
	}
	if s.dt.IsBlock() {
		g.bind("out0", codegen.Write, g.out[0], "vec4<f32>", -1, 0)
		return g.elementwise(items, func() { g.p("  out0[i] = %s;", g.unit4(s, at+" * 4u", "  ")) }), nil
	}
	g.bind("out0", codegen.Write, g.out[0], "f32", -1, 0)
	return g.elementwise(items, func() { g.p("  out0[i] = %s;", g.elem(s, at, "  ")) }), nil
}

// gatherStored gathers rows of a table in a storage dtype (along an axis
// before the last, so rows are whole blocks), decoded to f32: a unit of
// four elements per invocation when the rows are whole units, else an
// element. An id out of range gives NaN, as the f32 gather does.
func gatherStored(g *gen) (*codegen.Kernel, error) {
	s := g.bindStored("in0", 0)
	g.bind("in1", codegen.Read, g.in[1], "i32", 1, -1)
	table := sizes(g.in[0])
	_, v, inner := outerInner(table, ir.NormAxis(g.attrs.Int("axis"), len(table)))
	nid := max(numel(g.in[1]), 1)
	w := 1
	if inner%4 == 0 {
		w = 4
	}
	elem := "f32"
	if w == 4 {
		elem = "vec4<f32>"
	}
	g.bind("out0", codegen.Write, g.out[0], elem, -1, 0)
	id := "in1[jj]"
	if g.faultIs(FaultWrongIndex) {
		id = "(in1[jj] + 1i)"
	}
	return g.elementwise(numel(g.out[0])/w, func() {
		g.p("  let c = (i * %du) %% %du;", w, inner)
		g.p("  let jj = ((i * %du) / %du) %% %du;", w, inner, nid)
		g.p("  let o = (i * %du) / %du;", w, inner*nid)
		g.p("  let id = %s;", id)
		nan := "f32_bits(0x7fc00000u)"
		if w == 4 {
			nan = "vec4<f32>(" + nan + ")"
		}
		g.p("  if (id < 0i || id >= %di) { out0[i] = %s; return; }", v, nan)
		src := fmt.Sprintf("(o * %du + u32(id)) * %du + c", v, inner)
		if w == 4 {
			g.p("  out0[i] = %s;", g.unit4(s, src, "  "))
		} else {
			g.p("  out0[i] = %s;", g.elem(s, src, "  "))
		}
	}), nil
}
