package hf

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/tapml/tapml/frontend/arch/gpt2"
	"github.com/tapml/tapml/frontend/arch/llama"
)

// MaxSeqCap bounds the KV cache length a model gets: its
// max_position_embeddings (n_positions for GPT-2), but at most this many
// positions, so that long-context models do not allocate huge caches.
const MaxSeqCap = 4096

// maxConfigFile bounds the size of config.json read into memory.
const maxConfigFile = 16 << 20

// Architectures lists the model classes Load supports.
var Architectures = []string{"LlamaForCausalLM", "Qwen2ForCausalLM", "GPT2LMHeadModel"}

// modelTypes maps config.json's model_type to the architecture, for
// configs without "architectures".
var modelTypes = map[string]string{"llama": "LlamaForCausalLM", "qwen2": "Qwen2ForCausalLM", "gpt2": "GPT2LMHeadModel"}

// Config is what config.json says about a supported model.
type Config struct {
	Arch  string       // one of Architectures
	Llama llama.Config // for LlamaForCausalLM and Qwen2ForCausalLM
	GPT2  gpt2.Config  // for GPT2LMHeadModel
	// BOS and EOS are bos_token_id and eos_token_id (the first, when a
	// list), or -1 when absent.
	BOS, EOS int
	// MaxPositions is max_position_embeddings (n_positions), before
	// MaxSeqCap.
	MaxPositions int
}

// jsonObject is a config object with typed, checked accessors. Errors
// name the file and the key.
type jsonObject struct {
	file string
	m    map[string]json.RawMessage
}

func (o jsonObject) errorf(key, format string, args ...any) error {
	return fmt.Errorf("%s: %s: %s", o.file, key, fmt.Sprintf(format, args...))
}

// present reports whether key is there and not null.
func (o jsonObject) present(key string) bool {
	r, ok := o.m[key]
	return ok && !bytes.Equal(bytes.TrimSpace(r), []byte("null"))
}

// int reads an integer in [lo, hi]; def < lo means the key is required.
func (o jsonObject) int(key string, def, lo, hi int64) (int, error) {
	if !o.present(key) {
		if def < lo {
			return 0, fmt.Errorf("%s: missing %q", o.file, key)
		}
		return int(def), nil
	}
	var n json.Number
	if err := json.Unmarshal(o.m[key], &n); err != nil {
		return 0, o.errorf(key, "want an integer, got %s", o.m[key])
	}
	v, err := strconv.ParseInt(n.String(), 10, 64)
	if err != nil {
		// 64.0 is an integer too.
		f, ferr := strconv.ParseFloat(n.String(), 64)
		if ferr != nil || f != math.Trunc(f) || math.Abs(f) > 1<<53 {
			return 0, o.errorf(key, "want an integer, got %s", n)
		}
		v = int64(f)
	}
	if v < lo || v > hi {
		return 0, o.errorf(key, "%d is out of range [%d, %d]", v, lo, hi)
	}
	return int(v), nil
}

// float reads a positive finite number.
func (o jsonObject) float(key string, def float64) (float64, error) {
	if !o.present(key) {
		if def <= 0 {
			return 0, fmt.Errorf("%s: missing %q", o.file, key)
		}
		return def, nil
	}
	var n json.Number
	if err := json.Unmarshal(o.m[key], &n); err != nil {
		return 0, o.errorf(key, "want a number, got %s", o.m[key])
	}
	f, err := strconv.ParseFloat(n.String(), 64)
	if err != nil || !(f > 0) || math.IsInf(f, 0) {
		return 0, o.errorf(key, "want a positive finite number, got %s", n)
	}
	return f, nil
}

func (o jsonObject) bool(key string, def bool) (bool, error) {
	if !o.present(key) {
		return def, nil
	}
	var b bool
	if err := json.Unmarshal(o.m[key], &b); err != nil {
		return false, o.errorf(key, "want true or false, got %s", o.m[key])
	}
	return b, nil
}

func (o jsonObject) string(key, def string) (string, error) {
	if !o.present(key) {
		return def, nil
	}
	var s string
	if err := json.Unmarshal(o.m[key], &s); err != nil {
		return "", o.errorf(key, "want a string, got %s", o.m[key])
	}
	return s, nil
}

// tokenID reads bos_token_id or eos_token_id: an integer, a list of them
// (the first counts), or absent (-1).
func (o jsonObject) tokenID(key string) (int, error) {
	if !o.present(key) {
		return -1, nil
	}
	var list []json.RawMessage
	raw := o.m[key]
	if json.Unmarshal(raw, &list) == nil {
		if len(list) == 0 {
			return -1, nil
		}
		raw = list[0]
	}
	sub := jsonObject{file: o.file, m: map[string]json.RawMessage{key: raw}}
	return sub.int(key, -1, 0, math.MaxInt32)
}

// unsupported rejects a key whose value is anything but absent, null or
// one of the accepted JSON values.
func (o jsonObject) unsupported(key, why string, accepted ...string) error {
	if !o.present(key) {
		return nil
	}
	got := string(bytes.TrimSpace(o.m[key]))
	for _, a := range accepted {
		if got == a {
			return nil
		}
	}
	return o.errorf(key, "%s is not supported (%s)", got, why)
}

// ParseConfig reads config.json (name is used in errors) for one of the
// supported architectures, checks every hyperparameter the graph depends
// on, and rejects features the graph does not implement (rope_scaling,
// sliding windows, attention biases of LLaMA, ...) with an error naming
// the key.
func ParseConfig(name string, data []byte) (*Config, error) {
	o := jsonObject{file: name}
	if err := json.Unmarshal(data, &o.m); err != nil {
		return nil, fmt.Errorf("%s: not a JSON object: %v", name, err)
	}
	arch := ""
	if o.present("architectures") {
		var archs []string
		if err := json.Unmarshal(o.m["architectures"], &archs); err != nil {
			return nil, o.errorf("architectures", "want a list of strings, got %s", o.m["architectures"])
		}
		if len(archs) != 1 {
			return nil, o.errorf("architectures", "want exactly one architecture, got %q", archs)
		}
		arch = archs[0]
	} else {
		mt, err := o.string("model_type", "")
		if err != nil {
			return nil, err
		}
		if arch = modelTypes[mt]; arch == "" {
			return nil, fmt.Errorf("%s: no \"architectures\", and model_type %q is not supported (supported: %s)", name, mt, strings.Join(Architectures, ", "))
		}
	}
	c := &Config{Arch: arch}
	var err error
	if c.BOS, err = o.tokenID("bos_token_id"); err != nil {
		return nil, err
	}
	if c.EOS, err = o.tokenID("eos_token_id"); err != nil {
		return nil, err
	}
	switch arch {
	case "LlamaForCausalLM", "Qwen2ForCausalLM":
		err = o.llama(c)
	case "GPT2LMHeadModel":
		err = o.gpt2(c)
	default:
		return nil, o.errorf("architectures", "%q is not supported (supported: %s)", arch, strings.Join(Architectures, ", "))
	}
	if err != nil {
		return nil, err
	}
	return c, nil
}

// Limits on hyperparameters: far above real models, low enough that sizes
// cannot overflow.
const (
	bigDim   = 1 << 20
	bigLayer = 1 << 12
	bigVocab = 1 << 24
	bigPos   = 1 << 30
)

func (o jsonObject) llama(c *Config) error {
	qwen := c.Arch == "Qwen2ForCausalLM"
	var l llama.Config
	var err error
	get := func(dst *int, key string, def, lo, hi int64) {
		if err == nil {
			*dst, err = o.int(key, def, lo, hi)
		}
	}
	get(&l.Dim, "hidden_size", -1, 1, bigDim)
	get(&l.HiddenDim, "intermediate_size", -1, 1, bigDim)
	get(&l.Layers, "num_hidden_layers", -1, 1, bigLayer)
	get(&l.Heads, "num_attention_heads", -1, 1, bigDim)
	get(&l.KVHeads, "num_key_value_heads", int64(l.Heads), 1, bigDim)
	get(&l.Vocab, "vocab_size", -1, 1, bigVocab)
	defPos := int64(2048)
	if qwen {
		defPos = 32768
	}
	get(&c.MaxPositions, "max_position_embeddings", defPos, 1, bigPos)
	get(&l.HeadSize, "head_dim", 0, 0, bigDim)
	if err != nil {
		return err
	}
	if l.HeadSize == 0 && l.Dim%l.Heads != 0 {
		return fmt.Errorf("%s: hidden_size %d is not a multiple of num_attention_heads %d", o.file, l.Dim, l.Heads)
	}
	if l.HeadSize == l.Dim/l.Heads && l.Dim%l.Heads == 0 {
		l.HeadSize = 0 // the default; keep the model's meta as a plain LLaMA's
	}
	if l.Heads%l.KVHeads != 0 {
		return fmt.Errorf("%s: num_attention_heads %d is not a multiple of num_key_value_heads %d", o.file, l.Heads, l.KVHeads)
	}
	if l.NormEps, err = o.float("rms_norm_eps", 1e-6); err != nil {
		return err
	}
	if l.RopeTheta, err = o.float("rope_theta", 10000); err != nil {
		return err
	}
	if l.TiedEmbeddings, err = o.bool("tie_word_embeddings", false); err != nil {
		return err
	}
	act, err := o.string("hidden_act", "silu")
	if err != nil {
		return err
	}
	if act != "silu" {
		return o.errorf("hidden_act", "%q is not supported (only silu)", act)
	}
	for _, u := range []struct {
		key, why string
		accepted []string
	}{
		{"rope_scaling", "only plain RoPE is implemented", nil},
		{"attention_bias", "the graph has no o_proj bias", []string{"false"}},
		{"mlp_bias", "the graph has no MLP biases", []string{"false"}},
		{"partial_rotary_factor", "only full rotary embeddings", []string{"1", "1.0"}},
		{"use_sliding_window", "sliding-window attention is not implemented", []string{"false"}},
		{"attention_dropout", "dropout at inference", []string{"0", "0.0"}},
	} {
		if err := o.unsupported(u.key, u.why, u.accepted...); err != nil {
			return err
		}
	}
	l.MaxSeq = min(c.MaxPositions, MaxSeqCap)
	l.RopeStyle = "half"
	l.QKVBias = qwen
	if err := l.Validate(); err != nil {
		return fmt.Errorf("%s: %v", o.file, err)
	}
	c.Llama = l
	return nil
}

func (o jsonObject) gpt2(c *Config) error {
	var g gpt2.Config
	var err error
	get := func(dst *int, key string, def, lo, hi int64) {
		if err == nil {
			*dst, err = o.int(key, def, lo, hi)
		}
	}
	get(&g.Dim, "n_embd", -1, 1, bigDim)
	get(&g.Layers, "n_layer", -1, 1, bigLayer)
	get(&g.Heads, "n_head", -1, 1, bigDim)
	get(&g.Vocab, "vocab_size", -1, 1, bigVocab)
	get(&g.Positions, "n_positions", -1, 1, bigPos)
	get(&g.Inner, "n_inner", 4*int64(g.Dim), 1, bigDim)
	if err != nil {
		return err
	}
	if o.present("n_ctx") {
		n, err := o.int("n_ctx", -1, 1, bigPos)
		if err != nil {
			return err
		}
		if n != g.Positions {
			return o.errorf("n_ctx", "%d differs from n_positions %d", n, g.Positions)
		}
	}
	if g.Dim%g.Heads != 0 {
		return fmt.Errorf("%s: n_embd %d is not a multiple of n_head %d", o.file, g.Dim, g.Heads)
	}
	if g.NormEps, err = o.float("layer_norm_epsilon", 1e-5); err != nil {
		return err
	}
	act, err := o.string("activation_function", "gelu_new")
	if err != nil {
		return err
	}
	switch act {
	case "gelu_new", "gelu_pytorch_tanh", "gelu_fast":
		// The same function: GELU's tanh approximation.
	default:
		return o.errorf("activation_function", "%q is not supported (only the tanh approximation of GELU: gelu_new, gelu_pytorch_tanh, gelu_fast)", act)
	}
	for _, u := range []struct{ key, why string }{
		{"scale_attn_by_inverse_layer_idx", "attention scaled by layer index"},
		{"add_cross_attention", "cross-attention"},
	} {
		if err := o.unsupported(u.key, u.why, "false"); err != nil {
			return err
		}
	}
	if err := o.unsupported("scale_attn_weights", "unscaled attention", "true"); err != nil {
		return err
	}
	if err := o.unsupported("tie_word_embeddings", "GPT-2's classifier is the token embedding", "true"); err != nil {
		return err
	}
	c.MaxPositions = g.Positions
	g.MaxSeq = min(g.Positions, MaxSeqCap)
	if err := g.Validate(); err != nil {
		return fmt.Errorf("%s: %v", o.file, err)
	}
	c.GPT2 = g
	return nil
}
