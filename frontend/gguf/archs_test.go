package gguf

import (
	"fmt"
	rtarget "github.com/tapml/tapml/runtime/target"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/tapml/tapml/internal/testenv/llmtest"
	"github.com/tapml/tapml/internal/testenv/targettest"
)

// Every architecture Load builds, checked against llama.cpp's own
// inference of a synthetic file. Each file is described here in
// llama.cpp's terms, as its model loader reads them (the ARCH.* keys, the
// tensor names and shapes of its load_tensors), not through this
// package's mapping: two layers of small width (whole Q8_0 blocks along
// every row), grouped-query attention where the architecture has it,
// random weights, and settings that make each feature bite (windows
// shorter than the prompt, soft caps near the values they cap, partial
// rotary). Both sides get the same tokens, so the tokenizer is only what
// llama.cpp needs to load a file.

// archDims are a synthetic model's sizes: width, feed-forward width,
// heads, key/value heads, head width, vocabulary, layers, context.
type archDims struct{ D, F, H, KV, HD, V, L, ctx int }

// smallArch are the sizes of the tests' files; tinyArch those of the
// fuzzer's seeds.
var (
	smallArch = archDims{D: 64, F: 128, H: 4, KV: 2, HD: 16, V: 300, L: 2, ctx: 64}
	tinyArch  = archDims{D: 16, F: 32, H: 2, KV: 1, HD: 8, V: 8, L: 1, ctx: 16}
)

// tshape is a tensor's name and row-major shape (outermost first: out, in).
type tshape struct {
	name  string
	shape []int
}

func ts(name string, shape ...int) tshape { return tshape{name, shape} }

// norm is the norm name's weight (and bias) over n elements.
func norm(name string, n int, bias bool) []tshape {
	out := []tshape{ts(name+".weight", n)}
	if bias {
		out = append(out, ts(name+".bias", n))
	}
	return out
}

// attn is separate q, k and v projections and the output projection, with
// biases on q, k and v (qkvBias) and on the output (outBias).
func (d archDims) attn(qkvBias, outBias bool) []tshape {
	q, kv := d.H*d.HD, d.KV*d.HD
	out := []tshape{ts("attn_q.weight", q, d.D), ts("attn_k.weight", kv, d.D), ts("attn_v.weight", kv, d.D)}
	if qkvBias {
		out = append(out, ts("attn_q.bias", q), ts("attn_k.bias", kv), ts("attn_v.bias", kv))
	}
	out = append(out, ts("attn_output.weight", d.D, q))
	if outBias {
		out = append(out, ts("attn_output.bias", d.D))
	}
	return out
}

// fusedAttn is one q/k/v projection (q's rows, k's, v's) and the output
// projection, biases on both or neither.
func (d archDims) fusedAttn(bias bool) []tshape {
	qkv := (d.H + 2*d.KV) * d.HD
	out := []tshape{ts("attn_qkv.weight", qkv, d.D)}
	if bias {
		out = append(out, ts("attn_qkv.bias", qkv))
	}
	out = append(out, ts("attn_output.weight", d.D, d.H*d.HD))
	if bias {
		out = append(out, ts("attn_output.bias", d.D))
	}
	return out
}

// swiglu is a gated feed-forward network.
func (d archDims) swiglu() []tshape {
	return []tshape{ts("ffn_gate.weight", d.F, d.D), ts("ffn_up.weight", d.F, d.D), ts("ffn_down.weight", d.D, d.F)}
}

// experts is a mixture of e experts of width w: the router and the
// experts' stacked gate, up and down projections ([e, out, in]), and a
// shared expert of width shared (none when 0) with its gate.
func (d archDims) experts(e, w, shared int) []tshape {
	out := []tshape{ts("ffn_gate_inp.weight", e, d.D), ts("ffn_gate_exps.weight", e, w, d.D),
		ts("ffn_up_exps.weight", e, w, d.D), ts("ffn_down_exps.weight", e, d.D, w)}
	if shared > 0 {
		out = append(out, ts("ffn_gate_inp_shexp.weight", d.D), ts("ffn_gate_shexp.weight", shared, d.D),
			ts("ffn_up_shexp.weight", shared, d.D), ts("ffn_down_shexp.weight", d.D, shared))
	}
	return out
}

// mlp is a two-layer feed-forward network, biases on both or neither.
func (d archDims) mlp(bias bool) []tshape {
	out := []tshape{ts("ffn_up.weight", d.F, d.D)}
	if bias {
		out = append(out, ts("ffn_up.bias", d.F))
	}
	out = append(out, ts("ffn_down.weight", d.D, d.F))
	if bias {
		out = append(out, ts("ffn_down.bias", d.D))
	}
	return out
}

func cat(parts ...[]tshape) []tshape {
	var out []tshape
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// An archCase is a synthetic file of one architecture.
type archCase struct {
	name string // the test's
	arch string // general.architecture
	d    archDims
	eps  string // the norm epsilon's key: rmsEps or layerEps
	kvs  []wkv  // further ARCH.* entries, keys without "ARCH."
	// global are the tensors outside the layers, block those of each
	// layer (after "blk.N.").
	global, block []tshape
	// quantized: the case has a Q8_0 variant too.
	quantized bool
	// keepF32 are block tensors (after "blk.N.") stored in F32 in every
	// variant (those llama.cpp's converter keeps in F32, and any the case
	// explains).
	keepF32 []string
	// negative are block tensors among keepF32 whose values are made
	// negative (-|x|), as Mamba's A = -exp(A_log) is: a positive A grows
	// the state without bound.
	negative []string
	// bites are edits of one ARCH.* entry each (keys without "ARCH.")
	// that must move tapml's logits off llama.cpp's (of the unedited
	// file) by more than the tolerance: the feature they turn off
	// matters in this file.
	bites []wkv
}

// writer is the case's file with tensors of the types typeOf gives by
// shape (quantize encodes the quantized ones).
func (c archCase) writer(seed uint64, typeOf func(shape []int) GGMLType, quantize func(GGMLType, []float32) []byte) *ggufWriter {
	d := c.d
	k := func(s string) string { return key(c.arch, s) }
	w := &ggufWriter{kvs: []wkv{
		{"general.architecture", TypeString, c.arch},
		{k("context_length"), TypeUint32, uint32(d.ctx)},
		{k("embedding_length"), TypeUint32, uint32(d.D)},
		{k("block_count"), TypeUint32, uint32(d.L)},
		{k("feed_forward_length"), TypeUint32, uint32(d.F)},
		{k("attention.head_count"), TypeUint32, uint32(d.H)},
		{k("attention.head_count_kv"), TypeUint32, uint32(d.KV)},
		{k(c.eps), TypeFloat32, float32(1e-5)},
	}}
	if d.H > 0 && d.HD != d.D/d.H {
		w.kvs = append(w.kvs, wkv{k("attention.key_length"), TypeUint32, uint32(d.HD)},
			wkv{k("attention.value_length"), TypeUint32, uint32(d.HD)})
	}
	for _, kv := range c.kvs {
		w.kvs = append(w.kvs, wkv{k(kv.key), kv.typ, kv.val})
	}
	w.kvs = append(w.kvs, spmKVs(testVocab(d.V))...)
	r := rand.New(rand.NewPCG(seed, 7))
	add := func(name string, shape []int, typ GGMLType) {
		w.tensors = append(w.tensors, randomTensor(r, name, shape, typ, quantize))
	}
	for _, t := range c.global {
		add(t.name, t.shape, typeOf(t.shape))
	}
	for l := range d.L {
		for _, t := range c.block {
			typ := typeOf(t.shape)
			if slices.Contains(c.keepF32, t.name) {
				typ = GGMLF32
			}
			add(fmt.Sprintf("blk.%d.%s", l, t.name), t.shape, typ)
			if slices.Contains(c.negative, t.name) {
				data := w.tensors[len(w.tensors)-1].data
				for i := 3; i < len(data); i += 4 {
					data[i] |= 0x80 // an F32's sign bit (little-endian)
				}
			}
		}
	}
	return w
}

func u32(key string, v uint32) wkv   { return wkv{key, TypeUint32, v} }
func f32(key string, v float32) wkv  { return wkv{key, TypeFloat32, v} }
func str(key string, v string) wkv   { return wkv{key, TypeString, v} }
func boolean(key string, v bool) wkv { return wkv{key, TypeBool, v} }

// archCases are the synthetic files, one or more per architecture, of
// the sizes d (the tests': smallArch).
func archCases(d archDims) []archCase {
	wide := d // heads wider than embedding_length/head_count
	wide.HD = 2 * d.HD
	mqa := d
	mqa.KV = 1
	mha := d
	mha.KV = d.H
	ssm := d // no attention, no feed-forward network
	ssm.F, ssm.H, ssm.KV, ssm.HD = 0, 0, 0, 0
	embd := func(d archDims, tied, normBias bool) []tshape {
		g := append([]tshape{ts("token_embd.weight", d.V, d.D)}, norm("output_norm", d.D, normBias)...)
		if !tied {
			g = append(g, ts("output.weight", d.V, d.D))
		}
		return g
	}
	llamaBlock := func(d archDims) []tshape {
		return cat(norm("attn_norm", d.D, false), d.attn(false, false), norm("ffn_norm", d.D, false), d.swiglu())
	}
	gemma3 := wide
	gemma3.L = 6 // five sliding layers, then a global one
	gemma3Block := cat(norm("attn_norm", wide.D, false), wide.attn(false, false),
		norm("attn_q_norm", wide.HD, false), norm("attn_k_norm", wide.HD, false),
		norm("post_attention_norm", wide.D, false), norm("ffn_norm", wide.D, false), wide.swiglu(),
		norm("post_ffw_norm", wide.D, false))
	gemma2Block := cat(norm("attn_norm", wide.D, false), wide.attn(false, false), norm("post_attention_norm", wide.D, false),
		norm("ffn_norm", wide.D, false), wide.swiglu(), norm("post_ffw_norm", wide.D, false))
	gemma2Keys := wide
	gemma2Keys.L = 3
	gpt2Global := func(d archDims, tied bool) []tshape {
		return append(embd(d, tied, true), ts("position_embd.weight", d.ctx, d.D))
	}
	gpt2Block := func(d archDims) []tshape {
		return cat(norm("attn_norm", d.D, true), d.fusedAttn(true), norm("ffn_norm", d.D, true), d.mlp(true))
	}
	return []archCase{
		{name: "command-r", arch: "command-r", d: d, eps: layerEps, kvs: []wkv{f32("logit_scale", 0.5)},
			global: embd(d, true, false),
			block:  cat(norm("attn_norm", d.D, false), d.attn(false, false), d.swiglu()),
			bites:  []wkv{f32("logit_scale", 1)}},
		{name: "falcon", arch: "falcon", d: mqa, eps: layerEps, global: embd(mqa, false, true),
			block: cat(norm("attn_norm", d.D, true), mqa.fusedAttn(false), d.mlp(false))},
		// Falcon-40B: grouped key/value heads, a norm for the attention
		// and one for the MLP.
		{name: "falcon-40b", arch: "falcon", d: d, eps: layerEps, global: embd(d, false, true),
			block: cat(norm("attn_norm", d.D, true), norm("attn_norm_2", d.D, true), d.fusedAttn(false), d.mlp(false))},
		{name: "gemma", arch: "gemma", d: mqa, eps: rmsEps, global: embd(mqa, true, false), block: llamaBlock(mqa)},
		{name: "gemma2", arch: "gemma2", d: wide, eps: rmsEps, quantized: true,
			kvs:    []wkv{u32("attention.sliding_window", 4), f32("attn_logit_softcapping", 1.5), f32("final_logit_softcapping", 2)},
			global: embd(wide, true, false), block: gemma2Block,
			bites: []wkv{u32("attention.sliding_window", uint32(d.ctx)), f32("attn_logit_softcapping", 1000), f32("final_logit_softcapping", 1000)}},
		// The keys newer converters write: the period of the layer
		// pattern, the local layers' RoPE base.
		{name: "gemma2-swa-keys", arch: "gemma2", d: gemma2Keys, eps: rmsEps,
			kvs:    []wkv{u32("attention.sliding_window", 4), u32("attention.sliding_window_pattern", 3), f32("rope.freq_base_swa", 100)},
			global: embd(gemma2Keys, true, false), block: gemma2Block,
			bites: []wkv{u32("attention.sliding_window_pattern", 2), f32("rope.freq_base_swa", 10000)}},
		{name: "gemma3", arch: "gemma3", d: gemma3, eps: rmsEps,
			kvs: []wkv{u32("attention.sliding_window", 4), f32("rope.freq_base", 1e6),
				str("rope.scaling.type", "linear"), f32("rope.scaling.factor", 8)},
			global: embd(gemma3, true, false), block: gemma3Block,
			bites: []wkv{u32("attention.sliding_window", uint32(d.ctx)), f32("rope.freq_base_swa", 1e6), f32("rope.scaling.factor", 1)}},
		// One flag per layer: the second slides, the first does not.
		{name: "gemma3-swa-flags", arch: "gemma3", d: wide, eps: rmsEps,
			kvs: []wkv{u32("attention.sliding_window", 4), f32("rope.freq_base", 1e6), f32("rope.freq_base_swa", 1000),
				{"attention.sliding_window_pattern", TypeArray, warr{TypeBool, []any{false, true}}}, f32("final_logit_softcapping", 2)},
			global: embd(wide, true, false), block: gemma3Block,
			bites: []wkv{{"attention.sliding_window_pattern", TypeArray, warr{TypeBool, []any{true, false}}},
				f32("final_logit_softcapping", 1000)}},
		{name: "gpt2", arch: "gpt2", d: mha, eps: layerEps, global: gpt2Global(mha, true), block: gpt2Block(mha)},
		{name: "gptneox", arch: "gptneox", d: mha, eps: layerEps,
			kvs:    []wkv{u32("rope.dimension_count", 4), boolean("use_parallel_residual", true)},
			global: embd(mha, false, true),
			block:  cat(norm("attn_norm", d.D, true), mha.fusedAttn(true), norm("ffn_norm", d.D, true), d.mlp(true)),
			bites:  []wkv{boolean("use_parallel_residual", false), u32("rope.dimension_count", uint32(d.HD))}},
		{name: "granite", arch: "granite", d: d, eps: rmsEps,
			kvs: []wkv{f32("embedding_scale", 3), f32("residual_scale", 0.5), f32("attention.scale", 0.1),
				f32("logit_scale", 4)},
			global: embd(d, true, false), block: llamaBlock(d),
			bites: []wkv{f32("embedding_scale", 1), f32("residual_scale", 1), f32("attention.scale", float32(1/math.Sqrt(float64(d.HD)))), f32("logit_scale", 1)}},
		// Mistral's GGUF files are llama's; NeMo's heads are wider than
		// embedding_length/head_count.
		{name: "llama-wide-heads", arch: "llama", d: wide, eps: rmsEps, global: embd(wide, false, false), block: llamaBlock(wide)},
		{name: "llama-rope-linear", arch: "llama", d: d, eps: rmsEps,
			kvs:    []wkv{str("rope.scaling.type", "linear"), f32("rope.scaling.factor", 4)},
			global: embd(d, false, false), block: llamaBlock(d),
			bites: []wkv{f32("rope.scaling.factor", 1)}},
		// Mamba 1: no attention (head_count and feed_forward_length 0, as
		// llama.cpp's converter writes them), the mixer twice as wide as
		// the embedding (the only expansion llama.cpp builds); ssm_a holds
		// A itself (-exp(A_log), negative), kept in F32 with the other
		// small mixer tensors.
		{name: "mamba", arch: "mamba", d: ssm, eps: rmsEps, quantized: true,
			kvs: []wkv{u32("ssm.conv_kernel", 4), u32("ssm.inner_size", uint32(2*d.D)), u32("ssm.state_size", 16),
				u32("ssm.time_step_rank", 8)},
			global: embd(ssm, true, false),
			block: cat(norm("attn_norm", d.D, false), []tshape{ts("ssm_in.weight", 4*d.D, d.D),
				ts("ssm_conv1d.weight", 2*d.D, 4), ts("ssm_conv1d.bias", 2*d.D), ts("ssm_x.weight", 8+2*16, 2*d.D),
				ts("ssm_dt.weight", 2*d.D, 8), ts("ssm_dt.bias", 2*d.D), ts("ssm_a", 2*d.D, 16), ts("ssm_d", 2*d.D),
				ts("ssm_out.weight", d.D, 2*d.D)}),
			keepF32: []string{"ssm_conv1d.weight", "ssm_x.weight", "ssm_dt.weight", "ssm_a"}, negative: []string{"ssm_a"}},
		// Mixtral: llama with experts, whose width is feed_forward_length.
		{name: "mixtral", arch: "llama", d: d, eps: rmsEps, quantized: true,
			kvs:    []wkv{u32("expert_count", 4), u32("expert_used_count", 2)},
			global: embd(d, false, false),
			block:  cat(norm("attn_norm", d.D, false), d.attn(false, false), norm("ffn_norm", d.D, false), d.experts(4, d.F, 0)),
			bites:  []wkv{u32("expert_used_count", 1)}},
		{name: "olmo2", arch: "olmo2", d: d, eps: rmsEps, global: embd(d, false, false),
			block: cat(d.attn(false, false), norm("attn_q_norm", d.H*d.HD, false), norm("attn_k_norm", d.KV*d.HD, false),
				norm("post_attention_norm", d.D, false), d.swiglu(), norm("post_ffw_norm", d.D, false))},
		{name: "phi2", arch: "phi2", d: mha, eps: layerEps, kvs: []wkv{u32("rope.dimension_count", uint32(d.HD/2))},
			global: append(embd(mha, false, true), ts("output.bias", mha.V)),
			block:  cat(norm("attn_norm", d.D, true), mha.attn(true, true), d.mlp(true)),
			bites:  []wkv{u32("rope.dimension_count", uint32(d.HD))}},
		// Phi-3's files carry its sliding window, which llama.cpp turns
		// off (so does tapml: llama.cpp decides for GGUF files).
		{name: "phi3", arch: "phi3", d: d, eps: rmsEps, quantized: true, kvs: []wkv{u32("attention.sliding_window", 2)},
			global: embd(d, false, false),
			block: cat(norm("attn_norm", d.D, false), d.fusedAttn(false), norm("ffn_norm", d.D, false),
				[]tshape{ts("ffn_up.weight", 2*d.F, d.D), ts("ffn_down.weight", d.D, d.F)})},
		{name: "qwen2", arch: "qwen2", d: d, eps: rmsEps, kvs: []wkv{f32("rope.freq_base", 1e6)}, global: embd(d, false, false),
			block: cat(norm("attn_norm", d.D, false), d.attn(true, false), norm("ffn_norm", d.D, false), d.swiglu())},
		{name: "qwen2moe", arch: "qwen2moe", d: d, eps: rmsEps, kvs: []wkv{u32("expert_count", 4), u32("expert_used_count", 2),
			u32("expert_feed_forward_length", 32), u32("expert_shared_feed_forward_length", 96)},
			global: embd(d, false, false),
			block:  cat(norm("attn_norm", d.D, false), d.attn(true, false), norm("ffn_norm", d.D, false), d.experts(4, 32, 96)),
			bites:  []wkv{u32("expert_used_count", 1)}},
		{name: "qwen3", arch: "qwen3", d: wide, eps: rmsEps, quantized: true, global: embd(wide, true, false),
			block: cat(norm("attn_norm", wide.D, false), wide.attn(false, false), norm("attn_q_norm", wide.HD, false),
				norm("attn_k_norm", wide.HD, false), norm("ffn_norm", wide.D, false), wide.swiglu())},
		// Qwen3-MoE: experts of width feed_forward_length / expert_used_count
		// when the file does not say.
		{name: "qwen3moe", arch: "qwen3moe", d: wide, eps: rmsEps, quantized: true,
			kvs:    []wkv{u32("expert_count", 8), u32("expert_used_count", 2)},
			global: embd(wide, true, false),
			block: cat(norm("attn_norm", wide.D, false), wide.attn(false, false), norm("attn_q_norm", wide.HD, false),
				norm("attn_k_norm", wide.HD, false), norm("ffn_norm", wide.D, false), wide.experts(8, wide.F/2, 0))},
		{name: "stablelm", arch: "stablelm", d: d, eps: layerEps, kvs: []wkv{u32("rope.dimension_count", uint32(d.HD/4))},
			global: embd(d, false, true),
			block:  cat(norm("attn_norm", d.D, true), d.attn(true, false), norm("ffn_norm", d.D, true), d.swiglu()),
			bites:  []wkv{u32("rope.dimension_count", uint32(d.HD))}},
		// GPTBigCode: GPT-2 with one key/value head.
		{name: "starcoder", arch: "starcoder", d: mqa, eps: layerEps, global: gpt2Global(mqa, false), block: gpt2Block(mqa)},
		{name: "starcoder2", arch: "starcoder2", d: d, eps: layerEps, global: embd(d, true, true),
			block: cat(norm("attn_norm", d.D, true), d.attn(true, true), norm("ffn_norm", d.D, true), d.mlp(true))},
	}
}

// archVariants are the tensor types of a case's files: all F32, matrices
// in F16, and for the quantized cases matrices in Q8_0 (vectors stay F32,
// as llama.cpp's converter and quantizer keep them).
func archVariants(c archCase) []struct {
	name   string
	typeOf func(shape []int) GGMLType
	tol    float64
} {
	matrices := func(typ GGMLType) func([]int) GGMLType {
		return func(shape []int) GGMLType {
			if len(shape) == 1 {
				return GGMLF32
			}
			return typ
		}
	}
	vs := []struct {
		name   string
		typeOf func(shape []int) GGMLType
		tol    float64
	}{
		{"F32", matrices(GGMLF32), llamaCppTolFloat},
		{"F16", matrices(GGMLF16), llamaCppTolFloat},
	}
	if c.quantized {
		vs = append(vs, struct {
			name   string
			typeOf func(shape []int) GGMLType
			tol    float64
		}{"Q8_0", matrices(GGMLQ8_0), llamaCppTolQuantized})
	}
	return vs
}

// TestArchitecturesAgainstLlamaCpp compares, for every case, tapml's
// logits on the CPU reference with llama.cpp's for each variant of the
// file, the F32 and Q8_0 files' on webgpu, vulkan and llvm too, and
// checks that each bite moves them off.
func TestArchitecturesAgainstLlamaCpp(t *testing.T) {
	prompt, decode := []int{1, 17, 250, 3, 99, 42, 7}, []int{5, 150, 1}
	for _, c := range archCases(smallArch) {
		t.Run(c.name, func(t *testing.T) {
			for _, v := range archVariants(c) {
				t.Run(v.name, func(t *testing.T) {
					p := writeTemp(t, c.name+".gguf", c.writer(11, v.typeOf, ggmlQuantizer(t)).bytes())
					want := llamaCppLogits(t, p, prompt, decode)
					m, _, err := Load(p)
					if err != nil {
						t.Fatal(err)
					}
					// F32 and Q8_0 on every target (Q8_0 reaches the
					// kernels as it is stored); F16 on the CPU reference.
					targets := targettest.Local
					if v.name == "F16" {
						targets = targettest.Local[:1]
					}
					for _, target := range targets {
						t.Run(target, func(t *testing.T) {
							checkAgainstLlamaCpp(t, m, targettest.Device(t, target), prompt, decode, want, v.tol)
						})
					}
					if v.name != "F16" { // as tapmlc run prepares it: lowered, with the fused decode kernels
						t.Run("vulkan-lowered", func(t *testing.T) {
							dev := targettest.Device(t, "vulkan")
							lowered, _, err := rtarget.ForDevice(m.Clone(), dev, "vulkan", false)
							if err != nil {
								t.Fatal(err)
							}
							llmtest.CheckRopeFused(t, lowered)
							checkAgainstLlamaCpp(t, lowered, dev, prompt, decode, want, v.tol)
						})
					}
					if v.name != "F32" {
						return
					}
					for _, b := range c.bites {
						t.Run("bite "+b.key, func(t *testing.T) {
							w := c.writer(11, v.typeOf, nil)
							setKV(w, key(c.arch, b.key), b.typ, b.val)
							m, _, err := Load(writeTemp(t, "edited.gguf", w.bytes()))
							if err != nil {
								t.Fatal(err)
							}
							worst := 0.0
							for _, e := range llamaCppErrors(t, m, targettest.Device(t, "cpu"), prompt, decode, want) {
								worst = max(worst, e)
							}
							if !(worst > v.tol) {
								t.Errorf("with %s = %v the logits stay within %g of llama.cpp's (worst %.3g): the feature does not bite", b.key, b.val, v.tol, worst)
							}
						})
					}
				})
			}
		})
	}
}

// TestArchitectureErrors: what a family cannot build is one error naming
// the file and the setting.
func TestArchitectureErrors(t *testing.T) {
	cases := map[string]archCase{}
	for _, c := range archCases(smallArch) {
		cases[c.name] = c
	}
	for _, tc := range []struct {
		name, file string
		edit       func(w *ggufWriter)
		want       string
	}{
		{"OLMo 3's window", "olmo2", func(w *ggufWriter) { setKV(w, "olmo2.attention.sliding_window", TypeUint32, uint32(4)) },
			"olmo2.attention.sliding_window = 4: OLMo 3's sliding-window attention is not supported"},
		{"Granite without RoPE", "granite", func(w *ggufWriter) { setKV(w, "granite.rope.scaling.finetuned", TypeBool, false) },
			"metadata granite.rope.scaling.finetuned is false: Granite without RoPE is not supported"},
		{"no use_parallel_residual", "gptneox", func(w *ggufWriter) { dropKV(w, "gptneox.use_parallel_residual") },
			"missing metadata gptneox.use_parallel_residual"},
		{"use_parallel_residual type", "gptneox", func(w *ggufWriter) { setKV(w, "gptneox.use_parallel_residual", TypeUint32, uint32(1)) },
			"metadata gptneox.use_parallel_residual is uint32 1, want a bool"},
		{"no logit_scale", "command-r", func(w *ggufWriter) { dropKV(w, "command-r.logit_scale") }, "missing metadata command-r.logit_scale"},
		{"value_length", "qwen3", func(w *ggufWriter) { setKV(w, "qwen3.attention.value_length", TypeUint32, uint32(16)) },
			"metadata qwen3.attention.value_length = 16 differs from qwen3.attention.key_length = 32; not supported"},
		{"heads without key_length", "gemma", func(w *ggufWriter) { setKV(w, "gemma.attention.head_count", TypeUint32, uint32(5)) },
			"gemma.embedding_length 64 is not a multiple of gemma.attention.head_count 5, and there is no gemma.attention.key_length"},
		{"odd rotary dims", "stablelm", func(w *ggufWriter) { setKV(w, "stablelm.rope.dimension_count", TypeUint32, uint32(3)) },
			"metadata stablelm.rope.dimension_count = 3 must be even"},
		{"partial rotary in the llama family", "qwen3", func(w *ggufWriter) { setKV(w, "qwen3.rope.dimension_count", TypeUint32, uint32(16)) },
			"metadata qwen3.rope.dimension_count = 16 differs from the head dim 32; not supported"},
		{"linear RoPE scaling of a stack", "stablelm", func(w *ggufWriter) { setKV(w, "stablelm.rope.scaling.factor", TypeFloat32, float32(2)) },
			"linear RoPE scaling (stablelm.rope.scaling.factor 2) is not supported for stablelm"},
		{"YaRN", "gemma3", func(w *ggufWriter) { setKV(w, "gemma3.rope.scaling.type", TypeString, "yarn") },
			`gemma3.rope.scaling.type "yarn" is not supported (supported: none, linear)`},
		{"soft cap", "gemma2", func(w *ggufWriter) { setKV(w, "gemma2.attn_logit_softcapping", TypeFloat32, float32(-1)) },
			"metadata gemma2.attn_logit_softcapping = -1 must be positive and finite"},
		{"experts outside a mixture family", "qwen3", func(w *ggufWriter) { setKV(w, "qwen3.expert_count", TypeUint32, uint32(4)) },
			"qwen3.expert_count = 4: mixtures of experts are not supported for qwen3"},
		{"a mixture family without experts", "qwen3moe", func(w *ggufWriter) {
			dropKV(w, "qwen3moe.expert_count")
			dropKV(w, "qwen3moe.expert_used_count")
		}, "missing metadata qwen3moe.expert_count: qwen3moe has experts"},
		{"more experts used than there are", "mixtral", func(w *ggufWriter) { setKV(w, "llama.expert_used_count", TypeUint32, uint32(5)) },
			"metadata llama.expert_used_count = 5 is out of range [1, 4]"},
		{"pattern length", "gemma3-swa-flags", func(w *ggufWriter) {
			setKV(w, "gemma3.attention.sliding_window_pattern", TypeArray, warr{TypeBool, []any{true, true, false}})
		}, "metadata gemma3.attention.sliding_window_pattern is [3 x bool: true true false], want 2 flags (one per layer) or a period"},
		{"scaled local layers of their own base", "gemma2-swa-keys", func(w *ggufWriter) {
			setKV(w, "gemma2.rope.scaling.factor", TypeFloat32, float32(2))
		}, "metadata gemma2.rope.freq_base_swa with RoPE scaling: scaled local layers of a base of their own are not supported"},
		{"GPT-2 head width", "gpt2", func(w *ggufWriter) { setKV(w, "gpt2.attention.key_length", TypeUint32, uint32(8)) },
			"metadata gpt2.attention.key_length = 8 differs from gpt2.embedding_length/gpt2.attention.head_count; not supported"},
		{"Phi-3's LongRoPE", "phi3", func(w *ggufWriter) {
			w.tensors = append(w.tensors, wtensor{"rope_factors_long.weight", []uint64{8}, GGMLF32, make([]byte, 32)})
		}, "tensors the phi3 graph does not use (unsupported model variant): rope_factors_long.weight"},
		{"a second norm in some layers only", "falcon", func(w *ggufWriter) {
			w.tensors = append(w.tensors, wtensor{"blk.1.attn_norm_2.weight", []uint64{64}, GGMLF32, make([]byte, 256)})
		}, "tensors the falcon graph does not use (unsupported model variant): blk.1.attn_norm_2.weight"},
		{"FalconMamba", "mamba", func(w *ggufWriter) { setKV(w, "mamba.ssm.dt_b_c_rms", TypeBool, true) },
			"metadata mamba.ssm.dt_b_c_rms is bool true: FalconMamba's norms of the time step, B and C are not supported"},
		{"no state size", "mamba", func(w *ggufWriter) { dropKV(w, "mamba.ssm.state_size") }, "missing metadata mamba.ssm.state_size"},
		{"rope_freqs outside llama", "qwen3", func(w *ggufWriter) {
			w.tensors = append(w.tensors, wtensor{ropeFreqs, []uint64{16}, GGMLF32, make([]byte, 64)})
		}, "tensors the qwen3 graph does not use (unsupported model variant): rope_freqs.weight"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := cases[tc.file]
			w := c.writer(1, func([]int) GGMLType { return GGMLF32 }, nil)
			tc.edit(w)
			p := writeTemp(t, "model.gguf", w.bytes())
			_, _, err := Load(p)
			if err == nil || !strings.HasPrefix(err.Error(), p+": ") || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v\nwant it to start with %s and say %q", err, p, tc.want)
			}
		})
	}
}
