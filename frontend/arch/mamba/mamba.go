// Package mamba is the Mamba (1) family of decoders for arch.Build, as
// transformers' MambaForCausalLM computes it on its recurrent path: each
// layer is x + mixer(rmsnorm(x)), where the mixer projects x to a stream
// and a gate, runs the stream through a causal depthwise convolution and
// SiLU, derives the time step, B and C from it, runs the selective scan,
// adds the D skip, multiplies by SiLU of the gate and projects back. No
// attention and no KV cache: each layer carries its convolution's last
// inputs and the scan's state from one call to the next.
//
// Weight names are Hugging Face's MambaModel names (without the
// "backbone." prefix of MambaForCausalLM): embeddings.weight,
// layers.N.norm.weight, layers.N.mixer.in_proj.weight, ..., norm_f.weight,
// and lm_head.weight when the classifier is not tied.
package mamba

import (
	"fmt"
	"math"
	"strconv"

	"github.com/tapml/tapml/frontend/arch"
	"github.com/tapml/tapml/ir"
)

// Config holds the hyperparameters of a Mamba model.
type Config struct {
	Dim        int     // hidden_size
	Inner      int     // the mixer's width: expand·hidden_size
	State      int     // state_size (N)
	ConvKernel int     // conv_kernel (K)
	DtRank     int     // time_step_rank
	Layers     int     // num_hidden_layers
	Vocab      int     // vocab_size
	NormEps    float64 // layer_norm_epsilon of the RMS norms
	Bias       bool    // use_bias: in_proj and out_proj have biases
	ConvBias   bool    // use_conv_bias
	// MaxSeq is the most tokens a session holds (the state does not grow
	// with them; Mamba has no position limit, so the loader chooses it).
	MaxSeq int
	// TiedEmbeddings: the classifier is the token embedding (no lm_head).
	TiedEmbeddings bool
	// StoredA: the weights hold A = -exp(A_log) itself,
	// layers.N.mixer.A, not A_log (GGUF files: llama.cpp's converter
	// stores A).
	StoredA bool
}

// Validate checks that the hyperparameters describe a buildable model.
func (c Config) Validate() error {
	switch {
	case c.Dim <= 0 || c.Inner <= 0 || c.State <= 0 || c.DtRank <= 0 || c.Layers <= 0 || c.Vocab <= 0 || c.MaxSeq <= 0:
		return fmt.Errorf("hyperparameters must be positive: %+v", c)
	case c.ConvKernel < 2:
		return fmt.Errorf("conv kernel %d must be at least 2", c.ConvKernel)
	case !(c.NormEps > 0) || math.IsInf(c.NormEps, 1):
		return fmt.Errorf("layer norm epsilon %g must be positive and finite", c.NormEps)
	}
	return nil
}

// aName is the name of the weight of A within a layer's mixer.
func (c Config) aName() string {
	if c.StoredA {
		return "A"
	}
	return "A_log"
}

// layer is the prefix of layer l's weight names and provenance.
func layer(l int) string { return "layers." + strconv.Itoa(l) + "." }

// WeightShapes lists every weight the graph needs, in the order of a
// Hugging Face checkpoint's layers.
func (c Config) WeightShapes() []arch.NamedShape {
	d, in, n := c.Dim, c.Inner, c.State
	ws := []arch.NamedShape{arch.Named("embeddings.weight", c.Vocab, d)}
	for l := 0; l < c.Layers; l++ {
		p := layer(l) + "mixer."
		ws = append(ws,
			arch.Named(layer(l)+"norm.weight", d),
			arch.Named(p+c.aName(), in, n),
			arch.Named(p+"D", in),
			arch.Named(p+"conv1d.weight", in, 1, c.ConvKernel),
		)
		if c.ConvBias {
			ws = append(ws, arch.Named(p+"conv1d.bias", in))
		}
		ws = append(ws,
			arch.Named(p+"dt_proj.bias", in),
			arch.Named(p+"dt_proj.weight", in, c.DtRank),
			arch.Named(p+"in_proj.weight", 2*in, d),
		)
		if c.Bias {
			ws = append(ws, arch.Named(p+"in_proj.bias", 2*in))
		}
		ws = append(ws, arch.Named(p+"out_proj.weight", d, in))
		if c.Bias {
			ws = append(ws, arch.Named(p+"out_proj.bias", d))
		}
		ws = append(ws, arch.Named(p+"x_proj.weight", c.DtRank+2*n, in))
	}
	ws = append(ws, arch.Named("norm_f.weight", d))
	if !c.TiedEmbeddings {
		ws = append(ws, arch.Named("lm_head.weight", c.Vocab, d))
	}
	return ws
}

// Decoder describes the graph to arch.Build. Layer l's state is conv.l
// (f32[K-1, inner]: the convolution's last inputs) and ssm.l (f32[inner,
// N]: the scan's state), zeros at the start, as transformers starts them.
func (c Config) Decoder() arch.Decoder {
	in := int64(c.Inner)
	return arch.Decoder{
		Arch: "mamba", Layers: c.Layers, MaxSeq: c.MaxSeq,
		Config: c.meta(),
		State: func(int) []arch.State {
			return []arch.State{{Name: "conv", Type: ir.T(ir.F32, ir.S(int64(c.ConvKernel-1), in))},
				{Name: "ssm", Type: ir.T(ir.F32, ir.S(in, int64(c.State)))}}
		},
		Embed: func(f *arch.Forward) *ir.Value {
			return f.At("embeddings").Gather(f.W("embeddings.weight"), f.Tokens)
		},
		Block: c.block,
		Norm: func(f *arch.Forward, x *ir.Value) *ir.Value {
			return f.At("norm_f").RMSNorm(x, f.W("norm_f.weight"), c.NormEps)
		},
		Logits: func(f *arch.Forward, x *ir.Value) *ir.Value {
			head := "lm_head.weight"
			if c.TiedEmbeddings {
				head = "embeddings.weight"
			}
			return f.At("lm_head").Linear(x, f.W(head))
		},
	}
}

// meta is the module's meta "config"; StoredA is recorded only when set.
func (c Config) meta() string {
	s := fmt.Sprintf("dim=%d inner=%d state=%d conv=%d dt_rank=%d layers=%d vocab=%d eps=%g bias=%v conv_bias=%v max_seq=%d tied=%v",
		c.Dim, c.Inner, c.State, c.ConvKernel, c.DtRank, c.Layers, c.Vocab, c.NormEps, c.Bias, c.ConvBias, c.MaxSeq, c.TiedEmbeddings)
	if c.StoredA {
		s += " stored_a=true"
	}
	return s
}

// linear is x·wᵀ (+ the bias name.bias when bias is set), at name.
func linear(f *arch.Forward, x *ir.Value, name string, bias bool) *ir.Value {
	y := f.At(name).Linear(x, f.W(name+".weight"))
	if bias {
		y = f.Add(y, f.W(name+".bias"))
	}
	return y
}

// block is layer l: x + mixer(rmsnorm(x)).
func (c Config) block(f *arch.Forward, l int, x *ir.Value, state []*ir.Value) (*ir.Value, []*ir.Value) {
	p := layer(l) + "mixer."
	in, n, r := int64(c.Inner), int64(c.State), int64(c.DtRank)
	h := f.At(layer(l)+"norm").RMSNorm(x, f.W(layer(l)+"norm.weight"), c.NormEps)
	proj := linear(f, h, p+"in_proj", c.Bias)
	stream := f.At(p+"in_proj.stream").Slice(proj, 1, 0, in)
	gate := f.At(p+"in_proj.gate").Slice(proj, 1, in, 2*in)
	w := f.At(p+"conv1d").Reshape(f.W(p+"conv1d.weight"), ir.S(in, int64(c.ConvKernel)))
	conv := f.OpN(ir.OpCausalConv1D, []*ir.Value{state[0], stream, w}, nil)
	u := conv[1]
	if c.ConvBias {
		u = f.Add(u, f.W(p+"conv1d.bias"))
	}
	u = f.At(p+"conv1d.silu").Unary(ir.OpSilu, u)
	sel := linear(f, u, p+"x_proj", false) // [S, R + 2N]: time step, B, C
	dt := f.At(p+"x_proj.time_step").Slice(sel, 1, 0, r)
	b := f.At(p+"x_proj.B").Slice(sel, 1, r, r+n)
	cm := f.At(p+"x_proj.C").Slice(sel, 1, r+n, r+2*n)
	dt = linear(f, dt, p+"dt_proj", true)
	dt = f.At(p+"dt_proj.softplus").Unary(ir.OpSoftplus, dt)
	a := f.W(p + "A")
	if !c.StoredA {
		a = f.At(p+"A").Unary(ir.OpNeg, f.Unary(ir.OpExp, f.W(p+"A_log")))
	}
	scan := f.At(p+"scan").OpN(ir.OpSelectiveScan, []*ir.Value{state[1], u, dt, a, b, cm}, nil)
	y := f.At(p+"D").Add(scan[1], f.Mul(u, f.W(p+"D")))
	y = f.At(p+"gate").Mul(y, f.Unary(ir.OpSilu, gate))
	out := linear(f, y, p+"out_proj", c.Bias)
	return f.At(layer(l)+"residual").Add(x, out), []*ir.Value{conv[0], scan[0]}
}
