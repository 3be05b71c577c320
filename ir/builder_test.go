package ir

import (
	"strings"
	"testing"
)

func TestBuilderKeepsFirstError(t *testing.T) {
	m := NewModule("b")
	b := NewFunction(m, "f")
	x := b.Param("x", T(F32, S(2, 3)))
	y := b.At("layers.1.ffn").Op(OpSoftmax, []*Value{x}, Attrs{"axis": IntAttr(5)})
	if y == nil || y.Type.DType != Invalid {
		t.Errorf("the output of a failed op is %v, want an invalid placeholder", y)
	}
	z := b.At("later").Op(OpNone, []*Value{x}, nil)
	outs := b.OpN(OpAdd, []*Value{z, z}, nil)
	if len(outs) != 1 || z == nil {
		t.Error("calls after an error must still return placeholders")
	}
	want := "func @f at layers.1.ffn: op softmax: axis 5 out of range for rank 2"
	if err := b.Err(); err == nil || err.Error() != want {
		t.Errorf("Err() = %v, want %s", err, want)
	}
	if len(b.F.Nodes) != 0 {
		t.Errorf("failed ops added %d nodes", len(b.F.Nodes))
	}
}

func TestBuilderErrors(t *testing.T) {
	tests := []struct {
		name  string
		build func(b *Builder)
		want  string
	}{
		{"nil input", func(b *Builder) { b.Add(b.Param("x", T(F32, S(2))), nil) },
			"func @f: add input 1 is nil"},
		{"unknown op", func(b *Builder) { b.Op(OpNone, nil, nil) },
			`func @f: unknown op "<none>"`},
		{"bad parameter type", func(b *Builder) { b.Param("x y", T(F32, S(-1))) },
			`func @f: parameter %"x y": type f32[-1]: dim -1 is negative`},
		{"bad attribute", func(b *Builder) { b.At("p").Reshape(b.Param("x", T(F32, S(2))), Shape{Sym("1a")}) },
			`func @f at p: op reshape: attribute "shape": shape [1a]: symbol "1a" is not an identifier ([A-Za-z_][A-Za-z0-9_.]*, not inf or nan)`},
		{"Linear of mismatched weight", func(b *Builder) {
			w := b.M.AddWeight("w", T(F32, S(4, 3)), nil)
			b.Linear(b.Param("x", T(F32, S(2, 4))), w)
		}, "func @f: op matmul: inner dims differ: [2, 4] × [4, 3] (transpose_b=true): 4 vs 3"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := NewFunction(NewModule("m"), "f")
			tc.build(b)
			if err := b.Err(); err == nil || err.Error() != tc.want {
				t.Errorf("Err() = %v\nwant %s", err, tc.want)
			}
		})
	}
}

func TestBuilderNamesSkipParameters(t *testing.T) {
	m := NewModule("b")
	b := NewFunction(m, "f")
	x := b.Param("0", T(F32, S(2)))
	b.Param("2", T(F32, S(2)))
	var outs []string
	v := x
	for i := 0; i < 3; i++ {
		v = b.Unary(OpNeg, v)
		outs = append(outs, v.Name)
	}
	b.Return(v)
	if got := strings.Join(outs, ","); got != "1,3,4" {
		t.Errorf("output names %s, want 1,3,4", got)
	}
	if err := Verify(m); err != nil {
		t.Fatal(err)
	}
	roundTrip(t, m)
}

func TestBuilderWrappers(t *testing.T) {
	m := NewModule("b")
	w := m.AddWeight("w", T(F32, S(6, 4)), nil)
	b := NewFunction(m, "f")
	x := b.Param("x", T(F32, Shape{Sym("seq"), D(4)}))
	h := b.Linear(x, w)                             // [seq, 6]
	h = b.Reshape(h, Shape{Sym("seq"), D(2), D(3)}) // [seq, 2, 3]
	h = b.Add(h, b.Mul(h, h))                       // [seq, 2, 3]
	h = b.Unary(OpTanh, h)                          // [seq, 2, 3]
	b.Return(h)
	b.Return(h) // Return replaces, not appends
	if b.Err() != nil {
		t.Fatal(b.Err())
	}
	if got := h.Type.String(); got != "f32[seq, 2, 3]" {
		t.Errorf("type %s", got)
	}
	if len(b.F.Results) != 1 {
		t.Errorf("%d results", len(b.F.Results))
	}
	ids := []int{}
	for _, n := range b.F.Nodes {
		ids = append(ids, n.ID)
		if n.Def() == nil || n.Output().Def != n {
			t.Errorf("node %s is not wired", n)
		}
	}
	if len(ids) != 5 || ids[0] != 1 || ids[4] != 5 {
		t.Errorf("ids %v", ids)
	}
	// A second function continues the module's ids.
	g := NewFunction(m, "g")
	g.Return(g.Unary(OpNeg, g.Param("y", T(F32, S(1)))))
	if id := g.F.Nodes[0].ID; id != 6 {
		t.Errorf("first id of the second function: %d, want 6", id)
	}
	if f := m.Func("g"); f != g.F || m.Func("nope") != nil || m.Weight("nope") != nil || m.Weight("w") != w.Weight {
		t.Error("Module.Func / Module.Weight lookups")
	}
	if f := m.Funcs[0]; f.Param("x") != x || f.Param("nope") != nil || f.Node(3) == nil || f.Node(99) != nil {
		t.Error("Function.Param / Function.Node lookups")
	}
	if uses := m.Funcs[0].Uses(); len(uses[x]) != 1 || len(uses[w]) != 1 {
		t.Errorf("Uses: %v", uses)
	}
	if err := Verify(m); err != nil {
		t.Fatal(err)
	}
}
