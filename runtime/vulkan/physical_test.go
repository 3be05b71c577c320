package vulkan

import (
	"errors"
	"strings"
	"testing"

	"github.com/tapml/tapml/codegen/wgsl"
)

func api(minor uint32) uint32 { return 1<<22 | minor<<12 }

// TestChooseDevice: a discrete GPU before a CPU driver, a device named by
// index or name, devices that cannot run the kernels skipped or refused
// with the reason, and no device at all an error naming the fix.
func TestChooseDevice(t *testing.T) {
	lvp := physInfo{Name: "llvmpipe (LLVM 15.0.6, 256 bits)", Type: typeCPU, API: api(3)}
	gpu := physInfo{Name: "NVIDIA H200", Type: typeDiscrete, API: api(3)}
	old := physInfo{Name: "Old GPU", Type: typeDiscrete, API: api(0)}
	noCompute := physInfo{Name: "Display", Type: typeIntegrated, API: api(2), QueueFamily: -1}
	for _, c := range []struct {
		name string
		devs []physInfo
		want string
		idx  int
		err  string
	}{
		{"gpu first", []physInfo{lvp, gpu}, "", 1, ""},
		{"by index", []physInfo{lvp, gpu}, "0", 0, ""},
		{"by name", []physInfo{gpu, lvp}, "LLVMpipe", 1, ""},
		{"unknown name", []physInfo{gpu}, "radeon", 0, `no Vulkan device "radeon" (devices: 0: NVIDIA H200)`},
		{"unusable skipped", []physInfo{old, noCompute, lvp}, "", 2, ""},
		{"unusable named", []physInfo{old}, "0", 0, "tapml needs 1.1"},
		{"none usable", []physInfo{old, noCompute}, "", 0, "no queue with compute"},
		{"none", nil, "", 0, "apt-get install -y libvulkan1 mesa-vulkan-drivers"},
	} {
		idx, err := chooseDevice(c.devs, c.want)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%s: got %d, %v; want an error containing %q", c.name, idx, err, c.err)
			}
			continue
		}
		if err != nil || idx != c.idx {
			t.Errorf("%s: got %d, %v; want %d", c.name, idx, err, c.idx)
		}
	}
	if _, err := chooseDevice(nil, ""); !errors.Is(err, errNoVulkan) {
		t.Errorf("no devices: %v does not wrap errNoVulkan", err)
	}
}

// TestChooseMemory picks memory types on the layouts drivers report: a
// discrete GPU (device-local, the BAR window, host memory), a CPU driver
// and an integrated GPU (one type for everything).
func TestChooseMemory(t *testing.T) {
	dl, hv, hc, cached := uint32(memDeviceLocal), uint32(memHostVisible), uint32(memHostCoherent), uint32(memHostCached)
	for _, c := range []struct {
		name             string
		types            []memoryType
		heaps            []memoryHeap
		tensors, staging int
		host             bool
	}{
		{"discrete", []memoryType{{dl, 0}, {hv | hc, 1}, {hv | hc | cached, 1}, {dl | hv | hc, 2}},
			[]memoryHeap{{80 << 30, 1}, {512 << 30, 0}, {256 << 20, 1}}, 0, 2, false},
		{"discrete, BAR type first", []memoryType{{dl | hv | hc, 1}, {dl, 0}, {hv | hc, 2}},
			[]memoryHeap{{80 << 30, 1}, {256 << 20, 1}, {64 << 30, 0}}, 1, 2, false},
		{"cpu driver", []memoryType{{dl | hv | hc | cached, 0}}, []memoryHeap{{2 << 30, 1}}, 0, 0, true},
		{"integrated, uncached", []memoryType{{dl | hv | hc, 0}}, []memoryHeap{{8 << 30, 1}}, 0, 0, false},
	} {
		p := physInfo{MemoryTypes: c.types, Heaps: c.heaps}
		tensors, staging, host, err := chooseMemory(&p)
		if err != nil || tensors != c.tensors || staging != c.staging || host != c.host {
			t.Errorf("%s: got tensors %d staging %d host %v (%v); want %d %d %v", c.name, tensors, staging, host, err, c.tensors, c.staging, c.host)
		}
	}
	if _, _, _, err := chooseMemory(&physInfo{MemoryTypes: []memoryType{{dl, 0}}, Heaps: []memoryHeap{{1 << 30, 1}}}); err == nil {
		t.Error("a device with no host-visible memory: no error")
	}
}

// TestShaderFeatures: f16 needs f16 arithmetic and 16-bit storage;
// subgroups need every operation kind in compute shaders, and with f16
// also on 16-bit types; cooperative matrices need f16, the feature in
// compute shaders, the 16x16x16 f16-into-f32 subgroup product and
// subgroups of 32.
func TestShaderFeatures(t *testing.T) {
	all := uint32(0xff)
	lvp := physInfo{API: api(3), ShaderF16: true, Storage16: true, SubgroupTypes: true, SubgroupStages: stageCompute, SubgroupOps: all, SubgroupSize: 8}
	f16Acc := matmulShape
	f16Acc.C, f16Acc.D = componentF16, componentF16
	m8 := matmulShape
	m8.M = 8
	nv := lvp
	nv.SubgroupSize, nv.CoopMatrix, nv.CoopMatrixStages, nv.CoopMatrixShapes = 32, true, stageCompute, []coopMatrixShape{f16Acc, m8, matmulShape}
	with := func(change func(p *physInfo)) physInfo {
		p := nv
		change(&p)
		return p
	}
	for _, c := range []struct {
		name                string
		p                   physInfo
		f16, subgroup, coop bool
		spirv               int
	}{
		{"lavapipe", lvp, true, true, false, 6},
		{"no 16-bit storage", physInfo{API: api(2), ShaderF16: true, SubgroupStages: stageCompute, SubgroupOps: all}, false, true, false, 5},
		{"no shuffles", physInfo{API: api(1), SubgroupStages: stageCompute, SubgroupOps: subgroupBasic | subgroupArithmetic}, false, false, false, 3},
		{"not in compute", physInfo{API: api(3), SubgroupStages: 0x10, SubgroupOps: all}, false, false, false, 6},
		{"f16 without subgroup f16", physInfo{API: api(3), ShaderF16: true, Storage16: true, SubgroupStages: stageCompute, SubgroupOps: all}, true, false, false, 6},
		{"cooperative matrices", nv, true, true, true, 6},
		{"cooperative matrices without f16", with(func(p *physInfo) { p.ShaderF16 = false }), false, true, false, 6},
		{"cooperative matrices without the feature", with(func(p *physInfo) { p.CoopMatrix = false }), true, true, false, 6},
		{"cooperative matrices not in compute", with(func(p *physInfo) { p.CoopMatrixStages = 0x10 }), true, true, false, 6},
		{"no f32 accumulator", with(func(p *physInfo) { p.CoopMatrixShapes = []coopMatrixShape{f16Acc, m8} }), true, true, false, 6},
		{"subgroups of 64", with(func(p *physInfo) { p.SubgroupSize = 64 }), true, true, false, 6},
	} {
		f := shaderFeatures(&c.p)
		if f.f16 != c.f16 || (f.subgroupOps != 0) != c.subgroup || f.coopMatrix != c.coop || f.spirvMinor != c.spirv {
			t.Errorf("%s: got %+v, want f16 %v subgroups %v cooperative matrices %v SPIR-V 1.%d", c.name, f, c.f16, c.subgroup, c.coop, c.spirv)
		}
	}
}

// TestDeviceLimits: kernels are generated for the device's limits, lowered
// where the options set a field, with the grid limit the smallest of the
// three dimensions'.
func TestDeviceLimits(t *testing.T) {
	p := physInfo{MaxWorkgroups: [3]uint32{1 << 31, 65535, 65535}, MaxWorkgroupSize: [3]uint32{1024, 1024, 64},
		MaxInvocations: 1024, MaxSharedMemory: 49152, MaxStorageBuffers: 1 << 20}
	got := deviceLimits(&p, wgsl.Limits{MaxInvocationsPerWorkgroup: 256, MaxWorkgroupSizeZ: 128})
	want := wgsl.Limits{MaxInvocationsPerWorkgroup: 256, MaxWorkgroupSizeX: 1024, MaxWorkgroupSizeY: 1024, MaxWorkgroupSizeZ: 64,
		MaxWorkgroupStorageSize: 49152, MaxWorkgroupsPerDimension: 65535, MaxStorageBuffersPerShaderStage: maxBindings}
	if got != want {
		t.Errorf("got %+v\nwant %+v", got, want)
	}
	for name, want := range map[string]string{"llvmpipe (LLVM 15.0.6, 256 bits)": "llvmpipe", "NVIDIA H200": "NVIDIA H200", " ": "unknown"} {
		if got := deviceName(&physInfo{Name: name}); got != want {
			t.Errorf("deviceName(%q) = %q, want %q", name, got, want)
		}
	}
}
