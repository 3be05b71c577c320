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
// subnormals included, infinities and NaNs kept, in integer and f32
// arithmetic only (an int-to-float conversion runs at an eighth of the
// rate of an add on NVIDIA GPUs, and decoding f16 weights is most of a
// GEMV's work): the magnitude's bits move to f32's place and its exponent
// is rebased (by 112, or to 255 for infinities and NaNs); a subnormal m
// is (2^-14·(1 + m/1024) - 2^-14)·±1, each step exact (-0 included).
const f16Helper = `fn half_to_f32(h: u32) -> f32 {
  let s = (h & 0x8000u) << 16u;
  let mag = (h & 0x7fffu) << 13u;
  let big = bitcast<f32>(s | (mag + select(0x38000000u, 0x70000000u, mag >= 0x0f800000u)));
  let tiny = (bitcast<f32>(mag + 0x38800000u) - 6.103515625e-05f) * bitcast<f32>(s | 0x3f800000u);
  return select(big, tiny, mag < 0x00800000u);
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
func (g *gen) bindStored(name string, i int) stored { return g.bindStoredAs(name, i, "u32") }

// bindStoredAs declares input i, in a storage dtype, as an array of elem
// (u32, or vec4<u32> for 16-byte reads of whole rows).
func (g *gen) bindStoredAs(name string, i int, elem string) stored {
	t := g.in[i]
	g.bind(name, codegen.Read, t, elem, i, -1)
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
	align int               // alignment of the block offset
	seen  map[string]string // if not nil, the let of each expression printed
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
func (p *unitPrinter) node(e *dequant.Expr, a []string) string { return p.let(p.expr(e, a)) }

// expr is the WGSL of op e over its arguments' names (emitting the lets
// an unaligned read needs).
func (p *unitPrinter) expr(e *dequant.Expr, a []string) string {
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
	case dequant.ToF32, dequant.I8ToF32:
		x = "(" + biased(e.Op, a[0]) + " - " + magic + ")"
	default:
		op, ok := infix[e.Op]
		if !ok {
			panic(fmt.Sprintf("wgsl: dequant op %d", e.Op))
		}
		x = a[0] + " " + op + " " + a[1]
	}
	return x
}

// The formats convert small integers only (fields of at most 8 bits, less
// a bias): added to the bits of magic, 1.5·2^23, an integer x in ±2^22
// makes the f32 magic + x exactly, so x is that less magic, without an
// int-to-float conversion (an eighth of an add's rate on NVIDIA GPUs).
const magic = "12582912.0f"

// biased is the WGSL f32 magic + x of a ToF32 or I8ToF32 of x.
func biased(op dequant.Op, x string) string {
	if op == dequant.I8ToF32 {
		return fmt.Sprintf("bitcast<f32>((%s ^ 0x80u) + 0x4b3fff80u)", x) // x - 256 when x >= 128
	}
	return fmt.Sprintf("bitcast<f32>(%s + 0x4b400000u)", x)
}

// let emits `let NAME = x;` and returns NAME (an earlier let's, where
// seen has one for x).
func (p *unitPrinter) let(x string) string {
	if v, ok := p.seen[x]; ok {
		return v
	}
	v := p.g.fresh("d")
	p.g.p("%slet %s = %s;", p.ind, v, x)
	if p.seen != nil {
		p.seen[x] = v
	}
	return v
}

// unitRun returns the vec4<f32> of each of n consecutive units of a
// block-format s whose first element has the flat index el (a multiple
// of 4n, with 4n dividing the block: the units share a block). The block's
// offset, its scale and any other value the units share are computed once
// (each distinct expression is one let), where n calls of unit4 would
// decode each unit's from scratch.
func (g *gen) unitRun(s stored, el string, n int, ind string) []string {
	return g.unitRunOf(s, dequant.Unit(s.dt), el, n, ind)
}

// unitRunOf is unitRun of the expression e of a unit of s (a part of its
// decoding, such as dequant.Scaled's integers): with a block-level e
// (one that reads neither the element nor the lane) its value for the
// block, vec4-wide. The run's offsets are folded (unitrun.go): each word
// it reads is loaded once.
func (g *gen) unitRunOf(s stored, e *dequant.Expr, el string, n int, ind string) []string {
	g.useHelper("half_to_f32")
	elems, bytes := s.dt.Block()
	blk, j := g.fresh("blk"), g.fresh("j")
	g.p("%slet %s = (%s) / %du * %du;", ind, blk, el, elems, bytes)
	g.p("%slet %s = (%s) %% %du;", ind, j, el, elems)
	a := newRunPrinter(g, s, ind, blockAlign(bytes))
	var out []string
	for u := range n {
		l := a.leaves(runVal{base: blk, align: uint32(blockAlign(bytes))}, runVal{base: j, align: uint32(4 * n), k: uint32(4 * u)})
		out = append(out, a.lanes(dequant.Walk(e, l, a.node)))
	}
	return out
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

// runBlocks is the number of blocks of format dt in a run (the part of a
// row one GEMV lane decodes per step): the fewest whose bytes are whole
// 32-bit words, so that every run of a row starts on a word when the row
// does.
func runBlocks(dt ir.DType) int {
	_, bytes := dt.Block()
	return 4 / blockAlign(bytes)
}

// runBlock is one block of a run, decoded: its elements as vec4<f32>,
// four at a time, over the block's scale when the format multiplies every
// element by one (Q4_0, Q5_0, Q8_0: the sum of a block's products is
// taken once by it), else ("") the elements themselves.
type runBlock struct {
	scale string
	units []string
}

// blockRun decodes a run of p blocks of s that starts at the u32 word wb
// (a let). Every offset in the run is a constant from wb: the decoding
// folds to constant shifts of the run's words, each read once, whatever
// the block's alignment (unitrun.go).
func (g *gen) blockRun(s stored, wb string, p int, ind string) []runBlock {
	g.useHelper("half_to_f32")
	elems, bytes := s.dt.Block()
	start := "(" + wb + " * 4u)" // the run's byte offset, its word known
	a := newRunPrinter(g, s, ind, 1)
	a.wordOf[start] = wb
	unit, scale := dequant.Unit(s.dt), (*dequant.Expr)(nil)
	if unit.Op == dequant.FMul && blockUniform(unit.Args[1]) {
		unit, scale = unit.Args[0], unit.Args[1]
	}
	var out []runBlock
	for b := range p {
		l := a.leaves(runVal{base: start, align: 4, k: uint32(b * bytes)}, runVal{})
		var rb runBlock
		if scale != nil {
			rb.scale = a.render(dequant.Walk(scale, l, a.node)[0])
		}
		for e := 0; e < elems; e += 4 {
			l.Elem = runVal{k: uint32(e)}
			rb.units = append(rb.units, a.lanes(dequant.Walk(unit, l, a.node)))
		}
		out = append(out, rb)
	}
	return out
}

// blockUniform reports whether e is the same for every element of a block.
func blockUniform(e *dequant.Expr) bool {
	if e.Op == dequant.Elem || e.Op == dequant.Lane {
		return false
	}
	for _, a := range e.Args {
		if !blockUniform(a) {
			return false
		}
	}
	return true
}

// halfRun returns the two vec4<f32> of the eight f16 or bf16 elements in
// v, a vec4<u32> (a let), in order.
func (s stored) halfRun(g *gen, v string) []string {
	var lanes []string
	for _, c := range []string{"x", "y", "z", "w"} {
		w := v + "." + c
		if s.dt == ir.BF16 {
			lanes = append(lanes, "bitcast<f32>("+w+" << 16u)", "bitcast<f32>("+w+" & 0xffff0000u)")
			continue
		}
		g.useHelper("half_to_f32")
		lanes = append(lanes, "half_to_f32("+w+" & 0xffffu)", "half_to_f32("+w+" >> 16u)")
	}
	return []string{"vec4<f32>(" + strings.Join(lanes[:4], ", ") + ")", "vec4<f32>(" + strings.Join(lanes[4:], ", ") + ")"}
}

// hwHalf reports whether input i is an f16 weight the kernel may bind as
// f16 (the target has the f16 feature, and with it 16-bit storage): its
// loads then convert to f32 by one conversion per element, where
// half_to_f32's bit rebasing over array<u32> takes several integer ops
// (the most of a tiled matmul's tile loads; webgpu keeps that path).
func (g *gen) hwHalf(i int) bool { return g.in[i].DType == ir.F16 && g.feat.F16 }

// enableF16 enables f16 for a kernel that binds an f16 weight (the first
// line of the kernel; f16 compute enables it itself).
func (g *gen) enableF16() {
	if !g.half {
		g.p("enable f16;")
	}
}

// loadHalf emits the load of element (or vec4) idx of the f16 binding
// name into a let and returns its f32 (elem "f32" or "vec4<f32>").
func (g *gen) loadHalf(name, idx, elem, ind string) string {
	v := g.fresh("h")
	g.p("%slet %s = %s[%s];", ind, v, name, idx)
	return convert(elem, v)
}
