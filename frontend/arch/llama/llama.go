// Package llama is the LLaMA family of decoders for arch.Build: pre-norm
// blocks with RMSNorm, rotary position embeddings, grouped-query attention
// and a SwiGLU feed-forward, with a classifier tied to the token embedding
// or not. Qwen2 is LLaMA with q/k/v biases and RoPE on the halves of each
// head; Llama 3.1's rope scaling is per-pair frequency factors; Mistral
// adds a sliding window, Qwen3 a per-head RMSNorm of q and k, Phi-3 fused
// q/k/v and gate/up projections; Mixtral, Qwen2-MoE and Qwen3-MoE a
// mixture-of-experts feed-forward (moe.go). Every LLaMA frontend
// (llama2.c, GGUF, Hugging Face) maps its file onto Config and the
// canonical weight names of WeightShapes. Families whose blocks differ
// more (arch/gemma) build on Parts: the attention and feed-forward of a
// layer.
package llama

import (
	"fmt"
	"math"
	"strconv"
	"strings"

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
	// RopeScaling is a scaling of RoPE by type (linear, dynamic, llama3,
	// yarn, longrope: Hugging Face's rope_parameters); not with
	// RopeFreqFactors.
	RopeScaling arch.RopeScaling
	// SlidingWindow, when positive, limits the attention of the layers
	// SlidingLayers marks (every layer when it is nil) to the last
	// SlidingWindow positions.
	SlidingWindow int
	SlidingLayers []bool
	// LocalRopeTheta, when positive, is the RoPE base of the layers
	// SlidingLayers marks, unscaled (Gemma 3's local layers).
	LocalRopeTheta float64
	// QKNorm: q and k are RMS-normed per head before RoPE (Qwen3), by
	// layers.N.attention.q_norm and k_norm [head dim].
	QKNorm bool
	// AttnScale multiplies q·k (0 means 1/sqrt(head dim)); AttnSoftcap,
	// when positive, soft-caps the scores (Gemma 2).
	AttnScale, AttnSoftcap float64
	// FusedQKV: one projection for q, k and v (layers.N.attention.wqkv,
	// their rows in that order); FusedGateUp: one for the gate and up
	// projections (layers.N.feed_forward.w13, gate rows first). Phi-3.
	FusedQKV, FusedGateUp bool
	// MoE, when set, makes the feed-forward of its layers a mixture of
	// experts (moe.go); HiddenDim is then the width of the layers it
	// leaves dense.
	MoE *MoE
}

// rotated is the number of dims of each head that RoPE rotates.
func (c Config) rotated() int {
	if c.RopeDims != 0 {
		return c.RopeDims
	}
	return c.HeadDim()
}

// local reports whether SlidingLayers marks layer l (all when nil).
func (c Config) local(l int) bool { return c.SlidingLayers == nil || c.SlidingLayers[l] }

// Sliding reports whether layer l attends through the sliding window.
func (c Config) Sliding(l int) bool { return c.SlidingWindow > 0 && c.local(l) }

// maxRopeTable bounds the frequencies of a dynamic NTK table (64 MiB):
// far above real models (4096 positions × 64 pairs is 1 MiB).
const maxRopeTable = 1 << 24

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
	switch {
	case c.SlidingWindow < 0 || c.SlidingLayers != nil && len(c.SlidingLayers) != c.Layers:
		return fmt.Errorf("sliding window %d over %d layer flags for %d layers", c.SlidingWindow, len(c.SlidingLayers), c.Layers)
	case c.LocalRopeTheta < 0 || math.IsInf(c.LocalRopeTheta, 1):
		return fmt.Errorf("local rope theta %g must be positive or 0", c.LocalRopeTheta)
	case !(c.AttnScale >= 0) || math.IsInf(c.AttnScale, 1) || !(c.AttnSoftcap >= 0) || math.IsInf(c.AttnSoftcap, 1):
		return fmt.Errorf("attention scale %g and softcap %g must be finite and not negative", c.AttnScale, c.AttnSoftcap)
	case c.FusedQKV && c.QKVBias:
		return fmt.Errorf("fused q/k/v projections with biases are not implemented")
	case c.RopeScaling.Type != "" && len(c.RopeFreqFactors) > 0:
		return fmt.Errorf("rope scaling %s and rope frequency factors are exclusive", c.RopeScaling.Type)
	}
	if err := c.RopeScaling.Validate(c.rotated()); err != nil {
		return err
	}
	if rows, pairs := c.MaxSeq-c.RopeScaling.OriginalMax+1, c.rotated()/2; c.RopeScaling.Type == "dynamic" && rows*pairs > maxRopeTable {
		return fmt.Errorf("dynamic NTK needs a table of %d lengths × %d pairs, more than %d frequencies", rows, pairs, maxRopeTable)
	}
	if c.MoE != nil {
		if err := c.MoE.validate(c.Layers); err != nil {
			return err
		}
	}
	if n := len(c.RopeFreqFactors); n > 0 {
		pairs := c.rotated() / 2
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
		ws = append(ws, arch.Named(p+"attention_norm", c.Dim))
		if c.FusedQKV {
			ws = append(ws, arch.Named(p+"attention.wqkv", (c.Heads+2*c.KVHeads)*hd, c.Dim))
		} else {
			ws = append(ws,
				arch.Named(p+"attention.wq", c.Heads*hd, c.Dim),
				arch.Named(p+"attention.wk", c.KVHeads*hd, c.Dim),
				arch.Named(p+"attention.wv", c.KVHeads*hd, c.Dim),
			)
		}
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
		if c.FusedGateUp {
			ws = append(ws,
				arch.Named(p+"feed_forward.w13", 2*c.HiddenDim, c.Dim),
				arch.Named(p+"feed_forward.w2", c.Dim, c.HiddenDim),
			)
		} else {
			ws = append(ws,
				arch.Named(p+"feed_forward.w1", c.HiddenDim, c.Dim),
				arch.Named(p+"feed_forward.w2", c.Dim, c.HiddenDim),
				arch.Named(p+"feed_forward.w3", c.HiddenDim, c.Dim),
			)
		}
	}
	ws = append(ws, arch.Named("norm", c.Dim))
	if !c.TiedEmbeddings {
		ws = append(ws, arch.Named("output", c.Vocab, c.Dim))
	}
	return ws
}

// Layer is the prefix of layer l's weight names and provenance.
func Layer(l int) string { return "layers." + strconv.Itoa(l) + "." }

// SplitLayer splits a weight name "layers.N.rest" into Layer(N) and
// "rest"; other names give "" and the name.
func SplitLayer(name string) (prefix, rest string) {
	num, rest, ok := strings.Cut(strings.TrimPrefix(name, "layers."), ".")
	if l, err := strconv.Atoi(num); ok && err == nil && l >= 0 && strings.HasPrefix(name, "layers.") && Layer(l) == "layers."+num+"." {
		return Layer(l), rest
	}
	return "", name
}

// layer is Layer, for this file's many uses.
func layer(l int) string { return Layer(l) }

// Decoder describes the graph to arch.Build.
func (c Config) Decoder() arch.Decoder {
	p := c.Parts(c.RMSNorm)
	return arch.Decoder{
		Arch: "llama", Config: c.Meta(), Layers: c.Layers, MaxSeq: c.MaxSeq,
		State: func(int) []arch.State { return arch.KVCache(c.MaxSeq, c.KVHeads, c.HeadDim()) },
		Embed: func(f *arch.Forward) *ir.Value {
			return f.At("tok_embeddings").Gather(f.W("tok_embeddings"), f.Tokens)
		},
		Block: p.block,
		Norm: func(f *arch.Forward, x *ir.Value) *ir.Value {
			return c.RMSNorm(f, "norm", x)
		},
		Logits:   c.Classifier,
		Computed: p.Computed(),
	}
}

// Classifier is the logits of x: the output weight, or the token
// embedding when tied.
func (c Config) Classifier(f *arch.Forward, x *ir.Value) *ir.Value {
	cls := "output"
	if c.TiedEmbeddings {
		cls = "tok_embeddings"
	}
	return f.At("output").Linear(x, f.W(cls))
}

// A Norm normalises x by the norm weight of a canonical name (at that
// provenance): RMSNorm here, Gemma's (1+w) RMSNorm in arch/gemma.
type Norm func(f *arch.Forward, name string, x *ir.Value) *ir.Value

// RMSNorm is LLaMA's Norm.
func (c Config) RMSNorm(f *arch.Forward, name string, x *ir.Value) *ir.Value {
	return f.At(name).RMSNorm(x, f.W(name), c.NormEps)
}

// Parts are a configuration's attention and feed-forward, with the RoPE
// of its global and sliding layers computed once.
type Parts struct {
	c             Config
	norm          Norm
	global, local arch.Rope
}

// Parts returns the parts of c with norm for the q/k norms.
func (c Config) Parts(norm Norm) Parts {
	p := Parts{c: c, norm: norm}
	p.global = c.RopeScaling.Rope("rope.freqs", c.RopeTheta, c.RopeStyle, c.HeadDim(), c.rotated(), c.MaxSeq)
	if len(c.RopeFreqFactors) > 0 {
		p.global.Attrs["freq_factors"] = ir.FloatsAttr(c.RopeFreqFactors...)
	}
	p.local = p.global
	if c.LocalRopeTheta > 0 {
		p.local = arch.RopeScaling{}.Rope("", c.LocalRopeTheta, c.RopeStyle, c.HeadDim(), c.rotated(), c.MaxSeq)
	}
	return p
}

// Computed is the frequency table of the scaled RoPE, if it has one.
func (p Parts) Computed() []*arch.Computed {
	if p.global.Table == nil {
		return nil
	}
	return []*arch.Computed{p.global.Table}
}

// Meta is the module's meta "config". Extensions are recorded only when
// used, so older models keep their meta.
func (c Config) Meta() string {
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
	if r := c.RopeScaling; r.Type != "" {
		s += fmt.Sprintf(" rope_scaling=%s", r.Type)
	}
	if c.SlidingWindow > 0 {
		s += fmt.Sprintf(" sliding_window=%d", c.SlidingWindow)
		if c.SlidingLayers != nil {
			s += " sliding_layers=" + layerMask(c.SlidingLayers)
		}
	}
	if c.LocalRopeTheta > 0 {
		s += fmt.Sprintf(" local_theta=%g", c.LocalRopeTheta)
	}
	if c.QKNorm {
		s += " qk_norm=true"
	}
	if c.AttnScale > 0 {
		s += fmt.Sprintf(" attn_scale=%g", c.AttnScale)
	}
	if c.AttnSoftcap > 0 {
		s += fmt.Sprintf(" attn_softcap=%g", c.AttnSoftcap)
	}
	if c.FusedQKV || c.FusedGateUp {
		s += fmt.Sprintf(" fused_qkv=%v fused_gate_up=%v", c.FusedQKV, c.FusedGateUp)
	}
	if c.MoE != nil {
		s += " " + c.MoE.meta()
	}
	return s
}

// layerMask writes layer flags as a string of 0s and 1s.
func layerMask(flags []bool) string {
	b := make([]byte, len(flags))
	for i, f := range flags {
		b[i] = '0'
		if f {
			b[i] = '1'
		}
	}
	return string(b)
}

// block is one pre-norm block: x + attention(norm(x)), then h + ffn(norm(h)).
func (p Parts) block(f *arch.Forward, l int, x *ir.Value, kv []*ir.Value) (*ir.Value, []*ir.Value) {
	pre := layer(l)
	h := p.norm(f, pre+"attention_norm", x)
	o, kv := p.Attention(f, l, h, kv)
	x = f.At(pre+"attention.residual").Add(x, o)
	h = p.norm(f, pre+"ffn_norm", x)
	var d *ir.Value
	if p.c.MoE.On(l) {
		d = p.c.MoE.ffn(f, pre, h)
	} else {
		d = p.FeedForward(f, l, h, ir.OpSilu)
	}
	return f.At(pre+"feed_forward.residual").Add(x, d), kv
}

// Attention is layer l's self-attention of the normed hidden states h
// through its KV cache kv: the projections, q/k norms, RoPE, attention
// and the output projection. It returns the output and the new cache.
func (p Parts) Attention(f *arch.Forward, l int, h *ir.Value, kv []*ir.Value) (*ir.Value, []*ir.Value) {
	c, pre, hd := p.c, layer(l), p.c.HeadDim()
	var fused *ir.Value
	if c.FusedQKV {
		fused = f.At(pre+"attention.wqkv").Linear(h, f.W(pre+"attention.wqkv"))
	}
	// proj is the heads of one projection: the rows from `from` of the
	// fused one, or a weight of its own (and its bias).
	proj := func(name, bias string, heads, from int) *ir.Value {
		var y *ir.Value
		if fused != nil {
			y = f.At(pre+"attention.wqkv").Slice(fused, 1, int64(from), int64(from+heads*hd))
		} else {
			y = f.At(pre+name).Linear(h, f.W(pre+name))
		}
		if c.QKVBias {
			y = f.At(pre+bias).Add(y, f.W(pre+bias))
			f.At(pre + name)
		}
		return f.Heads(y, heads, hd)
	}
	q := proj("attention.wq", "attention.bq", c.Heads, 0)
	k := proj("attention.wk", "attention.bk", c.KVHeads, c.Heads*hd)
	v := proj("attention.wv", "attention.bv", c.KVHeads, (c.Heads+c.KVHeads)*hd)
	if c.QKNorm {
		q = p.norm(f, pre+"attention.q_norm", q)
		k = p.norm(f, pre+"attention.k_norm", k)
	}
	rope := p.global
	attrs := ir.Attrs{"scale": ir.FloatAttr(1 / math.Sqrt(float64(hd)))}
	if c.AttnScale > 0 {
		attrs["scale"] = ir.FloatAttr(c.AttnScale)
	}
	if c.AttnSoftcap > 0 {
		attrs["softcap"] = ir.FloatAttr(c.AttnSoftcap)
	}
	if c.local(l) {
		rope = p.local
	}
	if c.Sliding(l) {
		attrs["window"] = ir.IntAttr(int64(c.SlidingWindow))
	}
	q = f.Rope(pre+"attention.rope_q", q, rope)
	k = f.Rope(pre+"attention.rope_k", k, rope)
	a, kc, vc := f.CachedAttentionWith(pre+"attention", q, k, v, kv[0], kv[1], attrs)
	return f.At(pre+"attention.wo").Linear(a, f.W(pre+"attention.wo")), []*ir.Value{kc, vc}
}

// FeedForward is layer l's gated feed-forward of the normed hidden states
// h: w2(act(w1·h) · w3·h), with the gate and up rows of one fused weight
// when FusedGateUp.
func (p Parts) FeedForward(f *arch.Forward, l int, h *ir.Value, act ir.Op) *ir.Value {
	pre := layer(l) + "feed_forward."
	if !p.c.FusedGateUp {
		return gatedFeedForward(f, pre, h, act)
	}
	gu := f.At(pre+"w13").Linear(h, f.W(pre+"w13"))
	n := int64(p.c.HiddenDim)
	return gated(f, pre, f.Slice(gu, 1, 0, n), f.Slice(gu, 1, n, 2*n), act)
}

// gatedFeedForward is w2(act(w1·h) · w3·h) with the weights prefix+w1, w2
// and w3, at their provenance (a dense layer's feed-forward, a shared
// expert).
func gatedFeedForward(f *arch.Forward, prefix string, h *ir.Value, act ir.Op) *ir.Value {
	g := f.At(prefix+"w1").Linear(h, f.W(prefix+"w1"))
	u := f.At(prefix+"w3").Linear(h, f.W(prefix+"w3"))
	return gated(f, prefix, g, u, act)
}

// gated is w2(act(g) · u) of the gate and up projections g and u, with
// the weight prefix+w2.
func gated(f *arch.Forward, prefix string, g, u *ir.Value, act ir.Op) *ir.Value {
	g = f.At(prefix+act.String()).Unary(act, g)
	g = f.At(prefix+"gate").Mul(g, u)
	return f.At(prefix+"w2").Linear(g, f.W(prefix+"w2"))
}
