package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strings"
)

// Native is what native.py writes.
type Native struct {
	GPU          string  `json:"gpu"`
	Torch        string  `json:"torch"`
	Transformers string  `json:"transformers"`
	CopyTBs      float64 `json:"copy_tb_s"`
	Matmul       []struct {
		Name   string  `json:"name"`
		M      int     `json:"M"`
		N      int     `json:"N"`
		K      int     `json:"K"`
		T      bool    `json:"transpose_b"`
		GFLOPS float64 `json:"gflops"`
		Err    string  `json:"error"`
	} `json:"matmul"`
	LLM []struct {
		Model         string  `json:"model"`
		PrefillTokS   float64 `json:"prefill_tok_s"`
		DecodeTokS    float64 `json:"decode_tok_s"`
		DecodeMedTokS float64 `json:"decode_median_tok_s"`
		LogitsRelErr  float64 `json:"logits_rel_err"`
		TokensMatch   int     `json:"tokens_match"`
		TokensTotal   int     `json:"tokens_total"`
		Err           string  `json:"error"`
	} `json:"llm"`
	Errors []string `json:"errors"`
}

// Datasheet ceilings of an H200 SXM: HBM bandwidth and plain f32 rate.
const (
	hbmBytesPerS = 4.8e12
	f32PeakFLOPS = 67e12
)

func tableCmd(args []string) error {
	fs := flag.NewFlagSet("table", flag.ExitOnError)
	oursF := fs.String("ours", "ours.json", "benchgpu run's output")
	nativeF := fs.String("native", "native.json", "native.py's output")
	smiF := fs.String("smi", "", "nvidia-smi's output, quoted in the header")
	fs.Parse(args)
	var o Ours
	var n Native
	if err := readJSON(*oursF, &o); err != nil {
		return err
	}
	if err := readJSON(*nativeF, &n); err != nil {
		fmt.Fprintln(os.Stderr, "benchgpu: no native figures:", err)
	}
	p := func(format string, a ...any) { fmt.Printf(format+"\n", a...) }
	p("# tapml on a GPU against the native stack")
	p("")
	p("- date: %s", o.Date)
	p("- ours: %s (driver: %s), f32 WGSL through wgpu-native (Vulkan)", o.Adapter, o.Driver)
	p("- native: %s, torch %s (TF32 off), transformers %s (LlamaForCausalLM, eager attention, f32)", n.GPU, n.Torch, n.Transformers)
	if n.CopyTBs > 0 {
		p("- measured device-to-device copy: %.2f TB/s (bytes read + written)", n.CopyTBs)
	}
	p("- device defaults after this work: %s", o.Defaults)
	if *smiF != "" {
		if b, err := os.ReadFile(*smiF); err == nil {
			p("")
			p("```")
			p("%s", strings.TrimSpace(string(b)))
			p("```")
		}
	}
	p("")
	p("| measure | ours (defaults) | native | ours/native | bound | ours before | best variant | best variant's figure |")
	p("| --- | ---: | ---: | ---: | ---: | ---: | --- | ---: |")
	for _, m := range o.Matmul {
		nat := 0.0
		for _, x := range n.Matmul {
			if x.M == m.Shape.M && x.N == m.Shape.N && x.K == m.Shape.K && x.T == m.Shape.T {
				nat = x.GFLOPS
			}
		}
		// Bound: the f32 peak, or bandwidth for products that read more
		// bytes than they compute on (the GEMV).
		flops := 2 * float64(m.Shape.M) * float64(m.Shape.N) * float64(m.Shape.K)
		bytes := 4 * float64(m.Shape.M*m.Shape.K+m.Shape.K*m.Shape.N+m.Shape.M*m.Shape.N)
		bound := min(f32PeakFLOPS, flops/(bytes/hbmBytesPerS)) / 1e9
		p("| matmul %s, GFLOP/s | %.0f | %s | %s | %.0f | %.0f | %s | %.0f |", m.Shape.Name, m.Default.GFLOPS,
			fig(nat, "%.0f"), ratio(m.Default.GFLOPS, nat), bound, m.Before.GFLOPS, m.Best.Tuning, m.Best.GFLOPS)
	}
	for _, l := range o.LLM {
		var natPre, natDec, natMed, rel float64
		match, total := 0, 0
		nerr := ""
		for _, x := range n.LLM {
			if x.Model == l.Model {
				natPre, natDec, natMed, rel, match, total, nerr = x.PrefillTokS, x.DecodeTokS, x.DecodeMedTokS, x.LogitsRelErr, x.TokensMatch, x.TokensTotal, x.Err
			}
		}
		bound := hbmBytesPerS / (l.WeightBytes + l.KVBytes)
		p("| %s decode, tok/s | %.1f | %s | %s | %.0f | %.1f | %s | %.1f |", l.Model, l.Default.DecodeTokS, fig(natDec, "%.1f"),
			ratio(l.Default.DecodeTokS, natDec), bound, l.Before.DecodeTokS, l.Best.Config, l.Best.DecodeTokS)
		p("| %s decode, median step, tok/s | %.1f | %s | %s | | %.1f | | |", l.Model, l.Default.DecodeMedTokS, fig(natMed, "%.1f"),
			ratio(l.Default.DecodeMedTokS, natMed), l.Before.DecodeMedTokS)
		bestPre := l.Best
		for _, r := range l.Runs {
			if r.Err == "" && r.PrefillTokS > bestPre.PrefillTokS {
				bestPre = r
			}
		}
		p("| %s prefill %d tokens, tok/s | %.0f | %s | %s | | %.0f | %s | %.0f |", l.Model, len(l.Prompt), l.Default.PrefillTokS,
			fig(natPre, "%.0f"), ratio(l.Default.PrefillTokS, natPre), l.Before.PrefillTokS, bestPre.Config, bestPre.PrefillTokS)
		defer func(l LLMResult) {
			p("- %s: weights read per decode token %.3f GB, KV %.1f MB (mean position); same function check against transformers: "+
				"logits of the prompt's last token rel. error %.2g, greedy tokens equal %d of %d %s", l.Model, l.WeightBytes/1e9, l.KVBytes/1e6, rel, match, total, nerr)
		}(l)
	}
	p("")
	p("Bound: matmul, min(f32 peak %.0f TFLOP/s, bytes / %.1f TB/s); decode, %.1f TB/s over the bytes of weights and KV read per token.", f32PeakFLOPS/1e12, hbmBytesPerS/1e12, hbmBytesPerS/1e12)
	p("\"ours before\": the kernels before this tuning (64x64 scalar tile, GEMV without unrolling, a submission every 64 dispatches), measured in the same run.")
	p("\"best variant\": the fastest of the tunings and batch sizes this run tried (bench/gpu/main.go); a single run of each, so differences of a few percent are noise.")
	p("")
	if len(n.Errors) > 0 {
		p("native errors: %s", strings.Join(n.Errors, "; "))
	}
	return nil
}

func fig(v float64, format string) string {
	if v <= 0 {
		return "-"
	}
	return fmt.Sprintf(format, v)
}

func ratio(a, b float64) string {
	if a <= 0 || b <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f", a/b)
}

func readJSON(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}
