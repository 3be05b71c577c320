package llm

import (
	"fmt"
	"math"
	"sort"
)

// Sampler picks the next token from logits. Temperature 0 is greedy
// (argmax, first index on ties); otherwise it samples from the softmax of
// logits/temperature, restricted to the smallest set of tokens whose
// probability reaches TopP (nucleus sampling; TopP <= 0 or >= 1 disables it).
type Sampler struct {
	Temperature float64
	TopP        float64
	rng         uint64
}

// NewSampler returns a sampler seeded with seed (0 is replaced by 1).
func NewSampler(temperature, topP float64, seed uint64) *Sampler {
	if seed == 0 {
		seed = 1
	}
	return &Sampler{Temperature: temperature, TopP: topP, rng: seed}
}

// Argmax returns the index of the largest value, the first on ties.
func Argmax(x []float32) int {
	best := 0
	for i, v := range x {
		if v > x[best] {
			best = i
		}
	}
	return best
}

// random returns a float in [0, 1) from a xorshift64* generator: simple,
// fast and identical on every platform.
func (s *Sampler) random() float64 {
	s.rng ^= s.rng >> 12
	s.rng ^= s.rng << 25
	s.rng ^= s.rng >> 27
	return float64((s.rng*0x2545F4914F6CDD1D)>>11) / float64(1<<53)
}

// Sample picks a token.
func (s *Sampler) Sample(logits []float32) int {
	if s.Temperature <= 0 {
		return Argmax(logits)
	}
	probs := make([]float64, len(logits))
	maxv := math.Inf(-1)
	for _, v := range logits {
		maxv = math.Max(maxv, float64(v))
	}
	sum := 0.0
	for i, v := range logits {
		probs[i] = math.Exp((float64(v) - maxv) / s.Temperature)
		sum += probs[i]
	}
	idx := make([]int, len(probs))
	for i := range idx {
		idx[i] = i
		probs[i] /= sum
	}
	n := len(idx)
	if s.TopP > 0 && s.TopP < 1 {
		sort.SliceStable(idx, func(a, b int) bool { return probs[idx[a]] > probs[idx[b]] })
		cum := 0.0
		for i, j := range idx {
			cum += probs[j]
			if cum >= s.TopP {
				n = i + 1
				break
			}
		}
	}
	total := 0.0
	for _, j := range idx[:n] {
		total += probs[j]
	}
	r := s.random() * total
	for _, j := range idx[:n] {
		r -= probs[j]
		if r < 0 {
			return j
		}
	}
	return idx[n-1]
}

// Tokenizer is what generation needs of a tokenizer.
type Tokenizer interface {
	// Encode gives the prompt's ids, with the BOS id first when the
	// tokenizer prepends one (bos asks for it).
	Encode(text string, bos, eos bool) []int
	Piece(prev, tok int) string
	BOS() int // -1: the tokenizer prepends none
	// IsEOG reports whether a sampled id ends generation.
	IsEOG(id int) bool
}

// Generate runs llama2.c's generation loop: the prompt (after BOS, when
// the tokenizer prepends one) is fed through prefill, then one token per
// decode step, until steps positions have been processed (prompt included)
// or an end-of-generation token is sampled (llama2.c's BOS, a model's EOS
// ids); that token is neither printed nor returned. Each printed piece
// (prompt pieces included, as run.c prints them) goes to emit. It returns
// the ids of the generated tokens.
func Generate(s *Session, tok Tokenizer, prompt string, steps int, sampler *Sampler, emit func(string) error) ([]int, error) {
	if steps <= 0 || steps > s.MaxSeq {
		steps = s.MaxSeq
	}
	ids := tok.Encode(prompt, true, false)
	if len(ids) == 0 {
		return nil, fmt.Errorf("the prompt encodes to no tokens (and the tokenizer prepends no BOS): give a prompt")
	}
	// Like run.c, a prompt longer than steps is echoed up to steps tokens
	// after BOS (which prints nothing) and nothing is generated.
	first := 0
	if ids[0] == tok.BOS() {
		first = 1
	}
	for i := first; i < min(len(ids), steps+first); i++ {
		prev := -1
		if i > 0 {
			prev = ids[i-1]
		}
		if err := emit(tok.Piece(prev, ids[i])); err != nil {
			return nil, err
		}
	}
	if len(ids) > steps {
		return nil, nil
	}
	defer func(h int) { s.Horizon = h }(s.Horizon)
	s.Horizon = steps
	next, err := s.Next(ids, sampler)
	if err != nil {
		return nil, err
	}
	var out []int
	prev := ids[len(ids)-1]
	for {
		if tok.IsEOG(next) {
			break
		}
		out = append(out, next)
		if err := emit(tok.Piece(prev, next)); err != nil {
			return out, err
		}
		prev = next
		if s.Pos >= steps {
			break
		}
		if next, err = s.Next([]int{next}, sampler); err != nil {
			return out, err
		}
	}
	return out, nil
}

// Continue feeds prompt, then steps tokens, each the one sampler picks
// after the last (as Generate does, without a tokenizer or end tokens),
// and returns the steps+1 ids sampled. Benchmarks drive sessions with it.
func (s *Session) Continue(prompt []int, steps int, sampler *Sampler) ([]int, error) {
	defer func(h int) { s.Horizon = h }(s.Horizon)
	s.Horizon = s.Pos + len(prompt) + steps
	next, err := s.Next(prompt, sampler)
	ids := []int{next}
	for i := 0; err == nil && i < steps; i++ {
		if next, err = s.Next([]int{next}, sampler); err == nil {
			ids = append(ids, next)
		}
	}
	return ids, err
}
