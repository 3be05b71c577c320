package llvm

import (
	"fmt"

	"github.com/llir/llvm/ir/constant"
	"github.com/llir/llvm/ir/enum"
	"github.com/llir/llvm/ir/types"
	"github.com/llir/llvm/ir/value"

	"github.com/tapml/tapml/codegen"
	"github.com/tapml/tapml/ir"
)

// ropeRotation is what genRope and genRopeKVWrite share: the rotated dims
// of a head, the pairing (style), the attention factor, the faults and
// the frequency of pair i.
type ropeRotation struct {
	dims, half  int64
	interleaved bool
	shift       bool // FaultWrongIndex: pair i turns by pair i+1's angle
	m           float32
	posB        int
	freqAt      func(i value.Value) value.Value
}

// ropeRotation prepares the rotation of heads of dh elements by calls of
// s rows: freq_i = 1/powf(theta, 2i/dims) computed here exactly as the
// reference does and baked, or read from the row of the freqs table for
// the length pos+S the call reaches (pos is binding posB; the table, where
// the op has one, is the input after it).
func (g *gen) ropeRotation(s, dh int64, posB int) *ropeRotation {
	tableB := -1
	if len(g.in) > posB+1 {
		tableB = posB + 1
	}
	dims := g.attrs.Int("dims")
	if dims == 0 {
		dims = dh
	}
	rr := &ropeRotation{dims: dims, half: dims / 2, interleaved: g.attrs.String("style") != "half",
		m: float32(g.attrs.Float("attention_factor")), posB: posB}
	rr.shift = g.faultOnce(FaultWrongIndex)
	wrong := g.faultOnce(FaultWrongConstant)
	if tableB >= 0 {
		rows := int64(g.in[tableB].Shape[0].Size)
		row := g.clampIdx(g.addi(g.pos(posB), s-g.attrs.Int("original_max")), rows)
		base := g.muli(row, rr.half)
		rr.freqAt = func(i value.Value) value.Value {
			f := g.ldF(tableB, g.add(base, i))
			if wrong {
				f = g.fmul(f, cf(1.1))
			}
			return f
		}
	} else if rr.half > 0 {
		theta := float32(g.attrs.Float("theta"))
		if wrong {
			theta *= 1.1
		}
		freq := make([]constant.Constant, rr.half)
		for i, f := range ir.RopeFreqs(theta, int(dims), g.attrs.Floats("freq_factors")) {
			freq[i] = cf(f)
		}
		table := g.global("freq", types.Float, freq)
		rr.freqAt = func(i value.Value) value.Value {
			fp := g.cur.NewGetElementPtr(types.Float, table, i)
			fp.InBounds = true
			return g.cur.NewLoad(types.Float, fp)
		}
	}
	return rr
}

// rotateRow rotates the h heads of row r (at position pos+r) of binding
// src, starting at srcBase, into binding dst at dstBase: for each pair i
// the angle p·freq_i in f32, its cos and sin in double rounded to f32,
// times the attention factor, applied to every head; the dims beyond
// `dims` pass through.
func (g *gen) rotateRow(rr *ropeRotation, r value.Value, h int64, src, dst int, srcBase, dstBase value.Value) {
	dh := int64(sizes(g.bindings[src].Type)[2])
	p := g.cur.NewSIToFP(g.add(g.pos(rr.posB), r), types.Float)
	g.loop(c64(0), c64(rr.half), func(i value.Value) {
		fi := i
		if rr.shift {
			fi = g.wrapNext(i, rr.half)
		}
		val := g.fmul(p, rr.freqAt(fi))
		fcr, fci := g.viaDouble("cos", val), g.viaDouble("sin", val)
		if rr.m != 1 {
			fcr, fci = g.fmul(fcr, cf(rr.m)), g.fmul(fci, cf(rr.m))
		}
		var i0, i1 value.Value
		if rr.interleaved {
			i0 = g.muli(i, 2)
			i1 = g.addi(i0, 1)
		} else {
			i0, i1 = i, g.addi(i, rr.half)
		}
		g.loop(c64(0), c64(h), func(hh value.Value) {
			sb, db := g.add(srcBase, g.muli(hh, dh)), g.add(dstBase, g.muli(hh, dh))
			v0, v1 := g.ldF(src, g.add(sb, i0)), g.ldF(src, g.add(sb, i1))
			g.stF(dst, g.add(db, i0), g.ov(g.fsub(g.fmul(v0, fcr), g.fmul(v1, fci))))
			g.stF(dst, g.add(db, i1), g.ov(g.fadd(g.fmul(v0, fci), g.fmul(v1, fcr))))
		})
	})
	if rr.dims < dh { // the dims beyond `dims` pass through
		g.loop(c64(0), c64(h), func(hh value.Value) {
			sb, db := g.add(srcBase, g.muli(hh, dh)), g.add(dstBase, g.muli(hh, dh))
			g.loop(c64(rr.dims), c64(dh), func(j value.Value) {
				g.st(dst, g.add(db, j), g.ld(src, g.add(sb, j)))
			})
		})
	}
}

// genRopeKVWrite is rope_kv_write: bindings 0 and 1 are the k and v
// caches (ReadWrite: inputs and outputs 0 and 1), then q, k, v, pos, the
// optional freqs table and the rotated q. An item is one row s: q's row
// rotated into the output, k's rotated into cache row pos+s, v's copied
// into the v cache's. Rows that do not fit either cache return
// StatusPosRange before anything is written.
func genRopeKVWrite(g *gen) error {
	if err := checkFloat(g.in[2], g.in[3], g.out[2]); err != nil {
		return err
	}
	kc, vc := g.in[0], g.in[1]
	g.bind("k_cache", codegen.ReadWrite, kc, 0, 0)
	g.bind("v_cache", codegen.ReadWrite, vc, 1, 1)
	for i := 2; i < len(g.in); i++ {
		g.bind(fmt.Sprintf("in%d", i), codegen.Read, g.in[i], i, -1)
	}
	g.bind("out2", codegen.Write, g.out[2], -1, 2)
	out := len(g.in)
	qs, ks := sizes(g.in[2]), sizes(g.in[3])
	s, h, kh, dh := int64(qs[0]), int64(qs[1]), int64(ks[1]), int64(qs[2])
	rr := g.ropeRotation(s, dh, 5)
	g.setItems(s)
	if s*h*dh == 0 {
		g.setItems(0)
	}
	pos := g.pos(5)
	t := int64(min(sizes(kc)[0], sizes(vc)[0]))
	g.failIf(g.cur.NewOr(g.icmp(enum.IPredSLT, pos, c64(0)), g.icmp(enum.IPredSGT, g.addi(pos, s), c64(t))), StatusPosRange)
	row := kh * dh
	g.loop(g.lo, g.hi, func(r value.Value) {
		qBase := g.muli(r, h*dh)
		g.rotateRow(rr, r, h, 2, out, qBase, qBase)
		src, dst := g.muli(r, row), g.muli(g.add(pos, r), row)
		g.rotateRow(rr, r, kh, 3, 0, src, dst)
		g.loop(c64(0), c64(row), func(j value.Value) {
			g.st(1, g.add(dst, j), g.ld(4, g.add(src, j)))
		})
	})
	g.finish()
	return nil
}
