package onnx

import (
	"os"
	"path/filepath"
	goruntime "runtime"
	"strings"
	"syscall"
	"testing"

	"github.com/tapml/tapml/frontend/onnx/onnxpb"
	"github.com/tapml/tapml/internal/testenv"
	"github.com/tapml/tapml/ir"
	"github.com/tapml/tapml/tensor"
	"google.golang.org/protobuf/proto"
)

// Helpers that build small ONNX models.

func vinfo(name string, et onnxpb.TensorProto_DataType, dims ...any) *onnxpb.ValueInfoProto {
	var ds []*onnxpb.TensorShapeProto_Dimension
	for _, d := range dims {
		switch d := d.(type) {
		case int:
			ds = append(ds, &onnxpb.TensorShapeProto_Dimension{Value: &onnxpb.TensorShapeProto_Dimension_DimValue{DimValue: int64(d)}})
		case string:
			ds = append(ds, &onnxpb.TensorShapeProto_Dimension{Value: &onnxpb.TensorShapeProto_Dimension_DimParam{DimParam: d}})
		}
	}
	return &onnxpb.ValueInfoProto{Name: proto.String(name), Type: &onnxpb.TypeProto{Value: &onnxpb.TypeProto_TensorType{
		TensorType: &onnxpb.TypeProto_Tensor{ElemType: proto.Int32(int32(et)), Shape: &onnxpb.TensorShapeProto{Dim: ds}}}}}
}

func node(op string, in, out []string, attrs ...*onnxpb.AttributeProto) *onnxpb.NodeProto {
	return &onnxpb.NodeProto{OpType: proto.String(op), Input: in, Output: out, Name: proto.String(out[0]), Attribute: attrs}
}

func intsAttr(name string, v ...int64) *onnxpb.AttributeProto {
	return &onnxpb.AttributeProto{Name: proto.String(name), Type: onnxpb.AttributeProto_INTS.Enum(), Ints: v}
}

func floatTensor(name string, dims []int64, v ...float32) *onnxpb.TensorProto {
	return &onnxpb.TensorProto{Name: proto.String(name), DataType: proto.Int32(int32(onnxpb.TensorProto_FLOAT)), Dims: dims, FloatData: v}
}

func model(opset int64, g *onnxpb.GraphProto) []byte {
	mp := &onnxpb.ModelProto{IrVersion: proto.Int64(8), ProducerName: proto.String("tapml-test"),
		OpsetImport: []*onnxpb.OperatorSetIdProto{{Domain: proto.String(""), Version: proto.Int64(opset)}}, Graph: g}
	b, err := proto.Marshal(mp)
	if err != nil {
		panic(err)
	}
	return b
}

// addModel: y = x + w, x f32[2, 3], w an initializer.
func addModel(opset int64) []byte {
	return model(opset, &onnxpb.GraphProto{
		Name:        proto.String("add"),
		Input:       []*onnxpb.ValueInfoProto{vinfo("x", onnxpb.TensorProto_FLOAT, 2, 3)},
		Output:      []*onnxpb.ValueInfoProto{vinfo("y", onnxpb.TensorProto_FLOAT, 2, 3)},
		Initializer: []*onnxpb.TensorProto{floatTensor("w", []int64{3}, 1, 2, 3)},
		Node:        []*onnxpb.NodeProto{node("Add", []string{"x", "w"}, []string{"y"})},
	})
}

func TestSmallModel(t *testing.T) {
	m, err := Parse("add.onnx", addModel(13), Options{})
	if err != nil {
		t.Fatal(err)
	}
	x := tensor.FromFloat32([]int{2, 3}, []float32{1, 2, 3, 4, 5, 6})
	got := run(t, m, cpuDev, x)[0].Float32s()
	want := []float32{2, 4, 6, 5, 7, 9}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("got %v, want %v", got, want)
		}
	}
	if w := m.Weight("w"); w == nil || w.Type.String() != "f32[3]" {
		t.Errorf("initializer w is not a weight f32[3]: %v", m.Weights)
	}
	if m.Func("main") == nil || m.Meta["opset"] != "13" || m.Meta["format"] != "onnx" {
		t.Errorf("module: funcs %v meta %v", m.Funcs, m.Meta)
	}
	// The IR prints and parses back.
	m2, err := ir.Parse("add.tir", ir.Text(m))
	if err != nil {
		t.Fatal(err)
	}
	if err := m2.AttachWeights(m); err != nil {
		t.Fatal(err)
	}
}

func TestErrors(t *testing.T) {
	mnist, err := os.ReadFile(testenv.Model(t, "mnist-8_cntk.onnx"))
	if err != nil {
		t.Fatal(err)
	}
	unsupported := model(13, &onnxpb.GraphProto{
		Input:  []*onnxpb.ValueInfoProto{vinfo("x", onnxpb.TensorProto_FLOAT, 2, 3)},
		Output: []*onnxpb.ValueInfoProto{vinfo("y", onnxpb.TensorProto_FLOAT, 2, 3)},
		Node: []*onnxpb.NodeProto{
			node("NonMaxSuppression", []string{"x"}, []string{"a"}), node("Relu", []string{"a"}, []string{"b"}),
			node("NonMaxSuppression", []string{"b"}, []string{"c"}), node("Einsum", []string{"c"}, []string{"d"}),
			{OpType: proto.String("FusedConv"), Domain: proto.String("com.microsoft"), Input: []string{"d"}, Output: []string{"y"}},
			// An unsupported op inside a subgraph is named by its path.
			{OpType: proto.String("Loop"), Name: proto.String("L"), Input: []string{"", "", "x"}, Output: []string{"z"},
				Attribute: []*onnxpb.AttributeProto{{Name: proto.String("body"), Type: onnxpb.AttributeProto_GRAPH.Enum(),
					G: &onnxpb.GraphProto{Node: []*onnxpb.NodeProto{node("TopK", []string{"x"}, []string{"t"})}}}}},
		},
	})
	missing := model(13, &onnxpb.GraphProto{
		Input:  []*onnxpb.ValueInfoProto{vinfo("x", onnxpb.TensorProto_FLOAT, 2, 3)},
		Output: []*onnxpb.ValueInfoProto{vinfo("y", onnxpb.TensorProto_FLOAT, 2, 3)},
		Node:   []*onnxpb.NodeProto{node("Add", []string{"x", "bias"}, []string{"y"})},
	})
	badRaw := model(13, &onnxpb.GraphProto{
		Input:       []*onnxpb.ValueInfoProto{vinfo("x", onnxpb.TensorProto_FLOAT, 2, 3)},
		Output:      []*onnxpb.ValueInfoProto{vinfo("y", onnxpb.TensorProto_FLOAT, 2, 3)},
		Initializer: []*onnxpb.TensorProto{{Name: proto.String("w"), DataType: proto.Int32(1), Dims: []int64{3}, RawData: []byte{1, 2, 3}}},
		Node:        []*onnxpb.NodeProto{node("Add", []string{"x", "w"}, []string{"y"})},
	})
	shortData := model(13, &onnxpb.GraphProto{
		Input:       []*onnxpb.ValueInfoProto{vinfo("x", onnxpb.TensorProto_FLOAT, 2, 3)},
		Output:      []*onnxpb.ValueInfoProto{vinfo("y", onnxpb.TensorProto_FLOAT, 2, 3)},
		Initializer: []*onnxpb.TensorProto{floatTensor("w", []int64{3}, 1, 2), {Name: proto.String("i"), DataType: proto.Int32(6), Dims: []int64{2}, Int32Data: []int32{1}}},
		Node:        []*onnxpb.NodeProto{node("Add", []string{"x", "w"}, []string{"y"})},
	})
	shortInts := model(13, &onnxpb.GraphProto{
		Input:       []*onnxpb.ValueInfoProto{vinfo("x", onnxpb.TensorProto_FLOAT, 2, 3)},
		Output:      []*onnxpb.ValueInfoProto{vinfo("y", onnxpb.TensorProto_FLOAT, 2, 3)},
		Initializer: []*onnxpb.TensorProto{{Name: proto.String("i"), DataType: proto.Int32(6), Dims: []int64{2}, Int32Data: []int32{1}}},
		Node:        []*onnxpb.NodeProto{node("Relu", []string{"x"}, []string{"y"})},
	})
	dynamic := model(13, &onnxpb.GraphProto{
		Input:  []*onnxpb.ValueInfoProto{vinfo("x", onnxpb.TensorProto_FLOAT, "batch", 3, "height", "width")},
		Output: []*onnxpb.ValueInfoProto{vinfo("y", onnxpb.TensorProto_FLOAT)},
		Node:   []*onnxpb.NodeProto{node("Relu", []string{"x"}, []string{"y"})},
	})
	noOutput := model(13, &onnxpb.GraphProto{
		Input:  []*onnxpb.ValueInfoProto{vinfo("x", onnxpb.TensorProto_FLOAT, 2)},
		Output: []*onnxpb.ValueInfoProto{vinfo("z", onnxpb.TensorProto_FLOAT, 2)},
		Node:   []*onnxpb.NodeProto{node("Relu", []string{"x"}, []string{"y"})},
	})
	noOutputs := model(13, &onnxpb.GraphProto{
		Input: []*onnxpb.ValueInfoProto{vinfo("x", onnxpb.TensorProto_FLOAT, 2)},
		Node:  []*onnxpb.NodeProto{node("Relu", []string{"x"}, []string{"y"})},
	})
	badShape := model(13, &onnxpb.GraphProto{
		Input:       []*onnxpb.ValueInfoProto{vinfo("x", onnxpb.TensorProto_FLOAT, 2, 3)},
		Output:      []*onnxpb.ValueInfoProto{vinfo("y", onnxpb.TensorProto_FLOAT)},
		Initializer: []*onnxpb.TensorProto{{Name: proto.String("s"), DataType: proto.Int32(7), Dims: []int64{2}, Int64Data: []int64{4, 4}}},
		Node:        []*onnxpb.NodeProto{node("Reshape", []string{"x", "s"}, []string{"y"})},
	})
	cases := []struct {
		name string
		data []byte
		opts Options
		want string
	}{
		{"corrupt", []byte("\x0a\xff\xff\xff\xff\x0fgarbage"), Options{}, "corrupt.onnx: not a valid ONNX model (protobuf:"},
		{"truncated", mnist[:len(mnist)/2], Options{}, "truncated.onnx: not a valid ONNX model"},
		{"empty", nil, Options{}, "empty.onnx: not a valid ONNX model: no graph"},
		{"opset 99", addModel(99), Options{}, "opset99.onnx: opset 99 of the default domain is not supported (tapml reads opsets 7 to 21)"},
		{"opset 5", addModel(5), Options{}, "opset 5 of the default domain is not supported"},
		{"unsupported", unsupported, Options{}, "unsupported.onnx: 5 nodes of 4 unsupported op types: Einsum (1: d); NonMaxSuppression (2: a, c); TopK (1: L/body/t); com.microsoft.FusedConv (1: y)"},
		{"missing", missing, Options{}, `missing.onnx: node "y" (Add): input "bias" is neither a graph input, an initializer nor the output of an earlier node`},
		{"bad raw", badRaw, Options{}, `badraw.onnx: initializer: tensor "w": FLOAT[3] needs 12 bytes of raw data, the file holds 3`},
		{"short data", shortData, Options{}, `shortdata.onnx: initializer: tensor "w": FLOAT[3] needs 3 elements, the file holds 2`},
		{"short ints", shortInts, Options{}, `shortints.onnx: initializer: tensor "i": INT32[2] needs 2 elements, the file holds 1`},
		{"dynamic", dynamic, Options{}, `graph input "x" has dynamic dim 2 (height), dim 3 (width): give sizes with Options.Shapes or Options.Dims`},
		{"dynamic bad shape", dynamic, Options{Shapes: map[string][]int64{"x": {1, 4, 5, 5}}}, `Options.Shapes["x"] = [1 4 5 5], but dim 1 of the input is 3`},
		{"no output", noOutput, Options{}, `graph output "z" is not computed by any node`},
		{"no outputs", noOutputs, Options{}, `nooutputs.onnx: the graph has no outputs`},
		{"reshape", badShape, Options{}, `node "y" (Reshape): cannot reshape [2 3] to [4 4]`},
	}
	for _, c := range cases {
		_, err := Parse(strings.ReplaceAll(c.name, " ", "")+".onnx", c.data, c.opts)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one with %q", c.name, err, c.want)
		}
	}
	// Dims by name, and the default batch of 1.
	m, err := Parse("dyn.onnx", dynamic, Options{Dims: map[string]int64{"height": 5, "width": 7}})
	if err != nil {
		t.Fatal(err)
	}
	if got := m.Funcs[0].Params[0].Type.String(); got != "f32[1, 3, 5, 7]" {
		t.Errorf("param %s", got)
	}
	// Load names the file.
	dir := t.TempDir()
	path := filepath.Join(dir, "bad.onnx")
	os.WriteFile(path, []byte("not a model"), 0o644)
	if _, err := Load(path, Options{}); err == nil || !strings.HasPrefix(err.Error(), path+": ") {
		t.Errorf("Load: %v", err)
	}
	// External data that is a device or a FIFO is refused by name, not
	// read (/dev/zero would never end; a FIFO would wait for a writer).
	fifo := filepath.Join(dir, "fifo.bin")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	os.Symlink("/dev/zero", filepath.Join(dir, "zero.bin"))
	for _, loc := range []string{"fifo.bin", "zero.bin"} {
		ext := model(13, &onnxpb.GraphProto{
			Input:  []*onnxpb.ValueInfoProto{vinfo("x", onnxpb.TensorProto_FLOAT, 3)},
			Output: []*onnxpb.ValueInfoProto{vinfo("y", onnxpb.TensorProto_FLOAT, 3)},
			Initializer: []*onnxpb.TensorProto{{Name: proto.String("w"), DataType: proto.Int32(1), Dims: []int64{3},
				DataLocation: onnxpb.TensorProto_EXTERNAL.Enum(),
				ExternalData: []*onnxpb.StringStringEntryProto{{Key: proto.String("location"), Value: proto.String(loc)}}}},
			Node: []*onnxpb.NodeProto{node("Add", []string{"x", "w"}, []string{"y"})},
		})
		p := filepath.Join(dir, "ext.onnx")
		os.WriteFile(p, ext, 0o644)
		if _, err := Load(p, Options{}); err == nil || !strings.Contains(err.Error(), loc+": a ") || !strings.Contains(err.Error(), "not a regular file") {
			t.Errorf("external data in %s: %v", loc, err)
		}
	}
}

func TestSniff(t *testing.T) {
	for _, p := range []string{testenv.Model(t, "mnist-8_cntk.onnx"), ocrModel(t, "ch_PP-OCRv4_det_infer.onnx")} {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if !Sniff(b[:512]) {
			t.Errorf("%s: not sniffed as ONNX", p)
		}
	}
	if !Sniff(addModel(13)) {
		t.Error("a small model is not sniffed as ONNX")
	}
	for _, name := range []string{"stories260K.bin", "llama-2-tiny-random.gguf", "tok512.bin"} {
		p := testenv.Model(t, name)
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if Sniff(b[:min(512, len(b))]) {
			t.Errorf("%s: sniffed as ONNX", p)
		}
	}
	for _, s := range []string{"", "module x", "// tapml IR", "\x08\x00", "\x08\xc8\x01"} {
		if Sniff([]byte(s)) {
			t.Errorf("%q sniffed as ONNX", s)
		}
	}
}

// FuzzLoad feeds the importer arbitrary bytes: it returns a module or an
// error, never panics.
func FuzzLoad(f *testing.F) {
	f.Add(addModel(13))
	f.Add(addModel(9))
	seeds := []string{testenv.Model(f, "mnist-8_cntk.onnx")}
	for _, name := range []string{"test_conv_with_strides_padding", "test_resize_upsample_scales_nearest", "test_slice_neg_steps", "test_reshape_zero_and_negative_dim", "test_layer_normalization_4d_axis1", "test_gemm_all_attributes", "test_maxpool_2d_ceil", "test_convtranspose_pads",
		"test_if", "test_loop11", "test_scan9_sum", "test_lstm_with_initial_bias", "test_gru_seq_length", "test_where_example", "test_edge_pad"} {
		seeds = append(seeds, testenv.Installed(f, filepath.Join(nodeCases, name, "model.onnx")))
	}
	for _, p := range seeds {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := Parse("fuzz.onnx", data, Options{Dims: map[string]int64{"N": 2}})
		if err == nil {
			if err := ir.Verify(m); err != nil {
				t.Fatalf("imported module does not verify: %v", err)
			}
		}
	})
}

// TestSmallFileLargeConstants: constants that import computes beyond what
// the file holds (integer arithmetic on broadcast constants) are bounded
// like folded ones, so a small file cannot make the importer allocate
// gigabytes; a LayerNormalization without bias makes none (want "": it
// imports).
func TestSmallFileLargeConstants(t *testing.T) {
	const d = 1 << 28 // 1 GiB of f32
	layerNorm := model(17, &onnxpb.GraphProto{
		Input:  []*onnxpb.ValueInfoProto{vinfo("x", onnxpb.TensorProto_FLOAT, 1, d), vinfo("s", onnxpb.TensorProto_FLOAT, d)},
		Output: []*onnxpb.ValueInfoProto{vinfo("y", onnxpb.TensorProto_FLOAT, 1, d)},
		Node:   []*onnxpb.NodeProto{node("LayerNormalization", []string{"x", "s"}, []string{"y"})},
	})
	const n = 1 << 14 // [n, 1] / [1, n]: 2 GiB of i64
	ones := make([]int64, n)
	for i := range ones {
		ones[i] = 1
	}
	i64 := func(name string, dims ...int64) *onnxpb.TensorProto {
		return &onnxpb.TensorProto{Name: proto.String(name), DataType: proto.Int32(int32(onnxpb.TensorProto_INT64)), Dims: dims, Int64Data: ones}
	}
	div := model(13, &onnxpb.GraphProto{
		Input:       []*onnxpb.ValueInfoProto{vinfo("x", onnxpb.TensorProto_FLOAT, 1)},
		Output:      []*onnxpb.ValueInfoProto{vinfo("y", onnxpb.TensorProto_INT64, n, n)},
		Initializer: []*onnxpb.TensorProto{i64("a", n, 1), i64("b", 1, n)},
		Node:        []*onnxpb.NodeProto{node("Div", []string{"a", "b"}, []string{"y"})},
	})
	noData := model(13, &onnxpb.GraphProto{
		Input:       []*onnxpb.ValueInfoProto{vinfo("x", onnxpb.TensorProto_FLOAT, 1)},
		Output:      []*onnxpb.ValueInfoProto{vinfo("y", onnxpb.TensorProto_FLOAT, 1)},
		Initializer: []*onnxpb.TensorProto{floatTensor("w", []int64{1 << 30}, 1)},
		Node:        []*onnxpb.NodeProto{node("Add", []string{"x", "w"}, []string{"y"})},
	})
	for _, c := range []struct {
		name string
		data []byte
		want string
	}{
		{"no data", noData, "needs 1073741824 elements, the file holds 1"},
		{"layernorm", layerNorm, ""},
		{"div", div, "too large"},
	} {
		var before, after goruntime.MemStats
		goruntime.ReadMemStats(&before)
		_, err := Parse(c.name+".onnx", c.data, Options{})
		goruntime.ReadMemStats(&after)
		if (err == nil) != (c.want == "") || err != nil && !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one with %q", c.name, err, c.want)
		}
		if a := after.TotalAlloc - before.TotalAlloc; a > 256<<20 {
			t.Errorf("%s: importing a %d-byte file allocated %d MiB", c.name, len(c.data), a>>20)
		}
	}
}
