package carve

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/tapml/tapml/frontend/onnx/onnxpb"
	"github.com/tapml/tapml/ir"
	"github.com/tapml/tapml/tensor"
	"google.golang.org/protobuf/proto"
)

func writeFile(t *testing.T, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func npyBytes(t *testing.T, x *tensor.Tensor) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := WriteNPY(&b, x); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// npyFile builds a .npy file by hand, as NumPy writes it.
func npyFile(descr, shape string, body []byte) []byte {
	h := "{'descr': '" + descr + "', 'fortran_order': False, 'shape': " + shape + ", }"
	h += strings.Repeat(" ", 63-(10+len(h))%64) + "\n"
	out := append([]byte("\x93NUMPY\x01\x00"), byte(len(h)), byte(len(h)>>8))
	return append(append(out, h...), body...)
}

func TestReadInputFormats(t *testing.T) {
	f32 := tensor.FromFloat32([]int{2, 3}, []float32{1, -2, 3.5, 0, 1e-3, -7})
	want := ir.T(ir.F32, ir.S(2, 3))

	// .npy written by WriteNPY reads back; f8 and i8 NumPy files convert.
	got, err := ReadInput(writeFile(t, "x.npy", npyBytes(t, f32)), want)
	if err != nil || !cmp.Equal(got.Float32s(), f32.Float32s()) {
		t.Errorf("npy round trip: %v %v", got, err)
	}
	f8 := make([]byte, 0, 48)
	for _, v := range f32.Float32s() {
		f8 = binary.LittleEndian.AppendUint64(f8, math.Float64bits(float64(v)))
	}
	if got, err := ReadInput(writeFile(t, "d.npy", npyFile("<f8", "(2, 3)", f8)), want); err != nil || !cmp.Equal(got.Float32s(), f32.Float32s()) {
		t.Errorf("<f8 npy: %v %v", got, err)
	}
	i8 := binary.LittleEndian.AppendUint64(binary.LittleEndian.AppendUint64(nil, 5), uint64(math.MaxUint32))
	if got, err := ReadInput(writeFile(t, "i.npy", npyFile("<i8", "(2,)", i8[:8])), ir.T(ir.I32, ir.S(1))); err == nil {
		t.Errorf("shape (2,) data of 1 element: no error, got %v", got)
	}
	if _, err := ReadInput(writeFile(t, "big.npy", npyFile("<i8", "(2,)", i8)), ir.T(ir.I32, ir.S(2))); err == nil || !strings.Contains(err.Error(), "does not fit") {
		t.Errorf("i64 beyond i32: %v", err)
	}

	// An ONNX TensorProto, raw_data and float_data.
	for _, tp := range []*onnxpb.TensorProto{
		{Dims: []int64{2, 3}, DataType: proto.Int32(int32(onnxpb.TensorProto_FLOAT)), FloatData: f32.Float32s()},
		{Dims: []int64{2, 3}, DataType: proto.Int32(int32(onnxpb.TensorProto_FLOAT)), RawData: f32.Data},
	} {
		data, err := proto.Marshal(tp)
		if err != nil {
			t.Fatal(err)
		}
		if got, err := ReadInput(writeFile(t, "input_0.pb", data), want); err != nil || !cmp.Equal(got.Float32s(), f32.Float32s()) {
			t.Errorf("pb: %v %v", got, err)
		}
	}

	// Raw f32 in the input's shape.
	if got, err := ReadInput(writeFile(t, "x.f32", f32.Data), want); err != nil || !cmp.Equal(got.Float32s(), f32.Float32s()) {
		t.Errorf("raw: %v %v", got, err)
	}

	for _, tc := range []struct {
		name, file string
		data       []byte
		want       ir.Type
		errs       []string
	}{
		{"raw of the wrong size", "x.f32", f32.Data[:20], want, []string{"20 bytes", "needs 24"}},
		{"raw for a symbolic shape", "x.raw", f32.Data, ir.T(ir.F32, ir.Shape{ir.Sym("n"), ir.D(3)}), []string{"no shape"}},
		{"npy of another shape", "x.npy", npyBytes(t, f32), ir.T(ir.F32, ir.S(3, 2)), []string{"f32[2, 3]", "dim 0"}},
		{"npy of another rank", "x.npy", npyBytes(t, f32), ir.T(ir.F32, ir.S(6)), []string{"rank"}},
		{"truncated npy", "x.npy", npyBytes(t, f32)[:140], want, []string{"needs 24 bytes", "truncated"}},
		{"truncated npy header", "x.npy", npyBytes(t, f32)[:30], want, []string{"truncated header"}},
		{"big-endian npy", "x.npy", npyFile(">f4", "(2, 3)", f32.Data), want, []string{"not supported"}},
		{"fortran npy", "x.npy", bytes.Replace(npyBytes(t, f32), []byte("False"), []byte("True "), 1), want, []string{"fortran_order"}},
		{"huge npy shape", "x.npy", npyFile("<f4", "(100000, 100000, 100000)", nil), want, []string{"2^31"}},
		{"corrupt pb", "x.pb", []byte{0xff, 0xff, 0xff}, want, []string{"TensorProto"}},
		{"float into int", "x.npy", npyBytes(t, f32), ir.T(ir.I32, ir.S(2, 3)), []string{"f32", "i32"}},
	} {
		p := writeFile(t, tc.file, tc.data)
		_, err := ReadInput(p, tc.want)
		if err == nil {
			t.Errorf("%s: no error", tc.name)
			continue
		}
		for _, s := range append(tc.errs, p) {
			if !strings.Contains(err.Error(), s) {
				t.Errorf("%s: error %q lacks %q", tc.name, err, s)
			}
		}
	}
	if _, err := ReadTensor(writeFile(t, "x.bin", f32.Data)); err == nil || !strings.Contains(err.Error(), "raw") {
		t.Errorf("ReadTensor of a raw file: %v", err)
	}
	if !HasShape(writeFile(t, "y", npyBytes(t, f32))) || HasShape(writeFile(t, "y.f32", f32.Data)) {
		t.Error("HasShape")
	}
}

// FuzzReadNPY: no panics, bounded allocations on any header.
func FuzzReadNPY(f *testing.F) {
	var b bytes.Buffer
	WriteNPY(&b, tensor.FromFloat32([]int{2}, []float32{1, 2}))
	f.Add(b.Bytes())
	f.Add(npyFile("<i8", "(3,)", make([]byte, 24)))
	f.Fuzz(func(t *testing.T, data []byte) {
		parseNPY(data)
		parseTensorProto(data)
	})
}

func TestRand(t *testing.T) {
	// xorshift32 from 1: 270369, 67634689, 2647435461 (Marsaglia's sequence).
	r := NewRand(0)
	for _, s := range []uint32{270369, 67634689, 2647435461} {
		if got, want := r.Next(), float64(s)/2147483648-1; got != want {
			t.Errorf("Next = %v, want %v", got, want)
		}
	}
	a, err := NewRand(3).Tensor(ir.T(ir.F32, ir.S(1, 3, 40, 64)), PatternText)
	if err != nil {
		t.Fatal(err)
	}
	dark := 0
	for _, v := range a.Float32s() {
		if v < -1.3 {
			dark++
		} else if v < 1.3 {
			t.Fatalf("text page value %v is neither background nor mark", v)
		}
	}
	if dark == 0 || dark > a.NumElements()/2 {
		t.Errorf("%d dark values of %d", dark, a.NumElements())
	}
	if _, err := NewRand(1).Tensor(ir.T(ir.F32, ir.S(4)), PatternText); err == nil {
		t.Error("text pattern of a rank-1 tensor: no error")
	}
	if _, err := NewRand(1).Tensor(ir.T(ir.F32, ir.S(4)), "plaid"); err == nil || !strings.Contains(err.Error(), "uniform") {
		t.Errorf("unknown pattern: %v", err)
	}
	z, err := NewRand(1).Tensor(ir.T(ir.I32, ir.S(4)), "")
	if err != nil || !cmp.Equal(z.Int32s(), []int32{0, 0, 0, 0}) {
		t.Errorf("integer input: %v %v", z, err)
	}
}

// CarveCalls on a module of two functions: one call each, given and seeded
// inputs, recorded in the manifest; errors for unknown inputs.
func TestCarveCalls(t *testing.T) {
	m := ir.NewModule("two")
	b := ir.NewFunction(m, "main")
	x := b.Param("x", ir.T(ir.F32, ir.S(2, 8)))
	y := b.Param("y", ir.T(ir.F32, ir.S(8, 3)))
	b.Return(b.Unary(ir.OpExp, b.Op(ir.OpMatmul, []*ir.Value{x, y}, nil)))
	b2 := ir.NewFunction(m, "other")
	z := b2.Param("z", ir.T(ir.F32, ir.S(4)))
	b2.Return(b2.Unary(ir.OpTanh, z))
	if IsLanguageModel(m) {
		t.Fatal("IsLanguageModel")
	}
	given := tensor.New(ir.F32, []int{8, 3})
	rec, err := CarveCalls(m, CallOptions{Seed: 5, Inputs: map[string]Input{"y": {Tensor: given}}})
	if err != nil {
		t.Fatal(err)
	}
	if rec.Stats.Steps != 2 || OpCounts(rec.Cases) != "exp 1, matmul 1, tanh 1" {
		t.Errorf("stats %+v, cases %s", rec.Stats, OpCounts(rec.Cases))
	}
	bd := writeOpen(t, rec, "b")
	want := []InputInfo{
		{Func: "main", Name: "x", DType: "f32", Shape: []int{2, 8}, Source: "random: uniform [-1, 1), xorshift32 seed 5"},
		{Func: "main", Name: "y", DType: "f32", Shape: []int{8, 3}, Source: "given"},
		{Func: "other", Name: "z", DType: "f32", Shape: []int{4}, Source: "random: uniform [-1, 1), xorshift32 seed 5"},
	}
	if diff := cmp.Diff(want, bd.Manifest.Inputs); diff != "" || bd.Manifest.Seed != 5 {
		t.Errorf("manifest inputs (-want +got):\n%s", diff)
	}
	// The matmul case's x is the generator's first 16 values.
	r := NewRand(5)
	in, _, err := bd.Tensors(rec.Cases[0])
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range in[0].Float32s() {
		if w := float32(r.Next()); v != w {
			t.Fatalf("x[%d] = %v, want %v", i, v, w)
		}
	}

	for _, tc := range []struct {
		o    CallOptions
		want string
	}{
		{CallOptions{Inputs: map[string]Input{"w": {}}}, `no input "w"`},
		{CallOptions{Inputs: map[string]Input{"": {}}, Funcs: []string{"main"}}, "several inputs"},
		{CallOptions{Funcs: []string{"nope"}}, "no function @nope"},
		{CallOptions{Inputs: map[string]Input{"y": {Tensor: tensor.New(ir.F32, []int{3, 8})}}}, "dim 0"},
		{CallOptions{Inputs: map[string]Input{"x": {Pattern: "text"}}}, "[N, C, H, W]"},
	} {
		if _, err := CarveCalls(m, tc.o); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: error %v, want %q", tc.o, err, tc.want)
		}
	}
}

// ReadInputSets reads one set per folder, inputs named by file, by a
// TensorProto's own name, or by position (input_<k>); mistakes are errors
// that name the folder.
func TestReadInputSets(t *testing.T) {
	dir := t.TempDir()
	write := func(rel string, data []byte) {
		t.Helper()
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	x := tensor.FromFloat32([]int{2}, []float32{1, 2})
	var npy bytes.Buffer
	if err := WriteNPY(&npy, x); err != nil {
		t.Fatal(err)
	}
	named, err := proto.Marshal(&onnxpb.TensorProto{Name: proto.String("y"), Dims: []int64{2}, DataType: proto.Int32(int32(onnxpb.TensorProto_FLOAT)), FloatData: []float32{3, 4}})
	if err != nil {
		t.Fatal(err)
	}
	write("s1/x.npy", npy.Bytes())
	write("s1/whatever.pb", named)
	write("s2/input_0.npy", npy.Bytes())
	write("s2/z.bin", make([]byte, 8))
	sets, err := ReadInputSets(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got [][]string
	for _, s := range sets {
		var names []string
		for n := range s.Inputs {
			names = append(names, n)
		}
		slices.Sort(names)
		got = append(got, append([]string{s.Name}, names...))
	}
	if diff := cmp.Diff([][]string{{"s1", "x", "y"}, {"s2", "input_0", "z"}}, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if sets[1].Inputs["z"].Tensor != nil || sets[1].Inputs["z"].File == "" {
		t.Errorf("a raw file is read once its input's type is known: %+v", sets[1].Inputs["z"])
	}
	write("s3/y.npy", npy.Bytes())
	write("s3/y.pb", named)
	if _, err := ReadInputSets(dir); err == nil || !strings.Contains(err.Error(), `both input "y"`) {
		t.Errorf("two files for one input: %v", err)
	}
	if _, err := ReadInputSets(filepath.Join(dir, "s1")); err == nil || !strings.Contains(err.Error(), "no input sets") {
		t.Errorf("a folder without sets: %v", err)
	}
}

func TestParseValue(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want string // the tensor's type and values, or "" for not a value
	}{
		{"1", "i64[] [1]"},
		{"true", "bool[] [1]"},
		{"false", "bool[] [0]"},
		{"-2.5", "f32[] [-2.5]"},
		{"[1, 2,3]", "i64[3] [1 2 3]"},
		{"[1, 0.5]", "f32[2] [1 0.5]"},
		{"9007199254740993", "i64[] [9.007199254740992e+15]"}, // Float64At rounds; the data is exact (below)
		{"x.npy", ""},
		{"[1,,2]", ""},
		{"[]", ""},
	} {
		v, ok := ParseValue(tc.in)
		got := ""
		if ok {
			got = fmt.Sprintf("%s %v", v.Type(), floatsOf(v))
		}
		if got != tc.want {
			t.Errorf("ParseValue(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	if v, _ := ParseValue("9007199254740993"); binary.LittleEndian.Uint64(v.Data) != 9007199254740993 {
		t.Errorf("an i64 value lost its low bits")
	}
}

func floatsOf(t *tensor.Tensor) []float64 {
	out := make([]float64, t.NumElements())
	for i := range out {
		out[i] = t.Float64At(i)
	}
	return out
}
