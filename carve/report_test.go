package carve

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"flag"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/tapml/tapml/runtime/cpu"
)

var update = flag.Bool("update", false, "rewrite golden files")

// sampleReport is a small report with a pass, a failure and an error.
func sampleReport() *Report {
	cases := []*Case{
		{ID: "c0001", Op: "matmul", Kind: "contraction", Prov: "layers.0.attention.wq", Node: 3, Func: "prefill",
			NodeText: `%2 = matmul(%1.probe, @layers.0.attention.wq) {transpose_b = true} : f32[seq, 64] #3 loc("layers.0.attention.wq")`},
		{ID: "c0002", Op: "rope", Kind: "elementwise", Prov: "layers.0.attention.rope_q", Node: 9, Func: "prefill",
			NodeText: `%8 = rope(%3.probe, %pos) {dims = 0, style = "interleaved", theta = 10000.0} : f32[seq, 8, 8] #9 loc("layers.0.attention.rope_q")`},
		{ID: "c0003", Op: "kv_write", Kind: "data", Prov: "layers.0.attention.k_cache", Node: 11, Func: "decode", Step: 3},
	}
	return &Report{
		Bundle: "tests", Model: "stories260K", Target: "webgpu", Device: "webgpu:vulkan:llvmpipe", Total: 5,
		Passed: 1, Failed: 2, Duration: 1500 * time.Millisecond,
		Results: []Result{
			{Case: cases[0], Pass: true, Tolerance: Tolerance{ATol: 1e-5, RTol: 7.6e-6, Rule: "contraction f32 over K=64"},
				Metrics: Metrics{MaxAbs: 1.9e-6, MaxRel: 3e-5, ULP: 24, HasULP: true, Cosine: 1, Ratio: 0.01, Elements: 832, Worst: 17}},
			{Case: cases[1], Pass: false, Tolerance: Tolerance{ATol: 1e-6, RTol: 2e-6},
				Metrics: Metrics{MaxAbs: 0.75, MaxRel: math.Inf(1), ULP: 1e9, HasULP: true, Cosine: 0.93, Ratio: 7.5e5, Mismatches: 600, Elements: 832, Worst: 8}},
			{Case: cases[2], Err: "webgpu: node #11 kv_write: compile: <boom> & \"quotes\"\nsecond line", Duration: time.Millisecond},
		},
	}
}

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("%s (-want +got):\n%s", path, diff)
	}
}

func TestReportTable(t *testing.T) {
	var b bytes.Buffer
	if err := sampleReport().WriteTable(&b); err != nil {
		t.Fatal(err)
	}
	golden(t, "table.golden", b.Bytes())
}

func TestReportJSON(t *testing.T) {
	var b bytes.Buffer
	if err := sampleReport().WriteJSON(&b); err != nil {
		t.Fatal(err)
	}
	golden(t, "report.json.golden", b.Bytes())
	var got struct {
		Cases, Passed, Failed int
		Results               []map[string]any
	}
	if err := json.Unmarshal(b.Bytes(), &got); err != nil {
		t.Fatalf("JSON does not parse: %v", err)
	}
	if got.Cases != 3 || got.Passed != 1 || got.Failed != 2 || len(got.Results) != 3 {
		t.Errorf("JSON summary: %+v", got)
	}
	if got.Results[1]["max_rel"] != "inf" || got.Results[1]["status"] != "fail" || got.Results[2]["status"] != "error" {
		t.Errorf("JSON results: %v", got.Results)
	}
}

func TestReportJUnit(t *testing.T) {
	var b bytes.Buffer
	if err := sampleReport().WriteJUnit(&b); err != nil {
		t.Fatal(err)
	}
	golden(t, "junit.xml.golden", b.Bytes())
	var got junitSuites
	if err := xml.Unmarshal(b.Bytes(), &got); err != nil {
		t.Fatalf("JUnit XML does not parse: %v", err)
	}
	if got.Tests != 3 || got.Failures != 1 || got.Errors != 1 || len(got.Suites) != 3 {
		t.Errorf("JUnit: %d tests, %d failures, %d errors, %d suites", got.Tests, got.Failures, got.Errors, len(got.Suites))
	}
	// Well-formed: a strict decoder reads every token.
	dec := xml.NewDecoder(bytes.NewReader(b.Bytes()))
	dec.Strict = true
	for {
		if _, err := dec.Token(); err != nil {
			if err.Error() != "EOF" {
				t.Errorf("XML token stream: %v", err)
			}
			break
		}
	}
}

func TestReportHTML(t *testing.T) {
	var b bytes.Buffer
	rep := sampleReport()
	if err := rep.WriteHTML(&b); err != nil {
		t.Fatal(err)
	}
	html := b.String()
	for _, want := range []string{
		"<svg", "</svg>", `href="#node-3"`, `id="node-3"`, `id="node-9"`, `href="#case-c0002"`,
		"%2 = matmul(%1.probe, @layers.0.attention.wq) {transpose_b = true} : f32[seq, 64] #3 loc(&#34;layers.0.attention.wq&#34;)",
		"&lt;boom&gt; &amp;", // errors are escaped
		"1 passed", "2 failed", "(3 of 5 selected)",
	} {
		if !strings.Contains(html, want) {
			t.Errorf("HTML lacks %q", want)
		}
	}
	if strings.Contains(html, "<boom>") {
		t.Error("HTML does not escape error text")
	}
	if n := strings.Count(html, "<svg"); n != 2 {
		t.Errorf("%d plots, want 2", n)
	}
	// The SVG plots must be XML (they are inlined, not images).
	for _, part := range strings.Split(html, "<svg")[1:] {
		svg := "<svg" + part[:strings.Index(part, "</svg>")] + "</svg>"
		if err := xml.Unmarshal([]byte(svg), new(struct{})); err != nil {
			t.Errorf("plot is not well-formed SVG: %v", err)
		}
	}
}

func TestReportsOfARealRun(t *testing.T) {
	dir, _ := carvedStories(t)
	b, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	rep, err := b.Test(cpu.New(), TestOptions{Target: "cpu", Run: regexpMust(t, "layers\\.0\\.")})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK() || len(rep.Results) == 0 || len(rep.Results) >= len(b.Manifest.Cases) {
		t.Fatalf("%s", rep.Summary())
	}
	for _, w := range []func(*bytes.Buffer) error{
		func(w *bytes.Buffer) error { return rep.WriteTable(w) },
		func(w *bytes.Buffer) error { return rep.WriteJSON(w) },
		func(w *bytes.Buffer) error { return rep.WriteJUnit(w) },
		func(w *bytes.Buffer) error { return rep.WriteHTML(w) },
	} {
		var buf bytes.Buffer
		if err := w(&buf); err != nil {
			t.Fatal(err)
		}
		if buf.Len() == 0 {
			t.Error("empty report")
		}
	}
}
