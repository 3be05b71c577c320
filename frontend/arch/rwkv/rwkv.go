// Package rwkv is the RWKV-4 family of decoders for arch.Build, as
// transformers' RwkvForCausalLM computes it: no attention and no KV cache,
// but per layer a time-mixing block (a token shift, then the WKV
// recurrence) and a channel-mixing block (a token shift, then a squared
// ReLU feed-forward), each after a layer norm, with a layer norm before
// the first block. Each layer carries three state tensors from one call to
// the next: the last normalised row that each token shift saw, and the WKV
// recurrence's numerator, denominator and exponent.
//
// Weight names are Hugging Face's RwkvModel names (without the "rwkv."
// prefix of RwkvForCausalLM): embeddings.weight, blocks.N.ln1.weight,
// blocks.N.attention.key.weight, ..., ln_out.weight, and head.weight.
package rwkv

import (
	"fmt"
	"math"
	"strconv"

	"github.com/tapml/tapml/frontend/arch"
	"github.com/tapml/tapml/ir"
)

// Config holds the hyperparameters of an RWKV-4 model.
type Config struct {
	Dim     int     // hidden_size (= attention_hidden_size)
	Inner   int     // intermediate_size: the channel mixing's width
	Layers  int     // num_hidden_layers
	Vocab   int     // vocab_size
	NormEps float64 // layer_norm_epsilon of every layer norm but ln_out's
	// RescaleEvery: at inference transformers halves the hidden states
	// after every RescaleEvery layers and divides the output projections
	// of layer l by 2^(l/RescaleEvery) to match; 0 turns it off.
	RescaleEvery int
	// MaxSeq is the most tokens a session holds (the state does not grow
	// with them): the checkpoint's context_length, capped by the loader.
	MaxSeq int
	// TiedEmbeddings: the classifier is the token embedding (no head).
	TiedEmbeddings bool
}

// lnOutEps is the epsilon of the final layer norm: transformers builds
// ln_out with LayerNorm's default, not layer_norm_epsilon.
const lnOutEps = 1e-5

// Validate checks that the hyperparameters describe a buildable model.
func (c Config) Validate() error {
	switch {
	case c.Dim <= 0 || c.Inner <= 0 || c.Layers <= 0 || c.Vocab <= 0 || c.MaxSeq <= 0:
		return fmt.Errorf("hyperparameters must be positive: %+v", c)
	case !(c.NormEps > 0) || math.IsInf(c.NormEps, 1):
		return fmt.Errorf("layer norm epsilon %g must be positive and finite", c.NormEps)
	case c.RescaleEvery < 0:
		return fmt.Errorf("rescale_every %d must not be negative", c.RescaleEvery)
	}
	return nil
}

// layer is the prefix of layer l's weight names and provenance.
func layer(l int) string { return "blocks." + strconv.Itoa(l) + "." }

// WeightShapes lists every weight the graph needs, in the order of a
// Hugging Face checkpoint's blocks.
func (c Config) WeightShapes() []arch.NamedShape {
	d := c.Dim
	ws := []arch.NamedShape{arch.Named("embeddings.weight", c.Vocab, d)}
	for l := 0; l < c.Layers; l++ {
		p := layer(l)
		if l == 0 {
			ws = append(ws, arch.Named(p+"pre_ln.weight", d), arch.Named(p+"pre_ln.bias", d))
		}
		ws = append(ws,
			arch.Named(p+"ln1.weight", d), arch.Named(p+"ln1.bias", d),
			arch.Named(p+"ln2.weight", d), arch.Named(p+"ln2.bias", d),
			arch.Named(p+"attention.time_decay", d),
			arch.Named(p+"attention.time_first", d),
			arch.Named(p+"attention.time_mix_key", 1, 1, d),
			arch.Named(p+"attention.time_mix_value", 1, 1, d),
			arch.Named(p+"attention.time_mix_receptance", 1, 1, d),
			arch.Named(p+"attention.key.weight", d, d),
			arch.Named(p+"attention.value.weight", d, d),
			arch.Named(p+"attention.receptance.weight", d, d),
			arch.Named(p+"attention.output.weight", d, d),
			arch.Named(p+"feed_forward.time_mix_key", 1, 1, d),
			arch.Named(p+"feed_forward.time_mix_receptance", 1, 1, d),
			arch.Named(p+"feed_forward.key.weight", c.Inner, d),
			arch.Named(p+"feed_forward.receptance.weight", d, d),
			arch.Named(p+"feed_forward.value.weight", d, c.Inner),
		)
	}
	ws = append(ws, arch.Named("ln_out.weight", d), arch.Named("ln_out.bias", d))
	if !c.TiedEmbeddings {
		ws = append(ws, arch.Named("head.weight", c.Vocab, d))
	}
	return ws
}

// Decoder describes the graph to arch.Build. Layer l's state is
// att_shift.l and ffn_shift.l (f32[1, dim]: the last row each token shift
// saw) and wkv.l (f32[3, dim]: the recurrence's a, b and p), all zeros at
// the start.
func (c Config) Decoder() arch.Decoder {
	row := ir.T(ir.F32, ir.S(1, int64(c.Dim)))
	return arch.Decoder{
		Arch: "rwkv", Layers: c.Layers, MaxSeq: c.MaxSeq,
		Config: fmt.Sprintf("dim=%d inner=%d layers=%d vocab=%d eps=%g rescale_every=%d max_seq=%d tied=%v",
			c.Dim, c.Inner, c.Layers, c.Vocab, c.NormEps, c.RescaleEvery, c.MaxSeq, c.TiedEmbeddings),
		State: func(int) []arch.State {
			return []arch.State{{Name: "att_shift", Type: row}, {Name: "ffn_shift", Type: row},
				{Name: "wkv", Type: ir.T(ir.F32, ir.S(3, int64(c.Dim)))}}
		},
		Embed: func(f *arch.Forward) *ir.Value {
			return f.At("embeddings").Gather(f.W("embeddings.weight"), f.Tokens)
		},
		Block: c.block,
		Norm: func(f *arch.Forward, x *ir.Value) *ir.Value {
			return f.At("ln_out").LayerNorm(x, f.W("ln_out.weight"), f.W("ln_out.bias"), lnOutEps)
		},
		Logits: func(f *arch.Forward, x *ir.Value) *ir.Value {
			head := "head.weight"
			if c.TiedEmbeddings {
				head = "embeddings.weight"
			}
			return f.At("head").Linear(x, f.W(head))
		},
	}
}

func (c Config) norm(f *arch.Forward, x *ir.Value, name string) *ir.Value {
	return f.At(name).LayerNorm(x, f.W(name+".weight"), f.W(name+".bias"), c.NormEps)
}

// shift is a token shift of h [S, dim] from the state prev: the rows
// before each token, and the new state (h's last row).
func shift(f *arch.Forward, p string, h, prev *ir.Value) (shifted, next *ir.Value) {
	shifted = f.At(p+"shift").Op(ir.OpTokenShift, []*ir.Value{h, prev}, nil)
	return shifted, f.At(p+"shift_state").Slice(h, 0, -1, math.MaxInt32)
}

// mix is h·m + shifted·(1 - m) for a time_mix weight m [1, 1, dim], in
// transformers' order of operations.
func (c Config) mix(f *arch.Forward, name string, h, shifted *ir.Value) *ir.Value {
	m := f.At(name).Reshape(f.W(name), ir.S(int64(c.Dim)))
	one := f.Op(ir.OpConstant, nil, ir.Attrs{"value": ir.FloatsAttr(1)})
	return f.Add(f.Mul(h, m), f.Mul(shifted, f.Op(ir.OpSub, []*ir.Value{one, m}, nil)))
}

// scaled multiplies x by 2^-e (rescale_every's division of layer l's
// output projections, exact in floating point), or returns x for e = 0.
func scaled(f *arch.Forward, x *ir.Value, e int) *ir.Value {
	if e == 0 {
		return x
	}
	s := f.Op(ir.OpConstant, nil, ir.Attrs{"value": ir.FloatsAttr(math.Ldexp(1, -e))})
	return f.Mul(x, s)
}

// block is layer l: the time mixing, then the channel mixing, each on a
// layer norm of the residual stream.
func (c Config) block(f *arch.Forward, l int, x *ir.Value, state []*ir.Value) (*ir.Value, []*ir.Value) {
	p := layer(l)
	if l == 0 {
		x = c.norm(f, x, p+"pre_ln")
	}
	e := 0
	if c.RescaleEvery > 0 {
		e = l / c.RescaleEvery
	}
	// Time mixing.
	a := p + "attention."
	h := c.norm(f, x, p+"ln1")
	sh, attShift := shift(f, a, h, state[0])
	proj := func(name string) *ir.Value {
		return f.At(a+name).Linear(c.mix(f, a+"time_mix_"+name, h, sh), f.W(a+name+".weight"))
	}
	k, v := proj("key"), proj("value")
	r := f.At(a+"receptance").Unary(ir.OpSigmoid, proj("receptance"))
	w := f.At(a+"time_decay").Unary(ir.OpNeg, f.Unary(ir.OpExp, f.W(a+"time_decay")))
	wkv := f.At(a+"wkv").OpN(ir.OpWKV, []*ir.Value{state[2], k, v, w, f.W(a + "time_first")}, nil)
	out := f.At(a+"output").Linear(f.At(a+"gate").Mul(r, wkv[1]), f.W(a+"output.weight"))
	x = f.At(a+"residual").Add(x, scaled(f, out, e))
	// Channel mixing.
	m := p + "feed_forward."
	h = c.norm(f, x, p+"ln2")
	sh, ffnShift := shift(f, m, h, state[1])
	key := f.At(m+"key").Linear(c.mix(f, m+"time_mix_key", h, sh), f.W(m+"key.weight"))
	key = f.At(m+"relu").Unary(ir.OpRelu, key)
	key = f.At(m+"square").Mul(key, key)
	val := f.At(m+"value").Linear(key, f.W(m+"value.weight"))
	rr := f.At(m+"receptance").Linear(c.mix(f, m+"time_mix_receptance", h, sh), f.W(m+"receptance.weight"))
	rr = f.Unary(ir.OpSigmoid, rr)
	x = f.At(m+"residual").Add(x, f.At(m+"gate").Mul(rr, scaled(f, val, e)))
	if c.RescaleEvery > 0 && (l+1)%c.RescaleEvery == 0 {
		x = f.At(p+"rescale").Mul(x, f.Op(ir.OpConstant, nil, ir.Attrs{"value": ir.FloatsAttr(0.5)}))
	}
	return x, []*ir.Value{attShift, ffnShift, wkv[0]}
}
