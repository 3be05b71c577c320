package gguf

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestWriterRoundTrip writes metadata of every kind the Writer has and
// tensors of plain and block types, parses the file back and compares.
func TestWriterRoundTrip(t *testing.T) {
	var w Writer
	w.String("general.architecture", "llama")
	w.Uint32("llama.block_count", 3)
	w.Float32("llama.rope.freq_base", 10000.5)
	w.Bool("tokenizer.ggml.add_bos_token", true)
	w.Strings("tokenizer.ggml.tokens", []string{"<unk>", "a", "ünïcode"})
	w.Float32s("tokenizer.ggml.scores", []float32{0, -1.5, 2})
	w.Int32s("tokenizer.ggml.token_type", []int32{2, 1, -1})
	f32 := encode(GGMLF32, []float32{1, 2, 3, 4, 5, 6})
	f16 := encode(GGMLF16, []float32{0.5, -2})
	q8 := bytes.Repeat([]byte{1}, 34*2) // two Q8_0 blocks of 32
	w.Tensor("a", GGMLF32, []int{2, 3}, f32)
	w.Tensor("b", GGMLF16, []int{2}, f16)
	w.Tensor("c", GGMLQ8_0, []int{1, 64}, q8)
	path := filepath.Join(t.TempDir(), "w.gguf")
	if err := w.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	f, err := Parse(path, data)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, kv := range f.Metadata {
		got[kv.Key] = kv.Value.String()
	}
	want := map[string]string{
		"general.architecture":         Value{Type: TypeString, str: "llama"}.String(),
		"llama.block_count":            "3",
		"llama.rope.freq_base":         "10000.5",
		"tokenizer.ggml.add_bos_token": "true",
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %s, want %s", k, got[k], v)
		}
	}
	arr := func(key string) *Array {
		v, _ := f.Get(key)
		a, ok := v.Array()
		if !ok {
			t.Fatalf("%s is %s, want an array", key, v.Type)
		}
		return a
	}
	if s, _ := arr("tokenizer.ggml.tokens").Strings(); !cmp.Equal(s, []string{"<unk>", "a", "ünïcode"}) {
		t.Errorf("tokens %q", s)
	}
	if s, _ := arr("tokenizer.ggml.scores").Floats(); !cmp.Equal(s, []float64{0, -1.5, 2}) {
		t.Errorf("scores %v", s)
	}
	if s, _ := arr("tokenizer.ggml.token_type").Ints(); !cmp.Equal(s, []int64{2, 1, -1}) {
		t.Errorf("token types %v", s)
	}
	for _, c := range []struct {
		name  string
		shape []int
		data  []byte
	}{{"a", []int{2, 3}, f32}, {"b", []int{2}, f16}, {"c", []int{1, 64}, q8}} {
		ti, ok := f.Tensor(c.name)
		if !ok {
			t.Fatalf("no tensor %s", c.name)
		}
		if !cmp.Equal(ti.Shape(), c.shape) {
			t.Errorf("%s: shape %v, want %v", c.name, ti.Shape(), c.shape)
		}
		d, err := f.TensorData(ti)
		if err != nil || !bytes.Equal(d, c.data) {
			t.Errorf("%s: data differs (err %v)", c.name, err)
		}
	}
}

func TestWriterRefusesBadTensors(t *testing.T) {
	for _, c := range []struct {
		name string
		add  func(w *Writer)
		want string
	}{
		{"short data", func(w *Writer) { w.Tensor("x", GGMLF32, []int{4}, make([]byte, 12)) }, "do not hold"},
		{"partial block", func(w *Writer) { w.Tensor("x", GGMLQ8_0, []int{16}, make([]byte, 34)) }, "do not hold"},
		{"no dims", func(w *Writer) { w.Tensor("x", GGMLF32, nil, nil) }, "cannot be written"},
		{"unknown type", func(w *Writer) { w.Tensor("x", GGMLIQ2_XXS, []int{256}, nil) }, "cannot be written"},
		{"key twice", func(w *Writer) { w.Uint32("k", 1); w.Uint32("k", 2) }, "added twice"},
	} {
		var w Writer
		c.add(&w)
		path := filepath.Join(t.TempDir(), "w.gguf")
		err := w.WriteFile(path)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one with %q", c.name, err, c.want)
		}
		if _, serr := os.Stat(path); serr == nil {
			t.Errorf("%s: a refused file was written", c.name)
		}
	}
}
