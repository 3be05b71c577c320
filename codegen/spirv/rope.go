package spirv

import (
	"math"

	"github.com/tapml/tapml/codegen"
	"github.com/tapml/tapml/ir"
)

// Cody-Waite split of 2π for the range reduction of rope's angles: c1 has
// few significant bits, so k·c1 is exact for the multiples k that occur.
const (
	twoPiHi  = 6.28125
	twoPiLo  = 2*math.Pi - 6.28125
	invTwoPi = 1 / (2 * math.Pi)
)

// genRope generates rotary position embedding as the CPU reference
// computes it: pair i of the row at position p = pos+s turns by the f32
// angle p·freq[i], freq[i] = 1/powf(theta, 2i/dims) baked in a table
// (computed in Go exactly as the reference does). The angle is reduced to
// [-π, π] before Sin and Cos, where GLSL's precision is defined. One
// invocation per output element.
func genRope(k *kern) error {
	x, pos := k.in[0], k.in[1]
	xs := sizes(x)
	h, dh := xs[1], xs[2]
	dims := int(k.attrs.Int("dims"))
	if dims == 0 {
		dims = dh
	}
	half := dims / 2
	interleaved := k.attrs.String("style") == "interleaved"
	theta := float32(k.attrs.Float("theta"))
	if k.faultIs(FaultWrongConstant) {
		theta *= 1.1
	}
	bits := make([]uint32, half)
	for i, f := range ir.RopeFreqs(theta, dims, k.attrs.Floats("freq_factors")) {
		bits[i] = math.Float32bits(f)
	}
	X := k.bind("in0", codegen.Read, x, 0, -1)
	P := k.bind("in1", codegen.Read, pos, 1, -1)
	O := k.bind("out0", codegen.Write, k.out[0], -1, 0)
	k.ins, k.outs = []Array{X, P}, []Array{O}
	freq := k.m.Table(k.m.F32, bits, "freq")
	wrongIndex := k.faultIs(FaultWrongIndex)
	b := k.b
	k.elementwise(numel(x), func(i Value) {
		d := b.RemU(i, dh)
		sh := b.DivU(i, dh)
		b.IfElse(b.Ge(d, b.U(dims)), func() {
			b.Store(O, i, b.Load(X, i))
		}, func() {
			rowBase := b.MulU(sh, dh)
			var pair, i0, first Value
			if interleaved {
				pair = b.DivU(d, 2)
				i0 = b.Add(rowBase, b.MulU(pair, 2))
				first = b.Eq(b.RemU(d, 2), b.U(0))
			} else {
				first = b.Lt(d, b.U(half))
				pair = b.Select(first, d, b.Sub(d, b.U(half)))
				i0 = b.Add(rowBase, pair)
			}
			i1 := i0
			if interleaved {
				i1 = b.AddU(i0, 1)
			} else {
				i1 = b.AddU(i0, half)
			}
			if wrongIndex {
				pair = b.MinU(b.AddU(pair, 1), half-1)
			}
			row := b.Bitcast(k.m.I32, b.DivU(sh, h))
			p := b.ToF(b.Add(b.Load(P, b.U(0)), row))
			angle := b.Mul(p, b.Load(freq, pair))
			// r = angle - 2π·round(angle/2π), in two steps.
			q := b.Ext(glslRound, b.Mul(angle, b.F(invTwoPi)))
			r := b.Sub(b.Sub(angle, b.Mul(q, b.F(twoPiHi))), b.Mul(q, b.F(float32(twoPiLo))))
			fcr, fci := b.Ext(glslCos, r), b.Ext(glslSin, r)
			v0, v1 := b.Load(X, i0), b.Load(X, i1)
			y0 := b.Sub(b.Mul(v0, fcr), b.Mul(v1, fci))
			y1 := b.Add(b.Mul(v0, fci), b.Mul(v1, fcr))
			b.Store(O, i, k.ov(b.Select(first, y0, y1)))
		})
	})
	return nil
}
