package ir

// Binding symbolic shape attributes. A node of a function with symbolic
// dims (prefill's reshape to [seq, 8, 8]) runs with concrete sizes; before
// its op's inference or a kernel generator sees the attributes, their
// symbols are bound to the sizes of this call.

// BindShapes returns a with the symbols of its shape attributes bound by
// sizes (reshape's [seq, 8, 8] becomes [5, 8, 8] for seq = 5); a itself
// when no shape attribute is symbolic. Symbols sizes lacks stay symbolic.
func (a Attrs) BindShapes(sizes map[string]int64) Attrs {
	var out Attrs
	for k, v := range a {
		if v.Kind != AttrShape || v.Shape.IsStatic() {
			continue
		}
		if out == nil {
			out = a.Clone()
		}
		v.Shape = v.Shape.Bind(sizes)
		out[k] = v
	}
	if out == nil {
		return a
	}
	return out
}

// SymbolSizes returns the sizes that the symbols of n take in a call with
// concrete input types in and output types out (either may be nil or
// short): each symbolic dim of a declared input or output type is matched
// with the concrete size at its position, and then each still unbound
// symbol of a shape attribute with output 0's size at its position (a
// shape attribute is the output's shape: reshape's, iota's). Types whose
// rank differs from the declared one bind nothing.
func (n *Node) SymbolSizes(in, out []Type) map[string]int64 {
	sizes := map[string]int64{}
	match := func(declared Shape, concrete Type, overwrite bool) {
		if declared.Rank() != concrete.Shape.Rank() {
			return
		}
		for i, d := range declared {
			if c := concrete.Shape[i]; !d.IsStatic() && c.IsStatic() {
				if _, bound := sizes[d.Sym]; overwrite || !bound {
					sizes[d.Sym] = c.Size
				}
			}
		}
	}
	for _, side := range []struct {
		vals     []*Value
		concrete []Type
	}{{n.Inputs, in}, {n.Outputs, out}} {
		for i, v := range side.vals {
			if v != nil && i < len(side.concrete) {
				match(v.Type.Shape, side.concrete[i], true)
			}
		}
	}
	if len(out) > 0 {
		for _, a := range n.Attrs {
			if a.Kind == AttrShape {
				match(a.Shape, out[0], false)
			}
		}
	}
	return sizes
}

// BoundAttrs returns n's attributes with the symbols of its shape
// attributes bound to their sizes in a call with concrete types in and out
// (see SymbolSizes); n.Attrs itself when none is symbolic.
func (n *Node) BoundAttrs(in, out []Type) Attrs {
	for _, a := range n.Attrs {
		if a.Kind == AttrShape && !a.Shape.IsStatic() {
			return n.Attrs.BindShapes(n.SymbolSizes(in, out))
		}
	}
	return n.Attrs
}
