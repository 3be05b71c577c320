package wgsl

import (
	"fmt"
	"strings"

	"github.com/tapml/tapml/codegen/dequant"
)

// A run of units (unitRunOf) lies in one block, from a unit whose index
// in the block, j, is a multiple of 4·n: each unit's element index is j
// plus a constant, and every byte offset it reads is the block's offset
// (a multiple of the format's alignment) plus such terms. runVal keeps
// those offsets as a let plus a constant, so that what the units share is
// computed once: above all, each 32-bit word of the run is loaded once,
// where a unit at a time loads two words for each unaligned read (Q4_0's
// and Q8_0's runs start 2 bytes off a word in every other block). On the
// H200 Llama-3.2-1B's Q8_0 prefill went from 12.26 to 11.04 ms of GPU
// time so (bench/results/2026-12-04-h200-scaled-fold.md).

// runVal is a value of a run's decoding: a constant (base ""), a let
// base plus the constant k with base a multiple of align, or (expr) any
// other value's let.
type runVal struct {
	base  string
	align uint32
	k     uint32
	expr  string
}

func (v runVal) isConst() bool { return v.expr == "" && v.base == "" }

// affineRun prints a run's decoding.
type affineRun struct {
	p     *unitPrinter
	words map[string]string // "base/index" to the let of that u32 of the buffer
}

// render is v's WGSL (a let's name, a constant or base + k).
func (a *affineRun) render(v runVal) string {
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

// word is the u32 at byte offset v (affine) of the buffer.
func (a *affineRun) word(v runVal) string {
	buf, last := a.p.s.name, a.p.s.last
	// load is the u32 at word index base/4 + i (base a multiple of 4).
	load := func(base string, i uint32, clamp bool) string {
		key := fmt.Sprintf("%s/%d", base, i)
		if w, ok := a.words[key]; ok {
			return w
		}
		idx := a.p.let(base + " >> 2u")
		at := fmt.Sprintf("%s + %du", idx, i)
		if clamp { // the word after an unaligned read's may lie past the end
			at = fmt.Sprintf("min(%s, %du)", at, last)
		}
		w := a.p.let(fmt.Sprintf("%s[%s]", buf, at))
		a.words[key] = w
		return w
	}
	if v.align%4 == 0 {
		if v.k%4 == 0 {
			return load(v.base, v.k/4, false)
		}
		sh := v.k % 4 * 8
		return a.p.let(fmt.Sprintf("(%s >> %du) | (%s << %du)", load(v.base, v.k/4, false), sh, load(v.base, v.k/4+1, true), 32-sh))
	}
	// A misalignment known only at run time, the same for every read of
	// the run whose k has the same remainder: the base moved by it.
	b := v.base
	if r := v.k % 4; r != 0 {
		b = a.p.let(fmt.Sprintf("%s + %du", v.base, r))
	}
	sh := a.p.let(fmt.Sprintf("(%s & 3u) * 8u", b))
	lo, hi := load(b, v.k/4, true), load(b, v.k/4+1, true)
	return a.p.let(fmt.Sprintf("(%s >> %s) | ((%s << (31u - %s)) << 1u)", lo, sh, hi, sh))
}

// node is a run's value of op e over its arguments' values: integer
// offsets folded while they stay a let plus a constant, each unaligned
// word read from words loaded once, the rest printed as unitPrinter does.
func (a *affineRun) node(e *dequant.Expr, args []runVal) runVal {
	x := args[0]
	var y runVal
	if len(args) > 1 {
		y = args[1]
	}
	affine := x.expr == "" && x.base != ""
	switch e.Op {
	case dequant.Add, dequant.Sub, dequant.Mul, dequant.Shl, dequant.Shr, dequant.And, dequant.Or:
		switch {
		case x.isConst() && y.isConst():
			return runVal{k: foldInt(e.Op, x.k, y.k)}
		case y.isConst() && y.k == 0 && e.Op != dequant.Mul && e.Op != dequant.And:
			return x // x+0, x-0, x<<0, x>>0, x|0
		case e.Op == dequant.Add && y.isConst() && affine:
			return runVal{base: x.base, align: x.align, k: x.k + y.k}
		case e.Op == dequant.Add && x.isConst() && y.expr == "" && y.base != "":
			return runVal{base: y.base, align: y.align, k: y.k + x.k}
		case e.Op == dequant.Add && affine && y.expr == "" && y.base != "":
			return runVal{base: a.p.let(x.base + " + " + y.base), align: min(x.align, y.align), k: x.k + y.k}
		case e.Op == dequant.Sub && y.isConst() && affine && x.k >= y.k:
			return runVal{base: x.base, align: x.align, k: x.k - y.k}
		case e.Op == dequant.And && y.isConst() && affine && y.k < 1<<31 && y.k&(y.k+1) == 0 && x.align%(y.k+1) == 0 && x.k <= y.k:
			return runVal{k: x.k} // the base's bits are all above the mask
		case e.Op == dequant.Shr && y.isConst() && affine && y.k < 32 && x.align%(1<<y.k) == 0:
			return runVal{base: a.p.let(fmt.Sprintf("%s >> %du", x.base, y.k)), align: x.align >> y.k, k: x.k >> y.k}
		case (e.Op == dequant.Mul || e.Op == dequant.Shl && y.k < 32) && y.isConst() && affine:
			m := y.k
			if e.Op == dequant.Shl {
				m = 1 << y.k
			}
			return runVal{base: a.p.let(fmt.Sprintf("%s * %du", x.base, m)), align: x.align * m, k: x.k * m}
		}
	case dequant.Word:
		if affine {
			return runVal{expr: a.word(x)}
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
func (a *affineRun) lanes(vs []runVal) string {
	s := make([]string, len(vs))
	for i, v := range vs {
		s[i] = a.render(v)
	}
	return "vec4<f32>(" + strings.Join(s, ", ") + ")"
}
