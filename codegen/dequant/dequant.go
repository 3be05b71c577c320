// Package dequant describes, for kernels, how the block formats of stored
// weights (ir.Q4_0 ... ir.Q6_K) decode: for each format, the f32 value of
// one of four consecutive elements of a block (a unit), as an expression
// over 32-bit words of the block's bytes. Kernel generators print the
// expression in their language (codegen/wgsl for every GPU target,
// codegen/llvm), so each format's layout is written once for the kernels;
// the CPU reference decodes with its own code (tensor/quant), which judges
// them.
//
// A unit is four elements j..j+3 of one block (j a multiple of 4): every
// format keeps the bits of four consecutive elements in four consecutive
// bytes of each of its streams (low bits, high bits), so a unit reads one
// 32-bit word per stream, and a scale or two, whatever the format. Kernels
// that read packed weights a unit at a time read whole words, and adjacent
// invocations reading adjacent units read adjacent words.
//
// The decoding is exact on every target: each product of an f16 scale and
// a small integer fits f32's 24-bit significand, and each value rounds
// once (a final add of a minimum), so a correct kernel gives ggml's bits.
package dequant

import "github.com/tapml/tapml/ir"

// Op is an expression's operation. Integers are u32 (arithmetic wraps);
// floats are f32.
type Op uint8

const (
	Const   Op = iota // the u32 constant K
	Block             // the byte offset of the unit's block in the tensor
	Elem              // the index of the unit's first element in its block (a multiple of 4)
	Lane              // the element's index in the unit, 0..3
	Word              // the u32 at byte offset Args[0] (any alignment), little-endian
	Byte              // the byte at offset Args[0]
	Half              // the f16 at the even byte offset Args[0], as f32 (exactly)
	Add               // Args[0] + Args[1]
	Sub               // Args[0] - Args[1] (wrapping)
	Mul               // Args[0] * Args[1]
	Shl               // Args[0] << Args[1] (Args[1] < 32)
	Shr               // Args[0] >> Args[1] (logical; Args[1] < 32)
	And               // Args[0] & Args[1]
	Or                // Args[0] | Args[1]
	Select            // Args[1] when Args[0] < 4 (a sub-block index), else Args[2]
	ToF32             // Args[0]'s bits as i32, converted to f32
	I8ToF32           // Args[0] (0..255) as a signed byte, converted to f32
	FMul              // Args[0] · Args[1]
	FAdd              // Args[0] + Args[1]
	FSub              // Args[0] - Args[1]
)

// Expr is an expression of a unit's decoding. Generators print each
// distinct subexpression once per unit (expressions are DAGs: a subtree
// shared by several parents is one value), and the subexpressions that do
// not depend on Lane once for the four lanes.
type Expr struct {
	Op   Op
	K    uint32 // Const's value
	Args []*Expr
}

// IsFloat reports whether e is an f32 value.
func (e *Expr) IsFloat() bool {
	switch e.Op {
	case Half, ToF32, I8ToF32, FMul, FAdd, FSub:
		return true
	}
	return false
}

// DependsOnLane reports whether e's value differs between the lanes.
func (e *Expr) DependsOnLane() bool {
	if e.Op == Lane {
		return true
	}
	for _, a := range e.Args {
		if a.DependsOnLane() {
			return true
		}
	}
	return false
}

func op(o Op, args ...*Expr) *Expr { return &Expr{Op: o, Args: args} }
func c(k uint32) *Expr             { return &Expr{Op: Const, K: k} }

var (
	block = op(Block)
	elem  = op(Elem)
	lane  = op(Lane)
)

func add(a, b *Expr) *Expr   { return op(Add, a, b) }
func sub(a, b *Expr) *Expr   { return op(Sub, a, b) }
func mul(a, b *Expr) *Expr   { return op(Mul, a, b) }
func shl(a, b *Expr) *Expr   { return op(Shl, a, b) }
func shr(a, b *Expr) *Expr   { return op(Shr, a, b) }
func and(a, b *Expr) *Expr   { return op(And, a, b) }
func or(a, b *Expr) *Expr    { return op(Or, a, b) }
func word(off *Expr) *Expr   { return op(Word, off) }
func byteAt(off *Expr) *Expr { return op(Byte, off) }
func half(off *Expr) *Expr   { return op(Half, off) }
func f32(x *Expr) *Expr      { return op(ToF32, x) }
func fmul(a, b *Expr) *Expr  { return op(FMul, a, b) }

// at is the byte offset off within the block.
func at(off uint32) *Expr { return add(block, c(off)) }

// field is the bits of the lane's byte in word w, from bit shift of the
// byte up, width bits wide: (w >> (8·lane + shift)) & (2^width - 1).
func field(w, shift *Expr, width uint32) *Expr {
	return and(shr(w, add(mul(lane, c(8)), shift)), c(1<<width-1))
}

// Unit returns the expression of the f32 value of element Elem+Lane of a
// block of dt, or nil when dt is not a block format.
func Unit(dt ir.DType) *Expr { return units[dt] }

// Scaled splits dt's unit into an integer times a scale its whole block
// shares, for the formats whose values are one (Q4_0, Q5_0, Q8_0): q is
// the element's integer as f32 (|q| <= 128, exact in f16) and scale the
// block's f16 scale as f32 (it reads neither Elem nor Lane), so that
// q·scale is the unit. A kernel can then multiply the integers exactly in
// f16 and apply each block's scale to its partial sums. ok is false for
// the formats with an offset or scales of sub-blocks.
func Scaled(dt ir.DType) (q, scale *Expr, ok bool) {
	u := units[dt]
	if u == nil || u.Op != FMul || u.Args[0].Op != ToF32 && u.Args[0].Op != I8ToF32 || u.Args[1].Op != Half || reads(u.Args[1], Elem) || reads(u.Args[1], Lane) {
		return nil, nil, false
	}
	return u.Args[0], u.Args[1], true
}

// reads reports whether e depends on the leaf op.
func reads(e *Expr, leaf Op) bool {
	if e.Op == leaf {
		return true
	}
	for _, a := range e.Args {
		if reads(a, leaf) {
			return true
		}
	}
	return false
}

var units = map[ir.DType]*Expr{
	ir.Q4_0: unitQ4_0(), ir.Q4_1: unitQ4_1(), ir.Q5_0: unitQ5_0(), ir.Q5_1: unitQ5_1(), ir.Q8_0: unitQ8_0(),
	ir.Q2_K: unitQ2K(), ir.Q3_K: unitQ3K(), ir.Q4_K: unitQ4K(), ir.Q5_K: unitQ5K(), ir.Q6_K: unitQ6K(),
}

// nibble is element Elem+Lane's 4 bits of a 32-element block whose 16
// bytes of nibbles start at off: elements 0-15 are the low nibbles, 16-31
// the high ones.
func nibble(off uint32) *Expr {
	w := word(add(at(off), and(elem, c(15))))
	return field(w, mul(shr(elem, c(4)), c(4)), 4)
}

// fifthBit is element Elem+Lane's bit of the 32-bit field at off (Q5_0,
// Q5_1): bit e is element e's.
func fifthBit(off uint32) *Expr {
	return and(shr(word(at(off)), add(elem, lane)), c(1))
}

// Q4_0: f16 d, 16 bytes of nibbles; (q - 8)·d.
func unitQ4_0() *Expr { return fmul(f32(sub(nibble(2), c(8))), half(at(0))) }

// Q4_1: f16 d and m, nibbles; q·d + m.
func unitQ4_1() *Expr {
	return op(FAdd, fmul(f32(nibble(4)), half(at(0))), half(at(2)))
}

// Q5_0: f16 d, 32 fifth bits, nibbles; (q - 16)·d.
func unitQ5_0() *Expr {
	q := or(nibble(6), shl(fifthBit(2), c(4)))
	return fmul(f32(sub(q, c(16))), half(at(0)))
}

// Q5_1: f16 d and m, fifth bits, nibbles; q·d + m.
func unitQ5_1() *Expr {
	q := or(nibble(8), shl(fifthBit(4), c(4)))
	return op(FAdd, fmul(f32(q), half(at(0))), half(at(2)))
}

// Q8_0: f16 d, 32 signed bytes; q·d.
func unitQ8_0() *Expr {
	q := field(word(add(at(2), elem)), c(0), 8)
	return fmul(op(I8ToF32, q), half(at(0)))
}

// The K formats' 256 elements: half h = Elem/128 of the super-block, its
// quarter Elem%128/32 and the unit's place in a 32-byte row, Elem%32.
var (
	kHalf    = shr(elem, c(7))
	kQuarter = and(shr(elem, c(5)), c(3))
	kRow     = and(elem, c(31))
	kSub16   = shr(elem, c(4)) // the 16-element sub-block (Q2_K, Q3_K, Q6_K scales)
	kSub32   = shr(elem, c(5)) // the 32-element sub-block (Q4_K, Q5_K scales)
)

// Q2_K: 16 scale bytes (4-bit scale, 4-bit min per 16 elements), 64 bytes
// of 2-bit values (each half reads 32 bytes, 2 bits further per quarter),
// f16 d and dmin at 80; d·scale·q - dmin·min.
func unitQ2K() *Expr {
	sc := byteAt(add(at(0), kSub16))
	dl := fmul(half(at(80)), f32(and(sc, c(15))))
	ml := fmul(half(at(82)), f32(shr(sc, c(4))))
	q := field(word(add(at(16), add(mul(kHalf, c(32)), kRow))), mul(kQuarter, c(2)), 2)
	return op(FSub, fmul(dl, f32(q)), ml)
}

// Q3_K: 32 bytes of high bits (bit 4·half + quarter of row byte Elem%32),
// 64 bytes of 2-bit values as in Q2_K, 12 bytes of 6-bit signed scales, f16
// d at 108; a value is its low bits minus 4 when its high bit is clear:
// d·scale·q.
func unitQ3K() *Expr {
	lo := field(word(add(at(32), add(mul(kHalf, c(32)), kRow))), mul(kQuarter, c(2)), 2)
	hi := field(word(add(at(0), kRow)), add(mul(kHalf, c(4)), kQuarter), 1)
	q := sub(or(lo, shl(hi, c(2))), c(4))
	g := kSub16
	sLo := and(shr(byteAt(add(at(96), and(g, c(7)))), mul(shr(g, c(3)), c(4))), c(15))
	sHi := and(shr(byteAt(add(at(104), and(g, c(3)))), mul(shr(g, c(2)), c(2))), c(3))
	scale := sub(or(sLo, shl(sHi, c(4))), c(32))
	return fmul(fmul(half(at(108)), f32(scale)), f32(q))
}

// scaleMinK4 is the 6-bit scale and minimum of sub-block j of Q4_K and
// Q5_K, from the 12 bytes at 4: j < 4 are the low 6 bits of bytes j and
// j+4; the others take their low 4 bits from the nibbles of byte j+4 and
// their top 2 from the top bits of bytes j-4 and j.
func scaleMinK4() (sc, m *Expr) {
	j := kSub32
	b := func(plus uint32) *Expr { return byteAt(add(add(at(4), j), c(plus))) }
	bMinus4 := byteAt(sub(add(at(4), j), c(4))) // read only when j >= 4
	sc = op(Select, j, and(b(0), c(63)), or(and(b(4), c(15)), shl(shr(bMinus4, c(6)), c(4))))
	m = op(Select, j, and(b(4), c(63)), or(shr(b(4), c(4)), shl(shr(b(0), c(6)), c(4))))
	return sc, m
}

// kNibble is the unit's 4 bits of Q4_K and Q5_K: each 64 elements read 32
// bytes from off, low nibbles first.
func kNibble(off uint32) *Expr {
	w := word(add(at(off), add(mul(shr(kSub32, c(1)), c(32)), kRow)))
	return field(w, mul(and(kSub32, c(1)), c(4)), 4)
}

// Q4_K: f16 d and dmin, 12 bytes of scales, 128 bytes of nibbles;
// d·scale·q - dmin·min.
func unitQ4K() *Expr {
	sc, m := scaleMinK4()
	return op(FSub, fmul(fmul(half(at(0)), f32(sc)), f32(kNibble(16))), fmul(half(at(2)), f32(m)))
}

// Q5_K: Q4_K with 32 bytes of fifth bits at 16 (element i's is bit i/32 of
// row byte i%32) and the nibbles at 48.
func unitQ5K() *Expr {
	sc, m := scaleMinK4()
	q := or(kNibble(48), shl(field(word(add(at(16), kRow)), kSub32, 1), c(4)))
	return op(FSub, fmul(fmul(half(at(0)), f32(sc)), f32(q)), fmul(half(at(2)), f32(m)))
}

// Q6_K: 128 bytes of low nibbles (each half reads 64: quarters 0 and 1
// low nibbles, 2 and 3 high), 64 bytes of 2-bit high parts (each half 32,
// quarter k at bits 2k), 16 signed scales at 192, f16 d at 208;
// d·scale·(q - 32).
func unitQ6K() *Expr {
	lo := field(word(add(at(0), add(add(mul(kHalf, c(64)), mul(and(kQuarter, c(1)), c(32))), kRow))), mul(shr(kQuarter, c(1)), c(4)), 4)
	hi := field(word(add(at(128), add(mul(kHalf, c(32)), kRow))), mul(kQuarter, c(2)), 2)
	q := sub(or(lo, shl(hi, c(4))), c(32))
	scale := op(I8ToF32, byteAt(add(at(192), kSub16)))
	return fmul(fmul(half(at(208)), scale), f32(q))
}

// Leaves are a generator's values of an expression's leaves in one unit.
type Leaves[V any] struct {
	Block, Elem V
	Lanes       []V // the lanes computed, in order
	Const       func(k uint32) V
}

// Walk computes the value of e in each lane of l, with a generator's
// values V: node gives an op's value from its arguments' values, and is
// called once for each distinct subexpression that does not depend on
// Lane and once per lane for the others, arguments first.
func Walk[V any](e *Expr, l Leaves[V], node func(x *Expr, args []V) V) []V {
	shared := map[*Expr]V{}
	var walk func(x *Expr, lane int, perLane map[*Expr]V) V
	walk = func(x *Expr, lane int, perLane map[*Expr]V) V {
		switch x.Op {
		case Const:
			return l.Const(x.K)
		case Block:
			return l.Block
		case Elem:
			return l.Elem
		case Lane:
			return l.Lanes[lane]
		}
		memo := shared
		if x.DependsOnLane() {
			memo = perLane
		}
		if v, ok := memo[x]; ok {
			return v
		}
		args := make([]V, len(x.Args))
		for i, a := range x.Args {
			args[i] = walk(a, lane, perLane)
		}
		v := node(x, args)
		memo[x] = v
		return v
	}
	out := make([]V, len(l.Lanes))
	for i := range out {
		out[i] = walk(e, i, map[*Expr]V{})
	}
	return out
}
