package hf

import (
	"encoding/json"
	rtarget "github.com/tapml/tapml/runtime/target"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/tapml/tapml/internal/testenv/llmtest"
	"github.com/tapml/tapml/internal/testenv/targettest"
	"github.com/tapml/tapml/ir"
	"github.com/tapml/tapml/runtime"
	"github.com/tapml/tapml/runtime/llm"
	"github.com/tapml/tapml/tensor/safetensors"
)

// The oracle of every architecture is transformers itself: testdata/models
// holds tiny checkpoints that transformers wrote (scripts/hf_fixtures.py),
// with its logits for a prompt and 16 greedy decode steps. Each one Load
// builds runs on every local target and must give those logits.

// fixturesBuilt are the fixtures whose architecture and features Load
// builds today. Every other fixture must be refused by Load with an error
// that names its architecture or the unsupported setting, never loaded
// half-understood.
var fixturesBuilt = map[string]bool{
	"cohere":               true,
	"falcon":               true,
	"gemma":                true,
	"gemma2":               true,
	"gemma3":               true,
	"gpt2":                 true,
	"gpt2_untied":          true,
	"gpt_bigcode":          true,
	"gpt_neox":             true,
	"granite":              true,
	"llama":                true,
	"llama_bos_config":     true,
	"llama_rope_dynamic":   true,
	"llama_rope_linear":    true,
	"llama_rope_llama3":    true,
	"llama_rope_llama3_v4": true,
	"llama_rope_yarn":      true,
	"llama_tied":           true,
	"llama_v4":             true,
	"mamba":                true,
	"mistral":              true,
	"mixtral":              true,
	"olmo2":                true,
	"phi":                  true,
	"phi3":                 true,
	"phi3_longrope":        true,
	"phi3_su_v4":           true,
	"qwen2":                true,
	"qwen2_moe":            true,
	"qwen3":                true,
	"qwen3_moe":            true,
	"rwkv":                 true,
	"stablelm":             true,
	"starcoder2":           true,
}

// fixtureTol bounds max|got - want| / max|want| over a step's logits. Both
// sides compute in f32; the models' sums run over at most 64 terms (K·eps
// = 64 · 1.2e-7 ≈ 8e-6 per product, through two layers, a softmax and the
// classifier), and the observed errors are about 1e-6, while a wrong RoPE
// frequency, norm or mask moves the logits by 1e-2 or more.
const fixtureTol = 1e-4

// fixtureRef is what a fixture's reference files hold.
type fixtureRef struct {
	Architecture string `json:"architecture"`
	Features     []string
	Prompt       string
	PromptIDs    []int `json:"prompt_ids"`
	Tokens       []int
	Tokenizer    struct {
		EOS         int  `json:"eos_token_id"`
		PrependsBOS bool `json:"prepends_bos"`
	}
	Config struct {
		Vocab int        `json:"vocab_size"`
		EOS   jsonIDList `json:"eos_token_id"`
	}
	// EOS and StopsAfter: the generation_config.json list of EOS ids of
	// a fixture that has one, and the number of greedy tokens after which
	// transformers' generate stops there.
	EOS        []int `json:"eos_token_id"`
	StopsAfter int   `json:"stops_after"`
	stepLogits [][]float32
}

// jsonIDList reads a token id or a list of them.
type jsonIDList []int

func (l *jsonIDList) UnmarshalJSON(b []byte) error {
	var one int
	if json.Unmarshal(b, &one) == nil {
		*l = []int{one}
		return nil
	}
	return json.Unmarshal(b, (*[]int)(l))
}

func readFixtureRef(t *testing.T, dir string) *fixtureRef {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, "reference.json"))
	if err != nil {
		t.Fatal(err)
	}
	ref := &fixtureRef{}
	if err := json.Unmarshal(data, ref); err != nil {
		t.Fatalf("%s: %v", dir, err)
	}
	ts, _, err := safetensors.ReadFile(filepath.Join(dir, "reference.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	steps := ts["step_logits"]
	if steps == nil || len(steps.Shape) != 2 || steps.Shape[0] != len(ref.Tokens) {
		t.Fatalf("%s: step_logits %v for %d tokens", dir, steps, len(ref.Tokens))
	}
	all, v := steps.Float32s(), steps.Shape[1]
	for i := range ref.Tokens {
		ref.stepLogits = append(ref.stepLogits, all[i*v:(i+1)*v])
	}
	return ref
}

func fixtureDirs(t testing.TB) []string {
	t.Helper()
	dirs, err := filepath.Glob(filepath.Join("testdata", "models", "*", "reference.json"))
	if err != nil || len(dirs) == 0 {
		t.Fatalf("no fixtures under testdata/models (%v)", err)
	}
	for i := range dirs {
		dirs[i] = filepath.Dir(dirs[i])
	}
	slices.Sort(dirs)
	return dirs
}

func TestTransformersFixtures(t *testing.T) {
	for _, dir := range fixtureDirs(t) {
		name := filepath.Base(dir)
		t.Run(name, func(t *testing.T) {
			ref := readFixtureRef(t, dir)
			m, _, err := Load(dir)
			if !fixturesBuilt[name] {
				if err == nil {
					t.Fatalf("%s (%v) loads: add it to fixturesBuilt", ref.Architecture, ref.Features)
				}
				t.Logf("refused as it should be: %v", err)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for _, target := range targettest.Local {
				t.Run(target, func(t *testing.T) {
					checkFixture(t, m, ref, targettest.Device(t, target))
				})
			}
			// As tapmlc run prepares it: lowered by the default pipeline
			// (fused decode kernels: rms_norm_qkv, rms_norm_swiglu, ...).
			t.Run("vulkan-lowered", func(t *testing.T) {
				dev := targettest.Device(t, "vulkan")
				lowered, _, err := rtarget.ForDevice(m.Clone(), dev, "vulkan", false)
				if err != nil {
					t.Fatal(err)
				}
				llmtest.CheckRopeFused(t, lowered)
				checkFixture(t, lowered, ref, dev)
			})
		})
	}
}

// checkFixture feeds the reference's prompt and greedy tokens to m on dev
// and compares each step's logits with transformers'.
func checkFixture(t *testing.T, m *ir.Module, ref *fixtureRef, dev runtime.Device) {
	run := llmtest.NewRunnerOn(t, m, dev)
	logits := run.Forward(t, ref.PromptIDs)
	worst := 0.0
	for i, want := range ref.stepLogits {
		w := llmtest.Widen(want)
		e, at := llmtest.RelErr(logits, w)
		worst = max(worst, e)
		if !(e <= fixtureTol) {
			t.Fatalf("step %d: max |Δlogit| / max |logit| = %.3g > %g (at token %d: ours %g, transformers %g)",
				i, e, fixtureTol, at, logits[at], want[at])
		}
		// The greedy token must agree unless the reference's top two are
		// closer than the tolerance allows the two sides to differ.
		if got := llm.Argmax(logits); got != ref.Tokens[i] && clearWinner(want, 2*fixtureTol) {
			t.Fatalf("step %d: greedy token %d, transformers %d", i, got, ref.Tokens[i])
		}
		if i+1 < len(ref.Tokens) {
			logits = run.Forward(t, []int{ref.Tokens[i]})
		}
	}
	t.Logf("%d steps, worst relative error %.2g", len(ref.stepLogits), worst)
}

// clearWinner reports whether the largest logit beats the second by more
// than rel·max|logit|.
func clearWinner(x []float32, rel float64) bool {
	first, second, scale := float32(-1e38), float32(-1e38), float32(0)
	for _, v := range x {
		scale = max(scale, v, -v)
		if v > first {
			first, second = v, first
		} else if v > second {
			second = v
		}
	}
	return float64(first-second) > rel*float64(scale)
}

// TestTransformersFixturesRefusedClearly checks that an architecture Load
// does not build is one error that says so.
func TestTransformersFixturesRefusedClearly(t *testing.T) {
	for _, dir := range fixtureDirs(t) {
		name := filepath.Base(dir)
		if fixturesBuilt[name] {
			continue
		}
		_, _, err := Load(dir)
		if err == nil {
			continue // TestTransformersFixtures reports it
		}
		if msg := err.Error(); !strings.Contains(msg, dir) {
			t.Errorf("%s: the error does not name the folder: %v", name, err)
		}
	}
}

// TestTransformersFixturesPromptIDs checks the semantics around a prompt
// that transformers decides: the tokenizer the loader builds (the one
// `tapmlc run` encodes with) gives the reference's prompt ids exactly,
// with BOS only where the tokenizer's files prepend one (config.json's
// bos_token_id never adds one), and generation ends at the model's EOS
// ids, generation_config.json's list included.
func TestTransformersFixturesPromptIDs(t *testing.T) {
	for _, dir := range fixtureDirs(t) {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			ref := readFixtureRef(t, dir)
			// What Load does for the tokenizer, also for the fixtures
			// whose architecture is not built.
			cfg := &Config{Vocab: ref.Config.Vocab, EOG: ref.Config.EOS}
			if err := cfg.readGenerationConfig(filepath.Join(dir, GenerationConfigFile)); err != nil {
				t.Fatal(err)
			}
			tok, err := loadTokenizer(filepath.Join(dir, TokenizerFile), cfg)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(ref.PromptIDs, tok.Encode(ref.Prompt, true, false)); diff != "" {
				t.Errorf("prompt ids (-transformers +ours):\n%s", diff)
			}
			if got := tok.BOS() >= 0; got != ref.Tokenizer.PrependsBOS {
				t.Errorf("tokenizer prepends BOS: %v, transformers' %v", got, ref.Tokenizer.PrependsBOS)
			}
			eos := ref.EOS
			if eos == nil {
				eos = []int{ref.Tokenizer.EOS}
			}
			if diff := cmp.Diff(eos, tok.EOG()); diff != "" {
				t.Errorf("end-of-generation ids (-transformers +ours):\n%s", diff)
			}
		})
	}
}
