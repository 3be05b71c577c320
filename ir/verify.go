package ir

import (
	"errors"
	"fmt"
)

// Verify checks a module's structural and type invariants: every op is
// registered, inputs are defined before use, attributes match the op's
// schema, declared output types equal the inferred ones, names and node ids
// are unique and results are defined. It reports every problem it finds (up
// to a limit), each naming the function and node.
func Verify(m *Module) error {
	v := &verifier{}
	wnames := map[string]bool{}
	for _, w := range m.Weights {
		if wnames[w.Name] {
			v.errorf("weight @%s declared twice", w.Name)
		}
		wnames[w.Name] = true
	}
	fnames := map[string]bool{}
	ids := map[int]string{}
	for _, f := range m.Funcs {
		if fnames[f.Name] {
			v.errorf("func @%s declared twice", f.Name)
		}
		fnames[f.Name] = true
		v.function(m, f, ids)
	}
	return v.result()
}

// VerifyFunction checks one function of m.
func VerifyFunction(m *Module, f *Function) error {
	v := &verifier{}
	v.function(m, f, map[int]string{})
	return v.result()
}

type verifier struct {
	errs []error
}

const maxVerifyErrors = 20

func (v *verifier) errorf(format string, args ...any) {
	if len(v.errs) < maxVerifyErrors {
		v.errs = append(v.errs, fmt.Errorf(format, args...))
	}
}

func (v *verifier) result() error {
	if len(v.errs) == 0 {
		return nil
	}
	return errors.Join(v.errs...)
}

func (v *verifier) function(m *Module, f *Function, ids map[int]string) {
	defined := map[*Value]bool{}
	names := map[string]bool{}
	define := func(val *Value, what string) {
		if names[val.Name] {
			v.errorf("func @%s: %s %%%s: name defined twice", f.Name, what, val.Name)
		}
		names[val.Name] = true
		defined[val] = true
	}
	for _, p := range f.Params {
		if p.IsWeight() {
			v.errorf("func @%s: parameter @%s is a weight", f.Name, p.Name)
			continue
		}
		define(p, "parameter")
	}
	for _, n := range f.Nodes {
		where := fmt.Sprintf("func @%s: node %s", f.Name, n)
		if prev, dup := ids[n.ID]; dup {
			v.errorf("%s: id #%d already used in func @%s", where, n.ID, prev)
		}
		ids[n.ID] = f.Name
		types := make([]Type, len(n.Inputs))
		ok := true
		for i, in := range n.Inputs {
			switch {
			case in == nil:
				v.errorf("%s: input %d is missing", where, i)
				ok = false
				continue
			case in.IsWeight():
				if w := m.Weight(in.Name); w == nil || w != in.Weight {
					v.errorf("%s: input %d refers to weight @%s, which the module does not declare", where, i, in.Name)
					ok = false
				}
			case !defined[in]:
				v.errorf("%s: input %d (%s) is used before it is defined", where, i, in.Ref())
				ok = false
			}
			types[i] = in.Type
		}
		d := LookupOp(n.Op)
		if d == nil {
			v.errorf("%s: unknown op %q", where, n.Op)
			continue
		}
		if n.Place != "" && n.Place != "source" && n.Place != "target" {
			v.errorf("%s: placement %q is neither source nor target", where, n.Place)
		}
		if ok {
			out, na, err := InferTypes(n.Op, types, n.Attrs)
			if err != nil {
				v.errorf("%s: %v", where, err)
			} else if len(out) != len(n.Outputs) {
				v.errorf("%s: has %d outputs, op %s defines %d", where, len(n.Outputs), n.Op, len(out))
			} else {
				for i, t := range out {
					if !n.Outputs[i].Type.Equal(t) {
						v.errorf("%s: output %s is declared %s, but %s gives %s", where, n.Outputs[i].Ref(), n.Outputs[i].Type, n.Op, t)
					}
				}
				if !na.Equal(n.Attrs) {
					v.errorf("%s: attributes %s lack defaults; build nodes with a Builder or the parser", where, formatAttrs(n.Attrs))
				}
			}
		}
		for _, out := range n.Outputs {
			if out.Def != n {
				v.errorf("%s: output %s does not point back to its node", where, out.Ref())
			}
			define(out, "output")
		}
	}
	for i, r := range f.Results {
		if r == nil || (!r.IsWeight() && !defined[r]) {
			v.errorf("func @%s: result %d is not defined", f.Name, i)
		}
	}
}
