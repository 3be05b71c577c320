package arch

import (
	"fmt"
	"math"
	"strconv"

	"github.com/tapml/tapml/ir"
)

// Sizes are the hyperparameters that every family assembled from parts
// has; a family's Config embeds them.
type Sizes struct {
	Dim     int // model width (hidden_size)
	Hidden  int // feed-forward width (intermediate_size)
	Layers  int
	Heads   int // query heads
	KVHeads int // key/value heads (fewer than Heads: grouped or multi-query attention)
	HeadDim int // width of one attention head
	Vocab   int
	MaxSeq  int // KV cache length (context window)
	NormEps float64
	// RopeTheta is the RoPE base; RopeDims the rotated dims of each head
	// (partial rotary), 0 for all.
	RopeTheta float64
	RopeDims  int
	Act       Activation // the MLP's
}

// Stack is a whole model assembled from parts: the skeleton that the
// families of arch/phi, arch/falcon, ... share, their block body being one
// of the Topology kinds over the parts. Its
// weights are named by the parts' convention; layer l's prefix is
// LayerPrefix + l + ".", under which each norm of Norms, the Attention at
// AttentionName and the MLP at MLPName have theirs. The attention's and
// the MLP's sizes and RoPE are Sizes' (the family sets only their layout,
// names and biases), and the attention's scale, when 0, is 1/√HeadDim.
//
// Names left empty are those most transformers classes use (LLaMA's):
// embed_tokens, layers., input_layernorm and post_attention_layernorm,
// self_attn with q_proj, k_proj, v_proj and o_proj, mlp with gate_proj,
// up_proj and down_proj (when Up is empty too), and norm; RoPE's style is
// "half" unless set.
type Stack struct {
	Arch   string // the module's meta "arch"
	Config any    // the family's configuration, printed as the module's meta "config"
	Sizes
	Embedding     string // the token embedding's layer name
	LayerPrefix   string // "layers."
	Norm          Norm
	Norms         []string // each layer's norms, in file order
	Attention     Attention
	AttentionName string
	MLP           MLP
	MLPName       string
	FinalNorm     string
	// Head is the classifier's layer name, "" when it is the token
	// embedding (tied); HeadBias gives it a bias.
	Head     string
	HeadBias bool
	// Topology is the block's residual structure.
	Topology Topology
	// EmbedScale multiplies the embeddings, ResidualScale the attention's
	// and the MLP's outputs before each residual addition, LogitScale the
	// logits, when not 0 (Granite's multipliers, Cohere's logit scale).
	EmbedScale, ResidualScale, LogitScale float64
}

// Topology is how a block joins its attention and MLP to the residual
// stream x, with the layer's norms n0 and n1 (Stack.Norms).
type Topology uint8

const (
	// PreNorm: x += attn(n0(x)); x += mlp(n1(x)) (LLaMA, StableLM,
	// Starcoder2, Granite).
	PreNorm Topology = iota + 1
	// Parallel: x + attn(n0(x)) + mlp(n1(x)), both read the block's input;
	// with one norm, both read n0(x) (Phi, Cohere, Falcon; GPT-NeoX has
	// two). Transformers adds the three in an order of its own per family,
	// which changes the sum by an f32 rounding at most; this adds x + attn
	// first.
	Parallel
	// PostNorm: x += n0(attn(x)); x += n1(mlp(x)) (OLMo 2).
	PostNorm
)

// Layer is the prefix of layer l's weights and provenance.
func (s Stack) Layer(l int) string { return s.named().LayerPrefix + strconv.Itoa(l) + "." }

// named is s with the default names where it has none.
func (s Stack) named() Stack {
	def := func(p *string, v string) {
		if *p == "" {
			*p = v
		}
	}
	def(&s.Embedding, "embed_tokens")
	def(&s.LayerPrefix, "layers.")
	def(&s.FinalNorm, "norm")
	def(&s.AttentionName, "self_attn")
	def(&s.MLPName, "mlp")
	if s.Norms == nil {
		s.Norms = []string{"input_layernorm", "post_attention_layernorm"}
	}
	a := &s.Attention
	if a.Layout == SeparateQKV {
		def(&a.Q, "q_proj")
		def(&a.K, "k_proj")
		def(&a.V, "v_proj")
	}
	def(&a.Out, "o_proj")
	def(&a.RopeStyle, "half")
	if s.MLP.Up == "" {
		s.MLP.Gate, s.MLP.Up, s.MLP.Down = "gate_proj", "up_proj", "down_proj"
	}
	return s
}

// Validate checks that the sizes and parts describe a buildable model.
func (s Stack) Validate() error {
	s = s.named()
	z := s.Sizes
	switch {
	case z.Dim <= 0 || z.Hidden <= 0 || z.Layers <= 0 || z.Vocab <= 0 || z.MaxSeq <= 0:
		return fmt.Errorf("hyperparameters must be positive: %+v", z)
	case !finite(s.EmbedScale) || !finite(s.ResidualScale) || !finite(s.LogitScale):
		return fmt.Errorf("embedding, residual and logit scales %g, %g, %g must be finite", s.EmbedScale, s.ResidualScale, s.LogitScale)
	case s.Topology < PreNorm || s.Topology > PostNorm:
		return fmt.Errorf("block topology %d is not one of PreNorm, Parallel, PostNorm", s.Topology)
	case len(s.Norms) != 2 && !(s.Topology == Parallel && len(s.Norms) == 1):
		return fmt.Errorf("%d norms per layer: the block takes two (a parallel block one or two)", len(s.Norms))
	}
	if err := s.attention().Validate(); err != nil {
		return err
	}
	if err := s.mlp().Validate(); err != nil {
		return err
	}
	return s.Norm.Validate()
}

func finite(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }

// attention is the Attention with the model's sizes.
func (s Stack) attention() Attention {
	a := s.Attention
	a.Dim, a.Heads, a.KVHeads, a.HeadDim = s.Dim, s.Heads, s.KVHeads, s.HeadDim
	a.RopeTheta, a.RopeDims = s.RopeTheta, s.RopeDims
	if a.Scale == 0 && s.HeadDim > 0 {
		a.Scale = 1 / math.Sqrt(float64(s.HeadDim))
	}
	return a
}

// mlp is the MLP with the model's sizes.
func (s Stack) mlp() MLP {
	m := s.MLP
	m.Dim, m.Hidden, m.Act = s.Dim, s.Hidden, s.Act
	return m
}

// WeightShapes lists the weights in the order of a Hugging Face checkpoint.
func (s Stack) WeightShapes() []NamedShape {
	s = s.named()
	ws := []NamedShape{Named(s.Embedding+".weight", s.Vocab, s.Dim)}
	for l := 0; l < s.Layers; l++ {
		p := s.Layer(l)
		for _, n := range s.Norms {
			ws = append(ws, s.Norm.Shapes(p+n, s.Dim)...)
		}
		ws = append(ws, s.attention().Shapes(p+s.AttentionName+".")...)
		ws = append(ws, s.mlp().Shapes(p+s.MLPName+".")...)
	}
	ws = append(ws, s.Norm.Shapes(s.FinalNorm, s.Dim)...)
	if s.Head != "" {
		ws = append(ws, DenseShapes(s.Head, s.Vocab, s.Dim, s.HeadBias)...)
	}
	return ws
}

// Decoder describes the graph to Build.
func (s Stack) Decoder() Decoder {
	s = s.named()
	var parts []Part
	for l := 0; l < s.Layers; l++ {
		parts = append(parts, s.attention().Parts(s.Layer(l)+s.AttentionName+".")...)
	}
	return Decoder{
		Arch: s.Arch, Config: fmt.Sprintf("%+v", s.Config), Layers: s.Layers, Parts: parts, MaxSeq: s.MaxSeq,
		State: func(int) []State { return KVCache(s.MaxSeq, s.KVHeads, s.HeadDim) },
		Embed: func(f *Forward) *ir.Value {
			x := f.At(s.Embedding).Gather(f.W(s.Embedding+".weight"), f.Tokens)
			if s.EmbedScale != 0 {
				x = f.Scale(s.Embedding+".scale", x, s.EmbedScale)
			}
			return x
		},
		Block: s.block,
		Norm:  func(f *Forward, x *ir.Value) *ir.Value { return f.Norm(s.Norm, s.FinalNorm, x) },
		Logits: func(f *Forward, x *ir.Value) *ir.Value {
			var y *ir.Value
			if s.Head == "" {
				y = f.At("lm_head").Linear(x, f.W(s.Embedding+".weight"))
			} else {
				y = f.Dense(s.Head, x, s.HeadBias)
			}
			if s.LogitScale != 0 {
				y = f.Scale("lm_head.scale", y, s.LogitScale)
			}
			return y
		},
	}
}

// block is layer l: its Topology over its norms, attention and MLP.
func (s Stack) block(f *Forward, l int, x *ir.Value, kv []*ir.Value) (*ir.Value, []*ir.Value) {
	p := s.Layer(l)
	pa, pm := p+s.AttentionName+".", p+s.MLPName+"."
	norm := func(i int, x *ir.Value) *ir.Value { return f.Norm(s.Norm, p+s.Norms[i], x) }
	attend := func(x *ir.Value) (*ir.Value, []*ir.Value) { return s.attention().Apply(f, pa, x, kv) }
	mlp := func(x *ir.Value) *ir.Value { return s.mlp().Apply(f, pm, x) }
	add := func(p string, x, y *ir.Value) *ir.Value {
		if s.ResidualScale != 0 {
			y = f.Scale(p, y, s.ResidualScale)
		}
		return f.At(p).Add(x, y)
	}
	switch s.Topology {
	case Parallel:
		h := norm(0, x)
		hm := h
		if len(s.Norms) == 2 {
			hm = norm(1, x)
		}
		a, kv := attend(h)
		m := mlp(hm)
		return add(pm+"residual", add(pa+"residual", x, a), m), kv
	case PostNorm:
		a, kv := attend(x)
		x = add(pa+"residual", x, norm(0, a))
		return add(pm+"residual", x, norm(1, mlp(x))), kv
	}
	a, kv := attend(norm(0, x))
	x = add(pa+"residual", x, a)
	return add(pm+"residual", x, mlp(norm(1, x))), kv
}

// LMHead is the Head named lm_head, or "" for a classifier tied to the
// token embedding.
func LMHead(tied bool) string {
	if tied {
		return ""
	}
	return "lm_head"
}
