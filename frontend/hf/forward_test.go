package hf

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tapml/tapml/frontend/arch/gpt2"
	"github.com/tapml/tapml/frontend/arch/llama"
	"github.com/tapml/tapml/internal/testenv/llmtest"
	"github.com/tapml/tapml/ir"
	"github.com/tapml/tapml/tensor"
	"github.com/tapml/tapml/tensor/safetensors"
)

// Independent float64 forward passes of the Hugging Face models, for
// checking Load's IR: plain loops written from the transformers modeling
// code, hyperparameters read from config.json with encoding/json, tensors
// read with tensor/safetensors (not this package's Checkpoint) and widened
// with tensor.Float64At.

// refFolder holds a folder's config and all its tensors as float64.
type refFolder struct {
	cfg     map[string]any
	tensors map[string][]float64
	shapes  map[string][]int
}

func readFolder(t *testing.T, dir string) *refFolder {
	t.Helper()
	r := &refFolder{tensors: map[string][]float64{}, shapes: map[string][]int{}}
	data, err := os.ReadFile(filepath.Join(dir, ConfigFile))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &r.cfg); err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*.safetensors"))
	for _, f := range files {
		ts, _, err := safetensors.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for name, x := range ts {
			v := make([]float64, x.NumElements())
			for i := range v {
				v[i] = x.Float64At(i)
			}
			r.tensors[name], r.shapes[name] = v, x.Shape
		}
	}
	return r
}

func (r *refFolder) num(t *testing.T, key string) float64 {
	v, ok := r.cfg[key].(float64)
	if !ok {
		t.Fatalf("reference: config.json has no number %q", key)
	}
	return v
}

func (r *refFolder) int(t *testing.T, key string) int { return int(r.num(t, key)) }

// mat returns a tensor as rows of cols values.
func (r *refFolder) mat(t *testing.T, name string) [][]float64 {
	v, ok := r.tensors[name]
	if !ok {
		t.Fatalf("reference: no tensor %s", name)
	}
	s := r.shapes[name]
	cols := s[len(s)-1]
	out := make([][]float64, len(v)/cols)
	for i := range out {
		out[i] = v[i*cols : (i+1)*cols]
	}
	return out
}

func (r *refFolder) vec(t *testing.T, name string) []float64 {
	v, ok := r.tensors[name]
	if !ok {
		t.Fatalf("reference: no tensor %s", name)
	}
	return v
}

// vecMat is x·W for W stored in×out (GPT-2's Conv1D).
func vecMat(x []float64, w [][]float64) []float64 {
	out := make([]float64, len(w[0]))
	for i, xi := range x {
		for j, v := range w[i] {
			out[j] += xi * v
		}
	}
	return out
}

func addTo(x, y []float64) {
	for i := range x {
		x[i] += y[i]
	}
}

func layerNorm(x, w, b []float64, eps float64) []float64 {
	mean, vr := 0.0, 0.0
	for _, v := range x {
		mean += v
	}
	mean /= float64(len(x))
	for _, v := range x {
		vr += (v - mean) * (v - mean)
	}
	vr /= float64(len(x))
	out := make([]float64, len(x))
	for i := range x {
		out[i] = (x[i]-mean)/math.Sqrt(vr+eps)*w[i] + b[i]
	}
	return out
}

// attend is softmax(q·k/√d)·v of one head over the cached rows.
func attend(q []float64, ks, vs [][]float64, off, d int) []float64 {
	scores := make([]float64, len(ks))
	mx := math.Inf(-1)
	for t, k := range ks {
		s := 0.0
		for i := 0; i < d; i++ {
			s += q[i] * k[off+i]
		}
		scores[t] = s / math.Sqrt(float64(d))
		mx = math.Max(mx, scores[t])
	}
	sum := 0.0
	for t := range scores {
		scores[t] = math.Exp(scores[t] - mx)
		sum += scores[t]
	}
	out := make([]float64, d)
	for t, v := range vs {
		for i := 0; i < d; i++ {
			out[i] += scores[t] / sum * v[off+i]
		}
	}
	return out
}

// refLlama is LlamaForCausalLM / Qwen2ForCausalLM one token at a time.
type refLlama struct {
	f                              *refFolder
	dim, heads, kvHeads, hd, vocab int
	layers                         int
	eps, theta                     float64
	bias                           bool
	keys, vals                     [][][]float64 // layer, position, kvHeads·hd
	pos                            int
}

func newRefLlama(t *testing.T, dir string) *refLlama {
	f := readFolder(t, dir)
	r := &refLlama{f: f, dim: f.int(t, "hidden_size"), heads: f.int(t, "num_attention_heads"),
		kvHeads: f.int(t, "num_key_value_heads"), vocab: f.int(t, "vocab_size"), layers: f.int(t, "num_hidden_layers"),
		eps: f.num(t, "rms_norm_eps"), theta: f.num(t, "rope_theta")}
	r.hd = r.dim / r.heads
	if _, ok := f.cfg["head_dim"]; ok {
		r.hd = f.int(t, "head_dim")
	}
	r.bias = f.cfg["architectures"].([]any)[0] == "Qwen2ForCausalLM"
	r.keys, r.vals = make([][][]float64, r.layers), make([][][]float64, r.layers)
	return r
}

// rope rotates each head's pairs (i, i+hd/2), as transformers' rotate_half.
func (r *refLlama) rope(x []float64, heads int) {
	half := r.hd / 2
	for h := 0; h < heads; h++ {
		v := x[h*r.hd : (h+1)*r.hd]
		for i := 0; i < half; i++ {
			ang := float64(r.pos) * math.Pow(r.theta, -float64(2*i)/float64(r.hd))
			c, s := math.Cos(ang), math.Sin(ang)
			a, b := v[i], v[i+half]
			v[i], v[i+half] = a*c-b*s, a*s+b*c
		}
	}
}

func (r *refLlama) step(t *testing.T, tok int) []float64 {
	f := r.f
	x := append([]float64(nil), f.mat(t, "model.embed_tokens.weight")[tok]...)
	for l := 0; l < r.layers; l++ {
		p := fmt.Sprintf("model.layers.%d.", l)
		h := llmtest.RMSNorm(x, f.vec(t, p+"input_layernorm.weight"), r.eps)
		q := llmtest.MatVec(f.mat(t, p+"self_attn.q_proj.weight"), h)
		k := llmtest.MatVec(f.mat(t, p+"self_attn.k_proj.weight"), h)
		v := llmtest.MatVec(f.mat(t, p+"self_attn.v_proj.weight"), h)
		if r.bias {
			addTo(q, f.vec(t, p+"self_attn.q_proj.bias"))
			addTo(k, f.vec(t, p+"self_attn.k_proj.bias"))
			addTo(v, f.vec(t, p+"self_attn.v_proj.bias"))
		}
		r.rope(q, r.heads)
		r.rope(k, r.kvHeads)
		r.keys[l], r.vals[l] = append(r.keys[l], k), append(r.vals[l], v)
		att := make([]float64, 0, r.heads*r.hd)
		for h := 0; h < r.heads; h++ {
			kv := h / (r.heads / r.kvHeads)
			att = append(att, attend(q[h*r.hd:(h+1)*r.hd], r.keys[l], r.vals[l], kv*r.hd, r.hd)...)
		}
		addTo(x, llmtest.MatVec(f.mat(t, p+"self_attn.o_proj.weight"), att))
		h = llmtest.RMSNorm(x, f.vec(t, p+"post_attention_layernorm.weight"), r.eps)
		g, u := llmtest.MatVec(f.mat(t, p+"mlp.gate_proj.weight"), h), llmtest.MatVec(f.mat(t, p+"mlp.up_proj.weight"), h)
		for i := range g {
			g[i] = g[i] / (1 + math.Exp(-g[i])) * u[i]
		}
		addTo(x, llmtest.MatVec(f.mat(t, p+"mlp.down_proj.weight"), g))
	}
	r.pos++
	head := "lm_head.weight"
	if tied, _ := f.cfg["tie_word_embeddings"].(bool); tied {
		head = "model.embed_tokens.weight"
	}
	return llmtest.MatVec(f.mat(t, head), llmtest.RMSNorm(x, f.vec(t, "model.norm.weight"), r.eps))
}

// refGPT2 is GPT2LMHeadModel one token at a time.
type refGPT2 struct {
	f                  *refFolder
	pre                string
	dim, heads, layers int
	eps                float64
	keys, vals         [][][]float64
	pos                int
}

func newRefGPT2(t *testing.T, dir string) *refGPT2 {
	f := readFolder(t, dir)
	r := &refGPT2{f: f, dim: f.int(t, "n_embd"), heads: f.int(t, "n_head"), layers: f.int(t, "n_layer"),
		eps: f.num(t, "layer_norm_epsilon")}
	if _, ok := f.tensors["transformer.wte.weight"]; ok {
		r.pre = "transformer."
	}
	r.keys, r.vals = make([][][]float64, r.layers), make([][][]float64, r.layers)
	return r
}

func gelu(x float64) float64 {
	return 0.5 * x * (1 + math.Tanh(math.Sqrt(2/math.Pi)*(x+0.044715*x*x*x)))
}

func (r *refGPT2) step(t *testing.T, tok int) []float64 {
	f, p0 := r.f, r.pre
	x := append([]float64(nil), f.mat(t, p0+"wte.weight")[tok]...)
	addTo(x, f.mat(t, p0+"wpe.weight")[r.pos])
	hd := r.dim / r.heads
	for l := 0; l < r.layers; l++ {
		p := fmt.Sprintf("%sh.%d.", p0, l)
		h := layerNorm(x, f.vec(t, p+"ln_1.weight"), f.vec(t, p+"ln_1.bias"), r.eps)
		qkv := vecMat(h, f.mat(t, p+"attn.c_attn.weight"))
		addTo(qkv, f.vec(t, p+"attn.c_attn.bias"))
		q, k, v := qkv[:r.dim], qkv[r.dim:2*r.dim], qkv[2*r.dim:]
		r.keys[l], r.vals[l] = append(r.keys[l], k), append(r.vals[l], v)
		att := make([]float64, 0, r.dim)
		for hh := 0; hh < r.heads; hh++ {
			att = append(att, attend(q[hh*hd:(hh+1)*hd], r.keys[l], r.vals[l], hh*hd, hd)...)
		}
		o := vecMat(att, f.mat(t, p+"attn.c_proj.weight"))
		addTo(o, f.vec(t, p+"attn.c_proj.bias"))
		addTo(x, o)
		h = layerNorm(x, f.vec(t, p+"ln_2.weight"), f.vec(t, p+"ln_2.bias"), r.eps)
		m := vecMat(h, f.mat(t, p+"mlp.c_fc.weight"))
		addTo(m, f.vec(t, p+"mlp.c_fc.bias"))
		for i := range m {
			m[i] = gelu(m[i])
		}
		m = vecMat(m, f.mat(t, p+"mlp.c_proj.weight"))
		addTo(m, f.vec(t, p+"mlp.c_proj.bias"))
		addTo(x, m)
	}
	r.pos++
	return llmtest.MatVec(f.mat(t, p0+"wte.weight"), layerNorm(x, f.vec(t, p0+"ln_f.weight"), f.vec(t, p0+"ln_f.bias"), r.eps))
}

// randomLlama returns random weights for c where every weight matters:
// matrices uniform in ±1/√in, norms uniform in [0.5, 1.5], biases in ±0.5.
func randomLlama(c llama.Config, seed uint64) map[string]ir.WeightSource {
	r := rand.New(rand.NewPCG(seed, 99))
	out := map[string]ir.WeightSource{}
	for _, ns := range c.WeightShapes() {
		n := 1
		for _, d := range ns.Shape {
			n *= d
		}
		lo, hi := -0.5, 0.5
		switch {
		case len(ns.Shape) == 2:
			hi = 1 / math.Sqrt(float64(ns.Shape[1]))
			lo = -hi
		case strings.HasSuffix(ns.Name, "norm"):
			lo, hi = 0.5, 1.5
		}
		buf := make([]byte, 4*n)
		for i := 0; i < n; i++ {
			binary.LittleEndian.PutUint32(buf[4*i:], math.Float32bits(float32(lo+(hi-lo)*r.Float64())))
		}
		out[ns.Name] = ir.BytesSource(buf)
	}
	return out
}

// logitTol bounds max|ir - ref| / max|ref| for the random models. The
// reference uses the same stored weights (16-bit ones widen exactly) in
// float64; the IR computes in f32, so each dot product over K <= 128 terms
// carries rounding errors of typically √K·2^-24 ≈ 7e-7 of the sum of
// |terms| (at worst K·2^-24 ≈ 8e-6), plus a few ulps from rsqrt, exp, tanh
// and softmax. Observed: 1e-7 to 5e-7 through two blocks and the
// classifier. 2e-5 is 40 times that, and still catches the subtlest
// plausible mistake: GPT-2 with erf GELU instead of the tanh approximation
// gives 1.6e-4; a wrong RoPE layout gives ~5e-2.
const logitTol = 2e-5

type stepper interface {
	step(*testing.T, int) []float64
}

// checkFolder loads dir and compares its logits with the reference over
// a prefill of prompt and then each decode token.
func checkFolder(t *testing.T, dir string, ref stepper, prompt, decode []int) {
	t.Helper()
	m, _, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	run := llmtest.NewRunner(t, m)
	var want []float64
	for _, tok := range prompt {
		want = ref.step(t, tok)
	}
	compare := func(what string, got []float32) {
		t.Helper()
		e, at := llmtest.RelErr(got, want)
		t.Logf("%s: relative error %.3g", what, e)
		if e > logitTol || math.IsNaN(e) {
			t.Errorf("%s: relative error %.3g > %g (at %d: ir %g, ref %g)", what, e, logitTol, at, got[at], want[at])
		}
	}
	compare(fmt.Sprintf("prefill %v", prompt), run.Forward(t, prompt))
	for i, tok := range decode {
		want = ref.step(t, tok)
		compare(fmt.Sprintf("decode %d (token %d)", i, tok), run.Forward(t, []int{tok}))
	}
}

func TestQwen2AgainstReference(t *testing.T) {
	base := llama.Config{Dim: 64, HiddenDim: 96, Layers: 2, Heads: 4, KVHeads: 2, Vocab: 300, MaxSeq: 64,
		NormEps: 1e-6, RopeTheta: 1e6, RopeStyle: "half", TiedEmbeddings: true, QKVBias: true}
	for _, tc := range []struct {
		name string
		edit func(*llama.Config)
		o    WriteOptions
	}{
		{"f32-tied", func(*llama.Config) {}, WriteOptions{}},
		{"bf16-untied-sharded", func(c *llama.Config) { c.TiedEmbeddings = false }, WriteOptions{DType: ir.BF16, Shards: 3}},
		{"f16-head_dim", func(c *llama.Config) { c.HeadSize = 24 }, WriteOptions{DTypeOf: func(n string) ir.DType {
			if strings.Contains(n, "norm") {
				return ir.F32
			}
			return ir.F16
		}}},
		{"llama-mha", func(c *llama.Config) { c.QKVBias, c.KVHeads, c.RopeTheta, c.NormEps = false, 4, 10000, 1e-5 }, WriteOptions{DType: ir.F16}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := base
			tc.edit(&c)
			dir := filepath.Join(t.TempDir(), tc.name)
			tc.o.BOS, tc.o.EOS = -1, -1
			if err := WriteLlama(dir, c, randomLlama(c, 5), tc.o); err != nil {
				t.Fatal(err)
			}
			checkFolder(t, dir, newRefLlama(t, dir), []int{1, 17, 250, 3, 99, 299}, []int{5, 6, 7, 150})
		})
	}
}

func TestGPT2AgainstReference(t *testing.T) {
	c := gpt2.Config{Dim: 48, Inner: 128, Layers: 2, Heads: 4, Vocab: 260, Positions: 40, MaxSeq: 40, NormEps: 1e-5}
	for _, tc := range []struct {
		name   string
		o      WriteOptions
		prefix bool
	}{
		{"f32", WriteOptions{}, true},
		{"bf16-sharded-unprefixed", WriteOptions{DType: ir.BF16, Shards: 2}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), tc.name)
			tc.o.BOS, tc.o.EOS = -1, -1
			if err := WriteGPT2(dir, c, gpt2.RandomWeights(c, 9), tc.o); err != nil {
				t.Fatal(err)
			}
			if !tc.prefix {
				stripPrefix(t, dir, "transformer.")
			}
			checkFolder(t, dir, newRefGPT2(t, dir), []int{256, 10, 200, 3, 77}, []int{5, 6, 259, 0})
		})
	}
}

// stripPrefix rewrites a folder's weights without a name prefix (as the
// original gpt2 checkpoints store them) into one model.safetensors, adding
// GPT-2's causal-mask buffers, which the loader ignores.
func stripPrefix(t *testing.T, dir, prefix string) {
	files, _ := filepath.Glob(filepath.Join(dir, "*.safetensors"))
	all := map[string]*tensor.Tensor{}
	var names []string
	for _, f := range files {
		ts, _, err := safetensors.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for n, x := range ts {
			n = strings.TrimPrefix(n, prefix)
			all[n] = x
			names = append(names, n)
		}
		os.Remove(f)
	}
	os.Remove(filepath.Join(dir, IndexFile))
	all["h.0.attn.bias"] = tensor.New(ir.F32, []int{1, 1, 4, 4})
	names = append(names, "h.0.attn.bias")
	if err := safetensors.WriteTensors(filepath.Join(dir, WeightsFile), names, all, nil); err != nil {
		t.Fatal(err)
	}
}
