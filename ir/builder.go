package ir

import (
	"fmt"
	"strconv"
)

// Builder appends nodes to a function, inferring output types from the op
// registry. The first error is kept (with the provenance it happened at) and
// later calls are no-ops, so model importers read straight through and check
// Err once.
type Builder struct {
	M    *Module
	F    *Function
	Prov string // provenance given to the nodes built next
	err  error
	next int
}

// NewFunction adds an empty function to m and returns a builder for it.
func NewFunction(m *Module, name string) *Builder {
	f := &Function{Name: name}
	m.Funcs = append(m.Funcs, f)
	return &Builder{M: m, F: f}
}

// Err returns the first error met while building.
func (b *Builder) Err() error { return b.err }

// At sets the provenance of the nodes built next and returns b.
func (b *Builder) At(prov string) *Builder {
	b.Prov = prov
	return b
}

// name returns the next free output name: "0", "1", ..., skipping the names
// of parameters.
func (b *Builder) name() string {
	for {
		b.next++
		n := strconv.Itoa(b.next - 1)
		if b.F.Param(n) == nil {
			return n
		}
	}
}

// Param adds a function parameter. A malformed type (see Type.Validate)
// becomes the builder's error.
func (b *Builder) Param(name string, t Type) *Value {
	if err := t.Validate(); err != nil && b.err == nil {
		b.err = fmt.Errorf("func @%s: parameter %%%s: %w", quoteIdent(b.F.Name), quoteIdent(name), err)
	}
	v := &Value{Name: name, Type: t}
	b.F.Params = append(b.F.Params, v)
	return v
}

// Op appends a node of op with one output and returns that output.
func (b *Builder) Op(op Op, inputs []*Value, attrs Attrs) *Value {
	return b.OpN(op, inputs, attrs)[0]
}

// OpN appends a node of op and returns all its outputs.
func (b *Builder) OpN(op Op, inputs []*Value, attrs Attrs) []*Value {
	d := LookupOp(op)
	n := 1
	if d != nil {
		n = max(d.Outputs, 1)
	}
	dummy := func() []*Value {
		out := make([]*Value, n)
		for i := range out {
			out[i] = &Value{Name: "invalid", Type: T(Invalid, nil)}
		}
		return out
	}
	if b.err != nil {
		return dummy()
	}
	types := make([]Type, len(inputs))
	for i, in := range inputs {
		if in == nil {
			b.err = fmt.Errorf("%s: %s input %d is nil", b.where(), op, i)
			return dummy()
		}
		types[i] = in.Type
	}
	outTypes, na, err := InferTypes(op, types, attrs)
	if err != nil {
		b.err = fmt.Errorf("%s: %w", b.where(), err)
		return dummy()
	}
	node := &Node{ID: b.M.NewID(), Op: op, Inputs: append([]*Value(nil), inputs...), Attrs: na, Prov: b.Prov}
	for _, t := range outTypes {
		node.Outputs = append(node.Outputs, &Value{Name: b.name(), Type: t, Def: node})
	}
	b.F.Nodes = append(b.F.Nodes, node)
	return node.Outputs
}

func (b *Builder) where() string {
	if b.Prov != "" {
		return fmt.Sprintf("func @%s at %s", quoteIdent(b.F.Name), b.Prov)
	}
	return "func @" + quoteIdent(b.F.Name)
}

// Return sets the function's results.
func (b *Builder) Return(vals ...*Value) {
	b.F.Results = append(b.F.Results[:0], vals...)
}

// Convenience wrappers for the common ops.

func (b *Builder) Add(x, y *Value) *Value { return b.Op(OpAdd, []*Value{x, y}, nil) }
func (b *Builder) Mul(x, y *Value) *Value { return b.Op(OpMul, []*Value{x, y}, nil) }

// Linear is x × wᵀ for a weight stored out×in.
func (b *Builder) Linear(x, w *Value) *Value {
	return b.Op(OpMatmul, []*Value{x, w}, Attrs{"transpose_b": BoolAttr(true)})
}

// Reshape reshapes x to shape.
func (b *Builder) Reshape(x *Value, shape Shape) *Value {
	return b.Op(OpReshape, []*Value{x}, Attrs{"shape": ShapeAttr(shape)})
}

// Unary applies a one-input op.
func (b *Builder) Unary(op Op, x *Value) *Value { return b.Op(op, []*Value{x}, nil) }
