package safetensors

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/tapml/tapml/ir"
	"github.com/tapml/tapml/tensor"
)

func sample() ([]string, map[string]*tensor.Tensor) {
	ts := map[string]*tensor.Tensor{}
	names := []string{"f32", "f16", "bf16", "i32", "i64", "bool", "scalar", "empty", "layers.0.attention.wq", "q4_0", "q6_k"}
	mk := func(dt ir.DType, shape []int) *tensor.Tensor {
		t := tensor.New(dt, shape)
		for i := 0; i < t.NumElements(); i++ {
			t.SetFloat64At(i, float64(i%7)-2.5)
		}
		return t
	}
	ts["f32"] = mk(ir.F32, []int{2, 3})
	ts["f16"] = mk(ir.F16, []int{3})
	ts["bf16"] = mk(ir.BF16, []int{2, 2})
	ts["i32"] = mk(ir.I32, []int{5})
	ts["i64"] = mk(ir.I64, []int{1, 2})
	ts["bool"] = mk(ir.Bool, []int{3})
	ts["scalar"] = mk(ir.F32, []int{})
	ts["empty"] = mk(ir.F32, []int{0, 4})
	ts["layers.0.attention.wq"] = mk(ir.F32, []int{4, 4})
	for name, dt := range map[string]ir.DType{"q4_0": ir.Q4_0, "q6_k": ir.Q6_K} { // blocks of any bytes
		e, _ := dt.Block()
		ts[name] = tensor.New(dt, []int{2, e})
		for i := range ts[name].Data {
			ts[name].Data[i] = byte(i * 7)
		}
	}
	return names, ts
}

func TestRoundTrip(t *testing.T) {
	names, ts := sample()
	path := filepath.Join(t.TempDir(), "x.safetensors")
	meta := map[string]string{"format": "pt", "tapml": "1", "quote\"d": "a\nb"}
	if err := WriteTensors(path, names, ts, meta); err != nil {
		t.Fatal(err)
	}
	f, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if diff := cmp.Diff(names, f.Names()); diff != "" {
		t.Errorf("names (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(meta, f.Metadata); diff != "" {
		t.Errorf("metadata (-want +got):\n%s", diff)
	}
	for _, n := range names {
		got, err := f.Tensor(n)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(ts[n], got); diff != "" {
			t.Errorf("tensor %s (-want +got):\n%s", n, diff)
		}
	}
	// Readable by others, like any file written with os.WriteFile(..., 0o644)
	// (the temporary file it is renamed from is private).
	if st, err := os.Stat(path); err != nil {
		t.Error(err)
	} else if st.Mode().Perm() != 0o644 {
		t.Errorf("file mode %v, want 0644", st.Mode())
	}
	// The data section starts 8-byte aligned.
	raw, _ := os.ReadFile(path)
	if n := binary.LittleEndian.Uint64(raw); (8+n)%8 != 0 {
		t.Errorf("header length %d leaves the data unaligned", n)
	}
	all, md, err := ReadFile(path)
	if err != nil || len(all) != len(names) || md["tapml"] != "1" {
		t.Errorf("ReadFile: %d tensors, meta %v, err %v", len(all), md, err)
	}
	if _, ok := f.Info("nope"); ok {
		t.Error("Info of a missing tensor")
	}
	if _, err := f.Tensor("nope"); err == nil || !strings.Contains(err.Error(), `no tensor "nope"`) {
		t.Errorf("Tensor of a missing name: %v", err)
	}
}

// A file laid out by hand as the format's documentation describes it
// (unpadded header, keys in any order, no metadata).
func TestReadHandMade(t *testing.T) {
	hdr := `{"b":{"dtype":"I32","shape":[1],"data_offsets":[8,12]},"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}`
	data := []byte{0, 0, 0x80, 0x3f, 0, 0, 0, 0x40, 7, 0, 0, 0}
	f, err := NewReader(bytes.NewReader(build(hdr, data)), int64(8+len(hdr)+len(data)), "hand.safetensors")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"a", "b"}, f.Names()); diff != "" {
		t.Errorf("names in data order (-want +got):\n%s", diff)
	}
	a, _ := f.Tensor("a")
	b, _ := f.Tensor("b")
	if diff := cmp.Diff([]float32{1, 2}, a.Float32s()); diff != "" {
		t.Error(diff)
	}
	if b.Int32s()[0] != 7 {
		t.Errorf("b = %v", b.Int32s())
	}
}

func build(hdr string, data []byte) []byte {
	var b bytes.Buffer
	var n [8]byte
	binary.LittleEndian.PutUint64(n[:], uint64(len(hdr)))
	b.Write(n[:])
	b.WriteString(hdr)
	b.Write(data)
	return b.Bytes()
}

func TestReadErrors(t *testing.T) {
	ok := `"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}`
	tests := []struct {
		name string
		file []byte
		want string
	}{
		{"too short", []byte{1, 2, 3}, "bad.safetensors: too short for a safetensors file (3 bytes; the header length alone takes 8)"},
		{"header past the end", build("{}", nil)[:9], "bad.safetensors: header length 2 exceeds the file (1 bytes after the length)"},
		{"huge header", append([]byte{0, 0, 0, 0, 0, 0, 0, 1}, make([]byte, 16)...), "bad.safetensors: header length 72057594037927936 exceeds the limit of 104857600 bytes"},
		{"not an object", build(`[1]`, nil), "bad.safetensors: header is not a JSON object"},
		{"bad json", build(`{"a":`, nil), "bad.safetensors: tensor \"a\": header JSON: EOF"},
		{"unknown dtype", build(`{"a":{"dtype":"F64","shape":[1],"data_offsets":[0,8]}}`, make([]byte, 8)),
			`bad.safetensors: tensor "a": unsupported dtype "F64" (supported: F32, F16, BF16, I32, I64, BOOL, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K)`},
		{"block format not whole blocks", build(`{"a":{"dtype":"Q4_0","shape":[2,16],"data_offsets":[0,18]}}`, make([]byte, 18)),
			`bad.safetensors: tensor "a": shape [2 16]: a Q4_0 tensor's last dim must be whole blocks of 32`},
		{"block format size", build(`{"a":{"dtype":"Q8_0","shape":[2,32],"data_offsets":[0,64]}}`, make([]byte, 64)),
			`bad.safetensors: tensor "a": data_offsets [0 64] hold 64 bytes, but Q8_0[2 32] takes 68`},
		{"size mismatch", build(`{"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}}`, make([]byte, 8)),
			`bad.safetensors: tensor "a": data_offsets [0 8] hold 8 bytes, but F32[3] takes 12`},
		{"negative dim", build(`{"a":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}}`, make([]byte, 8)),
			`bad.safetensors: tensor "a": shape [-2] has a bad dim -2`},
		{"overflowing shape", build(`{"a":{"dtype":"F32","shape":[1099511627776,1099511627776],"data_offsets":[0,8]}}`, make([]byte, 8)),
			`bad.safetensors: tensor "a": shape [1099511627776 1099511627776] is too large`},
		{"out of bounds", build(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}}`, make([]byte, 8)),
			`bad.safetensors: tensor "a": data_offsets [4 12]: end is past the data section (8 bytes)`},
		{"reversed offsets", build(`{"a":{"dtype":"F32","shape":[0],"data_offsets":[8,4]}}`, make([]byte, 8)),
			`bad.safetensors: tensor "a": data_offsets [8 4]: need 0 <= begin <= end`},
		{"three offsets", build(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8,8]}}`, make([]byte, 8)),
			`bad.safetensors: tensor "a": data_offsets [0 8 8] must be [begin, end]`},
		{"overlap", build(`{`+ok+`,"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}`, make([]byte, 8)),
			`bad.safetensors: tensor "b": bytes 4..8 overlap tensor "a" (which ends at 8)`},
		{"gap", build(`{`+ok+`,"b":{"dtype":"F32","shape":[1],"data_offsets":[12,16]}}`, make([]byte, 16)),
			`bad.safetensors: tensor "b": starts at 12, leaving a gap after tensor "a" (which ends at 8)`},
		{"leading gap", build(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}`, make([]byte, 8)),
			`bad.safetensors: tensor "a": starts at 4, leaving bytes 0..4 of the data section unused`},
		{"trailing bytes", build(`{`+ok+`}`, make([]byte, 10)), "bad.safetensors: data section has 10 bytes, but the tensors cover 8"},
		{"duplicate", build(`{`+ok+`,`+ok+`}`, make([]byte, 8)), `bad.safetensors: tensor "a": listed twice in the header`},
		{"missing field", build(`{"a":{"dtype":"F32","shape":[2]}}`, make([]byte, 8)), `bad.safetensors: tensor "a": header entry needs dtype, shape and data_offsets`},
		{"unknown field", build(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8],"x":1}}`, make([]byte, 8)),
			`bad.safetensors: tensor "a": header entry {"dtype":"F32","shape":[2],"data_offsets":[0,8],"x":1}: json: unknown field "x"`},
		{"float dim", build(`{"a":{"dtype":"F32","shape":[2.5],"data_offsets":[0,8]}}`, make([]byte, 8)),
			`bad.safetensors: tensor "a": header entry {"dtype":"F32","shape":[2.5],"data_offsets":[0,8]}: json: cannot unmarshal number 2.5 into Go struct field rawEntry.shape of type int64`},
		{"metadata not strings", build(`{"__metadata__":{"k":1},`+ok+`}`, make([]byte, 8)), `bad.safetensors: __metadata__: value of "k" must be a string, got 1`},
		{"metadata twice", build(`{"__metadata__":{},"__metadata__":{},`+ok+`}`, make([]byte, 8)), `bad.safetensors: __metadata__ given twice`},
		{"data after json", build(`{`+ok+`} x`, make([]byte, 8)), "bad.safetensors: header has data after the JSON object"},
		{"empty name", build(`{"":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}`, make([]byte, 8)), "bad.safetensors: a tensor has an empty name"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewReader(bytes.NewReader(tc.file), int64(len(tc.file)), "bad.safetensors")
			if err == nil {
				t.Fatal("no error")
			}
			if err.Error() != tc.want {
				t.Errorf("got  %s\nwant %s", err, tc.want)
			}
		})
	}
}

func TestWriteErrorsAndAtomicity(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "w.safetensors")
	names, ts := sample()
	if err := WriteTensors(path, names, ts, nil); err != nil {
		t.Fatal(err)
	}
	good, _ := os.ReadFile(path)
	bad := []Entry{
		TensorEntry("a", ts["f32"]),
		{Name: "b", DType: ir.F32, Shape: []int{2}, Data: func() ([]byte, error) { return nil, errors.New("disk on fire") }},
	}
	err := Write(path, bad, nil)
	if err == nil || err.Error() != path+`: safetensors: tensor "b": disk on fire` {
		t.Errorf("got %v", err)
	}
	for _, e := range [][]Entry{
		{TensorEntry("a", ts["f32"]), TensorEntry("a", ts["f32"])},
		{TensorEntry("__metadata__", ts["f32"])},
		{{Name: "x", DType: ir.F32, Shape: []int{3}, Data: func() ([]byte, error) { return make([]byte, 4), nil }}},
		{{Name: "x", DType: ir.Invalid, Shape: []int{1}, Data: func() ([]byte, error) { return nil, nil }}},
		{{Name: "", DType: ir.F32, Data: func() ([]byte, error) { return make([]byte, 4), nil }}},
	} {
		if err := Write(path, e, nil); err == nil {
			t.Errorf("Write accepted %+v", e)
		}
	}
	now, _ := os.ReadFile(path)
	if !bytes.Equal(good, now) {
		t.Error("a failed write changed the existing file")
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("temporary files left behind: %v", entries)
	}
}

func FuzzRead(f *testing.F) {
	names, ts := sample()
	var buf bytes.Buffer
	entries := make([]Entry, len(names))
	for i, n := range names {
		entries[i] = TensorEntry(n, ts[n])
	}
	if err := Encode(&buf, entries, map[string]string{"k": "v"}); err != nil {
		f.Fatal(err)
	}
	f.Add(buf.Bytes())
	f.Add(build(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}`, make([]byte, 8)))
	f.Add(build(`{"__metadata__":{"a":"b"}}`, nil))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		sf, err := NewReader(bytes.NewReader(data), int64(len(data)), "fuzz")
		if err != nil {
			return
		}
		// A file that reads must re-encode to one that reads the same.
		var out []Entry
		got := map[string]*tensor.Tensor{}
		for _, in := range sf.Infos() {
			tt, err := sf.Tensor(in.Name)
			if err != nil {
				t.Fatalf("header read but tensor %q does not: %v", in.Name, err)
			}
			got[in.Name] = tt
			out = append(out, TensorEntry(in.Name, tt))
		}
		var re bytes.Buffer
		if err := Encode(&re, out, sf.Metadata); err != nil {
			t.Fatalf("re-encoding: %v", err)
		}
		sf2, err := NewReader(bytes.NewReader(re.Bytes()), int64(re.Len()), "re")
		if err != nil {
			t.Fatalf("re-encoded file does not read: %v", err)
		}
		if diff := cmp.Diff(sf.Metadata, sf2.Metadata); diff != "" {
			t.Fatalf("metadata changed:\n%s", diff)
		}
		for _, in := range sf2.Infos() {
			tt, err := sf2.Tensor(in.Name)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(got[in.Name], tt); diff != "" {
				t.Fatalf("tensor %q changed:\n%s", in.Name, diff)
			}
		}
	})
}
