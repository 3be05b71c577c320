package llm

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/tapml/tapml/frontend/arch"
	"github.com/tapml/tapml/frontend/arch/llama"
	"github.com/tapml/tapml/frontend/tokenizer/sentencepiece"
	"github.com/tapml/tapml/ir"
	"github.com/tapml/tapml/runtime"
	"github.com/tapml/tapml/runtime/cpu"
	"github.com/tapml/tapml/tensor"
)

func tinySession(t *testing.T) *Session {
	t.Helper()
	m, err := arch.Build("tiny", llama.Tiny, llama.RandomWeights(llama.Tiny, 7))
	if err != nil {
		t.Fatal(err)
	}
	return cpuSession(t, m)
}

// cpuSession is a session of m on the CPU reference, closed with the test.
func cpuSession(t *testing.T, m *ir.Module) *Session {
	t.Helper()
	exec := runtime.NewExecutor(m, cpu.New())
	t.Cleanup(exec.Close)
	s, err := NewSession(exec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

func TestGenerateCountsPositionsLikeRunC(t *testing.T) {
	tok := sentencepiece.NewBytes()
	for _, tc := range []struct {
		prompt     string
		steps      int
		wantPieces int // pieces emitted: prompt echo + generated, as run.c prints
	}{
		{"", 10, 10},
		{"ab", 10, 10},   // BOS, ' ', a, b: 3 echoed pieces, 7 generated
		{"abcdef", 4, 4}, // prompt longer than steps: echo only
		{"abc", 4, 4},    // prompt exactly steps long: 3 echoed, 1 generated
	} {
		s := tinySession(t)
		var pieces []string
		out, err := Generate(s, tok, tc.prompt, tc.steps, NewSampler(0, 0, 1), func(p string) error {
			pieces = append(pieces, p)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		// The random tiny model may sample BOS and stop early; it does not for seed 7.
		if len(pieces) != tc.wantPieces {
			t.Errorf("prompt %q steps %d: %d pieces (%d generated), want %d", tc.prompt, tc.steps, len(pieces), len(out), tc.wantPieces)
		}
		if ids := tok.Encode(tc.prompt, true, false); len(ids) <= tc.steps && s.Pos != tc.steps {
			t.Errorf("prompt %q steps %d: processed %d positions", tc.prompt, tc.steps, s.Pos)
		}
	}
}

func TestForwardErrors(t *testing.T) {
	s := tinySession(t)
	if _, err := s.Forward(nil); err == nil {
		t.Error("forward of no tokens succeeded")
	}
	s.Pos = s.MaxSeq - 1
	if _, err := s.Forward([]int{1, 2}); err == nil || !strings.Contains(err.Error(), "context full") {
		t.Errorf("overflowing the cache: %v", err)
	}
}

func TestSampler(t *testing.T) {
	logits := []float32{1, 5, 5, -2}
	if got := NewSampler(0, 0, 1).Sample(logits); got != 1 {
		t.Errorf("greedy picked %d, want the first maximum 1", got)
	}
	// Top-p 0.5 keeps only the two leaders (each ~0.49 of the mass).
	s := NewSampler(1, 0.5, 3)
	for i := 0; i < 100; i++ {
		if got := s.Sample(logits); got != 1 && got != 2 {
			t.Fatalf("top-p sampled %d", got)
		}
	}
	// At temperature 1 without top-p, frequencies follow the softmax.
	s = NewSampler(1, 0, 5)
	counts := make([]int, len(logits))
	const n = 20000
	for i := 0; i < n; i++ {
		counts[s.Sample(logits)]++
	}
	z := 0.0
	for _, l := range logits {
		z += math.Exp(float64(l))
	}
	for i, l := range logits {
		p := math.Exp(float64(l)) / z
		got := float64(counts[i]) / n
		// 5 standard deviations of a binomial proportion.
		if tol := 5 * math.Sqrt(p*(1-p)/n); math.Abs(got-p) > tol+1e-9 {
			t.Errorf("token %d: frequency %.4f, want %.4f ± %.4f", i, got, p, tol)
		}
	}
}

// failingDevice is the CPU device with a budget of uploads; it counts
// live buffers.
type failingDevice struct {
	runtime.Device
	uploads int
	live    map[*runtime.Buffer]bool
}

func (d *failingDevice) Upload(t *tensor.Tensor) (*runtime.Buffer, error) {
	if d.uploads == 0 {
		return nil, errors.New("out of memory")
	}
	d.uploads--
	b, err := d.Device.Upload(t)
	if err == nil {
		b.Dev = d
		d.live[b] = true
	}
	return b, err
}

func (d *failingDevice) Free(b *runtime.Buffer) {
	delete(d.live, b)
	d.Device.Free(b)
}

// An upload that fails midway leaves no buffer of the session behind.
func TestUploadFailuresFreeBuffers(t *testing.T) {
	m, err := arch.Build("tiny", llama.Tiny, llama.RandomWeights(llama.Tiny, 7))
	if err != nil {
		t.Fatal(err)
	}
	caches := len(m.Func("decode").Params) - 2
	d := &failingDevice{Device: cpu.New(), uploads: caches - 1, live: map[*runtime.Buffer]bool{}}
	if _, err := NewSession(runtime.NewExecutor(m, d)); err == nil {
		t.Fatal("NewSession succeeded without room for its caches")
	}
	if len(d.live) != 0 {
		t.Errorf("NewSession failed with %d buffers live, want 0", len(d.live))
	}
	d.uploads = caches + 1 // the caches and the tokens, not the position
	s, err := NewSession(runtime.NewExecutor(m, d))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Forward([]int{1}); err == nil {
		t.Fatal("Forward succeeded without room for its position")
	}
	s.Close()
	if len(d.live) != 0 {
		t.Errorf("a failed Forward left %d buffers live after Close, want 0", len(d.live))
	}
}

// A session holds as many tokens as the module's meta max_seq says (a
// recurrent model's state has no length to tell), or, without it, as many
// as the KV caches have rows.
func TestSessionMaxSeq(t *testing.T) {
	kv, err := arch.Build("tiny", llama.Tiny, llama.RandomWeights(llama.Tiny, 7))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		m    *ir.Module
		meta string // "" leaves none
		want int
		err  string
	}{
		{"meta", kv, "100", 100, ""},
		{"KV rows", kv, "", llama.Tiny.MaxSeq, ""},
		{"recurrent", stateModule(t, true), "33", 33, ""},
		{"neither", stateModule(t, false), "", 0, "no meta max_seq and no KV cache"},
		{"bad meta", kv, "lots", 0, `meta max_seq "lots" is not a positive integer`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			delete(tc.m.Meta, "max_seq")
			if tc.meta != "" {
				tc.m.Meta["max_seq"] = tc.meta
			}
			s, err := NewSession(runtime.NewExecutor(tc.m, cpu.New()))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if s.MaxSeq != tc.want {
				t.Errorf("MaxSeq %d, want %d", s.MaxSeq, tc.want)
			}
		})
	}
}

// stateModule is a module of the LLM calling convention whose layer state
// (when state is set) is an f32[1, 8] that is not a KV cache; its logits
// are the state itself.
func stateModule(t *testing.T, state bool) *ir.Module {
	t.Helper()
	m := ir.NewModule("state")
	for _, fn := range []string{"prefill", "decode"} {
		b := ir.NewFunction(m, fn)
		b.Param("tokens", ir.T(ir.I32, ir.Shape{ir.Sym("seq")}))
		b.Param("pos", ir.T(ir.I32, nil))
		if state {
			st := b.Param("state.0", ir.T(ir.F32, ir.S(1, 8)))
			b.Return(st, st)
		} else {
			b.Return(b.Op(ir.OpConstant, nil, ir.Attrs{"shape": ir.ShapeAttr(ir.S(1, 4)), "value": ir.FloatsAttr(0)}))
		}
	}
	return m
}

// Next picks what the sampler picks from Forward's logits: a greedy
// sampler through an argmax on the device (the same id as Argmax on the
// host), a sampling one from the downloaded logits; the argmax executor
// is made again when the logits' type changes (a prefill's, then a decode
// step's, here the same).
func TestNext(t *testing.T) {
	ref, s := tinySession(t), tinySession(t)
	for _, temp := range []float64{0, 0.8} {
		a, b := NewSampler(temp, 0.9, 5), NewSampler(temp, 0.9, 5)
		tokens := []int{1, 2, 3}
		for step := 0; step < 5; step++ {
			logits, err := ref.Forward(tokens)
			if err != nil {
				t.Fatal(err)
			}
			want := a.Sample(logits)
			got, err := s.Next(tokens, b)
			if err != nil {
				t.Fatal(err)
			}
			if got != want {
				t.Fatalf("temperature %g, step %d: Next gave %d, Forward and Sample %d", temp, step, got, want)
			}
			tokens = []int{got}
		}
	}
	// Stats counts the first call as the prompt, every later one (the
	// second temperature's three tokens too) as decoding.
	if st := s.Stats; st.PromptTokens != 3 || st.DecodeTokens != 4+3+4 || st.PromptTime <= 0 || st.DecodeTime <= 0 {
		t.Errorf("Stats %+v, want 3 prompt tokens and 11 decoded, both timed", st)
	}
}

// Continue returns the prompt's next token and one more per step, each
// what Next gives after the last.
func TestContinue(t *testing.T) {
	ref, s := tinySession(t), tinySession(t)
	greedy := NewSampler(0, 0, 1)
	got, err := s.Continue([]int{1, 2, 3}, 4, greedy)
	if err != nil {
		t.Fatal(err)
	}
	want := []int{}
	next, err := ref.Next([]int{1, 2, 3}, greedy)
	for i := 0; err == nil && i < 5; i++ {
		want = append(want, next)
		next, err = ref.Next([]int{next}, greedy)
	}
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ids (-Next +Continue):\n%s", diff)
	}
}
