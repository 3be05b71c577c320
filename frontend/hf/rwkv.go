package hf

import (
	"github.com/tapml/tapml/frontend/arch"
	"github.com/tapml/tapml/frontend/arch/rwkv"
)

// rwkvFamily is RwkvForCausalLM (RWKV-4) over arch/rwkv, whose canonical
// weight names are Hugging Face's RwkvModel names.
var rwkvFamily = family{
	arch: "RwkvForCausalLM", modelType: "rwkv",
	config: func(o jsonObject, c *Config) (arch.Config, error) { return o.rwkv(c) },
	tensor: func(canon string, _ arch.Config, _ *Checkpoint) string {
		if canon == "head.weight" {
			return canon
		}
		return "rwkv." + canon
	},
	unread: func(name string, m arch.Config) bool {
		return m.(rwkv.Config).TiedEmbeddings && name == "head.weight"
	},
}

func (o jsonObject) rwkv(c *Config) (arch.Config, error) {
	r := rwkv.Config{Vocab: c.Vocab}
	var err error
	get := o.ints(&err)
	get(&r.Dim, "hidden_size", -1, 1, bigDim)
	get(&r.Layers, "num_hidden_layers", -1, 1, bigLayer)
	get(&r.Inner, "intermediate_size", 4*int64(r.Dim), 1, bigDim)
	get(&r.RescaleEvery, "rescale_every", 6, 0, bigLayer)
	get(&c.MaxPositions, "context_length", 1024, 1, bigPos)
	var att int
	get(&att, "attention_hidden_size", int64(r.Dim), 1, bigDim)
	if err != nil {
		return nil, err
	}
	if att != r.Dim {
		// transformers keeps the recurrent state in [hidden_size] rows, so
		// only equal sizes run there.
		return nil, o.errorf("attention_hidden_size", "%d differs from hidden_size %d (transformers supports only equal sizes)", att, r.Dim)
	}
	if r.NormEps, err = o.float("layer_norm_epsilon", 1e-5); err != nil {
		return nil, err
	}
	if r.TiedEmbeddings, err = o.bool("tie_word_embeddings", false); err != nil {
		return nil, err
	}
	r.MaxSeq = min(c.MaxPositions, MaxSeqCap)
	return r, nil
}
