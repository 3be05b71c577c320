package vulkan

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// physInfo is what the device needs to know of a physical device.
type physInfo struct {
	Name                          string
	API, Driver, Vendor, DeviceID uint32
	Type                          int // VkPhysicalDeviceType
	CacheUUID                     [16]byte
	QueueFamily                   int // a family with compute, or -1

	MaxWorkgroups, MaxWorkgroupSize [3]uint32
	MaxInvocations, MaxSharedMemory uint32
	MaxStorageBuffers               uint32
	MaxStorageRange                 uint64 // bytes one binding may span
	StorageAlign                    uint64 // minStorageBufferOffsetAlignment
	MaxAllocation                   uint64

	SubgroupSize, SubgroupStages, SubgroupOps uint32
	ShaderF16, Storage16, SubgroupTypes       bool
	extF16, extTypes                          bool    // the features come from extensions
	TimestampPeriod                           float64 // nanoseconds per tick; 0: no compute timestamps
	TimestampBits                             uint32  // valid bits of the queue's timestamps

	// CoopMatrix: VK_NV_cooperative_matrix with its cooperativeMatrix
	// feature; CoopMatrixStages, the shader stages that may use it;
	// CoopMatrixShapes, the products it runs.
	CoopMatrix       bool
	CoopMatrixStages uint32
	CoopMatrixShapes []coopMatrixShape

	MemoryTypes []memoryType
	Heaps       []memoryHeap
}

// coopMatrixShape is one VkCooperativeMatrixPropertiesNV: D (MxN) = A
// (MxK) · B (KxN) + C, in VkComponentTypeNV types, at a VkScopeNV.
type coopMatrixShape struct {
	M, N, K, A, B, C, D, Scope uint32
}

// VkComponentTypeNV and VkScopeNV values.
const (
	componentF16  = 0
	componentF32  = 1
	scopeSubgroup = 3
)

// matmulShape is the one product the dialect's subgroup matrices stand
// for (wgsl.Features.SubgroupMatrix): 16x16x16, f16 fragments into f32, by
// one subgroup.
var matmulShape = coopMatrixShape{M: 16, N: 16, K: 16, A: componentF16, B: componentF16, C: componentF32, D: componentF32, Scope: scopeSubgroup}

// matmulSubgroup is the subgroup size the matmul kernel assumes: 32
// consecutive invocations hold one matrix.
const matmulSubgroup = 32

type memoryType struct {
	Flags uint32 // VkMemoryPropertyFlags
	Heap  int
}

type memoryHeap struct {
	Size  uint64
	Flags uint32
}

// VkPhysicalDeviceType.
const (
	typeOther = iota
	typeIntegrated
	typeDiscrete
	typeVirtual
	typeCPU
)

// VkMemoryPropertyFlagBits.
const (
	memDeviceLocal  = 1
	memHostVisible  = 2
	memHostCoherent = 4
	memHostCached   = 8
)

const stageCompute = 0x20 // VK_SHADER_STAGE_COMPUTE_BIT

func apiString(v uint32) string { return fmt.Sprintf("%d.%d.%d", v>>22&0x7f, v>>12&0x3ff, v&0xfff) }

func apiMinor(v uint32) int { return int(v >> 12 & 0x3ff) }

// usable says why a physical device cannot run tapml's kernels ("" when it
// can): Vulkan 1.1 (SPIR-V 1.3) and a queue with compute.
func (p *physInfo) usable() string {
	if p.API>>22&0x7f == 1 && apiMinor(p.API) < 1 {
		return fmt.Sprintf("Vulkan %s, tapml needs 1.1", apiString(p.API))
	}
	if p.QueueFamily < 0 {
		return "no queue with compute"
	}
	return ""
}

// chooseDevice picks a physical device: the one want names (its index, or
// a part of its name, case-insensitive), or else the first usable one by
// kind: discrete GPU, integrated, virtual, other, CPU driver.
func chooseDevice(devs []physInfo, want string) (int, error) {
	var names []string
	for i, p := range devs {
		names = append(names, fmt.Sprintf("%d: %s", i, p.Name))
	}
	if want != "" {
		for i := range devs {
			if strconv.Itoa(i) == want || strings.Contains(strings.ToLower(devs[i].Name), strings.ToLower(want)) {
				if why := devs[i].usable(); why != "" {
					return 0, fmt.Errorf("Vulkan device %q (%s) cannot run tapml's kernels: %s", want, devs[i].Name, why)
				}
				return i, nil
			}
		}
		return 0, fmt.Errorf("no Vulkan device %q (devices: %s)", want, strings.Join(names, ", "))
	}
	rank := map[int]int{typeDiscrete: 0, typeIntegrated: 1, typeVirtual: 2, typeOther: 3, typeCPU: 4}
	best := -1
	var why []string
	for i := range devs {
		if w := devs[i].usable(); w != "" {
			why = append(why, devs[i].Name+": "+w)
			continue
		}
		if best < 0 || rank[devs[i].Type] < rank[devs[best].Type] {
			best = i
		}
	}
	if best < 0 {
		if len(devs) == 0 {
			return 0, fmt.Errorf("%w: the Vulkan loader found no device; %s", errNoVulkan, fixHint)
		}
		return 0, fmt.Errorf("%w: no Vulkan device can run tapml's kernels (%s); %s", errNoVulkan, strings.Join(why, "; "), fixHint)
	}
	return best, nil
}

// chooseMemory picks the memory types of tensors and of staging buffers.
// Tensors go to device-local memory, preferring a type the host cannot
// see (a GPU's own memory, not the PCIe window onto it), then the largest
// heap. Staging buffers must be host-visible and coherent, preferably
// cached (downloads read them) and not device-local. host reports whether
// the tensor memory is itself host-visible and coherent (lavapipe,
// integrated GPUs): then uploads and downloads need no staging copy.
func chooseMemory(p *physInfo) (tensors, staging int, host bool, err error) {
	score := func(i int, want, prefer, avoid uint32) int {
		f := p.MemoryTypes[i].Flags
		if f&want != want {
			return -1
		}
		s := 0
		if f&prefer == prefer {
			s += 2
		}
		if f&avoid == 0 {
			s += 4
		}
		return s
	}
	pick := func(want, prefer, avoid uint32) int {
		best, bestScore := -1, -1
		for i := range p.MemoryTypes {
			s := score(i, want, prefer, avoid)
			if s > bestScore || s == bestScore && s >= 0 && p.heapSize(i) > p.heapSize(best) {
				best, bestScore = i, s
			}
		}
		return best
	}
	tensors = pick(memDeviceLocal, 0, memHostVisible)
	if tensors < 0 {
		tensors = pick(0, memHostVisible|memHostCoherent, 0) // a driver with no device-local type
	}
	staging = pick(memHostVisible|memHostCoherent, memHostCached, memDeviceLocal)
	if tensors < 0 || staging < 0 {
		return 0, 0, false, fmt.Errorf("the device has no usable memory types (%d types)", len(p.MemoryTypes))
	}
	f := p.MemoryTypes[tensors].Flags
	host = f&(memHostVisible|memHostCoherent) == memHostVisible|memHostCoherent && f&memHostCached != 0
	return tensors, staging, host, nil
}

func (p *physInfo) heapSize(memType int) uint64 {
	if memType < 0 || p.MemoryTypes[memType].Heap >= len(p.Heaps) {
		return 0
	}
	return p.Heaps[p.MemoryTypes[memType].Heap].Size
}

// shaderFeatures are the optional features tapml enables on p: f16 needs
// both f16 arithmetic and 16-bit storage buffers; subgroup operations
// need every kind the WGSL dialect has, in compute shaders, and, with
// f16, on 16-bit types too; cooperative matrices need f16, the
// cooperativeMatrix feature in compute shaders, the matmul's shape and
// subgroups of 32.
func shaderFeatures(p *physInfo) features {
	f := features{spirvMinor: 3}
	switch m := apiMinor(p.API); {
	case m >= 3:
		f.spirvMinor = 6
	case m == 2:
		f.spirvMinor = 5
	}
	f.f16 = p.ShaderF16 && p.Storage16
	f.storage16 = f.f16
	need := uint32(subgroupBasic | subgroupArithmetic | subgroupBallot | subgroupShuffle | subgroupShuffleRelative)
	if p.SubgroupStages&stageCompute != 0 && p.SubgroupOps&need == need && (!f.f16 || p.SubgroupTypes) {
		f.subgroupOps = p.SubgroupOps
		f.subgroupTypes = f.f16
	}
	f.coopMatrix = f.f16 && p.CoopMatrix && p.CoopMatrixStages&stageCompute != 0 &&
		p.SubgroupSize == matmulSubgroup && slices.Contains(p.CoopMatrixShapes, matmulShape)
	return f
}

// deviceName is a short name of a physical device: its name without a
// driver's parenthesised details ("llvmpipe (LLVM 15.0.6, 256 bits)"
// gives "llvmpipe").
func deviceName(p *physInfo) string {
	name := strings.TrimSpace(p.Name)
	if i := strings.IndexAny(name, "("); i > 0 {
		name = strings.TrimSpace(name[:i])
	}
	if name == "" {
		return "unknown"
	}
	return name
}
