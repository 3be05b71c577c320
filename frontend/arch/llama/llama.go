// Package llama is the LLaMA family of decoders for arch.Build: pre-norm
// blocks with RMSNorm, rotary position embeddings, grouped-query attention
// and a SwiGLU feed-forward, with a classifier tied to the token embedding
// or not. Qwen2 is LLaMA with q/k/v biases and RoPE on the halves of each
// head; Llama 3.1's rope scaling is per-pair frequency factors. Every
// LLaMA frontend (llama2.c, GGUF, Hugging Face) maps its file onto Config
// and the canonical weight names of WeightShapes.
package llama

import (
	"fmt"
	"math"
	"strconv"

	"github.com/tapml/tapml/frontend/arch"
	"github.com/tapml/tapml/ir"
)

// Config holds the hyperparameters of a LLaMA-family model.
type Config struct {
	Dim       int     // model width
	HiddenDim int     // feed-forward width
	Layers    int     // transformer blocks
	Heads     int     // query heads
	KVHeads   int     // key/value heads (GQA when fewer than Heads)
	Vocab     int     // vocabulary size
	MaxSeq    int     // KV cache length (context window)
	NormEps   float64 // RMSNorm epsilon
	RopeTheta float64 // RoPE base
	RopeStyle string  // "interleaved" (llama2.c, GGUF) or "half" (Hugging Face)
	// TiedEmbeddings: the classifier reuses tok_embeddings (no "output" weight).
	TiedEmbeddings bool
	// HeadSize is the width of one attention head when it is not
	// Dim/Heads (Hugging Face's head_dim); 0 means Dim/Heads.
	HeadSize int
	// QKVBias: the q, k and v projections have biases (Qwen2), weights
	// layers.N.attention.bq, bk and bv, added after the matmuls.
	QKVBias bool
	// RopeDims is the number of leading dims of each head that RoPE
	// rotates (partial rotary); the rest pass through. 0 means all.
	RopeDims int
	// RopeFreqFactors, when set, divide the frequency of each rotated pair
	// (one per pair: Llama 3.1's rope scaling, GGUF's rope_freqs).
	RopeFreqFactors []float64
	// QKNorm: q and k are RMS-normalised over each head before RoPE
	// (Qwen3), weights layers.N.attention.q_norm and k_norm [head dim].
	QKNorm bool
	// MoE, when set, makes the feed-forward of its layers a mixture of
	// experts (moe.go); HiddenDim is then the width of the layers it
	// leaves dense.
	MoE *MoE
}

// HeadDim is the width of one attention head.
func (c Config) HeadDim() int {
	if c.HeadSize != 0 {
		return c.HeadSize
	}
	return c.Dim / c.Heads
}

// Validate checks that the hyperparameters describe a buildable model.
func (c Config) Validate() error {
	switch {
	case c.Dim <= 0 || c.HiddenDim <= 0 || c.Layers <= 0 || c.Heads <= 0 || c.KVHeads <= 0 || c.Vocab <= 0 || c.MaxSeq <= 0:
		return fmt.Errorf("hyperparameters must be positive: %+v", c)
	case c.HeadSize < 0 || c.RopeDims < 0:
		return fmt.Errorf("head size %d and rope dims %d must not be negative", c.HeadSize, c.RopeDims)
	case c.HeadSize == 0 && c.Dim%c.Heads != 0:
		return fmt.Errorf("dim %d is not a multiple of heads %d", c.Dim, c.Heads)
	case c.Heads%c.KVHeads != 0:
		return fmt.Errorf("heads %d is not a multiple of kv heads %d", c.Heads, c.KVHeads)
	case c.RopeDims == 0 && c.HeadDim()%2 != 0:
		return fmt.Errorf("head dim %d must be even for RoPE", c.HeadDim())
	case c.RopeDims != 0 && (c.RopeDims%2 != 0 || c.RopeDims > c.HeadDim()):
		return fmt.Errorf("rope dims %d must be even and at most the head dim %d", c.RopeDims, c.HeadDim())
	case c.RopeStyle != "interleaved" && c.RopeStyle != "half":
		return fmt.Errorf("rope style %q must be interleaved or half", c.RopeStyle)
	case c.NormEps <= 0 || c.RopeTheta <= 0:
		return fmt.Errorf("norm eps %g and rope theta %g must be positive", c.NormEps, c.RopeTheta)
	}
	if c.MoE != nil {
		if err := c.MoE.validate(c.Layers); err != nil {
			return err
		}
	}
	if n := len(c.RopeFreqFactors); n > 0 {
		pairs := c.HeadDim() / 2
		if c.RopeDims != 0 {
			pairs = c.RopeDims / 2
		}
		if n != pairs {
			return fmt.Errorf("%d rope frequency factors for %d rotated pairs", n, pairs)
		}
		for i, f := range c.RopeFreqFactors {
			if !(f > 0) || math.IsInf(f, 1) {
				return fmt.Errorf("rope frequency factor %d is %g, want positive and finite", i, f)
			}
		}
	}
	return nil
}

// WeightShapes lists every weight the graph needs, with its shape, in file
// order. Linear weights are stored out×in, as llama2.c, GGUF and PyTorch do.
func (c Config) WeightShapes() []arch.NamedShape {
	hd := c.HeadDim()
	ws := []arch.NamedShape{arch.Named("tok_embeddings", c.Vocab, c.Dim)}
	for l := 0; l < c.Layers; l++ {
		p := layer(l)
		ws = append(ws,
			arch.Named(p+"attention_norm", c.Dim),
			arch.Named(p+"attention.wq", c.Heads*hd, c.Dim),
			arch.Named(p+"attention.wk", c.KVHeads*hd, c.Dim),
			arch.Named(p+"attention.wv", c.KVHeads*hd, c.Dim),
		)
		if c.QKVBias {
			ws = append(ws,
				arch.Named(p+"attention.bq", c.Heads*hd),
				arch.Named(p+"attention.bk", c.KVHeads*hd),
				arch.Named(p+"attention.bv", c.KVHeads*hd),
			)
		}
		if c.QKNorm {
			ws = append(ws, arch.Named(p+"attention.q_norm", hd), arch.Named(p+"attention.k_norm", hd))
		}
		ws = append(ws, arch.Named(p+"attention.wo", c.Dim, c.Heads*hd), arch.Named(p+"ffn_norm", c.Dim))
		if c.MoE.On(l) {
			ws = append(ws, c.MoE.weightShapes(p, c.Dim)...)
			continue
		}
		ws = append(ws,
			arch.Named(p+"feed_forward.w1", c.HiddenDim, c.Dim),
			arch.Named(p+"feed_forward.w2", c.Dim, c.HiddenDim),
			arch.Named(p+"feed_forward.w3", c.HiddenDim, c.Dim),
		)
	}
	ws = append(ws, arch.Named("norm", c.Dim))
	if !c.TiedEmbeddings {
		ws = append(ws, arch.Named("output", c.Vocab, c.Dim))
	}
	return ws
}

// layer is the prefix of layer l's weight names and provenance.
func layer(l int) string { return "layers." + strconv.Itoa(l) + "." }

// Decoder describes the graph to arch.Build.
func (c Config) Decoder() arch.Decoder {
	return arch.Decoder{
		Arch: "llama", Config: c.meta(), Layers: c.Layers, MaxSeq: c.MaxSeq,
		State: func(int) []arch.State { return arch.KVCache(c.MaxSeq, c.KVHeads, c.HeadDim()) },
		Embed: func(f *arch.Forward) *ir.Value {
			return f.At("tok_embeddings").Gather(f.W("tok_embeddings"), f.Tokens)
		},
		Block: c.block,
		Norm: func(f *arch.Forward, x *ir.Value) *ir.Value {
			return f.At("norm").RMSNorm(x, f.W("norm"), c.NormEps)
		},
		Logits: func(f *arch.Forward, x *ir.Value) *ir.Value {
			cls := "output"
			if c.TiedEmbeddings {
				cls = "tok_embeddings"
			}
			return f.At("output").Linear(x, f.W(cls))
		},
	}
}

// meta is the module's meta "config". Extensions are recorded only when
// used, so older models keep their meta.
func (c Config) meta() string {
	s := fmt.Sprintf("dim=%d hidden=%d layers=%d heads=%d kv_heads=%d vocab=%d max_seq=%d eps=%g theta=%g rope=%s tied=%v",
		c.Dim, c.HiddenDim, c.Layers, c.Heads, c.KVHeads, c.Vocab, c.MaxSeq, c.NormEps, c.RopeTheta, c.RopeStyle, c.TiedEmbeddings)
	if c.HeadSize != 0 {
		s += fmt.Sprintf(" head_dim=%d", c.HeadSize)
	}
	if c.QKVBias {
		s += " qkv_bias=true"
	}
	if c.RopeDims != 0 {
		s += fmt.Sprintf(" rope_dims=%d", c.RopeDims)
	}
	if len(c.RopeFreqFactors) > 0 {
		s += fmt.Sprintf(" rope_freq_factors=%d", len(c.RopeFreqFactors))
	}
	if c.QKNorm {
		s += " qk_norm=true"
	}
	if c.MoE != nil {
		s += " " + c.MoE.meta()
	}
	return s
}

// rope is the attributes of the rope nodes.
func (c Config) rope() ir.Attrs {
	a := ir.Attrs{"theta": ir.FloatAttr(c.RopeTheta), "style": ir.StringAttr(c.RopeStyle)}
	if c.RopeDims != 0 && c.RopeDims != c.HeadDim() {
		a["dims"] = ir.IntAttr(int64(c.RopeDims))
	}
	if len(c.RopeFreqFactors) > 0 {
		a["freq_factors"] = ir.FloatsAttr(c.RopeFreqFactors...)
	}
	return a
}

// block is one pre-norm block: x + attention(norm(x)), then h + ffn(norm(h)).
func (c Config) block(f *arch.Forward, l int, x *ir.Value, kv []*ir.Value) (*ir.Value, []*ir.Value) {
	p, hd := layer(l), c.HeadDim()
	h := f.At(p+"attention_norm").RMSNorm(x, f.W(p+"attention_norm"), c.NormEps)
	proj := func(name, bias string, heads int) *ir.Value {
		y := f.At(p+name).Linear(h, f.W(p+name))
		if c.QKVBias {
			y = f.At(p+bias).Add(y, f.W(p+bias))
			f.At(p + name)
		}
		return f.Heads(y, heads, hd)
	}
	q := proj("attention.wq", "attention.bq", c.Heads)
	k := proj("attention.wk", "attention.bk", c.KVHeads)
	v := proj("attention.wv", "attention.bv", c.KVHeads)
	if c.QKNorm {
		q = f.At(p+"attention.q_norm").RMSNorm(q, f.W(p+"attention.q_norm"), c.NormEps)
		k = f.At(p+"attention.k_norm").RMSNorm(k, f.W(p+"attention.k_norm"), c.NormEps)
	}
	q = f.At(p+"attention.rope_q").Rope(q, f.Pos, c.rope())
	k = f.At(p+"attention.rope_k").Rope(k, f.Pos, c.rope())
	a, kc, vc := f.CachedAttention(p+"attention", q, k, v, kv[0], kv[1], 1/math.Sqrt(float64(hd)))
	o := f.At(p+"attention.wo").Linear(a, f.W(p+"attention.wo"))
	x = f.At(p+"attention.residual").Add(x, o)
	h = f.At(p+"ffn_norm").RMSNorm(x, f.W(p+"ffn_norm"), c.NormEps)
	var d *ir.Value
	if c.MoE.On(l) {
		d = c.MoE.ffn(f, p, h)
	} else {
		d = swiGLU(f, p+"feed_forward.", h)
	}
	return f.At(p+"feed_forward.residual").Add(x, d), []*ir.Value{kc, vc}
}

// swiGLU is w2(silu(w1·h) ⊙ w3·h) with the weights prefix+w1, w2 and w3,
// at their provenance.
func swiGLU(f *arch.Forward, prefix string, h *ir.Value) *ir.Value {
	g := f.At(prefix+"w1").Linear(h, f.W(prefix+"w1"))
	u := f.At(prefix+"w3").Linear(h, f.W(prefix+"w3"))
	g = f.At(prefix+"silu").Unary(ir.OpSilu, g)
	g = f.At(prefix+"gate").Mul(g, u)
	return f.At(prefix+"w2").Linear(g, f.W(prefix+"w2"))
}
