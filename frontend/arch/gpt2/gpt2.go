// Package gpt2 is the GPT-2 family of decoders for arch.Build: learned
// position embeddings, pre-norm blocks with biased layer norms, a fused
// q/k/v projection, multi-head attention, a GELU (tanh approximation) MLP,
// a final layer norm and a classifier tied to the token embedding.
//
// Weight names are Hugging Face's GPT2Model names (without the
// "transformer." prefix of GPT2LMHeadModel): wte.weight, wpe.weight,
// h.N.ln_1.weight, h.N.attn.c_attn.weight, ... The linear layers are
// GPT-2's Conv1D, whose weights are stored in×out, so the graph multiplies
// by them without transposing.
package gpt2

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"

	"github.com/tapml/tapml/frontend/arch"
	"github.com/tapml/tapml/ir"
)

// Config holds the hyperparameters of a GPT-2 model.
type Config struct {
	Dim       int     // n_embd
	Inner     int     // n_inner: MLP width (Hugging Face's default is 4·n_embd)
	Layers    int     // n_layer
	Heads     int     // n_head
	Vocab     int     // vocab_size
	Positions int     // n_positions: rows of the position embedding
	MaxSeq    int     // KV cache length (context window), at most Positions
	NormEps   float64 // layer_norm_epsilon
}

// HeadDim is the width of one attention head.
func (c Config) HeadDim() int { return c.Dim / c.Heads }

// Validate checks that the hyperparameters describe a buildable model.
func (c Config) Validate() error {
	switch {
	case c.Dim <= 0 || c.Inner <= 0 || c.Layers <= 0 || c.Heads <= 0 || c.Vocab <= 0 || c.Positions <= 0 || c.MaxSeq <= 0:
		return fmt.Errorf("hyperparameters must be positive: %+v", c)
	case c.Dim%c.Heads != 0:
		return fmt.Errorf("n_embd %d is not a multiple of n_head %d", c.Dim, c.Heads)
	case c.MaxSeq > c.Positions:
		return fmt.Errorf("cache length %d exceeds the %d positions of the position embedding", c.MaxSeq, c.Positions)
	case !(c.NormEps > 0) || math.IsInf(c.NormEps, 1):
		return fmt.Errorf("layer norm epsilon %g must be positive and finite", c.NormEps)
	}
	return nil
}

// WeightShapes lists every weight the graph needs, with its shape, in the
// order of a Hugging Face checkpoint. Conv1D weights are in×out.
func (c Config) WeightShapes() []arch.NamedShape {
	d, f := c.Dim, c.Inner
	ws := []arch.NamedShape{arch.Named("wte.weight", c.Vocab, d), arch.Named("wpe.weight", c.Positions, d)}
	for l := 0; l < c.Layers; l++ {
		p := layer(l)
		ws = append(ws,
			arch.Named(p+"ln_1.weight", d),
			arch.Named(p+"ln_1.bias", d),
			arch.Named(p+"attn.c_attn.weight", d, 3*d),
			arch.Named(p+"attn.c_attn.bias", 3*d),
			arch.Named(p+"attn.c_proj.weight", d, d),
			arch.Named(p+"attn.c_proj.bias", d),
			arch.Named(p+"ln_2.weight", d),
			arch.Named(p+"ln_2.bias", d),
			arch.Named(p+"mlp.c_fc.weight", d, f),
			arch.Named(p+"mlp.c_fc.bias", f),
			arch.Named(p+"mlp.c_proj.weight", f, d),
			arch.Named(p+"mlp.c_proj.bias", d),
		)
	}
	return append(ws, arch.Named("ln_f.weight", d), arch.Named("ln_f.bias", d))
}

// layer is the prefix of layer l's weight names and provenance.
func layer(l int) string { return "h." + strconv.Itoa(l) + "." }

// Decoder describes the graph to arch.Build. Position embeddings are rows
// pos, pos+1, ... of wpe.
func (c Config) Decoder() arch.Decoder {
	return arch.Decoder{
		Arch: "gpt2", Layers: c.Layers, MaxSeq: c.MaxSeq,
		Config: fmt.Sprintf("dim=%d inner=%d layers=%d heads=%d vocab=%d positions=%d max_seq=%d eps=%g",
			c.Dim, c.Inner, c.Layers, c.Heads, c.Vocab, c.Positions, c.MaxSeq, c.NormEps),
		State: func(int) []arch.State { return arch.KVCache(c.MaxSeq, c.Heads, c.HeadDim()) },
		Embed: func(f *arch.Forward) *ir.Value {
			x := f.At("wte").Gather(f.W("wte.weight"), f.Tokens)
			positions := f.At("wpe").Iota(f.Pos, ir.Shape{f.Seq})
			pe := f.Gather(f.W("wpe.weight"), positions)
			return f.At("embeddings").Add(x, pe)
		},
		Block: c.block,
		Norm:  func(f *arch.Forward, x *ir.Value) *ir.Value { return c.norm(f, x, "ln_f") },
		Logits: func(f *arch.Forward, x *ir.Value) *ir.Value {
			return f.At("lm_head").Linear(x, f.W("wte.weight"))
		},
	}
}

func (c Config) norm(f *arch.Forward, x *ir.Value, p string) *ir.Value {
	return f.At(p).LayerNorm(x, f.W(p+".weight"), f.W(p+".bias"), c.NormEps)
}

// conv1d is GPT-2's Conv1D: x × w + b with w stored in×out.
func conv1d(f *arch.Forward, x *ir.Value, p string) *ir.Value {
	y := f.At(p).MatMul(x, f.W(p+".weight"))
	return f.Add(y, f.W(p+".bias"))
}

// block is one pre-norm block: x + attn(ln_1(x)), then h + mlp(ln_2(h)).
func (c Config) block(f *arch.Forward, l int, x *ir.Value, kv []*ir.Value) (*ir.Value, []*ir.Value) {
	p, d, hd := layer(l), int64(c.Dim), c.HeadDim()
	h := c.norm(f, x, p+"ln_1")
	qkv := conv1d(f, h, p+"attn.c_attn")
	part := func(i int64, what string) *ir.Value {
		s := f.At(p+"attn."+what).Slice(qkv, 1, i*d, (i+1)*d)
		return f.Heads(s, c.Heads, hd)
	}
	q, k, v := part(0, "q"), part(1, "k"), part(2, "v")
	a, kc, vc := f.CachedAttention(p+"attn", q, k, v, kv[0], kv[1], 1/math.Sqrt(float64(hd)))
	o := conv1d(f, a, p+"attn.c_proj")
	x = f.At(p+"attn.residual").Add(x, o)
	h = c.norm(f, x, p+"ln_2")
	h = conv1d(f, h, p+"mlp.c_fc")
	h = f.At(p+"mlp.gelu").Unary(ir.OpGelu, h)
	o = conv1d(f, h, p+"mlp.c_proj")
	return f.At(p+"mlp.residual").Add(x, o), []*ir.Value{kc, vc}
}

// RandomWeights returns deterministic random f32 weights for c: matrices
// and embeddings uniform in ±1/√(rows of the input side), biases uniform in
// ±0.1, layer norm weights uniform in [0.5, 1.5] and their biases in ±0.1,
// so that every weight matters in a test. The same seed gives the same
// bytes on every machine (math/rand/v2's PCG).
func RandomWeights(c Config, seed uint64) map[string]ir.WeightSource {
	r := rand.New(rand.NewPCG(seed, 0x677074322d)) // "gpt2-"
	return arch.RandomWeights(c.WeightShapes(), func(ns arch.NamedShape) func() float64 {
		lo, hi := -0.1, 0.1
		switch {
		case len(ns.Shape) == 2 && (ns.Name == "wte.weight" || ns.Name == "wpe.weight"):
			lo, hi = -1/math.Sqrt(float64(ns.Shape[1])), 1/math.Sqrt(float64(ns.Shape[1]))
		case len(ns.Shape) == 2:
			lo, hi = -1/math.Sqrt(float64(ns.Shape[0])), 1/math.Sqrt(float64(ns.Shape[0]))
		case strings.Contains(ns.Name, "ln_") && strings.HasSuffix(ns.Name, ".weight"):
			lo, hi = 0.5, 1.5
		}
		return arch.Uniform(r, lo, hi)
	})
}
