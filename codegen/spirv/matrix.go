package spirv

import "github.com/tapml/tapml/codegen/wgslfront"

// Subgroup matrices (codegen/wgslfront's matrix.go) are SPIR-V's
// cooperative matrices of SPV_NV_cooperative_matrix, of Subgroup scope.
// NV's matrix has no operand role: a left and a right matrix of one shape
// and element are the same type (rows = Dawn's second size, columns its
// first). A load or store takes a pointer to the array's element at the
// offset, the stride in elements and the layout; that is Dawn's
// definition of both.

// matrix returns the value of a call whose type (ty, a matrix type's id)
// is a subgroup matrix: the zero matrix T(), a load, or a
// multiply-accumulate.
func (t *translator) matrix(e *wgslfront.Expr, ty uint32) uint32 {
	switch e.Text {
	case "subgroupMatrixLoad":
		ptr, stride, colMajor := t.matrixMemory(e.Args[0], e.Args[1], e.Args[2], e.Args[3])
		return t.b.op(opCooperativeMatrixLoadNV, ty, ptr, stride, colMajor)
	case "subgroupMatrixMultiplyAccumulate":
		return t.b.op(opCooperativeMatrixMulAddNV, ty, t.expr(e.Args[0]), t.expr(e.Args[1]), t.expr(e.Args[2]))
	}
	return t.m.constNull(ty) // the constructor T()
}

// matrixStore emits the statement subgroupMatrixStore(&arr, offset,
// value, col_major, stride).
func (t *translator) matrixStore(e *wgslfront.Expr) {
	value := t.expr(e.Args[2])
	ptr, stride, colMajor := t.matrixMemory(e.Args[0], e.Args[1], e.Args[3], e.Args[4])
	t.b.emit(opCooperativeMatrixStoreNV, ptr, value, stride, colMajor)
}

// matrixMemory returns the operands of a load or store: a pointer to the
// element at offset of the array arr names, the stride, and the layout as
// a bool constant.
func (t *translator) matrixMemory(arr, offset, colMajor, stride *wgslfront.Expr) (ptr, strideV, colMajorV uint32) {
	base, sc, indices := t.memory(wgslfront.MatrixArray(arr))
	elem := arr.Type.Elem
	ptrT := t.m.typePointer(sc, t.typ(elem))
	ptr = t.b.op(opAccessChain, ptrT, append([]uint32{base}, append(indices, t.expr(offset))...)...)
	return ptr, t.expr(stride), t.m.constBool(wgslfront.ColMajor(colMajor))
}
