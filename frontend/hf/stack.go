package hf

import (
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"strings"

	"github.com/tapml/tapml/frontend/arch"
)

// stackFamily is an architecture over a family assembled from parts
// (arch.Stack): config reads what the family has beyond the sizes (read
// from the keys k), and the checkpoint names its weights by the canonical
// names under the base model's prefix ("model."), but for the classifier,
// which is at the top level.
func stackFamily(archName, modelType, prefix string, k sizeKeys, config func(o jsonObject, s arch.Sizes) (arch.Stack, error)) family {
	return family{
		arch: archName, modelType: modelType,
		config: func(o jsonObject, c *Config) (arch.Config, error) {
			s, err := o.sizes(c, k)
			if err != nil {
				return nil, err
			}
			m, err := config(o, s)
			if err != nil {
				return nil, err
			}
			return m, nil
		},
		tensor: func(canon string, m arch.Config, _ *Checkpoint) string {
			if h := m.(arch.Stack).Head; h != "" && strings.HasPrefix(canon, h+".") {
				return canon
			}
			return prefix + canon
		},
		unread: func(name string, m arch.Config) bool {
			// Buffers that old checkpoints saved, and a tied classifier.
			return stackBuffer.MatchString(name) || m.(arch.Stack).Head == "" && name == "lm_head.weight"
		},
	}
}

// stackBuffer matches the buffers older transformers saved with the
// weights: RoPE's inverse frequencies and GPT-NeoX's causal mask.
var stackBuffer = regexp.MustCompile(`\.(rotary_emb\.inv_freq|attention\.bias|attention\.masked_bias)$`)

// sizeKeys says where a family's config.json keeps the hyperparameters
// that its transformers class reads under names of its own, and their
// defaults there.
// Empty names are LLaMA's: intermediate_size, num_key_value_heads,
// hidden_act.
type sizeKeys struct {
	ffn      string // the feed-forward width
	ffnTimes int64  // its default in multiples of hidden_size; 0: required
	// allHeads: the class reads no key/value head count; it has as many
	// key/value heads as heads.
	allHeads  bool
	eps       string  // the norm epsilon ("layer_norm_eps", "rms_norm_eps", ...)
	defEps    float64 // its default
	act       string  // the activation
	defAct    string  // its default
	defPos    int64   // max_position_embeddings' default
	defRotary float64 // partial_rotary_factor's default; 0 means 1
	// aliases are [key, old] pairs: old is the name an older transformers
	// wrote key under, read when only old is there.
	aliases [][2]string
}

// sizes reads what the families assembled from parts share: hidden_size,
// the feed-forward width, num_hidden_layers, num_attention_heads, the
// key/value heads (default: all heads), max_position_embeddings (into
// c.MaxPositions), the norm epsilon, the activation, the RoPE base and
// partial_rotary_factor. head_dim, which some of these classes ignore, is
// accepted only as hidden_size / num_attention_heads; rope_scaling is
// refused.
func (o jsonObject) sizes(c *Config, k sizeKeys) (arch.Sizes, error) {
	for _, a := range k.aliases {
		if o.present(a[1]) && !o.present(a[0]) {
			o.m[a[0]] = o.m[a[1]]
		}
	}
	for _, d := range []struct {
		p *string
		v string
	}{{&k.ffn, "intermediate_size"}, {&k.act, "hidden_act"}} {
		if *d.p == "" {
			*d.p = d.v
		}
	}
	s := arch.Sizes{Vocab: c.Vocab}
	var err error
	get := o.ints(&err)
	get(&s.Dim, "hidden_size", -1, 1, bigDim)
	defFFN := int64(-1) // required
	if k.ffnTimes > 0 {
		defFFN = k.ffnTimes * int64(s.Dim)
	}
	get(&s.Hidden, k.ffn, defFFN, 1, bigDim)
	get(&s.Layers, "num_hidden_layers", -1, 1, bigLayer)
	get(&s.Heads, "num_attention_heads", -1, 1, bigDim)
	s.KVHeads = s.Heads
	if !k.allHeads {
		get(&s.KVHeads, "num_key_value_heads", int64(s.Heads), 1, bigDim)
	}
	get(&c.MaxPositions, "max_position_embeddings", k.defPos, 1, bigPos)
	if err != nil {
		return s, err
	}
	if s.Dim%s.Heads != 0 {
		return s, fmt.Errorf("%s: hidden_size %d is not a multiple of num_attention_heads %d", o.file, s.Dim, s.Heads)
	}
	s.HeadDim = s.Dim / s.Heads
	if err := o.unsupported("head_dim", "a head width other than hidden_size / num_attention_heads", fmt.Sprint(s.HeadDim)); err != nil {
		return s, err
	}
	if err := o.unsupported("rope_scaling", "only plain RoPE is implemented"); err != nil {
		return s, err
	}
	if s.Heads%s.KVHeads != 0 {
		return s, fmt.Errorf("%s: num_attention_heads %d is not a multiple of num_key_value_heads %d", o.file, s.Heads, s.KVHeads)
	}
	if s.NormEps, err = o.float(k.eps, k.defEps); err != nil {
		return s, err
	}
	if s.Act, err = o.activation(k.act, k.defAct); err != nil {
		return s, err
	}
	rope, err := o.rope(c.MaxPositions, ropeRules{})
	if err != nil {
		return s, err
	}
	if rope.scaling.Type != "" {
		return s, o.errorf("rope_parameters", "RoPE scaling %q is not supported for this architecture (no checkpoint of it to check against)", rope.scaling.Type)
	}
	s.RopeTheta = rope.theta
	if k.defRotary == 0 {
		k.defRotary = 1
	}
	if s.RopeDims, err = o.ropeDims(s.HeadDim, k.defRotary); err != nil {
		return s, err
	}
	s.MaxSeq = min(c.MaxPositions, MaxSeqCap)
	return s, nil
}

// bools returns a reader of boolean keys, as ints does for integers.
func (o jsonObject) bools(err *error) func(dst *bool, key string, def bool) {
	return func(dst *bool, key string, def bool) {
		if *err == nil {
			*dst, *err = o.bool(key, def)
		}
	}
}

// activations are transformers' activation names (ACT2FN) that the parts
// implement.
var activations = map[string]arch.Activation{
	"silu": arch.Silu, "swish": arch.Silu,
	"gelu_new": arch.GeluTanh, "gelu_pytorch_tanh": arch.GeluTanh, "gelu_fast": arch.GeluTanh,
	"gelu": arch.GeluErf,
}

// activation reads an activation's name.
func (o jsonObject) activation(key, def string) (arch.Activation, error) {
	name, err := o.string(key, def)
	if err != nil {
		return 0, err
	}
	a, ok := activations[name]
	if !ok {
		return 0, o.errorf(key, "%q is not supported (supported: silu, swish, gelu, gelu_new, gelu_pytorch_tanh, gelu_fast)", name)
	}
	return a, nil
}

// ropeDims reads partial_rotary_factor (from rope_parameters, where
// transformers 5 writes it, or the top level) and returns the rotated dims
// of a head as transformers computes them, int(headDim·factor); 0 when
// they are the whole head.
func (o jsonObject) ropeDims(headDim int, def float64) (int, error) {
	const key = "partial_rotary_factor"
	f, err := o.float(key, def)
	if err != nil {
		return 0, err
	}
	if o.present("rope_parameters") {
		p := jsonObject{file: o.file}
		if err := json.Unmarshal(o.m["rope_parameters"], &p.m); err != nil {
			return 0, o.errorf("rope_parameters", "want an object, got %s", o.m["rope_parameters"])
		}
		if p.present(key) {
			pf, err := p.float(key, 1)
			if err != nil {
				return 0, o.errorf("rope_parameters", "%v", err)
			}
			if o.present(key) && pf != f {
				return 0, o.errorf(key, "%g differs from rope_parameters' %g", f, pf)
			}
			f = pf
		}
	}
	if f > 1 {
		return 0, o.errorf(key, "%g is more than 1", f)
	}
	d := int(math.Trunc(float64(headDim) * f))
	if d%2 != 0 || d == 0 {
		return 0, o.errorf(key, "%g of the head dim %d rotates %d dims, which is not a positive even number", f, headDim, d)
	}
	if d == headDim {
		return 0, nil
	}
	return d, nil
}

// refuse rejects each key whose value is not absent, null or one of the
// accepted JSON values: the features a family does not implement, with
// why.
func (o jsonObject) refuse(keys ...refused) error {
	for _, r := range keys {
		if err := o.unsupported(r.key, r.why, r.accepted...); err != nil {
			return err
		}
	}
	return nil
}

// refused is a config key whose other values a family does not implement.
type refused struct {
	key, why string
	accepted []string
}
