package passes

import (
	"fmt"
	"sort"
	"strings"

	"github.com/tapml/tapml/ir"
)

// Supports is the type of legalize's supports option: whether a target has
// a kernel for an op.
type Supports = func(op ir.Op) bool

// legalize checks that the target has a kernel for every op it must run:
// the nodes placed on target, or every node when the module is not
// partitioned. Meta ops (probe, transfer) run in the executor and need no
// kernel. All unsupported ops are reported in one error, with their node
// counts and an example node each.
func legalize(m *ir.Module, o Options) error {
	supports, ok := o["supports"].(func(ir.Op) bool)
	if !ok || supports == nil {
		return fmt.Errorf("no kernel table: the program must set option supports (func(op ir.Op) bool) for the target")
	}
	target := o.String("target")
	if target == "" {
		target = "the target"
	}
	partitioned := false
	for _, f := range m.Funcs {
		for _, n := range f.Nodes {
			partitioned = partitioned || n.Place != ""
		}
	}
	type miss struct {
		count   int
		example *ir.Node
		fn      string
	}
	missing := map[ir.Op]*miss{}
	for _, f := range m.Funcs {
		for _, n := range f.Nodes {
			if partitioned && n.Place != Target {
				continue
			}
			if d := n.Def(); d != nil && d.Kind == ir.KindMeta {
				continue
			}
			if supports(n.Op) {
				continue
			}
			if missing[n.Op] == nil {
				missing[n.Op] = &miss{example: n, fn: f.Name}
			}
			missing[n.Op].count++
		}
	}
	if len(missing) == 0 {
		return nil
	}
	ops := make([]ir.Op, 0, len(missing))
	total := 0
	for op, ms := range missing {
		ops = append(ops, op)
		total += ms.count
	}
	sort.Slice(ops, func(i, j int) bool {
		a, b := missing[ops[i]], missing[ops[j]]
		if a.count != b.count {
			return a.count > b.count
		}
		return ops[i].String() < ops[j].String()
	})
	var b strings.Builder
	fmt.Fprintf(&b, "%s has no kernel for %d op(s) used by %d node(s):", target, len(ops), total)
	for _, op := range ops {
		ms := missing[op]
		fmt.Fprintf(&b, "\n  %s: %d node(s), e.g. %s in func @%s", op, ms.count, ms.example, ms.fn)
	}
	return fmt.Errorf("%s", b.String())
}
