package onnx

import (
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/tapml/tapml/frontend/onnx/onnxpb"
	"github.com/tapml/tapml/ir"
	"github.com/tapml/tapml/tensor"
	"google.golang.org/protobuf/proto"
)

func graphAttr(name string, g *onnxpb.GraphProto) *onnxpb.AttributeProto {
	return &onnxpb.AttributeProto{Name: proto.String(name), Type: onnxpb.AttributeProto_GRAPH.Enum(), G: g}
}

// ifModel: y = x + 1 if flag else x · 2, for x f32[3] and a bool flag.
func ifModel() []byte {
	branch := func(op, out string) *onnxpb.GraphProto {
		return &onnxpb.GraphProto{
			Initializer: []*onnxpb.TensorProto{floatTensor("k"+out, nil, map[string]float32{"t": 1, "e": 2}[out])},
			Node:        []*onnxpb.NodeProto{node(op, []string{"x", "k" + out}, []string{out})},
			Output:      []*onnxpb.ValueInfoProto{vinfo(out, onnxpb.TensorProto_FLOAT, 3)},
		}
	}
	return model(13, &onnxpb.GraphProto{
		Input:  []*onnxpb.ValueInfoProto{vinfo("x", onnxpb.TensorProto_FLOAT, 3), vinfo("flag", onnxpb.TensorProto_BOOL)},
		Output: []*onnxpb.ValueInfoProto{vinfo("y", onnxpb.TensorProto_FLOAT, 3)},
		Node: []*onnxpb.NodeProto{node("If", []string{"flag"}, []string{"y"},
			graphAttr("then_branch", branch("Add", "t")), graphAttr("else_branch", branch("Mul", "e")))},
	})
}

func ops(m *ir.Module) []string {
	var out []string
	for _, n := range m.Funcs[0].Nodes {
		out = append(out, n.Op.String())
	}
	return out
}

// An If whose condition is known only at run time computes both branches
// and selects; fixing the condition's input folds it to one branch, and
// the input is gone from the function.
func TestIf(t *testing.T) {
	x := tensor.FromFloat32([]int{3}, []float32{1, 2, 3})
	m, err := Parse("if", ifModel(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(ops(m), "where") || len(m.Funcs[0].Params) != 2 {
		t.Fatalf("run-time If: ops %v, params %d", ops(m), len(m.Funcs[0].Params))
	}
	for flag, want := range map[int32][]float32{1: {2, 3, 4}, 0: {2, 4, 6}} {
		got := run(t, m, cpuDev, x, tensor.FromInt32(nil, []int32{flag}))
		if diff := cmp.Diff(want, got[0].Float32s()); diff != "" {
			t.Errorf("flag %d (-want +got):\n%s", flag, diff)
		}
	}
	yes := tensor.New(ir.Bool, nil)
	yes.Data[0] = 1
	m, err = Parse("if", ifModel(), Options{Constants: map[string]*tensor.Tensor{"flag": yes}})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"add"}, ops(m)); diff != "" || len(m.Funcs[0].Params) != 1 {
		t.Errorf("fixed flag: ops (-want +got):\n%s; params %d", diff, len(m.Funcs[0].Params))
	}
	if n := m.Funcs[0].Nodes[0]; n.Prov != "y/then_branch/t" {
		t.Errorf("provenance %q, want the branch's path", n.Prov)
	}
	if got := run(t, m, cpuDev, x); !slices.Equal(got[0].Float32s(), []float32{2, 3, 4}) {
		t.Errorf("fixed flag: %v", got[0].Float32s())
	}
	if _, err := Parse("if", ifModel(), Options{Constants: map[string]*tensor.Tensor{"nope": yes}}); err == nil || !strings.Contains(err.Error(), `no input "nope"`) {
		t.Errorf("fixing an input that does not exist: %v", err)
	}
}

// loopModel: acc = x, then acc = acc + x while iteration i < stop, at most
// m times; a scan output collects acc. stop is an initializer or, with
// runtimeStop, a graph input.
func loopModel(m int64, runtimeStop bool) []byte {
	body := &onnxpb.GraphProto{
		Input: []*onnxpb.ValueInfoProto{vinfo("i", onnxpb.TensorProto_INT64), vinfo("c", onnxpb.TensorProto_BOOL), vinfo("acc", onnxpb.TensorProto_FLOAT, 2)},
		Node: []*onnxpb.NodeProto{
			node("Add", []string{"acc", "x"}, []string{"acc2"}),
			node("Less", []string{"i", "stop"}, []string{"c2"}),
			node("Identity", []string{"acc2"}, []string{"scan"}),
		},
		Output: []*onnxpb.ValueInfoProto{vinfo("c2", onnxpb.TensorProto_BOOL), vinfo("acc2", onnxpb.TensorProto_FLOAT, 2), vinfo("scan", onnxpb.TensorProto_FLOAT, 2)},
	}
	g := &onnxpb.GraphProto{
		Input:  []*onnxpb.ValueInfoProto{vinfo("x", onnxpb.TensorProto_FLOAT, 2)},
		Output: []*onnxpb.ValueInfoProto{vinfo("y", onnxpb.TensorProto_FLOAT, 2), vinfo("ys", onnxpb.TensorProto_FLOAT, 3, 2)},
		Initializer: []*onnxpb.TensorProto{
			{Name: proto.String("M"), DataType: proto.Int32(int32(onnxpb.TensorProto_INT64)), Int64Data: []int64{m}},
			{Name: proto.String("go"), DataType: proto.Int32(int32(onnxpb.TensorProto_BOOL)), Int32Data: []int32{1}},
		},
		Node: []*onnxpb.NodeProto{{OpType: proto.String("Loop"), Name: proto.String("L"), Input: []string{"M", "go", "x"}, Output: []string{"y", "ys"},
			Attribute: []*onnxpb.AttributeProto{graphAttr("body", body)}}},
	}
	stop := &onnxpb.TensorProto{Name: proto.String("stop"), DataType: proto.Int32(int32(onnxpb.TensorProto_INT64)), Int64Data: []int64{2}}
	if runtimeStop {
		g.Input = append(g.Input, vinfo("stop", onnxpb.TensorProto_INT64))
	} else {
		g.Initializer = append(g.Initializer, stop)
	}
	return model(13, g)
}

// A Loop unrolls while its condition, computed from the iteration number,
// holds (3 iterations of at most 5), carrying acc and stacking the scan
// output; each iteration's nodes say which iteration they are. A condition
// known only at run time cannot be unrolled.
func TestLoopUnrolled(t *testing.T) {
	m, err := Parse("loop", loopModel(5, false), Options{})
	if err != nil {
		t.Fatal(err)
	}
	got := run(t, m, cpuDev, tensor.FromFloat32([]int{2}, []float32{1, -2}))
	if diff := cmp.Diff([]float32{4, -8}, got[0].Float32s()); diff != "" {
		t.Errorf("carried (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]float32{2, -4, 3, -6, 4, -8}, got[1].Float32s()); diff != "" || !slices.Equal(got[1].Shape, []int{3, 2}) {
		t.Errorf("scan output %v (-want +got):\n%s", got[1].Shape, diff)
	}
	provs := map[string]bool{}
	for _, n := range m.Funcs[0].Nodes {
		provs[n.Prov] = true
	}
	if !provs["L/body[2]/acc2"] || provs["L/body[3]/acc2"] {
		t.Errorf("provenances %v: want iterations 0 to 2", provs)
	}
	if m, err = Parse("loop", loopModel(1, false), Options{}); err != nil || len(run(t, m, cpuDev, tensor.FromFloat32([]int{2}, []float32{1, 1}))[1].Shape) != 2 {
		t.Errorf("a trip count of 1: %v", err)
	}
	_, err = Parse("loop", loopModel(5, true), Options{Shapes: map[string][]int64{"stop": nil}})
	if err == nil || !strings.Contains(err.Error(), "unrolls loops at import") {
		t.Errorf("a run-time condition: %v", err)
	}
}

// Ops lists every handler with its opset range.
func TestOpsList(t *testing.T) {
	byName := map[string]OpInfo{}
	for _, o := range Ops() {
		byName[o.Name] = o
	}
	for name, since := range map[string]int64{"Scan": 9, "LSTM": 7, "If": 7, "GreaterOrEqual": 12, "Conv": 7, "LayerNormalization": 17} {
		if o, ok := byName[name]; !ok || o.Since != since || o.Until != MaxOpset {
			t.Errorf("%s: %+v, want opsets %d-%d", name, o, since, MaxOpset)
		}
	}
}
