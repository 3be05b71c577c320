package migrate

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

// svg renders a plot as an inline SVG element.
func svg(p *plot.Plot) (template.HTML, error) {
	wt, err := p.WriterTo(9*vg.Inch, 3.5*vg.Inch, "svg")
	if err != nil {
		return "", err
	}
	var buf bytes.Buffer
	if _, err := wt.WriteTo(&buf); err != nil {
		return "", err
	}
	s := buf.String()
	if i := strings.Index(s, "<svg"); i > 0 {
		s = s[i:]
	}
	return template.HTML(s), nil
}

// series is one line of a log-scale plot: its points (x, y), with the
// points to mark as diverging.
type series struct {
	name   string
	xy     plotter.XYs
	bad    []bool
	col    color.Color
	noLine bool
	dashed bool
}

// logPlot draws series on a log y axis: zeros at errorFloor, non-finite
// values at the top; points of bad in red crosses; a dashed line at each
// threshold.
type threshold struct {
	name string
	v    float64
}

func logPlot(title, xlabel, ylabel string, ss []series, thresholds []threshold) (template.HTML, error) {
	p, err := makeLogPlot(title, xlabel, ylabel, ss, thresholds)
	if err != nil {
		return "", err
	}
	return svg(p)
}

func makeLogPlot(title, xlabel, ylabel string, ss []series, thresholds []threshold) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = xlabel
	p.Y.Label.Text = ylabel
	p.Y.Scale = plot.LogScale{}
	p.Y.Tick.Marker = plot.LogTicks{Prec: 1}
	hi, xmax := errorFloor*10, 1.0
	for _, s := range ss {
		for _, pt := range s.xy {
			if !math.IsInf(pt.Y, 0) && !math.IsNaN(pt.Y) {
				hi = math.Max(hi, pt.Y)
			}
			xmax = math.Max(xmax, pt.X)
		}
	}
	for _, t := range thresholds {
		hi = math.Max(hi, t.v)
	}
	top := hi * 10
	clamp := func(v float64) float64 {
		switch {
		case math.IsNaN(v) || math.IsInf(v, 1):
			return top
		case v < errorFloor:
			return errorFloor
		}
		return v
	}
	var bad plotter.XYs
	for _, s := range ss {
		xy := make(plotter.XYs, len(s.xy))
		for i, pt := range s.xy {
			xy[i] = plotter.XY{X: pt.X, Y: clamp(pt.Y)}
			if i < len(s.bad) && s.bad[i] {
				bad = append(bad, xy[i])
			}
		}
		if len(xy) == 0 {
			continue
		}
		if !s.noLine {
			l, err := plotter.NewLine(xy)
			if err != nil {
				return nil, err
			}
			l.LineStyle.Color = s.col
			l.LineStyle.Width = vg.Points(1.2)
			if s.dashed {
				l.LineStyle.Dashes = []vg.Length{vg.Points(2), vg.Points(2)}
			}
			p.Add(l)
		}
		sc, err := plotter.NewScatter(xy)
		if err != nil {
			return nil, err
		}
		sc.GlyphStyle.Color = s.col
		sc.GlyphStyle.Shape = draw.CircleGlyph{}
		sc.GlyphStyle.Radius = vg.Points(2.5)
		p.Add(sc)
		p.Legend.Add(s.name, sc)
	}
	if len(bad) > 0 {
		sc, err := plotter.NewScatter(bad)
		if err != nil {
			return nil, err
		}
		sc.GlyphStyle.Color = color.RGBA{R: 210, A: 255}
		sc.GlyphStyle.Shape = draw.CrossGlyph{}
		sc.GlyphStyle.Radius = vg.Points(5)
		p.Add(sc)
		p.Legend.Add("diverges (not finite: at the top)", sc)
	}
	for _, t := range thresholds {
		if t.v <= 0 {
			continue
		}
		l, err := plotter.NewLine(plotter.XYs{{X: 0, Y: t.v}, {X: xmax + 1, Y: t.v}})
		if err != nil {
			return nil, err
		}
		l.LineStyle.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
		l.LineStyle.Color = color.Gray{Y: 100}
		p.Add(l)
		p.Legend.Add(t.name, l)
	}
	p.Y.Min, p.Y.Max = errorFloor/2, top*1e4
	p.X.Min, p.X.Max = 0, xmax+1
	p.Legend.Top = true
	return p, nil
}

var (
	blue   = color.RGBA{B: 200, G: 90, A: 255}
	orange = color.RGBA{R: 230, G: 120, A: 255}
	green  = color.RGBA{G: 140, B: 60, A: 255}
)

// curveSeries returns the migration curve's series (max logit error and
// max KL per run, diverging runs marked) and the share of nodes on the
// target per run.
func (r *Report) curveSeries() ([]series, plotter.XYs) {
	var le, kl, frac plotter.XYs
	var bad []bool
	for i, p := range r.Points {
		x := float64(i + 1)
		le = append(le, plotter.XY{X: x, Y: p.MaxLogitErr})
		kl = append(kl, plotter.XY{X: x, Y: p.MaxKL})
		frac = append(frac, plotter.XY{X: x, Y: 100 * p.Fraction})
		bad = append(bad, p.Divergent)
	}
	return []series{{name: "max |logit - reference|", xy: le, bad: bad, col: blue}, {name: "max KL(reference || run)", xy: kl, col: orange, dashed: true}}, frac
}

// curvePlots draws the migration curve: each run's max logit error and max
// KL against the run number, and the share of nodes on the target.
func (r *Report) curvePlots() (errPlot, fracPlot template.HTML, err error) {
	ss, frac := r.curveSeries()
	errPlot, err = logPlot("migration curve: error of each run against the CPU reference", "run", "error", ss,
		[]threshold{{"logit error threshold", r.Thresholds.MaxLogitErr}, {"KL threshold", r.Thresholds.MaxKL}})
	if err != nil {
		return "", "", err
	}
	p := plot.New()
	p.Title.Text = "nodes on the target"
	p.X.Label.Text = "run"
	p.Y.Label.Text = "% of candidate nodes"
	if len(frac) > 0 {
		l, lerr := plotter.NewLine(frac)
		if lerr != nil {
			return "", "", lerr
		}
		l.LineStyle.Color = green
		p.Add(l)
		sc, serr := plotter.NewScatter(frac)
		if serr != nil {
			return "", "", serr
		}
		sc.GlyphStyle.Color = green
		sc.GlyphStyle.Shape = draw.CircleGlyph{}
		p.Add(sc)
	}
	p.Y.Min, p.Y.Max = 0, 105
	p.X.Min, p.X.Max = 0, float64(len(frac)+1)
	fracPlot, err = svg(p)
	return errPlot, fracPlot, err
}

// stepPlot draws the per-step logit error of the final placement and, when
// the culprit set diverged, of the run with only the set moved.
func (r *Report) stepPlot() (template.HTML, error) {
	mk := func(v []float64) plotter.XYs {
		xy := make(plotter.XYs, len(v))
		for i, e := range v {
			xy[i] = plotter.XY{X: float64(i), Y: e}
		}
		return xy
	}
	ss := []series{{name: "final placement: |logit - reference|", xy: mk(r.Final.StepLogitErr), col: blue},
		{name: "final placement: KL", xy: mk(r.Final.StepKL), col: orange, dashed: true}}
	return logPlot("error per generation step (forward call; 0 is the prompt)", "step", "error", ss,
		[]threshold{{"logit error threshold", r.Thresholds.MaxLogitErr}})
}

type htmlPoint struct {
	N                    int
	Point                Point
	LogitErr, KL, Tokens string
}

type htmlSuspect struct {
	Suspect
	IsoAbs, IsoRel, IsoRatio, AccAbs, AccRel, AccRatio, InRel, Amp, Cond string
}

var htmlTmpl = template.Must(template.New("report").Parse(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<title>tapml migration: {{.R.Model}} to {{.R.Target}}</title>
<style>
body { font-family: system-ui, sans-serif; margin: 1.5em; color: #222; }
table { border-collapse: collapse; font-size: 0.9em; margin-bottom: 1em; }
th, td { border: 1px solid #ccc; padding: 2px 6px; text-align: left; }
td.num { text-align: right; font-family: ui-monospace, monospace; }
tr.div td { background: #fde8e8; }
.ok { color: #08703c; font-weight: bold; } .bad { color: #c00; font-weight: bold; }
pre { margin: 0; white-space: pre-wrap; }
</style></head><body>
<h1>tapml migration report</h1>
<p>Model <b>{{.R.Model}}</b> migrated from the CPU reference to <b>{{.R.Target}}</b> ({{.R.Device}}), strategy <b>{{.R.Strategy}}</b>,
prompt <code>{{printf "%q" .R.Prompt}}</code>, {{.R.Steps}} steps ({{.R.Forwards}} forward calls; the reference generated {{len .R.RefTokens}} tokens:
<code>{{printf "%q" .R.RefText}}</code>).</p>
<p>Result: <span class="{{if .Identical}}ok{{else}}bad{{end}}">{{.R.Verdict}}</span></p>
<p>A run diverges when a greedy token differs from the reference's, a logit differs by more than {{.R.Thresholds.MaxLogitErr}},
or the KL divergence of a next-token distribution exceeds {{.R.Thresholds.MaxKL}}. Runs are teacher-forced with the reference's tokens,
so every step is compared. {{.R.Candidates}} candidate nodes; {{.R.Runs}} mixed runs{{if .R.Localisation}}, {{.R.Localisation.Runs}} of them to localise over {{.R.Localisation.Searched}} nodes{{end}}.
{{if .Unsupported}}Staying on the source (no kernel on the target): {{.Unsupported}}.{{end}}</p>
{{if .R.Faults}}<p>Injected test-only faults in {{len .R.Faults}} node(s): {{range $i, $f := .R.Faults}}{{if $i}}, {{end}}#{{$f.Node}} {{$f.Op}} {{$f.Fault}}{{end}}.</p>{{end}}
<h2>Migration curve</h2>
<div>{{.ErrPlot}}</div>
<div>{{.FracPlot}}</div>
<div>{{.StepPlot}}</div>
<table>
<tr><th>run</th><th>phase</th><th>placement</th><th>on target</th><th>tokens</th><th>max logit error</th><th>max KL</th><th>result</th></tr>
{{range .Points}}<tr{{if .Point.Divergent}} class="div"{{end}}><td class="num">{{.N}}</td><td>{{.Point.Phase}}</td><td>{{.Point.Label}}</td>
<td class="num">{{.Point.OnTarget}}</td><td>{{.Tokens}}</td><td class="num">{{.LogitErr}}</td><td class="num">{{.KL}}</td>
<td>{{if .Point.Divergent}}<span class="bad">diverges</span>{{else}}<span class="ok">agrees</span>{{end}}{{if .Point.Err}}: {{.Point.Err}}{{end}}</td></tr>
{{end}}</table>
{{if .Suspects}}<h2>Culprit</h2>
<p>Isolated error: the node alone on the target fed the reference's inputs (its carved cases). Accumulated error: its outputs in the
diverging mixed run. Amplification = accumulated / isolated; condition = accumulated / input error. A kernel bug is wrong on the
reference's inputs; an ill-conditioned op is right on them and amplifies the error of its inputs.</p>
<table>
<tr><th>node</th><th>op</th><th>provenance</th><th>function</th><th>isolated abs / rel / ratio (failed calls)</th><th>accumulated abs / rel / ratio (failed calls)</th><th>input rel</th><th>amplification</th><th>condition</th><th>verdict</th></tr>
{{range .Suspects}}<tr><td>#{{.Node}}</td><td>{{.Op}}{{if .Fault}} <small>(fault {{.Fault}})</small>{{end}}</td><td>{{.Prov}}</td><td>@{{.Func}}</td>
<td class="num">{{.IsoAbs}} / {{.IsoRel}} / {{.IsoRatio}} ({{.Isolated.Failed}}/{{.Isolated.Calls}})</td>
<td class="num">{{.AccAbs}} / {{.AccRel}} / {{.AccRatio}} ({{.Accumulated.Failed}}/{{.Accumulated.Calls}})</td>
<td class="num">{{.InRel}}</td><td class="num">{{.Amp}}</td><td class="num">{{.Cond}}</td><td><b>{{.Verdict}}</b></td></tr>
<tr><td colspan="10"><pre>{{.NodeText}}</pre></td></tr>
{{end}}</table>
{{end}}
{{if .R.Regression}}<p>Regression bundle: <code>{{.R.Regression.Dir}}</code> (cases {{range $i, $c := .R.Regression.Cases}}{{if $i}}, {{end}}{{$c}}{{end}}):
replay it with <code>tapmlc test {{.R.Regression.Dir}} --target {{.R.Target}}</code>.</p>{{end}}
</body></html>
`))

// WriteHTML writes the report as one HTML page: the migration curve
// (plots and table), the culprit with its errors, the regression bundle.
func (r *Report) WriteHTML(w io.Writer) error {
	errPlot, fracPlot, err := r.curvePlots()
	if err != nil {
		return fmt.Errorf("plot: %w", err)
	}
	stepPlot, err := r.stepPlot()
	if err != nil {
		return fmt.Errorf("plot: %w", err)
	}
	var pts []htmlPoint
	for i, p := range r.Points {
		tok := "identical"
		if p.Err != "" {
			tok = "run failed"
		} else if !p.TokensMatch {
			tok = fmt.Sprintf("differ from step %d", p.FirstMismatch)
		}
		pts = append(pts, htmlPoint{N: i + 1, Point: p, LogitErr: fmtNum(p.MaxLogitErr), KL: fmtNum(p.MaxKL), Tokens: tok})
	}
	var sus []htmlSuspect
	for _, s := range r.Culprits {
		sus = append(sus, htmlSuspect{Suspect: s, IsoAbs: fmtNum(s.Isolated.MaxAbs), IsoRel: fmtNum(s.Isolated.MaxRel), IsoRatio: fmtNum(s.Isolated.Ratio),
			AccAbs: fmtNum(s.Accumulated.MaxAbs), AccRel: fmtNum(s.Accumulated.MaxRel), AccRatio: fmtNum(s.Accumulated.Ratio),
			InRel: fmtNum(s.InputRel), Amp: fmtNum(s.Amplification), Cond: fmtNum(s.Condition)})
	}
	var uns []string
	for op, n := range r.Unsupported {
		uns = append(uns, fmt.Sprintf("%s (%d)", op, n))
	}
	sort.Strings(uns)
	return htmlTmpl.Execute(w, map[string]any{
		"R": r, "Identical": r.Outcome == OutcomeIdentical, "Points": pts, "Suspects": sus, "Unsupported": strings.Join(uns, ", "),
		"ErrPlot": errPlot, "FracPlot": fracPlot, "StepPlot": stepPlot,
	})
}
