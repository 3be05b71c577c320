package ir

import "testing"

func TestSmokeRoundTrip(t *testing.T) {
	m := NewModule("tiny")
	m.Meta["arch"] = "llama"
	emb := m.AddWeight("tok_embeddings", T(F32, S(16, 8)), nil)
	wq := m.AddWeight("layers.0.wq", T(F32, S(8, 8)), nil)
	b := NewFunction(m, "prefill")
	tok := b.Param("tokens", T(I32, Shape{Sym("seq")}))
	pos := b.Param("pos", T(I32, Shape{}))
	x := b.At("tok_embeddings").Op("gather", []*Value{emb, tok}, nil)
	q := b.At("layers.0.wq").Linear(x, wq)
	q3 := b.Reshape(q, Shape{Sym("seq"), D(2), D(4)})
	r := b.Op("rope", []*Value{q3, pos}, nil)
	y := b.Op("fused_elementwise", []*Value{r, r}, Attrs{"expr": StringAttr("mul(silu($0), $1)")})
	b.Return(y)
	if b.Err() != nil {
		t.Fatal(b.Err())
	}
	if err := Verify(m); err != nil {
		t.Fatal(err)
	}
	txt := Text(m)
	t.Log(txt)
	m2, err := Parse("x.tir", txt)
	if err != nil {
		t.Fatal(err)
	}
	if got := Text(m2); got != txt {
		t.Fatalf("round trip differs:\n%s", got)
	}
}
