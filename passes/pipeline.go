package passes

import (
	_ "embed"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/parser"
	"github.com/goccy/go-yaml/token"
	"github.com/tapml/tapml/internal/safeio"
	"github.com/tapml/tapml/internal/yamlcheck"
)

// DefaultFile is the name errors give the embedded default pipeline.
const DefaultFile = "passes/default.yaml"

//go:embed default.yaml
var defaultYAML []byte

// DefaultYAML returns the text of the default pipeline.
func DefaultYAML() []byte { return append([]byte(nil), defaultYAML...) }

// Error is a problem in a pipeline description, at a line of its YAML file
// (Line 0 when the step was added by a program rather than read).
type Error struct {
	File string
	Line int
	Msg  string
}

func (e *Error) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Msg)
	}
	return fmt.Sprintf("%s: %s", e.File, e.Msg)
}

// Step is one pass of a pipeline with the options the pipeline sets (the
// runner adds defaults for the others).
type Step struct {
	Pass    *Pass
	Options Options
	Line    int // the step's line in the YAML file; 0 when added by a program
}

// Pipeline is an ordered list of passes.
type Pipeline struct {
	File  string // where it was read from, for messages
	Steps []*Step
}

// Default returns the default pipeline (default.yaml).
func Default() (*Pipeline, error) { return Parse(DefaultFile, defaultYAML) }

// Load reads a pipeline from a YAML file.
func Load(path string) (*Pipeline, error) {
	data, err := safeio.ReadFile(path, safeio.MaxConfig)
	if err != nil {
		return nil, fmt.Errorf("pipeline: %w", err)
	}
	return Parse(path, data)
}

// Parse reads a pipeline from YAML text; file names it in errors. The
// pipeline must be a mapping with one key, passes: a list whose items are a
// pass name or a one-key mapping from a pass name to its options:
//
//	passes:
//	  - shape_inference
//	  - fusion:
//	      max_inputs: 4
//
// Unknown passes, unknown or badly typed options and an order that breaks a
// pass's requirements are each reported as one *Error with the line.
func Parse(file string, data []byte) (*Pipeline, error) {
	p, err := parseUnchecked(file, data)
	if err != nil {
		return nil, err
	}
	if err := p.Check(); err != nil {
		return nil, err
	}
	return p, nil
}

// parseUnchecked parses a pipeline without checking the order of its passes.
func parseUnchecked(file string, data []byte) (*Pipeline, error) {
	if err := yamlcheck.Check(file, data, safeio.MaxConfig); err != nil {
		return nil, err
	}
	f, err := parser.ParseBytes(data, 0)
	if err != nil {
		return nil, syntaxError(file, err)
	}
	p := &Pipeline{File: file}
	fail := func(n ast.Node, format string, args ...any) error {
		return &Error{File: file, Line: line(n), Msg: fmt.Sprintf(format, args...)}
	}
	var body ast.Node
	for _, d := range f.Docs {
		if d == nil || d.Body == nil {
			continue
		}
		if body != nil {
			return nil, fail(d.Body, "a pipeline file holds one YAML document")
		}
		body = d.Body
	}
	if body == nil {
		return nil, &Error{File: file, Line: 1, Msg: "empty pipeline: expected a mapping with a 'passes' list"}
	}
	top, err := mappingValues(body)
	if err != nil {
		return nil, fail(body, "the pipeline must be a mapping with a 'passes' list: %v", err)
	}
	var list ast.Node
	for _, kv := range top {
		switch key := kv.Key.String(); key {
		case "passes":
			if list != nil {
				return nil, fail(kv.Key, "'passes' given twice")
			}
			list = kv.Value
		default:
			return nil, fail(kv.Key, "unknown key %q at the top of the pipeline (expected 'passes')", key)
		}
	}
	if list == nil {
		return nil, fail(body, "the pipeline has no 'passes' list")
	}
	if _, isNull := list.(*ast.NullNode); !isNull {
		seq, ok := list.(*ast.SequenceNode)
		if !ok {
			return nil, fail(list, "'passes' must be a list, got %s", nodeKind(list))
		}
		for _, item := range seq.Values {
			st, err := parseStep(file, item)
			if err != nil {
				return nil, err
			}
			p.Steps = append(p.Steps, st)
		}
	}
	return p, nil
}

func syntaxError(file string, err error) error {
	msg := err.Error()
	ln := 1
	var ye interface {
		GetMessage() string
		GetToken() *token.Token
	}
	if errors.As(err, &ye) {
		msg = ye.GetMessage()
		if t := ye.GetToken(); t != nil && t.Position != nil && t.Position.Line > 0 {
			ln = t.Position.Line
		}
	}
	return &Error{File: file, Line: ln, Msg: "YAML syntax: " + msg}
}

// line returns the line of a node's first token.
func line(n ast.Node) int {
	if n == nil {
		return 0
	}
	if mv, ok := n.(*ast.MappingValueNode); ok && mv.Key != nil {
		n = mv.Key
	}
	if m, ok := n.(*ast.MappingNode); ok && len(m.Values) > 0 {
		return line(m.Values[0])
	}
	if t := n.GetToken(); t != nil && t.Position != nil {
		return t.Position.Line
	}
	return 0
}

func nodeKind(n ast.Node) string {
	switch n.(type) {
	case *ast.MappingNode, *ast.MappingValueNode:
		return "a mapping"
	case *ast.SequenceNode:
		return "a list"
	case *ast.NullNode:
		return "nothing"
	case *ast.StringNode, *ast.LiteralNode:
		return "a string"
	case *ast.IntegerNode:
		return "an int"
	case *ast.FloatNode, *ast.InfinityNode, *ast.NanNode:
		return "a number"
	case *ast.BoolNode:
		return "a bool"
	case *ast.AnchorNode, *ast.AliasNode:
		return "an anchor or alias (not supported in pipelines)"
	case *ast.TagNode:
		return "a tagged value (not supported in pipelines)"
	}
	return n.Type().String()
}

// mappingValues returns the key-value pairs of a mapping node.
func mappingValues(n ast.Node) ([]*ast.MappingValueNode, error) {
	switch m := n.(type) {
	case *ast.MappingNode:
		return m.Values, nil
	case *ast.MappingValueNode:
		return []*ast.MappingValueNode{m}, nil
	}
	return nil, fmt.Errorf("got %s", nodeKind(n))
}

func parseStep(file string, item ast.Node) (*Step, error) {
	fail := func(n ast.Node, format string, args ...any) error {
		return &Error{File: file, Line: line(n), Msg: fmt.Sprintf(format, args...)}
	}
	var nameNode, optsNode ast.Node
	switch it := item.(type) {
	case *ast.StringNode:
		nameNode = it
	case *ast.MappingNode, *ast.MappingValueNode:
		kvs, _ := mappingValues(it)
		if len(kvs) != 1 {
			return nil, fail(it, "a pass with options is a mapping with one key, the pass name (found %d keys)", len(kvs))
		}
		nameNode, optsNode = kvs[0].Key, kvs[0].Value
	default:
		return nil, fail(item, "a pass is a name or a mapping from a name to options, got %s", nodeKind(item))
	}
	name := scalarString(nameNode)
	pass := Lookup(name)
	if pass == nil {
		msg := fmt.Sprintf("unknown pass %q", clip(name))
		if s := suggest(clip(name), registryNames()); s != "" {
			msg += fmt.Sprintf(" (did you mean %q?)", s)
		}
		return nil, fail(nameNode, "%s; passes: %s", msg, passNames())
	}
	st := &Step{Pass: pass, Options: Options{}, Line: line(nameNode)}
	if optsNode == nil {
		return st, nil
	}
	if _, isNull := optsNode.(*ast.NullNode); isNull {
		return st, nil
	}
	kvs, err := mappingValues(optsNode)
	if err != nil {
		return nil, fail(optsNode, "the options of pass %s must be a mapping, %v", name, err)
	}
	for _, kv := range kvs {
		key := scalarString(kv.Key)
		spec := pass.Option(key)
		if spec == nil {
			msg := fmt.Sprintf("pass %s has no option %q", name, key)
			names := make([]string, len(pass.Options))
			for i, o := range pass.Options {
				names[i] = o.Name
			}
			if s := suggest(key, names); s != "" {
				msg += fmt.Sprintf(" (did you mean %q?)", s)
			}
			return nil, fail(kv.Key, "%s; its options: %s", msg, pass.optionNames())
		}
		if _, dup := st.Options[key]; dup {
			return nil, fail(kv.Key, "option %q of pass %s given twice", key, name)
		}
		if spec.Kind == OptFunc {
			return nil, fail(kv.Key, "option %q of pass %s is set by the program (%s), not by YAML", key, name, spec.Doc)
		}
		raw, badNode, err := decodeValue(spec.Kind, kv.Value)
		if err != nil {
			if badNode == nil {
				badNode = kv.Value
			}
			return nil, fail(badNode, "pass %s: option %q: %v", name, key, err)
		}
		v, err := spec.validate(raw)
		if err != nil {
			return nil, fail(kv.Value, "pass %s: %v", name, err)
		}
		st.Options[key] = v
	}
	return st, nil
}

func scalarString(n ast.Node) string {
	switch s := n.(type) {
	case *ast.StringNode:
		return s.Value
	case nil:
		return ""
	}
	return n.String()
}

// decodeValue converts a YAML value to the Go type of an option kind. On a
// type error it returns the offending node (a list element, say).
func decodeValue(kind OptionKind, n ast.Node) (any, ast.Node, error) {
	scalar := func(n ast.Node) (any, error) {
		switch s := n.(type) {
		case *ast.BoolNode:
			return s.Value, nil
		case *ast.IntegerNode:
			switch v := s.Value.(type) {
			case int64:
				return v, nil
			case uint64:
				if v > math.MaxInt64 {
					return nil, fmt.Errorf("integer %d is out of range", v)
				}
				return int64(v), nil
			}
			return nil, fmt.Errorf("bad integer %s", s.String())
		case *ast.FloatNode:
			return s.Value, nil
		case *ast.InfinityNode:
			return s.Value, nil
		case *ast.NanNode:
			return nil, fmt.Errorf("NaN is not a valid option value")
		case *ast.StringNode:
			return s.Value, nil
		case *ast.LiteralNode:
			return s.Value.Value, nil
		}
		return nil, fmt.Errorf("expected a %s, got %s", kind, nodeKind(n))
	}
	switch kind {
	case OptStrings, OptInts:
		if _, ok := n.(*ast.NullNode); ok {
			if kind == OptStrings {
				return []string{}, nil, nil
			}
			return []int64{}, nil, nil
		}
		seq, ok := n.(*ast.SequenceNode)
		if !ok {
			return nil, n, fmt.Errorf("expected a %s, got %s", kind, nodeKind(n))
		}
		var strs []string
		var ints []int64
		for _, el := range seq.Values {
			v, err := scalar(el)
			if err != nil {
				return nil, el, err
			}
			switch x := v.(type) {
			case string:
				if kind != OptStrings {
					return nil, el, fmt.Errorf("expected a %s, but an element is the string %q", kind, x)
				}
				strs = append(strs, x)
			case int64:
				if kind != OptInts {
					return nil, el, fmt.Errorf("expected a %s, but an element is the int %d", kind, x)
				}
				ints = append(ints, x)
			default:
				return nil, el, fmt.Errorf("expected a %s, but an element is %s", kind, describe(v))
			}
		}
		if kind == OptStrings {
			if strs == nil {
				strs = []string{}
			}
			return strs, nil, nil
		}
		if ints == nil {
			ints = []int64{}
		}
		return ints, nil, nil
	}
	v, err := scalar(n)
	if err != nil {
		return nil, n, err
	}
	return v, nil, nil
}

// Check verifies the order of the pipeline: every pass's Requires must be
// provided by an earlier pass and not invalidated since, and a KeepToEnd
// property may not be invalidated once provided.
func (p *Pipeline) Check() error {
	have := map[string]*Step{}        // property -> step that provided it
	invalidated := map[string]*Step{} // property -> step that last invalidated it
	broken := map[string][2]*Step{}   // KeepToEnd property -> {invalidating step, provider}
	for i, st := range p.Steps {
		where := p.where(i)
		for _, r := range st.Pass.Requires {
			if have[r] != nil {
				continue
			}
			prop := LookupProperty(r)
			doc := r
			if prop != nil {
				doc = fmt.Sprintf("%q (%s)", r, prop.Doc)
			}
			var providers []string
			for _, q := range registry {
				for _, pr := range q.Provides {
					if pr == r {
						providers = append(providers, q.Name)
					}
				}
			}
			if inv := invalidated[r]; inv != nil {
				return &Error{File: p.File, Line: st.Line, Msg: fmt.Sprintf("pass %s%s requires %s, which %s invalidated; run %s again after %s",
					st.Pass.Name, where, doc, p.stepName(inv), strings.Join(providers, " or "), inv.Pass.Name)}
			}
			return &Error{File: p.File, Line: st.Line, Msg: fmt.Sprintf("pass %s%s requires %s, which no earlier pass provides; put %s before it",
				st.Pass.Name, where, doc, strings.Join(providers, " or "))}
		}
		for _, inv := range st.Pass.Invalidates {
			if prov := have[inv]; prov != nil {
				delete(have, inv)
				invalidated[inv] = st
				if prop := LookupProperty(inv); prop != nil && prop.KeepToEnd {
					broken[inv] = [2]*Step{st, prov}
				}
			}
		}
		for _, pr := range st.Pass.Provides {
			have[pr] = st
			delete(invalidated, pr)
			delete(broken, pr)
		}
	}
	// A KeepToEnd property that some pass provided must hold at the end.
	for _, prop := range Properties {
		if b, ok := broken[prop.Name]; ok {
			st, prov := b[0], b[1]
			return &Error{File: p.File, Line: st.Line, Msg: fmt.Sprintf("pass %s%s may invalidate %q (%s), established by %s; move %s after it or run it again at the end",
				st.Pass.Name, p.where(slices.Index(p.Steps, st)), prop.Name, prop.Doc, p.stepName(prov), prov.Pass.Name)}
		}
	}
	return nil
}

// where describes step i for messages that carry no line of their own.
func (p *Pipeline) where(i int) string {
	if p.Steps[i].Line > 0 {
		return ""
	}
	return fmt.Sprintf(" (step %d, added by the program)", i+1)
}

func (p *Pipeline) stepName(st *Step) string {
	if st.Line > 0 {
		return fmt.Sprintf("%s at line %d", st.Pass.Name, st.Line)
	}
	return st.Pass.Name + " (added by the program)"
}

// Has reports whether the pipeline runs the named pass.
func (p *Pipeline) Has(name string) bool {
	for _, st := range p.Steps {
		if st.Pass.Name == name {
			return true
		}
	}
	return false
}

// Append adds a pass at the end (or, with before set and present in the
// pipeline, just before its first occurrence) and checks the order again.
func (p *Pipeline) Append(name string, opts Options, before string) error {
	pass := Lookup(name)
	if pass == nil {
		return &Error{File: p.File, Msg: fmt.Sprintf("unknown pass %q; passes: %s", clip(name), passNames())}
	}
	st := &Step{Pass: pass, Options: Options{}}
	for k, v := range opts {
		spec := pass.Option(k)
		if spec == nil {
			return &Error{File: p.File, Msg: fmt.Sprintf("pass %s has no option %q; its options: %s", name, k, pass.optionNames())}
		}
		nv, err := spec.validate(v)
		if err != nil {
			return &Error{File: p.File, Msg: fmt.Sprintf("pass %s: %v", name, err)}
		}
		st.Options[k] = nv
	}
	at := len(p.Steps)
	for i, s := range p.Steps {
		if before != "" && s.Pass.Name == before {
			at = i
			break
		}
	}
	steps := append([]*Step{}, p.Steps[:at]...)
	steps = append(steps, st)
	steps = append(steps, p.Steps[at:]...)
	old := p.Steps
	p.Steps = steps
	if err := p.Check(); err != nil {
		p.Steps = old
		return err
	}
	return nil
}

// Set sets an option of every step of the named pass (a program sets the
// options YAML cannot, such as legalize's supports). It is an error when
// the pipeline does not run the pass.
func (p *Pipeline) Set(passName, option string, v any) error {
	pass := Lookup(passName)
	if pass == nil {
		return fmt.Errorf("unknown pass %q", passName)
	}
	spec := pass.Option(option)
	if spec == nil {
		return fmt.Errorf("pass %s has no option %q; its options: %s", passName, option, pass.optionNames())
	}
	nv, err := spec.validate(v)
	if err != nil {
		return fmt.Errorf("pass %s: %w", passName, err)
	}
	found := false
	for _, st := range p.Steps {
		if st.Pass == pass {
			st.Options[option] = nv
			found = true
		}
	}
	if !found {
		return fmt.Errorf("pipeline %s does not run pass %s", p.File, passName)
	}
	return nil
}

// StepInfo describes a step for manifests: the pass name and the options
// the pipeline set (functions shown as "<set by program>").
type StepInfo struct {
	Name    string         `yaml:"name"`
	Options map[string]any `yaml:"options,omitempty"`
}

// Summary lists the steps with their options.
func (p *Pipeline) Summary() []StepInfo {
	out := make([]StepInfo, len(p.Steps))
	for i, st := range p.Steps {
		out[i].Name = st.Pass.Name
		for k, v := range st.Options {
			if out[i].Options == nil {
				out[i].Options = map[string]any{}
			}
			if spec := st.Pass.Option(k); spec != nil && spec.Kind == OptFunc {
				v = "<set by program>"
			}
			out[i].Options[k] = v
		}
	}
	return out
}

func registryNames() []string {
	names := make([]string, len(registry))
	for i, p := range registry {
		names[i] = p.Name
	}
	return names
}

// suggest returns the candidate closest to s by edit distance, when close.
func suggest(s string, candidates []string) string {
	best, bestD := "", 1<<30
	for _, c := range candidates {
		if d := editDistance(s, c); d < bestD {
			best, bestD = c, d
		}
	}
	if bestD <= max(2, len(s)/3) {
		return best
	}
	return ""
}

func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// clip shortens a name from a file for messages: a 10 MB pass name is not
// echoed whole.
func clip(s string) string {
	const max = 80
	if len(s) <= max {
		return s
	}
	return s[:max] + fmt.Sprintf("... (%d bytes)", len(s))
}
