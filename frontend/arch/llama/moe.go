package llama

import (
	"fmt"
	"math"
	"slices"
	"strconv"

	"github.com/tapml/tapml/frontend/arch"
	"github.com/tapml/tapml/ir"
)

// MoE is a mixture-of-experts feed-forward (Mixtral, Qwen2-MoE, Qwen3-MoE)
// as transformers computes it: a router (a linear layer to one logit per
// expert) whose softmax, in f32, keeps the TopK most probable experts of
// each token; each kept expert is a SwiGLU feed-forward of width Hidden,
// and the token's output is their sum weighted by the kept probabilities
// (renormalised to sum 1 when NormTopK). A shared expert, when present
// (Qwen2-MoE), runs on every token and is added, gated by the sigmoid of a
// linear layer of the token.
//
// Weights of a MoE layer N: layers.N.moe.router [E, dim], and the experts'
// stacked weights layers.N.moe.w1 and w3 [E, Hidden, dim] and w2
// [E, dim, Hidden] (expert e's rows are its weight stored out×in); the
// shared expert's layers.N.moe.shared.w1, w2, w3 and its gate
// layers.N.moe.shared_gate [1, dim].
type MoE struct {
	Experts  int  // E
	TopK     int  // experts per token
	Hidden   int  // each expert's feed-forward width
	NormTopK bool // renormalise the kept probabilities
	// SharedHidden is the shared expert's width; 0 means none.
	SharedHidden int
	// Dense lists the layers that keep a dense feed-forward (Qwen's
	// mlp_only_layers and decoder_sparse_step), in increasing order.
	Dense []int
}

// On reports whether layer l's feed-forward is the mixture (false for a
// nil MoE).
func (m *MoE) On(l int) bool { return m != nil && !slices.Contains(m.Dense, l) }

func (m *MoE) validate(layers int) error {
	switch {
	case m.Experts < 1 || m.TopK < 1 || m.Hidden < 1:
		return fmt.Errorf("experts %d, experts per token %d and expert width %d must be positive", m.Experts, m.TopK, m.Hidden)
	case m.TopK > m.Experts:
		return fmt.Errorf("%d experts per token exceed the %d experts", m.TopK, m.Experts)
	case m.Experts > math.MaxInt32 || m.SharedHidden < 0:
		return fmt.Errorf("%d experts or a shared expert width %d is out of range", m.Experts, m.SharedHidden)
	}
	for i, l := range m.Dense {
		if l < 0 || l >= layers || i > 0 && l <= m.Dense[i-1] {
			return fmt.Errorf("dense layers %v must be increasing layer numbers below %d", m.Dense, layers)
		}
	}
	return nil
}

// weightShapes lists the weights of a MoE layer whose names start with p.
func (m *MoE) weightShapes(p string, dim int) []arch.NamedShape {
	ws := []arch.NamedShape{
		arch.Named(p+"moe.router", m.Experts, dim),
		arch.Named(p+"moe.w1", m.Experts, m.Hidden, dim),
		arch.Named(p+"moe.w2", m.Experts, dim, m.Hidden),
		arch.Named(p+"moe.w3", m.Experts, m.Hidden, dim),
	}
	if s := m.SharedHidden; s > 0 {
		ws = append(ws,
			arch.Named(p+"moe.shared.w1", s, dim),
			arch.Named(p+"moe.shared.w2", dim, s),
			arch.Named(p+"moe.shared.w3", s, dim),
			arch.Named(p+"moe.shared_gate", 1, dim),
		)
	}
	return ws
}

// meta is the MoE part of the module's meta "config".
func (m *MoE) meta() string {
	s := fmt.Sprintf("experts=%d top_k=%d expert_hidden=%d norm_topk=%v", m.Experts, m.TopK, m.Hidden, m.NormTopK)
	if m.SharedHidden > 0 {
		s += " shared_hidden=" + strconv.Itoa(m.SharedHidden)
	}
	if len(m.Dense) > 0 {
		s += fmt.Sprintf(" dense_layers=%v", m.Dense)
	}
	return s
}

// ffn is the mixture applied to h [S, dim] of the layer whose names start
// with p: the router's top-k, the experts of each token through
// expert_matmul (which reads only the chosen experts' weights), their
// outputs weighted and summed over the k experts, plus the gated shared
// expert.
func (m *MoE) ffn(f *arch.Forward, p string, h *ir.Value) *ir.Value {
	logits := f.At(p+"moe.router").Linear(h, f.W(p+"moe.router"))
	probs := f.At(p+"moe.router.softmax").Op(ir.OpSoftmax, []*ir.Value{logits}, nil)
	top := f.At(p+"moe.router.topk").OpN(ir.OpTopK, []*ir.Value{probs}, ir.Attrs{"k": ir.IntAttr(int64(m.TopK))})
	weights, ids := top[0], top[1]
	if m.NormTopK {
		sum := f.At(p+"moe.router.norm").Op(ir.OpReduceSum, []*ir.Value{weights}, ir.Attrs{"axes": ir.IntsAttr(-1)})
		weights = f.Op(ir.OpDiv, []*ir.Value{weights, sum}, nil)
	}
	expert := func(name string, x *ir.Value) *ir.Value {
		return f.At(p+"moe."+name).Op(ir.OpExpertMatmul, []*ir.Value{x, f.W(p + "moe." + name), ids}, nil)
	}
	g := f.At(p+"moe.silu").Unary(ir.OpSilu, expert("w1", h))
	g = f.At(p+"moe.gate").Mul(g, expert("w3", h))
	d := expert("w2", g) // [S, k, dim]
	k := int64(m.TopK)
	d = f.At(p+"moe.weigh").Mul(d, f.Reshape(weights, ir.Shape{f.Seq, ir.D(k), ir.D(1)}))
	out := f.At(p+"moe.sum").Op(ir.OpReduceSum, []*ir.Value{d}, ir.Attrs{"axes": ir.IntsAttr(1), "keepdims": ir.BoolAttr(false)})
	if m.SharedHidden == 0 {
		return out
	}
	shared := gatedFeedForward(f, p+"moe.shared.", h, ir.OpSilu)
	gate := f.At(p+"moe.shared_gate").Linear(h, f.W(p+"moe.shared_gate"))
	gate = f.Unary(ir.OpSigmoid, gate)
	shared = f.At(p+"moe.shared_gate").Mul(gate, shared)
	return f.At(p+"moe.shared.residual").Add(out, shared)
}
