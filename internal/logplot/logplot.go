// Package logplot draws the reports' plots with gonum/plot as inline SVG:
// errors on a log scale, where exact zeros sit on a row labelled "0" one
// decade below the smallest error and values that are not finite on a row
// labelled "inf" above the largest; and heat maps of where in a tensor
// errors are. Legends are HTML beside the SVG, so they never cover data.
package logplot

import (
	"bytes"
	"fmt"
	"html/template"
	"image/color"
	"math"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/palette/moreland"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// Colours of the reports.
var (
	Blue   = color.RGBA{B: 200, G: 90, A: 255}
	Orange = color.RGBA{R: 230, G: 120, A: 255}
	Green  = color.RGBA{G: 140, B: 60, A: 255}
	Red    = color.RGBA{R: 210, A: 255}
	Gray   = color.Gray{Y: 100}
)

// Series is one set of points of a log plot.
type Series struct {
	Name   string
	XY     plotter.XYs
	Color  color.Color
	Line   bool // join the points
	Dashed bool
	Cross  bool // crosses instead of dots
}

// Threshold is a dashed horizontal line.
type Threshold struct {
	Name  string
	Value float64
}

// Chart is a plot with its legend, ready to render.
type Chart struct {
	p      *plot.Plot
	legend []legendItem
}

type legendItem struct {
	name   string
	color  color.Color
	dashed bool
	line   bool
}

// Log draws series on a log y axis (see the package documentation for
// zeros and non-finite values) with dashed lines at the thresholds.
func Log(title, xlabel, ylabel string, ss []Series, ths []Threshold) (*Chart, error) {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = xlabel
	p.Y.Label.Text = ylabel
	p.Y.Scale = plot.LogScale{}
	lo, hi, xmax, inf := math.Inf(1), 0.0, 1.0, false
	for _, s := range ss {
		for _, pt := range s.XY {
			switch y := pt.Y; {
			case math.IsNaN(y) || math.IsInf(y, 0):
				inf = true
			case y > 0:
				lo, hi = math.Min(lo, y), math.Max(hi, y)
			}
			xmax = math.Max(xmax, pt.X)
		}
	}
	for _, t := range ths {
		if t.Value > 0 {
			lo, hi = math.Min(lo, t.Value), math.Max(hi, t.Value)
		}
	}
	if math.IsInf(lo, 1) {
		lo, hi = 1, 1
	}
	zero := math.Pow(10, math.Floor(math.Log10(lo))-1)
	top := math.Pow(10, math.Ceil(math.Log10(hi))+1)
	p.Y.Tick.Marker = ticks{zero: zero, top: top, inf: inf}
	c := &Chart{p: p}
	for _, s := range ss {
		xy := make(plotter.XYs, len(s.XY))
		for i, pt := range s.XY {
			y := pt.Y
			switch {
			case math.IsNaN(y) || math.IsInf(y, 0):
				y = top
			case y <= 0:
				y = zero
			}
			xy[i] = plotter.XY{X: pt.X, Y: y}
		}
		if len(xy) == 0 {
			continue
		}
		if s.Line {
			l, err := plotter.NewLine(xy)
			if err != nil {
				return nil, err
			}
			l.LineStyle.Color = s.Color
			l.LineStyle.Width = vg.Points(1.2)
			if s.Dashed {
				l.LineStyle.Dashes = []vg.Length{vg.Points(2), vg.Points(2)}
			}
			p.Add(l)
		}
		sc, err := plotter.NewScatter(xy)
		if err != nil {
			return nil, err
		}
		sc.GlyphStyle.Color = s.Color
		sc.GlyphStyle.Shape = draw.CircleGlyph{}
		sc.GlyphStyle.Radius = vg.Points(2.5)
		if s.Cross {
			sc.GlyphStyle.Shape = draw.CrossGlyph{}
			sc.GlyphStyle.Radius = vg.Points(4)
		}
		p.Add(sc)
		c.legend = append(c.legend, legendItem{name: s.Name, color: s.Color, dashed: s.Dashed, line: s.Line})
	}
	for _, t := range ths {
		if t.Value <= 0 {
			continue
		}
		l, err := plotter.NewLine(plotter.XYs{{X: 0, Y: t.Value}, {X: xmax + 1, Y: t.Value}})
		if err != nil {
			return nil, err
		}
		l.LineStyle.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
		l.LineStyle.Color = Gray
		p.Add(l)
		c.legend = append(c.legend, legendItem{name: t.Name, color: Gray, dashed: true, line: true})
	}
	p.Y.Min, p.Y.Max = zero/2, top*2
	p.X.Min, p.X.Max = 0, xmax+1
	return c, nil
}

// Wrap gives a plot the caller drew a legend: the names, colours and
// styles of legend.
func Wrap(p *plot.Plot, legend []Series) *Chart {
	c := &Chart{p: p}
	for _, s := range legend {
		c.legend = append(c.legend, legendItem{name: s.Name, color: s.Color, dashed: s.Dashed, line: s.Line})
	}
	return c
}

// Plot returns the chart's gonum plot, to adjust before rendering.
func (c *Chart) Plot() *plot.Plot { return c.p }

// ticks labels the decades of a log axis, the zero row "0" and the top
// row "inf" when something is not finite.
type ticks struct {
	zero, top float64
	inf       bool
}

func (t ticks) Ticks(min, max float64) []plot.Tick {
	var out []plot.Tick
	for e := math.Round(math.Log10(t.zero)); e <= math.Log10(t.top)+0.5; e++ {
		v := math.Pow(10, e)
		label := fmt.Sprintf("1e%d", int(e))
		switch {
		case math.Abs(v-t.zero) <= t.zero*1e-9:
			label = "0"
		case math.Abs(v-t.top) <= t.top*1e-9:
			label = ""
			if t.inf {
				label = "inf"
			}
		}
		out = append(out, plot.Tick{Value: v, Label: label})
	}
	return out
}

// HTML renders the chart as an inline SVG of width × height inches with
// its legend below.
func (c *Chart) HTML(width, height float64) (template.HTML, error) {
	s, err := svg(c.p, width, height)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	b.WriteString(string(s))
	if len(c.legend) > 0 {
		b.WriteString(`<div class="legend">`)
		for _, it := range c.legend {
			r, g, bl, _ := it.color.RGBA()
			style := "solid"
			if it.dashed {
				style = "dashed"
			}
			mark := fmt.Sprintf(`<span style="display:inline-block;width:1.6em;border-top:2px %s rgb(%d,%d,%d);vertical-align:middle"></span>`, style, r>>8, g>>8, bl>>8)
			if !it.line {
				mark = fmt.Sprintf(`<span style="color:rgb(%d,%d,%d)">&#9679;</span>`, r>>8, g>>8, bl>>8)
			}
			fmt.Fprintf(&b, `<span style="margin-right:1.5em">%s %s</span>`, mark, template.HTMLEscapeString(it.name))
		}
		b.WriteString(`</div>`)
	}
	return template.HTML(b.String()), nil
}

func svg(p *plot.Plot, width, height float64) (template.HTML, error) {
	wt, err := p.WriterTo(vg.Length(width)*vg.Inch, vg.Length(height)*vg.Inch, "svg")
	if err != nil {
		return "", err
	}
	var buf bytes.Buffer
	if _, err := wt.WriteTo(&buf); err != nil {
		return "", err
	}
	s := buf.String()
	if i := strings.Index(s, "<svg"); i > 0 {
		s = s[i:] // drop the XML declaration to inline the SVG
	}
	return template.HTML(s), nil
}

// Heat draws a heat map of rows × cols cells (row-major values; NaN and
// +Inf drawn as the hottest) with row 0 at the top, as a tensor is read.
func Heat(title, xlabel, ylabel string, rows, cols int, cells []float64) (template.HTML, error) {
	g := heatGrid{rows: rows, cols: cols, v: cells, max: math.Inf(-1), min: math.Inf(1)}
	notFinite := false
	for _, v := range cells {
		if !math.IsInf(v, 0) && !math.IsNaN(v) {
			g.max, g.min = math.Max(g.max, v), math.Min(g.min, v)
		} else {
			notFinite = true
		}
	}
	legend := fmt.Sprintf("blue: smallest (%.3g) to red: largest (%.3g)", g.min, g.max)
	if notFinite {
		legend += "; red also: not finite (any difference of an exact op, NaN)"
	}
	if math.IsInf(g.max, -1) {
		g.min, g.max = 0, 1
		legend = "red: not finite (any difference of an exact op, NaN); blue: none"
	}
	if g.max == g.min {
		g.max = g.min + 1
	}
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = xlabel
	p.Y.Label.Text = ylabel
	pal := moreland.SmoothBlueRed().Palette(64)
	h := plotter.NewHeatMap(g, pal)
	p.Add(h)
	p.Y.Scale = invert{}
	p.Y.Tick.Marker = plot.ConstantTicks(intTicks(rows))
	p.X.Tick.Marker = plot.ConstantTicks(intTicks(cols))
	p.X.Min, p.X.Max = -0.5, float64(cols)-0.5
	p.Y.Min, p.Y.Max = -0.5, float64(rows)-0.5
	s, err := svg(p, 5, 4)
	if err != nil {
		return "", err
	}
	return s + template.HTML(`<div class="legend">`+template.HTMLEscapeString(legend)+`</div>`), nil
}

type heatGrid struct {
	rows, cols int
	v          []float64
	min, max   float64
}

func (g heatGrid) Dims() (c, r int) { return g.cols, g.rows }
func (g heatGrid) X(c int) float64  { return float64(c) }
func (g heatGrid) Y(r int) float64  { return float64(r) }
func (g heatGrid) Min() float64     { return g.min }
func (g heatGrid) Max() float64     { return g.max }
func (g heatGrid) Z(c, r int) float64 {
	v := g.v[r*g.cols+c]
	if math.IsInf(v, 0) || math.IsNaN(v) {
		return g.max
	}
	return v
}

// invert is a linear scale with the axis upside down (row 0 at the top).
type invert struct{}

func (invert) Normalize(min, max, x float64) float64 { return (max - x) / (max - min) }

// intTicks are a few integer ticks over n cells.
func intTicks(n int) []plot.Tick {
	step := max(1, n/8)
	var out []plot.Tick
	for i := 0; i < n; i += step {
		out = append(out, plot.Tick{Value: float64(i), Label: fmt.Sprint(i)})
	}
	return out
}
