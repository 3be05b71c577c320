package carve

import (
	"fmt"
	"io"
	"sort"
	"text/tabwriter"
	"time"
)

// Timed is one measured kernel: a case (`tapmlc test --time`) or a node
// of a model run (a migration's final placement).
type Timed struct {
	Op   string
	Name string // the case id or node that took it
	Time time.Duration
}

// OpTime is the kernel time of one op, summed over its cases or nodes.
type OpTime struct {
	Op      string        `json:"op"`
	Count   int           `json:"count"`
	Total   time.Duration `json:"total_ns"`
	Mean    time.Duration `json:"mean_ns"`
	Max     time.Duration `json:"max_ns"`
	Slowest string        `json:"slowest"` // the case or node of Max
}

// OpTimes sums times per op, ranked by total time, largest first (as
// MLC-LLM's --time-eval ranks its kernels).
func OpTimes(items []Timed) []OpTime {
	byOp := map[string]*OpTime{}
	var ops []*OpTime
	for _, it := range items {
		o := byOp[it.Op]
		if o == nil {
			o = &OpTime{Op: it.Op}
			byOp[it.Op] = o
			ops = append(ops, o)
		}
		o.Count++
		o.Total += it.Time
		if it.Time > o.Max || o.Slowest == "" {
			o.Max, o.Slowest = it.Time, it.Name
		}
	}
	out := make([]OpTime, len(ops))
	for i, o := range ops {
		o.Mean = o.Total / time.Duration(o.Count)
		out[i] = *o
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Total > out[j].Total })
	return out
}

// WriteOpTimes writes the ranked table: op, kernels, total, share of the
// whole, mean, max and where the max was.
func WriteOpTimes(w io.Writer, rows []OpTime) error {
	var all time.Duration
	for _, r := range rows {
		all += r.Total
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "op\tkernels\ttotal\tshare\tmean\tmax\tslowest\t")
	for _, r := range rows {
		share := 0.0
		if all > 0 {
			share = 100 * float64(r.Total) / float64(all)
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%.1f%%\t%s\t%s\t%s\t\n", r.Op, r.Count, fmtDur(r.Total), share, fmtDur(r.Mean), fmtDur(r.Max), r.Slowest)
	}
	fmt.Fprintf(tw, "total\t\t%s\t\t\t\t\t\n", fmtDur(all))
	return tw.Flush()
}

// fmtDur prints a duration with 3 significant digits in µs or ms.
func fmtDur(d time.Duration) string {
	us := float64(d) / float64(time.Microsecond)
	if us < 1000 {
		return fmt.Sprintf("%.3gµs", us)
	}
	return fmt.Sprintf("%.4gms", us/1000)
}
