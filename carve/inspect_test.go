package carve

import (
	"bytes"
	"encoding/xml"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/tapml/tapml/ir"
	"github.com/tapml/tapml/runtime"
	"github.com/tapml/tapml/runtime/cpu"
	"github.com/tapml/tapml/tensor"
)

func TestLocate(t *testing.T) {
	for _, tc := range []struct {
		name  string
		shape []int
		marks func(i int) bool
		want  string
	}{
		{"none", []int{4, 4}, func(int) bool { return false }, "none of 16 elements"},
		{"one row", []int{8, 8}, func(i int) bool { return i/8 == 3 }, "8 of 64 elements; rows 3 of 8; cols 0-7 of 8"},
		// A 64×64 output whose second 16×16 tile in the first tile row is
		// wrong: a workgroup-shaped error.
		{"a tile", []int{64, 64}, func(i int) bool { return i/64 < 16 && i%64 >= 16 && i%64 < 32 },
			"256 of 4096 elements; rows 0-15 of 64; cols 16-31 of 64; in 1 of 16 16×16 tiles (1 entirely)"},
		{"planes", []int{2, 3, 4, 4}, func(i int) bool { return i == 17 || i == 80 },
			"2 of 96 elements; planes 1-5 of 6; rows 0 of 4; cols 0-1 of 4; in 2 of 6 16×16 tiles"},
		{"a vector", []int{40}, func(i int) bool { return i >= 30 }, "10 of 40 elements; cols 30-39 of 40; in 2 of 3 16×16 tiles (1 entirely)"},
	} {
		g := Locate(tc.shape, func(i int) float64 {
			if tc.marks(i) {
				return 1
			}
			return 0
		})
		if got := g.String(); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
	// NaN weights count as marked; the heat map keeps each cell's worst.
	g := Locate([]int{2, 2}, func(i int) float64 { return []float64{0, math.NaN(), 3, 0.5}[i] })
	if g.Marked != 3 || g.HeatRows != 2 || g.HeatCols != 2 || g.Heat[2] != 3 || !math.IsNaN(g.Heat[1]) {
		t.Errorf("%+v", g)
	}
}

func TestOpTimes(t *testing.T) {
	ms := time.Millisecond
	got := OpTimes([]Timed{{"add", "c1", 1 * ms}, {"matmul", "c2", 3 * ms}, {"add", "c3", 4 * ms}, {"rope", "c4", 2 * ms}})
	want := []OpTime{
		{Op: "add", Count: 2, Total: 5 * ms, Mean: 2500 * time.Microsecond, Max: 4 * ms, Slowest: "c3"},
		{Op: "matmul", Count: 1, Total: 3 * ms, Mean: 3 * ms, Max: 3 * ms, Slowest: "c2"},
		{Op: "rope", Count: 1, Total: 2 * ms, Mean: 2 * ms, Max: 2 * ms, Slowest: "c4"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	var b bytes.Buffer
	if err := WriteOpTimes(&b, got); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "add") || !strings.Contains(b.String(), "50.0%") || !strings.Contains(b.String(), "10ms") {
		t.Errorf("table:\n%s", b.String())
	}
}

// The end-to-end tolerance is the policy's rule applied to a chain: the
// given rtol, atol scaled by the reference's magnitude, and a rule that
// says so.
func TestChain(t *testing.T) {
	want := tensor.FromFloat32([]int{3}, []float32{0.5, -4, 2})
	tol := Chain(1e-4, 12, want)
	if tol.RTol != 1e-4 || tol.ATol != 4e-4 || !strings.Contains(tol.Rule, "12 rounding ops") {
		t.Errorf("%+v", tol)
	}
}

// flakyDevice is the CPU reference whose matmul outputs get one tile of
// values shifted on every other run: a race as a test would see it.
type flakyDevice struct {
	runtime.Device
	runs int
}

func (d *flakyDevice) Launch(n *ir.Node, in []*runtime.Buffer, outs []ir.Type) ([]*runtime.Buffer, error) {
	res, err := d.Device.Launch(n, in, outs)
	if err != nil || n.Op != ir.OpMatmul {
		return res, err
	}
	d.runs++
	if d.runs%2 == 0 {
		t := res[0].Handle.(*tensor.Tensor)
		for i := 0; i < min(8, t.NumElements()); i++ {
			t.SetFloat64At(i, t.Float64At(i)+1e-3)
		}
	}
	return res, nil
}

// --repeat finds a kernel whose output varies between runs, says where,
// and fails the case as FLAKY; the HTML report draws where; a steady
// device passes.
func TestRepeatFindsFlakyKernel(t *testing.T) {
	dir, _ := carvedStories(t)
	b, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	opts := TestOptions{Run: regexpMust(t, `^matmul$`), Replay: ReplayOptions{Repeat: 3}}
	rep, err := b.Test(&flakyDevice{Device: cpu.New()}, opts)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Passed != 0 || len(rep.Results) == 0 {
		t.Fatalf("%s", rep.Summary())
	}
	x := rep.Results[0]
	if x.Status() != "FLAKY" || x.Variation.Varying != 8 || x.Variation.Runs != 3 || math.Abs(x.Variation.MaxSpread-1e-3) > 1e-6 {
		t.Fatalf("%s: %+v", x.Status(), x.Variation)
	}
	var table, html bytes.Buffer
	if err := rep.WriteTable(&table); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(table.String(), "differs between 3 runs") || !strings.Contains(table.String(), "8 of ") {
		t.Errorf("table does not locate the variation:\n%s", table.String())
	}
	if err := rep.WriteHTML(&html); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(html.String(), "largest run-to-run difference per cell") {
		t.Error("the HTML report has no heat map of the variation")
	}
	steady, err := b.Test(cpu.New(), opts)
	if err != nil {
		t.Fatal(err)
	}
	if !steady.OK() {
		t.Errorf("the CPU reference varies: %s", steady.Summary())
	}
}

// A failing case keeps its tensors when asked: the table says where the
// error is, the HTML report draws got against want and the error's heat
// map, and the plots are well-formed SVG with their legends outside.
func TestFailingCaseInspection(t *testing.T) {
	dir, _ := carvedStories(t)
	b, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	// Every rms_norm output 0.5 off.
	dev := &perturbed{Device: cpu.New(), op: ir.OpRMSNorm, delta: 0.5}
	rep, err := b.Test(dev, TestOptions{Run: regexpMust(t, `^rms_norm$`), Replay: ReplayOptions{Keep: true}})
	if err != nil {
		t.Fatal(err)
	}
	x := rep.Results[0]
	if x.Passed() || len(x.Got) != 1 || len(x.Want) != 1 || len(x.In) == 0 {
		t.Fatalf("%s, got %d want %d in %d tensors", x.Status(), len(x.Got), len(x.Want), len(x.In))
	}
	var table, html bytes.Buffer
	if err := rep.WriteTable(&table); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(table.String(), "out of tolerance at") {
		t.Errorf("table:\n%s", table.String())
	}
	if err := rep.WriteHTML(&html); err != nil {
		t.Fatal(err)
	}
	h := html.String()
	for _, want := range []string{"got against want", "largest error / tolerance per cell", `class="legend"`, `<tr class="op"><td colspan="13">rms_norm`} {
		if !strings.Contains(h, want) {
			t.Errorf("HTML lacks %q", want)
		}
	}
	for _, part := range strings.Split(h, "<svg")[1:] {
		svg := "<svg" + part[:strings.Index(part, "</svg>")] + "</svg>"
		if err := xml.Unmarshal([]byte(svg), new(struct{})); err != nil {
			t.Errorf("plot is not well-formed SVG: %v", err)
		}
	}
}

// perturbed adds delta to every output element of op.
type perturbed struct {
	runtime.Device
	op    ir.Op
	delta float64
}

func (d *perturbed) Launch(n *ir.Node, in []*runtime.Buffer, outs []ir.Type) ([]*runtime.Buffer, error) {
	res, err := d.Device.Launch(n, in, outs)
	if err == nil && n.Op == d.op {
		t := res[0].Handle.(*tensor.Tensor)
		for i := range t.NumElements() {
			t.SetFloat64At(i, t.Float64At(i)+d.delta)
		}
	}
	return res, err
}
