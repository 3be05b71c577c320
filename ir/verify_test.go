package ir

import (
	"math"
	"strings"
	"testing"
)

// verifyBase builds:
//
//	weight @w : f32[4]
//	func @f(%x: f32[2, 4]) -> (%2) {
//	  %0 = add(%x, @w) : f32[2, 4] #1 loc("blk.0 \"a\"")
//	  %1 = softmax(%0) {axis = -1} : f32[2, 4] #2 loc("blk.0.sm")
//	  %2 = reshape(%1) {shape = [8]} : f32[8] #3 loc("blk.0.flat")
//	  return %2
//	}
//	func @g(%y: f32[4]) -> (%0) { %0 = neg(%y) #4 loc("g.neg") }
//	func @h(%z: f32[3]) -> (%z) {}
func verifyBase(t *testing.T) *Module {
	t.Helper()
	m := NewModule("v")
	w := m.AddWeight("w", T(F32, S(4)), nil)
	b := NewFunction(m, "f")
	x := b.Param("x", T(F32, S(2, 4)))
	a := b.At(`blk.0 "a"`).Op(OpAdd, []*Value{x, w}, nil)
	s := b.At("blk.0.sm").Op(OpSoftmax, []*Value{a}, nil)
	r := b.At("blk.0.flat").Reshape(s, S(8))
	b.Return(r)
	g := NewFunction(m, "g")
	g.Return(g.At("g.neg").Unary(OpNeg, g.Param("y", T(F32, S(4)))))
	h := NewFunction(m, "h")
	h.Return(h.Param("z", T(F32, S(3))))
	if err := Verify(m); err != nil {
		t.Fatal(err)
	}
	if b.Err() != nil || g.Err() != nil {
		t.Fatal(b.Err(), g.Err())
	}
	return m
}

func TestVerifyErrors(t *testing.T) {
	const (
		n1 = `func @f: node #1 add %0 (blk.0 "a"): `
		n2 = `func @f: node #2 softmax %1 (blk.0.sm): `
		n3 = `func @f: node #3 reshape %2 (blk.0.flat): `
	)
	f := func(m *Module) *Function { return m.Funcs[0] }
	node := func(m *Module, i int) *Node { return m.Funcs[0].Nodes[i] }
	hParam := func(m *Module) *Value { return m.Funcs[2].Params[0] }
	tests := []struct {
		name   string
		break_ func(m *Module)
		want   string
	}{
		{"unknown op", func(m *Module) { node(m, 0).Op = OpNone },
			`func @f: node #1 <none> %0 (blk.0 "a"): unknown op "<none>"`},
		{"too many inputs", func(m *Module) { node(m, 0).Inputs = append(node(m, 0).Inputs, f(m).Params[0]) },
			n1 + "op add takes 2 inputs, got 3"},
		{"too few inputs", func(m *Module) { node(m, 1).Inputs = nil },
			n2 + "op softmax takes 1 input, got 0"},
		{"missing required attribute", func(m *Module) { delete(node(m, 2).Attrs, "shape") },
			n3 + `op reshape: missing required attribute "shape" (shape)`},
		{"unknown attribute", func(m *Module) { node(m, 1).Attrs["bogus"] = IntAttr(1) },
			n2 + `op softmax has no attribute "bogus" (it has: axis)`},
		{"attribute of the wrong kind", func(m *Module) { node(m, 1).Attrs["axis"] = StringAttr("x") },
			n2 + `op softmax: attribute "axis" must be int, got string "x"`},
		{"attribute of no kind", func(m *Module) { node(m, 1).Attrs["axis"] = Attr{} },
			n2 + `op softmax: attribute "axis" must be int, got attrkind(0) ?`},
		{"default not filled in", func(m *Module) { delete(node(m, 1).Attrs, "axis") },
			n2 + `attribute "axis" is not set; its default -1 must be filled in (build nodes with a Builder, or use OpDef.NormalizeAttrs)`},
		{"attribute not normalized", func(m *Module) { node(m, 2).Attrs["shape"] = IntsAttr(8) },
			n3 + `attribute "shape" is ints [8]; op reshape stores it as shape [8] (use OpDef.NormalizeAttrs)`},
		{"bad attribute value", func(m *Module) { node(m, 2).Attrs["shape"] = ShapeAttr(Shape{Sym("2x")}) },
			n3 + `op reshape: attribute "shape": shape [2x]: symbol "2x" is not an identifier ([A-Za-z_][A-Za-z0-9_.]*, not inf or nan)`},
		{"inference fails", func(m *Module) { node(m, 1).Attrs["axis"] = IntAttr(2) },
			n2 + "op softmax: axis 2 out of range for rank 2"},
		{"declared type differs from inferred", func(m *Module) { node(m, 2).Outputs[0].Type = T(F32, S(4, 2)) },
			n3 + "output %2 is declared f32[4, 2], but reshape infers f32[8]"},
		{"declared dtype differs from inferred", func(m *Module) { node(m, 2).Outputs[0].Type = T(F16, S(8)) },
			n3 + "output %2 is declared f16[8], but reshape infers f32[8]"},
		{"use before definition", func(m *Module) { f(m).Nodes[0], f(m).Nodes[1] = f(m).Nodes[1], f(m).Nodes[0] },
			n2 + `input 0 (%0) is used before it is defined by node #1 add %0 (blk.0 "a")`},
		{"value of another function", func(m *Module) { node(m, 1).Inputs[0] = m.Funcs[1].Nodes[0].Output() },
			n2 + "input 0 (%0) is not defined in func @f (its node #4 neg %0 (g.neg) is not there)"},
		{"parameter of another function", func(m *Module) { node(m, 1).Inputs[0] = m.Funcs[1].Params[0] },
			n2 + "input 0 (%y) is not defined in func @f (not a parameter or node output of it)"},
		{"nil input", func(m *Module) { node(m, 1).Inputs[0] = nil },
			n2 + "input 0 is nil"},
		{"output named like a parameter", func(m *Module) { node(m, 0).Outputs[0].Name = "x" },
			`func @f: node #1 add %x (blk.0 "a"): output %x: name already defined by parameter 0`},
		{"two outputs of one name", func(m *Module) { node(m, 1).Outputs[0].Name = "0" },
			`func @f: node #2 softmax %0 (blk.0.sm): output %0: name already defined by node #1 add %0 (blk.0 "a")`},
		{"two parameters of one name", func(m *Module) {
			g := m.Funcs[2]
			g.Params = append(g.Params, &Value{Name: "z", Type: T(F32, S(1))})
		}, "func @h: parameter 1 (%z): name already defined by parameter 0"},
		{"duplicate node id across functions", func(m *Module) { m.Funcs[1].Nodes[0].ID = 2 },
			"func @g: node #2 neg %0 (g.neg): id #2 already used in func @f"},
		{"duplicate node id in a function", func(m *Module) { node(m, 2).ID = 1 },
			`func @f: node #1 reshape %2 (blk.0.flat): id #1 already used in func @f`},
		{"non-positive node id", func(m *Module) { node(m, 0).ID = -3 },
			`func @f: node #-3 add %0 (blk.0 "a"): id #-3 is not positive`},
		{"undeclared weight", func(m *Module) {
			node(m, 0).Inputs[1] = (&Weight{Name: "ghost/0", Type: T(F32, S(4))}).Value()
		}, n1 + `input 1 refers to weight @"ghost/0", which the module does not declare`},
		{"weight of another module", func(m *Module) {
			node(m, 0).Inputs[1] = (&Weight{Name: "w", Type: T(F32, S(4))}).Value()
		}, n1 + "input 1 refers to weight @w, which the module does not declare"},
		{"weight used with another type", func(m *Module) {
			node(m, 0).Inputs[1] = &Value{Name: "w", Type: T(F32, S(5)), Weight: m.Weights[0]}
		}, n1 + "input 1 refers to weight @w as f32[5], but it is declared f32[4]"},
		{"undefined result", func(m *Module) { f(m).Results[0] = &Value{Name: "zz", Type: T(F32, S(8))} },
			"func @f: result 0 (%zz) is not defined in func @f"},
		{"nil result", func(m *Module) { f(m).Results = append(f(m).Results, nil) },
			"func @f: result 1 is nil"},
		{"undeclared weight result", func(m *Module) {
			m.Funcs[2].Results[0] = (&Weight{Name: "ghost", Type: T(F32, S(4))}).Value()
		}, "func @h: result 0 refers to weight @ghost, which the module does not declare"},
		{"bad placement", func(m *Module) { node(m, 1).Place = "gpu" },
			n2 + `placement "gpu" is neither source nor target`},
		{"output that does not point back", func(m *Module) { node(m, 0).Outputs[0].Def = node(m, 1) },
			n1 + `output %0 does not point back to its node (Def is #2 softmax %1 (blk.0.sm))`},
		{"too many outputs", func(m *Module) {
			n := node(m, 0)
			n.Outputs = append(n.Outputs, &Value{Name: "extra", Type: T(F32, S(2, 4)), Def: n})
		}, n1 + "has 2 outputs, op add defines 1"},
		{"nil output", func(m *Module) { node(m, 2).Outputs = []*Value{nil} },
			`func @f: node #3 reshape %<nil> (blk.0.flat): output 0 is nil` + "\n" +
				`func @f: result 0 (%2) is not defined in func @f`},
		{"nil node", func(m *Module) { m.Funcs[2].Nodes = []*Node{nil} },
			"func @h: node 0 (in order) is nil"},
		{"nil parameter", func(m *Module) { m.Funcs[2].Params = append(m.Funcs[2].Params, nil) },
			"func @h: parameter 1 is nil"},
		{"weight as parameter", func(m *Module) { m.Funcs[2].Params = append(m.Funcs[2].Params, m.Weights[0].Value()) },
			"func @h: parameter 1 (@w) is a weight"},
		{"parameter with a defining node", func(m *Module) { hParam(m).Def = node(m, 0) },
			`func @h: parameter 0 (%z) has a defining node (#1 add %0 (blk.0 "a"))`},
		{"negative dim", func(m *Module) { hParam(m).Type = T(F32, S(-2, 3)) },
			"func @h: parameter %z: type f32[-2, 3]: dim -2 is negative"},
		{"invalid dtype", func(m *Module) { hParam(m).Type = T(Invalid, S(3)) },
			"func @h: parameter %z: type invalid[3]: invalid dtype"},
		{"unknown dtype", func(m *Module) { hParam(m).Type = T(DType(42), S(3)) },
			"func @h: parameter %z: type dtype(42)[3]: invalid dtype"},
		{"symbol that is no identifier", func(m *Module) { hParam(m).Type = T(F32, Shape{Sym("a b")}) },
			`func @h: parameter %z: type f32[a b]: symbol "a b" is not an identifier ([A-Za-z_][A-Za-z0-9_.]*, not inf or nan)`},
		{"symbol named like a number", func(m *Module) { hParam(m).Type = T(F32, Shape{Sym("nan")}) },
			`func @h: parameter %z: type f32[nan]: symbol "nan" is not an identifier ([A-Za-z_][A-Za-z0-9_.]*, not inf or nan)`},
		{"symbolic dim built by hand", func(m *Module) { hParam(m).Type = T(F32, Shape{{Sym: "seq"}}) },
			"func @h: parameter %z: type f32[seq]: symbolic dim seq has Size 0, want -1 (build it with ir.Sym)"},
		{"type too large", func(m *Module) { hParam(m).Type = T(F32, S(math.MaxInt64/2, 2)) },
			"func @h: parameter %z: type f32[4611686018427387903, 2]: too large (its size in bytes overflows int64)"},
		{"weight with a symbolic shape", func(m *Module) { m.AddWeight("dyn", T(F32, Shape{Sym("n")}), nil) },
			"weight @dyn: shape [n] must be static"},
		{"weight with a bad type", func(m *Module) { m.AddWeight("neg", T(F32, S(-1)), nil) },
			"weight @neg: type f32[-1]: dim -1 is negative"},
		{"weight declared twice", func(m *Module) { m.AddWeight("w", T(F32, S(4)), nil) },
			"weight @w declared twice"},
		{"nil weight", func(m *Module) { m.Weights = append(m.Weights, nil) },
			"weight 1 is nil"},
		{"func declared twice", func(m *Module) { NewFunction(m, "g") },
			"func @g declared twice"},
		{"nil func", func(m *Module) { m.Funcs = append(m.Funcs, nil) },
			"func 3 is nil"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := verifyBase(t)
			tc.break_(m)
			err := Verify(m)
			if err == nil {
				t.Fatalf("Verify accepted the broken module:\n%s", Text(m))
			}
			if got := err.Error(); got != tc.want {
				t.Errorf("Verify error\n got: %s\nwant: %s", got, tc.want)
			}
		})
	}
}

func TestVerifyReportsManyErrors(t *testing.T) {
	m := verifyBase(t)
	for i := 0; i < 30; i++ {
		m.AddWeight("w", T(F32, S(4)), nil)
	}
	err := Verify(m)
	if err == nil {
		t.Fatal("no error")
	}
	lines := strings.Split(err.Error(), "\n")
	if len(lines) != maxVerifyErrors+1 || lines[len(lines)-1] != "too many errors" {
		t.Errorf("got %d lines, last %q; want %d and \"too many errors\"", len(lines), lines[len(lines)-1], maxVerifyErrors+1)
	}
}

func TestVerifyFunction(t *testing.T) {
	m := verifyBase(t)
	for _, f := range m.Funcs {
		if err := VerifyFunction(m, f); err != nil {
			t.Errorf("func @%s: %v", f.Name, err)
		}
	}
	m.Funcs[0].Nodes[1].Place = "elsewhere"
	err := VerifyFunction(m, m.Funcs[0])
	if err == nil || !strings.Contains(err.Error(), `placement "elsewhere"`) {
		t.Errorf("VerifyFunction: %v", err)
	}
	if err := VerifyFunction(m, nil); err == nil {
		t.Error("VerifyFunction accepted a nil function")
	}
}
