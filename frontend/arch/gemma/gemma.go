// Package gemma is Google's Gemma family of decoders for arch.Build
// (Gemma, Gemma 2, Gemma 3's text model): LLaMA's attention and gated
// feed-forward (arch/llama's Parts) with RMSNorms that scale by 1+w,
// token embeddings scaled by sqrt(dim), GELU (tanh) gating, and from
// Gemma 2 on, norms of the attention and feed-forward outputs before each
// residual add and soft-capped final logits. Gemma 2's alternating sliding
// window and attention soft-capping, Gemma 3's q/k norms and local RoPE
// base are settings of the embedded llama.Config.
package gemma

import (
	"fmt"
	"math"

	"github.com/tapml/tapml/frontend/arch"
	"github.com/tapml/tapml/frontend/arch/llama"
	"github.com/tapml/tapml/ir"
)

// Config holds the hyperparameters of a Gemma-family model.
type Config struct {
	llama.Config
	// PostNorms: each block also normalises the attention and
	// feed-forward outputs (layers.N.post_attention_norm and
	// post_ffn_norm) before adding them (Gemma 2, 3).
	PostNorms bool
	// FinalSoftcap, when positive, soft-caps the logits:
	// cap·tanh(logits/cap) (Gemma 2).
	FinalSoftcap float64
	// ShiftedNorms: the norm weights already hold Gemma's 1 + w, so the
	// norms are plain RMSNorms (GGUF files: llama.cpp's converter adds
	// the 1).
	ShiftedNorms bool
}

// Validate checks that the hyperparameters describe a buildable model.
func (c Config) Validate() error {
	if err := c.Config.Validate(); err != nil {
		return err
	}
	if !(c.FinalSoftcap >= 0) || math.IsInf(c.FinalSoftcap, 1) {
		return fmt.Errorf("final logit softcap %g must be finite and not negative", c.FinalSoftcap)
	}
	return nil
}

// WeightShapes lists LLaMA's weights and the post norms.
func (c Config) WeightShapes() []arch.NamedShape {
	ws := c.Config.WeightShapes()
	if !c.PostNorms {
		return ws
	}
	var out []arch.NamedShape
	for _, ns := range ws {
		out = append(out, ns)
		// Each post norm right after the weights of what it normalises.
		switch pre, part := llama.SplitLayer(ns.Name); part {
		case "attention.wo":
			out = append(out, arch.Named(pre+"post_attention_norm", c.Dim))
		case "feed_forward.w2":
			out = append(out, arch.Named(pre+"post_ffn_norm", c.Dim))
		}
	}
	return out
}

// Norm is Gemma's RMSNorm: x/rms(x) · (1 + w), the 1 added in f32 as
// transformers does (or already in w: ShiftedNorms).
func (c Config) Norm(f *arch.Forward, name string, x *ir.Value) *ir.Value {
	if c.ShiftedNorms {
		return c.RMSNorm(f, name, x)
	}
	one := f.At(name).Op(ir.OpConstant, nil, ir.Attrs{"value": ir.FloatsAttr(1)})
	return f.RMSNorm(x, f.Add(f.W(name), one), c.NormEps)
}

// Decoder describes the graph to arch.Build.
func (c Config) Decoder() arch.Decoder {
	p := c.Parts(c.Norm)
	meta := c.Meta() + fmt.Sprintf(" gemma post_norms=%v", c.PostNorms)
	if c.ShiftedNorms {
		meta += " shifted_norms=true"
	}
	if c.FinalSoftcap > 0 {
		meta += fmt.Sprintf(" final_softcap=%g", c.FinalSoftcap)
	}
	// The embedding scale is rounded to f32 first, as transformers'
	// float32 buffer holds it.
	scale := float64(float32(math.Sqrt(float64(c.Dim))))
	return arch.Decoder{
		Arch: "gemma", Config: meta, Layers: c.Layers, MaxSeq: c.MaxSeq,
		State: func(int) []arch.State { return arch.KVCache(c.MaxSeq, c.KVHeads, c.HeadDim()) },
		Embed: func(f *arch.Forward) *ir.Value {
			x := f.At("tok_embeddings").Gather(f.W("tok_embeddings"), f.Tokens)
			s := f.At("tok_embeddings.scale").Op(ir.OpConstant, nil, ir.Attrs{"value": ir.FloatsAttr(scale)})
			return f.Mul(x, s)
		},
		Block: func(f *arch.Forward, l int, x *ir.Value, kv []*ir.Value) (*ir.Value, []*ir.Value) {
			pre := llama.Layer(l)
			h := c.Norm(f, pre+"attention_norm", x)
			o, kv := p.Attention(f, l, h, kv)
			if c.PostNorms {
				o = c.Norm(f, pre+"post_attention_norm", o)
			}
			x = f.At(pre+"attention.residual").Add(x, o)
			h = c.Norm(f, pre+"ffn_norm", x)
			d := p.FeedForward(f, l, h, ir.OpGelu)
			if c.PostNorms {
				d = c.Norm(f, pre+"post_ffn_norm", d)
			}
			return f.At(pre+"feed_forward.residual").Add(x, d), kv
		},
		Norm: func(f *arch.Forward, x *ir.Value) *ir.Value { return c.Norm(f, "norm", x) },
		Logits: func(f *arch.Forward, x *ir.Value) *ir.Value {
			y := c.Classifier(f, x)
			if c.FinalSoftcap > 0 {
				y = Softcap(f.At("output.softcap"), y, c.FinalSoftcap)
			}
			return y
		},
		Computed: p.Computed(),
	}
}

// Softcap is cap·tanh(x/cap), in transformers' order of operations.
func Softcap(b *ir.Builder, x *ir.Value, cap float64) *ir.Value {
	k := b.Op(ir.OpConstant, nil, ir.Attrs{"value": ir.FloatsAttr(cap)})
	return b.Mul(b.Unary(ir.OpTanh, b.Op(ir.OpDiv, []*ir.Value{x, k}, nil)), k)
}
