package spirv

import (
	"encoding/binary"
	"fmt"
	"math"
)

// Opcodes and enumerants of the SPIR-V 1.3 core grammar and GLSL.std.450
// that the generator uses (numbers from the SPIR-V specification).
const (
	opName              = 5
	opMemberName        = 6
	opExtInstImport     = 11
	opExtInst           = 12
	opMemoryModel       = 14
	opEntryPoint        = 15
	opExecutionMode     = 16
	opCapability        = 17
	opTypeVoid          = 19
	opTypeBool          = 20
	opTypeInt           = 21
	opTypeFloat         = 22
	opTypeVector        = 23
	opTypeArray         = 28
	opTypeRuntimeArray  = 29
	opTypeStruct        = 30
	opTypePointer       = 32
	opTypeFunction      = 33
	opConstantTrue      = 41
	opConstantFalse     = 42
	opConstant          = 43
	opConstantComposite = 44
	opFunction          = 54
	opFunctionEnd       = 56
	opVariable          = 59
	opLoad              = 61
	opStore             = 62
	opAccessChain       = 65
	opDecorate          = 71
	opMemberDecorate    = 72
	opCompositeExtract  = 81
	opConvertFToS       = 110
	opConvertSToF       = 111
	opConvertUToF       = 112
	opBitcast           = 124
	opSNegate           = 126
	opFNegate           = 127
	opIAdd              = 128
	opFAdd              = 129
	opISub              = 130
	opFSub              = 131
	opIMul              = 132
	opFMul              = 133
	opUDiv              = 134
	opSDiv              = 135
	opFDiv              = 136
	opUMod              = 137
	opBitwiseAnd        = 199
	opLogicalOr         = 166
	opLogicalAnd        = 167
	opLogicalNot        = 168
	opSelect            = 169
	opIEqual            = 170
	opINotEqual         = 171
	opUGreaterThan      = 172
	opSGreaterThan      = 173
	opUGreaterThanEqual = 174
	opSGreaterThanEqual = 175
	opULessThan         = 176
	opSLessThan         = 177
	opULessThanEqual    = 178
	opSLessThanEqual    = 179
	opFOrdEqual         = 180
	opFOrdNotEqual      = 182
	opFOrdLessThan      = 184
	opFOrdGreaterThan   = 186
	opFOrdLessThanEq    = 188
	opFOrdGreaterThanEq = 190
	opControlBarrier    = 224
	opLoopMerge         = 246
	opSelectionMerge    = 247
	opLabel             = 248
	opBranch            = 249
	opBranchConditional = 250
	opReturn            = 253

	capShader = 1

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

	builtInWorkgroupID        = 26
	builtInLocalInvocationID  = 27
	builtInGlobalInvocationID = 28

	scopeWorkgroup = 2

	semAcquireRelease  = 0x8
	semWorkgroupMemory = 0x100

	// GLSL.std.450 extended instructions.
	glslRound       = 1
	glslTrunc       = 3
	glslFAbs        = 4
	glslFloor       = 8
	glslSin         = 13
	glslCos         = 14
	glslTanh        = 21
	glslPow         = 26
	glslExp         = 27
	glslLog         = 28
	glslExp2        = 29
	glslLog2        = 30
	glslSqrt        = 31
	glslInverseSqrt = 32
	glslFMin        = 37
	glslFMax        = 40
	glslFClamp      = 43
)

// Version is the SPIR-V version the generator targets: 1.3, the version of
// Vulkan 1.1 (StorageBuffer is core there).
const Version = 0x00010300

// scalar kinds of the types the builder tracks.
type kind uint8

const (
	kOther kind = iota
	kBool
	kU32
	kI32
	kF32
)

// Type is a SPIR-V type id with the scalar kind it has (kOther for
// composites and pointers).
type Type struct {
	ID   uint32
	Kind kind
}

// Module assembles one SPIR-V module: the logical layout's sections are kept
// apart and joined by Words. Types and constants are deduplicated.
type Module struct {
	bound uint32

	capabilities []uint32
	extImports   []uint32
	memoryModel  []uint32
	entryPoints  []uint32
	execModes    []uint32
	names        []uint32
	annotations  []uint32
	globals      []uint32 // types, constants and global variables, in order
	functions    []uint32

	types     map[string]Type
	constants map[string]uint32
	glsl      uint32
	iface     []uint32 // Input variables of the entry point

	Void, Bool, U32, I32, F32 Type
	UVec3                     Type
}

// NewModule starts a module with the Shader capability, the Logical
// GLSL450 memory model and the GLSL.std.450 import.
func NewModule() *Module {
	m := &Module{bound: 1, types: map[string]Type{}, constants: map[string]uint32{}}
	m.capabilities = inst(m.capabilities, opCapability, capShader)
	m.glsl = m.ID()
	m.extImports = inst(m.extImports, opExtInstImport, append([]uint32{m.glsl}, str("GLSL.std.450")...)...)
	m.memoryModel = inst(m.memoryModel, opMemoryModel, addressingLogical, memoryModelGLSL450)
	m.Void = m.typ("void", kOther, opTypeVoid)
	m.Bool = m.typ("bool", kBool, opTypeBool)
	m.U32 = m.typ("u32", kU32, opTypeInt, 32, 0)
	m.I32 = m.typ("i32", kI32, opTypeInt, 32, 1)
	m.F32 = m.typ("f32", kF32, opTypeFloat, 32)
	m.UVec3 = m.typ(fmt.Sprintf("vec3 %d", m.U32.ID), kOther, opTypeVector, m.U32.ID, 3)
	return m
}

// ID allocates a fresh result id.
func (m *Module) ID() uint32 {
	id := m.bound
	m.bound++
	return id
}

// inst appends one instruction to words.
func inst(words []uint32, op uint32, operands ...uint32) []uint32 {
	n := uint32(len(operands) + 1)
	if n > 0xffff {
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

// typ returns the type declared by op and operands, declaring it once.
func (m *Module) typ(key string, k kind, op uint32, operands ...uint32) Type {
	if t, ok := m.types[key]; ok {
		return t
	}
	t := Type{ID: m.ID(), Kind: k}
	m.globals = inst(m.globals, op, append([]uint32{t.ID}, operands...)...)
	m.types[key] = t
	return t
}

// Pointer returns the pointer type to elem in storage class sc.
func (m *Module) Pointer(sc uint32, elem Type) Type {
	return m.typ(fmt.Sprintf("ptr %d %d", sc, elem.ID), kOther, opTypePointer, sc, elem.ID)
}

// Array returns the type of n elems (no layout decoration: for workgroup,
// private and function memory).
func (m *Module) Array(elem Type, n int) Type {
	return m.typ(fmt.Sprintf("array %d %d", elem.ID, n), kOther, opTypeArray, elem.ID, m.ConstU(uint32(n)))
}

// runtimeArray returns a runtime array of elem with a 4-byte ArrayStride.
func (m *Module) runtimeArray(elem Type) Type {
	key := fmt.Sprintf("rtarray %d", elem.ID)
	if t, ok := m.types[key]; ok {
		return t
	}
	t := m.typ(key, kOther, opTypeRuntimeArray, elem.ID)
	m.annotations = inst(m.annotations, opDecorate, t.ID, decArrayStride, 4)
	return t
}

// FuncType returns the type of a function returning ret with no parameters.
func (m *Module) FuncType(ret Type) Type {
	return m.typ(fmt.Sprintf("fn %d", ret.ID), kOther, opTypeFunction, ret.ID)
}

// Name attaches a debug name to id.
func (m *Module) Name(id uint32, name string) {
	m.names = inst(m.names, opName, append([]uint32{id}, str(name)...)...)
}

func (m *Module) constant(t Type, bits uint32) uint32 {
	key := fmt.Sprintf("%d %d", t.ID, bits)
	if id, ok := m.constants[key]; ok {
		return id
	}
	id := m.ID()
	m.globals = inst(m.globals, opConstant, t.ID, id, bits)
	m.constants[key] = id
	return id
}

// ConstU, ConstI and ConstF return the ids of scalar constants.
func (m *Module) ConstU(v uint32) uint32  { return m.constant(m.U32, v) }
func (m *Module) ConstI(v int32) uint32   { return m.constant(m.I32, uint32(v)) }
func (m *Module) ConstF(v float32) uint32 { return m.constant(m.F32, math.Float32bits(v)) }

// ConstBool returns the id of true or false.
func (m *Module) ConstBool(v bool) uint32 {
	key := fmt.Sprintf("bool %v", v)
	if id, ok := m.constants[key]; ok {
		return id
	}
	id := m.ID()
	op := uint32(opConstantFalse)
	if v {
		op = opConstantTrue
	}
	m.globals = inst(m.globals, op, m.Bool.ID, id)
	m.constants[key] = id
	return id
}

// StorageBuffer declares binding `binding` of descriptor set 0: a Block
// struct wrapping a runtime array of elem, in the StorageBuffer class. A
// read-only buffer's variable and member are NonWritable. Each buffer gets its own struct
// type, named, so that consumers which merge identical types (naga) keep
// the access of each binding apart.
func (m *Module) StorageBuffer(binding int, elem Type, readOnly bool, name string) Array {
	arr := m.runtimeArray(elem)
	st := m.ID()
	m.globals = inst(m.globals, opTypeStruct, st, arr.ID)
	m.Name(st, name+"_block")
	m.names = inst(m.names, opMemberName, append([]uint32{st, 0}, str("data")...)...)
	m.annotations = inst(m.annotations, opDecorate, st, decBlock)
	m.annotations = inst(m.annotations, opMemberDecorate, st, 0, decOffset, 0)
	if readOnly {
		m.annotations = inst(m.annotations, opMemberDecorate, st, 0, decNonWritable)
	}
	ptr := m.Pointer(scStorageBuffer, Type{ID: st})
	v := m.ID()
	m.globals = inst(m.globals, opVariable, ptr.ID, v, scStorageBuffer)
	m.Name(v, name)
	m.annotations = inst(m.annotations, opDecorate, v, decDescriptorSet, 0)
	m.annotations = inst(m.annotations, opDecorate, v, decBinding, uint32(binding))
	if readOnly {
		// naga takes the access of a StorageBuffer-class variable from the
		// variable's decorations (the member's serves other consumers).
		m.annotations = inst(m.annotations, opDecorate, v, decNonWritable)
	}
	return Array{Var: v, Elem: elem, elemPtr: m.Pointer(scStorageBuffer, elem), block: true}
}

// Workgroup declares an array of n elems in workgroup (shared) memory.
func (m *Module) Workgroup(elem Type, n int, name string) Array {
	ptr := m.Pointer(scWorkgroup, m.Array(elem, n))
	v := m.ID()
	m.globals = inst(m.globals, opVariable, ptr.ID, v, scWorkgroup)
	m.Name(v, name)
	return Array{Var: v, Elem: elem, elemPtr: m.Pointer(scWorkgroup, elem), Len: n}
}

// Table declares a private array of elems initialised with constants (bits
// holds each element's 32 bits).
func (m *Module) Table(elem Type, bits []uint32, name string) Array {
	at := m.Array(elem, len(bits))
	parts := make([]uint32, len(bits))
	for i, b := range bits {
		parts[i] = m.constant(elem, b)
	}
	c := m.ID()
	m.globals = inst(m.globals, opConstantComposite, append([]uint32{at.ID, c}, parts...)...)
	ptr := m.Pointer(scPrivate, at)
	v := m.ID()
	m.globals = inst(m.globals, opVariable, ptr.ID, v, scPrivate, c)
	m.Name(v, name)
	return Array{Var: v, Elem: elem, elemPtr: m.Pointer(scPrivate, elem), Len: len(bits)}
}

// BuiltinInput declares an Input variable of type uvec3 decorated with a
// builtin (WorkgroupId, LocalInvocationId, GlobalInvocationId) and adds it
// to the entry point's interface.
func (m *Module) BuiltinInput(builtin uint32, name string) uint32 {
	ptr := m.Pointer(scInput, m.UVec3)
	v := m.ID()
	m.globals = inst(m.globals, opVariable, ptr.ID, v, scInput)
	m.Name(v, name)
	m.annotations = inst(m.annotations, opDecorate, v, decBuiltIn, builtin)
	m.iface = append(m.iface, v)
	return v
}

// EntryPoint declares fn as a GLCompute entry point with a workgroup size.
func (m *Module) EntryPoint(fn uint32, name string, wg [3]int) {
	ops := append([]uint32{execModelGLCompute, fn}, str(name)...)
	m.entryPoints = inst(m.entryPoints, opEntryPoint, append(ops, m.iface...)...)
	m.execModes = inst(m.execModes, opExecutionMode, fn, execModeLocalSize, uint32(wg[0]), uint32(wg[1]), uint32(wg[2]))
}

// Words returns the module's binary: the header, then every section in the
// order the logical layout requires.
func (m *Module) Words() []uint32 {
	w := []uint32{0x07230203, Version, 0, m.bound, 0}
	for _, s := range [][]uint32{m.capabilities, m.extImports, m.memoryModel, m.entryPoints, m.execModes,
		m.names, m.annotations, m.globals, m.functions} {
		w = append(w, s...)
	}
	return w
}

// Bytes returns Words little-endian, the form a .spv file holds.
func Bytes(words []uint32) []byte {
	b := make([]byte, 4*len(words))
	for i, w := range words {
		binary.LittleEndian.PutUint32(b[4*i:], w)
	}
	return b
}

// WordsOf converts a .spv byte string back to words; its length must be a
// multiple of 4.
func WordsOf(b []byte) ([]uint32, error) {
	if len(b)%4 != 0 {
		return nil, fmt.Errorf("spirv: %d bytes is not a whole number of words", len(b))
	}
	w := make([]uint32, len(b)/4)
	for i := range w {
		w[i] = binary.LittleEndian.Uint32(b[4*i:])
	}
	return w, nil
}
