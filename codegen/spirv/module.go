package spirv

import (
	"encoding/binary"
	"fmt"
	"slices"
)

// Opcodes and enumerants of the SPIR-V 1.3 core grammar and GLSL.std.450
// that the translator uses (numbers from the SPIR-V specification).
const (
	opName                     = 5
	opMemberName               = 6
	opExtension                = 10
	opExtInstImport            = 11
	opExtInst                  = 12
	opMemoryModel              = 14
	opEntryPoint               = 15
	opExecutionMode            = 16
	opCapability               = 17
	opTypeVoid                 = 19
	opTypeBool                 = 20
	opTypeInt                  = 21
	opTypeFloat                = 22
	opTypeVector               = 23
	opTypeArray                = 28
	opTypeRuntimeArray         = 29
	opTypeStruct               = 30
	opTypePointer              = 32
	opTypeFunction             = 33
	opConstantTrue             = 41
	opConstantFalse            = 42
	opConstant                 = 43
	opConstantComposite        = 44
	opConstantNull             = 46
	opFunction                 = 54
	opFunctionParameter        = 55
	opFunctionEnd              = 56
	opFunctionCall             = 57
	opVariable                 = 59
	opLoad                     = 61
	opStore                    = 62
	opAccessChain              = 65
	opDecorate                 = 71
	opMemberDecorate           = 72
	opVectorExtractDynamic     = 77
	opCompositeConstruct       = 80
	opCompositeExtract         = 81
	opConvertFToU              = 109
	opConvertFToS              = 110
	opConvertSToF              = 111
	opConvertUToF              = 112
	opFConvert                 = 115
	opBitcast                  = 124
	opSNegate                  = 126
	opFNegate                  = 127
	opIAdd                     = 128
	opFAdd                     = 129
	opISub                     = 130
	opFSub                     = 131
	opIMul                     = 132
	opFMul                     = 133
	opUDiv                     = 134
	opSDiv                     = 135
	opFDiv                     = 136
	opUMod                     = 137
	opSRem                     = 138
	opVectorTimesScalar        = 142
	opMatrixTimesScalar        = 143
	opDot                      = 148
	opIsNan                    = 156
	opLogicalEqual             = 164
	opLogicalNotEqual          = 165
	opLogicalOr                = 166
	opLogicalAnd               = 167
	opLogicalNot               = 168
	opSelect                   = 169
	opIEqual                   = 170
	opINotEqual                = 171
	opUGreaterThan             = 172
	opSGreaterThan             = 173
	opUGreaterThanEqual        = 174
	opSGreaterThanEqual        = 175
	opULessThan                = 176
	opSLessThan                = 177
	opULessThanEqual           = 178
	opSLessThanEqual           = 179
	opFOrdEqual                = 180
	opFUnordNotEqual           = 183
	opFOrdLessThan             = 184
	opFOrdGreaterThan          = 186
	opFOrdLessThanEqual        = 188
	opFOrdGreaterThanEqual     = 190
	opShiftRightLogical        = 194
	opShiftRightArithmetic     = 195
	opShiftLeftLogical         = 196
	opBitwiseOr                = 197
	opBitwiseXor               = 198
	opBitwiseAnd               = 199
	opControlBarrier           = 224
	opLoopMerge                = 246
	opSelectionMerge           = 247
	opLabel                    = 248
	opBranch                   = 249
	opBranchConditional        = 250
	opReturn                   = 253
	opReturnValue              = 254
	opUnreachable              = 255
	opGroupNonUniformBroadcast = 337
	opGroupNonUniformBcFirst   = 338
	opGroupNonUniformShuffle   = 345
	opGroupNonUniformShufXor   = 346
	opGroupNonUniformShufUp    = 347
	opGroupNonUniformShufDown  = 348
	opGroupNonUniformIAdd      = 349
	opGroupNonUniformFAdd      = 350
	opGroupNonUniformSMin      = 353
	opGroupNonUniformUMin      = 354
	opGroupNonUniformFMin      = 355
	opGroupNonUniformSMax      = 356
	opGroupNonUniformUMax      = 357
	opGroupNonUniformFMax      = 358

	// SPV_NV_cooperative_matrix (SPIRV-Tools v2023.1, on CI, validates it
	// and not the KHR extension).
	opTypeCooperativeMatrixNV   = 5358
	opCooperativeMatrixLoadNV   = 5359
	opCooperativeMatrixStoreNV  = 5360
	opCooperativeMatrixMulAddNV = 5361

	capShader                    = 1
	capFloat16                   = 9
	capGroupNonUniform           = 61
	capGroupNonUniformArithmetic = 63
	capGroupNonUniformBallot     = 64
	capGroupNonUniformShuffle    = 65
	capGroupNonUniformShuffleRel = 66
	capStorageBuffer16BitAccess  = 4433
	capCooperativeMatrixNV       = 5357

	addressingLogical  = 0
	memoryModelGLSL450 = 1
	execModelGLCompute = 5
	execModeLocalSize  = 17

	scInput         = 1
	scWorkgroup     = 4
	scPrivate       = 6
	scFunction      = 7
	scStorageBuffer = 12

	decBlock         = 2
	decArrayStride   = 6
	decBuiltIn       = 11
	decNonWritable   = 24
	decBinding       = 33
	decDescriptorSet = 34
	decOffset        = 35

	scopeWorkgroup = 2
	scopeSubgroup  = 3

	groupReduce = 0 // the GroupOperation of a subgroup reduction

	semAcquireRelease  = 0x8
	semWorkgroupMemory = 0x100

	// GLSL.std.450 extended instructions.
	glslRoundEven   = 2
	glslTrunc       = 3
	glslFAbs        = 4
	glslFSign       = 6
	glslFloor       = 8
	glslCeil        = 9
	glslFract       = 10
	glslSin         = 13
	glslCos         = 14
	glslTanh        = 21
	glslExp         = 27
	glslLog         = 28
	glslExp2        = 29
	glslLog2        = 30
	glslSqrt        = 31
	glslInverseSqrt = 32
	glslUMin        = 38
	glslSMin        = 39
	glslUMax        = 41
	glslSMax        = 42
	glslFClamp      = 43
	glslUClamp      = 44
	glslSClamp      = 45
	glslFma         = 50
)

// Version is the SPIR-V version of the modules: 1.3, the version of
// Vulkan 1.1 (StorageBuffer, 16-bit storage and subgroup operations are
// core there).
const Version = 0x00010300

// module assembles one SPIR-V module: the logical layout's sections are
// kept apart and joined by words. Types and constants are declared once.
type module struct {
	bound uint32

	capabilities []uint32
	caps         []uint32 // declared, to declare each once
	extensions   []uint32
	extImports   []uint32
	memoryModel  []uint32
	entryPoints  []uint32
	execModes    []uint32
	names        []uint32
	annotations  []uint32
	globals      []uint32 // types, constants and global variables, in order
	functions    []uint32

	ids   map[string]uint32 // types and constants by a key of their operands
	glsl  uint32
	iface []uint32 // Input variables of the entry point
}

func newModule() *module {
	m := &module{bound: 1, ids: map[string]uint32{}}
	m.capability(capShader)
	m.glsl = m.id()
	m.extImports = inst(m.extImports, opExtInstImport, append([]uint32{m.glsl}, str("GLSL.std.450")...)...)
	m.memoryModel = inst(m.memoryModel, opMemoryModel, addressingLogical, memoryModelGLSL450)
	return m
}

// id allocates a fresh result id.
func (m *module) id() uint32 {
	id := m.bound
	m.bound++
	return id
}

// maxWords is the longest instruction SPIR-V can encode (its word count is
// 16 bits).
const maxWords = 0xffff

// inst appends one instruction to words. Callers keep operand lists short
// (a table's constant is the one list that grows with the input, and
// translate checks its length).
func inst(words []uint32, op uint32, operands ...uint32) []uint32 {
	n := uint32(len(operands) + 1)
	if n > maxWords {
		panic(fmt.Sprintf("spirv: instruction %d has %d words", op, n))
	}
	words = append(words, n<<16|op)
	return append(words, operands...)
}

// str encodes a literal string: UTF-8, nul-terminated, padded to words.
func str(s string) []uint32 {
	b := append([]byte(s), 0)
	for len(b)%4 != 0 {
		b = append(b, 0)
	}
	w := make([]uint32, len(b)/4)
	for i := range w {
		w[i] = binary.LittleEndian.Uint32(b[4*i:])
	}
	return w
}

func (m *module) capability(c uint32) {
	if !slices.Contains(m.caps, c) {
		m.caps = append(m.caps, c)
		m.capabilities = inst(m.capabilities, opCapability, c)
	}
}

// extension declares a SPIR-V extension the module uses (once per call:
// callers declare each once).
func (m *module) extension(name string) {
	m.extensions = inst(m.extensions, opExtension, str(name)...)
}

// global returns the id of the type or constant op declares with operands
// (after its result, and after its result type when typed), declaring it
// once.
func (m *module) global(op uint32, typed bool, operands ...uint32) uint32 {
	key := fmt.Sprint(op, operands)
	if id, ok := m.ids[key]; ok {
		return id
	}
	id := m.id()
	ops := append([]uint32{id}, operands...)
	if typed {
		ops[0], ops[1] = operands[0], id
	}
	m.globals = inst(m.globals, op, ops...)
	m.ids[key] = id
	return id
}

func (m *module) typeVoid() uint32           { return m.global(opTypeVoid, false) }
func (m *module) typeBool() uint32           { return m.global(opTypeBool, false) }
func (m *module) typeInt(signed bool) uint32 { return m.global(opTypeInt, false, 32, b2u(signed)) }
func (m *module) typeFloat(bits uint32) uint32 {
	if bits == 16 {
		m.capability(capFloat16)
	}
	return m.global(opTypeFloat, false, bits)
}
func (m *module) typeVector(elem uint32, n int) uint32 {
	return m.global(opTypeVector, false, elem, uint32(n))
}
func (m *module) typeArray(elem uint32, n int) uint32 {
	return m.global(opTypeArray, false, elem, m.constU32(uint32(n)))
}

// typeCooperativeMatrix is a subgroup's cooperative matrix of rows x cols
// elements of type elem (NV's type: one per shape, whatever the operand).
func (m *module) typeCooperativeMatrix(elem uint32, rows, cols int) uint32 {
	return m.global(opTypeCooperativeMatrixNV, false, elem, m.constU32(scopeSubgroup), m.constU32(uint32(rows)), m.constU32(uint32(cols)))
}
func (m *module) typePointer(sc, elem uint32) uint32 { return m.global(opTypePointer, false, sc, elem) }
func (m *module) typeFunction(ret uint32, params ...uint32) uint32 {
	return m.global(opTypeFunction, false, append([]uint32{ret}, params...)...)
}

// typeRuntimeArray returns a runtime array of elem with an ArrayStride
// (for storage buffers).
func (m *module) typeRuntimeArray(elem uint32, stride int) uint32 {
	key := fmt.Sprint("rtarray", elem, stride)
	if id, ok := m.ids[key]; ok {
		return id
	}
	id := m.id()
	m.globals = inst(m.globals, opTypeRuntimeArray, id, elem)
	m.annotations = inst(m.annotations, opDecorate, id, decArrayStride, uint32(stride))
	m.ids[key] = id
	return id
}

func b2u(b bool) uint32 {
	if b {
		return 1
	}
	return 0
}

// constant returns the id of a scalar constant of type t whose bits are
// bits (one word: 16-bit values in the low half).
func (m *module) constant(t, bits uint32) uint32 { return m.global(opConstant, true, t, bits) }

func (m *module) constU32(v uint32) uint32 { return m.constant(m.typeInt(false), v) }

// constBool returns the id of true or false.
func (m *module) constBool(v bool) uint32 {
	if v {
		return m.global(opConstantTrue, true, m.typeBool())
	}
	return m.global(opConstantFalse, true, m.typeBool())
}

// constNull returns the zero value of type t.
func (m *module) constNull(t uint32) uint32 { return m.global(opConstantNull, true, t) }

// constComposite returns a composite constant (a table's).
func (m *module) constComposite(t uint32, parts []uint32) uint32 {
	return m.global(opConstantComposite, true, append([]uint32{t}, parts...)...)
}

// name attaches a debug name to id.
func (m *module) name(id uint32, name string) {
	m.names = inst(m.names, opName, append([]uint32{id}, str(name)...)...)
}

func (m *module) decorate(id uint32, dec ...uint32) {
	m.annotations = inst(m.annotations, opDecorate, append([]uint32{id}, dec...)...)
}

// variable declares a global variable of type t (a pointer type) in
// storage class sc, with an initializer when init is not 0.
func (m *module) variable(t, sc, init uint32, name string) uint32 {
	v := m.id()
	ops := []uint32{t, v, sc}
	if init != 0 {
		ops = append(ops, init)
	}
	m.globals = inst(m.globals, opVariable, ops...)
	m.name(v, name)
	return v
}

// storageBuffer declares binding `binding` of descriptor set 0: a Block
// struct wrapping a runtime array of elem, in the StorageBuffer class. A
// read-only buffer's variable and member are NonWritable. Each buffer gets
// its own struct type, named, so that consumers which merge identical
// types (naga) keep the access of each binding apart.
func (m *module) storageBuffer(binding int, elem uint32, stride int, readOnly bool, name string) uint32 {
	arr := m.typeRuntimeArray(elem, stride)
	st := m.id()
	m.globals = inst(m.globals, opTypeStruct, st, arr)
	m.name(st, name+"_block")
	m.names = inst(m.names, opMemberName, append([]uint32{st, 0}, str("data")...)...)
	m.decorate(st, decBlock)
	m.annotations = inst(m.annotations, opMemberDecorate, st, 0, decOffset, 0)
	if readOnly {
		m.annotations = inst(m.annotations, opMemberDecorate, st, 0, decNonWritable)
	}
	v := m.variable(m.typePointer(scStorageBuffer, st), scStorageBuffer, 0, name)
	m.decorate(v, decDescriptorSet, 0)
	m.decorate(v, decBinding, uint32(binding))
	if readOnly {
		// naga takes the access of a StorageBuffer-class variable from the
		// variable's decorations (the member's serves other consumers).
		m.decorate(v, decNonWritable)
	}
	return v
}

// builtinInput declares an Input variable of type t decorated with a
// builtin and adds it to the entry point's interface.
func (m *module) builtinInput(builtin, t uint32, name string) uint32 {
	v := m.variable(m.typePointer(scInput, t), scInput, 0, name)
	m.decorate(v, decBuiltIn, builtin)
	m.iface = append(m.iface, v)
	return v
}

// entryPoint declares fn as a GLCompute entry point with a workgroup size.
func (m *module) entryPoint(fn uint32, name string, wg [3]int) {
	ops := append([]uint32{execModelGLCompute, fn}, str(name)...)
	m.entryPoints = inst(m.entryPoints, opEntryPoint, append(ops, m.iface...)...)
	m.execModes = inst(m.execModes, opExecutionMode, fn, execModeLocalSize, uint32(wg[0]), uint32(wg[1]), uint32(wg[2]))
}

// bytes returns the module's binary, little-endian: the header, then every
// section in the order the logical layout requires.
func (m *module) bytes() []byte {
	w := []uint32{0x07230203, Version, 0, m.bound, 0}
	for _, s := range [][]uint32{m.capabilities, m.extensions, m.extImports, m.memoryModel, m.entryPoints, m.execModes,
		m.names, m.annotations, m.globals, m.functions} {
		w = append(w, s...)
	}
	b := make([]byte, 4*len(w))
	for i, x := range w {
		binary.LittleEndian.PutUint32(b[4*i:], x)
	}
	return b
}
