// Package gpt2 is the GPT-2 family of decoders for arch.Build: learned
// position embeddings, pre-norm blocks with biased layer norms, a fused
// q/k/v projection, multi-head attention, a GELU (tanh approximation) MLP,
// a final layer norm and a classifier tied to the token embedding (or a
// weight of its own, lm_head.weight). GPTBigCode (SantaCoder, StarCoder)
// is GPT-2 with multi-query attention and nn.Linear layers.
//
// Weight names are Hugging Face's GPT2Model names (without the
// "transformer." prefix of GPT2LMHeadModel): wte.weight, wpe.weight,
// h.N.ln_1.weight, h.N.attn.c_attn.weight, ... GPT-2's linear layers are
// its Conv1D, whose weights are stored in×out, so the graph multiplies by
// them without transposing, and splits c_attn's output into q, k and v;
// GPTBigCode's are stored out×in, so its c_attn is split at load into
// views of its rows, the layers h.N.attn.q, k and v.
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
	// LMHead: the classifier is lm_head.weight [vocab, dim], not wte.
	LMHead bool
	// KVHeads is the number of key/value heads when fewer than Heads (1:
	// GPTBigCode's multi-query attention); 0 means Heads. c_attn's outputs
	// are then q (n_embd), k and v (KVHeads·head dim each).
	KVHeads int
	// Linear: the linear layers are stored out×in (nn.Linear, as
	// GPTBigCode's), not in×out (GPT-2's Conv1D).
	Linear bool
}

// kvHeads is the number of key/value heads.
func (c Config) kvHeads() int {
	if c.KVHeads == 0 {
		return c.Heads
	}
	return c.KVHeads
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
	case c.KVHeads < 0 || c.Heads%c.kvHeads() != 0:
		return fmt.Errorf("n_head %d is not a multiple of %d key/value heads", c.Heads, c.KVHeads)
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
	d, f, qkv := c.Dim, c.Inner, c.Dim+2*c.kvHeads()*c.HeadDim()
	ws := []arch.NamedShape{arch.Named("wte.weight", c.Vocab, d), arch.Named("wpe.weight", c.Positions, d)}
	for l := 0; l < c.Layers; l++ {
		p := layer(l)
		ws = append(ws, arch.Named(p+"ln_1.weight", d), arch.Named(p+"ln_1.bias", d))
		ws = append(ws, c.linear(p+"attn.c_attn", d, qkv)...)
		ws = append(ws, c.linear(p+"attn.c_proj", d, d)...)
		ws = append(ws, arch.Named(p+"ln_2.weight", d), arch.Named(p+"ln_2.bias", d))
		ws = append(ws, c.linear(p+"mlp.c_fc", d, f)...)
		ws = append(ws, c.linear(p+"mlp.c_proj", f, d)...)
	}
	ws = append(ws, arch.Named("ln_f.weight", d), arch.Named("ln_f.bias", d))
	if c.LMHead {
		ws = append(ws, arch.Named("lm_head.weight", c.Vocab, d))
	}
	return ws
}

// linear lists the weight and bias of the linear layer p from in to out.
func (c Config) linear(p string, in, out int) []arch.NamedShape {
	if c.Linear {
		return arch.DenseShapes(p, out, in, true)
	}
	return []arch.NamedShape{arch.Named(p+".weight", in, out), arch.Named(p+".bias", out)}
}

// layer is the prefix of layer l's weight names and provenance.
func layer(l int) string { return "h." + strconv.Itoa(l) + "." }

// Decoder describes the graph to arch.Build. Position embeddings are rows
// pos, pos+1, ... of wpe.
func (c Config) Decoder() arch.Decoder {
	var parts []arch.Part
	for l := 0; l < c.Layers && c.Linear; l++ {
		parts = append(parts, c.qkv().Parts(layer(l)+"attn.")...)
	}
	return arch.Decoder{
		Arch: "gpt2", Layers: c.Layers, Parts: parts, MaxSeq: c.MaxSeq,
		Config: c.meta(),
		State:  func(int) []arch.State { return arch.KVCache(c.MaxSeq, c.kvHeads(), c.HeadDim()) },
		Embed: func(f *arch.Forward) *ir.Value {
			x := f.At("wte").Gather(f.W("wte.weight"), f.Tokens)
			positions := f.At("wpe").Iota(f.Pos, ir.Shape{f.Seq})
			pe := f.Gather(f.W("wpe.weight"), positions)
			return f.At("embeddings").Add(x, pe)
		},
		Block: c.block,
		Norm:  func(f *arch.Forward, x *ir.Value) *ir.Value { return c.norm(f, x, "ln_f") },
		Logits: func(f *arch.Forward, x *ir.Value) *ir.Value {
			if c.LMHead {
				return f.At("lm_head").Linear(x, f.W("lm_head.weight"))
			}
			return f.At("lm_head").Linear(x, f.W("wte.weight"))
		},
	}
}

// meta is the module's meta "config"; the variants' settings are recorded
// only when used, so GPT-2's meta stays as it was.
func (c Config) meta() string {
	s := fmt.Sprintf("dim=%d inner=%d layers=%d heads=%d vocab=%d positions=%d max_seq=%d eps=%g",
		c.Dim, c.Inner, c.Layers, c.Heads, c.Vocab, c.Positions, c.MaxSeq, c.NormEps)
	if c.LMHead {
		s += " lm_head=true"
	}
	if c.KVHeads != 0 {
		s += fmt.Sprintf(" kv_heads=%d", c.KVHeads)
	}
	if c.Linear {
		s += " linear=true"
	}
	return s
}

func (c Config) norm(f *arch.Forward, x *ir.Value, p string) *ir.Value {
	return f.At(p).LayerNorm(x, f.W(p+".weight"), f.W(p+".bias"), c.NormEps)
}

// qkv is c_attn as an attention's fused q/k/v layer, whose parts are the
// layers q, k and v when it is stored out×in (Linear).
func (c Config) qkv() arch.Attention {
	return arch.Attention{Heads: c.Heads, KVHeads: c.kvHeads(), HeadDim: c.HeadDim(), Layout: arch.FusedQKV,
		QKV: "c_attn", Q: "q", K: "k", V: "v", QKVBias: true}
}

// dense is the linear layer p: GPT-2's Conv1D, x × w + b with w stored
// in×out, or with Linear x × wᵀ + b.
func (c Config) dense(f *arch.Forward, x *ir.Value, p string) *ir.Value {
	if c.Linear {
		return f.Dense(p, x, true)
	}
	y := f.At(p).MatMul(x, f.W(p+".weight"))
	return f.Add(y, f.W(p+".bias"))
}

// block is one pre-norm block: x + attn(ln_1(x)), then h + mlp(ln_2(h)).
func (c Config) block(f *arch.Forward, l int, x *ir.Value, kv []*ir.Value) (*ir.Value, []*ir.Value) {
	p, d, hd, kvh := layer(l), int64(c.Dim), c.HeadDim(), c.kvHeads()
	kvd := int64(kvh * hd)
	h := c.norm(f, x, p+"ln_1")
	var q, k, v *ir.Value
	if c.Linear { // c_attn was split at load (Decoder.Parts)
		q, k, v = f.Dense(p+"attn.q", h, true), f.Dense(p+"attn.k", h, true), f.Dense(p+"attn.v", h, true)
	} else { // Conv1D's q, k and v are columns: split c_attn's output
		qkv := c.dense(f, h, p+"attn.c_attn")
		q = f.At(p+"attn.q").Slice(qkv, 1, 0, d)
		k = f.At(p+"attn.k").Slice(qkv, 1, d, d+kvd)
		v = f.At(p+"attn.v").Slice(qkv, 1, d+kvd, d+2*kvd)
	}
	q, k, v = f.Heads(q, c.Heads, hd), f.Heads(k, kvh, hd), f.Heads(v, kvh, hd)
	a, kc, vc := f.CachedAttention(p+"attn", q, k, v, kv[0], kv[1], 1/math.Sqrt(float64(hd)))
	o := c.dense(f, a, p+"attn.c_proj")
	x = f.At(p+"attn.residual").Add(x, o)
	h = c.norm(f, x, p+"ln_2")
	h = c.dense(f, h, p+"mlp.c_fc")
	h = f.At(p+"mlp.gelu").Unary(ir.OpGelu, h)
	o = c.dense(f, h, p+"mlp.c_proj")
	return f.At(p+"mlp.residual").Add(x, o), []*ir.Value{kc, vc}
}

// RandomWeights returns deterministic random f32 weights for c: matrices
// and embeddings uniform in ±1/√(size of the input side), biases uniform in
// ±0.1, layer norm weights uniform in [0.5, 1.5] and their biases in ±0.1,
// so that every weight matters in a test. The same seed gives the same
// bytes on every machine (math/rand/v2's PCG).
func RandomWeights(c Config, seed uint64) map[string]ir.WeightSource {
	r := rand.New(rand.NewPCG(seed, 0x677074322d)) // "gpt2-"
	return arch.RandomWeights(c.WeightShapes(), func(ns arch.NamedShape) func() float64 {
		lo, hi := -0.1, 0.1
		switch {
		case len(ns.Shape) == 2 && (c.Linear || ns.Name == "wte.weight" || ns.Name == "wpe.weight" || ns.Name == "lm_head.weight"):
			lo, hi = -1/math.Sqrt(float64(ns.Shape[1])), 1/math.Sqrt(float64(ns.Shape[1]))
		case len(ns.Shape) == 2:
			lo, hi = -1/math.Sqrt(float64(ns.Shape[0])), 1/math.Sqrt(float64(ns.Shape[0]))
		case strings.Contains(ns.Name, "ln_") && strings.HasSuffix(ns.Name, ".weight"):
			lo, hi = 0.5, 1.5
		}
		return arch.Uniform(r, lo, hi)
	})
}
