package gguf

import (
	"github.com/tapml/tapml/frontend/arch"
)

// hparams are what llama.cpp reads for every transformer from the ARCH.*
// metadata and the embedding's shape (its llama_hparams), read here once
// for every family: the sizes, the norm epsilon under the key the family
// names, RoPE, and whether the classifier is the token embedding.
type hparams struct {
	context                          int // context_length
	maxSeq                           int // the KV cache length: context_length, at most MaxSeqCap
	dim, layers, ffn, heads, kvHeads int
	headDim                          int // attention.key_length (= value_length); embedding_length/head_count by default
	ropeDims                         int // rope.dimension_count; headDim by default
	vocab                            int // token_embd's rows
	eps                              float64
	theta                            float64 // rope.freq_base; 10000 by default
	// ropeLinear is the factor of linear RoPE scaling
	// (rope.scaling.factor), 0 for none.
	ropeLinear float64
	tied       bool // no output.weight: the classifier is token_embd
	// experts and expertsUsed are expert_count and expert_used_count (0
	// without experts; Module refuses them for families without).
	experts, expertsUsed int
}

// The two keys of the norm epsilon: RMSNorm families and LayerNorm ones.
const (
	rmsEps   = "attention.layer_norm_rms_epsilon"
	layerEps = "attention.layer_norm_epsilon"
)

// bigDim bounds widths and head counts read from the metadata.
const bigDim = 1 << 24

// key is ARCH.name.
func key(arch, name string) string { return arch + "." + name }

// hparams reads the ARCH.* metadata every transformer family has, the
// norm epsilon under epsKey (rmsEps or layerEps).
func (f *File) hparams(arch, epsKey string) (hparams, error) {
	k := func(name string) string { return key(arch, name) }
	var h hparams
	var err error
	get := func(p *int, name string, def *int64, lo, hi int64) {
		if err != nil {
			return
		}
		var n int64
		n, err = f.intKey(k(name), def, lo, hi)
		*p = int(n)
	}
	get(&h.context, "context_length", nil, 1, 1<<31-1)
	get(&h.dim, "embedding_length", nil, 1, bigDim)
	get(&h.layers, "block_count", nil, 1, 1<<16)
	get(&h.ffn, "feed_forward_length", nil, 1, bigDim)
	get(&h.heads, "attention.head_count", nil, 1, bigDim)
	get(&h.kvHeads, "attention.head_count_kv", ptr(int64(h.heads)), 1, bigDim)
	if err != nil {
		return h, err
	}
	h.maxSeq = min(h.context, MaxSeqCap)
	if h.eps, err = f.requiredFloat(k(epsKey)); err != nil {
		return h, err
	}
	if h.theta, err = f.floatKey(k("rope.freq_base"), 10000); err != nil {
		return h, err
	}
	if err := f.headDims(arch, &h); err != nil {
		return h, err
	}
	get(&h.experts, "expert_count", ptr(int64(0)), 0, bigDim)
	get(&h.expertsUsed, "expert_used_count", ptr(int64(min(h.experts, 1))), min(int64(h.experts), 1), int64(h.experts))
	if err != nil {
		return h, err
	}
	if h.ropeLinear, err = f.ropeScaling(arch); err != nil {
		return h, err
	}
	h.vocab, h.tied, err = f.vocab(arch, h.dim)
	return h, err
}

// vocab reads the vocabulary size from token_embd's shape [dim, vocab]
// (and checks vocab_size against it), and whether the classifier is the
// token embedding: no output.weight.
func (f *File) vocab(arch string, dim int) (int, bool, error) {
	emb, ok := f.Tensor("token_embd.weight")
	if !ok {
		return 0, false, f.errorf("missing tensor %q", "token_embd.weight")
	}
	if len(emb.Dims) != 2 || int64(emb.Dims[0]) != int64(dim) {
		return 0, false, f.errorf("tensor %q has GGUF dims %v, want [%d, vocab]", emb.Name, emb.Dims, dim)
	}
	if emb.Dims[1] > 1<<31-1 {
		return 0, false, f.errorf("tensor %q has %d rows, too many for a vocabulary", emb.Name, emb.Dims[1])
	}
	vocab := int(emb.Dims[1])
	if n, err := f.intKey(key(arch, "vocab_size"), ptr(int64(vocab)), 1, 1<<31-1); err != nil {
		return 0, false, err
	} else if n != int64(vocab) {
		return 0, false, f.errorf("%s %d differs from the %d rows of token_embd.weight", key(arch, "vocab_size"), n, vocab)
	}
	return vocab, !f.has("output.weight"), nil
}

// headDims reads the width of the heads and of their rotated part:
// key_length and value_length (one width: the graphs have no other) and
// rope.dimension_count, as llama.cpp defaults them.
func (f *File) headDims(arch string, h *hparams) error {
	k := func(name string) string { return key(arch, name) }
	if _, ok := f.Get(k("attention.key_length")); !ok && h.dim%h.heads != 0 {
		return f.errorf("%s %d is not a multiple of %s %d, and there is no %s",
			k("embedding_length"), h.dim, k("attention.head_count"), h.heads, k("attention.key_length"))
	}
	kl, err := f.intKey(k("attention.key_length"), ptr(int64(h.dim/h.heads)), 1, bigDim)
	if err != nil {
		return err
	}
	vl, err := f.intKey(k("attention.value_length"), ptr(kl), 1, bigDim)
	if err != nil {
		return err
	}
	if vl != kl {
		return f.errorf("metadata %s = %d differs from %s = %d; not supported", k("attention.value_length"), vl, k("attention.key_length"), kl)
	}
	rd, err := f.intKey(k("rope.dimension_count"), ptr(kl), 1, kl)
	if err != nil {
		return err
	}
	if rd%2 != 0 {
		return f.errorf("metadata %s = %d must be even", k("rope.dimension_count"), rd)
	}
	h.headDim, h.ropeDims = int(kl), int(rd)
	return nil
}

// ropeScaling reads rope.scaling.type as llama.cpp does: absent means
// linear, which without a factor (rope.scaling.factor, or the older
// rope.scale_linear) is no scaling; "none" is none. It returns the linear
// factor, 0 for none.
func (f *File) ropeScaling(arch string) (float64, error) {
	typ := "linear"
	if v, ok := f.Get(key(arch, "rope.scaling.type")); ok {
		s, isStr := v.Str()
		if !isStr {
			return 0, f.errorf("metadata %s is %s %s, want a string", key(arch, "rope.scaling.type"), v.Type, v)
		}
		typ = s
	}
	switch typ {
	case "none":
		return 0, nil
	case "linear":
	default:
		return 0, f.errorf("%s %q is not supported (supported: none, linear)", key(arch, "rope.scaling.type"), typ)
	}
	factor, err := f.floatKey(key(arch, "rope.scaling.factor"), 0)
	if err != nil {
		return 0, err
	}
	if factor == 0 {
		if factor, err = f.floatKey(key(arch, "rope.scale_linear"), 0); err != nil {
			return 0, err
		}
	}
	if factor == 1 {
		factor = 0
	}
	return factor, nil
}

// sizes are the hyperparameters of a family assembled from arch's parts.
func (h hparams) sizes(act arch.Activation) arch.Sizes {
	return arch.Sizes{Dim: h.dim, Hidden: h.ffn, Layers: h.layers, Heads: h.heads, KVHeads: h.kvHeads,
		HeadDim: h.headDim, Vocab: h.vocab, MaxSeq: h.maxSeq, NormEps: h.eps, RopeTheta: h.theta,
		RopeDims: h.ropeDims, Act: act}
}
