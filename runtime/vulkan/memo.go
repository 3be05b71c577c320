package vulkan

import (
	"slices"

	"github.com/tapml/tapml/ir"
	"github.com/tapml/tapml/runtime"
)

// launchMemo is what the last launch of a node decided for its input
// dtypes and shapes: the plan, or for a buffer-sharing reshape the output
// type. Every decode step launches each node on the same types, and the
// memo spares it type inference and the plan lookup.
type launchMemo struct {
	in       []ir.DType
	shapes   [][]int
	fault    string
	p        *plan
	outType  ir.Type // reshape
	outSizes []int
}

func newLaunchMemo(in []*runtime.Buffer, fault string, p *plan, out ir.Type) *launchMemo {
	m := &launchMemo{fault: fault, p: p, outType: out}
	if p == nil {
		m.outSizes = out.Shape.Sizes()
	}
	for _, b := range in {
		m.in = append(m.in, b.DType)
		m.shapes = append(m.shapes, slices.Clone(b.Shape))
	}
	return m
}

// matches reports whether a launch on in with fault decides the same.
func (m *launchMemo) matches(in []*runtime.Buffer, fault string) bool {
	if m.fault != fault || len(in) != len(m.in) {
		return false
	}
	for i, b := range in {
		if b.DType != m.in[i] || !slices.Equal(b.Shape, m.shapes[i]) {
			return false
		}
	}
	return true
}
