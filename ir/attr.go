package ir

import (
	"fmt"
	"math"
	"sort"
)

// AttrKind is the type of an attribute value.
type AttrKind uint8

const (
	AttrInt    AttrKind = iota + 1 // int64
	AttrFloat                      // float64
	AttrString                     // string
	AttrBool                       // bool
	AttrInts                       // []int64
	AttrFloats                     // []float64
	AttrShape                      // Shape (dims may be symbolic)
	AttrDType                      // DType
)

var attrKindNames = map[AttrKind]string{
	AttrInt: "int", AttrFloat: "float", AttrString: "string", AttrBool: "bool",
	AttrInts: "ints", AttrFloats: "floats", AttrShape: "shape", AttrDType: "dtype",
}

func (k AttrKind) String() string {
	if s, ok := attrKindNames[k]; ok {
		return s
	}
	return fmt.Sprintf("attrkind(%d)", uint8(k))
}

// Attr is one typed attribute value. Exactly the field that Kind names is used.
type Attr struct {
	Kind   AttrKind
	Int    int64
	Float  float64
	Str    string
	Bool   bool
	Ints   []int64
	Floats []float64
	Shape  Shape
	DType  DType
}

// Constructors for attribute values.
func IntAttr(v int64) Attr         { return Attr{Kind: AttrInt, Int: v} }
func FloatAttr(v float64) Attr     { return Attr{Kind: AttrFloat, Float: v} }
func StringAttr(v string) Attr     { return Attr{Kind: AttrString, Str: v} }
func BoolAttr(v bool) Attr         { return Attr{Kind: AttrBool, Bool: v} }
func IntsAttr(v ...int64) Attr     { return Attr{Kind: AttrInts, Ints: v} }
func FloatsAttr(v ...float64) Attr { return Attr{Kind: AttrFloats, Floats: v} }
func ShapeAttr(v Shape) Attr       { return Attr{Kind: AttrShape, Shape: v} }
func DTypeAttr(v DType) Attr       { return Attr{Kind: AttrDType, DType: v} }

// sameFloat reports whether x and y are the same value: equal bits, or both
// NaN (the text form keeps no NaN payload). 0 and -0 differ.
func sameFloat(x, y float64) bool {
	return math.Float64bits(x) == math.Float64bits(y) || (x != x && y != y)
}

// Equal reports whether two attribute values are identical. Floats compare
// by value, except that every NaN equals every NaN and 0 differs from -0.
func (a Attr) Equal(b Attr) bool {
	if a.Kind != b.Kind {
		return false
	}
	switch a.Kind {
	case AttrInt:
		return a.Int == b.Int
	case AttrFloat:
		return sameFloat(a.Float, b.Float)
	case AttrString:
		return a.Str == b.Str
	case AttrBool:
		return a.Bool == b.Bool
	case AttrInts:
		if len(a.Ints) != len(b.Ints) {
			return false
		}
		for i := range a.Ints {
			if a.Ints[i] != b.Ints[i] {
				return false
			}
		}
		return true
	case AttrFloats:
		if len(a.Floats) != len(b.Floats) {
			return false
		}
		for i := range a.Floats {
			if !sameFloat(a.Floats[i], b.Floats[i]) {
				return false
			}
		}
		return true
	case AttrShape:
		return a.Shape.Equal(b.Shape)
	case AttrDType:
		return a.DType == b.DType
	}
	return false
}

// Attrs maps attribute names to values.
type Attrs map[string]Attr

// Keys returns the attribute names in sorted order (the printing order).
func (a Attrs) Keys() []string {
	keys := make([]string, 0, len(a))
	for k := range a {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// Clone returns a deep copy.
func (a Attrs) Clone() Attrs {
	if a == nil {
		return nil
	}
	out := make(Attrs, len(a))
	for k, v := range a {
		out[k] = v.Clone()
	}
	return out
}

// Clone returns a deep copy of the value (its lists are copied).
func (a Attr) Clone() Attr {
	if a.Ints != nil {
		a.Ints = append([]int64{}, a.Ints...)
	}
	if a.Floats != nil {
		a.Floats = append([]float64{}, a.Floats...)
	}
	a.Shape = a.Shape.Clone()
	return a
}

// Equal reports whether two attribute sets are identical.
func (a Attrs) Equal(b Attrs) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		w, ok := b[k]
		if !ok || !v.Equal(w) {
			return false
		}
	}
	return true
}

// Accessors used by ops; the verifier has already checked kinds against the
// op's schema, and defaults are filled in by Registry.Normalize.

func (a Attrs) Int(name string) int64        { return a[name].Int }
func (a Attrs) Float(name string) float64    { return a[name].Float }
func (a Attrs) String(name string) string    { return a[name].Str }
func (a Attrs) Bool(name string) bool        { return a[name].Bool }
func (a Attrs) Ints(name string) []int64     { return a[name].Ints }
func (a Attrs) Floats(name string) []float64 { return a[name].Floats }
func (a Attrs) Shape(name string) Shape      { return a[name].Shape }
func (a Attrs) DType(name string) DType      { return a[name].DType }
