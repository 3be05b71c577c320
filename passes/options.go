package passes

import (
	"fmt"
	"slices"
	"strings"
)

// OptionKind is the type of a pass option.
type OptionKind uint8

const (
	OptBool    OptionKind = iota + 1 // bool
	OptInt                           // int64
	OptFloat                         // float64
	OptString                        // string
	OptStrings                       // []string
	OptInts                          // []int64
	OptFunc                          // a Go value the program sets (e.g. func(ir.Op) bool); not settable from YAML
)

var optionKindNames = map[OptionKind]string{
	OptBool: "bool", OptInt: "int", OptFloat: "float", OptString: "string",
	OptStrings: "list of strings", OptInts: "list of ints", OptFunc: "function",
}

func (k OptionKind) String() string {
	if s, ok := optionKindNames[k]; ok {
		return s
	}
	return fmt.Sprintf("optionkind(%d)", uint8(k))
}

// OptionSpec describes one option of a pass. A nil Default means the
// option's zero value (false, 0, "", an empty list, a nil function).
type OptionSpec struct {
	Name    string
	Kind    OptionKind
	Default any
	Doc     string
	Enum    []string          // for OptString: the allowed values, when set
	Check   func(v any) error // extra validation, run when the option is set
}

// zero returns the option's default value in its Go type.
func (s *OptionSpec) zero() any {
	if s.Default != nil {
		return s.Default
	}
	switch s.Kind {
	case OptBool:
		return false
	case OptInt:
		return int64(0)
	case OptFloat:
		return float64(0)
	case OptString:
		return ""
	case OptStrings:
		return []string(nil)
	case OptInts:
		return []int64(nil)
	}
	return nil
}

// validate checks that v has the option's Go type and passes its checks.
// It returns v normalized (an int given for a float becomes a float).
func (s *OptionSpec) validate(v any) (any, error) {
	switch s.Kind {
	case OptBool:
		if _, ok := v.(bool); !ok {
			return nil, fmt.Errorf("option %q must be a bool (true or false), got %s", s.Name, describe(v))
		}
	case OptInt:
		switch x := v.(type) {
		case int:
			v = int64(x)
		case int64:
		default:
			return nil, fmt.Errorf("option %q must be an int, got %s", s.Name, describe(v))
		}
	case OptFloat:
		switch x := v.(type) {
		case int:
			v = float64(x)
		case int64:
			v = float64(x)
		case float64:
		default:
			return nil, fmt.Errorf("option %q must be a number, got %s", s.Name, describe(v))
		}
	case OptString:
		x, ok := v.(string)
		if !ok {
			return nil, fmt.Errorf("option %q must be a string, got %s", s.Name, describe(v))
		}
		if len(s.Enum) > 0 && !slices.Contains(s.Enum, x) {
			return nil, fmt.Errorf("option %q must be one of %s, got %q", s.Name, strings.Join(s.Enum, ", "), x)
		}
	case OptStrings:
		if _, ok := v.([]string); !ok {
			return nil, fmt.Errorf("option %q must be a list of strings, got %s", s.Name, describe(v))
		}
	case OptInts:
		switch x := v.(type) {
		case []int:
			ints := make([]int64, len(x))
			for i, n := range x {
				ints[i] = int64(n)
			}
			v = ints
		case []int64:
		default:
			return nil, fmt.Errorf("option %q must be a list of ints, got %s", s.Name, describe(v))
		}
	case OptFunc:
		if v == nil {
			return nil, fmt.Errorf("option %q must be set by the program, got nil", s.Name)
		}
	}
	if s.Check != nil {
		if err := s.Check(v); err != nil {
			return nil, fmt.Errorf("option %q: %w", s.Name, err)
		}
	}
	return v, nil
}

func describe(v any) string {
	switch x := v.(type) {
	case nil:
		return "nothing"
	case string:
		return fmt.Sprintf("the string %q", x)
	case bool:
		return fmt.Sprintf("the bool %v", x)
	case int, int64:
		return fmt.Sprintf("the int %v", x)
	case float64:
		return fmt.Sprintf("the number %v", x)
	}
	return fmt.Sprintf("a %T", v)
}

// Options are the option values of one pass run, by name. Passes read them
// with the typed getters; the runner fills in every default, so a getter of
// a declared option never misses.
type Options map[string]any

// Bool returns a bool option.
func (o Options) Bool(name string) bool { b, _ := o[name].(bool); return b }

// Int returns an int option.
func (o Options) Int(name string) int64 { n, _ := o[name].(int64); return n }

// Float returns a float option.
func (o Options) Float(name string) float64 { f, _ := o[name].(float64); return f }

// String returns a string option.
func (o Options) String(name string) string { s, _ := o[name].(string); return s }

// Strings returns a list-of-strings option.
func (o Options) Strings(name string) []string { s, _ := o[name].([]string); return s }

// Ints returns a list-of-ints option.
func (o Options) Ints(name string) []int64 { s, _ := o[name].([]int64); return s }

// Clone returns a shallow copy.
func (o Options) Clone() Options {
	c := make(Options, len(o))
	for k, v := range o {
		c[k] = v
	}
	return c
}

// withDefaults returns opts with every option of p present.
func withDefaults(p *Pass, opts Options) Options {
	out := Options{}
	for i := range p.Options {
		out[p.Options[i].Name] = p.Options[i].zero()
	}
	for k, v := range opts {
		out[k] = v
	}
	return out
}
