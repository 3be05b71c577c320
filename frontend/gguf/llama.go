package gguf

import (
	"encoding/binary"
	"math"

	"github.com/tapml/tapml/frontend/arch/llama"
)

// llamaFamily reads LLaMA-architecture files (llama, qwen2) into
// arch/llama, with the RoPE layout and q/k/v biases of the architecture.
func llamaFamily(ropeStyle string, qkvBias bool) family {
	return family{
		names: llamaNames,
		config: func(f *File, arch string) (model, error) {
			c, ctx, err := f.llamaConfig(arch)
			if err != nil {
				return model{}, err
			}
			c.RopeStyle, c.QKVBias = ropeStyle, qkvBias
			md := model{config: c, context: ctx, maxSeq: c.MaxSeq}
			if c.RopeFreqFactors != nil {
				md.read = []string{ropeFreqs}
			}
			return md, nil
		},
	}
}

// llamaNames maps llama.cpp's tensor names to arch/llama's.
var llamaNames = tensorNames{
	global: map[string]string{"token_embd.weight": "tok_embeddings", "output_norm.weight": "norm", "output.weight": "output"},
	block: map[string]string{
		"attn_norm.weight": "attention_norm", "attn_q.weight": "attention.wq", "attn_k.weight": "attention.wk",
		"attn_v.weight": "attention.wv", "attn_q.bias": "attention.bq", "attn_k.bias": "attention.bk",
		"attn_v.bias": "attention.bv", "attn_output.weight": "attention.wo", "ffn_norm.weight": "ffn_norm",
		"ffn_gate.weight": "feed_forward.w1", "ffn_down.weight": "feed_forward.w2", "ffn_up.weight": "feed_forward.w3",
	},
	layer: "layers.",
}

// llamaConfig maps the ARCH.* metadata (llama.*, qwen2.*) to a
// llama.Config; it also returns the file's context length. Vocab comes
// from token_embd's shape. The config is validated by the caller.
func (f *File) llamaConfig(family string) (llama.Config, int, error) {
	const big = 1 << 24
	var c llama.Config
	k := func(key string) string { return family + "." + key }
	ctx, err := f.intKey(k("context_length"), nil, 1, 1<<31-1)
	if err != nil {
		return c, 0, err
	}
	dim, err := f.intKey(k("embedding_length"), nil, 1, big)
	if err != nil {
		return c, 0, err
	}
	layers, err := f.intKey(k("block_count"), nil, 1, 1<<16)
	if err != nil {
		return c, 0, err
	}
	hidden, err := f.intKey(k("feed_forward_length"), nil, 1, big)
	if err != nil {
		return c, 0, err
	}
	heads, err := f.intKey(k("attention.head_count"), nil, 1, big)
	if err != nil {
		return c, 0, err
	}
	kvHeads, err := f.intKey(k("attention.head_count_kv"), ptr(heads), 1, big)
	if err != nil {
		return c, 0, err
	}
	eps, err := f.floatKey(k("attention.layer_norm_rms_epsilon"), 0)
	if err != nil {
		return c, 0, err
	}
	if eps == 0 {
		return c, 0, f.errorf("missing metadata %s", k("attention.layer_norm_rms_epsilon"))
	}
	theta, err := f.floatKey(k("rope.freq_base"), 10000)
	if err != nil {
		return c, 0, err
	}
	if dim%heads != 0 {
		return c, 0, f.errorf("%s %d is not a multiple of %s %d", k("embedding_length"), dim, k("attention.head_count"), heads)
	}
	hd := dim / heads
	// Features the shared LLaMA graph does not express.
	for _, key := range []string{k("attention.key_length"), k("attention.value_length"), k("rope.dimension_count")} {
		n, err := f.intKey(key, ptr(hd), 1, big)
		if err != nil {
			return c, 0, err
		}
		if n != hd {
			return c, 0, f.errorf("metadata %s = %d differs from the head dim %d (embedding_length/head_count); not supported", key, n, hd)
		}
	}
	if n, err := f.intKey(k("expert_count"), ptr(0), 0, big); err != nil {
		return c, 0, err
	} else if n > 0 {
		return c, 0, f.errorf("%s = %d: mixture-of-experts models are not supported", k("expert_count"), n)
	}
	if v, ok := f.Get(k("rope.scaling.type")); ok {
		if s, _ := v.Str(); s != "none" && s != "" {
			return c, 0, f.errorf("%s %s is not supported (only none)", k("rope.scaling.type"), v)
		}
	}
	emb, ok := f.Tensor("token_embd.weight")
	if !ok {
		return c, 0, f.errorf("missing tensor %q", "token_embd.weight")
	}
	if len(emb.Dims) != 2 || int64(emb.Dims[0]) != dim {
		return c, 0, f.errorf("tensor %q has GGUF dims %v, want [%d, vocab]", emb.Name, emb.Dims, dim)
	}
	vocab := int64(emb.Dims[1])
	if n, err := f.intKey(k("vocab_size"), ptr(vocab), 1, 1<<31-1); err != nil {
		return c, 0, err
	} else if n != vocab {
		return c, 0, f.errorf("%s %d differs from the %d rows of token_embd.weight", k("vocab_size"), n, vocab)
	}
	_, hasOutput := f.Tensor("output.weight")
	c = llama.Config{
		Dim: int(dim), HiddenDim: int(hidden), Layers: int(layers), Heads: int(heads), KVHeads: int(kvHeads),
		Vocab: int(vocab), MaxSeq: int(min(ctx, MaxSeqCap)), NormEps: eps, RopeTheta: theta,
		TiedEmbeddings: !hasOutput,
	}
	if t, ok := f.Tensor(ropeFreqs); ok {
		if c.RopeFreqFactors, err = f.ropeFreqFactors(t, int(hd/2)); err != nil {
			return c, 0, err
		}
	}
	return c, int(ctx), nil
}

// ropeFreqs is the tensor of per-pair RoPE frequency divisors that
// llama.cpp's converter writes for Llama 3.1's rope scaling.
const ropeFreqs = "rope_freqs.weight"

// ropeFreqFactors reads the rope_freqs tensor: one positive divisor per
// rotated pair.
func (f *File) ropeFreqFactors(t *TensorInfo, pairs int) ([]float64, error) {
	if len(t.Dims) != 1 || t.Dims[0] != uint64(pairs) {
		return nil, f.errorf("tensor %q has GGUF dims %v, want [%d] (head_dim/2)", t.Name, t.Dims, pairs)
	}
	src, err := f.source(t)
	if err != nil {
		return nil, err
	}
	raw, err := src.Bytes()
	if err != nil {
		return nil, err
	}
	out := make([]float64, len(raw)/4)
	for i := range out {
		out[i] = float64(math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:])))
		if !(out[i] > 0) || math.IsInf(out[i], 1) {
			return nil, f.errorf("tensor %q: factor %d is %g, want positive and finite", t.Name, i, out[i])
		}
	}
	return out, nil
}
