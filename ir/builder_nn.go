package ir

// Builder wrappers for the ops that language-model graphs are made of, so
// that frontends name an op in one place (here) rather than in every block
// they build. Each builds one node at b's provenance.

// Gather looks up the rows of table by ids (an embedding).
func (b *Builder) Gather(table, ids *Value) *Value { return b.Op(OpGather, []*Value{table, ids}, nil) }

// Iota is the i32 tensor of shape whose elements count up from start along
// axis 0 (position ids).
func (b *Builder) Iota(start *Value, shape Shape) *Value {
	return b.Op(OpIota, []*Value{start}, Attrs{"shape": ShapeAttr(shape)})
}

// MatMul is x × w for a w stored in×out (Linear is the out×in case).
func (b *Builder) MatMul(x, w *Value) *Value { return b.Op(OpMatmul, []*Value{x, w}, nil) }

// RMSNorm normalises x over its last axis by its root mean square and
// scales by w.
func (b *Builder) RMSNorm(x, w *Value, eps float64) *Value {
	return b.Op(OpRMSNorm, []*Value{x, w}, Attrs{"eps": FloatAttr(eps)})
}

// LayerNorm normalises x over its last axis to zero mean and unit
// variance, then scales by w and adds bias (none when bias is nil).
func (b *Builder) LayerNorm(x, w, bias *Value, eps float64) *Value {
	in := []*Value{x, w}
	if bias != nil {
		in = append(in, bias)
	}
	return b.Op(OpLayerNorm, in, Attrs{"eps": FloatAttr(eps)})
}

// Rope rotates x[seq, heads, head_dim] by the positions from pos; attrs
// are the rope op's (theta, style, dims, freq_factors).
func (b *Builder) Rope(x, pos *Value, attrs Attrs) *Value {
	return b.Op(OpRope, []*Value{x, pos}, attrs)
}

// KVWrite is cache with the rows from pos on replaced by x.
func (b *Builder) KVWrite(cache, x, pos *Value) *Value {
	return b.Op(OpKVWrite, []*Value{cache, x, pos}, nil)
}

// Attention attends q over the cache rows k and v up to pos; attrs are the
// attention op's (scale, causal).
func (b *Builder) Attention(q, k, v, pos *Value, attrs Attrs) *Value {
	return b.Op(OpAttention, []*Value{q, k, v, pos}, attrs)
}

// Slice takes the elements start..end-1 of x along axis (negative start
// and end count from the end).
func (b *Builder) Slice(x *Value, axis, start, end int64) *Value {
	return b.Op(OpSlice, []*Value{x}, Attrs{"axis": IntAttr(axis), "start": IntAttr(start), "end": IntAttr(end)})
}
