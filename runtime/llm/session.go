// Package llm drives a language model (as frontend/arch builds it)
// token by token: it owns the KV caches on the device, feeds prompts through
// "prefill", steps with "decode" and samples the next token.
package llm

import (
	"errors"
	"fmt"
	"time"

	"github.com/tapml/tapml/ir"
	"github.com/tapml/tapml/runtime"
	"github.com/tapml/tapml/tensor"
)

// Session is one generation in progress: the position reached and the
// state of every layer (KV caches, or a recurrent model's state), which
// stays on the device between steps.
type Session struct {
	Exec   *runtime.Executor
	Place  string // placement whose device holds the state ("" = default)
	Pos    int    // tokens consumed so far
	MaxSeq int    // the most tokens a session can hold
	caches []*runtime.Buffer
	// step holds a decode step's token and position where the device can
	// overwrite buffers (runtime.Writer): every step then calls decode on
	// the same buffers, which the executor can capture and replay.
	step *stepArgs
	// argmax runs greedy sampling's argmax on the device (Next).
	argmax *runtime.Executor
	// ahead is the decode step Next launched before it was asked for
	// (lookahead.go), or nil; positional says the state is KV caches,
	// which a step launched in vain does not spoil.
	ahead      *aheadStep
	positional bool
	// Horizon is the position up to which Next may launch a decode step
	// ahead of the caller (0: the context); Generate and Continue set it
	// to where they stop, so that no step is computed in vain at the end.
	Horizon int
	// Stats is what the session's calls took so far.
	Stats Stats
}

// Stats times a session's calls (Forward, Next), each until its result is
// on the host, as llama.cpp and llama2.c time theirs: the first call (the
// prompt) apart from the later ones (decode steps). Compile is the part of
// each time that the devices spent making kernels (runtime.KernelCompiler):
// a process's first session compiles them on its first calls.
type Stats struct {
	PromptTokens, DecodeTokens   int
	Ahead                        int // decode steps launched before they were asked for, and taken (lookahead.go)
	PromptTime, DecodeTime       time.Duration
	PromptCompile, DecodeCompile time.Duration
}

// TokensPerSecond returns the rate of n tokens in d (0 when d is 0).
func TokensPerSecond(n int, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds()
}

// timed runs call, a call of the session on n tokens, and adds its time
// to s.Stats.
func (s *Session) timed(n int, call func() error) error {
	first := s.Pos == 0
	compile0, start := s.Exec.CompileTime(), time.Now()
	err := call()
	took, compile := time.Since(start), s.Exec.CompileTime()-compile0
	if err != nil {
		return err
	}
	st := &s.Stats
	if first {
		st.PromptTokens, st.PromptTime, st.PromptCompile = st.PromptTokens+n, st.PromptTime+took, st.PromptCompile+compile
	} else {
		st.DecodeTokens, st.DecodeTime, st.DecodeCompile = st.DecodeTokens+n, st.DecodeTime+took, st.DecodeCompile+compile
	}
	return nil
}

type stepArgs struct {
	w        runtime.Writer
	tok, pos *runtime.Buffer
}

// NewSession checks that the module has the LLM calling convention
// (prefill/decode taking tokens, pos and the layers' state; returning
// logits and the updated state) and allocates the state, zeroed. MaxSeq is
// the module's ContextLength.
func NewSession(exec *runtime.Executor) (*Session, error) {
	m := exec.Module
	dec := m.Func("decode")
	pre := m.Func("prefill")
	if dec == nil || pre == nil {
		return nil, fmt.Errorf("module %q is not a language model: it needs functions @prefill and @decode", m.Name)
	}
	if err := checkSignature(dec); err != nil {
		return nil, err
	}
	if err := checkSignature(pre); err != nil {
		return nil, err
	}
	s := &Session{Exec: exec}
	caches := kvCaches(dec)
	s.positional = true
	for _, p := range dec.Params[2:] {
		s.positional = s.positional && caches[p]
	}
	var err error
	var bytes int64
	for _, p := range dec.Params[2:] {
		bytes += p.Type.Bytes()
	}
	if bytes > MaxCacheBytes {
		return nil, fmt.Errorf("module %q: its KV caches or state (%s, ...) take %d bytes, more than %d: run fewer positions (--steps)",
			m.Name, dec.Params[2].Type, bytes, int64(MaxCacheBytes))
	}
	if s.MaxSeq, err = ContextLength(m); err != nil {
		return nil, err
	}
	for _, p := range dec.Params[2:] {
		sizes := p.Type.Shape.Sizes()
		b, err := exec.Upload(s.Place, tensor.New(p.Type.DType, sizes))
		if err != nil {
			s.Close()
			return nil, fmt.Errorf("allocating %s: %w", p.Ref(), err)
		}
		s.caches = append(s.caches, b)
	}
	return s, nil
}

func checkSignature(f *ir.Function) error {
	bad := func(why string) error {
		return fmt.Errorf("func @%s does not have the LLM calling convention (tokens, pos, caches...) -> (logits, caches...): %s", f.Name, why)
	}
	if len(f.Params) < 2 || f.Params[0].Type.DType != ir.I32 || f.Params[0].Type.Shape.Rank() != 1 {
		return bad("the first parameter must be i32[seq] tokens")
	}
	if f.Params[1].Type.DType != ir.I32 || f.Params[1].Type.Shape.Rank() != 0 {
		return bad("the second parameter must be the i32[] position")
	}
	if len(f.Results) != len(f.Params)-1 {
		return bad(fmt.Sprintf("%d parameters but %d results", len(f.Params), len(f.Results)))
	}
	for i, p := range f.Params[2:] {
		if !p.Type.Shape.IsStatic() || !p.Type.Equal(f.Results[i+1].Type) {
			return bad(fmt.Sprintf("cache %s and result %d differ", p.Ref(), i+1))
		}
	}
	return nil
}

// Forward feeds tokens at the current position and returns the logits of
// the next token. Several tokens go through prefill in one call; one token
// goes through decode.
func (s *Session) Forward(tokens []int) ([]float32, error) {
	s.dropAhead()
	var logits []float32
	err := s.timed(len(tokens), func() error {
		out, err := s.forward(tokens)
		if err != nil {
			return err
		}
		logits, err = downloadLogits(out)
		return err
	})
	return logits, err
}

// Next feeds tokens like Forward and returns the next token as sampler
// picks it. A greedy sampler's argmax runs on the device that computed the
// logits, so that a step downloads one id rather than the vocabulary's
// logits.
func (s *Session) Next(tokens []int, sampler *Sampler) (int, error) {
	var next int
	err := s.timed(len(tokens), func() error {
		var err error
		next, err = s.next(tokens, sampler)
		return err
	})
	return next, err
}

func (s *Session) next(tokens []int, sampler *Sampler) (int, error) {
	if id, ok, err := s.takeAhead(tokens, sampler); ok || err != nil {
		return id, err
	}
	s.dropAhead()
	out, err := s.forward(tokens)
	if err != nil {
		return 0, err
	}
	if sampler.Temperature > 0 {
		logits, err := downloadLogits(out)
		if err != nil {
			return 0, err
		}
		return sampler.Sample(logits), nil
	}
	res, err := s.deviceArgmax(out)
	if err != nil {
		return 0, err
	}
	if s.canLookAhead(res) {
		return s.lookAhead(res)
	}
	id, err := runtime.Download(res)
	res.Dev.Free(res)
	if err != nil {
		return 0, err
	}
	return int(id.Int32s()[0]), nil
}

// deviceArgmax launches the argmax of logits out on out's device and frees
// out.
func (s *Session) deviceArgmax(out *runtime.Buffer) (*runtime.Buffer, error) {
	defer out.Dev.Free(out)
	var err error
	if s.argmax == nil || s.argmax.Device("") != out.Dev || !s.argmax.Module.Func("argmax").Params[0].Type.Equal(out.Type()) {
		if s.argmax != nil {
			s.argmax.Close()
		}
		if s.argmax, err = argmaxExecutor(out); err != nil {
			return nil, err
		}
	}
	res, err := s.argmax.Call("argmax", out)
	if err != nil {
		return nil, err
	}
	return res[0], nil
}

// argmaxExecutor runs the argmax of logits like out's (a row of the
// vocabulary) on out's device.
func argmaxExecutor(out *runtime.Buffer) (*runtime.Executor, error) {
	m := ir.NewModule("argmax")
	b := ir.NewFunction(m, "argmax")
	x := b.Param("logits", out.Type())
	b.Return(b.Op(ir.OpArgmax, []*ir.Value{x}, ir.Attrs{"axis": ir.IntAttr(-1)}))
	if err := b.Err(); err != nil {
		return nil, fmt.Errorf("argmax of logits %s: %w", out.Type(), err)
	}
	return runtime.NewExecutor(m, out.Dev), nil
}

// downloadLogits downloads and frees the logits of a call, as f32.
func downloadLogits(out *runtime.Buffer) ([]float32, error) {
	logits, err := runtime.Download(out)
	out.Dev.Free(out)
	if err != nil {
		return nil, err
	}
	if logits.DType != ir.F32 {
		logits = logits.Convert(ir.F32)
	}
	return logits.Float32s(), nil
}

// forward runs prefill or decode on tokens and returns the logits'
// buffer.
func (s *Session) forward(tokens []int) (*runtime.Buffer, error) {
	if len(tokens) == 0 {
		return nil, fmt.Errorf("forward of no tokens")
	}
	if s.Pos+len(tokens) > s.MaxSeq {
		return nil, fmt.Errorf("context full: %d tokens at position %d exceed the context of %d", len(tokens), s.Pos, s.MaxSeq)
	}
	fn := "decode"
	if len(tokens) > 1 {
		fn = "prefill"
	}
	ids := make([]int32, len(tokens))
	for i, t := range tokens {
		ids[i] = int32(t)
	}
	tokT, posT := tensor.FromInt32([]int{len(ids)}, ids), tensor.ScalarInt32(int32(s.Pos))
	var tok, pos *runtime.Buffer
	var err error
	if fn == "decode" {
		st, fresh, serr := s.stepBuffers(tokT, posT)
		if err = serr; st != nil {
			tok, pos = st.tok, st.pos
			if !fresh {
				err = errors.Join(st.w.Write(tok, tokT), st.w.Write(pos, posT))
			}
		}
	}
	if tok == nil && err == nil {
		if tok, pos, err = s.upload(tokT, posT); err == nil {
			defer tok.Dev.Free(tok)
			defer pos.Dev.Free(pos)
		}
	}
	if err != nil {
		return nil, err
	}
	out, err := s.call(fn, tok, pos)
	if err != nil {
		return nil, err
	}
	s.Pos += len(tokens)
	return out, nil
}

// stepBuffers returns the buffers every decode step reads its token and
// position from, or nil when the device cannot overwrite buffers
// (runtime.Writer). On the first step it uploads tok and pos into new
// ones (fresh).
func (s *Session) stepBuffers(tok, pos *tensor.Tensor) (st *stepArgs, fresh bool, err error) {
	if s.step != nil {
		return s.step, false, nil
	}
	w, ok := s.Exec.Device(s.Place).(runtime.Writer)
	if !ok {
		return nil, false, nil
	}
	tb, pb, err := s.upload(tok, pos)
	if err != nil {
		return nil, false, err
	}
	s.step = &stepArgs{w: w, tok: tb, pos: pb}
	return s.step, true, nil
}

// call calls fn on the token and position buffers and the state, keeps
// the updated state and returns the logits' buffer.
func (s *Session) call(fn string, tok, pos *runtime.Buffer) (*runtime.Buffer, error) {
	args := append([]*runtime.Buffer{tok, pos}, s.caches...)
	out, err := s.Exec.Call(fn, args...)
	if err != nil {
		return nil, err
	}
	for i, c := range out[1:] {
		if c != s.caches[i] {
			// The device returned a new buffer instead of updating in place.
			s.caches[i].Dev.Free(s.caches[i])
			s.caches[i] = c
		}
	}
	return out[0], nil
}

// upload uploads a call's token and position.
func (s *Session) upload(tok, pos *tensor.Tensor) (*runtime.Buffer, *runtime.Buffer, error) {
	tb, err := s.Exec.Upload(s.Place, tok)
	if err != nil {
		return nil, nil, err
	}
	pb, err := s.Exec.Upload(s.Place, pos)
	if err != nil {
		tb.Dev.Free(tb)
		return nil, nil, err
	}
	return tb, pb, nil
}

// Close frees the caches.
func (s *Session) Close() {
	s.dropAhead()
	for _, c := range s.caches {
		c.Dev.Free(c)
	}
	s.caches = nil
	if s.argmax != nil {
		s.argmax.Close()
		s.argmax = nil
	}
	if s.step != nil {
		s.step.tok.Dev.Free(s.step.tok)
		s.step.pos.Dev.Free(s.step.pos)
		s.step = nil
	}
}
