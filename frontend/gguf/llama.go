package gguf

import (
	"encoding/binary"
	"math"

	"github.com/tapml/tapml/frontend/arch"
	"github.com/tapml/tapml/frontend/arch/llama"
)

// A llamaArch is a GGUF architecture of arch/llama: llama (Llama 1-3,
// Mistral, Mixtral), qwen2, qwen2moe, qwen3, qwen3moe and phi3. ropeStyle
// is llama.cpp's rope type for it: NORM rotates adjacent pairs (llama's
// converter permuted q and k for it), NEOX the halves of each head.
type llamaArch struct {
	ropeStyle string
	qkvBias   bool // Qwen2's q, k and v biases
	qkNorm    bool // Qwen3's per-head q and k RMSNorms
	fused     bool // Phi-3's fused q/k/v and gate/up projections
	ropeFreqs bool // Llama 3.1's rope_freqs tensor is read
	moe       *moeArch
}

// A moeArch is how llama.cpp builds an architecture's mixture of experts
// (its build_moe_ffn): a softmax router keeping expert_used_count of
// expert_count experts, each of width expert_feed_forward_length (else
// feed_forward_length, divided by the experts used when divide is set),
// their weights renormalised when norm is set, and a shared expert of
// width expert_shared_feed_forward_length (else feed_forward_length)
// gated by a sigmoid when shared is set. required: every file of the
// architecture has experts.
type moeArch struct {
	divide, norm, shared, required bool
}

var (
	llamaGGUF    = llamaArch{ropeStyle: "interleaved", ropeFreqs: true, moe: &moeArch{norm: true}}
	qwen2GGUF    = llamaArch{ropeStyle: "half", qkvBias: true}
	qwen2moeGGUF = llamaArch{ropeStyle: "half", qkvBias: true, moe: &moeArch{divide: true, shared: true, required: true}}
	qwen3GGUF    = llamaArch{ropeStyle: "half", qkNorm: true}
	qwen3moeGGUF = llamaArch{ropeStyle: "half", qkNorm: true, moe: &moeArch{divide: true, norm: true, required: true}}
	phi3GGUF     = llamaArch{ropeStyle: "half", fused: true}
)

func (a llamaArch) family() family {
	names := llamaNames
	if a.fused {
		names = phi3Names
	}
	return family{
		names: names, experts: a.moe != nil,
		config: func(f *File, name string) (model, error) {
			h, c, err := f.llamaConfig(name)
			if err != nil {
				return model{}, err
			}
			c.RopeStyle, c.QKVBias, c.QKNorm, c.FusedQKV, c.FusedGateUp = a.ropeStyle, a.qkvBias, a.qkNorm, a.fused, a.fused
			if a.moe != nil {
				if c.MoE, err = f.moe(name, h, a.moe); err != nil {
					return model{}, err
				}
			}
			md := model{config: c, context: h.context, maxSeq: c.MaxSeq}
			if t, ok := f.Tensor(ropeFreqs); ok && a.ropeFreqs {
				if c.RopeFreqFactors, err = f.ropeFreqFactors(t, c.HeadDim()/2); err != nil {
					return model{}, err
				}
				md.config, md.read = c, []string{ropeFreqs}
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
		"attn_v.bias": "attention.bv", "attn_q_norm.weight": "attention.q_norm", "attn_k_norm.weight": "attention.k_norm",
		"attn_output.weight": "attention.wo", "ffn_norm.weight": "ffn_norm",
		"ffn_gate.weight": "feed_forward.w1", "ffn_down.weight": "feed_forward.w2", "ffn_up.weight": "feed_forward.w3",
		// Mixtures of experts: the router, the experts' stacked weights
		// ([E, out, in]), the shared expert and its gate ([dim] here,
		// [1, dim] in arch/llama: the same bytes).
		"ffn_gate_inp.weight": "moe.router", "ffn_gate_exps.weight": "moe.w1", "ffn_up_exps.weight": "moe.w3",
		"ffn_down_exps.weight": "moe.w2", "ffn_gate_inp_shexp.weight": "moe.shared_gate",
		"ffn_gate_shexp.weight": "moe.shared.w1", "ffn_up_shexp.weight": "moe.shared.w3", "ffn_down_shexp.weight": "moe.shared.w2",
	},
	layer: "layers.",
}

// moe reads the mixture of experts of a file of architecture name.
func (f *File) moe(name string, h hparams, a *moeArch) (*llama.MoE, error) {
	if h.experts == 0 {
		if a.required {
			return nil, f.errorf("missing metadata %s: %s has experts", key(name, "expert_count"), name)
		}
		return nil, nil
	}
	width := int64(h.ffn)
	if a.divide {
		width /= int64(h.expertsUsed)
	}
	var err error
	if width, err = f.intKey(key(name, "expert_feed_forward_length"), ptr(width), 1, bigDim); err != nil {
		return nil, err
	}
	m := &llama.MoE{Experts: h.experts, TopK: h.expertsUsed, Hidden: int(width), NormTopK: a.norm}
	if a.shared {
		shared, err := f.intKey(key(name, "expert_shared_feed_forward_length"), ptr(int64(h.ffn)), 1, bigDim)
		if err != nil {
			return nil, err
		}
		m.SharedHidden = int(shared)
	}
	return m, nil
}

// phi3Names are llamaNames with Phi-3's fused projections: attn_qkv, and
// ffn_up holding the gate's rows, then the up projection's (llama.cpp's
// SwiGLU of one matrix silu-gates its second half by its first).
var phi3Names = llamaNames.with(nil, map[string]string{
	"attn_qkv.weight": "attention.wqkv", "ffn_up.weight": "feed_forward.w13",
})

// llamaConfig reads the hyperparameters of a file of the LLaMA family
// (or Gemma's) and maps them to a llama.Config; the caller sets the
// architecture's features and validates it.
func (f *File) llamaConfig(name string) (hparams, llama.Config, error) {
	h, err := f.hparams(name, rmsEps)
	if err != nil {
		return h, llama.Config{}, err
	}
	c := llama.Config{
		Dim: h.dim, HiddenDim: h.ffn, Layers: h.layers, Heads: h.heads, KVHeads: h.kvHeads,
		Vocab: h.vocab, MaxSeq: h.maxSeq, NormEps: h.eps, RopeTheta: h.theta, TiedEmbeddings: h.tied,
	}
	if h.dim%h.heads != 0 || h.headDim != h.dim/h.heads {
		c.HeadSize = h.headDim // Mistral NeMo's and Qwen3's heads are wider than embedding_length/head_count
	}
	if h.ropeDims != h.headDim {
		// llama.cpp refuses it for llama; tapml for the whole family.
		return h, c, f.errorf("metadata %s = %d differs from the head dim %d; not supported", key(name, "rope.dimension_count"), h.ropeDims, h.headDim)
	}
	if h.ropeLinear > 0 {
		c.RopeScaling = arch.RopeScaling{Type: "linear", Factor: h.ropeLinear, OriginalMax: h.context}
	}
	return h, c, nil
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
