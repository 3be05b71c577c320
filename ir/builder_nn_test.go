package ir

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestBuilderNNWrappers: each language-model wrapper builds its op with
// the attributes it is given.
func TestBuilderNNWrappers(t *testing.T) {
	m := NewModule("nn")
	emb := m.AddWeight("emb", T(F32, S(10, 8)), nil)
	norm := m.AddWeight("norm", T(F32, S(8)), nil)
	b := NewFunction(m, "f")
	seq := Sym("seq")
	tokens := b.Param("tokens", T(I32, Shape{seq}))
	pos := b.Param("pos", T(I32, Shape{}))
	cache := b.Param("cache", T(F32, S(16, 2, 4)))
	x := b.Gather(emb, tokens)
	ids := b.Iota(pos, Shape{seq})
	x = b.Add(x, b.Gather(emb, ids))
	x = b.RMSNorm(x, norm, 1e-6)
	x = b.LayerNorm(x, norm, norm, 1e-5)
	x = b.MatMul(x, b.Slice(emb, 0, 0, 8)) // [seq, 8] × [8, 8]
	h := b.Reshape(x, Shape{seq, D(2), D(4)})
	h = b.Rope(h, pos, Attrs{"theta": FloatAttr(500), "style": StringAttr("half")})
	c := b.KVWrite(cache, h, pos)
	a := b.Attention(h, c, c, pos, Attrs{"scale": FloatAttr(0.5)})
	b.Return(a, c)
	if err := b.Err(); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, n := range b.F.Nodes {
		got = append(got, n.Op.String()+" "+n.Output().Type.String())
	}
	want := []string{"gather f32[seq, 8]", "iota i32[seq]", "gather f32[seq, 8]", "add f32[seq, 8]",
		"rms_norm f32[seq, 8]", "layer_norm f32[seq, 8]", "slice f32[8, 8]", "matmul f32[seq, 8]",
		"reshape f32[seq, 2, 4]", "rope f32[seq, 2, 4]", "kv_write f32[16, 2, 4]", "attention f32[seq, 2, 4]"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("nodes (-want +got):\n%s", diff)
	}
	nodes := b.F.Nodes
	if nodes[4].Attrs.Float("eps") != 1e-6 || nodes[5].Attrs.Float("eps") != 1e-5 || nodes[9].Attrs.Float("theta") != 500 ||
		nodes[9].Attrs.String("style") != "half" || nodes[11].Attrs.Float("scale") != 0.5 || nodes[7].Attrs.Bool("transpose_b") {
		t.Errorf("attributes: %v", nodes)
	}
	if err := Verify(m); err != nil {
		t.Fatal(err)
	}
}
