// Package gpt2 builds the IR of a GPT-2 decoder from its hyperparameters
// and weights: learned position embeddings, pre-norm blocks with biased
// layer norms, fused q/k/v projection, multi-head attention, a GELU (tanh
// approximation) MLP, a final layer norm and a classifier tied to the token
// embedding. The functions follow the LLM calling convention of
// frontend/llama, so runtime/llm drives either.
//
// Weight names are Hugging Face's GPT2Model names (without the
// "transformer." prefix of GPT2LMHeadModel): wte.weight, wpe.weight,
// h.N.ln_1.weight, h.N.attn.c_attn.weight, ... The linear layers are
// GPT-2's Conv1D, whose weights are stored in×out, so the graph multiplies
// by them without transposing.
package gpt2

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"

	"github.com/tapml/tapml/ir"
)

// Config holds the hyperparameters of a GPT-2 model.
type Config struct {
	Dim       int     // n_embd
	Inner     int     // n_inner: MLP width (Hugging Face's default is 4·n_embd)
	Layers    int     // n_layer
	Heads     int     // n_head
	Vocab     int     // vocab_size
	Positions int     // n_positions: rows of the position embedding
	MaxSeq    int     // KV cache length (context window), at most Positions
	NormEps   float64 // layer_norm_epsilon
}

// HeadDim is the width of one attention head.
func (c Config) HeadDim() int { return c.Dim / c.Heads }

// Validate checks that the hyperparameters describe a buildable model.
func (c Config) Validate() error {
	switch {
	case c.Dim <= 0 || c.Inner <= 0 || c.Layers <= 0 || c.Heads <= 0 || c.Vocab <= 0 || c.Positions <= 0 || c.MaxSeq <= 0:
		return fmt.Errorf("hyperparameters must be positive: %+v", c)
	case c.Dim%c.Heads != 0:
		return fmt.Errorf("n_embd %d is not a multiple of n_head %d", c.Dim, c.Heads)
	case c.MaxSeq > c.Positions:
		return fmt.Errorf("cache length %d exceeds the %d positions of the position embedding", c.MaxSeq, c.Positions)
	case !(c.NormEps > 0) || math.IsInf(c.NormEps, 1):
		return fmt.Errorf("layer norm epsilon %g must be positive and finite", c.NormEps)
	}
	return nil
}

// NamedShape is a weight name with its shape.
type NamedShape struct {
	Name  string
	Shape []int
}

// WeightShapes lists every weight the graph needs, with its shape, in the
// order of a Hugging Face checkpoint. Conv1D weights are in×out.
func (c Config) WeightShapes() []NamedShape {
	d, f := c.Dim, c.Inner
	ws := []NamedShape{{"wte.weight", []int{c.Vocab, d}}, {"wpe.weight", []int{c.Positions, d}}}
	for l := 0; l < c.Layers; l++ {
		p := "h." + strconv.Itoa(l) + "."
		ws = append(ws,
			NamedShape{p + "ln_1.weight", []int{d}},
			NamedShape{p + "ln_1.bias", []int{d}},
			NamedShape{p + "attn.c_attn.weight", []int{d, 3 * d}},
			NamedShape{p + "attn.c_attn.bias", []int{3 * d}},
			NamedShape{p + "attn.c_proj.weight", []int{d, d}},
			NamedShape{p + "attn.c_proj.bias", []int{d}},
			NamedShape{p + "ln_2.weight", []int{d}},
			NamedShape{p + "ln_2.bias", []int{d}},
			NamedShape{p + "mlp.c_fc.weight", []int{d, f}},
			NamedShape{p + "mlp.c_fc.bias", []int{f}},
			NamedShape{p + "mlp.c_proj.weight", []int{f, d}},
			NamedShape{p + "mlp.c_proj.bias", []int{d}},
		)
	}
	return append(ws, NamedShape{"ln_f.weight", []int{d}}, NamedShape{"ln_f.bias", []int{d}})
}

// Build returns the module of a model: functions "prefill" (tokens
// i32[seq]) and "decode" (tokens i32[1]), both taking pos (i32[], the
// position of the first token) and the KV caches (f32[MaxSeq, Heads,
// HeadDim], k then v per layer), and returning the logits of the last token
// (f32[1, vocab]) and the updated caches. weights[name] supplies the f32
// data of each name of WeightShapes.
func Build(name string, c Config, weights map[string]ir.WeightSource) (*ir.Module, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	m := ir.NewModule(name)
	m.Meta["arch"] = "gpt2"
	m.Meta["config"] = fmt.Sprintf("dim=%d inner=%d layers=%d heads=%d vocab=%d positions=%d max_seq=%d eps=%g",
		c.Dim, c.Inner, c.Layers, c.Heads, c.Vocab, c.Positions, c.MaxSeq, c.NormEps)
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
	d, hd, heads := int64(c.Dim), int64(c.HeadDim()), int64(c.Heads)
	tokens := b.Param("tokens", ir.T(ir.I32, ir.Shape{seq}))
	pos := b.Param("pos", ir.T(ir.I32, ir.Shape{}))
	cacheType := ir.T(ir.F32, ir.S(int64(c.MaxSeq), heads, hd))
	var kc, vc []*ir.Value
	for l := 0; l < c.Layers; l++ {
		kc = append(kc, b.Param(fmt.Sprintf("k_cache.%d", l), cacheType))
		vc = append(vc, b.Param(fmt.Sprintf("v_cache.%d", l), cacheType))
	}
	eps := ir.Attrs{"eps": ir.FloatAttr(c.NormEps)}
	norm := func(x *ir.Value, p string) *ir.Value {
		return b.At(p).Op(ir.OpLayerNorm, []*ir.Value{x, w[p+".weight"], w[p+".bias"]}, eps)
	}
	// conv1d is GPT-2's Conv1D: x × w + b with w stored in×out.
	conv1d := func(x *ir.Value, p string) *ir.Value {
		y := b.At(p).Op(ir.OpMatmul, []*ir.Value{x, w[p+".weight"]}, nil)
		return b.Add(y, w[p+".bias"])
	}
	x := b.At("wte").Op(ir.OpGather, []*ir.Value{w["wte.weight"], tokens}, nil)
	positions := b.At("wpe").Op(ir.OpIota, []*ir.Value{pos}, ir.Attrs{"shape": ir.ShapeAttr(ir.Shape{seq})})
	pe := b.Op(ir.OpGather, []*ir.Value{w["wpe.weight"], positions}, nil)
	x = b.At("embeddings").Add(x, pe)
	var newK, newV []*ir.Value
	for l := 0; l < c.Layers; l++ {
		p := "h." + strconv.Itoa(l) + "."
		h := norm(x, p+"ln_1")
		qkv := conv1d(h, p+"attn.c_attn")
		part := func(i int64, what string) *ir.Value {
			s := b.At(p+"attn."+what).Op(ir.OpSlice, []*ir.Value{qkv}, ir.Attrs{
				"axis": ir.IntAttr(1), "start": ir.IntAttr(i * d), "end": ir.IntAttr((i + 1) * d)})
			return b.Reshape(s, ir.Shape{seq, ir.D(heads), ir.D(hd)})
		}
		q, k, v := part(0, "q"), part(1, "k"), part(2, "v")
		kcache := b.At(p+"attn.k_cache").Op(ir.OpKVWrite, []*ir.Value{kc[l], k, pos}, nil)
		vcache := b.At(p+"attn.v_cache").Op(ir.OpKVWrite, []*ir.Value{vc[l], v, pos}, nil)
		newK, newV = append(newK, kcache), append(newV, vcache)
		a := b.At(p+"attn").Op(ir.OpAttention, []*ir.Value{q, kcache, vcache, pos},
			ir.Attrs{"scale": ir.FloatAttr(1 / math.Sqrt(float64(hd)))})
		a = b.Reshape(a, ir.Shape{seq, ir.D(d)})
		x = b.At(p+"attn.residual").Add(x, conv1d(a, p+"attn.c_proj"))
		h = norm(x, p+"ln_2")
		f := b.At(p+"mlp.gelu").Unary(ir.OpGelu, conv1d(h, p+"mlp.c_fc"))
		x = b.At(p+"mlp.residual").Add(x, conv1d(f, p+"mlp.c_proj"))
	}
	x = norm(x, "ln_f")
	x = b.At("last_token").Op(ir.OpSlice, []*ir.Value{x}, ir.Attrs{
		"axis": ir.IntAttr(0), "start": ir.IntAttr(-1), "end": ir.IntAttr(math.MaxInt32)})
	logits := b.At("lm_head").Linear(x, w["wte.weight"])
	results := []*ir.Value{logits}
	for l := range newK {
		results = append(results, newK[l], newV[l])
	}
	b.Return(results...)
	return b.Err()
}

// RandomWeights returns deterministic random f32 weights for c: matrices
// and embeddings uniform in ±1/√(rows of the input side), biases uniform in
// ±0.1, layer norm weights uniform in [0.5, 1.5] and their biases in ±0.1,
// so that every weight matters in a test. The same seed gives the same
// bytes on every machine (math/rand/v2's PCG).
func RandomWeights(c Config, seed uint64) map[string]ir.WeightSource {
	r := rand.New(rand.NewPCG(seed, 0x677074322d)) // "gpt2-"
	out := map[string]ir.WeightSource{}
	for _, ns := range c.WeightShapes() {
		n := 1
		for _, d := range ns.Shape {
			n *= d
		}
		lo, hi := -0.1, 0.1
		switch {
		case len(ns.Shape) == 2 && (ns.Name == "wte.weight" || ns.Name == "wpe.weight"):
			lo, hi = -1/math.Sqrt(float64(ns.Shape[1])), 1/math.Sqrt(float64(ns.Shape[1]))
		case len(ns.Shape) == 2:
			lo, hi = -1/math.Sqrt(float64(ns.Shape[0])), 1/math.Sqrt(float64(ns.Shape[0]))
		case strings.Contains(ns.Name, "ln_") && strings.HasSuffix(ns.Name, ".weight"):
			lo, hi = 0.5, 1.5
		}
		buf := make([]byte, 4*n)
		for i := 0; i < n; i++ {
			v := float32(lo + (hi-lo)*r.Float64())
			binary.LittleEndian.PutUint32(buf[4*i:], math.Float32bits(v))
		}
		out[ns.Name] = ir.BytesSource(buf)
	}
	return out
}
