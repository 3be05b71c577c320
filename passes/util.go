package passes

import (
	"fmt"
	"strconv"

	"github.com/tapml/tapml/ir"
)

// hasSideEffects reports whether n must run even when its outputs are
// unused (kv_write updates its cache in place, probe records a value).
func hasSideEffects(n *ir.Node) bool {
	d := n.Def()
	return d != nil && d.Effects == ir.SideEffects
}

// substitute rewrites every use of a value (node inputs and results) through
// subst, following chains, and drops nodes in dead.
func substitute(f *ir.Function, subst map[*ir.Value]*ir.Value, dead map[*ir.Node]bool) {
	resolve := func(v *ir.Value) *ir.Value {
		for i := 0; i < 1<<20; i++ {
			w, ok := subst[v]
			if !ok {
				return v
			}
			v = w
		}
		return v
	}
	kept := f.Nodes[:0]
	for _, n := range f.Nodes {
		if dead[n] {
			continue
		}
		for i, in := range n.Inputs {
			n.Inputs[i] = resolve(in)
		}
		kept = append(kept, n)
	}
	for i := len(kept); i < len(f.Nodes); i++ {
		f.Nodes[i] = nil
	}
	f.Nodes = kept
	for i, r := range f.Results {
		f.Results[i] = resolve(r)
	}
}

// useCounts counts the reads of each value: one per node input slot and one
// per result slot.
func useCounts(f *ir.Function) map[*ir.Value]int {
	c := map[*ir.Value]int{}
	for _, n := range f.Nodes {
		for _, in := range n.Inputs {
			c[in]++
		}
	}
	for _, r := range f.Results {
		c[r]++
	}
	return c
}

func resultSet(f *ir.Function) map[*ir.Value]bool {
	s := map[*ir.Value]bool{}
	for _, r := range f.Results {
		s[r] = true
	}
	return s
}

// namer hands out value names that are unused in a function.
type namer struct{ used map[string]bool }

func newNamer(f *ir.Function) *namer {
	return &namer{used: f.ValueNames()}
}

// fresh returns base+suffix, or base+suffix+"."+k for the first free k.
func (nm *namer) fresh(base, suffix string) string {
	name := base + suffix
	for k := 1; nm.used[name]; k++ {
		name = base + suffix + "." + strconv.Itoa(k)
	}
	nm.used[name] = true
	return name
}

// constantValues returns the elements of v when a constant node defines it
// (one element stands for all).
func constantValues(v *ir.Value) ([]float64, bool) {
	if v == nil || v.Def == nil || v.Def.Op != ir.OpConstant {
		return nil, false
	}
	return v.Def.Attrs.Floats("value"), true
}

// allEqual reports whether every element of vals is x.
func allEqual(vals []float64, x float64) bool {
	if len(vals) == 0 {
		return false
	}
	for _, v := range vals {
		if v != x {
			return false
		}
	}
	return true
}

func funcErr(f *ir.Function, format string, args ...any) error {
	return fmt.Errorf("func @%s: %s", f.Name, fmt.Sprintf(format, args...))
}
