package migrate

import (
	"github.com/tapml/tapml/carve"
	"github.com/tapml/tapml/ir"
	"github.com/tapml/tapml/runtime"
	"github.com/tapml/tapml/tensor"
)

// pathTols follows a reference run of a model that is not a language
// model and gives each value the tolerance of the worst path of ops that
// computed it: the largest sum of the policy's per-op RTols over the paths
// from the call's arguments to the value (see carve.Chain).
type pathTols struct {
	policy carve.Policy
	vals   map[pathKey]pathTol
}

type pathKey struct {
	call  int
	value string
}

type pathTol struct {
	rtol float64
	ops  int // rounding ops (RTol > 0) on the path
}

func newPathTols(p carve.Policy) *pathTols {
	return &pathTols{policy: p, vals: map[pathKey]pathTol{}}
}

// add takes node n, run in call with inputs in and outputs out.
func (p *pathTols) add(call int, n *ir.Node, in, out []*runtime.Buffer) error {
	cv, err := downloadCall(in, out)
	if err != nil {
		return err
	}
	var worst pathTol
	for _, v := range n.Inputs {
		if t := p.vals[pathKey{call, v.Name}]; !v.IsWeight() && t.rtol > worst.rtol {
			worst = t
		}
	}
	if tol := p.policy.For(n.Op, n.Attrs, cv.in, cv.out); tol.RTol > 0 {
		worst.rtol += tol.RTol
		worst.ops++
	}
	for _, o := range n.Outputs {
		p.vals[pathKey{call, o.Name}] = worst
	}
	return nil
}

// tolerance is the end-to-end tolerance of result r of call, whose
// reference value is want.
func (p *pathTols) tolerance(call int, r *ir.Value, want *tensor.Tensor) carve.Tolerance {
	t := p.vals[pathKey{call, r.Name}]
	return carve.Chain(t.rtol, t.ops, want)
}
