package logplot

import (
	"encoding/xml"
	"math"
	"strings"
	"testing"

	"gonum.org/v1/plot/plotter"
)

// Exact zeros sit on a row labelled "0" a decade below the smallest value,
// non-finite values on a row labelled "inf", and the legend is HTML below
// the SVG, never inside the plot.
func TestLogPlotZerosAndLegend(t *testing.T) {
	c, err := Log("t", "x", "y", []Series{
		{Name: "errors", XY: plotter.XYs{{X: 1, Y: 0}, {X: 2, Y: 3e-7}, {X: 3, Y: math.Inf(1)}, {X: 4, Y: 0.02}}, Color: Blue},
	}, []Threshold{{Name: "tolerance", Value: 1}})
	if err != nil {
		t.Fatal(err)
	}
	ticks := c.Plot().Y.Tick.Marker.Ticks(c.Plot().Y.Min, c.Plot().Y.Max)
	labels := map[string]float64{}
	for _, tk := range ticks {
		if tk.Label != "" {
			labels[tk.Label] = tk.Value
		}
	}
	if labels["0"] != 1e-8 || labels["inf"] != 10 || labels["1e-7"] != 1e-7 {
		t.Errorf("tick labels %v: want 0 at 1e-8, inf at 10", labels)
	}
	h, err := c.HTML(4, 3)
	if err != nil {
		t.Fatal(err)
	}
	s := string(h)
	svg := s[:strings.Index(s, "</svg>")+len("</svg>")]
	if err := xml.Unmarshal([]byte(svg), new(struct{})); err != nil {
		t.Errorf("not well-formed SVG: %v", err)
	}
	legend := s[len(svg):]
	if !strings.Contains(legend, `class="legend"`) || !strings.Contains(legend, "errors") || !strings.Contains(legend, "tolerance") || strings.Contains(svg, ">errors<") {
		t.Errorf("legend not outside the plot: %s", legend)
	}
}

// A heat map of all-infinite cells says what red means.
func TestHeatNotFinite(t *testing.T) {
	h, err := Heat("h", "col", "row", 1, 2, []float64{math.Inf(1), 0})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(h), "not finite") {
		t.Errorf("%s", h[len(h)-200:])
	}
}
