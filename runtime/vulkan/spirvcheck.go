package vulkan

import (
	"encoding/binary"
	"fmt"
)

// features are the optional shader features a device was created with.
type features struct {
	f16, storage16, subgroupTypes bool   // shaderFloat16, storageBuffer16BitAccess, shaderSubgroupExtendedTypes
	subgroupOps                   uint32 // VkSubgroupFeatureFlags usable in compute shaders
	coopMatrix                    bool   // VK_NV_cooperative_matrix for the matmul's shape (shaderFeatures)
	spirvMinor                    int    // the newest SPIR-V 1.x the device takes
}

// VkSubgroupFeatureFlagBits.
const (
	subgroupBasic           = 1 << 0
	subgroupVote            = 1 << 1
	subgroupArithmetic      = 1 << 2
	subgroupBallot          = 1 << 3
	subgroupShuffle         = 1 << 4
	subgroupShuffleRelative = 1 << 5
	subgroupClustered       = 1 << 6
	subgroupQuad            = 1 << 7
)

// SPIR-V capabilities that kernels may declare.
const (
	capShader                    = 1
	capFloat16                   = 9
	capGroupNonUniform           = 61
	capGroupNonUniformVote       = 62
	capGroupNonUniformArithmetic = 63
	capGroupNonUniformBallot     = 64
	capGroupNonUniformShuffle    = 65
	capGroupNonUniformShuffleRel = 66
	capGroupNonUniformClustered  = 67
	capGroupNonUniformQuad       = 68
	capStorageBuffer16BitAccess  = 4433
	capCooperativeMatrixNV       = 5357
)

// coopMatrixExt is the SPIR-V extension of cooperative matrices.
const coopMatrixExt = "SPV_NV_cooperative_matrix"

// errNoCoopMatrix is checkModule's error for a cooperative-matrix kernel
// on a device without the feature.
var errNoCoopMatrix = fmt.Errorf("the kernel uses cooperative matrices (%s), which are off on this device: "+
	"tapml enables them only where VK_NV_cooperative_matrix runs 16x16x16 f16 products into f32 on subgroups of 32 "+
	"and f16 is on (not under NoF16 or NoSubgroupMatrix)", coopMatrixExt)

var subgroupCaps = map[uint32]uint32{
	capGroupNonUniform: subgroupBasic, capGroupNonUniformVote: subgroupVote,
	capGroupNonUniformArithmetic: subgroupArithmetic, capGroupNonUniformBallot: subgroupBallot,
	capGroupNonUniformShuffle: subgroupShuffle, capGroupNonUniformShuffleRel: subgroupShuffleRelative,
	capGroupNonUniformClustered: subgroupClustered, capGroupNonUniformQuad: subgroupQuad,
}

const (
	spirvMagic       = 0x07230203
	opExtension      = 10
	opCapability     = 17
	opEntryPoint     = 15
	opExecutionMode  = 16
	modeLocalSize    = 17
	execGLCompute    = 5
	maxModuleWords   = 16 << 20 // 64 MiB: far beyond any kernel
	spirvHeaderWords = 5
)

// module is what checkModule learns of a SPIR-V module.
type module struct {
	words     []uint32
	localSize [3]int // the entry point's LocalSize (workgroup size)
}

// checkModule checks SPIR-V bytes before a driver sees them: whole
// little-endian words, the magic number, a version the device takes, an
// instruction stream whose lengths add up, a GLCompute entry point named
// entry with a LocalSize, and only capabilities (and, of the extensions,
// cooperative matrices) the device was created with. Drivers do not
// validate modules (an invalid one may crash them); the translator's
// modules are valid (its tests run spirv-val on every kernel), and this
// check stops what the device could not run, such as an
// f16 kernel on a device without shaderFloat16, with an error instead of
// undefined behaviour.
func checkModule(code []byte, entry string, f features) (*module, error) {
	if len(code)%4 != 0 {
		return nil, fmt.Errorf("SPIR-V of %d bytes is not whole words", len(code))
	}
	if len(code)/4 < spirvHeaderWords || len(code)/4 > maxModuleWords {
		return nil, fmt.Errorf("SPIR-V of %d words: want %d to %d", len(code)/4, spirvHeaderWords, maxModuleWords)
	}
	w := make([]uint32, len(code)/4)
	for i := range w {
		w[i] = binary.LittleEndian.Uint32(code[4*i:])
	}
	if w[0] != spirvMagic {
		return nil, fmt.Errorf("not SPIR-V: magic number %#08x", w[0])
	}
	major, minor := int(w[1]>>16&0xff), int(w[1]>>8&0xff)
	if major != 1 || minor > f.spirvMinor {
		return nil, fmt.Errorf("SPIR-V %d.%d: the device takes 1.0 to 1.%d", major, minor, f.spirvMinor)
	}
	entryID, hasEntry := uint32(0), false
	var localSizes = map[uint32][3]int{}
	for i := spirvHeaderWords; i < len(w); {
		n, op := int(w[i]>>16), w[i]&0xffff
		if n == 0 || i+n > len(w) {
			return nil, fmt.Errorf("SPIR-V instruction at word %d (opcode %d) claims %d words; %d remain", i, op, n, len(w)-i)
		}
		switch op {
		case opExtension:
			if literalString(w[i+1:i+n]) == coopMatrixExt && !f.coopMatrix {
				return nil, errNoCoopMatrix
			}
		case opCapability:
			if n != 2 {
				return nil, fmt.Errorf("SPIR-V OpCapability at word %d has %d words", i, n)
			}
			if err := f.allows(w[i+1]); err != nil {
				return nil, err
			}
		case opEntryPoint:
			if n >= 4 && w[i+1] == execGLCompute && literalString(w[i+3:i+n]) == entry {
				entryID, hasEntry = w[i+2], true
			}
		case opExecutionMode:
			if n == 6 && w[i+2] == modeLocalSize {
				localSizes[w[i+1]] = [3]int{int(w[i+3]), int(w[i+4]), int(w[i+5])}
			}
		}
		i += n
	}
	if !hasEntry {
		return nil, fmt.Errorf("SPIR-V has no GLCompute entry point %q", entry)
	}
	ls, ok := localSizes[entryID]
	if !ok {
		return nil, fmt.Errorf("SPIR-V entry point %q has no LocalSize", entry)
	}
	return &module{words: w, localSize: ls}, nil
}

// allows reports whether a kernel may declare capability c on the device.
func (f features) allows(c uint32) error {
	switch {
	case c == capShader:
		return nil
	case c == capFloat16 && f.f16, c == capStorageBuffer16BitAccess && f.storage16, c == capCooperativeMatrixNV && f.coopMatrix:
		return nil
	case c == capCooperativeMatrixNV:
		return errNoCoopMatrix
	}
	if op, ok := subgroupCaps[c]; ok && f.subgroupOps&op != 0 {
		return nil
	}
	return fmt.Errorf("the kernel needs SPIR-V capability %d, which this device does not have (or tapml did not enable)", c)
}

// literalString decodes a SPIR-V literal string (nul-terminated, packed
// little-endian into words); "" when it has no terminator.
func literalString(w []uint32) string {
	var b []byte
	for _, x := range w {
		for k := 0; k < 4; k++ {
			c := byte(x >> (8 * k))
			if c == 0 {
				return string(b)
			}
			b = append(b, c)
		}
	}
	return ""
}
