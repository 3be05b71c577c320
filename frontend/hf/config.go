package hf

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/tapml/tapml/frontend/arch"
)

// MaxSeqCap bounds the KV cache length a model gets: its
// max_position_embeddings (n_positions for GPT-2), but at most this many
// positions, so that long-context models do not allocate huge caches.
const MaxSeqCap = 4096

// maxConfigFile bounds the size of config.json read into memory.
const maxConfigFile = 16 << 20

// A family maps one Hugging Face architecture (a model class of
// transformers) onto a frontend/arch family: config.json's hyperparameters
// onto the family's config, and the family's canonical weight names onto
// the checkpoint's tensors. Each lives in a file of its own (llama.go,
// gpt2.go) and is listed in families.
type family struct {
	arch      string // the model class, config.json's "architectures"
	modelType string // config.json's "model_type"
	// config reads the family's hyperparameters; c holds what ParseConfig
	// has read already (Arch, Vocab, BOS, EOS), and config sets
	// MaxPositions.
	config func(o jsonObject, c *Config) (arch.Config, error)
	// tensor is the checkpoint's name of the weight canon of model m.
	tensor func(canon string, m arch.Config, ck *Checkpoint) string
	// stacked, when set and not nil for canon, names the checkpoint's
	// tensors (one per expert) that stack into the weight canon.
	stacked func(canon string, m arch.Config) []string
	// unread reports a checkpoint tensor that the graph may leave unread
	// (a buffer of old checkpoints, a classifier tied to the embedding).
	unread func(name string, m arch.Config) bool
}

// families lists the supported architectures.
var families = []family{
	cohereFamily,
	falconFamily,
	gemmaModel.family(),
	gemma2Model.family(),
	gemma3Model.family(),
	gpt2Family,
	gptBigCodeFamily,
	gptneoxFamily,
	graniteFamily,
	llamaModel.family(),
	mambaFamily,
	mistralModel.family(),
	mixtralModel.moeFamily(),
	olmo2Family,
	phiFamily,
	phi3Model.family(),
	qwen2Model.family(),
	qwen2MoeModel.moeFamily(),
	qwen3Model.family(),
	qwen3MoeModel.moeFamily(),
	rwkvFamily,
	stablelmFamily,
	starcoder2Family,
}

// howToAdd points an unsupported architecture's error at the README.
const howToAdd = `see "How to add an architecture" in tapml's README.md`

// Architectures lists the model classes Load supports.
var Architectures = func() []string {
	var names []string
	for _, f := range families {
		names = append(names, f.arch)
	}
	return names
}()

// lookupFamily returns the family whose architecture or model type
// (when arch is "") is given.
func lookupFamily(arch, modelType string) (family, bool) {
	for _, f := range families {
		if f.arch == arch || arch == "" && f.modelType == modelType {
			return f, true
		}
	}
	return family{}, false
}

// Config is what config.json says about a supported model.
type Config struct {
	Arch  string      // one of Architectures
	Model arch.Config // the family's configuration
	Vocab int         // vocab_size
	// BOS and EOS are bos_token_id and eos_token_id (the first, when a
	// list), or -1 when absent. Neither decides what the tokenizer adds
	// around a prompt: its own files do.
	BOS, EOS int
	// EOG are the ids that end generation: eos_token_id, all of a list
	// (generation_config.json's replaces config.json's in Load).
	EOG []int
	// MaxPositions is max_position_embeddings (n_positions for GPT-2,
	// context_length for RWKV), before MaxSeqCap; 0 for a model without a
	// position limit (Mamba).
	MaxPositions int
	family       family
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

// ints returns a reader of integer keys (as int reads them) into their
// destinations; after the first error it reads nothing more and *err
// holds that error. Defaults may depend on keys read before.
func (o jsonObject) ints(err *error) func(dst *int, key string, def, lo, hi int64) {
	return func(dst *int, key string, def, lo, hi int64) {
		if *err == nil {
			*dst, *err = o.int(key, def, lo, hi)
		}
	}
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

// isNull reports whether key is there with the value null (transformers'
// None, which may differ from the default an absent key gets).
func (o jsonObject) isNull(key string) bool {
	r, ok := o.m[key]
	return ok && bytes.Equal(bytes.TrimSpace(r), []byte("null"))
}

// nullableInt reads an integer >= 0 that is def when absent and 0 (none)
// when null.
func (o jsonObject) nullableInt(key string, def int64) (int, error) {
	if o.isNull(key) {
		return 0, nil
	}
	return o.int(key, def, 0, bigPos)
}

// nullableFloat reads a finite number >= 0 that is def when absent and 0
// (none) when null.
func (o jsonObject) nullableFloat(key string, def float64) (float64, error) {
	if !o.present(key) && !o.isNull(key) {
		return def, nil
	}
	return o.optFloat(key)
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
	ids, err := o.tokenIDs(key)
	if err != nil || len(ids) == 0 {
		return -1, err
	}
	return ids[0], nil
}

// tokenIDs reads a token id key: an integer, a list of them, or absent
// (none).
func (o jsonObject) tokenIDs(key string) ([]int, error) {
	if !o.present(key) {
		return nil, nil
	}
	var list []json.RawMessage
	raw := []json.RawMessage{o.m[key]}
	if json.Unmarshal(o.m[key], &list) == nil {
		raw = list
	}
	var ids []int
	for _, r := range raw {
		sub := jsonObject{file: o.file, m: map[string]json.RawMessage{key: r}}
		id, err := sub.int(key, -1, 0, math.MaxInt32)
		if err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	return ids, nil
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
// the key. The configuration it returns is valid (Config.Model.Validate).
func ParseConfig(name string, data []byte) (*Config, error) {
	o := jsonObject{file: name}
	if err := json.Unmarshal(data, &o.m); err != nil {
		return nil, fmt.Errorf("%s: not a JSON object: %v", name, err)
	}
	archName, modelType := "", ""
	if o.present("architectures") {
		var archs []string
		if err := json.Unmarshal(o.m["architectures"], &archs); err != nil {
			return nil, o.errorf("architectures", "want a list of strings, got %s", o.m["architectures"])
		}
		if len(archs) != 1 {
			return nil, o.errorf("architectures", "want exactly one architecture, got %q", archs)
		}
		archName = archs[0]
	} else {
		mt, err := o.string("model_type", "")
		if err != nil {
			return nil, err
		}
		modelType = mt
	}
	fam, ok := lookupFamily(archName, modelType)
	switch {
	case !ok && archName != "":
		return nil, o.errorf("architectures", "%q is not supported (supported: %s; %s)", archName, strings.Join(Architectures, ", "), howToAdd)
	case !ok:
		return nil, fmt.Errorf("%s: no \"architectures\", and model_type %q is not supported (supported: %s; %s)", name, modelType, strings.Join(Architectures, ", "), howToAdd)
	}
	c := &Config{Arch: fam.arch, family: fam}
	var err error
	if c.BOS, err = o.tokenID("bos_token_id"); err != nil {
		return nil, err
	}
	if c.EOS, err = o.tokenID("eos_token_id"); err != nil {
		return nil, err
	}
	if c.EOG, err = o.tokenIDs("eos_token_id"); err != nil {
		return nil, err
	}
	if c.Vocab, err = o.int("vocab_size", -1, 1, bigVocab); err != nil {
		return nil, err
	}
	if c.Model, err = fam.config(o, c); err != nil {
		return nil, err
	}
	if err := c.Model.Validate(); err != nil {
		return nil, fmt.Errorf("%s: %v", o.file, err)
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
