package hf

import (
	"github.com/tapml/tapml/frontend/arch"
	"github.com/tapml/tapml/frontend/arch/falcon"
)

// falconFamily is FalconForCausalLM in its falcon-7b form (multi-query,
// parallel attention, RoPE, no biases) over arch/falcon. Falcon names its
// feed-forward width ffn_hidden_size (4·hidden_size by default; its
// intermediate_size is unused), its activation "activation", and its width
// n_embed in old configs; with multi_query, it has one key/value head
// whatever num_kv_heads says.
var falconFamily = stackFamily("FalconForCausalLM", "falcon", "transformer.",
	sizeKeys{ffn: "ffn_hidden_size", ffnTimes: 4, allHeads: true, eps: "layer_norm_epsilon", defEps: 1e-5,
		act: "activation", defAct: "gelu", defPos: 2048, aliases: [][2]string{{"hidden_size", "n_embed"}}},
	func(o jsonObject, s arch.Sizes) (arch.Stack, error) {
		s.KVHeads = 1
		return falcon.Config{Sizes: s}.Stack(), o.refuse(
			refused{"multi_query", "only falcon-7b's multi-query attention", []string{"true"}},
			refused{"new_decoder_architecture", "falcon-40b's grouped attention and two norms", []string{"false"}},
			refused{"parallel_attn", "sequential blocks", []string{"true"}},
			refused{"alibi", "ALiBi position biases", []string{"false"}},
			refused{"bias", "biases", []string{"false"}},
			refused{"num_ln_in_parallel_attn", "two norms in parallel blocks", []string{"1"}},
			refused{"tie_word_embeddings", "Falcon's classifier is the token embedding", []string{"true"}})
	})
