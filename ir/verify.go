package ir

import (
	"errors"
	"fmt"
)

// Verify checks a module's structural and type invariants: every op is
// registered, inputs are defined before use, attributes match the op's
// schema (with defaults filled in), declared output types equal the inferred
// ones, every type is well formed, weights are declared once with static
// shapes, names and node ids (positive) are unique, placements are known and
// results are defined. It reports every problem it finds (up to 20), one per
// line, each naming the function and the node (#id, op, first output and
// provenance).
func Verify(m *Module) error {
	v := &verifier{m: m, weights: map[string]*Weight{}}
	for i, w := range m.Weights {
		if w == nil {
			v.errorf("weight %d is nil", i)
			continue
		}
		if v.weights[w.Name] != nil {
			v.errorf("weight @%s declared twice", quoteIdent(w.Name))
			continue
		}
		v.weights[w.Name] = w
		if err := w.Type.Validate(); err != nil {
			v.errorf("weight @%s: %v", quoteIdent(w.Name), err)
		} else if !w.Type.Shape.IsStatic() {
			v.errorf("weight @%s: shape %s must be static", quoteIdent(w.Name), w.Type.Shape)
		}
	}
	fnames := map[string]bool{}
	ids := map[int]string{}
	for i, f := range m.Funcs {
		if f == nil {
			v.errorf("func %d is nil", i)
			continue
		}
		if fnames[f.Name] {
			v.errorf("func @%s declared twice", quoteIdent(f.Name))
		}
		fnames[f.Name] = true
		v.function(f, ids)
	}
	return v.result()
}

// VerifyFunction checks one function of m (node ids are checked for
// uniqueness within f only).
func VerifyFunction(m *Module, f *Function) error {
	v := &verifier{m: m, weights: map[string]*Weight{}}
	for _, w := range m.Weights {
		if w != nil && v.weights[w.Name] == nil {
			v.weights[w.Name] = w
		}
	}
	if f == nil {
		return errors.New("func is nil")
	}
	v.function(f, map[int]string{})
	return v.result()
}

type verifier struct {
	m       *Module
	weights map[string]*Weight
	errs    []error
}

const maxVerifyErrors = 20

func (v *verifier) errorf(format string, args ...any) {
	if len(v.errs) < maxVerifyErrors {
		v.errs = append(v.errs, fmt.Errorf(format, args...))
	} else if len(v.errs) == maxVerifyErrors {
		v.errs = append(v.errs, errors.New("too many errors"))
	}
}

func (v *verifier) result() error {
	if len(v.errs) == 0 {
		return nil
	}
	return errors.Join(v.errs...)
}

// checkWeightRef checks that val, a weight reference, names a weight of the
// module with the weight's type.
func (v *verifier) checkWeightRef(val *Value) error {
	w := v.weights[val.Name]
	if w == nil || w != val.Weight {
		return fmt.Errorf("refers to weight %s, which the module does not declare", val.Ref())
	}
	if !val.Type.Equal(w.Type) {
		return fmt.Errorf("refers to weight %s as %s, but it is declared %s", val.Ref(), val.Type, w.Type)
	}
	return nil
}

func (v *verifier) function(f *Function, ids map[int]string) {
	fn := "func @" + quoteIdent(f.Name)
	// where each value is defined: "parameter N" or the node; filled as
	// definitions are met, while laterDefs knows every definition in f, so
	// a use before a definition reads differently from a foreign value.
	defined := map[*Value]string{}
	laterDefs := map[*Value]*Node{}
	names := map[string]string{}
	for _, n := range f.Nodes {
		if n != nil {
			for _, out := range n.Outputs {
				if out != nil {
					if _, dup := laterDefs[out]; !dup {
						laterDefs[out] = n
					}
				}
			}
		}
	}
	// define records a definition of val; where and what name it in a
	// message, label is how later messages name the definer.
	define := func(val *Value, where, what, label string) {
		if prev, dup := names[val.Name]; dup {
			v.errorf("%s: %s: name already defined by %s", where, what, prev)
		} else {
			names[val.Name] = label
		}
		if _, dup := defined[val]; !dup {
			defined[val] = label
		}
	}
	for i, p := range f.Params {
		switch {
		case p == nil:
			v.errorf("%s: parameter %d is nil", fn, i)
			continue
		case p.IsWeight():
			v.errorf("%s: parameter %d (%s) is a weight", fn, i, p.Ref())
			continue
		case p.Def != nil:
			v.errorf("%s: parameter %d (%s) has a defining node (%s)", fn, i, p.Ref(), p.Def)
		}
		if err := p.Type.Validate(); err != nil {
			v.errorf("%s: parameter %s: %v", fn, p.Ref(), err)
		}
		define(p, fn, fmt.Sprintf("parameter %d (%s)", i, p.Ref()), fmt.Sprintf("parameter %d", i))
	}
	for ni, n := range f.Nodes {
		if n == nil {
			v.errorf("%s: node %d (in order) is nil", fn, ni)
			continue
		}
		where := fmt.Sprintf("%s: node %s", fn, n)
		if n.ID <= 0 {
			v.errorf("%s: id #%d is not positive", where, n.ID)
		} else if prev, dup := ids[n.ID]; dup {
			v.errorf("%s: id #%d already used in func @%s", where, n.ID, quoteIdent(prev))
		} else {
			ids[n.ID] = f.Name
		}
		types := make([]Type, len(n.Inputs))
		ok := true
		for i, in := range n.Inputs {
			switch {
			case in == nil:
				v.errorf("%s: input %d is nil", where, i)
				ok = false
				continue
			case in.IsWeight():
				if err := v.checkWeightRef(in); err != nil {
					v.errorf("%s: input %d %v", where, i, err)
					ok = false
				}
			case defined[in] == "":
				if d := laterDefs[in]; d != nil {
					v.errorf("%s: input %d (%s) is used before it is defined by node %s", where, i, in.Ref(), d)
				} else if d := in.Def; d != nil {
					v.errorf("%s: input %d (%s) is not defined in %s (its node %s is not there)", where, i, in.Ref(), fn, d)
				} else {
					v.errorf("%s: input %d (%s) is not defined in %s (not a parameter or node output of it)", where, i, in.Ref(), fn)
				}
				ok = false
			}
			types[i] = in.Type
		}
		if n.Place != "" && n.Place != "source" && n.Place != "target" {
			v.errorf("%s: placement %q is neither source nor target", where, n.Place)
		}
		d := LookupOp(n.Op)
		if d == nil {
			v.errorf("%s: unknown op %q", where, n.Op)
		} else if ok {
			out, na, err := InferTypes(n.Op, types, n.Attrs)
			switch {
			case err != nil:
				v.errorf("%s: %v", where, err)
			case len(out) != len(n.Outputs):
				v.errorf("%s: has %d outputs, op %s defines %d", where, len(n.Outputs), n.Op, len(out))
			default:
				for i, t := range out {
					if o := n.Outputs[i]; o != nil && !o.Type.Equal(t) {
						v.errorf("%s: output %s is declared %s, but %s infers %s", where, o.Ref(), o.Type, n.Op, t)
					}
				}
				v.checkNormalized(where, d, n.Attrs, na)
			}
		}
		for i, out := range n.Outputs {
			if out == nil {
				v.errorf("%s: output %d is nil", where, i)
				continue
			}
			if out.Def != n {
				v.errorf("%s: output %s does not point back to its node (Def is %s)", where, out.Ref(), out.Def)
			}
			if out.IsWeight() {
				v.errorf("%s: output %s is a weight", where, out.Ref())
			}
			if err := out.Type.Validate(); err != nil {
				v.errorf("%s: output %s: %v", where, out.Ref(), err)
			}
			define(out, where, "output "+out.Ref(), "node "+n.String())
		}
	}
	for i, r := range f.Results {
		switch {
		case r == nil:
			v.errorf("%s: result %d is nil", fn, i)
		case r.IsWeight():
			if err := v.checkWeightRef(r); err != nil {
				v.errorf("%s: result %d %v", fn, i, err)
			}
		case defined[r] == "":
			v.errorf("%s: result %d (%s) is not defined in %s", fn, i, r.Ref(), fn)
		}
	}
}

// checkNormalized reports attributes that differ from their normalized form:
// a default that is not filled in, or a value of a convertible kind (an int
// for a float). Builders and the parser always store normalized attributes.
func (v *verifier) checkNormalized(where string, d *OpDef, have, want Attrs) {
	for _, k := range want.Keys() {
		h, ok := have[k]
		switch {
		case !ok:
			v.errorf("%s: attribute %q is not set; its default %s must be filled in (build nodes with a Builder, or use OpDef.NormalizeAttrs)", where, k, want[k])
		case h.Kind != want[k].Kind:
			v.errorf("%s: attribute %q is %s %s; op %s stores it as %s %s (use OpDef.NormalizeAttrs)", where, k, h.Kind, h, d.Name, want[k].Kind, want[k])
		case !h.Equal(want[k]):
			v.errorf("%s: attribute %q is not normalized: %s vs %s", where, k, h, want[k])
		}
	}
}
