package carve

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/tapml/tapml/internal/atomicfile"
	"github.com/tapml/tapml/tensor"
)

// Result is the outcome of replaying one case.
type Result struct {
	Case      *Case
	Metrics   Metrics
	Tolerance Tolerance
	Pass      bool
	Err       string // why the case could not run; it then fails
	lost      error  // set when the device was lost: no later case can run
	Duration  time.Duration
	// Reference is what the outputs were compared with: "recorded" (the
	// bundle's reference outputs) or the reference device's name.
	Reference string
	// Time is the warm kernel time (ReplayOptions.Time), Variation what
	// repeated runs changed (ReplayOptions.Repeat).
	Time      time.Duration
	Variation *Variation
	// In, Got and Want are a failing case's inputs (those that are not
	// weights), outputs and the reference's outputs (ReplayOptions.Keep).
	In, Got, Want []*tensor.Tensor
	// Truth compares the outputs of a case carved under f16 compute with
	// the f32 truth (the reference without its f16 emulation, on the same
	// inputs), under the same tolerance; nil for f32 cases. The case
	// passes only when both comparisons do.
	Truth *Metrics
}

// Passed reports whether the case ran and every element was in tolerance.
func (r Result) Passed() bool { return r.Err == "" && r.Pass }

// Status is "pass", "FAIL", "FLAKY" (repeated runs differ) or "ERROR".
func (r Result) Status() string {
	switch {
	case r.Err != "":
		return "ERROR"
	case r.Pass:
		return "pass"
	case r.Variation != nil && r.Variation.Varying > 0:
		return "FLAKY"
	}
	return "FAIL"
}

// Report is the outcome of replaying a bundle on a target.
type Report struct {
	Bundle   string
	Model    string
	Target   string
	Device   string
	Total    int // cases in the bundle (selected or not)
	Passed   int
	Failed   int
	Results  []Result
	Duration time.Duration
	// Faults are the test-only faults planted while the cases ran, with
	// whether each fired.
	Faults []FaultResult
}

// NotFired reports whether faults were planted and none of them changed
// any output: the run tested nothing.
func (r *Report) NotFired() bool {
	if len(r.Faults) == 0 {
		return false
	}
	for _, f := range r.Faults {
		if f.Fired > 0 {
			return false
		}
	}
	return true
}

// OK reports whether every selected case passed.
func (r *Report) OK() bool { return r.Failed == 0 }

// Timed reports whether the cases' kernels were timed.
func (r *Report) Timed() bool {
	for _, x := range r.Results {
		if x.Time > 0 {
			return true
		}
	}
	return false
}

// OpTimes ranks the timed cases' kernel time per op.
func (r *Report) OpTimes() []OpTime {
	var items []Timed
	for _, x := range r.Results {
		if x.Time > 0 {
			items = append(items, Timed{Op: x.Case.Op, Name: x.Case.ID, Time: x.Time})
		}
	}
	return OpTimes(items)
}

// ReferenceName is what the outputs were compared with: "cpu (recorded)"
// or the reference device's name.
func (r *Report) ReferenceName() string {
	for _, x := range r.Results {
		if x.Reference != "" && x.Reference != "recorded" {
			return x.Reference
		}
	}
	return "recorded CPU"
}

// Failures returns the results that did not pass.
func (r *Report) Failures() []Result {
	var out []Result
	for _, x := range r.Results {
		if !x.Passed() {
			out = append(out, x)
		}
	}
	return out
}

// fmtNum prints a metric compactly ("0", "1.2e-07", "inf").
func fmtNum(v float64) string {
	switch {
	case v == 0:
		return "0"
	case math.IsInf(v, 1):
		return "inf"
	case math.IsInf(v, -1):
		return "-inf"
	case math.IsNaN(v):
		return "nan"
	}
	return strconv.FormatFloat(v, 'g', 3, 64)
}

// WriteTable writes the terminal table: one row per case, then a summary.
func (r *Report) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "case\top\tprovenance\tmax abs\tmax rel\tULP\tcosine\tresult")
	for _, x := range r.Results {
		ulp := "-"
		if x.Metrics.HasULP {
			ulp = fmtNum(x.Metrics.ULP)
		}
		status := x.Status()
		if x.Err != "" {
			status += ": " + firstLine(x.Err)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", x.Case.ID, x.Case.Op, x.Case.Prov,
			fmtNum(x.Metrics.MaxAbs), fmtNum(x.Metrics.MaxRel), ulp, strconv.FormatFloat(x.Metrics.Cosine, 'f', 6, 64), status)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, x := range r.Results {
		switch {
		case x.Variation != nil && x.Variation.Varying > 0:
			v := x.Variation
			fmt.Fprintf(w, "%s %s: output %d differs between %d runs (largest spread %s): %s\n", x.Case.ID, x.Case.Op, v.Output, v.Runs, fmtNum(v.MaxSpread), v.Where)
		case len(x.Got) > 0 && len(x.Got) == len(x.Want):
			if k, g := x.errorGrid(); g.Marked > 0 {
				fmt.Fprintf(w, "%s %s: output %d out of tolerance at %s\n", x.Case.ID, x.Case.Op, k, g)
			}
		}
		if x.Truth != nil && !x.Truth.Pass() {
			fmt.Fprintf(w, "%s %s: against the f32 truth: max abs %s, max rel %s, out of tolerance\n", x.Case.ID, x.Case.Op, fmtNum(x.Truth.MaxAbs), fmtNum(x.Truth.MaxRel))
		}
	}
	if r.Timed() {
		fmt.Fprintf(w, "kernel time on %s (warm, per case: launch and wait, inputs on the device), by op:\n", r.Target)
		if err := WriteOpTimes(w, r.OpTimes()); err != nil {
			return err
		}
	}
	for _, f := range r.Faults {
		fmt.Fprintf(w, "injected fault %s in node %d (%s): fired in %d of %d cases\n", f.Fault.Fault, f.Node, f.Op, f.Fired, f.Cases)
	}
	_, err := fmt.Fprintln(w, r.Summary())
	return err
}

// errorGrid locates the elements of the first failing output of a result
// that kept its tensors (see ReplayOptions.Keep), weighted by their error
// over the tolerance.
func (r Result) errorGrid() (int, Grid) {
	for k := range r.Got {
		got, want := r.Got[k], r.Want[k]
		if got.DType != want.DType || !sameShape(got.Shape, want.Shape) {
			continue
		}
		tol := r.Tolerance
		if !want.DType.IsFloat() {
			tol = Tolerance{} // integers are compared exactly
		}
		g := Locate(want.Shape, func(j int) float64 { return tol.excess(got.Float64At(j), want.Float64At(j)) })
		if g.Marked > 0 {
			return k, g
		}
	}
	return 0, Grid{}
}

// Summary is the report's last line.
func (r *Report) Summary() string {
	s := fmt.Sprintf("%d cases on %s (%s): %d passed, %d failed", len(r.Results), r.Target, r.Device, r.Passed, r.Failed)
	if n := len(r.Results); n < r.Total {
		s += fmt.Sprintf(" (%d of %d selected)", n, r.Total)
	}
	if r.NotFired() {
		s += "; the injected faults never fired (the faulted kernels computed what the fault-free ones do)"
	}
	if r.Failed > 0 {
		ops := map[string]int{}
		var order []string
		for _, f := range r.Failures() {
			if ops[f.Case.Op] == 0 {
				order = append(order, f.Case.Op)
			}
			ops[f.Case.Op]++
		}
		parts := make([]string, len(order))
		for i, op := range order {
			parts[i] = fmt.Sprintf("%s %d", op, ops[op])
		}
		s += "; failing ops: " + strings.Join(parts, ", ")
	}
	return s
}

// num is a float that JSON can hold even when it is not finite (as the
// strings "inf", "-inf" and "nan").
type num float64

func (n num) MarshalJSON() ([]byte, error) {
	v := float64(n)
	if math.IsInf(v, 0) || math.IsNaN(v) {
		return json.Marshal(fmtNum(v))
	}
	return json.Marshal(v)
}

type jsonResult struct {
	Case       string         `json:"case"`
	Op         string         `json:"op"`
	Kind       string         `json:"kind"`
	Prov       string         `json:"prov"`
	Node       int            `json:"node"`
	NodeText   string         `json:"node_text"`
	Func       string         `json:"func"`
	Step       int            `json:"step"`
	Key        string         `json:"key"`
	Status     string         `json:"status"`
	Error      string         `json:"error,omitempty"`
	MaxAbs     num            `json:"max_abs"`
	MaxRel     num            `json:"max_rel"`
	ULP        *num           `json:"ulp,omitempty"`
	Cosine     num            `json:"cosine"`
	Ratio      num            `json:"ratio"`
	Mismatches int            `json:"mismatches"`
	Elements   int            `json:"elements"`
	Worst      int            `json:"worst_index"`
	ATol       num            `json:"atol"`
	RTol       num            `json:"rtol"`
	Rule       string         `json:"tolerance_rule"`
	Seconds    num            `json:"seconds"`
	Reference  string         `json:"reference"`
	KernelNS   int64          `json:"kernel_ns,omitempty"`
	Variation  *jsonVariation `json:"variation,omitempty"`
	Where      string         `json:"where,omitempty"`
	Compute    string         `json:"compute,omitempty"` // f16: carved under f16 compute
	Truth      *jsonTruth     `json:"truth,omitempty"`   // f16 cases: against the f32 truth
}

type jsonVariation struct {
	Runs      int    `json:"runs"`
	Output    int    `json:"output"`
	Varying   int    `json:"varying_elements"`
	MaxSpread num    `json:"max_spread"`
	Where     string `json:"where"`
}

type jsonReport struct {
	Bundle  string        `json:"bundle"`
	Model   string        `json:"model"`
	Target  string        `json:"target"`
	Device  string        `json:"device"`
	Cases   int           `json:"cases"`
	Passed  int           `json:"passed"`
	Failed  int           `json:"failed"`
	Seconds num           `json:"seconds"`
	Results []jsonResult  `json:"results"`
	Faults  []FaultResult `json:"injected_faults,omitempty"`
	Times   []OpTime      `json:"kernel_time,omitempty"`
}

// jsonTruth is an f16 case's comparison with the f32 truth.
type jsonTruth struct {
	MaxAbs num  `json:"max_abs"`
	MaxRel num  `json:"max_rel"`
	Pass   bool `json:"pass"`
}

// WriteJSON writes the report as JSON.
func (r *Report) WriteJSON(w io.Writer) error {
	jr := jsonReport{Bundle: r.Bundle, Model: r.Model, Target: r.Target, Device: r.Device, Cases: len(r.Results),
		Passed: r.Passed, Failed: r.Failed, Seconds: num(r.Duration.Seconds()), Results: []jsonResult{}, Faults: r.Faults}
	if r.Timed() {
		jr.Times = r.OpTimes()
	}
	for _, x := range r.Results {
		c := x.Case
		j := jsonResult{Case: c.ID, Op: c.Op, Kind: c.Kind, Prov: c.Prov, Node: c.Node, NodeText: c.NodeText, Func: c.Func,
			Step: c.Step, Key: c.Key, Status: strings.ToLower(x.Status()), Error: x.Err,
			MaxAbs: num(x.Metrics.MaxAbs), MaxRel: num(x.Metrics.MaxRel), Cosine: num(x.Metrics.Cosine),
			Ratio: num(x.Metrics.Ratio), Mismatches: x.Metrics.Mismatches, Elements: x.Metrics.Elements, Worst: x.Metrics.Worst,
			ATol: num(x.Tolerance.ATol), RTol: num(x.Tolerance.RTol), Rule: x.Tolerance.Rule, Seconds: num(x.Duration.Seconds())}
		if x.Metrics.HasULP {
			u := num(x.Metrics.ULP)
			j.ULP = &u
		}
		j.Reference, j.KernelNS = x.Reference, int64(x.Time)
		if v := x.Variation; v != nil {
			j.Variation = &jsonVariation{Runs: v.Runs, Output: v.Output, Varying: v.Varying, MaxSpread: num(v.MaxSpread), Where: v.Where.String()}
		}
		if _, g := x.errorGrid(); g.Marked > 0 {
			j.Where = g.String()
		}
		j.Compute = c.Compute
		if t := x.Truth; t != nil {
			j.Truth = &jsonTruth{MaxAbs: num(t.MaxAbs), MaxRel: num(t.MaxRel), Pass: t.Pass()}
		}
		jr.Results = append(jr.Results, j)
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(jr)
}

type junitSuites struct {
	XMLName  xml.Name     `xml:"testsuites"`
	Name     string       `xml:"name,attr"`
	Tests    int          `xml:"tests,attr"`
	Failures int          `xml:"failures,attr"`
	Errors   int          `xml:"errors,attr"`
	Time     string       `xml:"time,attr"`
	Suites   []junitSuite `xml:"testsuite"`
}

type junitSuite struct {
	Name       string          `xml:"name,attr"`
	Tests      int             `xml:"tests,attr"`
	Failures   int             `xml:"failures,attr"`
	Errors     int             `xml:"errors,attr"`
	Time       string          `xml:"time,attr"`
	Properties []junitProperty `xml:"properties>property,omitempty"`
	Cases      []junitCase     `xml:"testcase"`
}

type junitProperty struct {
	Name  string `xml:"name,attr"`
	Value string `xml:"value,attr"`
}

type junitCase struct {
	Name      string        `xml:"name,attr"`
	Classname string        `xml:"classname,attr"`
	Time      string        `xml:"time,attr"`
	Failure   *junitFailure `xml:"failure,omitempty"`
	Error     *junitFailure `xml:"error,omitempty"`
	SystemOut string        `xml:"system-out,omitempty"`
}

type junitFailure struct {
	Message string `xml:"message,attr"`
	Type    string `xml:"type,attr"`
	Body    string `xml:",chardata"`
}

// WriteJUnit writes the report as JUnit XML: one test suite per op, one
// test case per case (named "<id> <provenance>").
func (r *Report) WriteJUnit(w io.Writer) error {
	secs := func(d time.Duration) string { return strconv.FormatFloat(d.Seconds(), 'f', 3, 64) }
	suites := map[string]*junitSuite{}
	suiteTime := map[string]time.Duration{}
	var order []string
	out := junitSuites{Name: "tapml " + r.Target, Tests: len(r.Results), Time: secs(r.Duration)}
	for _, x := range r.Results {
		c := x.Case
		s := suites[c.Op]
		if s == nil {
			s = &junitSuite{Name: c.Op, Properties: []junitProperty{{"target", r.Target}, {"device", r.Device}, {"bundle", r.Bundle}}}
			suites[c.Op] = s
			order = append(order, c.Op)
		}
		name := c.ID
		if c.Prov != "" {
			name += " " + c.Prov
		}
		jc := junitCase{Name: name, Classname: "tapml." + c.Op, Time: secs(x.Duration),
			SystemOut: fmt.Sprintf("node: %s\nmax abs %s, max rel %s, ULP %s, cosine %s; tolerance atol %s rtol %s (%s)",
				c.NodeText, fmtNum(x.Metrics.MaxAbs), fmtNum(x.Metrics.MaxRel), fmtNum(x.Metrics.ULP), fmtNum(x.Metrics.Cosine),
				fmtNum(x.Tolerance.ATol), fmtNum(x.Tolerance.RTol), x.Tolerance.Rule)}
		s.Tests++
		suiteTime[c.Op] += x.Duration
		switch {
		case x.Err != "":
			jc.Error = &junitFailure{Message: firstLine(x.Err), Type: "error", Body: x.Err}
			s.Errors++
			out.Errors++
		case !x.Pass:
			msg := fmt.Sprintf("%d of %d elements out of tolerance: max abs %s, max rel %s, worst at element %d (%s× the tolerance)",
				x.Metrics.Mismatches, x.Metrics.Elements, fmtNum(x.Metrics.MaxAbs), fmtNum(x.Metrics.MaxRel), x.Metrics.Worst, fmtNum(x.Metrics.Ratio))
			jc.Failure = &junitFailure{Message: msg, Type: "tolerance", Body: msg + "\n" + c.NodeText}
			s.Failures++
			out.Failures++
		}
		s.Cases = append(s.Cases, jc)
	}
	for _, op := range order {
		suites[op].Time = secs(suiteTime[op])
		out.Suites = append(out.Suites, *suites[op])
	}
	if _, err := io.WriteString(w, xml.Header); err != nil {
		return err
	}
	enc := xml.NewEncoder(w)
	enc.Indent("", "  ")
	if err := enc.Encode(out); err != nil {
		return err
	}
	_, err := io.WriteString(w, "\n")
	return err
}

// WriteFiles writes the JSON, JUnit XML and HTML reports to the paths that
// are not empty, each atomically (a temporary file renamed into place).
func (r *Report) WriteFiles(jsonPath, junitPath, htmlPath string) error {
	for _, f := range []struct {
		path  string
		write func(io.Writer) error
	}{{jsonPath, r.WriteJSON}, {junitPath, r.WriteJUnit}, {htmlPath, r.WriteHTML}} {
		if f.path == "" {
			continue
		}
		var b bytes.Buffer
		if err := f.write(&b); err != nil {
			return fmt.Errorf("%s: %w", f.path, err)
		}
		if err := atomicfile.WriteFile(f.path, b.Bytes()); err != nil {
			return err
		}
	}
	return nil
}
