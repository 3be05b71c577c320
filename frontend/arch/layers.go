package arch

import (
	"fmt"
	"math"
	"strings"

	"github.com/tapml/tapml/ir"
)

// The parts that families assemble their blocks from (arch/phi, arch/falcon,
// ...): linear layers with or without bias, norms, activations, a
// self-attention over the KV cache and a feed-forward network. A part at
// prefix p has its weights at p+".weight" and p+".bias" and builds its
// nodes at provenance p, so a family that names its canonical weights as
// Hugging Face does (without the model's prefix) writes no names twice.

// DenseShapes lists the weights of the linear layer p: weight [out, in]
// (stored out×in) and, with bias, bias [out].
func DenseShapes(p string, out, in int, bias bool) []NamedShape {
	ws := []NamedShape{Named(p+".weight", out, in)}
	if bias {
		ws = append(ws, Named(p+".bias", out))
	}
	return ws
}

// Dense is the linear layer p on x: x·Wᵀ, plus the bias when bias.
func (f *Forward) Dense(p string, x *ir.Value, bias bool) *ir.Value {
	y := f.At(p).Linear(x, f.W(p+".weight"))
	if bias {
		y = f.Add(y, f.W(p+".bias"))
	}
	return y
}

// Const is the f32 scalar v, which broadcasts against any tensor.
func (f *Forward) Const(v float64) *ir.Value {
	return f.Op(ir.OpConstant, nil, ir.Attrs{"value": ir.FloatsAttr(v)})
}

// Scale is x·s at provenance p.
func (f *Forward) Scale(p string, x *ir.Value, s float64) *ir.Value {
	return f.At(p).Mul(x, f.Const(s))
}

// NormKind is how a Norm normalises.
type NormKind uint8

const (
	RMSNorm         NormKind = iota + 1 // x / √(mean(x²)+eps) · w
	LayerNorm                           // (x - mean) / √(var+eps) · w + b
	LayerNormNoBias                     // LayerNorm without b (Cohere)
)

// Norm is a norm over the last axis with its weights at its prefix.
type Norm struct {
	Kind NormKind
	Eps  float64
}

// Validate checks the kind and the epsilon.
func (n Norm) Validate() error {
	if n.Kind < RMSNorm || n.Kind > LayerNormNoBias {
		return fmt.Errorf("norm kind %d is not one of RMSNorm, LayerNorm, LayerNormNoBias", n.Kind)
	}
	if !(n.Eps > 0) || math.IsInf(n.Eps, 1) {
		return fmt.Errorf("norm epsilon %g must be positive and finite", n.Eps)
	}
	return nil
}

// Shapes lists the weights of the norm p over dim elements.
func (n Norm) Shapes(p string, dim int) []NamedShape {
	ws := []NamedShape{Named(p+".weight", dim)}
	if n.Kind == LayerNorm {
		ws = append(ws, Named(p+".bias", dim))
	}
	return ws
}

// Norm applies the norm p to x.
func (f *Forward) Norm(n Norm, p string, x *ir.Value) *ir.Value {
	f.At(p)
	switch n.Kind {
	case RMSNorm:
		return f.RMSNorm(x, f.W(p+".weight"), n.Eps)
	case LayerNorm:
		return f.LayerNorm(x, f.W(p+".weight"), f.W(p+".bias"), n.Eps)
	}
	return f.LayerNorm(x, f.W(p+".weight"), nil, n.Eps)
}

// Activation is a feed-forward network's nonlinearity.
type Activation uint8

const (
	Silu     Activation = iota + 1 // x·sigmoid(x) (transformers' "silu")
	GeluTanh                       // GELU's tanh approximation ("gelu_new", "gelu_pytorch_tanh")
	GeluErf                        // the exact GELU, x/2·(1+erf(x/√2)) (transformers' "gelu")
)

// Activate applies a to x at provenance p.
func (f *Forward) Activate(a Activation, p string, x *ir.Value) *ir.Value {
	switch a {
	case Silu:
		return f.At(p).Unary(ir.OpSilu, x)
	case GeluTanh:
		return f.At(p).Unary(ir.OpGelu, x)
	}
	// As torch computes it: x·0.5·(1 + erf(x·(1/√2))).
	f.At(p)
	e := f.Unary(ir.OpErf, f.Mul(x, f.Const(1/math.Sqrt2)))
	return f.Mul(f.Mul(x, f.Const(0.5)), f.Add(e, f.Const(1)))
}

// QKVLayout is how an attention stores its q, k and v projections.
type QKVLayout uint8

const (
	// SeparateQKV: three linear layers, Q, K and V.
	SeparateQKV QKVLayout = iota
	// FusedQKV: one linear layer QKV whose rows are q's, then k's, then
	// v's (Falcon's multi-query layout, Phi-3). It is split at load into
	// the weights Q, K and V, views of its rows (Decoder.Parts).
	FusedQKV
	// FusedPerHead: one linear layer QKV whose rows are, head by head,
	// that head's q, k and v rows (GPT-NeoX). Its output is split in the
	// graph, since no row range of the weight is one projection.
	FusedPerHead
)

// Attention is a self-attention part over the KV cache: the q, k and v
// projections (with their layout and biases), an optional norm of the
// whole q and k projections, RoPE, scaled dot-product attention with
// grouped heads, and the output projection. Its layers are named within
// its prefix.
type Attention struct {
	Dim, Heads, KVHeads, HeadDim int
	Layout                       QKVLayout
	Q, K, V, QKV, Out            string // layer names within the prefix ("q_proj", ...)
	QKVBias, OutBias             bool
	// QKNorm, when its Kind is set, normalises the whole q and k
	// projections before RoPE (OLMo 2), weights QNorm and KNorm.
	QKNorm       Norm
	QNorm, KNorm string
	RopeTheta    float64
	RopeStyle    string // the rope op's style: "half" or "interleaved"
	RopeDims     int    // the rotated dims of each head; 0 means all (partial rotary when fewer)
	Scale        float64
	// Window, when positive, limits each query to the last Window
	// positions (the attention op's sliding window).
	Window int
}

// Validate checks that the heads, RoPE and scale describe a buildable
// attention.
func (a Attention) Validate() error {
	switch {
	case a.Dim <= 0 || a.Heads <= 0 || a.KVHeads <= 0 || a.HeadDim <= 0:
		return fmt.Errorf("dim %d, heads %d, kv heads %d and head dim %d must be positive", a.Dim, a.Heads, a.KVHeads, a.HeadDim)
	case a.Heads%a.KVHeads != 0:
		return fmt.Errorf("heads %d is not a multiple of kv heads %d", a.Heads, a.KVHeads)
	case a.Layout == FusedPerHead && a.KVHeads != a.Heads:
		return fmt.Errorf("a q/k/v projection fused per head has as many kv heads as heads, not %d of %d", a.KVHeads, a.Heads)
	case a.RopeDims < 0 || a.RopeDims > a.HeadDim || a.RopeDims%2 != 0 || a.RopeDims == 0 && a.HeadDim%2 != 0:
		return fmt.Errorf("rope dims %d must be even and at most the head dim %d", a.RopeDims, a.HeadDim)
	case a.RopeStyle != "half" && a.RopeStyle != "interleaved":
		return fmt.Errorf("rope style %q must be half or interleaved", a.RopeStyle)
	case !(a.RopeTheta > 0) || math.IsInf(a.RopeTheta, 1):
		return fmt.Errorf("rope theta %g must be positive and finite", a.RopeTheta)
	case !(a.Scale > 0) || math.IsInf(a.Scale, 1):
		return fmt.Errorf("attention scale %g must be positive and finite", a.Scale)
	}
	if a.QKNorm.Kind != 0 {
		return a.QKNorm.Validate()
	}
	return nil
}

// Shapes lists the attention's weights under prefix p (which ends in a
// dot), in the order of a Hugging Face checkpoint.
func (a Attention) Shapes(p string) []NamedShape {
	q, kv := a.Heads*a.HeadDim, a.KVHeads*a.HeadDim
	var ws []NamedShape
	if a.Layout == SeparateQKV {
		ws = append(ws, DenseShapes(p+a.Q, q, a.Dim, a.QKVBias)...)
		ws = append(ws, DenseShapes(p+a.K, kv, a.Dim, a.QKVBias)...)
		ws = append(ws, DenseShapes(p+a.V, kv, a.Dim, a.QKVBias)...)
	} else {
		ws = append(ws, DenseShapes(p+a.QKV, q+2*kv, a.Dim, a.QKVBias)...)
	}
	if a.QKNorm.Kind != 0 {
		ws = append(ws, a.QKNorm.Shapes(p+a.QNorm, q)...)
		ws = append(ws, a.QKNorm.Shapes(p+a.KNorm, kv)...)
	}
	return append(ws, DenseShapes(p+a.Out, a.Dim, q, a.OutBias)...)
}

// Parts are the views that split a FusedQKV layer at prefix p into the
// layers Q, K and V (weights and biases); none for the other layouts.
func (a Attention) Parts(p string) []Part {
	if a.Layout != FusedQKV {
		return nil
	}
	q, kv := a.Heads*a.HeadDim, a.KVHeads*a.HeadDim
	var ps []Part
	suffixes := []string{".weight"}
	if a.QKVBias {
		suffixes = append(suffixes, ".bias")
	}
	for _, s := range suffixes {
		ps = append(ps,
			Part{Name: p + a.Q + s, Of: p + a.QKV + s, Lo: 0, Hi: q},
			Part{Name: p + a.K + s, Of: p + a.QKV + s, Lo: q, Hi: q + kv},
			Part{Name: p + a.V + s, Of: p + a.QKV + s, Lo: q + kv, Hi: q + 2*kv})
	}
	return ps
}

// Apply is the attention at prefix p (ending in a dot) on x [seq, dim],
// with the layer's caches kv: it returns the output projection's result
// and the updated caches.
func (a Attention) Apply(f *Forward, p string, x *ir.Value, kv []*ir.Value) (*ir.Value, []*ir.Value) {
	var q, k, v *ir.Value
	if a.Layout == FusedPerHead {
		qkv := f.Heads(f.Dense(p+a.QKV, x, a.QKVBias), a.Heads, 3*a.HeadDim)
		hd := int64(a.HeadDim)
		q = f.At(p+"q").Slice(qkv, 2, 0, hd)
		k = f.At(p+"k").Slice(qkv, 2, hd, 2*hd)
		v = f.At(p+"v").Slice(qkv, 2, 2*hd, 3*hd)
	} else {
		q, k, v = f.Dense(p+a.Q, x, a.QKVBias), f.Dense(p+a.K, x, a.QKVBias), f.Dense(p+a.V, x, a.QKVBias)
		if a.QKNorm.Kind != 0 {
			q, k = f.Norm(a.QKNorm, p+a.QNorm, q), f.Norm(a.QKNorm, p+a.KNorm, k)
		}
		q, k, v = f.Heads(q, a.Heads, a.HeadDim), f.Heads(k, a.KVHeads, a.HeadDim), f.Heads(v, a.KVHeads, a.HeadDim)
	}
	rope := ir.Attrs{"theta": ir.FloatAttr(a.RopeTheta), "style": ir.StringAttr(a.RopeStyle)}
	if a.RopeDims != 0 && a.RopeDims != a.HeadDim {
		rope["dims"] = ir.IntAttr(int64(a.RopeDims))
	}
	q = f.At(p+"rope_q").Rope(q, f.Pos, rope)
	k = f.At(p+"rope_k").Rope(k, f.Pos, rope)
	attrs := ir.Attrs{"scale": ir.FloatAttr(a.Scale)}
	if a.Window > 0 {
		attrs["window"] = ir.IntAttr(int64(a.Window))
	}
	o, kc, vc := f.CachedAttentionWith(strings.TrimSuffix(p, "."), q, k, v, kv[0], kv[1], attrs)
	return f.Dense(p+a.Out, o, a.OutBias), []*ir.Value{kc, vc}
}

// MLP is a feed-forward part: Down(act(Gate(x))·Up(x)) when gated
// (SwiGLU), else Down(act(Up(x))), with biases on every layer or none.
type MLP struct {
	Dim, Hidden    int
	Gate, Up, Down string // layer names within the prefix; Gate "" for an ungated MLP
	Bias           bool
	Act            Activation
}

// Validate checks the sizes and the activation.
func (m MLP) Validate() error {
	if m.Dim <= 0 || m.Hidden <= 0 {
		return fmt.Errorf("feed-forward sizes %d and %d must be positive", m.Dim, m.Hidden)
	}
	if m.Act < Silu || m.Act > GeluErf {
		return fmt.Errorf("activation %d is not one of Silu, GeluTanh, GeluErf", m.Act)
	}
	return nil
}

// Shapes lists the MLP's weights under prefix p (ending in a dot).
func (m MLP) Shapes(p string) []NamedShape {
	var ws []NamedShape
	if m.Gate != "" {
		ws = append(ws, DenseShapes(p+m.Gate, m.Hidden, m.Dim, m.Bias)...)
	}
	ws = append(ws, DenseShapes(p+m.Up, m.Hidden, m.Dim, m.Bias)...)
	return append(ws, DenseShapes(p+m.Down, m.Dim, m.Hidden, m.Bias)...)
}

// Apply is the MLP at prefix p (ending in a dot) on x.
func (m MLP) Apply(f *Forward, p string, x *ir.Value) *ir.Value {
	if m.Gate == "" {
		h := f.Activate(m.Act, p+"act", f.Dense(p+m.Up, x, m.Bias))
		return f.Dense(p+m.Down, h, m.Bias)
	}
	g := f.Activate(m.Act, p+"act", f.Dense(p+m.Gate, x, m.Bias))
	u := f.Dense(p+m.Up, x, m.Bias)
	return f.Dense(p+m.Down, f.At(p+"gate").Mul(g, u), m.Bias)
}
