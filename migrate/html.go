package migrate

import (
	"fmt"
	"html/template"
	"io"
	"sort"
	"strings"

	"github.com/tapml/tapml/carve"
	"github.com/tapml/tapml/internal/logplot"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg/draw"
)

// curvePlots draws the migration curve: each run's error against the run
// number (max logit error and KL for a language model, the worst output
// error over its tolerance and the largest absolute error otherwise;
// diverging runs crossed), and the share of nodes on the target.
func (r *Report) curvePlots() (errPlot, fracPlot template.HTML, err error) {
	var e1, e2, bad, frac plotter.XYs
	for i, p := range r.Points {
		x := float64(i + 1)
		y1, y2 := p.MaxLogitErr, p.MaxKL
		if !r.Language {
			y1, y2 = p.MaxRatio, p.MaxAbsErr
		}
		e1 = append(e1, plotter.XY{X: x, Y: y1})
		e2 = append(e2, plotter.XY{X: x, Y: y2})
		if p.Divergent {
			bad = append(bad, plotter.XY{X: x, Y: y1})
		}
		frac = append(frac, plotter.XY{X: x, Y: 100 * p.Fraction})
	}
	ss := []logplot.Series{
		{Name: "max |logit - reference|", XY: e1, Color: logplot.Blue, Line: true},
		{Name: "max KL(reference || run)", XY: e2, Color: logplot.Orange, Line: true, Dashed: true},
		{Name: "diverges (not finite: at the top)", XY: bad, Color: logplot.Red, Cross: true},
	}
	ths := []logplot.Threshold{{Name: "logit error threshold", Value: r.Thresholds.MaxLogitErr}, {Name: "KL threshold", Value: r.Thresholds.MaxKL}}
	if !r.Language {
		ss[0].Name, ss[1].Name = "max error / tolerance over the outputs", "max |output - reference|"
		ths = []logplot.Threshold{{Name: "tolerance (error / tolerance = 1)", Value: 1}}
	}
	c, err := logplot.Log("migration curve: error of each run against the "+r.Reference+" reference", "run", "error", ss, ths)
	if err != nil {
		return "", "", err
	}
	if errPlot, err = c.HTML(9, 3.5); err != nil {
		return "", "", err
	}
	p := plot.New()
	p.Title.Text = "nodes on the target"
	p.X.Label.Text = "run"
	p.Y.Label.Text = "% of candidate nodes"
	if len(frac) > 0 {
		l, sc, lerr := plotter.NewLinePoints(frac)
		if lerr != nil {
			return "", "", lerr
		}
		l.LineStyle.Color, sc.GlyphStyle.Color, sc.GlyphStyle.Shape = logplot.Green, logplot.Green, draw.CircleGlyph{}
		p.Add(l, sc)
	}
	p.Y.Min, p.Y.Max = 0, 105
	p.X.Min, p.X.Max = 0, float64(len(frac)+1)
	fracPlot, err = logplot.Wrap(p, nil).HTML(9, 2.5)
	return errPlot, fracPlot, err
}

// stepPlot draws the final placement's error per generation step (a
// language model) or per output (the others).
func (r *Report) stepPlot() (template.HTML, error) {
	if !r.Language {
		var xy plotter.XYs
		var ticks []plot.Tick
		for i, o := range r.Final.Outputs {
			xy = append(xy, plotter.XY{X: float64(i + 1), Y: o.Metrics.Ratio})
			ticks = append(ticks, plot.Tick{Value: float64(i + 1), Label: o.Name})
		}
		c, err := logplot.Log("final placement: error / tolerance of each output", "output", "max |got-want| / (atol+rtol·|want|)",
			[]logplot.Series{{Name: "output", XY: xy, Color: logplot.Blue}}, []logplot.Threshold{{Name: "tolerance", Value: 1}})
		if err != nil {
			return "", err
		}
		if len(ticks) <= 16 {
			c.Plot().X.Tick.Marker = plot.ConstantTicks(ticks)
		}
		return c.HTML(9, 3)
	}
	mk := func(v []float64) plotter.XYs {
		xy := make(plotter.XYs, len(v))
		for i, e := range v {
			xy[i] = plotter.XY{X: float64(i), Y: e}
		}
		return xy
	}
	c, err := logplot.Log("error per generation step (forward call; 0 is the prompt)", "step", "error",
		[]logplot.Series{{Name: "final placement: |logit - reference|", XY: mk(r.Final.StepLogitErr), Color: logplot.Blue, Line: true},
			{Name: "final placement: KL", XY: mk(r.Final.StepKL), Color: logplot.Orange, Line: true, Dashed: true}},
		[]logplot.Threshold{{Name: "logit error threshold", Value: r.Thresholds.MaxLogitErr}})
	if err != nil {
		return "", err
	}
	return c.HTML(9, 3.5)
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
{{if .R.Language}}<p>Model <b>{{.R.Model}}</b> migrated from the {{.R.Reference}} reference to <b>{{.R.Target}}</b> ({{.R.Device}}), strategy <b>{{.R.Strategy}}</b>,
prompt <code>{{printf "%q" .R.Prompt}}</code>, {{.R.Steps}} steps ({{.R.Forwards}} forward calls; the reference generated {{len .R.RefTokens}} tokens:
<code>{{printf "%q" .R.RefText}}</code>).</p>
<p>Result: <span class="{{if .Identical}}ok{{else}}bad{{end}}">{{.R.Verdict}}</span></p>
<p>A run diverges when a greedy token differs from the reference's, a logit differs by more than {{.R.Thresholds.MaxLogitErr}},
or the KL divergence of a next-token distribution exceeds {{.R.Thresholds.MaxKL}}. Runs are teacher-forced with the reference's tokens,
so every step is compared.{{else}}<p>Model <b>{{.R.Model}}</b> migrated from the {{.R.Reference}} reference to <b>{{.R.Target}}</b> ({{.R.Device}}), strategy <b>{{.R.Strategy}}</b>,
{{.R.Forwards}} calls on these inputs: {{range $i, $in := .R.Inputs}}{{if $i}}; {{end}}{{$in.Name}} {{$in.DType}}{{$in.Shape}} ({{$in.Source}}){{end}}.</p>
<p>Result: <span class="{{if .Identical}}ok{{else}}bad{{end}}">{{.R.Verdict}}</span></p>
<p>A run diverges when an element of an output differs from the reference's by more than atol + rtol·|want|, each output's tolerance being:</p>
<table><tr><th>call</th><th>output</th><th>type</th><th>rtol</th><th>atol</th><th>rule</th></tr>
{{range .R.Outputs}}<tr><td>@{{.Func}}</td><td>{{.Name}}</td><td>{{.Type}}</td><td class="num">{{printf "%.3g" .Tolerance.RTol}}</td><td class="num">{{printf "%.3g" .Tolerance.ATol}}</td><td>{{.Tolerance.Rule}}</td></tr>
{{end}}</table><p>{{end}} {{.R.Candidates}} candidate nodes; {{.R.Runs}} mixed runs{{if .R.Localisation}}, {{.R.Localisation.Runs}} of them to localise over {{.R.Localisation.Searched}} nodes{{end}}.
{{if .Unsupported}}Staying on the source (no kernel on the target): {{.Unsupported}}.{{end}}</p>
{{if .R.Faults}}<p>Injected test-only faults in {{len .R.Faults}} node(s): {{range $i, $f := .R.Faults}}{{if $i}}, {{end}}#{{$f.Node}} {{$f.Op}} {{$f.Fault}}{{end}}.</p>{{end}}
<h2>Migration curve</h2>
<div>{{.ErrPlot}}</div>
<div>{{.FracPlot}}</div>
<div>{{.StepPlot}}</div>
<table>
<tr><th>run</th><th>phase</th><th>placement</th><th>on target</th>{{if .R.Language}}<th>tokens</th><th>max logit error</th><th>max KL</th>{{else}}<th>outputs</th><th>max abs error</th><th>max error / tolerance</th>{{end}}<th>result</th></tr>
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
{{if .Times}}<h2>Kernel time on {{.R.Target}}</h2><p>The final placement, warm: each node on the target launched, its inputs moved and waited for; ranked by total time per op.</p>
<pre>{{.Times}}</pre>{{end}}
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
		hp := htmlPoint{N: i + 1, Point: p, LogitErr: fmtNum(p.MaxLogitErr), KL: fmtNum(p.MaxKL), Tokens: tok}
		if !r.Language {
			hp.LogitErr, hp.KL = fmtNum(p.MaxAbsErr), fmtNum(p.MaxRatio)
			if p.Err == "" {
				hp.Tokens = fmt.Sprintf("%d of %d out of tolerance", p.failingOutputs(), len(p.Outputs))
			}
		}
		pts = append(pts, hp)
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
	var times strings.Builder
	if err := carve.WriteOpTimes(&times, r.Timing); err != nil {
		return err
	}
	if len(r.Timing) == 0 {
		times.Reset()
	}
	return htmlTmpl.Execute(w, map[string]any{"Times": times.String(),
		"R": r, "Identical": r.Outcome == OutcomeIdentical, "Points": pts, "Suspects": sus, "Unsupported": strings.Join(uns, ", "),
		"ErrPlot": errPlot, "FracPlot": fracPlot, "StepPlot": stepPlot,
	})
}
