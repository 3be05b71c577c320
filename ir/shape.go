package ir

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Dim is one dimension of a shape: a static size, or a symbol such as "seq"
// whose size is bound when a function runs. Build dims with D and Sym: dims
// are compared with ==, so a symbolic dim must have Size -1.
type Dim struct {
	Size int64  // the static size; -1 when Sym is set
	Sym  string // the symbol's name; "" for a static dim
}

// D returns a static dim.
func D(n int64) Dim { return Dim{Size: n} }

// Sym returns a symbolic dim.
func Sym(name string) Dim { return Dim{Size: -1, Sym: name} }

// IsStatic reports whether the dim has a known size.
func (d Dim) IsStatic() bool { return d.Sym == "" }

func (d Dim) String() string {
	if d.Sym != "" {
		return d.Sym
	}
	return strconv.FormatInt(d.Size, 10)
}

// Shape is a list of dims, outermost first. A nil or empty shape is a scalar.
type Shape []Dim

// S builds a static shape from sizes.
func S(sizes ...int64) Shape {
	s := make(Shape, len(sizes))
	for i, n := range sizes {
		s[i] = D(n)
	}
	return s
}

// Rank is the number of dims.
func (s Shape) Rank() int { return len(s) }

// IsStatic reports whether every dim has a known size.
func (s Shape) IsStatic() bool {
	for _, d := range s {
		if !d.IsStatic() {
			return false
		}
	}
	return true
}

// NumElements is the product of the dims, or -1 when a dim is symbolic.
// It does not overflow for the shape of a type that passes Type.Validate.
func (s Shape) NumElements() int64 {
	n := int64(1)
	for _, d := range s {
		if !d.IsStatic() {
			return -1
		}
		n *= d.Size
	}
	return n
}

// Sizes returns the static sizes as ints; it panics on a symbolic dim, so
// call it only on shapes known to be static (for example at run time).
func (s Shape) Sizes() []int {
	out := make([]int, len(s))
	for i, d := range s {
		if !d.IsStatic() {
			panic("ir: Sizes of a symbolic shape " + s.String())
		}
		out[i] = int(d.Size)
	}
	return out
}

// Equal reports whether two shapes have the same dims.
func (s Shape) Equal(t Shape) bool {
	if len(s) != len(t) {
		return false
	}
	for i := range s {
		if s[i] != t[i] {
			return false
		}
	}
	return true
}

// Clone returns a copy of s.
func (s Shape) Clone() Shape {
	if s == nil {
		return nil
	}
	return append(Shape{}, s...)
}

// Bind replaces symbols by the sizes in env; unknown symbols stay symbolic.
func (s Shape) Bind(env map[string]int64) Shape {
	out := s.Clone()
	for i, d := range out {
		if n, ok := env[d.Sym]; ok && d.Sym != "" {
			out[i] = D(n)
		}
	}
	return out
}

// ValidSymbol reports whether name can be a symbolic dim: an identifier
// ([A-Za-z_][A-Za-z0-9_.]*) other than "inf" and "nan", which the text form
// reads as numbers.
func ValidSymbol(name string) bool {
	if name == "" || name == "inf" || name == "nan" {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_':
		case i > 0 && (c >= '0' && c <= '9' || c == '.'):
		default:
			return false
		}
	}
	return true
}

// checkDim reports what is wrong with a dim; minSize is the smallest static
// size allowed (0 in types, -1 in reshape's shape attribute).
func checkDim(d Dim, minSize int64) error {
	if d.Sym != "" {
		if !ValidSymbol(d.Sym) {
			return fmt.Errorf("symbol %q is not an identifier ([A-Za-z_][A-Za-z0-9_.]*, not inf or nan)", d.Sym)
		}
		if d.Size != -1 {
			return fmt.Errorf("symbolic dim %s has Size %d, want -1 (build it with ir.Sym)", d.Sym, d.Size)
		}
		return nil
	}
	if d.Size < minSize {
		return fmt.Errorf("dim %d is negative", d.Size)
	}
	return nil
}

// staticProduct is the product of the static dims that are >= 0 times unit;
// ok is false when it overflows int64.
func staticProduct(s Shape, unit int64) (n int64, ok bool) {
	n = unit
	for _, d := range s {
		if !d.IsStatic() || d.Size < 0 {
			continue
		}
		if d.Size != 0 && n > math.MaxInt64/d.Size {
			return 0, false
		}
		n *= d.Size
	}
	return n, true
}

// Validate reports what makes t malformed: an invalid dtype, a negative
// size, a symbol that is not an identifier, a symbolic Dim whose Size is not
// -1, or a static size in bytes that overflows int64.
func (t Type) Validate() error {
	if t.DType == Invalid || int(t.DType) >= len(dtypeNames) {
		return fmt.Errorf("type %s: invalid dtype", t)
	}
	for _, d := range t.Shape {
		if err := checkDim(d, 0); err != nil {
			return fmt.Errorf("type %s: %v", t, err)
		}
	}
	// (A block's bytes per element is an upper bound of its share.)
	elems, unit := t.DType.Block()
	if _, ok := staticProduct(t.Shape, int64(unit)); !ok {
		return fmt.Errorf("type %s: too large (its size in bytes overflows int64)", t)
	}
	if elems > 1 {
		r := t.Shape.Rank()
		if r == 0 || !t.Shape[r-1].IsStatic() || t.Shape[r-1].Size%int64(elems) != 0 {
			return fmt.Errorf("type %s: a %s tensor's last dim must be a static multiple of its block size %d", t, t.DType, elems)
		}
	}
	return nil
}

func (s Shape) String() string {
	parts := make([]string, len(s))
	for i, d := range s {
		parts[i] = d.String()
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

// Type is the type of a tensor value: element type and shape.
type Type struct {
	DType DType
	Shape Shape
}

// T builds a type.
func T(dt DType, shape Shape) Type { return Type{DType: dt, Shape: shape} }

func (t Type) String() string { return t.DType.String() + t.Shape.String() }

// Equal reports whether two types are identical.
func (t Type) Equal(u Type) bool { return t.DType == u.DType && t.Shape.Equal(u.Shape) }

// Bytes is the size of a tensor of this type, or -1 when it is symbolic
// (or, for a block format, not whole blocks).
func (t Type) Bytes() int64 {
	n := t.Shape.NumElements()
	if n < 0 {
		return -1
	}
	return t.DType.Bytes(n)
}

// BroadcastShapes returns the numpy-style broadcast of a and b. A symbolic dim
// broadcasts with 1 and with the same symbol.
func BroadcastShapes(a, b Shape) (Shape, error) {
	n := max(len(a), len(b))
	out := make(Shape, n)
	for i := 0; i < n; i++ {
		da, db := D(1), D(1)
		if j := len(a) - n + i; j >= 0 {
			da = a[j]
		}
		if j := len(b) - n + i; j >= 0 {
			db = b[j]
		}
		switch {
		case da == db:
			out[i] = da
		case da.IsStatic() && da.Size == 1:
			out[i] = db
		case db.IsStatic() && db.Size == 1:
			out[i] = da
		default:
			return nil, fmt.Errorf("shapes %s and %s do not broadcast (dim %d: %s vs %s)", a, b, i, da, db)
		}
	}
	return out, nil
}
