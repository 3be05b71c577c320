package hf

import (
	"fmt"
	"regexp"

	"github.com/tapml/tapml/frontend/arch"
	"github.com/tapml/tapml/frontend/arch/gpt2"
)

// gpt2Family is GPT2LMHeadModel, and gptBigCodeFamily
// GPTBigCodeForCausalLM (GPT-2 with multi-query attention and nn.Linear
// layers), over arch/gpt2, whose canonical weight names are Hugging Face's
// GPT2Model names.
var (
	gpt2Family       = gpt2Like("GPT2LMHeadModel", "gpt2")
	gptBigCodeFamily = gpt2Like("GPTBigCodeForCausalLM", "gpt_bigcode")
)

func gpt2Like(archName, modelType string) family {
	return family{
		arch: archName, modelType: modelType,
		config: func(o jsonObject, c *Config) (arch.Config, error) { return o.gpt2(c, modelType == "gpt_bigcode") },
		tensor: func(canon string, _ arch.Config, ck *Checkpoint) string {
			// The LM-head classes save the base model under
			// "transformer." (a base model alone has no prefix), and their
			// own classifier at the top level.
			if canon != "lm_head.weight" && ck.Has("transformer.wte.weight") {
				return "transformer." + canon
			}
			return canon
		},
		unread: func(name string, m arch.Config) bool {
			// The causal-mask buffers of old checkpoints, and a tied head.
			return gpt2Buffer.MatchString(name) || name == "lm_head.weight" && !m.(gpt2.Config).LMHead
		},
	}
}

var gpt2Buffer = regexp.MustCompile(`^(transformer\.)?h\.[0-9]+\.attn\.(bias|masked_bias)$`)

func (o jsonObject) gpt2(c *Config, bigCode bool) (arch.Config, error) {
	g := gpt2.Config{Vocab: c.Vocab}
	var err error
	get := o.ints(&err)
	get(&g.Dim, "n_embd", -1, 1, bigDim)
	get(&g.Layers, "n_layer", -1, 1, bigLayer)
	get(&g.Heads, "n_head", -1, 1, bigDim)
	get(&g.Positions, "n_positions", -1, 1, bigPos)
	get(&g.Inner, "n_inner", 4*int64(g.Dim), 1, bigDim)
	if err != nil {
		return nil, err
	}
	if o.present("n_ctx") {
		n, err := o.int("n_ctx", -1, 1, bigPos)
		if err != nil {
			return nil, err
		}
		if n != g.Positions {
			return nil, o.errorf("n_ctx", "%d differs from n_positions %d", n, g.Positions)
		}
	}
	if g.Dim%g.Heads != 0 {
		return nil, fmt.Errorf("%s: n_embd %d is not a multiple of n_head %d", o.file, g.Dim, g.Heads)
	}
	if g.NormEps, err = o.float("layer_norm_epsilon", 1e-5); err != nil {
		return nil, err
	}
	defAct := "gelu_new"
	if bigCode {
		defAct = "gelu_pytorch_tanh"
	}
	act, err := o.string("activation_function", defAct)
	if err != nil {
		return nil, err
	}
	switch act {
	case "gelu_new", "gelu_pytorch_tanh", "gelu_fast":
		// The same function: GELU's tanh approximation.
	default:
		return nil, o.errorf("activation_function", "%q is not supported (only the tanh approximation of GELU: gelu_new, gelu_pytorch_tanh, gelu_fast)", act)
	}
	for _, u := range []struct{ key, why string }{
		{"scale_attn_by_inverse_layer_idx", "attention scaled by layer index"},
		{"add_cross_attention", "cross-attention"},
	} {
		if err := o.unsupported(u.key, u.why, "false"); err != nil {
			return nil, err
		}
	}
	if err := o.unsupported("scale_attn_weights", "unscaled attention", "true"); err != nil {
		return nil, err
	}
	tied, err := o.bool("tie_word_embeddings", true)
	if err != nil {
		return nil, err
	}
	g.LMHead = !tied
	if bigCode {
		if err := o.unsupported("multi_query", "only multi-query attention (SantaCoder, StarCoder)", "true"); err != nil {
			return nil, err
		}
		g.KVHeads, g.Linear = 1, true
	}
	c.MaxPositions = g.Positions
	g.MaxSeq = min(g.Positions, MaxSeqCap)
	return g, nil
}
