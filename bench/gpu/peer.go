package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/tapml/tapml/codegen/spirv"
	"github.com/tapml/tapml/frontend"
	"github.com/tapml/tapml/ir"
	"github.com/tapml/tapml/runtime"
	"github.com/tapml/tapml/runtime/llm"
	"github.com/tapml/tapml/runtime/target"
	"github.com/tapml/tapml/runtime/vulkan"
)

// peerRun is one measured generation: a prompt through prefill, then
// greedy decode steps.
type peerRun struct {
	Device      string  `json:"device,omitempty"`
	PrefillTokS float64 `json:"prefill_tok_s"`
	DecodeTokS  float64 `json:"decode_tok_s"`
	CompileMS   float64 `json:"compile_ms"` // kernel compilation within the run (tapml only)
}

// peerPrompt is llamabench's prompt: the same token ids on both sides.
func peerPrompt(n, vocab int) []int {
	p := make([]int, n)
	for i := range p {
		p[i] = 1 + (i*7919+13)%(vocab-1)
	}
	return p
}

// tapmlCmd measures the path a user's `tapmlc run` takes on one model and
// target, in this process: the model loaded and lowered as run lowers it,
// the weights uploaded, then sessions of a prompt and greedy decode steps
// (Session.Next: a decode step replays its recorded commands and
// downloads one id). The first session compiles the kernels (cold); the
// others find them (warm). One JSON line per session on stdout.
func tapmlCmd(args []string) error {
	fs := flag.NewFlagSet("tapml", flag.ExitOnError)
	tgt := fs.String("target", "vulkan", "tapml target, with /f16 for f16 compute (vulkan/f16: tapmlc's --compute f16)")
	model := fs.String("model", "", "model file (a GGUF file)")
	prefill := fs.Int("prefill", 128, "prompt tokens")
	decode := fs.Int("decode", 64, "decode steps")
	sessions := fs.Int("sessions", 3, "generations: the first cold, the rest warm")
	cpuprofile := fs.String("cpuprofile", "", "write a CPU profile of the warm sessions here")
	fs.Parse(args)
	return measureTapml(os.Stdout, *tgt, *model, *prefill, *decode, *sessions, *cpuprofile)
}

// measureTapml is tapmlCmd, writing to w.
func measureTapml(w io.Writer, tgt, model string, prefill, decode, sessions int, cpuprofile string) error {
	if model == "" || prefill < 1 || decode < 1 || sessions < 1 {
		return fmt.Errorf("tapml: -model is required; -prefill, -decode and -sessions must be positive")
	}
	tm, err := openTapml(tgt, model, prefill+decode+16)
	if err != nil {
		return err
	}
	defer tm.close()
	prompt := peerPrompt(prefill, tm.vocab)
	enc := json.NewEncoder(w)
	for i := range sessions {
		if i == 1 && cpuprofile != "" {
			stop, err := startCPUProfile(cpuprofile)
			if err != nil {
				return err
			}
			defer stop()
		}
		st, err := generate(tm.exec, prompt, decode)
		if err != nil {
			return err
		}
		err = enc.Encode(peerRun{
			Device:      tm.dev.Name(),
			PrefillTokS: llm.TokensPerSecond(st.PromptTokens, st.PromptTime),
			DecodeTokS:  llm.TokensPerSecond(st.DecodeTokens, st.DecodeTime),
			CompileMS:   float64(st.PromptCompile+st.DecodeCompile) / float64(time.Millisecond),
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// tapmlModel is a model prepared as tapmlc run prepares it: loaded, its
// context fitted, lowered for the device and its weights uploaded.
type tapmlModel struct {
	dev   runtime.Device
	exec  *runtime.Executor
	vocab int
}

// webgpuKernels is the target name of the webgpu target's kernels run
// on the vulkan device (openTapml).
const webgpuKernels = "vulkan/webgpu"

func openTapml(tgt, model string, context int) (*tapmlModel, error) {
	m, err := frontend.Load(model, frontend.Options{})
	if err != nil {
		return nil, err
	}
	if err := llm.FitContext(m.Module, context); err != nil {
		return nil, err
	}
	name, f16 := strings.CutSuffix(tgt, "/f16")
	prec := runtime.F32
	if f16 {
		prec = runtime.Precision{Compute: ir.F16, Accumulate: ir.F32}
	}
	var dev runtime.Device
	got := prec
	if name == webgpuKernels {
		// The webgpu target's model and kernels (no f16, subgroup
		// operations or subgroup matrices: naga has none) on the Vulkan
		// device, whose timestamps time each command.
		if f16 {
			return nil, fmt.Errorf("%s: the webgpu target does not compute in f16", tgt)
		}
		dev, err = vulkan.Open(vulkan.Options{Generate: spirv.Generate, NoF16: true, NoSubgroups: true, NoSubgroupMatrix: true})
		name = "webgpu"
	} else {
		dev, got, err = target.OpenPrecision(name, "", prec, os.Stderr)
	}
	if err != nil {
		return nil, err
	}
	if got != prec {
		dev.Close()
		return nil, fmt.Errorf("%s: the device does not compute in f16", tgt)
	}
	lowered, _, err := target.ForDevice(m.Module, dev, name, false)
	if err != nil {
		dev.Close()
		return nil, err
	}
	logits := lowered.Func("decode").Results[0].Type.Shape
	vocab := logits[logits.Rank()-1]
	if !vocab.IsStatic() {
		dev.Close()
		return nil, fmt.Errorf("%s: the logits' last dim is not static", model)
	}
	exec := runtime.NewExecutor(lowered, dev)
	exec.Capture = true
	start := time.Now()
	if err := exec.UploadWeights("prefill", "decode"); err != nil {
		exec.Close()
		dev.Close()
		return nil, err
	}
	logf("%s on %s: weights uploaded in %s", model, dev.Name(), time.Since(start).Round(time.Millisecond))
	return &tapmlModel{dev: dev, exec: exec, vocab: int(vocab.Size)}, nil
}

func (t *tapmlModel) close() {
	t.exec.Close()
	t.dev.Close()
}

// generate runs one greedy generation as tapmlc run does and returns its
// timings.
func generate(exec *runtime.Executor, prompt []int, steps int) (llm.Stats, error) {
	s, err := llm.NewSession(exec)
	if err != nil {
		return llm.Stats{}, err
	}
	defer s.Close()
	_, err = s.Continue(prompt, steps, llm.NewSampler(0, 0, 1))
	return s.Stats, err
}

// peerCmd measures tapml's targets and llama.cpp on the same GGUF files
// and writes the table of issue 16: prefill and decode tokens/s, warm and
// cold, with tapml's ratios to llama.cpp.
func peerCmd(args []string) error {
	fs := flag.NewFlagSet("peer", flag.ExitOnError)
	files := fs.String("files", "", "GGUF files, comma-separated (benchgpu gguf writes them)")
	targets := fs.String("targets", "vulkan,webgpu", "tapml targets, comma-separated (vulkan/f16: f16 compute, see tapml -target)")
	llamabench := fs.String("llamabench", "", "llama.cpp's harness (bench/gpu/llamacpp/llamabench.c built against the Vulkan build); empty: no llama.cpp column")
	backends := fs.String("backends", "", "the folder of ggml's backends, for llamabench")
	peerName := fs.String("peer", "llama.cpp Vulkan", "the name of llama.cpp's column")
	prefill := fs.Int("prefill", 128, "prompt tokens")
	decode := fs.Int("decode", 64, "decode steps")
	repeats := fs.Int("repeats", 3, "warm runs of each (the median is reported, with the decode spread)")
	out := fs.String("o", filepath.Join("bench", "results", time.Now().UTC().Format("2006-01-02")+"-peer.md"), "the markdown table's file (also printed)")
	fs.Parse(args)
	if *files == "" {
		return fmt.Errorf("peer: -files is required")
	}
	if *repeats < 1 || *prefill < 1 || *decode < 1 {
		return fmt.Errorf("peer: -prefill, -decode and -repeats must be positive")
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	tab := peerTable{Peer: *peerName, Targets: split(*targets), Prefill: *prefill, Decode: *decode, Date: time.Now().UTC().Format("2006-01-02 15:04 MST")}
	for _, f := range split(*files) {
		row := peerRow{File: filepath.Base(f), Tapml: map[string]peerResult{}}
		for _, t := range tab.Targets {
			row.Tapml[t] = tapmlRuns(self, t, f, *prefill, *decode, *repeats)
			logf("%s on %s: %s", row.File, t, row.Tapml[t].summary())
		}
		if *llamabench != "" {
			row.Peer = llamaRuns(*llamabench, *backends, f, *prefill, *decode, *repeats)
			logf("%s on %s: %s", row.File, *peerName, row.Peer.summary())
		}
		tab.Rows = append(tab.Rows, row)
	}
	var b bytes.Buffer
	tab.write(&b, *llamabench != "")
	os.Stdout.Write(b.Bytes())
	if err := os.MkdirAll(filepath.Dir(*out), 0o755); err != nil {
		return err
	}
	return os.WriteFile(*out, b.Bytes(), 0o644)
}

func split(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// peerResult is one system's runs on one file: the cold one first.
type peerResult struct {
	Runs []peerRun
	Err  string
}

// tapmlRuns measures a target in a fresh process (benchgpu tapml) with an
// empty cache folder, so that its first session compiles every kernel and
// pipeline, as a user's first run does.
func tapmlRuns(self, tgt, file string, prefill, decode, repeats int) peerResult {
	cache, err := os.MkdirTemp("", "benchgpu-cache-")
	if err != nil {
		return peerResult{Err: err.Error()}
	}
	defer os.RemoveAll(cache)
	cmd := exec.Command(self, "tapml", "-target", tgt, "-model", file, "-prefill", strconv.Itoa(prefill),
		"-decode", strconv.Itoa(decode), "-sessions", strconv.Itoa(1+repeats))
	cmd.Env = append(os.Environ(), "XDG_CACHE_HOME="+cache)
	var stdout bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, os.Stderr
	err = cmd.Run()
	var res peerResult
	dec := json.NewDecoder(&stdout)
	for {
		var r peerRun
		if derr := dec.Decode(&r); derr == io.EOF {
			break
		} else if derr != nil {
			return peerResult{Err: "benchgpu tapml's output: " + derr.Error()}
		}
		res.Runs = append(res.Runs, r)
	}
	if err != nil {
		res.Err = fmt.Sprintf("benchgpu tapml -target %s: %v", tgt, err)
	}
	return res
}

// llamaLine is a run's line of llamabench.
var llamaLine = regexp.MustCompile(`^run \d+ prefill_tok_s ([0-9.]+) decode_tok_s ([0-9.]+)`)

// llamaRuns runs llamabench: it warms up (a prompt and 4 steps) and then
// prints one line per run, each in a fresh context. llama.cpp compiles its
// pipelines when it loads the model, so its first printed run stands for
// its cold one.
func llamaRuns(bin, backends, file string, prefill, decode, repeats int) peerResult {
	cmd := exec.Command(bin, backends, file, strconv.Itoa(prefill), strconv.Itoa(decode), strconv.Itoa(1+repeats))
	var stdout bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, os.Stderr
	err := cmd.Run()
	res := parseLlamaRuns(&stdout)
	if err != nil {
		res.Err = fmt.Sprintf("%s: %v", filepath.Base(bin), err)
	}
	return res
}

// parseLlamaRuns reads llamabench's run lines.
func parseLlamaRuns(r io.Reader) peerResult {
	var res peerResult
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		m := llamaLine.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		p, _ := strconv.ParseFloat(m[1], 64)
		d, _ := strconv.ParseFloat(m[2], 64)
		res.Runs = append(res.Runs, peerRun{PrefillTokS: p, DecodeTokS: d})
	}
	return res
}

// cold is the first run; warm the median prefill and the median decode
// rate of the others, each with its range (lo and hi hold the least and
// the greatest of each rate).
func (r peerResult) cold() (peerRun, bool) {
	if len(r.Runs) == 0 {
		return peerRun{}, false
	}
	return r.Runs[0], true
}

func (r peerResult) warm() (med, lo, hi peerRun, ok bool) {
	if len(r.Runs) < 2 {
		return peerRun{}, peerRun{}, peerRun{}, false
	}
	w := append([]peerRun(nil), r.Runs[1:]...)
	sort.Slice(w, func(i, j int) bool { return w[i].PrefillTokS < w[j].PrefillTokS })
	prefill := w[len(w)/2].PrefillTokS
	lo.PrefillTokS, hi.PrefillTokS = w[0].PrefillTokS, w[len(w)-1].PrefillTokS
	sort.Slice(w, func(i, j int) bool { return w[i].DecodeTokS < w[j].DecodeTokS })
	// Each rate's own median: one run's slow prompt must not stand for
	// the prefill because its decode was the median.
	med = w[len(w)/2]
	med.PrefillTokS = prefill
	lo.DecodeTokS, hi.DecodeTokS = w[0].DecodeTokS, w[len(w)-1].DecodeTokS
	return med, lo, hi, true
}

func (r peerResult) summary() string {
	var parts []string
	for _, x := range r.Runs {
		parts = append(parts, fmt.Sprintf("%.0f/%.1f", x.PrefillTokS, x.DecodeTokS))
	}
	s := "prefill/decode tok/s " + strings.Join(parts, ", ")
	if r.Err != "" {
		s += " (" + r.Err + ")"
	}
	return s
}

type peerRow struct {
	File  string
	Peer  peerResult
	Tapml map[string]peerResult
}

type peerTable struct {
	Peer            string
	Targets         []string
	Prefill, Decode int
	Date            string
	Rows            []peerRow
}

// write prints the table in markdown: per file a warm row and a cold row;
// each cell prefill / decode tokens/s, tapml's ratios to the peer.
func (t peerTable) write(w io.Writer, withPeer bool) {
	p := func(format string, a ...any) { fmt.Fprintf(w, format+"\n", a...) }
	p("# tapml against %s on the same GGUF files", t.Peer)
	p("")
	p("- date: %s; `benchgpu peer`, prompt %d tokens, %d greedy decode steps", t.Date, t.Prefill, t.Decode)
	for _, tg := range t.Targets {
		for _, r := range t.Rows {
			if len(r.Tapml[tg].Runs) > 0 {
				p("- tapml %s: %s", tg, r.Tapml[tg].Runs[0].Device)
				break
			}
		}
	}
	p("- warm: the median prefill and the median decode rate of the runs after the first (each one's min-max in brackets); cold: the first run")
	p("  (tapml: a fresh process with empty caches, kernels compiled in the run, their time in brackets; llama.cpp compiles")
	p("  its pipelines at load, its first run follows a short warm-up)")
	p("")
	head := "| file | run |"
	rule := "|---|---|"
	if withPeer {
		head += " " + t.Peer + " prefill / decode tok/s |"
		rule += "---:|"
	}
	for _, tg := range t.Targets {
		head += " tapml " + tg + " |"
		rule += "---:|"
		if withPeer {
			head += " " + tg + " / peer |"
			rule += "---:|"
		}
	}
	p("%s", head)
	p("%s", rule)
	for _, r := range t.Rows {
		for _, kind := range []string{"warm", "cold"} {
			line := "| " + r.File + " | " + kind + " |"
			var peer peerRun
			var havePeer bool
			if withPeer {
				var cell string
				peer, cell, havePeer = pick(r.Peer, kind, false)
				line += " " + cell + " |"
			}
			for _, tg := range t.Targets {
				run, cell, ok := pick(r.Tapml[tg], kind, true)
				line += " " + cell + " |"
				if withPeer {
					ratio := "-"
					if ok && havePeer && peer.PrefillTokS > 0 && peer.DecodeTokS > 0 {
						ratio = fmt.Sprintf("%.2f / %.2f", run.PrefillTokS/peer.PrefillTokS, run.DecodeTokS/peer.DecodeTokS)
					}
					line += " " + ratio + " |"
				}
			}
			p("%s", line)
		}
	}
	var notes []string
	for _, r := range t.Rows {
		if r.Peer.Err != "" {
			notes = append(notes, fmt.Sprintf("- %s, %s: %s", r.File, t.Peer, r.Peer.Err))
		}
		for _, tg := range t.Targets {
			if e := r.Tapml[tg].Err; e != "" {
				notes = append(notes, fmt.Sprintf("- %s, tapml %s: %s", r.File, tg, e))
			}
		}
	}
	if len(notes) > 0 {
		p("")
		p("%s", strings.Join(notes, "\n"))
	}
}

// pick returns the warm or cold run of a result and its cell.
func pick(r peerResult, kind string, compile bool) (peerRun, string, bool) {
	if kind == "cold" {
		run, ok := r.cold()
		if !ok {
			return run, "failed", false
		}
		cell := fmt.Sprintf("%s / %s", num(run.PrefillTokS), num(run.DecodeTokS))
		if compile {
			cell += fmt.Sprintf(" (%s ms)", num(run.CompileMS))
		}
		return run, cell, true
	}
	run, lo, hi, ok := r.warm()
	if !ok {
		return run, "failed", false
	}
	return run, fmt.Sprintf("%s (%s-%s) / %s (%s-%s)", num(run.PrefillTokS), num(lo.PrefillTokS), num(hi.PrefillTokS),
		num(run.DecodeTokS), num(lo.DecodeTokS), num(hi.DecodeTokS)), true
}

// num prints a rate with thousands separators, one decimal below 100.
func num(x float64) string {
	if x < 100 {
		return strconv.FormatFloat(x, 'f', 1, 64)
	}
	s := strconv.FormatInt(int64(x+0.5), 10)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
