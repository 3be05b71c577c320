package carve

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/tapml/tapml/ir"
	"github.com/tapml/tapml/tensor"
)

// Case is one carved operator call: an op with its attributes, the values
// it read and the outputs the CPU reference computed from them. It is one
// entry of a bundle's manifest; in memory it also holds its tensors.
type Case struct {
	ID    string            `yaml:"id"`
	Op    string            `yaml:"op"`
	Kind  string            `yaml:"kind"`
	Attrs map[string]string `yaml:"attrs,omitempty"` // attribute values in text form (see EncodeAttrs)
	// Inputs and Outputs in the op's order. An input is a recorded tensor
	// or a module weight (stored once per bundle).
	Inputs  []Operand `yaml:"inputs"`
	Outputs []Operand `yaml:"outputs"`
	// Node is the id of the IR node the call ran, NodeText its line in the
	// compiled module's text form, Prov its provenance in the source model.
	Node     int    `yaml:"node"`
	NodeText string `yaml:"node_text"`
	Prov     string `yaml:"prov,omitempty"`
	// Func and Step say which call of the run it came from: step 0 is the
	// first call (prefill), step i the i-th after it (decode steps); Pos is
	// the position argument of that call (-1 when the function has none).
	Func string `yaml:"func"`
	Step int    `yaml:"step"`
	Pos  int    `yaml:"pos"`
	// Set is the input set of the run (see SetInfo; 0, left out, when
	// there was one).
	Set int `yaml:"set,omitempty"`
	// Key is the content key the case was deduplicated by; Seen counts the
	// calls of the run that had this key.
	Key       string    `yaml:"key"`
	Seen      int       `yaml:"seen"`
	Tolerance Tolerance `yaml:"tolerance"`
}

// Operand is one input or output of a case.
type Operand struct {
	Name   string `yaml:"name"` // the IR value it was (%7, %tokens, @norm)
	DType  string `yaml:"dtype"`
	Shape  []int  `yaml:"shape,flow"`
	Tensor string `yaml:"tensor,omitempty"` // name in tensors.safetensors
	Weight string `yaml:"weight,omitempty"` // name in weights.safetensors

	t *tensor.Tensor // the data, when in memory
}

// Type returns the operand's IR type.
func (o *Operand) Type() (ir.Type, error) {
	dt, err := ir.ParseDType(o.DType)
	if err != nil {
		return ir.Type{}, err
	}
	s := make(ir.Shape, len(o.Shape))
	for i, d := range o.Shape {
		if d < 0 {
			return ir.Type{}, fmt.Errorf("negative dim in shape %v", o.Shape)
		}
		s[i] = ir.D(int64(d))
	}
	return ir.T(dt, s), nil
}

// Name returns a short description of a case for messages and reports.
func (c *Case) String() string {
	s := c.ID + " " + c.Op
	if c.Prov != "" {
		s += " (" + c.Prov + ")"
	}
	return s
}

// EncodeAttrs writes attribute values in the text form the manifest keeps:
// strings raw, dtypes by name, other values as the IR text form prints them
// (floats with every digit, so they read back to the same bits).
func EncodeAttrs(a ir.Attrs) map[string]string {
	if len(a) == 0 {
		return nil
	}
	out := make(map[string]string, len(a))
	for k, v := range a {
		switch v.Kind {
		case ir.AttrString:
			out[k] = v.Str
		case ir.AttrFloat:
			out[k] = strconv.FormatFloat(v.Float, 'g', -1, 64)
		case ir.AttrFloats:
			parts := make([]string, len(v.Floats))
			for i, f := range v.Floats {
				parts[i] = strconv.FormatFloat(f, 'g', -1, 64)
			}
			out[k] = "[" + strings.Join(parts, ", ") + "]"
		default:
			out[k] = v.String()
		}
	}
	return out
}

// DecodeAttrs reads attribute text back into typed values, using the op's
// attribute schema for the kinds, and normalizes them (defaults filled in).
func DecodeAttrs(op string, text map[string]string) (ir.Attrs, error) {
	o, ok := ir.OpNamed(op)
	if !ok {
		return nil, fmt.Errorf("unknown op %q", op)
	}
	d := ir.LookupOp(o)
	a := ir.Attrs{}
	keys := make([]string, 0, len(text))
	for k := range text {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		spec := d.Attr(k)
		if spec == nil {
			return nil, fmt.Errorf("op %s has no attribute %q", op, k)
		}
		v, err := parseAttr(spec.Kind, text[k])
		if err != nil {
			return nil, fmt.Errorf("attribute %s: %v", k, err)
		}
		a[k] = v
	}
	return d.NormalizeAttrs(a)
}

func parseAttr(kind ir.AttrKind, s string) (ir.Attr, error) {
	bad := func(err error) (ir.Attr, error) {
		return ir.Attr{}, fmt.Errorf("%q is not a valid %s: %v", s, kind, err)
	}
	switch kind {
	case ir.AttrString:
		return ir.StringAttr(s), nil
	case ir.AttrInt:
		v, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
		if err != nil {
			return bad(err)
		}
		return ir.IntAttr(v), nil
	case ir.AttrFloat:
		v, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
		if err != nil {
			return bad(err)
		}
		return ir.FloatAttr(v), nil
	case ir.AttrBool:
		v, err := strconv.ParseBool(strings.TrimSpace(s))
		if err != nil {
			return bad(err)
		}
		return ir.BoolAttr(v), nil
	case ir.AttrDType:
		dt, err := ir.ParseDType(strings.TrimSpace(s))
		if err != nil {
			return bad(err)
		}
		return ir.DTypeAttr(dt), nil
	case ir.AttrInts, ir.AttrFloats, ir.AttrShape:
		items, err := splitList(s)
		if err != nil {
			return bad(err)
		}
		switch kind {
		case ir.AttrInts:
			v := make([]int64, len(items))
			for i, it := range items {
				if v[i], err = strconv.ParseInt(it, 10, 64); err != nil {
					return bad(err)
				}
			}
			return ir.IntsAttr(v...), nil
		case ir.AttrFloats:
			v := make([]float64, len(items))
			for i, it := range items {
				if v[i], err = strconv.ParseFloat(it, 64); err != nil {
					return bad(err)
				}
			}
			return ir.FloatsAttr(v...), nil
		default:
			sh := make(ir.Shape, len(items))
			for i, it := range items {
				if n, err := strconv.ParseInt(it, 10, 64); err == nil {
					sh[i] = ir.D(n)
				} else if ir.ValidSymbol(it) {
					sh[i] = ir.Sym(it)
				} else {
					return bad(fmt.Errorf("dim %q is neither a size nor a symbol", it))
				}
			}
			return ir.ShapeAttr(sh), nil
		}
	}
	return ir.Attr{}, fmt.Errorf("unsupported attribute kind %s", kind)
}

// splitList splits "[a, b, c]" into its trimmed items.
func splitList(s string) ([]string, error) {
	s = strings.TrimSpace(s)
	if !strings.HasPrefix(s, "[") || !strings.HasSuffix(s, "]") {
		return nil, fmt.Errorf("a list must be written [a, b, ...]")
	}
	s = strings.TrimSpace(s[1 : len(s)-1])
	if s == "" {
		return []string{}, nil
	}
	parts := strings.Split(s, ",")
	for i := range parts {
		parts[i] = strings.TrimSpace(parts[i])
		if parts[i] == "" {
			return nil, fmt.Errorf("empty list item")
		}
	}
	return parts, nil
}

// Fingerprint is the coarse summary of a tensor's values that content keys
// use, so that calls with the same shapes but values of a different nature
// (another order of magnitude, zeros, NaN) are kept as separate cases.
type Fingerprint struct {
	// Exp is the binary exponent of the largest finite magnitude (as
	// math.Frexp gives it: 2^(Exp-1) <= max|x| < 2^Exp); for an integer
	// scalar such as a position it buckets the value by powers of two.
	// Zero holds when every finite element is 0.
	Exp  int
	Zero bool
	// Zeros is the share of exact zeros in buckets: 0 none, 1 up to 10%,
	// 2 up to 50%, 3 more but not all, 4 all.
	Zeros    int
	NaN, Inf bool
}

// String writes the fingerprint compactly: "e3z0", "0z4", "e-2z1nan".
func (f Fingerprint) String() string {
	var b strings.Builder
	if f.Zero {
		b.WriteString("0")
	} else {
		fmt.Fprintf(&b, "e%d", f.Exp)
	}
	fmt.Fprintf(&b, "z%d", f.Zeros)
	if f.NaN {
		b.WriteString("nan")
	}
	if f.Inf {
		b.WriteString("inf")
	}
	return b.String()
}

// FingerprintOf summarizes t's values.
func FingerprintOf(t *tensor.Tensor) Fingerprint {
	if t.DType.IsBlock() {
		t = t.Convert(ir.F32) // a weight's values are its decoded ones
	}
	n := t.NumElements()
	var maxAbs float64
	zeros := 0
	var fp Fingerprint
	visit := func(v float64) {
		switch {
		case v != v:
			fp.NaN = true
		case math.IsInf(v, 0):
			fp.Inf = true
		default:
			if v == 0 {
				zeros++
			} else if a := math.Abs(v); a > maxAbs {
				maxAbs = a
			}
		}
	}
	switch t.DType {
	case ir.F32:
		// The hot path (every recorded tensor): no per-element call.
		var m float32
		for _, v := range t.Float32s() {
			a := v
			if a < 0 {
				a = -a
			}
			switch {
			case a == 0:
				zeros++
			case a > m && a <= math.MaxFloat32:
				m = a
			case a != a:
				fp.NaN = true
			case a > math.MaxFloat32:
				fp.Inf = true
			}
		}
		maxAbs = float64(m)
	case ir.I32:
		for _, v := range t.Int32s() {
			visit(float64(v))
		}
	default:
		for i := 0; i < n; i++ {
			visit(t.Float64At(i))
		}
	}
	if maxAbs == 0 {
		fp.Zero = true
	} else {
		_, fp.Exp = math.Frexp(maxAbs)
	}
	switch share := float64(zeros) / float64(max(n, 1)); {
	case zeros == 0:
		fp.Zeros = 0
	case share <= 0.1:
		fp.Zeros = 1
	case share <= 0.5:
		fp.Zeros = 2
	case zeros < n:
		fp.Zeros = 3
	default:
		fp.Zeros = 4
	}
	return fp
}

// ContentKey is the dedup key of an op call: the op, its attributes, each
// input's and output's dtype, shape and fingerprint, and for an op routed
// by ids (the registry's Routing: expert_matmul's expert ids) the set of
// ids the call uses, so that calls reading different experts' weights stay
// apart. Names (of values, weights, layers) are not part of it, so the
// same computation on every layer and every decode step shares one key
// unless its values differ in nature.
func ContentKey(op string, attrs ir.Attrs, in, out []*tensor.Tensor, fps func(*tensor.Tensor) Fingerprint) string {
	var b strings.Builder
	b.WriteString(op)
	if len(attrs) > 0 {
		enc := EncodeAttrs(attrs)
		b.WriteByte('{')
		for i, k := range attrs.Keys() {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(k + "=" + enc[k])
		}
		b.WriteByte('}')
	}
	list := func(ts []*tensor.Tensor) {
		b.WriteByte('(')
		for i, t := range ts {
			if i > 0 {
				b.WriteByte(' ')
			}
			fmt.Fprintf(&b, "%s%v:%s", t.DType, t.Shape, fps(t))
		}
		b.WriteByte(')')
	}
	list(in)
	b.WriteString("->")
	list(out)
	if o, ok := ir.OpNamed(op); ok {
		if i, ok := ir.LookupOp(o).Routing.Input(); ok && i < len(in) {
			fmt.Fprintf(&b, " routed%v", distinctInts(in[i]))
		}
	}
	return b.String()
}

// distinctInts returns the distinct values of an integer tensor, sorted.
func distinctInts(t *tensor.Tensor) []int64 {
	seen := map[int64]bool{}
	var out []int64
	for i := range t.NumElements() {
		if v := int64(t.Float64At(i)); !seen[v] {
			seen[v] = true
			out = append(out, v)
		}
	}
	slices.Sort(out)
	return out
}
