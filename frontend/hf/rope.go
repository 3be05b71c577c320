package hf

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/tapml/tapml/frontend/arch"
)

// ropeConfig is RoPE as config.json sets it: the base, the share of each
// head it rotates and the scaling.
type ropeConfig struct {
	theta   float64
	partial float64 // partial_rotary_factor: the rotated share of a head
	scaling arch.RopeScaling
}

// ropeRules are how a model type reads RoPE beyond the common keys.
type ropeRules struct {
	// renames maps old scaling type names to the one transformers uses
	// (Phi-3's "su" and "yarn" are LongRoPE).
	renames map[string]string
	// originalMax, when positive, is the top-level
	// original_max_position_embeddings's default; that key then decides
	// the pretraining context over rope_parameters' (Phi-3).
	originalMax int64
	// theta is the base when config.json gives none (0: 10000).
	theta float64
}

func (r ropeRules) defaultTheta() float64 {
	if r.theta == 0 {
		return 10000
	}
	return r.theta
}

// rope reads RoPE's settings from either form transformers writes:
// transformers 5's rope_parameters object, or transformers 4's top-level
// rope_theta and rope_scaling. maxPos is max_position_embeddings.
func (o jsonObject) rope(maxPos int, rules ropeRules) (ropeConfig, error) {
	params, err := o.object("rope_parameters")
	if err != nil {
		return ropeConfig{}, err
	}
	scaling, err := o.object("rope_scaling")
	if err != nil {
		return ropeConfig{}, err
	}
	r := ropeConfig{partial: 1}
	switch {
	case params != nil && scaling != nil:
		return r, o.errorf("rope_scaling", "given with rope_parameters (one form or the other)")
	case params != nil && o.present("rope_theta"):
		return r, o.errorf("rope_theta", "given both at the top level and in rope_parameters")
	case params != nil:
		if r.theta, err = params.float("rope_theta", rules.defaultTheta()); err != nil {
			return r, err
		}
	default:
		if r.theta, err = o.float("rope_theta", rules.defaultTheta()); err != nil {
			return r, err
		}
		params = scaling // nil: plain RoPE
	}
	if r.partial, err = o.float("partial_rotary_factor", 1); err != nil {
		return r, err
	}
	if params == nil {
		return r, nil
	}
	if params.present("partial_rotary_factor") {
		if r.partial, err = params.float("partial_rotary_factor", 1); err != nil {
			return r, err
		}
	}
	r.scaling, err = params.ropeScaling(maxPos, rules, o)
	return r, err
}

// ropeScaling reads one rope_parameters (or rope_scaling) object; top is
// the whole config.
func (p jsonObject) ropeScaling(maxPos int, rules ropeRules, top jsonObject) (arch.RopeScaling, error) {
	typ, err := p.string("rope_type", "")
	if err == nil && typ == "" {
		typ, err = p.string("type", "default") // transformers 4's name of the key
	}
	if err != nil {
		return arch.RopeScaling{}, err
	}
	if to, ok := rules.renames[typ]; ok {
		typ = to
	}
	if typ == "default" {
		return arch.RopeScaling{}, nil
	}
	s := arch.RopeScaling{Type: typ, Truncate: true}
	known := false
	for _, t := range arch.RopeTypes {
		known = known || t == typ
	}
	if !known {
		return s, p.errorf("rope_type", "%q is not supported (supported: default, %s)", typ, strings.Join(arch.RopeTypes, ", "))
	}
	// The pretraining context: rope_parameters' own, or
	// max_position_embeddings (dynamic NTK always uses the latter).
	orig := int64(maxPos)
	if typ != "dynamic" {
		if orig, err = p.int64("original_max_position_embeddings", orig); err != nil {
			return s, err
		}
		if rules.originalMax > 0 {
			if orig, err = top.int64("original_max_position_embeddings", rules.originalMax); err != nil {
				return s, err
			}
		}
	}
	s.OriginalMax = int(orig)
	// The factor is required, except where transformers derives it from
	// the two contexts.
	factorDefault := -1.0
	if typ == "yarn" || typ == "longrope" {
		factorDefault = float64(maxPos) / float64(orig)
	}
	if s.Factor, err = p.float("factor", factorDefault); err != nil {
		return s, err
	}
	if s.AttentionFactor, err = p.optFloat("attention_factor"); err != nil {
		return s, err
	}
	switch typ {
	case "llama3":
		if s.LowFreqFactor, err = p.float("low_freq_factor", -1); err != nil {
			return s, err
		}
		if s.HighFreqFactor, err = p.float("high_freq_factor", -1); err != nil {
			return s, err
		}
	case "yarn":
		// Absent, null and 0 are the defaults ("or 32" in transformers).
		for _, b := range []struct {
			dst *float64
			key string
		}{{&s.BetaFast, "beta_fast"}, {&s.BetaSlow, "beta_slow"}, {&s.Mscale, "mscale"}, {&s.MscaleAllDim, "mscale_all_dim"}} {
			if *b.dst, err = p.optFloat(b.key); err != nil {
				return s, err
			}
		}
		if s.Truncate, err = p.bool("truncate", true); err != nil {
			return s, err
		}
	case "longrope":
		if s.ShortFactors, err = p.floats("short_factor"); err != nil {
			return s, err
		}
		if s.LongFactors, err = p.floats("long_factor"); err != nil {
			return s, err
		}
	}
	return s, nil
}

// object reads an object-valued key (nil when absent or null).
func (o jsonObject) object(key string) (*jsonObject, error) {
	if !o.present(key) {
		return nil, nil
	}
	sub := &jsonObject{file: o.file}
	if err := json.Unmarshal(o.m[key], &sub.m); err != nil || sub.m == nil {
		return nil, o.errorf(key, "want an object, got %s", o.m[key])
	}
	sub.file = o.file + ": " + key
	return sub, nil
}

// int64 reads a positive integer that fits an int.
func (o jsonObject) int64(key string, def int64) (int64, error) {
	n, err := o.int(key, def, 1, bigPos)
	return int64(n), err
}

// optFloat reads a finite number >= 0 that may be absent or null (0).
func (o jsonObject) optFloat(key string) (float64, error) {
	if !o.present(key) {
		return 0, nil
	}
	var n json.Number
	if err := json.Unmarshal(o.m[key], &n); err != nil {
		return 0, o.errorf(key, "want a number, got %s", o.m[key])
	}
	f, err := strconv.ParseFloat(n.String(), 64)
	if err != nil || !(f >= 0) || math.IsInf(f, 0) {
		return 0, o.errorf(key, "want a finite number >= 0, got %s", n)
	}
	return f, nil
}

// floats reads a required list of positive finite numbers.
func (o jsonObject) floats(key string) ([]float64, error) {
	if !o.present(key) {
		return nil, fmt.Errorf("%s: missing %q", o.file, key)
	}
	var raw []json.RawMessage
	if err := json.Unmarshal(o.m[key], &raw); err != nil {
		return nil, o.errorf(key, "want a list of numbers, got %s", o.m[key])
	}
	out := make([]float64, len(raw))
	for i, r := range raw {
		item := jsonObject{file: o.file, m: map[string]json.RawMessage{fmt.Sprintf("%s[%d]", key, i): r}}
		var err error
		if out[i], err = item.float(fmt.Sprintf("%s[%d]", key, i), -1); err != nil {
			return nil, err
		}
	}
	return out, nil
}
