package onnx

import (
	"fmt"
	"slices"
	"testing"

	"github.com/tapml/tapml/frontend/onnx/onnxpb"
	"github.com/tapml/tapml/ir"
	"github.com/tapml/tapml/tensor"
	"google.golang.org/protobuf/proto"
)

func i64Init(name string, v ...int64) *onnxpb.TensorProto {
	return &onnxpb.TensorProto{Name: proto.String(name), DataType: proto.Int32(int32(onnxpb.TensorProto_INT64)), Dims: []int64{int64(len(v))}, Int64Data: v}
}

func f32Init(name string, v ...float32) *onnxpb.TensorProto {
	return floatTensor(name, []int64{int64(len(v))}, v...)
}

func floatAttr(name string, v float32) *onnxpb.AttributeProto {
	return &onnxpb.AttributeProto{Name: proto.String(name), Type: onnxpb.AttributeProto_FLOAT.Enum(), F: proto.Float32(v)}
}

func intAttr(name string, v int64) *onnxpb.AttributeProto {
	return &onnxpb.AttributeProto{Name: proto.String(name), Type: onnxpb.AttributeProto_INT.Enum(), I: proto.Int64(v)}
}

func strAttr(name, v string) *onnxpb.AttributeProto {
	return &onnxpb.AttributeProto{Name: proto.String(name), Type: onnxpb.AttributeProto_STRING.Enum(), S: []byte(v)}
}

// TestOpsetForms checks the opset-dependent forms of ops (attributes that
// became inputs, changed defaults): each pair of models, one per form, must
// give the same result on x = 0, 1, ..., 23 in shape [1, 2, 3, 4].
func TestOpsetForms(t *testing.T) {
	x := tensor.New(ir.F32, []int{1, 2, 3, 4})
	for i := range x.Float32s() {
		x.Float32s()[i] = float32(i) - 11.5
	}
	type form struct {
		opset int64
		nodes []*onnxpb.NodeProto
		inits []*onnxpb.TensorProto
	}
	cases := []struct {
		name  string
		forms []form
		want  []int // the output shape
	}{
		{"Slice", []form{
			{9, []*onnxpb.NodeProto{node("Slice", []string{"x"}, []string{"y"}, intsAttr("starts", 1, -3), intsAttr("ends", 3, 100), intsAttr("axes", 2, 3))}, nil},
			{13, []*onnxpb.NodeProto{node("Slice", []string{"x", "s", "e", "a"}, []string{"y"})}, []*onnxpb.TensorProto{i64Init("s", 1, -3), i64Init("e", 3, 100), i64Init("a", 2, 3)}},
			{13, []*onnxpb.NodeProto{node("Slice", []string{"x", "s", "e", "a", "st"}, []string{"y"})}, []*onnxpb.TensorProto{i64Init("s", 1, 1), i64Init("e", 3, 4), i64Init("a", 2, -1), i64Init("st", 1, 1)}},
		}, []int{1, 2, 2, 3}},
		{"Slice negative step", []form{
			{13, []*onnxpb.NodeProto{node("Slice", []string{"x", "s", "e", "a", "st"}, []string{"y"})}, []*onnxpb.TensorProto{i64Init("s", -1), i64Init("e", -100), i64Init("a", 3), i64Init("st", -2)}},
		}, []int{1, 2, 3, 2}},
		{"Squeeze/Unsqueeze", []form{
			{11, []*onnxpb.NodeProto{node("Squeeze", []string{"x"}, []string{"t"}, intsAttr("axes", 0)), node("Unsqueeze", []string{"t"}, []string{"y"}, intsAttr("axes", 1, -1))}, nil},
			{13, []*onnxpb.NodeProto{node("Squeeze", []string{"x", "a"}, []string{"t"}), node("Unsqueeze", []string{"t", "b"}, []string{"y"})}, []*onnxpb.TensorProto{i64Init("a", 0), i64Init("b", 1, -1)}},
		}, []int{2, 1, 3, 4, 1}},
		{"Clip", []form{
			{9, []*onnxpb.NodeProto{node("Clip", []string{"x"}, []string{"y"}, floatAttr("min", -2), floatAttr("max", 3.5))}, nil},
			{12, []*onnxpb.NodeProto{node("Clip", []string{"x", "lo", "hi"}, []string{"y"})}, []*onnxpb.TensorProto{floatTensor("lo", nil, -2), floatTensor("hi", nil, 3.5)}},
		}, []int{1, 2, 3, 4}},
		{"ReduceMean", []form{
			{13, []*onnxpb.NodeProto{node("ReduceMean", []string{"x"}, []string{"y"}, intsAttr("axes", -1, 1), intAttr("keepdims", 0))}, nil},
			{18, []*onnxpb.NodeProto{node("ReduceMean", []string{"x", "a"}, []string{"y"}, intAttr("keepdims", 0))}, []*onnxpb.TensorProto{i64Init("a", -1, 1)}},
		}, []int{1, 3}},
		{"ReduceSum", []form{
			{11, []*onnxpb.NodeProto{node("ReduceSum", []string{"x"}, []string{"y"}, intsAttr("axes", 2))}, nil},
			{13, []*onnxpb.NodeProto{node("ReduceSum", []string{"x", "a"}, []string{"y"})}, []*onnxpb.TensorProto{i64Init("a", 2)}},
		}, []int{1, 2, 1, 4}},
		{"Softmax axis 1", []form{
			// opset 11: softmax over dims 1.. flattened; opset 13: over a
			// reshape that flattens them by hand.
			{11, []*onnxpb.NodeProto{node("Softmax", []string{"x"}, []string{"y"})}, nil},
			{13, []*onnxpb.NodeProto{node("Reshape", []string{"x", "s"}, []string{"t"}), node("Softmax", []string{"t"}, []string{"u"}), node("Reshape", []string{"u", "s2"}, []string{"y"})},
				[]*onnxpb.TensorProto{i64Init("s", 1, -1), i64Init("s2", 1, 2, 3, 4)}},
		}, []int{1, 2, 3, 4}},
		{"Resize nearest x2", []form{
			{9, []*onnxpb.NodeProto{node("Upsample", []string{"x", "sc"}, []string{"y"})}, []*onnxpb.TensorProto{f32Init("sc", 1, 1, 2, 2)}},
			{10, []*onnxpb.NodeProto{node("Resize", []string{"x", "sc"}, []string{"y"})}, []*onnxpb.TensorProto{f32Init("sc", 1, 1, 2, 2)}},
			{11, []*onnxpb.NodeProto{node("Resize", []string{"x", "roi", "sc"}, []string{"y"}, strAttr("coordinate_transformation_mode", "asymmetric"), strAttr("nearest_mode", "floor"))},
				[]*onnxpb.TensorProto{f32Init("roi"), f32Init("sc", 1, 1, 2, 2)}},
			{13, []*onnxpb.NodeProto{node("Resize", []string{"x", "", "", "sz"}, []string{"y"}, strAttr("coordinate_transformation_mode", "asymmetric"), strAttr("nearest_mode", "floor"))},
				[]*onnxpb.TensorProto{i64Init("sz", 1, 2, 6, 8)}},
		}, []int{1, 2, 6, 8}},
		{"Shape chain", []form{
			// Shape → Gather → Concat → Reshape, folded at import.
			{13, []*onnxpb.NodeProto{
				node("Shape", []string{"x"}, []string{"s"}), node("Gather", []string{"s", "i"}, []string{"g"}, intAttr("axis", 0)),
				node("Concat", []string{"g", "m"}, []string{"c"}, intAttr("axis", 0)), node("Reshape", []string{"x", "c"}, []string{"y"}),
			}, []*onnxpb.TensorProto{i64Init("i", 0, 1), i64Init("m", -1)}},
			{7, []*onnxpb.NodeProto{node("Flatten", []string{"x"}, []string{"t"}, intAttr("axis", 2)), node("Reshape", []string{"t", "c"}, []string{"y"})}, []*onnxpb.TensorProto{i64Init("c", 1, 2, 12)}},
		}, []int{1, 2, 12}},
	}
	for _, c := range cases {
		var first []float32
		for _, f := range c.forms {
			data := model(f.opset, &onnxpb.GraphProto{
				Input:       []*onnxpb.ValueInfoProto{vinfo("x", onnxpb.TensorProto_FLOAT, 1, 2, 3, 4)},
				Output:      []*onnxpb.ValueInfoProto{vinfo("y", onnxpb.TensorProto_FLOAT)},
				Node:        f.nodes,
				Initializer: f.inits,
			})
			what := fmt.Sprintf("%s opset %d", c.name, f.opset)
			m, err := Parse(what, data, Options{})
			if err != nil {
				t.Errorf("%v", err)
				continue
			}
			got := run(t, m, cpuDev, x)[0]
			if !slices.Equal(got.Shape, c.want) {
				t.Errorf("%s: shape %v, want %v", what, got.Shape, c.want)
				continue
			}
			if first == nil {
				first = got.Float32s()
			} else if !slices.Equal(first, got.Float32s()) {
				t.Errorf("%s: %v differs from the first form's %v", what, got.Float32s(), first)
			}
			if c.name == "Shape chain" && f.opset == 13 && len(m.Funcs[0].Nodes) != 1 {
				t.Errorf("%s: the shape computation was not folded: %d nodes", what, len(m.Funcs[0].Nodes))
			}
		}
		if c.name == "Slice negative step" && !slices.Equal(first, []float32{-8.5, -10.5, -4.5, -6.5, -0.5, -2.5, 3.5, 1.5, 7.5, 5.5, 11.5, 9.5}) {
			t.Errorf("negative step: %v", first)
		}
	}
}
