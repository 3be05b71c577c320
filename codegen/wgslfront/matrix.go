package wgslfront

// Subgroup matrices: Dawn's experimental extension, in Dawn's syntax. A
// subgroup matrix is one value spread over the invocations of a subgroup
// (SPIR-V's cooperative matrix):
//
//   - Types subgroup_matrix_left<T, K, M> (the M x K operand A),
//     subgroup_matrix_right<T, N, K> (the K x N operand B) and
//     subgroup_matrix_result<T, N, M> (the M x N accumulator): T is f16 or
//     f32, the first size the columns, the second the rows, each 8, 16
//     or 32. T() is the zero matrix.
//   - subgroupMatrixLoad<MT>(&arr, offset, col_major, stride) -> MT and
//     the statement subgroupMatrixStore(&arr, offset, value, col_major,
//     stride): arr is a workgroup array or a storage buffer whose element
//     is T, offset and stride (u32) count elements, and col_major is true
//     or false. Row-major, element (r, c) is arr[offset + r*stride + c];
//     column-major, arr[offset + c*stride + r]. An array of vectors of T
//     (tapml's addition, as SPIR-V's cooperative matrices and GLSL's
//     allow) is read as its Ts in order, offset and stride counting
//     vectors: a kernel stages tiles so, a vector per store.
//   - subgroupMatrixMultiplyAccumulate(left, right, acc) -> acc's type:
//     left * right + acc.
//   - x + y, x - y and x / y of two result matrices of one type, element
//     by element, and x * s of a result matrix and a scalar of its element
//     type (tapml's addition: Dawn has none; SPIR-V's cooperative matrices
//     have them, the product as OpMatrixTimesScalar; they have no element
//     by element product). A kernel scales a result by columns so: y
//     loaded with stride 0 repeats one row of values.
//
// Matrices live in the entry point's lets and vars only: no arrays, no
// other operators, no helper functions.

// SubgroupMatrixExt is the name a module enables subgroup matrices by.
const SubgroupMatrixExt = "chromium_experimental_subgroup_matrix"

const matrixExt = SubgroupMatrixExt

// matrixNeeds is the message of a use without the enable directive.
const matrixNeeds = "needs `enable " + matrixExt + ";`"

// matrixType parses the <T, C, R> of the subgroup matrix type name.
func (p *parser) matrixType(name string, pos Pos) *Type {
	if !p.sgm {
		failf(pos, "%s %s", name, matrixNeeds)
	}
	p.expect("<")
	t := &Type{Kind: Matrix, Role: matrixTypes[name], Elem: p.typ()}
	if t.Elem.Kind != F16 && t.Elem.Kind != F32 {
		failf(pos, "%s of %s: the elements are f16 or f32", name, t.Elem)
	}
	for _, n := range []*int{&t.Cols, &t.Rows} {
		p.expect(",")
		at := p.peek().pos
		if *n = p.intLit(maxAttr); *n != 8 && *n != 16 && *n != 32 {
			failf(at, "%s: a size of %d; sizes are 8, 16 or 32", name, *n)
		}
	}
	p.closeAngle()
	return t
}

// matrixOps are the subgroup matrix functions and their arguments.
var matrixOps = map[string]int{"subgroupMatrixLoad": 4, "subgroupMatrixStore": 5, "subgroupMatrixMultiplyAccumulate": 3}

// matrixCall types a call of a subgroup matrix function or a matrix
// constructor; stmt says whether it is a statement (only
// subgroupMatrixStore is). It returns the call's type (nil for a store).
func (c *checker) matrixCall(e *Expr, stmt bool) *Type {
	switch {
	case !c.m.SubgroupMatrix:
		failf(e.Pos, "%s %s", e.Text, matrixNeeds)
	case c.cur == nil || !c.cur.Entry:
		failf(e.Pos, "%s outside the entry point", e.Text)
	case stmt != (e.Text == "subgroupMatrixStore"):
		if stmt {
			failf(e.Pos, "the value of %s is unused", e.Text)
		}
		failf(e.Pos, "subgroupMatrixStore is a statement, not a value")
	}
	if _, ctor := matrixTypes[e.Text]; ctor { // T() is zero
		if e.Tmpl == nil {
			failf(e.Pos, "%s needs its <T, C, R>", e.Text)
		}
		if len(e.Args) != 0 {
			failf(e.Pos, "%s takes no arguments (it is the zero matrix)", e.Tmpl)
		}
		return e.Tmpl
	}
	if n := matrixOps[e.Text]; len(e.Args) != n {
		failf(e.Pos, "%s takes %d arguments, not %d", e.Text, n, len(e.Args))
	}
	a := e.Args
	switch e.Text {
	case "subgroupMatrixLoad":
		if e.Tmpl == nil {
			failf(e.Pos, "subgroupMatrixLoad needs its type: subgroupMatrixLoad<subgroup_matrix_...<T, C, R>>(...)")
		}
		if e.Tmpl.Kind != Matrix {
			failf(e.Pos, "subgroupMatrixLoad of %s, not a subgroup matrix type", e.Tmpl)
		}
		c.matrixMemory(e, a[0], e.Tmpl.Elem, false)
		c.matrixLayout(e, a[1], a[2], a[3])
		return e.Tmpl
	case "subgroupMatrixStore":
		v := c.matrixValue(e, a[2])
		c.matrixMemory(e, a[0], v.Elem, true)
		c.matrixLayout(e, a[1], a[3], a[4])
		return nil
	}
	l, r, acc := c.matrixValue(e, a[0]), c.matrixValue(e, a[1]), c.matrixValue(e, a[2])
	switch {
	case l.Role != Left || r.Role != Right || acc.Role != Result:
		failf(e.Pos, "%s of %s, %s, %s: it takes a left, a right and a result matrix", e.Text, l, r, acc)
	case !l.Elem.Eq(r.Elem):
		failf(e.Pos, "%s: the left matrix is of %s and the right of %s", e.Text, l.Elem, r.Elem)
	case l.Rows != acc.Rows || l.Cols != r.Rows || r.Cols != acc.Cols:
		failf(e.Pos, "%s: %s times %s does not fit %s (M x K times K x N into M x N)", e.Text, l, r, acc)
	}
	return acc
}

// matrixValue types an argument that must be a subgroup matrix.
func (c *checker) matrixValue(call, a *Expr) *Type {
	t := c.expr(a)
	if t.Kind != Matrix {
		failf(a.Pos, "%s takes a subgroup matrix here, not %s", call.Text, t)
	}
	return t
}

// matrixMemory types the &arr argument of a load or store: a workgroup
// array or a storage buffer (read_write to store) of elem, or of vectors
// of elem.
func (c *checker) matrixMemory(call, a *Expr, elem *Type, write bool) {
	x := a
	if x.Kind == ExprUnary && x.Text == "&" {
		x = x.Args[0]
		for x.Kind == ExprParen {
			x = x.Args[0]
		}
	}
	if a.Kind != ExprUnary || x.Kind != ExprIdent {
		failf(a.Pos, "%s takes &array (a workgroup array or a storage buffer) first", call.Text)
	}
	t := c.anyExpr(x)
	d := x.Ref
	a.Type = t
	switch {
	case d.Kind != DeclWorkgroup && d.Kind != DeclStorage:
		failf(a.Pos, "%s of %s: not a workgroup array or a storage buffer", call.Text, d.Name)
	case write && d.Kind == DeclStorage && d.Access != "read_write":
		failf(a.Pos, "subgroupMatrixStore to %s, a read-only buffer", d.Name)
	case !t.Elem.Eq(elem) && (t.Elem.Kind != Vector || !t.Elem.Elem.Eq(elem)):
		failf(a.Pos, "%s: %s is %s, and the matrix's elements are %s", call.Text, d.Name, t, elem)
	}
}

// matrixLayout types the offset, col_major and stride of a load or store.
func (c *checker) matrixLayout(call, offset, colMajor, stride *Expr) {
	for _, a := range []*Expr{offset, stride} {
		c.expr(a)
		c.assignable(a, tU32)
	}
	if colMajor.Kind != ExprIdent || colMajor.Text != "true" && colMajor.Text != "false" {
		failf(colMajor.Pos, "%s: col_major must be true or false, not %s", call.Text, colMajor)
	}
	colMajor.Type = tBool
}

// ColMajor reports whether the col_major argument of a subgroup matrix
// load or store (the literal true or false) is true.
func ColMajor(colMajor *Expr) bool { return colMajor.Text == "true" }

// MatrixArray is the workgroup array or storage buffer that the first
// argument of a subgroup matrix load or store (&arr or &(arr)) names.
func MatrixArray(a *Expr) *Decl {
	for a.Kind == ExprUnary || a.Kind == ExprParen {
		a = a.Args[0]
	}
	return a.Ref
}

// matrixArith types a binary expression of a subgroup matrix: +, - or /
// of two result matrices of one type, or a result matrix times a scalar
// of its element type.
func matrixArith(e *Expr, x, y *Type) *Type {
	if x.Kind == Matrix && x.Role == Result && e.Text == "*" && y.Kind == x.Elem.Kind {
		return x
	}
	if x.Role != Result || !x.Eq(y) || e.Text != "+" && e.Text != "-" && e.Text != "/" {
		failf(e.Pos, "%s %s %s: matrices take +, - and / with a result matrix of their type, and * by a scalar of their element type", x, e.Text, y)
	}
	return x
}
