package ir

import "strconv"

// Facts are what the packages around the compiler ask about an op: whether
// it may be dropped or evaluated early (passes), which input it updates in
// place (executors, the carve recorder, migration), in which dtype the CPU
// reference computes it (runtime/cpu and the targets that follow it), how
// its results may differ between correct implementations (carve's tolerance
// policy) and how much work it is (runtime/llvm's thread split). Every op
// declares every fact; the zero value of each means "not declared", which
// TestEveryOpDeclaresItsFacts rejects, so a new op cannot forget one.
type Facts struct {
	Effects Effects
	InPlace InPlace
	Routing Routing
	Compute Compute
	// Numerics says how results of correct implementations may differ.
	Numerics Rule[Numerics]
	// ChainLength is the number of elementwise ops each output element
	// passes through when Numerics is Chain (1 for one op; a fused
	// expression's op count); 0 for ops whose Numerics is another model.
	ChainLength Rule[int]
	// Transcendentals is the number of functions that GPUs do not round
	// correctly (exp, log, sqrt, tanh, pow, sin and cos; they allow a few
	// ULP) on the path of each output element. A norm's 1/sqrt of the mean
	// is one factor of a whole row and is not counted: the sum's sqrt(K)
	// term covers it.
	Transcendentals Rule[int]
	// SumLength is the number of terms each output element sums (K): 1 for
	// ops that sum nothing, including those that select one of several
	// (max, argmax, nearest resize).
	SumLength Rule[int]
	// Cost estimates the scalar operations of a call (a multiply-add counts
	// once; a transcendental function 16).
	Cost Rule[int64]
	// Storage is the input that may hold a weight in a storage dtype (f16,
	// bf16, a block format), which the op's kernels dequantize in
	// registers (storage.go).
	Storage Rule[StoredInput]
}

// Effects says whether an op does more than compute its outputs.
type Effects uint8

const (
	_           Effects = iota
	Pure                // only its outputs matter: an op whose outputs are unused may be dropped, one whose inputs are constants evaluated early
	SideEffects         // it must run even when its outputs are unused (kv_write updates a cache, probe records a value)
)

func (e Effects) String() string {
	switch e {
	case Pure:
		return "pure"
	case SideEffects:
		return "side effects"
	}
	return "undeclared"
}

// InPlace says which inputs, if any, an op updates in place: outputs
// 0..n-1 are inputs 0..n-1 updated in place, each output that input's
// buffer (kv_write's cache; rope_kv_write's two caches). Declare it with
// NotInPlace or UpdatesInputs.
type InPlace int8

// NotInPlace: the op writes its outputs into buffers of their own.
const NotInPlace InPlace = -1

// UpdatesInputs says that outputs 0..n-1 (n >= 1) are inputs 0..n-1
// updated in place.
func UpdatesInputs(n int) InPlace { return InPlace(n) }

// Count returns how many leading inputs are updated in place (0 for none).
func (p InPlace) Count() int { return max(int(p), 0) }

// Updates reports whether input i is updated in place (as output i).
func (p InPlace) Updates(i int) bool { return i >= 0 && i < p.Count() }

func (p InPlace) String() string {
	switch {
	case p == 1:
		return "input 0"
	case p > 1:
		return "inputs 0.." + strconv.Itoa(int(p)-1)
	case p == NotInPlace:
		return "-"
	}
	return "undeclared"
}

// Routing says which input, if any, holds the integer ids that choose
// which slices of a weight a call reads (expert_matmul's expert ids). Two
// calls routed to different experts exercise different weights, so carve's
// content key keeps them apart by the ids they use. Declare it with
// NotRouted or RoutedBy.
type Routing int8

// NotRouted: the op reads all of its weights on every call.
const NotRouted Routing = -1

// RoutedBy says that input i holds the routing ids.
func RoutedBy(i int) Routing { return Routing(i + 1) }

// Input returns the input that holds the routing ids, if any.
func (r Routing) Input() (int, bool) {
	if r > 0 {
		return int(r) - 1, true
	}
	return -1, false
}

func (r Routing) String() string {
	if i, ok := r.Input(); ok {
		return "input " + strconv.Itoa(i)
	}
	if r == NotRouted {
		return "-"
	}
	return "undeclared"
}

// Compute is the dtype an op computes in on the CPU reference; the other
// targets follow it.
type Compute uint8

const (
	_ Compute = iota
	// ComputeF32: float inputs are computed in f32 (f16 and bf16 ones
	// widened first, the results rounded once to the output dtype);
	// integer inputs are not accepted.
	ComputeF32
	// ComputeF32OrInt: floats as ComputeF32; i32 and i64 inputs computed
	// exactly in their own dtype (wrapping on overflow).
	ComputeF32OrInt
	// ComputeStored: the op moves, selects or converts elements in the
	// dtypes they are stored in; any dtype its inference accepts.
	ComputeStored
)

func (c Compute) String() string {
	switch c {
	case ComputeF32:
		return "f32"
	case ComputeF32OrInt:
		return "f32, i32, i64"
	case ComputeStored:
		return "stored dtype"
	}
	return "undeclared"
}

// Numerics is how the results of two correct implementations of a call can
// differ; carve's tolerance policy gives each model its formula.
type Numerics uint8

const (
	_ Numerics = iota
	// Exact: the op moves, converts to integers or compares values; any
	// difference is a bug.
	Exact
	// Selects: each output is the largest of some inputs (reduce_max, max
	// pooling): no arithmetic rounds, so it is exact too.
	Selects
	// OneRounding: one rounding to the output dtype (a cast to a float).
	OneRounding
	// Chain: each of ChainLength elementwise ops rounds once, and
	// Transcendentals of them may be off by a few ULP.
	Chain
	// Sum: each output element sums SumLength terms, in an order the
	// implementation chooses (tiles, trees, FMA), plus Transcendentals.
	Sum
	// Angle: rope's angle pos·theta^(-2i/d) carries an absolute error
	// about eps·pos, which sin and cos pass on to the rotated values.
	Angle
	// Coordinate: linear resize's input coordinate carries an absolute
	// error about eps·(axis length), which moves the lerp weights.
	Coordinate
)

func (n Numerics) String() string {
	switch n {
	case Exact:
		return "exact"
	case Selects:
		return "selects"
	case OneRounding:
		return "one rounding"
	case Chain:
		return "chain"
	case Sum:
		return "sum"
	case Angle:
		return "angle"
	case Coordinate:
		return "coordinate"
	}
	return "undeclared"
}

// Call is one use of an op as the call-dependent facts see it: concrete
// input types, output types (nil where they are not known yet),
// normalized attributes, and the value of the op's position input (rope,
// attention; 0 when it has none).
type Call struct {
	In, Out []Type
	Attrs   Attrs
	Pos     int
}

// Rule is a fact that depends on the call. Doc says it in words (`tapmlc
// ops -v` prints it); Of computes it.
type Rule[T any] struct {
	Doc string
	Of  func(c Call) T
}

func (r Rule[T]) declared() bool { return r.Of != nil }

// always is the rule whose value is v for every call.
func always[T any](v T) Rule[T] {
	return Rule[T]{Doc: toText(v), Of: func(Call) T { return v }}
}

func toText(v any) string {
	switch v := v.(type) {
	case int:
		return strconv.Itoa(v)
	case interface{ String() string }:
		return v.String()
	}
	return "?"
}

// byMode is the rule of an op whose fact depends on its "mode" attribute
// (pool2d, resize).
func byMode[T any](doc string, of map[string]T, otherwise T) Rule[T] {
	return Rule[T]{Doc: doc, Of: func(c Call) T {
		if v, ok := of[c.Attrs.String("mode")]; ok {
			return v
		}
		return otherwise
	}}
}

// staticDim is dim i of t when it is static and positive, else 1.
func staticDim(t Type, i int) int {
	if i >= 0 && i < t.Shape.Rank() && t.Shape[i].IsStatic() && t.Shape[i].Size > 0 {
		return int(t.Shape[i].Size)
	}
	return 1
}

// lastDim is t's last dim when static, else 1.
func lastDim(t Type) int {
	if r := t.Shape.Rank(); r > 0 && t.Shape[r-1].IsStatic() {
		return int(t.Shape[r-1].Size)
	}
	return 1
}

// The sum lengths. Symbolic dims count as 1.
var (
	sumNone = always(1)
	// sumLastDim: matmul's inner dim, the normalized axis of a norm.
	sumLastDim = Rule[int]{Doc: "K = input 0's last dim", Of: func(c Call) int {
		if len(c.In) > 0 {
			return lastDim(c.In[0])
		}
		return 1
	}}
	sumSoftmax = Rule[int]{Doc: "K = the axis's size", Of: func(c Call) int {
		if len(c.In) == 0 || c.In[0].Shape.Rank() == 0 {
			return 1
		}
		if d := c.In[0].Shape[NormAxis(c.Attrs.Int("axis"), c.In[0].Shape.Rank())]; d.IsStatic() {
			return int(d.Size)
		}
		return 1
	}}
	// sumAttention: the head dim plus the keys a query reads (pos + S, the
	// most any query sees, or the window when it is shorter).
	sumAttention = Rule[int]{Doc: "K = Dh + min(pos + S, window)", Of: func(c Call) int {
		if len(c.In) > 0 && c.In[0].Shape.Rank() == 3 {
			keys := c.Pos + int(max(c.In[0].Shape[0].Size, 1))
			if w := int(c.Attrs.Int("window")); w > 0 {
				keys = min(keys, w)
			}
			return lastDim(c.In[0]) + keys
		}
		return 1
	}}
	// sumConv: w[O, C/groups, kh, kw].
	sumConv = Rule[int]{Doc: "K = C/groups·kh·kw", Of: func(c Call) int {
		if len(c.In) > 1 && c.In[1].Shape.Rank() == 4 {
			return staticDim(c.In[1], 1) * staticDim(c.In[1], 2) * staticDim(c.In[1], 3)
		}
		return 1
	}}
	// sumConvTranspose: the most kernel taps that land on one output:
	// taps i, i+sh', ... (sh' = sh/gcd(sh, dh)) hit the same one.
	sumConvTranspose = Rule[int]{Doc: "K = C/groups·⌈kh/sh'⌉·⌈kw/sw'⌉, sh' = sh/gcd(sh, dh)", Of: func(c Call) int {
		if len(c.In) < 2 || c.In[0].Shape.Rank() != 4 || c.In[1].Shape.Rank() != 4 {
			return 1
		}
		k := max(staticDim(c.In[0], 1)/int(max(c.Attrs.Int("groups"), 1)), 1)
		st, dl := c.Attrs.Ints("strides"), c.Attrs.Ints("dilations")
		for a := 0; a < 2; a++ {
			taps := staticDim(c.In[1], 2+a)
			if len(st) == 2 && len(dl) == 2 && st[a] > 0 && dl[a] > 0 {
				period := int(st[a] / gcd(st[a], dl[a]))
				taps = (taps + period - 1) / period
			}
			k *= taps
		}
		return k
	}}
	sumPool = Rule[int]{Doc: "avg: K = kh·kw; max: 1", Of: func(c Call) int {
		if kn := c.Attrs.Ints("kernel"); c.Attrs.String("mode") == "avg" && len(kn) == 2 && kn[0] > 0 && kn[1] > 0 {
			return int(kn[0] * kn[1])
		}
		return 1
	}}
	sumReduce = Rule[int]{Doc: "K = the product of the reduced dims", Of: func(c Call) int {
		if len(c.In) == 0 {
			return 1
		}
		k, r := 1, int64(c.In[0].Shape.Rank())
		for _, a := range c.Attrs.Ints("axes") {
			if a >= -r && a < r {
				k *= staticDim(c.In[0], NormAxis(a, int(r)))
			}
		}
		return k
	}}
	sumResize = byMode("linear: K = 4 neighbours; nearest: 1", map[string]int{"linear": 4}, 1)
)

// attentionTranscendentals: exp in the softmax, and tanh when scores are
// soft-capped.
var attentionTranscendentals = Rule[int]{Doc: "1 (exp), 2 with softcap (tanh)", Of: func(c Call) int {
	if c.Attrs.Float("softcap") > 0 {
		return 2
	}
	return 1
}}

func gcd(a, b int64) int64 {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// elements is the number of elements of every input and output of a call.
func elements(c Call) int64 {
	n := int64(0)
	for _, ts := range [][]Type{c.In, c.Out} {
		for _, t := range ts {
			if e := t.Shape.NumElements(); e > 0 {
				n += e
			}
		}
	}
	return n
}

// The costs.
var (
	costElements       = Rule[int64]{Doc: "elements in and out", Of: elements}
	costTranscendental = Rule[int64]{Doc: "16·elements in and out", Of: func(c Call) int64 { return 16 * elements(c) }}
	costMatmul         = Rule[int64]{Doc: "out·K", Of: func(c Call) int64 {
		if len(c.In) >= 2 && len(c.Out) == 1 && c.In[0].Shape.Rank() >= 2 {
			return c.Out[0].Shape.NumElements() * c.In[0].Shape[c.In[0].Shape.Rank()-1].Size
		}
		return elements(c)
	}}
	// costNormMatmul: the product's out·K and the norm's 2 passes over x.
	costNormMatmul = Rule[int64]{Doc: "out·K + 2·|x|", Of: func(c Call) int64 {
		if len(c.In) == 3 && len(c.Out) == 1 && c.In[0].Shape.Rank() >= 1 {
			return c.Out[0].Shape.NumElements()*int64(lastDim(c.In[0])) + 2*c.In[0].Shape.NumElements()
		}
		return elements(c)
	}}
	// costNormSwiGLU: two products of out·K each, the norm's 2 passes over
	// x, and a transcendental's 16 (costTranscendental) per output's silu.
	costNormSwiGLU = Rule[int64]{Doc: "2·out·K + 2·|x| + 16·out", Of: func(c Call) int64 {
		if len(c.In) == 4 && len(c.Out) == 1 && c.In[0].Shape.Rank() >= 1 {
			out := c.Out[0].Shape.NumElements()
			return 2*out*int64(lastDim(c.In[0])) + 2*c.In[0].Shape.NumElements() + 16*out
		}
		return elements(c)
	}}
	// costNormQKV: each product's out·K and the norm's 2 passes over x.
	costNormQKV = Rule[int64]{Doc: "Σ out·K + 2·|x|", Of: func(c Call) int64 {
		if len(c.In) == 5 && len(c.Out) == 3 && c.In[0].Shape.Rank() >= 1 {
			k := int64(lastDim(c.In[0]))
			return (c.Out[0].Shape.NumElements()+c.Out[1].Shape.NumElements()+c.Out[2].Shape.NumElements())*k +
				2*c.In[0].Shape.NumElements()
		}
		return elements(c)
	}}
	// costAttention: q·k and p·v over up to T rows for every (row, head).
	costAttention = Rule[int64]{Doc: "2·|q|·T", Of: func(c Call) int64 {
		if len(c.In) == 4 && c.In[1].Shape.Rank() > 0 {
			return 2 * c.In[0].Shape.NumElements() * c.In[1].Shape[0].Size
		}
		return elements(c)
	}}
	costConv = Rule[int64]{Doc: "out·|w|/O", Of: func(c Call) int64 {
		if len(c.In) >= 2 && len(c.Out) == 1 && c.In[1].Shape.Rank() > 0 {
			return c.Out[0].Shape.NumElements() * (c.In[1].Shape.NumElements() / max(1, c.In[1].Shape[0].Size))
		}
		return elements(c)
	}}
	costConvTranspose = Rule[int64]{Doc: "in·|w|/C", Of: func(c Call) int64 {
		if len(c.In) >= 2 && len(c.Out) == 1 && c.In[1].Shape.Rank() > 0 {
			return c.In[0].Shape.NumElements() * (c.In[1].Shape.NumElements() / max(1, c.In[1].Shape[0].Size))
		}
		return elements(c)
	}}
	costPool = Rule[int64]{Doc: "out·kh·kw", Of: func(c Call) int64 {
		if k := c.Attrs.Ints("kernel"); len(k) == 2 && len(c.Out) == 1 {
			return c.Out[0].Shape.NumElements() * k[0] * k[1]
		}
		return elements(c)
	}}
)

// fusedExpr is the parsed expression of a fused_elementwise call (nil when
// it does not parse; inference rejects such a node).
func fusedExpr(c Call) *Expr {
	e, err := ParseExpr(c.Attrs.String("expr"))
	if err != nil {
		return nil
	}
	return e
}

// countExpr counts the ops of e and how many of them satisfy pred.
func countExpr(e *Expr, pred func(Op) bool) (n, k int) {
	if e == nil || e.Op == OpNone {
		return 0, 0
	}
	n = 1
	if pred(e.Op) {
		k = 1
	}
	for _, a := range e.Args {
		an, ak := countExpr(a, pred)
		n, k = n+an, k+ak
	}
	return n, k
}

// The facts of fused_elementwise come from the ops of its expression.
var (
	fusedChainLength = Rule[int]{Doc: "ops of expr", Of: func(c Call) int {
		n, _ := countExpr(fusedExpr(c), func(Op) bool { return false })
		return max(n, 1)
	}}
	fusedTranscendentals = Rule[int]{Doc: "transcendental ops of expr", Of: func(c Call) int {
		_, t := countExpr(fusedExpr(c), func(op Op) bool { return LookupOp(op).Transcendentals.Of(Call{}) > 0 })
		return t
	}}
)

// The common sets of facts; rows copy one and change what differs.
var (
	// moveFacts: ops that move, select or convert elements.
	moveFacts = Facts{Effects: Pure, InPlace: NotInPlace, Routing: NotRouted, Compute: ComputeStored, Numerics: always(Exact),
		ChainLength: always(0), Transcendentals: always(0), SumLength: sumNone, Cost: costElements, Storage: noStorage}
	// elementwiseFacts: one elementwise op of f32 arithmetic.
	elementwiseFacts = Facts{Effects: Pure, InPlace: NotInPlace, Routing: NotRouted, Compute: ComputeF32, Numerics: always(Chain),
		ChainLength: always(1), Transcendentals: always(0), SumLength: sumNone, Cost: costElements, Storage: noStorage}
	// sumFacts: ops whose outputs sum SumLength terms.
	sumFacts = Facts{Effects: Pure, InPlace: NotInPlace, Routing: NotRouted, Compute: ComputeF32, Numerics: always(Sum),
		ChainLength: always(0), Transcendentals: always(0), SumLength: sumNone, Cost: costElements, Storage: noStorage}
)

// missingFacts names the facts d does not declare.
func (d *OpDef) missingFacts() []string {
	var m []string
	add := func(ok bool, name string) {
		if !ok {
			m = append(m, name)
		}
	}
	add(d.Effects != 0, "Effects")
	add(d.InPlace != 0, "InPlace")
	add(d.Routing != 0, "Routing")
	add(d.Compute != 0, "Compute")
	add(d.Numerics.declared(), "Numerics")
	add(d.ChainLength.declared(), "ChainLength")
	add(d.Transcendentals.declared(), "Transcendentals")
	add(d.SumLength.declared(), "SumLength")
	add(d.Cost.declared(), "Cost")
	add(d.Storage.declared(), "Storage")
	return m
}

// UpdatesInPlace reports whether n updates its input i in place (as
// output i: kv_write's cache), so that the input's value after the call is
// not the one the node read.
func (n *Node) UpdatesInPlace(i int) bool {
	d := n.Def()
	return d != nil && d.InPlace.Updates(i)
}

// OpsComputing returns the ops whose Compute is c, in name order (for
// messages that list what a dtype is accepted by).
func OpsComputing(c Compute) []Op {
	var ops []Op
	for _, d := range Ops() {
		if d.Compute == c {
			ops = append(ops, d.Op)
		}
	}
	return ops
}
