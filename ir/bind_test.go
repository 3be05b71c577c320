package ir

import (
	"reflect"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestBoundAttrs(t *testing.T) {
	seq, n := Sym("seq"), Sym("n")
	x := &Value{Name: "x", Type: T(F32, Shape{seq, D(64)})}
	y := &Value{Name: "y", Type: T(F32, Shape{seq, D(8), D(8)})}
	reshape := &Node{Op: OpReshape, Inputs: []*Value{x}, Outputs: []*Value{y},
		Attrs: Attrs{"shape": ShapeAttr(Shape{seq, D(8), D(8)})}}
	bare := &Node{Op: OpIota, Attrs: Attrs{"shape": ShapeAttr(Shape{n, seq}), "axis": IntAttr(0)}}
	for _, tc := range []struct {
		name    string
		n       *Node
		in, out []Type
		sizes   map[string]int64
		shape   Shape
	}{
		{"from the input", reshape, []Type{T(F32, S(5, 64))}, nil, map[string]int64{"seq": 5}, S(5, 8, 8)},
		{"from the output", reshape, nil, []Type{T(F32, S(7, 8, 8))}, map[string]int64{"seq": 7}, S(7, 8, 8)},
		{"other rank binds nothing", reshape, []Type{T(F32, S(5, 8, 8))}, nil, map[string]int64{}, Shape{seq, D(8), D(8)}},
		{"attribute against output 0", bare, []Type{T(I32, nil)}, []Type{T(I32, S(2, 3))}, map[string]int64{"n": 2, "seq": 3}, S(2, 3)},
		{"unknown sizes stay symbolic", bare, nil, nil, map[string]int64{}, Shape{n, seq}},
	} {
		if got := tc.n.SymbolSizes(tc.in, tc.out); !cmp.Equal(got, tc.sizes) {
			t.Errorf("%s: sizes %v, want %v", tc.name, got, tc.sizes)
		}
		before := tc.n.Attrs.Clone()
		got := tc.n.BoundAttrs(tc.in, tc.out).Shape("shape")
		if !got.Equal(tc.shape) {
			t.Errorf("%s: bound shape %s, want %s", tc.name, got, tc.shape)
		}
		if !tc.n.Attrs.Equal(before) {
			t.Errorf("%s: binding changed the node's attributes", tc.name)
		}
	}
	static := Attrs{"shape": ShapeAttr(S(2, 3))}
	if got := static.BindShapes(map[string]int64{"seq": 5}); reflect.ValueOf(got).Pointer() != reflect.ValueOf(static).Pointer() {
		t.Error("BindShapes of static attributes made a copy")
	}
}
