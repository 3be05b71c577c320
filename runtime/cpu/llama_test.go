package cpu

import (
	"encoding/binary"
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/tapml/tapml/frontend/arch"
	"github.com/tapml/tapml/frontend/arch/llama"
	"github.com/tapml/tapml/ir"
	"github.com/tapml/tapml/runtime"
	"github.com/tapml/tapml/tensor"
)

// model is a LLaMA module with an executor on a CPU device and its caches.
type model struct {
	cfg    llama.Config
	m      *ir.Module
	ex     *runtime.Executor
	d      *Device
	caches []*runtime.Buffer
}

func newModel(t testing.TB, cfg llama.Config, seed uint64) *model {
	t.Helper()
	m, err := arch.Build("test", cfg, llama.RandomWeights(cfg, seed))
	if err != nil {
		t.Fatal(err)
	}
	d := New()
	return &model{cfg: cfg, m: m, ex: runtime.NewExecutor(m, d), d: d, caches: freshCaches(t, d, cfg)}
}

func freshCaches(t testing.TB, d *Device, cfg llama.Config) []*runtime.Buffer {
	var caches []*runtime.Buffer
	for i := 0; i < 2*cfg.Layers; i++ {
		b, err := d.Upload(tensor.New(ir.F32, []int{cfg.MaxSeq, cfg.KVHeads, cfg.HeadDim()}))
		if err != nil {
			t.Fatal(err)
		}
		caches = append(caches, b)
	}
	return caches
}

// step runs fn ("prefill" or "decode") on tokens at pos and returns the
// logits; it checks that the caches come back as the same buffers.
func (m *model) step(t testing.TB, fn string, pos int, tokens ...int32) []float32 {
	t.Helper()
	tok, _ := m.d.Upload(tensor.FromInt32([]int{len(tokens)}, tokens))
	p, _ := m.d.Upload(tensor.ScalarInt32(int32(pos)))
	res, err := m.ex.Call(fn, append([]*runtime.Buffer{tok, p}, m.caches...)...)
	if err != nil {
		t.Fatalf("%s at %d: %v", fn, pos, err)
	}
	for i, c := range m.caches {
		if res[1+i] != c {
			t.Fatalf("%s: cache result %d is a new buffer; kv_write must update the cache in place", fn, i)
		}
	}
	logits, err := m.d.Download(res[0])
	if err != nil {
		t.Fatal(err)
	}
	if want := []int{1, m.cfg.Vocab}; !cmp.Equal(want, logits.Shape) {
		t.Fatalf("logits shape %v, want %v", logits.Shape, want)
	}
	return logits.Float32s()
}

func toF64(x []float32) []float64 {
	out := make([]float64, len(x))
	for i, v := range x {
		out[i] = float64(v)
	}
	return out
}

var prompt = []int32{1, 72, 101, 108, 108, 111, 44, 32, 119, 111, 114, 108, 100, 33, 258, 7, 200}

// Prefill of N tokens and N decode steps give the same last logits and the
// same caches, bit for bit: every kernel computes an output row with the
// same f32 operations whatever the number of rows S (matmul tiles keep
// gonum on its serial path, where each element is one dot product over K;
// attention, rope and the norms work row by row). So the tolerance is 0.
// The long prompt (230 tokens) is past the sizes at which gonum's own
// parallel Gemm would sum K in 64-blocks for prefill but not for decode
// (which would move logits by about 4e-7).
func TestPrefillMatchesDecode(t *testing.T) {
	long := make([]int32, 230)
	for i := range long {
		long[i] = int32(i * 7 % 259)
	}
	for _, tokens := range [][]int32{prompt, long} {
		pre := newModel(t, llama.Tiny, 7)
		dec := newModel(t, llama.Tiny, 7)
		want := pre.step(t, "prefill", 0, tokens...)
		var got []float32
		for i, tok := range tokens {
			got = dec.step(t, "decode", i, tok)
		}
		approx(t, "last logits, prefill vs decode", toF64(want), toF64(got), 0, 0)
		for i := range pre.caches {
			a, _ := Tensor(pre.caches[i])
			b, _ := Tensor(dec.caches[i])
			approx(t, "cache", toF64(a.Float32s()), toF64(b.Float32s()), 0, 0)
			row := llama.Tiny.KVHeads * llama.Tiny.HeadDim()
			written, rest := a.Float32s()[:len(tokens)*row], a.Float32s()[len(tokens)*row:]
			if allZero(written) || !allZero(rest) {
				t.Errorf("cache %d: rows 0..%d should be written in place, the rest untouched", i, len(tokens)-1)
			}
		}
		// Continue both: a second prefill chunk at pos N equals decoding on.
		more := []int32{5, 6, 7}
		want = pre.step(t, "prefill", len(tokens), more...)
		for i, tok := range more {
			got = dec.step(t, "decode", len(tokens)+i, tok)
		}
		approx(t, "logits after a second chunk", toF64(want), toF64(got), 0, 0)
	}
	// Past the end of the cache is an error, not a panic.
	m := newModel(t, llama.Tiny, 7)
	tok, _ := m.d.Upload(tensor.FromInt32([]int{2}, []int32{1, 2}))
	p, _ := m.d.Upload(tensor.ScalarInt32(int32(llama.Tiny.MaxSeq - 1)))
	if _, err := m.ex.Call("prefill", append([]*runtime.Buffer{tok, p}, m.caches...)...); err == nil {
		t.Error("prefill of 2 tokens at the last cache row: no error")
	}
}

func allZero(x []float32) bool {
	for _, v := range x {
		if v != 0 {
			return false
		}
	}
	return true
}

// Running the same call twice gives the same bits.
func TestLlamaDeterministic(t *testing.T) {
	a := newModel(t, llama.Tiny, 3).step(t, "prefill", 0, prompt...)
	b := newModel(t, llama.Tiny, 3)
	b.d.workers = 1
	if diff := cmp.Diff(a, b.step(t, "prefill", 0, prompt...)); diff != "" {
		t.Errorf("two runs differ:\n%s", diff)
	}
}

// The graph on this device matches an independent float64 forward pass
// written after llama2.c's run.c.
func TestLlamaMatchesNaiveForward(t *testing.T) {
	for _, cfg := range []llama.Config{llama.Tiny, withRope(llama.Tiny, "half")} {
		m := newModel(t, cfg, 11)
		got := m.step(t, "prefill", 0, prompt...)
		want := naiveForward(t, cfg, llama.RandomWeights(cfg, 11), prompt)
		approx(t, "logits vs float64 forward ("+cfg.RopeStyle+")", want, toF64(got), 1e-4, 1e-4)
	}
}

func withRope(c llama.Config, style string) llama.Config {
	c.RopeStyle = style
	return c
}

func naiveForward(t *testing.T, c llama.Config, ws map[string]ir.WeightSource, tokens []int32) []float64 {
	w := map[string][]float64{}
	for name, src := range ws {
		raw, err := src.Bytes()
		if err != nil {
			t.Fatal(err)
		}
		v := make([]float64, len(raw)/4)
		for i := range v {
			v[i] = float64(math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:])))
		}
		w[name] = v
	}
	hd := c.HeadDim()
	kvDim := c.KVHeads * hd
	matvec := func(m []float64, x []float64, rows int) []float64 {
		out := make([]float64, rows)
		for i := range out {
			for j, xv := range x {
				out[i] += m[i*len(x)+j] * xv
			}
		}
		return out
	}
	rmsnorm := func(x, g []float64) []float64 {
		var ss float64
		for _, v := range x {
			ss += v * v
		}
		inv := 1 / math.Sqrt(ss/float64(len(x))+c.NormEps)
		out := make([]float64, len(x))
		for i, v := range x {
			out[i] = v * inv * g[i]
		}
		return out
	}
	rope := func(v []float64, pos int) {
		for h := 0; h < len(v)/hd; h++ {
			x := v[h*hd : (h+1)*hd]
			for i := 0; i < hd/2; i++ {
				i0, i1 := 2*i, 2*i+1
				if c.RopeStyle == "half" {
					i0, i1 = i, i+hd/2
				}
				ang := float64(pos) * math.Pow(c.RopeTheta, -2*float64(i)/float64(hd))
				a, b := x[i0], x[i1]
				x[i0], x[i1] = a*math.Cos(ang)-b*math.Sin(ang), a*math.Sin(ang)+b*math.Cos(ang)
			}
		}
	}
	kc := make([][]float64, c.Layers)
	vc := make([][]float64, c.Layers)
	var x []float64
	for pos, tok := range tokens {
		x = append([]float64{}, w["tok_embeddings"][int(tok)*c.Dim:(int(tok)+1)*c.Dim]...)
		for l := 0; l < c.Layers; l++ {
			p := "layers." + string(rune('0'+l)) + "."
			h := rmsnorm(x, w[p+"attention_norm"])
			q := matvec(w[p+"attention.wq"], h, c.Dim)
			k := matvec(w[p+"attention.wk"], h, kvDim)
			v := matvec(w[p+"attention.wv"], h, kvDim)
			rope(q, pos)
			rope(k, pos)
			kc[l] = append(kc[l], k...)
			vc[l] = append(vc[l], v...)
			att := make([]float64, c.Dim)
			for hh := 0; hh < c.Heads; hh++ {
				g := hh / (c.Heads / c.KVHeads)
				sc := make([]float64, pos+1)
				mx := math.Inf(-1)
				for j := range sc {
					for i := 0; i < hd; i++ {
						sc[j] += q[hh*hd+i] * kc[l][j*kvDim+g*hd+i]
					}
					sc[j] /= math.Sqrt(float64(hd))
					mx = math.Max(mx, sc[j])
				}
				var sum float64
				for j := range sc {
					sc[j] = math.Exp(sc[j] - mx)
					sum += sc[j]
				}
				for j := range sc {
					for i := 0; i < hd; i++ {
						att[hh*hd+i] += sc[j] / sum * vc[l][j*kvDim+g*hd+i]
					}
				}
			}
			o := matvec(w[p+"attention.wo"], att, c.Dim)
			for i := range x {
				x[i] += o[i]
			}
			h = rmsnorm(x, w[p+"ffn_norm"])
			g := matvec(w[p+"feed_forward.w1"], h, c.HiddenDim)
			u := matvec(w[p+"feed_forward.w3"], h, c.HiddenDim)
			for i := range g {
				g[i] = g[i] / (1 + math.Exp(-g[i])) * u[i]
			}
			dn := matvec(w[p+"feed_forward.w2"], g, c.Dim)
			for i := range x {
				x[i] += dn[i]
			}
		}
	}
	x = rmsnorm(x, w["norm"])
	cls := w["output"]
	if c.TiedEmbeddings {
		cls = w["tok_embeddings"]
	}
	return matvec(cls, x, c.Vocab)
}
