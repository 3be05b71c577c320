package hf

import (
	"encoding/json"

	"github.com/tapml/tapml/frontend/arch"
	"github.com/tapml/tapml/frontend/arch/mamba"
)

// mambaFamily is MambaForCausalLM (Mamba 1) over arch/mamba, whose
// canonical weight names are Hugging Face's MambaModel names.
var mambaFamily = family{
	arch: "MambaForCausalLM", modelType: "mamba",
	config: func(o jsonObject, c *Config) (arch.Config, error) { return o.mamba(c) },
	tensor: func(canon string, _ arch.Config, _ *Checkpoint) string {
		if canon == "lm_head.weight" {
			return canon
		}
		return "backbone." + canon
	},
	unread: func(name string, m arch.Config) bool {
		return m.(mamba.Config).TiedEmbeddings && name == "lm_head.weight"
	},
}

// mamba reads MambaConfig: the mixer's width is expand·hidden_size (as
// transformers computes it, whatever intermediate_size says), and
// time_step_rank "auto" is ⌈hidden_size/16⌉. Mamba has no position limit;
// a session holds up to MaxSeqCap tokens.
func (o jsonObject) mamba(c *Config) (arch.Config, error) {
	m := mamba.Config{Vocab: c.Vocab}
	var err error
	get := o.ints(&err)
	get(&m.Dim, "hidden_size", -1, 1, bigDim)
	get(&m.Layers, "num_hidden_layers", -1, 1, bigLayer)
	get(&m.State, "state_size", 16, 1, bigDim)
	get(&m.ConvKernel, "conv_kernel", 4, 2, bigDim)
	if err != nil {
		return nil, err
	}
	expand := 2.0
	if o.present("expand") {
		if expand, err = o.float("expand", 2); err != nil {
			return nil, err
		}
	}
	if inner := expand * float64(m.Dim); inner < 1 || inner > bigDim {
		return nil, o.errorf("expand", "%g·hidden_size %d is out of range", expand, m.Dim)
	}
	m.Inner = int(expand * float64(m.Dim)) // int() as transformers truncates
	m.DtRank = (m.Dim + 15) / 16
	var rank string
	if json.Unmarshal(o.m["time_step_rank"], &rank) != nil || rank != "auto" {
		get(&m.DtRank, "time_step_rank", int64(m.DtRank), 1, bigDim)
	}
	if err != nil {
		return nil, err
	}
	if m.NormEps, err = o.float("layer_norm_epsilon", 1e-5); err != nil {
		return nil, err
	}
	if m.Bias, err = o.bool("use_bias", false); err != nil {
		return nil, err
	}
	if m.ConvBias, err = o.bool("use_conv_bias", true); err != nil {
		return nil, err
	}
	if m.TiedEmbeddings, err = o.bool("tie_word_embeddings", true); err != nil {
		return nil, err
	}
	if err := o.unsupported("hidden_act", "only silu", `"silu"`); err != nil {
		return nil, err
	}
	m.MaxSeq = MaxSeqCap
	return m, nil
}
