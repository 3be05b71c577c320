package carve

import (
	"bytes"
	"fmt"
	"html/template"
	"io"
	"math"
	"sort"
	"strings"

	"github.com/tapml/tapml/internal/logplot"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

// maxInspected bounds the failing and flaky cases the HTML report draws
// got-vs-want and heat maps for.
const maxInspected = 12

// byOp returns the results grouped by op (ops in the order they first
// appear, cases in their order within an op).
func byOp(results []Result) []Result {
	first := map[string]int{}
	for i, r := range results {
		if _, ok := first[r.Case.Op]; !ok {
			first[r.Case.Op] = i
		}
	}
	out := append([]Result(nil), results...)
	sort.SliceStable(out, func(i, j int) bool { return first[out[i].Case.Op] < first[out[j].Case.Op] })
	return out
}

// errorPlot draws one point per case, grouped by op along x (an op's name
// under its group), y: value(result) on a log scale; passing cases green,
// failing ones red crosses, a dashed line at threshold when positive.
func errorPlot(results []Result, title, ylabel string, value func(Result) float64, threshold float64) (template.HTML, error) {
	var pass, fail plotter.XYs
	var ticks []plot.Tick
	for i, r := range results {
		v := value(r)
		if r.Err != "" {
			v = math.Inf(1)
		}
		pt := plotter.XY{X: float64(i + 1), Y: v}
		if r.Passed() {
			pass = append(pass, pt)
		} else {
			fail = append(fail, pt)
		}
		if i == 0 || results[i-1].Case.Op != r.Case.Op {
			ticks = append(ticks, plot.Tick{Value: float64(i + 1), Label: r.Case.Op})
		}
	}
	var ths []logplot.Threshold
	if threshold > 0 {
		ths = []logplot.Threshold{{Name: "tolerance", Value: threshold}}
	}
	c, err := logplot.Log(title, "case, grouped by op (table order)", ylabel,
		[]logplot.Series{{Name: "pass", XY: pass, Color: logplot.Green}, {Name: "fail", XY: fail, Color: logplot.Red, Cross: true}}, ths)
	if err != nil {
		return "", err
	}
	c.Plot().X.Tick.Marker = plot.ConstantTicks(ticks)
	return c.HTML(9, 3.5)
}

// inspection is the got-vs-want view of a failing case and where its
// error, or its run-to-run variation, sits.
type inspection struct {
	Case    string
	What    string
	Where   string
	Scatter template.HTML
	Heat    template.HTML
}

// maxScatter bounds the points of a got-vs-want scatter.
const maxScatter = 4096

// inspect draws a failing case's first failing output: got against want
// (every element, or an even sample of maxScatter), and a heat map of the
// error over the tolerance across the output's rows × cols.
func inspect(r Result) (*inspection, error) {
	out, where := r.errorGrid()
	got, want := r.Got[out], r.Want[out]
	ins := &inspection{Case: r.Case.ID, What: fmt.Sprintf("output %d (%s), elements out of tolerance", out, want.Type()), Where: where.String()}
	var xy plotter.XYs
	n := want.NumElements()
	step := max(1, n/maxScatter)
	for j := 0; j < n; j += step {
		xy = append(xy, plotter.XY{X: want.Float64At(j), Y: got.Float64At(j)})
	}
	s, err := scatter(fmt.Sprintf("%s: got against want", r.Case.ID), xy)
	if err != nil {
		return nil, err
	}
	ins.Scatter = s
	if ins.Heat, err = heat(r.Case.ID+": largest error / tolerance per cell", where); err != nil {
		return nil, err
	}
	return ins, nil
}

// inspectVariation draws where a flaky case's runs differ.
func inspectVariation(r Result) (*inspection, error) {
	v := r.Variation
	ins := &inspection{Case: r.Case.ID, Where: v.Where.String(),
		What: fmt.Sprintf("output %d differs between %d runs (largest spread %s)", v.Output, v.Runs, fmtNum(v.MaxSpread))}
	h, err := heat(r.Case.ID+": largest run-to-run difference per cell", v.Where)
	ins.Heat = h
	return ins, err
}

// heat draws a Grid's heat map.
func heat(title string, g Grid) (template.HTML, error) {
	xl := fmt.Sprintf("col (cells of %d)", max(1, g.Cols/max(g.HeatCols, 1)))
	yl := fmt.Sprintf("row (cells of %d)", max(1, g.Rows/max(g.HeatRows, 1)))
	return logplot.Heat(title, xl, yl, g.HeatRows, g.HeatCols, g.Heat)
}

// scatter draws got against want with the line got = want.
func scatter(title string, xy plotter.XYs) (template.HTML, error) {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = "want (reference)"
	p.Y.Label.Text = "got (target)"
	lo, hi := math.Inf(1), math.Inf(-1)
	finite := xy[:0:0]
	for _, pt := range xy {
		if !math.IsInf(pt.X, 0) && !math.IsNaN(pt.X) && !math.IsInf(pt.Y, 0) && !math.IsNaN(pt.Y) {
			finite = append(finite, pt)
			lo, hi = math.Min(lo, math.Min(pt.X, pt.Y)), math.Max(hi, math.Max(pt.X, pt.Y))
		}
	}
	if len(finite) == 0 {
		lo, hi = -1, 1
	}
	diag, err := plotter.NewLine(plotter.XYs{{X: lo, Y: lo}, {X: hi, Y: hi}})
	if err != nil {
		return "", err
	}
	diag.LineStyle.Color = logplot.Gray
	diag.LineStyle.Dashes = []vg.Length{2, 2}
	p.Add(diag)
	if len(finite) > 0 {
		sc, err := plotter.NewScatter(finite)
		if err != nil {
			return "", err
		}
		sc.GlyphStyle.Color = logplot.Blue
		sc.GlyphStyle.Radius = 1.2
		p.Add(sc)
	}
	c := logplot.Wrap(p, []logplot.Series{{Name: "elements", Color: logplot.Blue}, {Name: "got = want", Color: logplot.Gray, Line: true, Dashed: true}})
	return c.HTML(4.5, 4)
}

type htmlRow struct {
	Result
	N                                      int
	GroupStart                             bool
	Ops                                    int // cases of the op (on a group's first row)
	ULP, MaxAbs, MaxRel, Cosine, Ratio, Ms string
}

type htmlNode struct {
	ID    int
	Text  string
	Prov  string
	Cases []string
}

var htmlTmpl = template.Must(template.New("report").Funcs(template.FuncMap{
	"lower": strings.ToLower,
}).Parse(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<title>tapml test report: {{.R.Model}} on {{.R.Target}}</title>
<style>
body { font-family: system-ui, sans-serif; margin: 1.5em; color: #222; }
table { border-collapse: collapse; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 2px 6px; text-align: left; }
td.num { text-align: right; font-family: ui-monospace, monospace; }
tr.fail td { background: #fde8e8; }
tr.op td { background: #eef2f8; font-weight: bold; }
.pass { color: #08703c; } .fail, .error, .flaky { color: #c00; font-weight: bold; }
.legend { font-size: 0.85em; margin: 0 0 1em 3em; }
.inspect { display: flex; flex-wrap: wrap; gap: 1em; align-items: flex-start; }
pre { margin: 0; white-space: pre-wrap; }
.node { padding: 4px; border-bottom: 1px solid #eee; }
.node:target { background: #fff6c0; }
</style></head><body>
<h1>tapml test report</h1>
<p>Bundle <code>{{.R.Bundle}}</code> (model {{.R.Model}}) replayed on <b>{{.R.Target}}</b> ({{.R.Device}}) against the {{.Reference}} reference:
<b>{{.R.Passed}} passed</b>, <b class="{{if .R.Failed}}fail{{else}}pass{{end}}">{{.R.Failed}} failed</b> of {{len .R.Results}} cases
{{- if lt (len .R.Results) .R.Total}} ({{len .R.Results}} of {{.R.Total}} selected){{end}}.</p>
<h2>Errors</h2>
<div>{{.RatioPlot}}</div>
<div>{{.AbsPlot}}</div>
{{if .Inspect}}<h2>Failing cases: got against want, and where the error is</h2>
<p>Each output is viewed as rows × cols (its last two dims; leading dims folded in); the heat maps show, per cell, the largest error over
the tolerance (or the largest run-to-run difference), so that a band of rows or whole tiles (an indexing or barrier bug) shows.</p>
{{range .Inspect}}<h3 id="inspect-{{.Case}}">{{.Case}}: {{.What}}</h3><p>{{.Where}}</p>
<div class="inspect"><div>{{.Scatter}}</div><div>{{.Heat}}</div></div>
{{end}}{{end}}
{{if .Times}}<h2>Kernel time on {{.R.Target}}</h2><p>Warm, per case: the launch and the wait for it, inputs on the device; ranked by total time per op.</p>
<pre>{{.Times}}</pre>{{end}}
<h2>Cases, by op</h2>
<table>
<tr><th>#</th><th>case</th><th>op</th><th>provenance</th><th>IR node</th><th>max abs</th><th>max rel</th><th>ULP</th><th>cosine</th><th>error / tolerance</th><th>tolerance</th>{{if .Times}}<th>kernel</th>{{end}}<th>result</th></tr>
{{range $r := .Rows}}{{if $r.GroupStart}}<tr class="op"><td colspan="13">{{$r.Case.Op}} ({{$r.Ops}} cases)</td></tr>
{{end}}<tr id="case-{{$r.Case.ID}}"{{if not $r.Passed}} class="fail"{{end}}>
<td class="num">{{$r.N}}</td><td>{{$r.Case.ID}}</td><td>{{$r.Case.Op}}</td><td>{{$r.Case.Prov}}</td>
<td><a href="#node-{{$r.Case.Node}}" title="{{$r.Case.NodeText}}">#{{$r.Case.Node}}</a></td>
<td class="num">{{$r.MaxAbs}}</td><td class="num">{{$r.MaxRel}}</td><td class="num">{{$r.ULP}}</td><td class="num">{{$r.Cosine}}</td><td class="num">{{$r.Ratio}}</td>
<td title="{{$r.Tolerance.Rule}}">atol {{printf "%.3g" $r.Tolerance.ATol}}, rtol {{printf "%.3g" $r.Tolerance.RTol}}</td>{{if $.Times}}<td class="num">{{$r.Ms}}</td>{{end}}
<td class="{{lower $r.Status}}">{{$r.Status}}{{if $r.Err}}: {{$r.Err}}{{end}}</td></tr>
{{end}}</table>
<h2>IR nodes</h2>
<p>The nodes of the compiled module (<code>module.tir</code> in the bundle) the cases were carved from.</p>
{{range .Nodes}}<div class="node" id="node-{{.ID}}"><pre>{{.Text}}</pre>
<small>cases: {{range $j, $c := .Cases}}{{if $j}}, {{end}}<a href="#case-{{$c}}">{{$c}}</a>{{end}}</small></div>
{{end}}
</body></html>
`))

// WriteHTML writes the report as one HTML page: plots of every case's
// error grouped by op, got-vs-want views and heat maps of the failing and
// flaky cases, the kernel times, the table by op, and the IR nodes the
// cases link to.
func (r *Report) WriteHTML(w io.Writer) error {
	results := byOp(r.Results)
	ratio, err := errorPlot(results, "error relative to tolerance (fails above 1)", "max |got-want| / (atol+rtol·|want|)",
		func(x Result) float64 { return x.Metrics.Ratio }, 1)
	if err != nil {
		return fmt.Errorf("plot: %w", err)
	}
	abs, err := errorPlot(results, "max absolute error", "max |got-want|",
		func(x Result) float64 { return x.Metrics.MaxAbs }, 0)
	if err != nil {
		return fmt.Errorf("plot: %w", err)
	}
	var insp []*inspection
	for _, x := range results {
		if len(insp) == maxInspected {
			break
		}
		var in *inspection
		switch {
		case x.Variation != nil && x.Variation.Varying > 0:
			in, err = inspectVariation(x)
		case len(x.Got) > 0 && len(x.Got) == len(x.Want):
			in, err = inspect(x)
		default:
			continue
		}
		if err != nil {
			return fmt.Errorf("plot: %w", err)
		}
		insp = append(insp, in)
	}
	var rows []htmlRow
	nodes := map[int]*htmlNode{}
	count := map[string]int{}
	for _, x := range results {
		count[x.Case.Op]++
	}
	for i, x := range results {
		row := htmlRow{Result: x, N: i + 1, ULP: "-", MaxAbs: fmtNum(x.Metrics.MaxAbs), MaxRel: fmtNum(x.Metrics.MaxRel),
			Cosine: fmt.Sprintf("%.6f", x.Metrics.Cosine), Ratio: fmtNum(x.Metrics.Ratio), Ms: fmtDur(x.Time),
			GroupStart: i == 0 || results[i-1].Case.Op != x.Case.Op, Ops: count[x.Case.Op]}
		if x.Metrics.HasULP {
			row.ULP = fmtNum(x.Metrics.ULP)
		}
		rows = append(rows, row)
		n := nodes[x.Case.Node]
		if n == nil {
			n = &htmlNode{ID: x.Case.Node, Text: x.Case.NodeText, Prov: x.Case.Prov}
			nodes[x.Case.Node] = n
		}
		n.Cases = append(n.Cases, x.Case.ID)
	}
	var nodeList []*htmlNode
	for _, n := range nodes {
		nodeList = append(nodeList, n)
	}
	sort.Slice(nodeList, func(i, j int) bool { return nodeList[i].ID < nodeList[j].ID })
	var times bytes.Buffer
	if r.Timed() {
		if err := WriteOpTimes(&times, r.OpTimes()); err != nil {
			return err
		}
	}
	return htmlTmpl.Execute(w, map[string]any{"R": r, "Rows": rows, "Nodes": nodeList, "RatioPlot": ratio, "AbsPlot": abs,
		"Inspect": insp, "Times": times.String(), "Reference": r.ReferenceName()})
}
