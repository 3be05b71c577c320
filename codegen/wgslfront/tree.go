// Package wgslfront is tapml's front end for WGSL compute kernels: a lexer,
// parser and type checker of the dialect that codegen/wgsl writes, which
// returns a typed syntax tree. The translators print that tree as MSL
// (codegen/msl) and SPIR-V (codegen/spirv), and a device server validates
// kernels it is sent with Validate. ParseExpr types one expression alone
// (an elementwise op's formula, over named variables and the helper
// functions of a library that ParseLibrary checks): codegen/llvm compiles
// formulas from that tree.
//
// The dialect is a subset of WGSL with extensions that naga (the WGSL
// compiler inside tapml's wgpu) rejects: `enable f16;` with the f16 type,
// and `enable subgroups;` with subgroup operations (SPIR-V and MSL have
// both), and Dawn's `enable chromium_experimental_subgroup_matrix;` with
// subgroup matrices (SPIR-V's cooperative matrices; see matrix.go). What
// it accepts:
//
//   - Directives: `enable f16;`, `enable subgroups;`, `enable
//     chromium_experimental_subgroup_matrix;` (first in the module).
//   - Module scope: `const NAME: T = expr;` (a scalar), a `var<private>`
//     table with an array<T, N>(...) initializer (never written), `var<workgroup>
//     name: array<T, N>;`, `@group(0) @binding(i) var<storage, read|read_write>
//     name: array<T>;` (bindings 0, 1, ... in order), helper functions, and
//     one `@compute @workgroup_size(x, y, z)` entry point whose parameters
//     are @builtin(workgroup_id | local_invocation_id |
//     local_invocation_index | global_invocation_id | num_workgroups |
//     subgroup_size | subgroup_invocation_id).
//   - Statements: let, var (zero-initialised when it has no initializer),
//     assignment and compound assignment, ++ and --, if / else if / else,
//     for, blocks, return, break, continue, workgroupBarrier() (in the entry
//     point), line comments.
//   - Types: bool, i32, u32, f32, f16, vec2/3/4 of i32, u32, f32 or f16, arrays
//     of those.
//   - Expressions: literals with suffix (i, u, f, h) or abstract integers
//     (which take their context's type and are evaluated), unary - and !,
//     the operators + - * / (% on integers), & | ^ on integer scalars (an
//     operand that is another binary operation in parentheses, as WGSL
//     requires), comparisons, && ||, << >>, conversions
//     i32(), u32(), f32(), f16(), vector constructors, bitcast<f32|i32>(u32),
//     indexing, vector components .x .y .z .w, the builtins abs, max, min,
//     clamp, select, exp, exp2, log, log2, sqrt, inverseSqrt, floor, ceil,
//     trunc, round, fract, sign, sin, cos, tanh, fma, dot, and the subgroup
//     operations subgroupAdd, subgroupMax, subgroupMin, subgroupBroadcast
//     (with a constant lane), subgroupBroadcastFirst, subgroupShuffle,
//     subgroupShuffleXor, subgroupShuffleUp, subgroupShuffleDown.
//
// Rules beyond WGSL's that keep the translations simple: helper functions
// return a value, use no workgroup memory, barriers or subgroup operations
// and write no buffer (so expressions have no side effects, and && and ||
// may evaluate both sides); subgroup operations are not on the right of &&
// or ||; max and min take scalars when they are floats; var<private> and
// const initializers are constant expressions. Anything else is an error
// that names its line and column.
//
// Parse is safe on hostile input: the source is bounded (MaxSourceBytes)
// and must be UTF-8, nesting is bounded (MaxNesting) so the recursive
// descent cannot exhaust the stack, sizes are bounded so that byte counts
// cannot overflow, and every failure is an *Error, never a panic.
package wgslfront

import (
	"fmt"
	"unicode/utf8"
)

// MaxSourceBytes bounds the source Parse reads.
const MaxSourceBytes = 1 << 20

// MaxNesting bounds the nesting of blocks and expressions.
const MaxNesting = 128

// Pos is a position in the source: 1-based line and column (in bytes).
type Pos struct{ Line, Col int }

func (p Pos) String() string { return fmt.Sprintf("%d:%d", p.Line, p.Col) }

// Error is an error in the source, at Pos.
type Error struct {
	Pos Pos
	Msg string
}

func (e *Error) Error() string { return e.Pos.String() + ": " + e.Msg }

// Parse parses and type-checks src, a compute module of the dialect whose
// entry point is the function named entry. The error is an *Error.
func Parse(src, entry string) (*Module, error) {
	var m *Module
	if err := guard(src, func() {
		m = parse(src)
		check(m, entry)
	}); err != nil {
		return nil, err
	}
	return m, nil
}

// guard bounds src and runs f, which parses it: a failure becomes its
// *Error, and any other panic an internal error.
func guard(src string, f func()) (err error) {
	defer func() {
		if r := recover(); r != nil {
			fl, ok := r.(failure)
			if !ok {
				// A bug, not the source's fault; it must not take down a
				// server that validates kernels.
				fl.err = &Error{Pos: Pos{1, 1}, Msg: fmt.Sprintf("internal error: %v", r)}
			}
			err = fl.err
		}
	}()
	if len(src) > MaxSourceBytes {
		return &Error{Pos{1, 1}, fmt.Sprintf("source of %d bytes; the limit is %d", len(src), MaxSourceBytes)}
	}
	if !utf8.ValidString(src) {
		return &Error{Pos: invalidUTF8(src), Msg: "invalid UTF-8"}
	}
	f()
	return nil
}

// Validate checks that src is a compute module of the dialect with entry
// point entry: what a device must check before it compiles a kernel it
// was sent.
func Validate(src, entry string) error {
	_, err := Parse(src, entry)
	return err
}

// invalidUTF8 is the position of the first byte of src that is not UTF-8.
func invalidUTF8(src string) Pos {
	p := Pos{1, 1}
	for i := 0; i < len(src); {
		r, n := utf8.DecodeRuneInString(src[i:])
		if r == utf8.RuneError && n <= 1 {
			return p
		}
		if r == '\n' {
			p.Line, p.Col = p.Line+1, 1
		} else {
			p.Col += n
		}
		i += n
	}
	return p
}

// Module is a parsed and checked WGSL module.
type Module struct {
	// Items are the module-scope declarations in source order, and the
	// comments between them.
	Items []*Item
	// F16, Subgroups and SubgroupMatrix say which extensions the module
	// enables.
	F16, Subgroups, SubgroupMatrix bool

	Entry         *Fn     // the entry point
	WorkgroupSize [3]int  // the entry point's @workgroup_size, 1 where not given
	Buffers       []*Decl // the storage buffers, by binding
	Workgroup     []*Decl // the var<workgroup> arrays, in source order
	SharedBytes   int     // the bytes of workgroup memory they take
}

// Item is one module-scope declaration (Decl or Fn), or a comment between
// them.
type Item struct {
	Comment string
	Decl    *Decl
	Fn      *Fn
}

// DeclKind says what a name stands for.
type DeclKind int

const (
	DeclLet       DeclKind = iota
	DeclVar                // a function's var
	DeclConst              // a module-scope const
	DeclPrivate            // a var<private> table
	DeclWorkgroup          // a var<workgroup> array
	DeclStorage            // @group(0) @binding(i) var<storage, ...>
	DeclParam              // a helper function's parameter
	DeclBuiltin            // an entry point parameter with @builtin(...)
)

// Decl is a declared name.
type Decl struct {
	Kind    DeclKind
	Name    string
	Type    *Type // declared, or the initializer's
	Init    *Expr
	Pos     Pos
	Comment string // the comment that ends its line

	Binding int    // storage
	Access  string // storage: "read" or "read_write"
	Builtin string // the builtin of a DeclBuiltin

	// Unused marks a local (let or var) that is never read, or read only
	// by other unused locals and by assignments to them; a printer may
	// leave it and its assignments (Stmt.Unused) out.
	Unused bool

	val      *int64  // a module-scope const's value, when it is an integer
	reads    int     // uses, other than as the target of an assignment
	declared bool    // in scope yet (for the checker)
	assigns  []*Stmt // the assignments to it (a local's)
}

// Fn is a function: a helper, or the entry point.
type Fn struct {
	Name          string
	Params        []*Decl
	Result        *Type // nil: none (the entry point)
	Body          []*Stmt
	Entry         bool  // @compute
	WorkgroupSize []int // @workgroup_size
	Pos           Pos

	calls   []*Fn // the helpers it calls
	visited int   // for the recursion check: 1 on the path, 2 done
}

// StmtKind is the kind of a statement.
type StmtKind int

const (
	StmtComment StmtKind = iota
	StmtDecl             // let or var: Decl
	StmtAssign           // LHS Op X, Op one of = += -= *= /= %=
	StmtIncDec           // LHS++ or LHS-- (Op "++" or "--")
	StmtBarrier          // workgroupBarrier()
	StmtIf               // if X Body else Else (an else if is one StmtIf in Else)
	StmtFor              // for (Init; X; Post) Body; Init, X and Post may be nil
	StmtBlock            // { Body }
	StmtReturn           // return X (X may be nil)
	StmtBreak
	StmtContinue
	StmtCall // X: a call of subgroupMatrixStore (the one call that is a statement)
)

// Stmt is a statement.
type Stmt struct {
	Kind       StmtKind
	Pos        Pos
	Comment    string // a comment statement's text, or the comment that ends the line
	Decl       *Decl
	Op         string
	LHS, X     *Expr
	Init, Post *Stmt
	Body, Else []*Stmt
	Unused     bool // an assignment to an unused local
}

// ExprKind is the kind of an expression.
type ExprKind int

const (
	ExprLit    ExprKind = iota // Text: the literal as written
	ExprIdent                  // Text: the name; Ref: its declaration
	ExprUnary                  // Text: the operator; Args[0]
	ExprBinary                 // Text: the operator; Args[0], Args[1]
	ExprCall                   // Text: the function or type; Tmpl: the type of vecN<T>(...), array<T, N>(...), bitcast<T>(...)
	ExprIndex                  // Args[0][Args[1]]
	ExprMember                 // Args[0].Text
	ExprParen                  // (Args[0])
)

// Expr is an expression.
type Expr struct {
	Kind ExprKind
	Text string
	Tmpl *Type
	Args []*Expr
	Pos  Pos

	// Set by the checker.
	Type *Type // never AbstractInt once checked: abstract expressions are settled
	Ref  *Decl // an identifier's declaration
	Func *Fn   // the helper function a call calls
	// Const, when set, is the expression's value (an integer constant
	// expression, evaluated): print it instead of the expression.
	Const *int64
	// Same marks a comparison of an expression with itself (x == x, x !=
	// x): a NaN test on floats; on integers a constant (true for ==), and
	// then x is not read.
	Same bool

	height int // of the tree under it (for the parser's limit)
}

// Walk calls f on every statement of body, nested ones included, in
// source order.
func Walk(body []*Stmt, f func(*Stmt)) {
	for _, s := range body {
		f(s)
		for _, t := range []*Stmt{s.Init, s.Post} {
			if t != nil {
				Walk([]*Stmt{t}, f)
			}
		}
		Walk(s.Body, f)
		Walk(s.Else, f)
	}
}

// String prints an expression as WGSL (for comparisons and messages).
func (e *Expr) String() string { return e.Print(nil) }

// TypeKind is the kind of a type.
type TypeKind int

const (
	Bool TypeKind = iota
	I32
	U32
	F32
	F16
	AbstractInt // an integer literal without suffix, or a constant expression of them (only while checking)
	Vector
	Array
	Matrix // a subgroup matrix: Role, Elem (its scalar), Cols and Rows
)

// Type is a type of the dialect.
type Type struct {
	Kind TypeKind
	Elem *Type // Vector and Array
	N    int   // Vector: the width; Array: the length (0: runtime-sized)

	Role       MatrixRole // Matrix
	Cols, Rows int        // Matrix
}

// MatrixRole is the operand a subgroup matrix is in a product: Left (A,
// M x K), Right (B, K x N) or Result (the M x N accumulator).
type MatrixRole int

const (
	Left MatrixRole = iota
	Right
	Result
)

// matrixTypes are the names of the subgroup matrix types, by role.
var matrixTypes = map[string]MatrixRole{
	"subgroup_matrix_left": Left, "subgroup_matrix_right": Right, "subgroup_matrix_result": Result,
}

var (
	tBool   = &Type{Kind: Bool}
	tI32    = &Type{Kind: I32}
	tU32    = &Type{Kind: U32}
	tF32    = &Type{Kind: F32}
	tF16    = &Type{Kind: F16}
	tAbsInt = &Type{Kind: AbstractInt}
)

var scalarTypes = map[string]*Type{"bool": tBool, "i32": tI32, "u32": tU32, "f32": tF32, "f16": tF16}

func vecOf(elem *Type, n int) *Type { return &Type{Kind: Vector, Elem: elem, N: n} }

// Value reports whether t is a scalar or a vector: what operators,
// builtins and helper functions take.
func (t *Type) Value() bool { return t.Scalar() || t.Kind == Vector }

// Scalar reports whether t is a scalar.
func (t *Type) Scalar() bool { return t.Kind <= AbstractInt }

// Integer reports whether t is an integer scalar.
func (t *Type) Integer() bool { return t.Kind == I32 || t.Kind == U32 || t.Kind == AbstractInt }

// Float reports whether t is a float scalar.
func (t *Type) Float() bool { return t.Kind == F32 || t.Kind == F16 }

// ScalarOf is the scalar of a scalar, vector or subgroup matrix type (the
// element of an array).
func (t *Type) ScalarOf() *Type {
	if t.Kind == Vector || t.Kind == Array || t.Kind == Matrix {
		return t.Elem.ScalarOf()
	}
	return t
}

// Eq reports whether t and u are the same type.
func (t *Type) Eq(u *Type) bool {
	return t.Kind == u.Kind && t.N == u.N && t.Role == u.Role && t.Cols == u.Cols && t.Rows == u.Rows &&
		(t.Elem == nil) == (u.Elem == nil) && (t.Elem == nil || t.Elem.Eq(u.Elem))
}

// Size is the bytes of a value of the type in memory (WGSL's layout: a
// vec3 takes 12 bytes, an array element its stride); 0 for a
// runtime-sized array.
func (t *Type) Size() int {
	switch t.Kind {
	case F16:
		return 2
	case Vector:
		return t.N * t.Elem.Size()
	case Array:
		return t.N * t.Stride()
	}
	return 4
}

// Align is the alignment of the type in memory (WGSL's: a vec3 aligns as
// a vec4).
func (t *Type) Align() int {
	switch t.Kind {
	case Vector:
		n := t.N
		if n == 3 {
			n = 4
		}
		return n * t.Elem.Size()
	case Array:
		return t.Elem.Align()
	}
	return t.Size()
}

// Stride is the distance between elements of an array type.
func (t *Type) Stride() int {
	e := t.Elem
	return (e.Size() + e.Align() - 1) / e.Align() * e.Align()
}

func (t *Type) String() string {
	switch t.Kind {
	case Vector:
		return fmt.Sprintf("vec%d<%s>", t.N, t.Elem)
	case Array:
		if t.N == 0 {
			return fmt.Sprintf("array<%s>", t.Elem)
		}
		return fmt.Sprintf("array<%s, %d>", t.Elem, t.N)
	case Matrix:
		for name, r := range matrixTypes {
			if r == t.Role {
				return fmt.Sprintf("%s<%s, %d, %d>", name, t.Elem, t.Cols, t.Rows)
			}
		}
	}
	return [...]string{"bool", "i32", "u32", "f32", "f16", "abstract-int"}[t.Kind]
}

// Conversion reports whether e is a conversion to a scalar type (f32(x),
// i32(x), ...).
func (e *Expr) Conversion() bool {
	return e.Kind == ExprCall && e.Tmpl == nil && e.Func == nil && scalarTypes[e.Text] != nil
}
