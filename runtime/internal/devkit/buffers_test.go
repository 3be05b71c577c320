package devkit_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/tapml/tapml/codegen"
	"github.com/tapml/tapml/codegen/wgsl"
	"github.com/tapml/tapml/ir"
	"github.com/tapml/tapml/runtime"
	"github.com/tapml/tapml/runtime/cpu"
	"github.com/tapml/tapml/runtime/internal/devkit"
)

// allocator returns an Allocator whose buffers are numbered, for tests of
// the runtime.Buffer side; exist holds the buffers not destroyed.
func allocator(exist map[int]bool) *devkit.Allocator[int] {
	next := 0
	return &devkit.Allocator[int]{
		Create:  func(uint64) (int, error) { next++; exist[next] = true; return next, nil },
		Destroy: func(h int) { delete(exist, h) },
		Pool:    devkit.Pool[int]{Limit: 1 << 20},
	}
}

func TestHandlesAndViews(t *testing.T) {
	dev, other := cpu.New(), cpu.New()
	exist := map[int]bool{}
	a := allocator(exist)
	g, _ := a.Alloc(24)
	x := devkit.Wrap(dev, g, ir.F32, []int{2, 3})
	hs := make([]*devkit.Buf[int], 1)
	if err := devkit.Handles(dev, []*runtime.Buffer{x}, hs); err != nil || hs[0] != g {
		t.Fatalf("Handles: %v", hs)
	}
	n := &ir.Node{ID: 1, Op: ir.OpReshape, Attrs: ir.Attrs{"shape": ir.ShapeAttr(ir.S(3, 2))}}
	if !devkit.IsView(n, "") || devkit.IsView(n, "wrong_index") || devkit.IsView(&ir.Node{Op: ir.OpNeg}, "") {
		t.Error("IsView: a reshape without a fault is a view, nothing else")
	}
	v, err := devkit.View(dev, n, []*runtime.Buffer{x}, hs, nil)
	if err != nil || v[0].Handle != g || !slices.Equal(v[0].Shape, []int{3, 2}) {
		t.Fatalf("View: %v %v", v, err)
	}
	if _, err := devkit.View(dev, n, []*runtime.Buffer{x}, hs, []ir.Type{ir.T(ir.F32, ir.S(6))}); err == nil {
		t.Error("View accepted output types the input does not give")
	}
	// The buffer lives while either the input or its view holds it.
	for i, b := range []*runtime.Buffer{x, v[0]} {
		h := devkit.Take[int](dev, b)
		if h != g || b.Handle != nil {
			t.Fatalf("Take %d: %v, handle left %v", i, h, b.Handle)
		}
		a.Free(h)
		if want := i == 0; g.Live() != want {
			t.Errorf("after freeing %d of 2 users: live %v", i+1, g.Live())
		}
	}
	for _, c := range []struct {
		name string
		b    *runtime.Buffer
		want string
	}{
		{"nil", nil, "nil buffer"},
		{"freed", x, "was freed"},
		{"another device's", devkit.Wrap(other, devkit.NewBuf(7, 16), ir.F32, []int{4}), "is not on cpu"},
	} {
		if err := devkit.Handles(dev, []*runtime.Buffer{c.b}, hs); err == nil || !strings.HasPrefix(err.Error(), "input 0: ") || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s buffer: %v, want %q", c.name, err, c.want)
		}
		if devkit.Take[int](dev, c.b) != nil {
			t.Errorf("Take of a %s buffer gave a handle", c.name)
		}
	}
}

// kernel generates the WGSL kernel of op on input types in.
func kernel(t *testing.T, op ir.Op, in ...ir.Type) (*ir.Node, *codegen.Kernel) {
	t.Helper()
	_, attrs, err := ir.InferTypes(op, in, nil)
	if err != nil {
		t.Fatal(err)
	}
	n := &ir.Node{ID: 3, Op: op, Attrs: attrs}
	k, err := wgsl.Generate(n, in, nil, wgsl.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return n, k
}

func TestBindAndOutputs(t *testing.T) {
	dev := cpu.New()
	exist := map[int]bool{}
	a := allocator(exist)
	wrap := func(bytes uint64, ty ir.Type) *runtime.Buffer {
		g, err := a.Alloc(bytes)
		if err != nil {
			t.Fatal(err)
		}
		return devkit.Wrap(dev, g, ty.DType, ty.Shape.Sizes())
	}
	cacheT, rowT, posT := ir.T(ir.F32, ir.S(8, 1, 4)), ir.T(ir.F32, ir.S(1, 1, 4)), ir.T(ir.I32, ir.S())
	in := []*runtime.Buffer{wrap(128, cacheT), wrap(16, rowT), wrap(4, posT)}
	hs := make([]*devkit.Buf[int], len(in))
	if err := devkit.Handles(dev, in, hs); err != nil {
		t.Fatal(err)
	}

	// kv_write updates its cache in place: no new buffer, the output is
	// the cache's runtime.Buffer itself.
	_, kv := kernel(t, ir.OpKVWrite, cacheT, rowT, posT)
	if err := devkit.CheckBindings(kv, hs); err != nil {
		t.Fatal(err)
	}
	bound := make([]*devkit.Buf[int], len(kv.Bindings))
	if err := a.Bind(kv, hs, bound); err != nil {
		t.Fatal(err)
	}
	if len(exist) != 3 || !slices.Equal(bound, hs) {
		t.Errorf("kv_write bound %v, want the inputs %v and no new buffer", bound, hs)
	}
	if out := devkit.Outputs(dev, kv, in, bound); len(out) != 1 || out[0] != in[0] {
		t.Errorf("kv_write outputs %v, want the cache itself", out)
	}

	// neg makes a new output, which Unbind gives back.
	_, neg := kernel(t, ir.OpNeg, rowT)
	bound = make([]*devkit.Buf[int], len(neg.Bindings))
	if err := a.Bind(neg, hs[1:2], bound); err != nil {
		t.Fatal(err)
	}
	out := devkit.Outputs(dev, neg, in[1:2], bound)
	if devkit.NumOutputs(neg) != 1 || len(out) != 1 || out[0] == in[1] || !out[0].Type().Equal(rowT) || len(exist) != 4 {
		t.Errorf("neg outputs %v (%d buffers), want one new %s", out, len(exist), rowT)
	}
	a.Unbind(neg, bound)
	if a.Pool.Bytes() != 16 {
		t.Errorf("Unbind pooled %d bytes, want the output's 16", a.Pool.Bytes())
	}

	// Prebuilt kernels are checked against their inputs.
	bad := func(edit func(k *codegen.Kernel)) *codegen.Kernel {
		_, k := kernel(t, ir.OpKVWrite, cacheT, rowT, posT)
		edit(k)
		return k
	}
	for _, c := range []struct {
		k    *codegen.Kernel
		want string
	}{
		{bad(func(k *codegen.Kernel) { k.Bindings[1].Index = 5 }), "has index 5"},
		{bad(func(k *codegen.Kernel) { k.Bindings[1].Input = 3 }), "reads input 3 of 3"},
		{bad(func(k *codegen.Kernel) { k.Bindings[0].Type = ir.T(ir.F32, ir.S(64, 1, 4)) }), "input 0 holds 128 bytes"},
		{bad(func(k *codegen.Kernel) { k.Bindings[2].Input, k.Bindings[2].Output = -1, -1 }), "neither an input nor an output"},
		{bad(func(k *codegen.Kernel) {
			k.Bindings[2].Input, k.Bindings[2].Output, k.Bindings[2].Access = -1, 0, codegen.Write
		}), "output 0 has two bindings"},
		{bad(func(k *codegen.Kernel) { k.Bindings[2].Input, k.Bindings[2].Output = -1, 1 }), "is a read-only output"},
		{bad(func(k *codegen.Kernel) { k.Bindings[0].Output = 1 }), "not numbered 0 to 0"},
		{bad(func(k *codegen.Kernel) {
			k.Bindings[2] = codegen.Binding{Index: 2, Access: codegen.Write, Type: ir.T(ir.F32, ir.Shape{ir.Sym("n")}), Input: -1, Output: 1}
		}), "symbolic type"},
	} {
		if err := devkit.CheckBindings(c.k, hs); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("CheckBindings: %v, want %q", err, c.want)
		}
	}
}

func TestPrepareAndNodeError(t *testing.T) {
	m := ir.NewModule("m")
	b := ir.NewFunction(m, "f")
	pos := b.Param("pos", ir.T(ir.I32, ir.S()))
	x := b.Param("x", ir.T(ir.F32, ir.S(4)))
	iota := b.Iota(pos, ir.Shape{ir.Sym("seq")}) // symbolic output: compiled at launch
	neg := b.Unary(ir.OpNeg, x)
	view := b.Reshape(neg, ir.S(2, 2))
	b.Return(iota, view)
	if err := b.Err(); err != nil {
		t.Fatal(err)
	}
	nodes := []*ir.Node{iota.Def, neg.Def, view.Def}
	isView := func(n *ir.Node) bool { return devkit.IsView(n, "") }
	var compiled []*ir.Node
	err := devkit.Prepare("dev", nodes, isView, func(n *ir.Node, in []ir.Type) error {
		compiled = append(compiled, n)
		return nil
	})
	if err != nil || !slices.Equal(compiled, []*ir.Node{neg.Def}) {
		t.Errorf("Prepare compiled %v (%v), want only the static non-view node %s", compiled, err, neg.Def)
	}
	boom := errors.New("boom")
	err = devkit.Prepare("dev", nodes, isView, func(*ir.Node, []ir.Type) error { return boom })
	var ke *runtime.KernelError
	if !errors.As(err, &ke) || ke.Node != neg.Def || ke.Device != "dev" || !errors.Is(err, boom) {
		t.Errorf("Prepare failure: %v, want a KernelError naming %s", err, neg.Def)
	}
	// An error that names a node or means the device is lost stays as it is.
	lost := runtime.Lost(boom)
	for _, c := range []struct {
		n    *ir.Node
		err  error
		same bool
	}{{neg.Def, nil, true}, {neg.Def, ke, true}, {neg.Def, lost, true}, {nil, boom, true}, {view.Def, boom, false}} {
		got := devkit.NodeError("dev", c.n, c.err)
		if (got == c.err) != c.same {
			t.Errorf("NodeError(%v, %v) = %v", c.n, c.err, got)
		}
	}
}

func TestFaults(t *testing.T) {
	src := map[int]string{1: "wrong_index"}
	f := devkit.CopyFaults(src)
	f.Set(2, "off_by_one")
	f.Set(1, "")
	if len(src) != 1 || len(f) != 1 || f[2] != "off_by_one" {
		t.Errorf("faults %v (source %v)", f, src)
	}
	if k := devkit.KeyOf(nil, []ir.Type{ir.T(ir.F32, ir.S(2))}, "x"); k.Sig != devkit.TypeSig([]ir.Type{ir.T(ir.F32, ir.S(2))}) || k.Fault != "x" {
		t.Errorf("KeyOf: %+v", k)
	}
}
