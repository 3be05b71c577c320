package spirv

// builder writes the body of one function with structured control flow in
// the shape glslang emits, which naga's SPIR-V reader and the validator
// expect: a selection merge before each conditional branch, loops as a
// header (OpLoopMerge) that branches to a block testing the condition,
// the body, and a continue block that branches back to the header.
// Mutable values live in function variables, so no phi is needed.
type builder struct {
	m *module

	fn         uint32
	vars       []uint32 // OpVariable instructions of the entry block
	body       []uint32
	fence      uint32 // a variable stored to before each barrier
	terminated bool   // the current block has its terminator
}

// newBuilder starts function fn (an id), of type fnType returning ret,
// with parameters of the given types; it returns the parameters' ids.
func (m *module) newBuilder(fn, ret, fnType uint32, params []uint32) (*builder, []uint32) {
	b := &builder{m: m, fn: fn}
	b.body = inst(b.body, opFunction, ret, fn, 0, fnType)
	ids := make([]uint32, len(params))
	for i, t := range params {
		ids[i] = m.id()
		b.body = inst(b.body, opFunctionParameter, t, ids[i])
	}
	b.label(m.id())
	return b, ids
}

// finish ends the function (a void one returns; in one with a result, the
// end is unreachable: the front end checked that every path returns) and
// adds it to the module.
func (b *builder) finish(void bool) {
	if !b.terminated {
		if void {
			b.emit(opReturn)
		} else {
			b.emit(opUnreachable)
		}
	}
	// The entry block's variables go right after its label, which follows
	// the OpFunction and its parameters.
	at := 0
	for b.body[at]&0xffff != opLabel {
		at += int(b.body[at] >> 16)
	}
	at += 2
	m := b.m
	m.functions = append(m.functions, b.body[:at]...)
	m.functions = append(m.functions, b.vars...)
	m.functions = append(m.functions, b.body[at:]...)
	m.functions = inst(m.functions, opFunctionEnd)
}

func (b *builder) emit(op uint32, operands ...uint32) { b.body = inst(b.body, op, operands...) }

// op emits an instruction with a result of type t and returns the result.
func (b *builder) op(op, t uint32, operands ...uint32) uint32 {
	id := b.m.id()
	b.emit(op, append([]uint32{t, id}, operands...)...)
	return id
}

// ext calls a GLSL.std.450 instruction.
func (b *builder) ext(t, instr uint32, args ...uint32) uint32 {
	return b.op(opExtInst, t, append([]uint32{b.m.glsl, instr}, args...)...)
}

// label starts a block.
func (b *builder) label(id uint32) {
	b.emit(opLabel, id)
	b.terminated = false
}

// branch ends the current block with a branch to target, unless it has
// its terminator (a return, break or continue) already.
func (b *builder) branch(target uint32) {
	if !b.terminated {
		b.emit(opBranch, target)
		b.terminated = true
	}
}

// terminate ends the current block with op (a return or OpUnreachable).
func (b *builder) terminate(op uint32, operands ...uint32) {
	b.emit(op, operands...)
	b.terminated = true
}

// local declares a function variable of type t (not a pointer type) and
// returns it.
func (b *builder) local(t uint32, name string) uint32 {
	id := b.m.id()
	b.vars = inst(b.vars, opVariable, b.m.typePointer(scFunction, t), id, scFunction)
	if name != "" {
		b.m.name(id, name)
	}
	return id
}

func (b *builder) load(t, ptr uint32) uint32 { return b.op(opLoad, t, ptr) }
func (b *builder) store(ptr, v uint32)       { b.emit(opStore, ptr, v) }

// barrier emits OpControlBarrier with workgroup execution and memory scope
// and acquire-release semantics on workgroup memory (WGSL's
// workgroupBarrier). A store to a function variable goes first: naga
// 0.19's SPIR-V reader emits the expressions pending at an OpControlBarrier
// after the barrier, and a store makes it emit them before (so a load
// written before the barrier runs before it).
func (b *builder) barrier() {
	u32 := b.m.typeInt(false)
	if b.fence == 0 {
		b.fence = b.local(u32, "fence")
	}
	b.store(b.fence, b.m.constU32(0))
	b.emit(opControlBarrier, b.m.constU32(scopeWorkgroup), b.m.constU32(scopeWorkgroup),
		b.m.constU32(semAcquireRelease|semWorkgroupMemory))
}

// ifElse runs then when cond holds and els (which may be nil) otherwise.
func (b *builder) ifElse(cond uint32, then, els func()) {
	merge, thenL, elseL := b.m.id(), b.m.id(), b.m.id()
	if els == nil {
		elseL = merge
	}
	b.emit(opSelectionMerge, merge, 0)
	b.emit(opBranchConditional, cond, thenL, elseL)
	b.label(thenL)
	then()
	b.branch(merge)
	if els != nil {
		b.label(elseL)
		els()
		b.branch(merge)
	}
	b.label(merge)
}

// loop emits a loop: cond (nil: none) is tested before each run of body,
// post runs after it. body gets the labels a break and a continue branch
// to.
func (b *builder) loop(cond func() uint32, body func(brk, cont uint32), post func()) {
	header, check, bodyL, cont, merge := b.m.id(), b.m.id(), b.m.id(), b.m.id(), b.m.id()
	b.branch(header)
	b.label(header)
	b.emit(opLoopMerge, merge, cont, 0)
	b.emit(opBranch, check)
	b.label(check)
	if cond != nil {
		b.emit(opBranchConditional, cond(), bodyL, merge)
	} else {
		b.emit(opBranch, bodyL)
	}
	b.label(bodyL)
	body(merge, cont)
	b.branch(cont)
	b.label(cont)
	post()
	b.branch(header)
	b.label(merge)
}
