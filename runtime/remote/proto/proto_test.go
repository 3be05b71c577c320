package proto

import (
	"bytes"
	"encoding/binary"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/tapml/tapml/ir"
)

func samples() []Msg {
	info := DeviceInfo{Name: "webgpu:vulkan:llvmpipe", Backend: "vulkan", Adapter: "llvmpipe", Description: "Mesa",
		Limits:   Limits{256, 256, 256, 64, 32768, 65535, 8, 1 << 28, 1 << 27},
		Features: []string{"timestamp-query", "subgroups"}}
	return []Msg{
		&Hello{Version: Version, Token: "secret", Client: "tapmlc"},
		&Attach{Version: Version, Token: "t", Info: info},
		&HelloOK{Version: Version, Info: info},
		&Query{Items: []QueryItem{{Buf: 3, Hash: [32]byte{1, 2}}, {Buf: 4}}},
		&QueryOK{Found: []bool{true, false}},
		&Upload{Buf: 7, Cache: true, Hash: [32]byte{9}, DType: F32, Shape: []uint32{2, 3}, Offset: 8, Data: make([]byte, 16)},
		&Compile{Kernel: 1, Node: 12, Op: "matmul", Language: "wgsl", Entry: "main", Source: []byte("@compute fn main() {}"),
			Workgroup: [3]uint32{64, 1, 1}, Grid: [3]uint32{4, 2, 1},
			Bindings: []Binding{{AccessRead, 0, -1, F32, []uint32{4}}, {AccessReadWrite, 1, 0, I32, nil}}},
		&Batch{Cmds: []Cmd{{Kind: CmdLaunch, Kernel: 1, Node: 12, In: []uint32{1, 2}, Out: []uint32{3}}, {Kind: CmdFree, Buf: 2}}},
		&Download{Buf: 3, Offset: 0, Length: 64},
		&Sync{}, &Reset{}, &OK{},
		&Data{Data: []byte{1, 2, 3, 4}},
		&Error{Code: CodeFailed, Node: 12, Index: 3, Message: "boom"},
	}
}

func TestRoundTrip(t *testing.T) {
	for i, m := range samples() {
		b := Encode(uint32(i+1), m)
		id, got, err := Decode(b)
		if err != nil {
			t.Fatalf("%s: %v", m.Type(), err)
		}
		if id != uint32(i+1) {
			t.Errorf("%s: id %d, want %d", m.Type(), id, i+1)
		}
		if diff := cmp.Diff(m, got); diff != "" {
			t.Errorf("%s: round trip differs (-want +got):\n%s", m.Type(), diff)
		}
		// Every strict prefix is malformed, never a panic.
		for n := 0; n < len(b); n++ {
			if _, _, err := Decode(b[:n]); err == nil {
				t.Errorf("%s: prefix of %d of %d bytes decoded", m.Type(), n, len(b))
			}
		}
		if _, _, err := Decode(append(append([]byte{}, b...), 0)); err == nil {
			t.Errorf("%s: trailing byte accepted", m.Type())
		}
	}
}

func TestMalformed(t *testing.T) {
	hdr := func(typ Type) []byte { return []byte{'T', 'M', byte(typ), 0, 5, 0, 0, 0} }
	u32 := func(v uint32) []byte { return binary.LittleEndian.AppendUint32(nil, v) }
	cat := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
	for _, tc := range []struct {
		name  string
		frame []byte
		want  string
	}{
		{"short", []byte{'T', 'M'}, "shorter than"},
		{"magic", []byte("XXXXXXXX"), "magic"},
		{"flags", []byte{'T', 'M', byte(TSync), 1, 0, 0, 0, 0}, "flags"},
		{"type", hdr(200), "unknown message type"},
		{"huge token", cat(hdr(THello), u32(1), u32(MaxToken+1)), "exceeds the limit"},
		{"lying length", cat(hdr(THello), u32(1), u32(100), []byte("abc")), "cannot fit"},
		{"query count", cat(hdr(TQuery), u32(MaxQuery+1)), "exceeds the limit"},
		{"rank", cat(hdr(TUpload), u32(1), []byte{0}, make([]byte, 32), []byte{byte(F32), 9}), "rank 9"},
		{"dtype", cat(hdr(TUpload), u32(1), []byte{0}, make([]byte, 32), []byte{77}), "unknown dtype"},
		{"partial block", cat(hdr(TUpload), u32(1), []byte{0}, make([]byte, 32), []byte{byte(q40), 1}, u32(40),
			binary.LittleEndian.AppendUint64(nil, 0), u32(0)), "not whole blocks of 32"},
		{"upload past end", cat(hdr(TUpload), u32(1), []byte{0}, make([]byte, 32), []byte{byte(F32), 1}, u32(1),
			binary.LittleEndian.AppendUint64(nil, 0), u32(8), make([]byte, 8)), "exceed the tensor"},
		{"tensor too large", cat(hdr(TUpload), u32(1), []byte{0}, make([]byte, 32), []byte{byte(F32), 3},
			u32(MaxDim), u32(MaxDim), u32(MaxDim), binary.LittleEndian.AppendUint64(nil, 0), u32(0)), "exceeds"},
		{"command kind", cat(hdr(TBatch), u32(1), []byte{9}, u32(0), u32(0)), "unknown kind"},
		{"launch operands", cat(hdr(TBatch), u32(1), []byte{CmdLaunch}, u32(1), u32(1), []byte{200}), "exceeds"},
		{"download length", cat(hdr(TDownload), u32(1), binary.LittleEndian.AppendUint64(nil, 0), u32(MaxChunk+1)), "exceeds"},
		{"boolean", cat(hdr(TQueryOK), u32(1), []byte{2}), "boolean"},
		{"binding access", cat(hdr(TCompile), u32(1), u32(1), u32(0), u32(0), u32(0), u32(0), make([]byte, 24),
			u32(1), []byte{3}, u32(0), u32(0), []byte{byte(F32), 0}), "access"},
	} {
		id, _, err := Decode(tc.frame)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %q", tc.name, err, tc.want)
		}
		if len(tc.frame) >= HeaderSize && tc.name != "magic" && id != PeekID(tc.frame) {
			t.Errorf("%s: id %d, want the header's %d", tc.name, id, PeekID(tc.frame))
		}
	}
	big := make([]byte, MaxFrame+1)
	copy(big, hdr(TSync))
	if _, _, err := Decode(big); !errors.Is(err, ErrTooLarge) {
		t.Errorf("oversized frame: %v", err)
	}
}

func TestWeightKey(t *testing.T) {
	a := WeightKey(F32, []uint32{2}, make([]byte, 8))
	if a != WeightKey(F32, []uint32{2}, make([]byte, 8)) {
		t.Error("weight key is not deterministic")
	}
	for _, b := range [][32]byte{
		WeightKey(I32, []uint32{2}, make([]byte, 8)),
		WeightKey(F32, []uint32{1, 2}, make([]byte, 8)),
		WeightKey(F32, []uint32{2}, []byte{0, 0, 0, 0, 0, 0, 0, 1}),
	} {
		if a == b {
			t.Error("different weights share a key")
		}
	}
}

// FuzzDecode: any bytes decode to a message or an error, never a panic;
// what decodes re-encodes to the same frame.
func FuzzDecode(f *testing.F) {
	for i, m := range samples() {
		f.Add(Encode(uint32(i), m))
	}
	f.Add([]byte{})
	f.Add([]byte("TM\x06\x00\x01\x00\x00\x00\xff\xff\xff\xff"))
	f.Fuzz(func(t *testing.T, b []byte) {
		id, m, err := Decode(b)
		if err != nil {
			return
		}
		if again := Encode(id, m); !bytes.Equal(again, b) {
			t.Fatalf("re-encoding differs:\n%x\n%x", b, again)
		}
	})
}

func TestPrintable(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"plain text, tabs\tand üñíçødé", "plain text, tabs\tand üñíçødé"},
		{"\x1b[2J\x1b]0;owned\x07", `\x1b[2J\x1b]0;owned\x07`},
		{"line\nforged: all tests passed\r", `line\x0aforged: all tests passed\x0d`},
		{"bad \xff\xfe utf8", `bad \xff\xfe utf8`},
		{"bidi \u202eevil", `bidi \u202eevil`},
		{"c1 \u009b", `c1 \x9b`},
	} {
		if got := Printable(tc.in); got != tc.want {
			t.Errorf("Printable(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// q40 is the wire dtype of ir.Q4_0.
var q40, _ = FromIR(ir.Q4_0)

// Every storage dtype crosses the wire with its block layout: a tensor's
// bytes are ir's count for it, and the dtype maps back.
func TestStorageDTypes(t *testing.T) {
	for _, dt := range append([]ir.DType{ir.F32, ir.I32}, ir.StorageDTypes...) {
		w, ok := FromIR(dt)
		if !ok || w.IR() != dt || w.String() != dt.String() {
			t.Errorf("%s: wire dtype %v (%v) maps back to %s", dt, w, ok, w.IR())
			continue
		}
		e, _ := dt.Block()
		shape := []uint32{3, uint32(2 * e)}
		got, err := Bytes(w, shape)
		if want := ir.T(dt, ir.S(3, int64(2*e))).Bytes(); err != nil || got != want {
			t.Errorf("%s%v: %d bytes (%v), want %d", dt, shape, got, err, want)
		}
	}
	if _, ok := FromIR(ir.I64); ok {
		t.Error("i64 has a wire dtype")
	}
}

// A host reads shader-f16 from the handshake: Has matches whole feature
// names only.
func TestDeviceInfoHas(t *testing.T) {
	for _, tc := range []struct {
		features []string
		want     bool
	}{
		{nil, false},
		{[]string{"subgroups", "timestamp-query"}, false},
		{[]string{"shader-f16-extra", "shader"}, false},
		{[]string{"subgroups", FeatureShaderF16}, true},
	} {
		if got := (DeviceInfo{Features: tc.features}).Has(FeatureShaderF16); got != tc.want {
			t.Errorf("features %q: Has(%q) = %v, want %v", tc.features, FeatureShaderF16, got, tc.want)
		}
	}
}
