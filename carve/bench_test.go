package carve

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/tapml/tapml/frontend/arch"
	"github.com/tapml/tapml/frontend/arch/llama"
	"github.com/tapml/tapml/frontend/tokenizer/sentencepiece"
	"github.com/tapml/tapml/ir"
	"github.com/tapml/tapml/runtime/llm"
)

// noStop ends generation at no token, so a model with random weights runs
// every step instead of stopping at BOS.
type noStop struct{ llm.Tokenizer }

func (noStop) IsEOG(int) bool { return false }

// BenchmarkCarve measures the carving overhead: the run time of the probed,
// recording run over the plain run of the same compiled pipeline (both on
// the CPU reference, prefill plus decode steps), and the bundle's size.
func BenchmarkCarve(b *testing.B) {
	type model struct {
		name string
		load func(b *testing.B) (*ir.Module, llm.Tokenizer)
	}
	const prompt, steps = "Once upon a time", 48
	for _, m := range []model{
		{"stories260K", func(b *testing.B) (*ir.Module, llm.Tokenizer) {
			fm := loadStories(b)
			return fm.Module, fm.Tokenizer
		}},
		{"stories15M-shaped", func(b *testing.B) (*ir.Module, llm.Tokenizer) {
			mod, err := arch.Build("stories15M-random", llama.Stories15M, llama.RandomWeights(llama.Stories15M, 1))
			if err != nil {
				b.Fatal(err)
			}
			return mod, noStop{sentencepiece.NewBytes()}
		}},
	} {
		b.Run(m.name, func(b *testing.B) {
			mod, tok := m.load(b)
			plain, _, err := Compile(mod, nil, false, nil)
			if err != nil {
				b.Fatal(err)
			}
			probed, _, err := Compile(mod, nil, true, nil)
			if err != nil {
				b.Fatal(err)
			}
			var tPlain, tProbed time.Duration
			var bytes int64
			var rec *Recording
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				r := NewRecorder(plain, 1, Policy{}, false)
				start := time.Now()
				if _, err := r.Generate(tok, prompt, steps, nil); err != nil {
					b.Fatal(err)
				}
				tPlain += time.Since(start)
				r.Close()

				r = NewRecorder(probed, 1, Policy{}, true)
				start = time.Now()
				gen, err := r.Generate(tok, prompt, steps, nil)
				if err != nil {
					b.Fatal(err)
				}
				tProbed += time.Since(start)
				r.Close()
				rec = &Recording{Module: probed, Cases: r.Cases(), Stats: r.Stats, Model: mod.Name, Prompt: prompt, Steps: steps, Keep: 1, Generated: gen}
				if bytes, err = rec.Write(filepath.Join(b.TempDir(), "tests")); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(tProbed)/float64(tPlain), "probed/plain")
			b.ReportMetric(float64(tPlain.Milliseconds())/float64(b.N), "plain-ms/run")
			b.ReportMetric(float64(tProbed.Milliseconds())/float64(b.N), "probed-ms/run")
			b.ReportMetric(float64(bytes)/1e6, "bundle-MB")
			b.ReportMetric(float64(rec.Stats.Calls), "calls")
			b.ReportMetric(float64(rec.Stats.Kept), "cases")
		})
	}
}
