package ir

import (
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
)

// The text form:
//
//	module "stories260K" {
//	  meta "arch" = "llama"
//	  weight @tok_embeddings : f32[512, 64]
//	  func @decode(%tokens: i32[1], %pos: i32[]) -> (%9) {
//	    %0 = gather(@tok_embeddings, %tokens) {axis = 0} : f32[1, 64] #1 loc("tok_embeddings")
//	    ...
//	    return %9
//	  }
//	}
//
// A node line is: outputs = op(inputs) {attributes} : output types #id
// [loc("provenance")] [on(source|target)]. Node ids are positive and unique
// in the module. Names of values, weights and functions are [A-Za-z0-9_.-]+
// or a Go quoted string; a function's results may be values or weights.
// Symbolic dims are identifiers ([A-Za-z_][A-Za-z0-9_.]*, not inf or nan).
// Attribute values: ints, floats (always with '.', 'e', inf or nan),
// "strings", true/false, dtypes (f32), lists [1, 2] and shapes [seq, 8]
// (an empty list [] is read as ints, which a floats or shape attribute
// accepts). Comments start with // and run to the end of the line.

// Print writes the text form of m.
func Print(w io.Writer, m *Module) error {
	_, err := io.WriteString(w, Text(m))
	return err
}

// Text returns the text form of m.
func Text(m *Module) string {
	var b strings.Builder
	fmt.Fprintf(&b, "module %s {\n", strconv.Quote(m.Name))
	for _, k := range m.MetaKeys() {
		fmt.Fprintf(&b, "  meta %s = %s\n", strconv.Quote(k), strconv.Quote(m.Meta[k]))
	}
	for _, w := range m.Weights {
		if w == nil {
			b.WriteString("  // nil weight\n")
			continue
		}
		fmt.Fprintf(&b, "  weight @%s : %s\n", quoteIdent(w.Name), w.Type)
	}
	for _, f := range m.Funcs {
		if f == nil {
			b.WriteString("  // nil func\n")
			continue
		}
		writeFunc(&b, f)
	}
	b.WriteString("}\n")
	return b.String()
}

// FuncText returns the text form of one function.
func FuncText(f *Function) string {
	var b strings.Builder
	writeFunc(&b, f)
	return b.String()
}

func writeFunc(b *strings.Builder, f *Function) {
	params := make([]string, len(f.Params))
	for i, p := range f.Params {
		params[i] = p.Ref()
		if p != nil {
			params[i] += ": " + p.Type.String()
		}
	}
	results := make([]string, len(f.Results))
	for i, r := range f.Results {
		results[i] = r.Ref()
	}
	fmt.Fprintf(b, "  func @%s(%s) -> (%s) {\n", quoteIdent(f.Name), strings.Join(params, ", "), strings.Join(results, ", "))
	for _, n := range f.Nodes {
		b.WriteString("    ")
		b.WriteString(NodeText(n))
		b.WriteByte('\n')
	}
	fmt.Fprintf(b, "    return %s\n  }\n", strings.Join(results, ", "))
}

// NodeText returns the one-line text form of a node. Broken nodes (nil
// values, for example) print too, though not in a form Parse reads.
func NodeText(n *Node) string {
	if n == nil {
		return "// nil node"
	}
	var b strings.Builder
	outs := make([]string, len(n.Outputs))
	types := make([]string, len(n.Outputs))
	for i, o := range n.Outputs {
		outs[i] = o.Ref()
		types[i] = "<nil>"
		if o != nil {
			types[i] = o.Type.String()
		}
	}
	ins := make([]string, len(n.Inputs))
	for i, in := range n.Inputs {
		ins[i] = in.Ref()
	}
	fmt.Fprintf(&b, "%s = %s(%s)", strings.Join(outs, ", "), n.Op, strings.Join(ins, ", "))
	if len(n.Attrs) > 0 {
		b.WriteString(" " + formatAttrs(n.Attrs))
	}
	fmt.Fprintf(&b, " : %s #%d", strings.Join(types, ", "), n.ID)
	if n.Prov != "" {
		fmt.Fprintf(&b, " loc(%s)", strconv.Quote(n.Prov))
	}
	if n.Place != "" {
		fmt.Fprintf(&b, " on(%s)", n.Place)
	}
	return b.String()
}

func formatAttrs(a Attrs) string {
	parts := make([]string, 0, len(a))
	for _, k := range a.Keys() {
		parts = append(parts, quoteIdent(k)+" = "+a[k].String())
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

// String returns the attribute value in the text form's syntax.
func (a Attr) String() string {
	switch a.Kind {
	case AttrInt:
		return strconv.FormatInt(a.Int, 10)
	case AttrFloat:
		return formatFloat(a.Float)
	case AttrString:
		return strconv.Quote(a.Str)
	case AttrBool:
		return strconv.FormatBool(a.Bool)
	case AttrInts:
		parts := make([]string, len(a.Ints))
		for i, v := range a.Ints {
			parts[i] = strconv.FormatInt(v, 10)
		}
		return "[" + strings.Join(parts, ", ") + "]"
	case AttrFloats:
		parts := make([]string, len(a.Floats))
		for i, v := range a.Floats {
			parts[i] = formatFloat(v)
		}
		return "[" + strings.Join(parts, ", ") + "]"
	case AttrShape:
		return a.Shape.String()
	case AttrDType:
		return a.DType.String()
	}
	return "?"
}

// formatFloat prints a float so that it parses back to the same bits and is
// never mistaken for an int.
func formatFloat(v float64) string {
	switch {
	case math.IsNaN(v):
		return "nan"
	case math.IsInf(v, 1):
		return "inf"
	case math.IsInf(v, -1):
		return "-inf"
	}
	s := strconv.FormatFloat(v, 'g', -1, 64)
	if !strings.ContainsAny(s, ".eE") {
		s += ".0"
	}
	return s
}

func isIdentByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '.' || c == '-'
}

// quoteIdent returns name bare when it is a plain identifier, else quoted.
func quoteIdent(name string) string {
	if name == "" {
		return `""`
	}
	for i := 0; i < len(name); i++ {
		if !isIdentByte(name[i]) {
			return strconv.Quote(name)
		}
	}
	return name
}
