package ir

import (
	"fmt"
	"strings"
)

// OpKind groups ops by how they compute; passes and tolerance policies use it.
type OpKind string

const (
	KindElementwise OpKind = "elementwise" // out[i] = f(in[i]...) with broadcasting
	KindReduction   OpKind = "reduction"   // reduces along an axis (norms, softmax, argmax)
	KindContraction OpKind = "contraction" // matmul, attention: long dot products
	KindData        OpKind = "data"        // moves data without arithmetic
	KindMeta        OpKind = "meta"        // probe, transfer: identity at run time
)

// AttrSpec describes one attribute of an op. A nil Default means required.
type AttrSpec struct {
	Name    string
	Kind    AttrKind
	Default *Attr
	Doc     string
}

// OpDef is one row of the op registry: everything the compiler knows about
// an op, as data. Kernels live with their targets, keyed by Op.
type OpDef struct {
	Op        Op
	Name      string // Op's name (set by register from Op)
	Doc       string
	Kind      OpKind
	MinInputs int
	MaxInputs int // -1: variadic
	Outputs   int
	Attrs     []AttrSpec
	// Infer computes output types from input types and (normalized) attributes.
	// It is also the op's type checker: an error explains what is wrong.
	Infer func(in []Type, a Attrs) ([]Type, error)
	// Facts are what other packages ask about the op (see Facts).
	Facts
}

// Attr returns the spec of the named attribute, or nil.
func (d *OpDef) Attr(name string) *AttrSpec {
	for i := range d.Attrs {
		if d.Attrs[i].Name == name {
			return &d.Attrs[i]
		}
	}
	return nil
}

// registry holds each op's row, indexed by Op.
var registry [numOps]*OpDef

func register(d *OpDef) {
	if d.Op == OpNone || d.Op >= numOps {
		panic("ir: register of an invalid op " + d.Op.String())
	}
	d.Name = d.Op.String()
	if registry[d.Op] != nil {
		panic("ir: op registered twice: " + d.Name)
	}
	registry[d.Op] = d
}

// LookupOp returns the definition of op, or nil (for OpNone or a value that
// is no op).
func LookupOp(op Op) *OpDef {
	if op >= numOps {
		return nil
	}
	return registry[op]
}

// Ops returns every registered op, sorted by name.
func Ops() []*OpDef {
	out := make([]*OpDef, 0, len(registry))
	for _, d := range registry {
		if d != nil {
			out = append(out, d)
		}
	}
	return out // sorted: Ops are declared in name order
}

// NormalizeAttrs checks attrs against the op's schema and returns a copy with
// defaults filled in. Unknown names, wrong kinds, missing required
// attributes and malformed values (an invalid dtype, a shape with a bad
// symbol or a size below -1) are errors. An int is accepted for a float and
// a list of ints for floats or a shape; the copy holds the converted value.
func (d *OpDef) NormalizeAttrs(a Attrs) (Attrs, error) {
	out := Attrs{}
	for _, k := range a.Keys() {
		spec := d.Attr(k)
		if spec == nil {
			return nil, fmt.Errorf("op %s has no attribute %q (it has: %s)", d.Name, k, d.attrNames())
		}
		v := a[k].Clone()
		if v.Kind != spec.Kind {
			// An int literal is accepted where a float is expected.
			if spec.Kind == AttrFloat && v.Kind == AttrInt {
				v = FloatAttr(float64(v.Int))
			} else if spec.Kind == AttrFloats && v.Kind == AttrInts {
				fs := make([]float64, len(v.Ints))
				for i, x := range v.Ints {
					fs[i] = float64(x)
				}
				v = FloatsAttr(fs...)
			} else if spec.Kind == AttrShape && v.Kind == AttrInts {
				v = ShapeAttr(S(v.Ints...))
			} else {
				return nil, fmt.Errorf("op %s: attribute %q must be %s, got %s %s", d.Name, k, spec.Kind, v.Kind, v)
			}
		}
		if err := checkAttrValue(v); err != nil {
			return nil, fmt.Errorf("op %s: attribute %q: %v", d.Name, k, err)
		}
		out[k] = v
	}
	for _, spec := range d.Attrs {
		if _, ok := out[spec.Name]; ok {
			continue
		}
		if spec.Default == nil {
			return nil, fmt.Errorf("op %s: missing required attribute %q (%s)", d.Name, spec.Name, spec.Kind)
		}
		out[spec.Name] = spec.Default.Clone()
	}
	return out, nil
}

// checkAttrValue rejects values the text form cannot hold or that no op can
// use: invalid dtypes, block formats (no op converts to one: weights come
// quantized), and shapes with bad symbols, sizes below -1 (reshape uses
// -1) or a static product that overflows int64.
func checkAttrValue(v Attr) error {
	switch v.Kind {
	case AttrDType:
		if v.DType == Invalid || int(v.DType) >= len(dtypeNames) {
			return fmt.Errorf("invalid dtype %s", v.DType)
		}
		if v.DType.IsBlock() {
			return fmt.Errorf("dtype %s is a block format of stored weights, not an element type", v.DType)
		}
	case AttrShape:
		for _, dim := range v.Shape {
			if err := checkDim(dim, -1); err != nil {
				return fmt.Errorf("shape %s: %v", v.Shape, err)
			}
		}
		if _, ok := staticProduct(v.Shape, 1); !ok {
			return fmt.Errorf("shape %s: element count overflows int64", v.Shape)
		}
	case AttrInt, AttrFloat, AttrString, AttrBool, AttrInts, AttrFloats:
	default:
		return fmt.Errorf("unknown attribute kind %s", v.Kind)
	}
	return nil
}

func (d *OpDef) attrNames() string {
	if len(d.Attrs) == 0 {
		return "none"
	}
	var names []string
	for _, s := range d.Attrs {
		names = append(names, s.Name)
	}
	return strings.Join(names, ", ")
}

// InferTypes checks the input count and attributes of a call of op and
// returns its output types (each one valid, see Type.Validate) and
// normalized attributes.
func InferTypes(op Op, in []Type, a Attrs) ([]Type, Attrs, error) {
	d := LookupOp(op)
	if d == nil {
		return nil, nil, fmt.Errorf("unknown op %q", op.String())
	}
	if len(in) < d.MinInputs || (d.MaxInputs >= 0 && len(in) > d.MaxInputs) {
		return nil, nil, fmt.Errorf("op %s takes %s, got %d", d.Name, d.arity(), len(in))
	}
	na, err := d.NormalizeAttrs(a)
	if err != nil {
		return nil, nil, err
	}
	read, err := d.readTypes(in, na)
	if err != nil {
		return nil, nil, fmt.Errorf("op %s: %w", d.Name, err)
	}
	out, err := d.Infer(read, na)
	if err != nil {
		return nil, nil, fmt.Errorf("op %s: %w", d.Name, err)
	}
	for i, t := range out {
		// Malformed inputs (a bad dtype) or huge ones (a product that
		// overflows) give a malformed output; say so here, not later.
		if err := t.Validate(); err != nil {
			return nil, nil, fmt.Errorf("op %s: output %d: %v", d.Name, i, err)
		}
	}
	return out, na, nil
}

func (d *OpDef) arity() string {
	switch {
	case d.MinInputs == d.MaxInputs && d.MinInputs == 1:
		return "1 input"
	case d.MinInputs == d.MaxInputs:
		return fmt.Sprintf("%d inputs", d.MinInputs)
	case d.MaxInputs < 0:
		return fmt.Sprintf("at least %d inputs", d.MinInputs)
	}
	return fmt.Sprintf("%d to %d inputs", d.MinInputs, d.MaxInputs)
}

func ptr(a Attr) *Attr { return &a }
