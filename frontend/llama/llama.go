// Package llama builds the IR of a LLaMA-family decoder from its
// hyperparameters and weights. Every LLaMA frontend (llama2.c, GGUF,
// Hugging Face) maps its file onto Config and the canonical weight names
// below, so all of them share one graph.
package llama

import (
	"fmt"
	"math"
	"strconv"

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
func (c Config) WeightShapes() []NamedShape {
	hd := c.HeadDim()
	ws := []NamedShape{{"tok_embeddings", []int{c.Vocab, c.Dim}}}
	for l := 0; l < c.Layers; l++ {
		p := "layers." + strconv.Itoa(l) + "."
		ws = append(ws,
			NamedShape{p + "attention_norm", []int{c.Dim}},
			NamedShape{p + "attention.wq", []int{c.Heads * hd, c.Dim}},
			NamedShape{p + "attention.wk", []int{c.KVHeads * hd, c.Dim}},
			NamedShape{p + "attention.wv", []int{c.KVHeads * hd, c.Dim}},
		)
		if c.QKVBias {
			ws = append(ws,
				NamedShape{p + "attention.bq", []int{c.Heads * hd}},
				NamedShape{p + "attention.bk", []int{c.KVHeads * hd}},
				NamedShape{p + "attention.bv", []int{c.KVHeads * hd}},
			)
		}
		ws = append(ws,
			NamedShape{p + "attention.wo", []int{c.Dim, c.Heads * hd}},
			NamedShape{p + "ffn_norm", []int{c.Dim}},
			NamedShape{p + "feed_forward.w1", []int{c.HiddenDim, c.Dim}},
			NamedShape{p + "feed_forward.w2", []int{c.Dim, c.HiddenDim}},
			NamedShape{p + "feed_forward.w3", []int{c.HiddenDim, c.Dim}},
		)
	}
	ws = append(ws, NamedShape{"norm", []int{c.Dim}})
	if !c.TiedEmbeddings {
		ws = append(ws, NamedShape{"output", []int{c.Vocab, c.Dim}})
	}
	return ws
}

// NamedShape is a weight name with its shape.
type NamedShape struct {
	Name  string
	Shape []int
}

// Build returns the module of a model: functions "prefill" (tokens
// i32[seq]) and "decode" (tokens i32[1]), both taking pos (i32[], the
// position of the first token) and the KV caches, and returning the
// logits of the last token (f32[1, vocab]) and the updated caches. Weights
// are f32; weights[name] supplies the data of each name of WeightShapes.
func Build(name string, c Config, weights map[string]ir.WeightSource) (*ir.Module, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	m := ir.NewModule(name)
	m.Meta["arch"] = "llama"
	m.Meta["config"] = fmt.Sprintf("dim=%d hidden=%d layers=%d heads=%d kv_heads=%d vocab=%d max_seq=%d eps=%g theta=%g rope=%s tied=%v",
		c.Dim, c.HiddenDim, c.Layers, c.Heads, c.KVHeads, c.Vocab, c.MaxSeq, c.NormEps, c.RopeTheta, c.RopeStyle, c.TiedEmbeddings)
	// Extensions are recorded only when used, so older models keep their meta.
	if c.HeadSize != 0 {
		m.Meta["config"] += fmt.Sprintf(" head_dim=%d", c.HeadSize)
	}
	if c.QKVBias {
		m.Meta["config"] += " qkv_bias=true"
	}
	if c.RopeDims != 0 {
		m.Meta["config"] += fmt.Sprintf(" rope_dims=%d", c.RopeDims)
	}
	if len(c.RopeFreqFactors) > 0 {
		m.Meta["config"] += fmt.Sprintf(" rope_freq_factors=%d", len(c.RopeFreqFactors))
	}
	w := map[string]*ir.Value{}
	for _, ns := range c.WeightShapes() {
		src, ok := weights[ns.Name]
		if !ok {
			return nil, fmt.Errorf("missing weight %q", ns.Name)
		}
		s := make([]int64, len(ns.Shape))
		for i, d := range ns.Shape {
			s[i] = int64(d)
		}
		w[ns.Name] = m.AddWeight(ns.Name, ir.T(ir.F32, ir.S(s...)), src)
	}
	for _, fn := range []struct {
		name string
		seq  ir.Dim
	}{{"prefill", ir.Sym("seq")}, {"decode", ir.D(1)}} {
		if err := buildForward(m, fn.name, fn.seq, c, w); err != nil {
			return nil, err
		}
	}
	if err := ir.Verify(m); err != nil {
		return nil, err
	}
	return m, nil
}

func buildForward(m *ir.Module, name string, seq ir.Dim, c Config, w map[string]*ir.Value) error {
	b := ir.NewFunction(m, name)
	hd := int64(c.HeadDim())
	tokens := b.Param("tokens", ir.T(ir.I32, ir.Shape{seq}))
	pos := b.Param("pos", ir.T(ir.I32, ir.Shape{}))
	cacheType := ir.T(ir.F32, ir.S(int64(c.MaxSeq), int64(c.KVHeads), hd))
	var kc, vc []*ir.Value
	for l := 0; l < c.Layers; l++ {
		kc = append(kc, b.Param(fmt.Sprintf("k_cache.%d", l), cacheType))
		vc = append(vc, b.Param(fmt.Sprintf("v_cache.%d", l), cacheType))
	}
	x := b.At("tok_embeddings").Op(ir.OpGather, []*ir.Value{w["tok_embeddings"], tokens}, nil)
	rope := ir.Attrs{"theta": ir.FloatAttr(c.RopeTheta), "style": ir.StringAttr(c.RopeStyle)}
	if c.RopeDims != 0 && c.RopeDims != c.HeadDim() {
		rope["dims"] = ir.IntAttr(int64(c.RopeDims))
	}
	if len(c.RopeFreqFactors) > 0 {
		rope["freq_factors"] = ir.FloatsAttr(c.RopeFreqFactors...)
	}
	eps := ir.Attrs{"eps": ir.FloatAttr(c.NormEps)}
	var newK, newV []*ir.Value
	for l := 0; l < c.Layers; l++ {
		p := "layers." + strconv.Itoa(l) + "."
		h := b.At(p+"attention_norm").Op(ir.OpRMSNorm, []*ir.Value{x, w[p+"attention_norm"]}, eps)
		proj := func(name, bias string, heads int) *ir.Value {
			y := b.At(p+name).Linear(h, w[p+name])
			if c.QKVBias {
				y = b.At(p+bias).Add(y, w[p+bias])
				b.At(p + name)
			}
			return b.Reshape(y, ir.Shape{seq, ir.D(int64(heads)), ir.D(hd)})
		}
		q := proj("attention.wq", "attention.bq", c.Heads)
		k := proj("attention.wk", "attention.bk", c.KVHeads)
		v := proj("attention.wv", "attention.bv", c.KVHeads)
		q = b.At(p+"attention.rope_q").Op(ir.OpRope, []*ir.Value{q, pos}, rope)
		k = b.At(p+"attention.rope_k").Op(ir.OpRope, []*ir.Value{k, pos}, rope)
		kcache := b.At(p+"attention.k_cache").Op(ir.OpKVWrite, []*ir.Value{kc[l], k, pos}, nil)
		vcache := b.At(p+"attention.v_cache").Op(ir.OpKVWrite, []*ir.Value{vc[l], v, pos}, nil)
		newK, newV = append(newK, kcache), append(newV, vcache)
		a := b.At(p+"attention").Op(ir.OpAttention, []*ir.Value{q, kcache, vcache, pos},
			ir.Attrs{"scale": ir.FloatAttr(1 / math.Sqrt(float64(hd)))})
		a = b.Reshape(a, ir.Shape{seq, ir.D(int64(c.Heads) * hd)})
		o := b.At(p+"attention.wo").Linear(a, w[p+"attention.wo"])
		x = b.At(p+"attention.residual").Add(x, o)
		h = b.At(p+"ffn_norm").Op(ir.OpRMSNorm, []*ir.Value{x, w[p+"ffn_norm"]}, eps)
		g := b.At(p+"feed_forward.w1").Linear(h, w[p+"feed_forward.w1"])
		u := b.At(p+"feed_forward.w3").Linear(h, w[p+"feed_forward.w3"])
		g = b.At(p+"feed_forward.silu").Unary(ir.OpSilu, g)
		g = b.At(p+"feed_forward.gate").Mul(g, u)
		d := b.At(p+"feed_forward.w2").Linear(g, w[p+"feed_forward.w2"])
		x = b.At(p+"feed_forward.residual").Add(x, d)
	}
	x = b.At("norm").Op(ir.OpRMSNorm, []*ir.Value{x, w["norm"]}, eps)
	x = b.At("last_token").Op(ir.OpSlice, []*ir.Value{x}, ir.Attrs{
		"axis": ir.IntAttr(0), "start": ir.IntAttr(-1), "end": ir.IntAttr(math.MaxInt32)})
	cls := w["output"]
	if c.TiedEmbeddings {
		cls = w["tok_embeddings"]
	}
	logits := b.At("output").Linear(x, cls)
	results := []*ir.Value{logits}
	for l := range newK {
		results = append(results, newK[l], newV[l])
	}
	b.Return(results...)
	return b.Err()
}
