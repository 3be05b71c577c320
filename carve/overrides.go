package carve

import (
	"errors"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/parser"
	"github.com/goccy/go-yaml/token"
	"github.com/tapml/tapml/internal/safeio"
	"github.com/tapml/tapml/internal/yamlcheck"
	"github.com/tapml/tapml/ir"
)

// Overrides change the tolerances recorded in a bundle, from a YAML file
// (`tapmlc test --tolerances FILE`):
//
//	# Recompute every case's tolerance with other policy constants
//	# (the keys of Policy; those not given keep their defaults).
//	policy:
//	  contraction: 16
//	# Then apply these rules, in file order; a rule applies to the cases
//	# its selectors all match, and a later rule overrides an earlier one.
//	overrides:
//	  - op: softmax            # selectors: op (name), kind (elementwise,
//	    rtol: 1e-5             # reduction, contraction, data), case (id),
//	    atol: 1e-7             # key (content key), prov (regular expression
//	  - prov: '^layers\.3\.'   # searched in the provenance)
//	    scale: 4               # actions: atol, rtol (set), scale (multiply)
//	  - case: c0012
//	    atol: 0.01
//
// Errors name the file and line.
type Overrides struct {
	File   string
	Policy *Policy
	Rules  []Rule
}

// Rule is one entry of overrides.
type Rule struct {
	Line int
	// Selectors; empty ones match everything.
	Op, Kind, Case, Key string
	Prov                *regexp.Regexp
	// Actions; nil ones leave the tolerance as it is.
	ATol, RTol, Scale *float64
}

// Matches reports whether every selector of the rule matches c.
func (r *Rule) Matches(c *Case) bool {
	return (r.Op == "" || r.Op == c.Op) && (r.Kind == "" || r.Kind == c.Kind) &&
		(r.Case == "" || r.Case == c.ID) && (r.Key == "" || r.Key == c.Key) &&
		(r.Prov == nil || r.Prov.MatchString(c.Prov))
}

// Apply returns the tolerance of c after the rules that match it.
func (o *Overrides) Apply(c *Case, t Tolerance) Tolerance {
	if o == nil {
		return t
	}
	for i := range o.Rules {
		r := &o.Rules[i]
		if !r.Matches(c) {
			continue
		}
		var what []string
		if r.ATol != nil {
			t.ATol = *r.ATol
			what = append(what, fmt.Sprintf("atol %g", *r.ATol))
		}
		if r.RTol != nil {
			t.RTol = *r.RTol
			what = append(what, fmt.Sprintf("rtol %g", *r.RTol))
		}
		if r.Scale != nil {
			t.ATol *= *r.Scale
			t.RTol *= *r.Scale
			what = append(what, fmt.Sprintf("scale %g", *r.Scale))
		}
		t.Rule = fmt.Sprintf("%s:%d: %s (was: %s)", o.File, r.Line, strings.Join(what, ", "), t.Rule)
	}
	return t
}

// LoadOverrides reads an overrides file.
func LoadOverrides(path string) (*Overrides, error) {
	data, err := safeio.ReadFile(path, safeio.MaxConfig)
	if err != nil {
		return nil, err
	}
	return ParseOverrides(path, data)
}

// OverridesError is a problem at a line of an overrides file.
type OverridesError struct {
	File string
	Line int
	Msg  string
}

func (e *OverridesError) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Msg)
	}
	return fmt.Sprintf("%s: %s", e.File, e.Msg)
}

// ParseOverrides reads overrides from YAML text; file names it in errors.
func ParseOverrides(file string, data []byte) (*Overrides, error) {
	if err := yamlcheck.Check(file, data, safeio.MaxConfig); err != nil {
		return nil, err
	}
	fail := func(n ast.Node, format string, args ...any) error {
		return &OverridesError{File: file, Line: nodeLine(n), Msg: fmt.Sprintf(format, args...)}
	}
	f, err := safeParse(data)
	if err != nil {
		line := 1
		var ye interface {
			GetMessage() string
			GetToken() *token.Token
		}
		msg := err.Error()
		if errors.As(err, &ye) {
			msg = ye.GetMessage()
			if t := ye.GetToken(); t != nil && t.Position != nil {
				line = t.Position.Line
			}
		}
		return nil, &OverridesError{File: file, Line: line, Msg: "YAML syntax: " + msg}
	}
	o := &Overrides{File: file}
	var body ast.Node
	for _, d := range f.Docs {
		if d == nil || d.Body == nil {
			continue
		}
		if body != nil {
			return nil, fail(d.Body, "an overrides file holds one YAML document")
		}
		body = d.Body
	}
	if body == nil {
		return o, nil // empty: no overrides
	}
	top, ok := mapping(body)
	if !ok {
		return nil, fail(body, "expected a mapping with 'policy' and/or 'overrides'")
	}
	for _, kv := range top {
		switch key := scalar(kv.Key); key {
		case "policy":
			p, err := parsePolicy(file, kv.Value)
			if err != nil {
				return nil, err
			}
			o.Policy = p
		case "overrides":
			if _, null := kv.Value.(*ast.NullNode); null {
				continue
			}
			seq, ok := kv.Value.(*ast.SequenceNode)
			if !ok {
				return nil, fail(kv.Value, "'overrides' must be a list of rules")
			}
			for _, item := range seq.Values {
				r, err := parseRule(file, item)
				if err != nil {
					return nil, err
				}
				o.Rules = append(o.Rules, r)
			}
		default:
			return nil, fail(kv.Key, "unknown key %q (expected policy or overrides)", key)
		}
	}
	return o, nil
}

// safeParse parses YAML, turning a panic of the YAML library on malformed
// input into an error.
func safeParse(data []byte) (f *ast.File, err error) {
	defer func() {
		if r := recover(); r != nil {
			f, err = nil, fmt.Errorf("malformed YAML (%v)", r)
		}
	}()
	return parser.ParseBytes(data, 0)
}

func parsePolicy(file string, n ast.Node) (*Policy, error) {
	fail := func(n ast.Node, format string, args ...any) error {
		return &OverridesError{File: file, Line: nodeLine(n), Msg: fmt.Sprintf(format, args...)}
	}
	kvs, ok := mapping(n)
	if !ok {
		return nil, fail(n, "'policy' must be a mapping of constants (elementwise, transcendental, reduction, contraction)")
	}
	p := DefaultPolicy()
	fields := map[string]*float64{
		"elementwise": &p.Elementwise, "transcendental": &p.Transcendental,
		"reduction": &p.Reduction, "contraction": &p.Contraction,
	}
	for _, kv := range kvs {
		key := scalar(kv.Key)
		dst := fields[key]
		if dst == nil {
			return nil, fail(kv.Key, "unknown policy constant %q (known: contraction, elementwise, reduction, transcendental)", key)
		}
		v, err := number(kv.Value)
		if err != nil {
			return nil, fail(kv.Value, "policy %s: %v", key, err)
		}
		if v < 0 || v > maxFactor {
			return nil, fail(kv.Value, "policy %s must be between 0 and %g, got %g", key, maxFactor, v)
		}
		*dst = v
	}
	return &p, nil
}

func parseRule(file string, item ast.Node) (Rule, error) {
	fail := func(n ast.Node, format string, args ...any) error {
		return &OverridesError{File: file, Line: nodeLine(n), Msg: fmt.Sprintf(format, args...)}
	}
	kvs, ok := mapping(item)
	if !ok {
		return Rule{}, fail(item, "a rule is a mapping of selectors (op, kind, case, key, prov) and actions (atol, rtol, scale)")
	}
	r := Rule{Line: nodeLine(item)}
	seen := map[string]bool{}
	selectors, actions := 0, 0
	for _, kv := range kvs {
		key := scalar(kv.Key)
		if seen[key] {
			return Rule{}, fail(kv.Key, "%q given twice in one rule", key)
		}
		seen[key] = true
		switch key {
		case "op", "kind", "case", "key", "prov":
			s, ok := kv.Value.(*ast.StringNode)
			if !ok {
				return Rule{}, fail(kv.Value, "%s must be a string", key)
			}
			selectors++
			switch key {
			case "op":
				if _, ok := ir.OpNamed(s.Value); !ok {
					return Rule{}, fail(kv.Value, "unknown op %q", s.Value)
				}
				r.Op = s.Value
			case "kind":
				if !knownKind(s.Value) {
					return Rule{}, fail(kv.Value, "unknown op kind %q (kinds: contraction, data, elementwise, meta, reduction)", s.Value)
				}
				r.Kind = s.Value
			case "case":
				r.Case = s.Value
			case "key":
				r.Key = s.Value
			case "prov":
				re, err := regexp.Compile(s.Value)
				if err != nil {
					return Rule{}, fail(kv.Value, "prov: bad regular expression: %v", err)
				}
				r.Prov = re
			}
		case "atol", "rtol", "scale":
			v, err := number(kv.Value)
			if err != nil {
				return Rule{}, fail(kv.Value, "%s: %v", key, err)
			}
			if v < 0 || v > maxFactor {
				return Rule{}, fail(kv.Value, "%s must be between 0 and %g, got %g", key, maxFactor, v)
			}
			actions++
			switch key {
			case "atol":
				r.ATol = &v
			case "rtol":
				r.RTol = &v
			case "scale":
				r.Scale = &v
			}
		default:
			return Rule{}, fail(kv.Key, "unknown key %q in a rule (selectors: op, kind, case, key, prov; actions: atol, rtol, scale)", key)
		}
	}
	if selectors == 0 {
		return Rule{}, fail(item, "the rule has no selector (op, kind, case, key or prov); use policy to change every case")
	}
	if actions == 0 {
		return Rule{}, fail(item, "the rule has no action (atol, rtol or scale)")
	}
	return r, nil
}

// maxFactor bounds tolerances, scales and policy constants: large enough
// for any real use, small enough that products of them stay finite.
const maxFactor = 1e12

func knownKind(k string) bool {
	for _, d := range ir.Ops() {
		if string(d.Kind) == k {
			return true
		}
	}
	return false
}

func mapping(n ast.Node) ([]*ast.MappingValueNode, bool) {
	switch m := n.(type) {
	case *ast.MappingNode:
		return m.Values, true
	case *ast.MappingValueNode:
		return []*ast.MappingValueNode{m}, true
	}
	return nil, false
}

func scalar(n ast.Node) string {
	if s, ok := n.(*ast.StringNode); ok {
		return s.Value
	}
	if n == nil {
		return ""
	}
	return n.String()
}

// number decodes a finite number (ints, and strings such as 1e-3 that
// the YAML library leaves as strings, accepted).
func number(n ast.Node) (float64, error) {
	var v float64
	switch x := n.(type) {
	case *ast.IntegerNode, *ast.FloatNode:
		if err := yaml.NodeToValue(n, &v); err != nil {
			return 0, err
		}
	case *ast.StringNode:
		f, err := strconv.ParseFloat(strings.TrimSpace(x.Value), 64)
		if err != nil {
			return 0, fmt.Errorf("must be a number, got %q", x.Value)
		}
		v = f
	default:
		return 0, fmt.Errorf("must be a number, got %q", strings.TrimSpace(n.String()))
	}
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, fmt.Errorf("must be finite")
	}
	return v, nil
}

func nodeLine(n ast.Node) int {
	if n == nil {
		return 0
	}
	if mv, ok := n.(*ast.MappingValueNode); ok && mv.Key != nil {
		n = mv.Key
	}
	if m, ok := n.(*ast.MappingNode); ok && len(m.Values) > 0 {
		return nodeLine(m.Values[0])
	}
	if t := n.GetToken(); t != nil && t.Position != nil {
		return t.Position.Line
	}
	return 0
}
