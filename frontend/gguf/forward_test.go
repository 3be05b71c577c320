package gguf

import (
	"encoding/binary"
	"fmt"
	"math"
	"testing"

	"github.com/tapml/tapml/internal/testenv"
	"github.com/tapml/tapml/internal/testenv/llmtest"
	"github.com/x448/float16"
)

// An independent LLaMA forward pass for checking Load's IR: plain loops in
// float64, hyperparameters read from the metadata by hand, weights read
// through the parser's TensorData and decoded here (F16 with x448/float16,
// quantized types with ggml's own library; not this package's converters), RoPE on adjacent pairs as llama.cpp does
// for GGUF llama models.

type refLayer struct {
	attnNorm, ffnNorm []float64
	wq, wk, wv, wo    [][]float64 // out × in
	gate, up, down    [][]float64
	kCache, vCache    [][]float64 // position × (kvHeads·headDim)
}

type refModel struct {
	dim, hidden, heads, kvHeads, headDim, vocab int
	eps, theta                                  float64
	emb, out                                    [][]float64
	norm                                        []float64
	layers                                      []*refLayer
}

func refInt(t *testing.T, f *File, key string, def int) int {
	v, ok := f.Get(key)
	if !ok {
		if def < 0 {
			t.Fatalf("reference: no %s", key)
		}
		return def
	}
	n, ok := v.Int()
	if !ok {
		t.Fatalf("reference: %s = %s", key, v)
	}
	return int(n)
}

func refFloat(t *testing.T, f *File, key string, def float64) float64 {
	v, ok := f.Get(key)
	if !ok {
		return def
	}
	x, ok := v.Float()
	if !ok {
		t.Fatalf("reference: %s = %s", key, v)
	}
	return x
}

// refTensor decodes a tensor into rows of float64 (row-major, rows × cols
// where cols is the innermost GGUF dim).
func refTensor(t *testing.T, f *File, name string, rows, cols int) [][]float64 {
	ti, ok := f.Tensor(name)
	if !ok {
		t.Fatalf("reference: no tensor %s", name)
	}
	if ti.Elements() != int64(rows*cols) || int(ti.Dims[0]) != cols {
		t.Fatalf("reference: tensor %s has dims %v, want %d×%d", name, ti.Dims, rows, cols)
	}
	raw, err := f.TensorData(ti)
	if err != nil {
		t.Fatal(err)
	}
	flat := make([]float64, rows*cols)
	if ti.Type.quantized() {
		for i, v := range ggmlDequantize(t, ti.Type, raw) {
			flat[i] = float64(v)
		}
	} else {
		for i := range flat {
			switch ti.Type {
			case GGMLF32:
				flat[i] = float64(math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:])))
			case GGMLF16:
				flat[i] = float64(float16.Frombits(binary.LittleEndian.Uint16(raw[2*i:])).Float32())
			case GGMLBF16:
				flat[i] = float64(math.Float32frombits(uint32(binary.LittleEndian.Uint16(raw[2*i:])) << 16))
			default:
				t.Fatalf("reference: tensor %s has type %s", name, ti.Type)
			}
		}
	}
	out := make([][]float64, rows)
	for r := range out {
		out[r] = flat[r*cols : (r+1)*cols]
	}
	return out
}

func newRefModel(t *testing.T, f *File) *refModel {
	m := &refModel{
		dim:    refInt(t, f, "llama.embedding_length", -1),
		hidden: refInt(t, f, "llama.feed_forward_length", -1),
		heads:  refInt(t, f, "llama.attention.head_count", -1),
		eps:    refFloat(t, f, "llama.attention.layer_norm_rms_epsilon", -1),
		theta:  refFloat(t, f, "llama.rope.freq_base", 10000),
	}
	m.kvHeads = refInt(t, f, "llama.attention.head_count_kv", m.heads)
	m.headDim = m.dim / m.heads
	emb, _ := f.Tensor("token_embd.weight")
	m.vocab = int(emb.Dims[1])
	m.emb = refTensor(t, f, "token_embd.weight", m.vocab, m.dim)
	m.out = m.emb
	if _, ok := f.Tensor("output.weight"); ok {
		m.out = refTensor(t, f, "output.weight", m.vocab, m.dim)
	}
	m.norm = refTensor(t, f, "output_norm.weight", 1, m.dim)[0]
	kvDim := m.kvHeads * m.headDim
	for l := 0; l < refInt(t, f, "llama.block_count", -1); l++ {
		p := fmt.Sprintf("blk.%d.", l)
		m.layers = append(m.layers, &refLayer{
			attnNorm: refTensor(t, f, p+"attn_norm.weight", 1, m.dim)[0],
			ffnNorm:  refTensor(t, f, p+"ffn_norm.weight", 1, m.dim)[0],
			wq:       refTensor(t, f, p+"attn_q.weight", m.dim, m.dim),
			wk:       refTensor(t, f, p+"attn_k.weight", kvDim, m.dim),
			wv:       refTensor(t, f, p+"attn_v.weight", kvDim, m.dim),
			wo:       refTensor(t, f, p+"attn_output.weight", m.dim, m.dim),
			gate:     refTensor(t, f, p+"ffn_gate.weight", m.hidden, m.dim),
			up:       refTensor(t, f, p+"ffn_up.weight", m.hidden, m.dim),
			down:     refTensor(t, f, p+"ffn_down.weight", m.dim, m.hidden),
		})
	}
	return m
}

// rope rotates adjacent pairs (2i, 2i+1) of each head by pos·theta^(-2i/hd).
func (m *refModel) rope(x []float64, pos int) {
	for h := 0; h < len(x)/m.headDim; h++ {
		for i := 0; i < m.headDim/2; i++ {
			a := float64(pos) * math.Pow(m.theta, -2*float64(i)/float64(m.headDim))
			c, s := math.Cos(a), math.Sin(a)
			j := h*m.headDim + 2*i
			x0, x1 := x[j], x[j+1]
			x[j], x[j+1] = x0*c-x1*s, x0*s+x1*c
		}
	}
}

// step runs one token at position len(cache) and returns its logits.
func (m *refModel) step(tok int) []float64 {
	x := append([]float64(nil), m.emb[tok]...)
	hd := m.headDim
	for _, L := range m.layers {
		pos := len(L.kCache)
		h := llmtest.RMSNorm(x, L.attnNorm, m.eps)
		q, k, v := llmtest.MatVec(L.wq, h), llmtest.MatVec(L.wk, h), llmtest.MatVec(L.wv, h)
		m.rope(q, pos)
		m.rope(k, pos)
		L.kCache = append(L.kCache, k)
		L.vCache = append(L.vCache, v)
		att := make([]float64, m.dim)
		for hq := 0; hq < m.heads; hq++ {
			kv := hq / (m.heads / m.kvHeads)
			scores := make([]float64, pos+1)
			mx := math.Inf(-1)
			for t := range scores {
				s := 0.0
				for i := 0; i < hd; i++ {
					s += q[hq*hd+i] * L.kCache[t][kv*hd+i]
				}
				scores[t] = s / math.Sqrt(float64(hd))
				mx = max(mx, scores[t])
			}
			sum := 0.0
			for t := range scores {
				scores[t] = math.Exp(scores[t] - mx)
				sum += scores[t]
			}
			for t := range scores {
				for i := 0; i < hd; i++ {
					att[hq*hd+i] += scores[t] / sum * L.vCache[t][kv*hd+i]
				}
			}
		}
		o := llmtest.MatVec(L.wo, att)
		for i := range x {
			x[i] += o[i]
		}
		h = llmtest.RMSNorm(x, L.ffnNorm, m.eps)
		g, u := llmtest.MatVec(L.gate, h), llmtest.MatVec(L.up, h)
		for i := range g {
			g[i] = g[i] / (1 + math.Exp(-g[i])) * u[i]
		}
		d := llmtest.MatVec(L.down, g)
		for i := range x {
			x[i] += d[i]
		}
	}
	return llmtest.MatVec(m.out, llmtest.RMSNorm(x, m.norm, m.eps))
}

// logitTol bounds max|ir - ref| / max|ref|. Both sides use the same
// weights (f16/bf16 widen to f32 exactly; quantized weights decode to the
// f32 values ggml computes, which the reference reads from ggml itself),
// so the difference is only the IR's f32 arithmetic against float64: each
// dot product over K terms is off by at most about K·2^-24 relative to the
// sum of |terms| (K <= 72 in the F16/BF16 models, so ~4e-6; K <= 512 in
// the quantized ones, ~3e-5), plus a few f32 ulps from rsqrt, exp and
// softmax; through the layers and the classifier that stays near 1e-5 in
// the worst case of the small models (typical errors are ~1e-7, ~1e-6 for
// the quantized ones). 1e-4 leaves a margin over the worst case while
// still catching any real mistake: on the synthetic
// files a wrong RoPE pairing, a transposed weight or a missing norm gives
// errors of order 1 (the real tiny file, whose random weights are small,
// shows a wrong RoPE pairing only at ~1e-4, so it alone would not do).
const logitTol = 1e-4

// checkLogits loads path both ways and compares the logits after a
// prefill of prompt and then each decode token in turn.
func checkLogits(t *testing.T, path string, prompt, decode []int) {
	m, _, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	f, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ref := newRefModel(t, f)
	run := llmtest.NewRunner(t, m)
	var want []float64
	for _, tok := range prompt {
		want = ref.step(tok)
	}
	compare := func(what string, got []float32) {
		t.Helper()
		if len(got) != ref.vocab {
			t.Fatalf("%s: %d logits, want %d", what, len(got), ref.vocab)
		}
		e, at := llmtest.RelErr(got, want)
		t.Logf("%s: max abs error / max |logit| = %.3g (at %d: ir %g, ref %g)", what, e, at, got[at], want[at])
		if e > logitTol {
			t.Errorf("%s: relative error %.3g > %g", what, e, logitTol)
		}
	}
	compare(fmt.Sprintf("prefill %v", prompt), run.Forward(t, prompt))
	for i, tok := range decode {
		want = ref.step(tok)
		compare(fmt.Sprintf("decode step %d (token %d, pos %d)", i, tok, len(prompt)+i), run.Forward(t, []int{tok}))
	}
}

// TestLogitsAgainstReference compares the IR of Load, run on the CPU
// reference device, with the independent float64 forward pass.
func TestLogitsAgainstReference(t *testing.T) {
	t.Run("llama-2-tiny-random", func(t *testing.T) {
		p := testenv.Model(t, tinyGGUF)
		checkLogits(t, p, []int{1, 15043, 3186, 29892, 920}, []int{338, 263, 31999, 0, 2})
		checkLogits(t, p, []int{1, 7}, []int{100, 200})
	})
	// Synthetic files: several layers, GQA, all three tensor types, tied
	// and untied classifiers, a RoPE base other than 10000.
	for _, tc := range []struct {
		name   string
		tied   bool
		theta  float64
		typeOf func(string) GGMLType
	}{
		{"f16-untied", false, 10000, nil},
		{"f32-tied", true, 500000, func(string) GGMLType { return GGMLF32 }},
		{"bf16-mixed", false, 10000, func(n string) GGMLType {
			switch {
			case n == "token_embd.weight" || n == "output_norm.weight":
				return GGMLF32
			case len(n) > 10 && n[len(n)-11:] == "norm.weight":
				return GGMLBF16
			case n == "output.weight":
				return GGMLF16
			}
			return GGMLBF16
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := smallConfig
			c.TiedEmbeddings = tc.tied
			c.RopeTheta = tc.theta
			lf := llamaFile{c: c, ctx: 64, typeOf: tc.typeOf, seed: 7}
			p := writeTemp(t, tc.name+".gguf", lf.writer().bytes())
			checkLogits(t, p, []int{1, 17, 250, 3, 99, 299, 42}, []int{5, 6, 7, 8, 150, 1})
			checkLogits(t, p, []int{1, 2}, []int{3})
		})
	}
}
