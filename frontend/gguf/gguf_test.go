package gguf

import (
	"bytes"
	"encoding/binary"
	"math"
	"os"
	"strings"
	"testing"
	"unsafe"

	"github.com/google/go-cmp/cmp"

	"github.com/tapml/tapml/internal/testenv"
)

const tinyGGUF = "llama-2-tiny-random.gguf"

func TestSniff(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want bool
	}{{"GGUF\x03\x00\x00\x00", true}, {"GGUF", true}, {"GGU", false}, {"ggml", false}, {"", false}} {
		if got := Sniff([]byte(tc.in)); got != tc.want {
			t.Errorf("Sniff(%q) = %v, want %v", tc.in, got, tc.want)
		}
	}
}

// TestRealFile reads the tiny Llama-2 GGUF: header facts, metadata and the
// tensor table as llama.cpp's converter wrote them.
func TestRealFile(t *testing.T) {
	f, err := Open(testenv.Model(t, tinyGGUF))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if f.Version != 3 || f.Alignment != 32 || f.DataOffset%32 != 0 {
		t.Errorf("version %d alignment %d data offset %d", f.Version, f.Alignment, f.DataOffset)
	}
	got := map[string]string{}
	for _, kv := range f.Metadata {
		got[kv.Key] = kv.Value.Type.String() + " " + kv.Value.String()
	}
	want := map[string]string{
		"general.architecture":                   `string "llama"`,
		"general.name":                           `string "LLaMA v2"`,
		"general.file_type":                      "uint32 1",
		"llama.context_length":                   "uint32 4096",
		"llama.embedding_length":                 "uint32 8",
		"llama.block_count":                      "uint32 1",
		"llama.feed_forward_length":              "uint32 32",
		"llama.rope.dimension_count":             "uint32 4",
		"llama.attention.head_count":             "uint32 2",
		"llama.attention.head_count_kv":          "uint32 2",
		"llama.attention.layer_norm_rms_epsilon": "float32 1e-05",
		"tokenizer.ggml.model":                   `string "llama"`,
		"tokenizer.ggml.tokens":                  `array [32000 x string: "<unk>" "<s>" "</s>" "<0x00>" "<0x01>" "<0x02>" "<0x03>" "<0x04>" ...]`,
		"tokenizer.ggml.scores":                  "array [32000 x float32: 0 0 0 0 0 0 0 0 ...]",
		"tokenizer.ggml.token_type":              "array [32000 x int32: 2 3 3 6 6 6 6 6 ...]",
		"tokenizer.ggml.bos_token_id":            "uint32 1",
		"tokenizer.ggml.eos_token_id":            "uint32 2",
		"tokenizer.ggml.unknown_token_id":        "uint32 0",
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("metadata (-want +got):\n%s", d)
	}
	type tinfo struct {
		Name string
		Dims []uint64
		Type GGMLType
	}
	var tensors []tinfo
	for _, ti := range f.Tensors {
		tensors = append(tensors, tinfo{ti.Name, ti.Dims, ti.Type})
	}
	wantT := []tinfo{
		{"token_embd.weight", []uint64{8, 32000}, GGMLF16},
		{"blk.0.attn_q.weight", []uint64{8, 8}, GGMLF16},
		{"blk.0.attn_k.weight", []uint64{8, 8}, GGMLF16},
		{"blk.0.attn_v.weight", []uint64{8, 8}, GGMLF16},
		{"blk.0.attn_output.weight", []uint64{8, 8}, GGMLF16},
		{"blk.0.ffn_gate.weight", []uint64{8, 32}, GGMLF16},
		{"blk.0.ffn_up.weight", []uint64{8, 32}, GGMLF16},
		{"blk.0.ffn_down.weight", []uint64{32, 8}, GGMLF16},
		{"blk.0.attn_norm.weight", []uint64{8}, GGMLF32},
		{"blk.0.ffn_norm.weight", []uint64{8}, GGMLF32},
		{"output_norm.weight", []uint64{8}, GGMLF32},
		{"output.weight", []uint64{8, 32000}, GGMLF16},
	}
	if d := cmp.Diff(wantT, tensors); d != "" {
		t.Errorf("tensors (-want +got):\n%s", d)
	}
	// The last tensor ends at the end of the file (up to padding).
	last := f.Tensors[len(f.Tensors)-1]
	st, _ := os.Stat(f.Path)
	if end := f.DataOffset + int64(last.Offset) + last.Size; end > st.Size() || st.Size()-end >= f.Alignment {
		t.Errorf("last tensor ends at %d, file is %d bytes", end, st.Size())
	}
}

// TestMetadataRoundTrip writes every value type, arrays of each and
// nested arrays, with version 2 and 3, and reads them back.
func TestMetadataRoundTrip(t *testing.T) {
	kvs := []wkv{
		{"u8", TypeUint8, uint8(200)},
		{"i8", TypeInt8, int8(-100)},
		{"u16", TypeUint16, uint16(60000)},
		{"i16", TypeInt16, int16(-30000)},
		{"u32", TypeUint32, uint32(4000000000)},
		{"i32", TypeInt32, int32(-2000000000)},
		{"f32", TypeFloat32, float32(1.5)},
		{"bool", TypeBool, true},
		{"str", TypeString, "héllo ▁world"},
		{"u64", TypeUint64, uint64(math.MaxUint64)},
		{"i64", TypeInt64, int64(math.MinInt64)},
		{"f64", TypeFloat64, float64(-0.125)},
		{"arr_u8", TypeArray, warr{TypeUint8, []any{uint8(1), uint8(2)}}},
		{"arr_i16", TypeArray, warr{TypeInt16, []any{int16(-1), int16(7)}}},
		{"arr_f32", TypeArray, warr{TypeFloat32, []any{float32(0.5), float32(-3)}}},
		{"arr_f64", TypeArray, warr{TypeFloat64, []any{2.25}}},
		{"arr_bool", TypeArray, warr{TypeBool, []any{false, true}}},
		{"arr_str", TypeArray, warr{TypeString, []any{"a", "", "bc"}}},
		{"arr_empty", TypeArray, warr{TypeInt64, nil}},
		{"arr_nested", TypeArray, warr{TypeArray, []any{
			warr{TypeInt32, []any{int32(1), int32(-2)}},
			warr{TypeArray, []any{warr{TypeString, []any{"deep"}}}},
		}}},
	}
	want := map[string]string{
		"u8": "uint8 200", "i8": "int8 -100", "u16": "uint16 60000", "i16": "int16 -30000",
		"u32": "uint32 4000000000", "i32": "int32 -2000000000", "f32": "float32 1.5", "bool": "bool true",
		"str": `string "héllo ▁world"`, "u64": "uint64 18446744073709551615", "i64": "int64 -9223372036854775808",
		"f64": "float64 -0.125", "arr_u8": "array [2 x uint8: 1 2]", "arr_i16": "array [2 x int16: -1 7]",
		"arr_f32": "array [2 x float32: 0.5 -3]", "arr_f64": "array [1 x float64: 2.25]",
		"arr_bool": "array [2 x bool: false true]", "arr_str": `array [3 x string: "a" "" "bc"]`,
		"arr_empty":  "array [0 x int64:]",
		"arr_nested": `array [2 x array: [2 x int32: 1 -2] [1 x array: [1 x string: "deep"]]]`,
	}
	for _, version := range []uint32{2, 3} {
		w := &ggufWriter{version: version, kvs: kvs, tensors: []wtensor{{"t", []uint64{3, 2}, GGMLF32, encode(GGMLF32, []float32{1, 2, 3, 4, 5, 6})}}}
		f, err := Parse("mem.gguf", w.bytes())
		if err != nil {
			t.Fatalf("v%d: %v", version, err)
		}
		got := map[string]string{}
		for _, kv := range f.Metadata {
			got[kv.Key] = kv.Value.Type.String() + " " + kv.Value.String()
		}
		if d := cmp.Diff(want, got); d != "" {
			t.Errorf("v%d metadata (-want +got):\n%s", version, d)
		}
		// Typed accessors.
		if v, _ := f.Get("u32"); !must(v.Int()).eq(4000000000) {
			t.Errorf("u32.Int() = %v", v)
		}
		if v, _ := f.Get("u64"); func() bool { _, ok := v.Int(); return ok }() {
			t.Errorf("u64 max fits an int64?")
		}
		if v, _ := f.Get("i8"); !must(v.Int()).eq(-100) {
			t.Errorf("i8.Int() = %v", v)
		}
		if v, _ := f.Get("f32"); func() bool { x, ok := v.Float(); return !ok || x != 1.5 }() {
			t.Errorf("f32.Float() = %v", v)
		}
		v, _ := f.Get("arr_i16")
		a, _ := v.Array()
		if ints, ok := a.Ints(); !ok || !cmp.Equal(ints, []int64{-1, 7}) {
			t.Errorf("arr_i16.Ints() = %v %v", ints, ok)
		}
		v, _ = f.Get("arr_str")
		a, _ = v.Array()
		if s, ok := a.Strings(); !ok || !cmp.Equal(s, []string{"a", "", "bc"}) {
			t.Errorf("arr_str.Strings() = %q", s)
		}
		ti, ok := f.Tensor("t")
		if !ok || !cmp.Equal(ti.Shape(), []int{2, 3}) || ti.Elements() != 6 {
			t.Fatalf("tensor t: %+v", ti)
		}
		data, err := f.TensorData(ti)
		if err != nil || !bytes.Equal(data, encode(GGMLF32, []float32{1, 2, 3, 4, 5, 6})) {
			t.Errorf("tensor data %v %v", data, err)
		}
	}
}

type intOK struct {
	v  int64
	ok bool
}

func must(v int64, ok bool) intOK  { return intOK{v, ok} }
func (x intOK) eq(want int64) bool { return x.ok && x.v == want }

// small returns a small valid file: two metadata entries and two tensors.
func small() *ggufWriter {
	return &ggufWriter{
		kvs: []wkv{
			{"general.architecture", TypeString, "llama"},
			{"a.list", TypeArray, warr{TypeString, []any{"x", "yz"}}},
		},
		tensors: []wtensor{
			{"w", []uint64{4, 2}, GGMLF16, encode(GGMLF16, []float32{1, 2, 3, 4, 5, 6, 7, 8})},
			{"n", []uint64{4}, GGMLF32, encode(GGMLF32, []float32{1, 2, 3, 4})},
		},
	}
}

// patch returns a copy of b with v written little-endian at off.
func patch(b []byte, off int, v any) []byte {
	c := bytes.Clone(b)
	var buf bytes.Buffer
	binary.Write(&buf, binary.LittleEndian, v)
	copy(c[off:], buf.Bytes())
	return c
}

// TestParseErrors: every kind of broken header gives an error that names
// the file and the problem (through Open, on a real file).
func TestParseErrors(t *testing.T) {
	good := small().bytes()
	// Offsets in good: magic 0, version 4, n_tensors 8, n_kv 16, first key
	// length 24, key "general.architecture" (20 bytes) 32, type 52, value 56.
	nested := func(depth int) []byte {
		v := any(warr{TypeUint8, []any{uint8(1)}})
		for i := 0; i < depth; i++ {
			v = warr{TypeArray, []any{v}}
		}
		return (&ggufWriter{kvs: []wkv{{"deep", TypeArray, v}}}).bytes()
	}
	mod := func(f func(w *ggufWriter)) []byte {
		w := small()
		f(w)
		return w.bytes()
	}
	for _, tc := range []struct {
		name string
		data []byte
		want string
	}{
		{"bad magic", append([]byte("GGML"), good[4:]...), `bad magic "GGML"`},
		{"too short", good[:6], "too short for a GGUF header"},
		{"version 1", patch(good, 4, uint32(1)), "version 1 is not supported"},
		{"version 4", patch(good, 4, uint32(4)), "unsupported GGUF version 4"},
		{"big endian", patch(good, 4, uint32(3<<24)), "big-endian"},
		{"absurd kv count", patch(good, 16, uint64(1<<60)), "metadata count 1152921504606846976 cannot fit"},
		{"absurd tensor count", patch(good, 8, uint64(1<<62)), "tensor count 4611686018427387904 cannot fit"},
		{"absurd key length", patch(good, 24, uint64(1<<40)), "string length 1099511627776 exceeds"},
		{"absurd string value", patch(good, 56, uint64(1<<50)), "string length 1125899906842624 exceeds"},
		{"unknown value type", patch(good, 52, uint32(13)), "unknown value type 13"},
		{"arrays nested too deep", nested(20), "nested deeper than 16"},
		{"duplicate key", mod(func(w *ggufWriter) { w.kvs = append(w.kvs, w.kvs[0]) }), `metadata key "general.architecture" appears twice`},
		{"duplicate tensor", mod(func(w *ggufWriter) { w.tensors[1].name = "w" }), `tensor "w" appears twice`},
		{"zero dims", mod(func(w *ggufWriter) { w.tensors[1].dims = nil }), `tensor "n" has 0 dims`},
		{"five dims", mod(func(w *ggufWriter) { w.tensors[1].dims = []uint64{1, 1, 1, 1, 4} }), `tensor "n" has 5 dims`},
		{"zero dim", mod(func(w *ggufWriter) { w.tensors[1].dims = []uint64{0} }), `tensor "n" has dim 0 = 0`},
		{"huge dims", mod(func(w *ggufWriter) { w.tensors[1].dims = []uint64{1 << 31, 1 << 30} }), `tensor "n" has dim 0 = 2147483648`},
		{"bad alignment", mod(func(w *ggufWriter) {
			w.kvs = append(w.kvs, wkv{"general.alignment", TypeUint32, uint32(24)})
		}), "general.alignment 24 must be a power of two"},
		{"alignment not int", mod(func(w *ggufWriter) {
			w.kvs = append(w.kvs, wkv{"general.alignment", TypeString, "32"})
		}), "general.alignment \"32\" must be a power of two"},
		{"tensor past end", mod(func(w *ggufWriter) { w.tensors[1].dims = []uint64{1 << 20} }), `tensor "n": data [32, +4194304) lies outside the data section`},
		{"truncated data", good[:len(good)-20], `tensor "n": data [32, +16) lies outside`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := writeTemp(t, "broken.gguf", tc.data)
			f, err := Open(p)
			if err == nil {
				f.Close()
				t.Fatalf("no error, want %q", tc.want)
			}
			if !strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q\nwant it to name %s and say %q", err, p, tc.want)
			}
		})
	}
	// Errors whose files need hand-made bytes.
	arr := (&ggufWriter{kvs: []wkv{{"big", TypeArray, warr{TypeUint32, []any{uint32(1)}}}}}).bytes()
	// key "big": length 24, bytes 32..35, type 35, elem type 39, count 43
	for _, tc := range []struct {
		name string
		data []byte
		want string
	}{
		{"absurd array count", patch(arr, 43, uint64(1<<61)), `metadata "big": array of 2305843009213693952 uint32 cannot fit`},
		{"array of unknown type", patch(arr, 39, uint32(99)), `metadata "big": array of unknown value type 99`},
		{"bad bool", patch((&ggufWriter{kvs: []wkv{{"b", TypeBool, true}}}).bytes(), 37, uint8(7)), `metadata "b": bool byte is 7`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("hand.gguf", tc.data)
			if err == nil || !strings.Contains(err.Error(), "hand.gguf") || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one naming hand.gguf and saying %q", err, tc.want)
			}
		})
	}
}

// TestTruncatedEverywhere cuts a valid file at every length: each prefix
// must fail with an error (never a panic) that names the file.
func TestTruncatedEverywhere(t *testing.T) {
	good := small().bytes()
	for n := 0; n < len(good); n++ {
		_, err := Parse("cut.gguf", good[:n])
		if err == nil {
			// Cutting only padding after the last tensor's data is harmless.
			if n >= len(good)-16 {
				continue
			}
			t.Fatalf("prefix of %d bytes: no error", n)
		}
		if !strings.HasPrefix(err.Error(), "cut.gguf: ") {
			t.Fatalf("prefix of %d bytes: error %q does not name the file", n, err)
		}
	}
	if _, err := Parse("whole.gguf", good); err != nil {
		t.Fatal(err)
	}
}

// TestOpenMapsF32 checks that TensorData of an opened file is a slice of
// the mapping, not a copy.
func TestOpenMapsF32(t *testing.T) {
	f, err := Open(writeTemp(t, "s.gguf", small().bytes()))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ti, _ := f.Tensor("n")
	data, err := f.TensorData(ti)
	if err != nil {
		t.Fatal(err)
	}
	start := uintptr(unsafe.Pointer(&f.data[0]))
	if p := uintptr(unsafe.Pointer(&data[0])); p != start+uintptr(f.DataOffset)+uintptr(ti.Offset) {
		t.Errorf("tensor data at %#x is not inside the mapping at %#x", p, start)
	}
	if f.unmap == nil {
		t.Error("file not memory-mapped")
	}
}
