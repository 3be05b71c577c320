package carve

import (
	"bytes"
	"fmt"
	"html/template"
	"image/color"
	"io"
	"math"
	"sort"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// errorFloor is where zero errors are drawn on the log-scale plots.
const errorFloor = 1e-12

// errorPlot draws one point per case (x: the case's row in the table, y:
// value(result) on a log scale, zeros at the floor), passing cases in
// green and failing ones in red, with a dashed line at threshold when it
// is positive. It returns the SVG element.
func errorPlot(results []Result, title, ylabel string, value func(Result) float64, threshold float64) (template.HTML, error) {
	p, err := makeErrorPlot(results, title, ylabel, value, threshold)
	if err != nil {
		return "", err
	}
	wt, err := p.WriterTo(9*vg.Inch, 3.5*vg.Inch, "svg")
	if err != nil {
		return "", err
	}
	var buf bytes.Buffer
	if _, err := wt.WriteTo(&buf); err != nil {
		return "", err
	}
	svg := buf.String()
	if i := strings.Index(svg, "<svg"); i > 0 {
		svg = svg[i:] // drop the XML declaration to inline the SVG
	}
	return template.HTML(svg), nil
}

func makeErrorPlot(results []Result, title, ylabel string, value func(Result) float64, threshold float64) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = "case (table row)"
	p.Y.Label.Text = ylabel
	p.Y.Scale = plot.LogScale{}
	p.Y.Tick.Marker = plot.LogTicks{Prec: 1}
	p.X.Tick.Marker = plot.TickerFunc(func(min, max float64) []plot.Tick {
		ticks := plot.DefaultTicks{}.Ticks(min, max)
		for i := range ticks {
			if ticks[i].Label != "" {
				ticks[i].Label = fmt.Sprintf("%g", ticks[i].Value)
			}
		}
		return ticks
	})
	var pass, fail plotter.XYs
	hi := errorFloor * 10
	for i, r := range results {
		v := value(r)
		if math.IsNaN(v) || math.IsInf(v, 0) || r.Err != "" {
			v = math.Inf(1)
		}
		if v < errorFloor {
			v = errorFloor
		}
		if math.IsInf(v, 1) {
			v = math.NaN() // drawn at the top once the range is known
		} else {
			hi = math.Max(hi, v)
		}
		pt := plotter.XY{X: float64(i + 1), Y: v}
		if r.Passed() {
			pass = append(pass, pt)
		} else {
			fail = append(fail, pt)
		}
	}
	hi = math.Max(hi, threshold) * 10
	for i := range fail {
		if math.IsNaN(fail[i].Y) {
			fail[i].Y = hi
		}
	}
	add := func(xys plotter.XYs, c color.Color, shape draw.GlyphDrawer, name string) error {
		if len(xys) == 0 {
			return nil
		}
		s, err := plotter.NewScatter(xys)
		if err != nil {
			return err
		}
		s.GlyphStyle.Color = c
		s.GlyphStyle.Shape = shape
		s.GlyphStyle.Radius = vg.Points(2.5)
		p.Add(s)
		p.Legend.Add(name, s)
		return nil
	}
	if err := add(pass, color.RGBA{G: 140, B: 60, A: 255}, draw.CircleGlyph{}, "pass"); err != nil {
		return nil, err
	}
	if err := add(fail, color.RGBA{R: 210, A: 255}, draw.CrossGlyph{}, "fail (not finite: at the top)"); err != nil {
		return nil, err
	}
	if threshold > 0 && len(results) > 0 {
		l, err := plotter.NewLine(plotter.XYs{{X: 0.5, Y: threshold}, {X: float64(len(results)) + 0.5, Y: threshold}})
		if err != nil {
			return nil, err
		}
		l.LineStyle.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
		l.LineStyle.Color = color.Gray{Y: 100}
		p.Add(l)
		p.Legend.Add("tolerance", l)
	}
	p.Y.Min, p.Y.Max = errorFloor/2, hi*1e4 // headroom for the legend
	p.X.Min, p.X.Max = 0, float64(len(results))+1
	p.Legend.Top = true
	return p, nil
}

type htmlRow struct {
	Result
	ULP    string
	MaxAbs string
	MaxRel string
	Cosine string
	Ratio  string
}

type htmlNode struct {
	ID    int
	Text  string
	Prov  string
	Cases []string
}

var htmlTmpl = template.Must(template.New("report").Funcs(template.FuncMap{
	"inc":   func(i int) int { return i + 1 },
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
.pass { color: #08703c; } .fail, .error { color: #c00; font-weight: bold; }
pre { margin: 0; white-space: pre-wrap; }
.node { padding: 4px; border-bottom: 1px solid #eee; }
.node:target { background: #fff6c0; }
</style></head><body>
<h1>tapml test report</h1>
<p>Bundle <code>{{.R.Bundle}}</code> (model {{.R.Model}}) replayed on <b>{{.R.Target}}</b> ({{.R.Device}}):
<b>{{.R.Passed}} passed</b>, <b class="{{if .R.Failed}}fail{{else}}pass{{end}}">{{.R.Failed}} failed</b> of {{len .R.Results}} cases
{{- if lt (len .R.Results) .R.Total}} ({{len .R.Results}} of {{.R.Total}} selected){{end}}.</p>
<h2>Errors</h2>
<div>{{.RatioPlot}}</div>
<div>{{.AbsPlot}}</div>
<h2>Cases</h2>
<table>
<tr><th>#</th><th>case</th><th>op</th><th>provenance</th><th>IR node</th><th>max abs</th><th>max rel</th><th>ULP</th><th>cosine</th><th>error / tolerance</th><th>tolerance</th><th>result</th></tr>
{{range $i, $r := .Rows}}<tr id="case-{{$r.Case.ID}}"{{if not $r.Passed}} class="fail"{{end}}>
<td class="num">{{inc $i}}</td><td>{{$r.Case.ID}}</td><td>{{$r.Case.Op}}</td><td>{{$r.Case.Prov}}</td>
<td><a href="#node-{{$r.Case.Node}}" title="{{$r.Case.NodeText}}">#{{$r.Case.Node}}</a></td>
<td class="num">{{$r.MaxAbs}}</td><td class="num">{{$r.MaxRel}}</td><td class="num">{{$r.ULP}}</td><td class="num">{{$r.Cosine}}</td><td class="num">{{$r.Ratio}}</td>
<td title="{{$r.Tolerance.Rule}}">atol {{printf "%.3g" $r.Tolerance.ATol}}, rtol {{printf "%.3g" $r.Tolerance.RTol}}</td>
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
// error, the table, and the IR nodes the cases link to.
func (r *Report) WriteHTML(w io.Writer) error {
	ratio, err := errorPlot(r.Results, "error relative to tolerance (fails above 1)", "max |got-want| / (atol+rtol·|want|)",
		func(x Result) float64 { return x.Metrics.Ratio }, 1)
	if err != nil {
		return fmt.Errorf("plot: %w", err)
	}
	abs, err := errorPlot(r.Results, "max absolute error", "max |got-want|",
		func(x Result) float64 { return x.Metrics.MaxAbs }, 0)
	if err != nil {
		return fmt.Errorf("plot: %w", err)
	}
	var rows []htmlRow
	nodes := map[int]*htmlNode{}
	for _, x := range r.Results {
		row := htmlRow{Result: x, ULP: "-", MaxAbs: fmtNum(x.Metrics.MaxAbs), MaxRel: fmtNum(x.Metrics.MaxRel),
			Cosine: fmt.Sprintf("%.6f", x.Metrics.Cosine), Ratio: fmtNum(x.Metrics.Ratio)}
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
	return htmlTmpl.Execute(w, map[string]any{"R": r, "Rows": rows, "Nodes": nodeList, "RatioPlot": ratio, "AbsPlot": abs})
}
