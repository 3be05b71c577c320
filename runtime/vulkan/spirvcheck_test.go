package vulkan

import (
	"bytes"
	"encoding/binary"
	"strings"
	"testing"

	"github.com/tapml/tapml/codegen/spirv"
)

// addKernel is the translated SPIR-V of a small WGSL kernel.
func addKernel(t testing.TB) []byte {
	t.Helper()
	code, _, err := spirv.Translate(`@group(0) @binding(0) var<storage, read> in0: array<f32>;
@group(0) @binding(1) var<storage, read_write> out0: array<f32>;
@compute @workgroup_size(64, 1, 1)
fn main(@builtin(global_invocation_id) id: vec3<u32>) {
  out0[id.x] = in0[id.x] + 1.0f;
}
`)
	if err != nil {
		t.Fatal(err)
	}
	return code
}

// f16Kernel is the translated SPIR-V of a kernel that computes in f16.
func f16Kernel(t testing.TB) []byte {
	t.Helper()
	code, _, err := spirv.Translate(`enable f16;
@group(0) @binding(0) var<storage, read> in0: array<f16>;
@group(0) @binding(1) var<storage, read_write> out0: array<f16>;
@compute @workgroup_size(64, 1, 1)
fn main(@builtin(global_invocation_id) id: vec3<u32>) {
  out0[id.x] = in0[id.x] * 2.0h;
}
`)
	if err != nil {
		t.Fatal(err)
	}
	return code
}

var allFeatures = features{f16: true, storage16: true, subgroupTypes: true, subgroupOps: 0xff, coopMatrix: true, spirvMinor: 6}

// TestCheckModule checks what checkModule accepts and each way it refuses
// a module, with the reason in the error.
func TestCheckModule(t *testing.T) {
	good, f16 := addKernel(t), f16Kernel(t)
	with := func(code []byte, word int, v uint32) []byte {
		c := append([]byte(nil), code...)
		binary.LittleEndian.PutUint32(c[4*word:], v)
		return c
	}
	noCoop := allFeatures
	noCoop.coopMatrix = false
	// The cooperative-matrix module with its capability CooperativeMatrixNV
	// made Shader: the extension alone is refused too.
	extOnly := coopMatrixSPV
	for i := spirvHeaderWords; i+1 < len(coopMatrixSPV)/4; i++ {
		if binary.LittleEndian.Uint32(coopMatrixSPV[4*i:]) == 2<<16|opCapability && binary.LittleEndian.Uint32(coopMatrixSPV[4*i+4:]) == capCooperativeMatrixNV {
			extOnly = with(coopMatrixSPV, i+1, capShader)
		}
	}
	if bytes.Equal(extOnly, coopMatrixSPV) {
		t.Fatal("testdata/coopmat.spv declares no capability CooperativeMatrixNV")
	}
	const coopRefused = "cooperative matrices (SPV_NV_cooperative_matrix), which are off on this device"
	for _, c := range []struct {
		name  string
		code  []byte
		entry string
		f     features
		want  string // "" to accept
	}{
		{"translated kernel", good, "main", features{spirvMinor: 3}, ""},
		{"f16 kernel on an f16 device", f16, "main", allFeatures, ""},
		{"cooperative matrices on a device with them", coopMatrixSPV, "main", allFeatures, ""},
		{"cooperative matrices without them", coopMatrixSPV, "main", noCoop, coopRefused},
		{"the cooperative-matrix extension without them", extOnly, "main", noCoop, coopRefused},
		{"the extension, capability Shader, with them", extOnly, "main", allFeatures, ""},
		{"f16 kernel without f16", f16, "main", features{spirvMinor: 6}, "capability"},
		{"empty", nil, "main", allFeatures, "words"},
		{"not words", good[:len(good)-1], "main", allFeatures, "not whole words"},
		{"bad magic", with(good, 0, 0x12345678), "main", allFeatures, "magic"},
		{"too new", with(good, 1, 0x00010700), "main", allFeatures, "SPIR-V 1.7"},
		{"newer than the device", with(good, 1, 0x00010600), "main", features{spirvMinor: 3}, "1.0 to 1.3"},
		{"runs past the end", with(good, len(good)/4-1, 2<<16|56), "main", allFeatures, "claims 2 words; 1 remain"},
		{"zero-length instruction", with(good, 5, 0), "main", allFeatures, "claims 0 words"},
		{"other entry point", good, "kernel", allFeatures, `no GLCompute entry point "kernel"`},
	} {
		m, err := checkModule(c.code, c.entry, c.f)
		wantSize := [3]int{64, 1, 1}
		if bytes.Equal(c.code, coopMatrixSPV) || bytes.Equal(c.code, extOnly) {
			wantSize = [3]int{32, 1, 1}
		}
		if err == nil && m.localSize != wantSize {
			t.Errorf("%s: LocalSize %v, want %v", c.name, m.localSize, wantSize)
		}
		if (err == nil) != (c.want == "") || err != nil && !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want %q", c.name, err, c.want)
		}
	}
}

// FuzzCheckModule feeds checkModule mutated kernels: it must never panic,
// and what it accepts has whole words, the magic number and an entry point.
func FuzzCheckModule(f *testing.F) {
	f.Add(addKernel(f), "main")
	f.Add(f16Kernel(f), "main")
	f.Add(coopMatrixSPV, "main")
	f.Add([]byte{0x03, 0x02, 0x23, 0x07}, "")
	f.Fuzz(func(t *testing.T, code []byte, entry string) {
		m, err := checkModule(code, entry, allFeatures)
		if err != nil {
			return
		}
		if len(m.words)*4 != len(code) || m.words[0] != spirvMagic {
			t.Fatalf("accepted %d bytes as %d words, magic %#x", len(code), len(m.words), m.words[0])
		}
	})
}
