package llm

import (
	"github.com/tapml/tapml/ir"
	"github.com/tapml/tapml/runtime"
	"github.com/tapml/tapml/tensor"
)

// Greedy lookahead. On a device that can start a download and go on
// working (runtime.AsyncDownloader), a greedy Next launches the decode step
// after the one whose token it returns before it waits for that token: the
// step's input is the device's own argmax, so the host records it while
// the device still runs the current step, and a host whose recording costs
// about what the device's work does (wgpu validates every dispatch) no
// longer adds its time to the device's. The caller then feeds the token
// Next returned, as every greedy loop does, and finds that step launched;
// feeding anything else drops it (the cache rows it wrote at its position
// are written again by the next step there). A model whose state is not a
// KV cache (RWKV, Mamba: a step changes the state for good) never looks
// ahead, nor does a step at Horizon.

// aheadStep is a decode step launched ahead of the caller.
type aheadStep struct {
	in   int             // the token it consumes: what the Next that launched it returned
	res  *runtime.Buffer // its argmax
	wait func() (*tensor.Tensor, error)
}

// canLookAhead reports whether Next may launch the step that consumes the
// token in res (the argmax just launched) before waiting for it.
func (s *Session) canLookAhead(res *runtime.Buffer) bool {
	if _, ok := res.Dev.(runtime.AsyncDownloader); !ok || !s.positional || s.Exec.OnNode != nil || s.Exec.OnProbe != nil {
		return false // observers (carving, probes) see only the steps asked for
	}
	horizon := s.MaxSeq
	if s.Horizon > 0 {
		horizon = min(horizon, s.Horizon)
	}
	return s.Pos < horizon && res.Type().Equal(s.Exec.Module.Func("decode").Params[0].Type)
}

// lookAhead starts res's download, launches the decode step that consumes
// res's token, then waits for the token and returns it; the step stays in
// s.ahead. It frees res.
func (s *Session) lookAhead(res *runtime.Buffer) (int, error) {
	defer res.Dev.Free(res)
	wait, err := res.Dev.(runtime.AsyncDownloader).StartDownload(res)
	if err != nil {
		return 0, err
	}
	ahead, launchErr := s.launchAhead(res)
	id, err := wait()
	if err == nil {
		err = launchErr
	}
	if err != nil {
		s.drop(ahead)
		return 0, err
	}
	if ahead != nil {
		ahead.in = int(id.Int32s()[0])
		s.ahead = ahead
	}
	return int(id.Int32s()[0]), nil
}

// launchAhead launches decode at s.Pos on the token in tok, then the argmax
// of its logits, and starts that argmax's download. Where the device can
// copy buffers (runtime.Copier), tok is copied into the buffer every step
// reads its token from, so that the step replays the capture of the
// others (runtime.Capturer); elsewhere the step reads tok itself.
func (s *Session) launchAhead(tok *runtime.Buffer) (*aheadStep, error) {
	posT := tensor.ScalarInt32(int32(s.Pos))
	st, fresh, err := s.stepBuffers(tensor.New(ir.I32, []int{1}), posT)
	if err != nil {
		return nil, err
	}
	var pos *runtime.Buffer
	if st != nil {
		// The token first, as forward writes them: the steps' command
		// lists then repeat, and replay.
		if cp, ok := tok.Dev.(runtime.Copier); ok {
			err, tok = cp.CopyBuffer(st.tok, tok), st.tok
		}
		if pos = st.pos; err == nil && !fresh {
			err = st.w.Write(pos, posT)
		}
	} else if pos, err = s.Exec.Upload(s.Place, posT); err == nil {
		defer pos.Dev.Free(pos)
	}
	if err != nil {
		return nil, err
	}
	out, err := s.call("decode", tok, pos)
	if err != nil {
		return nil, err
	}
	res, err := s.deviceArgmax(out)
	if err != nil {
		return nil, err
	}
	wait, err := res.Dev.(runtime.AsyncDownloader).StartDownload(res)
	if err != nil {
		res.Dev.Free(res)
		return nil, err
	}
	return &aheadStep{res: res, wait: wait}, nil
}

// takeAhead returns the token of the step launched ahead when tokens is
// the one token it consumes (ok), after launching the step after it.
func (s *Session) takeAhead(tokens []int, sampler *Sampler) (id int, ok bool, err error) {
	a := s.ahead
	if a == nil || sampler.Temperature > 0 || len(tokens) != 1 || tokens[0] != a.in {
		return 0, false, nil
	}
	s.ahead = nil
	s.Pos++ // the step's token is consumed
	s.Stats.Ahead++
	if s.canLookAhead(a.res) {
		next, err := s.launchAhead(a.res)
		if err != nil {
			s.drop(a)
			return 0, true, err
		}
		s.ahead = next
	}
	t, err := a.wait()
	a.res.Dev.Free(a.res)
	if err != nil {
		s.dropAhead()
		return 0, true, err
	}
	id = int(t.Int32s()[0])
	if s.ahead != nil {
		s.ahead.in = id
	}
	return id, true, nil
}

// dropAhead forgets the step launched ahead, if any.
func (s *Session) dropAhead() {
	s.drop(s.ahead)
	s.ahead = nil
}

// drop waits for a step's download (its staging buffer is then free) and
// frees its argmax.
func (s *Session) drop(a *aheadStep) {
	if a == nil {
		return
	}
	a.wait()
	a.res.Dev.Free(a.res)
}
