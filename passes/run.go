package passes

import (
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/tapml/tapml/ir"
)

// RunConfig controls a pipeline run.
type RunConfig struct {
	// PrintAfter prints the text IR after the named passes: a pass name, a
	// comma-separated list of names, or "all". Empty prints nothing.
	PrintAfter string
	// PrintTo receives the printed IR; nil means os.Stderr.
	PrintTo io.Writer
	// NoVerify skips the verifier between passes (for debugging a pass that
	// breaks the module; the printed IR then shows the damage).
	NoVerify bool
}

// StepReport is what one pass did.
type StepReport struct {
	Pass        string
	Line        int
	Duration    time.Duration
	NodesBefore int
	NodesAfter  int
}

// Report is the record of a pipeline run: per-pass time and node counts,
// and the node count per op before and after the whole pipeline.
type Report struct {
	Steps     []StepReport
	OpsBefore map[ir.Op]int
	OpsAfter  map[ir.Op]int
	Total     time.Duration
}

// NodeCount is the number of nodes over every function of m.
func NodeCount(m *ir.Module) int {
	n := 0
	for _, f := range m.Funcs {
		n += len(f.Nodes)
	}
	return n
}

// CountOps returns the number of nodes of each op over every function of m.
func CountOps(m *ir.Module) map[ir.Op]int {
	c := map[ir.Op]int{}
	for _, f := range m.Funcs {
		for _, n := range f.Nodes {
			c[n.Op]++
		}
	}
	return c
}

func (p *Pipeline) printSet(spec string) (all bool, names map[string]bool, err error) {
	names = map[string]bool{}
	for _, s := range strings.Split(spec, ",") {
		s = strings.TrimSpace(s)
		switch {
		case s == "":
		case s == "all":
			all = true
		case Lookup(s) == nil:
			return false, nil, fmt.Errorf("print-after: unknown pass %q; passes: %s", s, passNames())
		default:
			names[s] = true
		}
	}
	return all, names, nil
}

func (p *Pipeline) loc(st *Step) string {
	if st.Line > 0 {
		return fmt.Sprintf("%s:%d", p.File, st.Line)
	}
	return p.File + " (added by the program)"
}

// Run applies the pipeline to m in place. The module is verified before
// the first pass (unless that pass checks its input itself) and after
// every pass; an error names the pass and its line in the pipeline file.
func (p *Pipeline) Run(m *ir.Module, cfg RunConfig) (*Report, error) {
	if err := p.Check(); err != nil {
		return nil, err
	}
	printAll, printNames, err := p.printSet(cfg.PrintAfter)
	if err != nil {
		return nil, err
	}
	out := cfg.PrintTo
	if out == nil {
		out = os.Stderr
	}
	rep := &Report{OpsBefore: CountOps(m)}
	if !cfg.NoVerify && (len(p.Steps) == 0 || !p.Steps[0].Pass.SelfChecking) {
		if err := ir.Verify(m); err != nil {
			return nil, fmt.Errorf("module %q does not verify before the pipeline: %w", m.Name, err)
		}
	}
	start := time.Now()
	for _, st := range p.Steps {
		opts := withDefaults(st.Pass, st.Options)
		before := NodeCount(m)
		t0 := time.Now()
		err := runPass(st.Pass, m, opts)
		d := time.Since(t0)
		if err != nil {
			return nil, fmt.Errorf("%s: pass %s: %w", p.loc(st), st.Pass.Name, err)
		}
		if !cfg.NoVerify {
			if err := ir.Verify(m); err != nil {
				return nil, fmt.Errorf("%s: the module does not verify after pass %s (a bug in the pass): %w", p.loc(st), st.Pass.Name, err)
			}
		}
		rep.Steps = append(rep.Steps, StepReport{Pass: st.Pass.Name, Line: st.Line, Duration: d, NodesBefore: before, NodesAfter: NodeCount(m)})
		if printAll || printNames[st.Pass.Name] {
			fmt.Fprintf(out, "// after pass %s (%s)\n", st.Pass.Name, p.loc(st))
			if err := ir.Print(out, m); err != nil {
				return nil, err
			}
		}
	}
	rep.Total = time.Since(start)
	rep.OpsAfter = CountOps(m)
	return rep, nil
}

// runPass runs one pass, turning a panic (a bug in the pass) into an error.
func runPass(p *Pass, m *ir.Module, o Options) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic (a bug in the pass): %v\n%s", r, debug.Stack())
		}
	}()
	return p.Run(m, o)
}

// WriteTimes writes the --time-passes table: each pass with its time and
// the node count before and after it.
func (r *Report) WriteTimes(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "pass\ttime\tnodes before\tnodes after\tchange\t\n")
	for _, s := range r.Steps {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%+d\t\n", s.Pass, fmtDuration(s.Duration), s.NodesBefore, s.NodesAfter, s.NodesAfter-s.NodesBefore)
	}
	before, after := 0, 0
	if len(r.Steps) > 0 {
		before, after = r.Steps[0].NodesBefore, r.Steps[len(r.Steps)-1].NodesAfter
	}
	fmt.Fprintf(tw, "total\t%s\t%d\t%d\t%+d\t\n", fmtDuration(r.Total), before, after, after-before)
	return tw.Flush()
}

// WriteStats writes the node count of every op before and after the
// pipeline.
func (r *Report) WriteStats(w io.Writer) error {
	ops := map[ir.Op]bool{}
	for op := range r.OpsBefore {
		ops[op] = true
	}
	for op := range r.OpsAfter {
		ops[op] = true
	}
	names := make([]ir.Op, 0, len(ops))
	for op := range ops {
		names = append(names, op)
	}
	sort.Slice(names, func(i, j int) bool { return names[i].String() < names[j].String() })
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "op\tbefore\tafter\tchange\t\n")
	tb, ta := 0, 0
	for _, op := range names {
		b, a := r.OpsBefore[op], r.OpsAfter[op]
		tb, ta = tb+b, ta+a
		fmt.Fprintf(tw, "%s\t%d\t%d\t%+d\t\n", op, b, a, a-b)
	}
	fmt.Fprintf(tw, "total\t%d\t%d\t%+d\t\n", tb, ta, ta-tb)
	return tw.Flush()
}

func fmtDuration(d time.Duration) string {
	switch {
	case d < time.Millisecond:
		return fmt.Sprintf("%.1fµs", float64(d)/float64(time.Microsecond))
	case d < time.Second:
		return fmt.Sprintf("%.2fms", float64(d)/float64(time.Millisecond))
	}
	return fmt.Sprintf("%.2fs", d.Seconds())
}
