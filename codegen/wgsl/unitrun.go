package wgsl

import (
	"fmt"
	"strings"

	"github.com/tapml/tapml/codegen/dequant"
)

// A run is the units of a block-format weight that one invocation decodes
// together: a GEMV lane's whole blocks from a word (blockRun), or a tile
// load's units of one block from a unit whose index in the block, j, is a
// multiple of 4·n (unitRunOf). Every byte offset a run reads is a base (a
// let: the run's start, or the block's offset and j) plus constants, the
// base a known multiple of its alignment. runVal keeps offsets so, and the
// printer folds them: what the units share is computed once, and above
// all each 32-bit word of the run is loaded once, where a unit at a time
// loads two words for each unaligned read (Q4_0's and Q8_0's blocks start
// 2 bytes off a word in every other block). On the H200 Llama-3.2-1B's
// Q8_0 prefill went from 12.26 to 11.04 ms of GPU time so against a unit
// at a time (bench/results/2026-12-04-h200-scaled-fold.md).

// runVal is a value of a run's decoding: a constant k (base and expr
// ""), a let base plus the constant k with base a multiple of align, or
// (expr) any other value's let.
type runVal struct {
	base  string
	align uint32
	k     uint32
	expr  string
}

func (v runVal) isConst() bool { return v.expr == "" && v.base == "" }

func (v runVal) isOffset() bool { return v.expr == "" && v.base != "" }

// runPrinter prints a run's decoding.
type runPrinter struct {
	p      *unitPrinter
	wordOf map[string]string // the u32 index of a base, where known (blockRun's start)
	words  map[string]string // "base/index" to the let of that u32 of the buffer
}

// newRunPrinter prints runs of s; align is unitPrinter's, for reads whose
// offsets do not fold.
func newRunPrinter(g *gen, s stored, ind string, align int) *runPrinter {
	return &runPrinter{p: &unitPrinter{g: g, s: s, ind: ind, align: align, seen: map[string]string{}}, wordOf: map[string]string{}, words: map[string]string{}}
}

// leaves are the run's leaves for a unit of the block at block whose
// first element is elem.
func (a *runPrinter) leaves(block, elem runVal) dequant.Leaves[runVal] {
	return dequant.Leaves[runVal]{Block: block, Elem: elem, Lanes: []runVal{{k: 0}, {k: 1}, {k: 2}, {k: 3}},
		Const: func(k uint32) runVal { return runVal{k: k} }}
}

// render is v's WGSL (a let's name, a constant or base + k).
func (a *runPrinter) render(v runVal) string {
	switch {
	case v.expr != "":
		return v.expr
	case v.base == "":
		return fmt.Sprintf("%du", v.k)
	case v.k == 0:
		return v.base
	}
	return a.p.let(fmt.Sprintf("%s + %du", v.base, v.k))
}

// load is the u32 at word index base/4 + i of the buffer (base a multiple
// of 4), loaded once; clamp keeps an index that may pass the buffer's end
// (the word after an unaligned read's, which a shift of 0 discards) in it.
// Unaligned reads clamp both of their words: on the H200 Llama-3.2-1B's
// Q8_0 prefill ran 0.3-0.6% slower with the first one unclamped
// (bench/results/2026-12-04-h200-scaled-fold.md, section 9).
func (a *runPrinter) load(base string, i uint32, clamp bool) string {
	key := fmt.Sprintf("%s/%d", base, i)
	if w, ok := a.words[key]; ok {
		return w
	}
	idx, ok := a.wordOf[base]
	if !ok {
		idx = a.p.let(base + " >> 2u")
	}
	at := fmt.Sprintf("%s + %du", idx, i)
	if clamp {
		at = fmt.Sprintf("min(%s, %du)", at, a.p.s.last)
	}
	w := a.p.let(fmt.Sprintf("%s[%s]", a.p.s.name, at))
	a.words[key] = w
	return w
}

// word is the u32 at byte offset v (an offset) of the buffer.
func (a *runPrinter) word(v runVal) string {
	if v.align%4 == 0 {
		if v.k%4 == 0 {
			return a.load(v.base, v.k/4, false)
		}
		// Both words hold bytes the read takes.
		sh := v.k % 4 * 8
		return a.p.let(fmt.Sprintf("(%s >> %du) | (%s << %du)", a.load(v.base, v.k/4, false), sh, a.load(v.base, v.k/4+1, false), 32-sh))
	}
	// A misalignment known only at run time, the same for every read of
	// the run whose k has the same remainder: the base moved by it.
	b := v.base
	if r := v.k % 4; r != 0 {
		b = a.p.let(fmt.Sprintf("%s + %du", v.base, r))
	}
	sh := a.p.let(fmt.Sprintf("(%s & 3u) * 8u", b))
	lo, hi := a.load(b, v.k/4, true), a.load(b, v.k/4+1, true)
	return a.p.let(fmt.Sprintf("(%s >> %s) | ((%s << (31u - %s)) << 1u)", lo, sh, hi, sh))
}

// node is a run's value of op e over its arguments' values: integer
// offsets folded while they stay a let plus a constant, each word read
// from the words loaded once, the rest printed as unitPrinter does.
func (a *runPrinter) node(e *dequant.Expr, args []runVal) runVal {
	x := args[0]
	var y runVal
	if len(args) > 1 {
		y = args[1]
	}
	switch e.Op {
	case dequant.Add, dequant.Sub, dequant.Mul, dequant.Shl, dequant.Shr, dequant.And, dequant.Or:
		switch {
		case x.isConst() && y.isConst():
			return runVal{k: foldInt(e.Op, x.k, y.k)}
		case y.isConst() && y.k == 0 && e.Op != dequant.Mul && e.Op != dequant.And:
			return x // x+0, x-0, x<<0, x>>0, x|0
		case e.Op == dequant.Add && x.isOffset() && y.isConst():
			return runVal{base: x.base, align: x.align, k: x.k + y.k}
		case e.Op == dequant.Add && x.isConst() && y.isOffset():
			return runVal{base: y.base, align: y.align, k: y.k + x.k}
		case e.Op == dequant.Add && x.isOffset() && y.isOffset():
			return runVal{base: a.p.let(x.base + " + " + y.base), align: min(x.align, y.align), k: x.k + y.k}
		case e.Op == dequant.Sub && x.isOffset() && y.isConst() && x.k >= y.k:
			return runVal{base: x.base, align: x.align, k: x.k - y.k}
		case e.Op == dequant.And && x.isOffset() && y.isConst() && y.k < 1<<31 && y.k&(y.k+1) == 0 && x.align%(y.k+1) == 0 && x.k <= y.k:
			return runVal{k: x.k} // the base's bits are all above the mask
		case e.Op == dequant.Shr && x.isOffset() && y.isConst() && y.k < 32 && x.align%(1<<y.k) == 0:
			return runVal{base: a.p.let(fmt.Sprintf("%s >> %du", x.base, y.k)), align: x.align >> y.k, k: x.k >> y.k}
		case (e.Op == dequant.Mul || e.Op == dequant.Shl && y.k < 32) && x.isOffset() && y.isConst():
			m := y.k
			if e.Op == dequant.Shl {
				m = 1 << y.k
			}
			return runVal{base: a.p.let(fmt.Sprintf("%s * %du", x.base, m)), align: x.align * m, k: x.k * m}
		}
	case dequant.Word:
		if x.isOffset() {
			return runVal{expr: a.word(x)}
		}
	case dequant.Byte, dequant.Half:
		// Within one word of a base whose alignment is known: that word's
		// bits, shifted by a constant.
		if x.isOffset() && x.align%4 == 0 {
			w := a.load(x.base, x.k/4, false)
			if e.Op == dequant.Byte {
				return runVal{expr: a.p.let(fmt.Sprintf("(%s >> %du) & 0xffu", w, x.k%4*8))}
			}
			return runVal{expr: a.p.let(fmt.Sprintf("half_to_f32((%s >> %du) & 0xffffu)", w, x.k%4*8))}
		}
	case dequant.Select:
		if x.isConst() {
			if x.k < 4 {
				return args[1]
			}
			return args[2]
		}
	}
	r := make([]string, len(args))
	for i, v := range args {
		r[i] = a.render(v)
	}
	return runVal{expr: a.p.let(a.p.expr(e, r))}
}

// lanes is the WGSL of a unit's four lanes.
func (a *runPrinter) lanes(vs []runVal) string {
	s := make([]string, len(vs))
	for i, v := range vs {
		s[i] = a.render(v)
	}
	return "vec4<f32>(" + strings.Join(s, ", ") + ")"
}

// foldInt computes an integer op of dequant's on constants.
func foldInt(op dequant.Op, a, b uint32) uint32 {
	switch op {
	case dequant.Add:
		return a + b
	case dequant.Sub:
		return a - b
	case dequant.Mul:
		return a * b
	case dequant.Shl:
		return a << b
	case dequant.Shr:
		return a >> b
	case dequant.And:
		return a & b
	}
	return a | b
}
