package ir

import (
	"fmt"
	"sort"
)

// Value is an SSA value: a function parameter, a node output, or a reference
// to one of the module's weights (shared by every function).
type Value struct {
	Name   string  // printed as %Name, or @Name for a weight
	Type   Type    // dtype and (possibly symbolic) shape
	Def    *Node   // the node that defines it; nil for params and weights
	Weight *Weight // set when the value refers to a module weight
}

// IsWeight reports whether v refers to a module weight.
func (v *Value) IsWeight() bool { return v.Weight != nil }

// Ref is how the value is written in the text form ("%<nil>" for nil, so
// that broken modules can still be printed).
func (v *Value) Ref() string {
	if v == nil {
		return "%<nil>"
	}
	if v.Weight != nil {
		return "@" + quoteIdent(v.Name)
	}
	return "%" + quoteIdent(v.Name)
}

// WeightSource gives the bytes of a weight: its elements in the weight's
// dtype, row-major, little-endian. Sources read from the model file (or a
// buffer the frontend holds), so weights are not copied into the IR.
type WeightSource interface {
	Bytes() ([]byte, error)
}

// BytesSource is a WeightSource over f32 bytes already in memory.
type BytesSource []byte

// Bytes returns the bytes themselves.
func (b BytesSource) Bytes() ([]byte, error) { return b, nil }

// TypedSource is a WeightSource that holds its bytes in a dtype of its
// own (a frontend's f16 or block-format tensor); a source without DType
// holds f32.
type TypedSource interface {
	WeightSource
	DType() DType
}

// SourceDType returns the dtype of src's bytes.
func SourceDType(src WeightSource) DType {
	if ts, ok := src.(TypedSource); ok {
		return ts.DType()
	}
	return F32
}

// TypedBytes is a TypedSource over bytes in memory.
type TypedBytes struct {
	Type DType
	Data []byte
}

// Bytes returns the bytes themselves.
func (b TypedBytes) Bytes() ([]byte, error) { return b.Data, nil }

// DType returns the dtype of the bytes.
func (b TypedBytes) DType() DType { return b.Type }

// Weight is a named constant tensor of a module. Its data lives outside the
// IR, behind Source; the text form shows only its name and type.
type Weight struct {
	Name   string
	Type   Type
	Source WeightSource // nil in a module parsed from text until weights are attached
	value  *Value
}

// Value returns the value that refers to this weight.
func (w *Weight) Value() *Value {
	if w.value == nil {
		w.value = &Value{Name: w.Name, Type: w.Type, Weight: w}
	}
	return w.value
}

// Node is one operation: an op from the registry applied to input values,
// defining output values. ID is stable and unique in the module; Prov says
// where in the source model the node comes from (e.g. "layers.3.attn.wq").
type Node struct {
	ID      int
	Op      Op
	Inputs  []*Value
	Outputs []*Value
	Attrs   Attrs
	Prov    string
	Place   string // device placement set by the partition pass: "", "source" or "target"
}

// Output returns the node's first output.
func (n *Node) Output() *Value { return n.Outputs[0] }

// Def returns the registered definition of the node's op, or nil.
func (n *Node) Def() *OpDef { return LookupOp(n.Op) }

// String names the node in messages: "#12 rope %7 (layers.0.attention.rope_q)".
func (n *Node) String() string {
	if n == nil {
		return "<nil node>"
	}
	s := fmt.Sprintf("#%d %s", n.ID, n.Op)
	if len(n.Outputs) > 0 {
		s += " " + n.Outputs[0].Ref()
	}
	if n.Prov != "" {
		s += fmt.Sprintf(" (%s)", n.Prov)
	}
	return s
}

// Function is a straight-line SSA function: parameters, nodes in execution
// order, and results.
type Function struct {
	Name    string
	Params  []*Value
	Nodes   []*Node
	Results []*Value
}

// Param returns the parameter with the given name, or nil.
func (f *Function) Param(name string) *Value {
	for _, p := range f.Params {
		if p.Name == name {
			return p
		}
	}
	return nil
}

// ValueNames returns the names of f's parameters and node outputs (for
// picking names that are not taken).
func (f *Function) ValueNames() map[string]bool {
	names := map[string]bool{}
	for _, p := range f.Params {
		names[p.Name] = true
	}
	for _, n := range f.Nodes {
		for _, o := range n.Outputs {
			names[o.Name] = true
		}
	}
	return names
}

// Uses maps each value to the nodes that read it, in order.
func (f *Function) Uses() map[*Value][]*Node {
	uses := map[*Value][]*Node{}
	for _, n := range f.Nodes {
		for _, in := range n.Inputs {
			uses[in] = append(uses[in], n)
		}
	}
	return uses
}

// Node returns the node with the given id, or nil.
func (f *Function) Node(id int) *Node {
	for _, n := range f.Nodes {
		if n.ID == id {
			return n
		}
	}
	return nil
}

// Module is a compilation unit: metadata, weights and functions
// (for an LLM, "prefill" and "decode").
type Module struct {
	Name    string
	Meta    map[string]string // free-form facts: source file, architecture, tokenizer, ...
	Weights []*Weight
	Funcs   []*Function
	nextID  int
}

// NewModule returns an empty module.
func NewModule(name string) *Module { return &Module{Name: name, Meta: map[string]string{}} }

// AddWeight declares a weight and returns the value that refers to it.
func (m *Module) AddWeight(name string, t Type, src WeightSource) *Value {
	w := &Weight{Name: name, Type: t, Source: src}
	m.Weights = append(m.Weights, w)
	return w.Value()
}

// Weight returns the weight with the given name, or nil.
func (m *Module) Weight(name string) *Weight {
	for _, w := range m.Weights {
		if w.Name == name {
			return w
		}
	}
	return nil
}

// Func returns the function with the given name, or nil.
func (m *Module) Func(name string) *Function {
	for _, f := range m.Funcs {
		if f.Name == name {
			return f
		}
	}
	return nil
}

// NewID returns a fresh node id, larger than any in the module when it was
// first called (and than any it returned since); nodes added with ids of
// their own should take them from NewID too.
func (m *Module) NewID() int {
	if m.nextID == 0 {
		for _, f := range m.Funcs {
			for _, n := range f.Nodes {
				m.nextID = max(m.nextID, n.ID)
			}
		}
	}
	m.nextID++
	return m.nextID
}

// MetaKeys returns the metadata keys in sorted order.
func (m *Module) MetaKeys() []string {
	keys := make([]string, 0, len(m.Meta))
	for k := range m.Meta {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// Clone returns a deep copy of the module's functions and metadata; weights
// are shared (they are immutable), so cloning is cheap.
func (m *Module) Clone() *Module {
	c := &Module{Name: m.Name, Meta: map[string]string{}, nextID: m.nextID}
	// A new slice (of the same weights), so that appending to one module's
	// weights never writes into the other's.
	c.Weights = append([]*Weight(nil), m.Weights...)
	for k, v := range m.Meta {
		c.Meta[k] = v
	}
	for _, f := range m.Funcs {
		c.Funcs = append(c.Funcs, f.Clone())
	}
	return c
}

// Clone returns a deep copy of the function; weight values are shared.
func (f *Function) Clone() *Function {
	vmap := map[*Value]*Value{}
	get := func(v *Value) *Value {
		if v == nil || v.Weight != nil {
			return v
		}
		if c, ok := vmap[v]; ok {
			return c
		}
		c := &Value{Name: v.Name, Type: T(v.Type.DType, v.Type.Shape.Clone())}
		vmap[v] = c
		return c
	}
	c := &Function{Name: f.Name}
	for _, p := range f.Params {
		c.Params = append(c.Params, get(p))
	}
	for _, n := range f.Nodes {
		cn := &Node{ID: n.ID, Op: n.Op, Attrs: n.Attrs.Clone(), Prov: n.Prov, Place: n.Place}
		for _, in := range n.Inputs {
			cn.Inputs = append(cn.Inputs, get(in))
		}
		for _, out := range n.Outputs {
			co := get(out)
			co.Def = cn
			cn.Outputs = append(cn.Outputs, co)
		}
		c.Nodes = append(c.Nodes, cn)
	}
	for _, r := range f.Results {
		c.Results = append(c.Results, get(r))
	}
	return c
}

// AttachWeights gives each weight of m the Source of the same-named weight
// of from (typically the model a text module was imported from). Types must
// match.
func (m *Module) AttachWeights(from *Module) error {
	for _, w := range m.Weights {
		src := from.Weight(w.Name)
		if src == nil {
			return fmt.Errorf("weight @%s: not in %q", quoteIdent(w.Name), from.Name)
		}
		if !src.Type.Equal(w.Type) {
			return fmt.Errorf("weight @%s: type %s, but %q has %s", quoteIdent(w.Name), w.Type, from.Name, src.Type)
		}
		w.Source = src.Source
	}
	return nil
}
