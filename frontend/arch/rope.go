package arch

import (
	"fmt"
	"math"

	"github.com/tapml/tapml/ir"
)

// RopeScaling is how a checkpoint stretches RoPE beyond its pretraining
// context, as transformers' rope_parameters (rope_scaling before
// transformers 5) describe it. The zero value is plain RoPE. Every formula
// that turns it into frequencies is here, once: the rope op's kernels only
// read per-pair factors, an attention factor and, for the scalings that
// depend on the sequence length, a table of frequencies
// (ir.RopeFreqs computes each row).
type RopeScaling struct {
	// Type is "" (none), "linear", "dynamic", "llama3", "yarn" or
	// "longrope".
	Type string
	// Factor is the context extension (linear, dynamic, llama3, yarn).
	Factor float64
	// OriginalMax is the pretraining context: original_max_position_embeddings
	// (llama3, yarn, longrope) or max_position_embeddings (dynamic).
	OriginalMax int
	// LowFreqFactor and HighFreqFactor bound Llama 3.1's smooth band.
	LowFreqFactor, HighFreqFactor float64
	// BetaFast and BetaSlow are YaRN's ramp bounds in rotations (0: 32
	// and 1); Truncate rounds the ramp's ends outwards (transformers'
	// default).
	BetaFast, BetaSlow float64
	Truncate           bool
	// AttentionFactor multiplies cos and sin (YaRN, LongRoPE); 0 means
	// the type's default, from Mscale and MscaleAllDim for YaRN when both
	// are set.
	AttentionFactor      float64
	Mscale, MscaleAllDim float64
	// ShortFactors and LongFactors are LongRoPE's per-pair divisors below
	// and beyond OriginalMax.
	ShortFactors, LongFactors []float64
}

// RopeTypes are the scaling types RopeScaling implements.
var RopeTypes = []string{"linear", "dynamic", "llama3", "yarn", "longrope"}

// Validate checks the scaling for a rotation of dims dims per head.
func (s RopeScaling) Validate(dims int) error {
	pairs := dims / 2
	positive := func(name string, v float64) error {
		if !(v > 0) || math.IsInf(v, 1) {
			return fmt.Errorf("rope scaling %s: %s is %g, want positive and finite", s.Type, name, v)
		}
		return nil
	}
	factors := func(name string, fs []float64) error {
		if len(fs) != pairs {
			return fmt.Errorf("rope scaling %s: %d %s for %d rotated pairs", s.Type, len(fs), name, pairs)
		}
		for i, f := range fs {
			if err := positive(fmt.Sprintf("%s[%d]", name, i), f); err != nil {
				return err
			}
		}
		return nil
	}
	switch s.Type {
	case "":
		return nil
	case "linear":
		return positive("factor", s.Factor)
	case "dynamic":
		if s.Factor < 1 || math.IsInf(s.Factor, 1) {
			return fmt.Errorf("rope scaling dynamic: factor %g, want at least 1", s.Factor)
		}
		if dims <= 2 {
			return fmt.Errorf("rope scaling dynamic needs more than 2 rotated dims, got %d", dims)
		}
	case "llama3":
		for _, p := range []struct {
			name string
			v    float64
		}{{"factor", s.Factor}, {"low_freq_factor", s.LowFreqFactor}, {"high_freq_factor", s.HighFreqFactor}} {
			if err := positive(p.name, p.v); err != nil {
				return err
			}
		}
		if s.HighFreqFactor <= s.LowFreqFactor {
			return fmt.Errorf("rope scaling llama3: high_freq_factor %g must exceed low_freq_factor %g", s.HighFreqFactor, s.LowFreqFactor)
		}
	case "yarn":
		if err := positive("factor", s.Factor); err != nil {
			return err
		}
	case "longrope":
		if err := factors("short_factor", s.ShortFactors); err != nil {
			return err
		}
		if err := factors("long_factor", s.LongFactors); err != nil {
			return err
		}
	default:
		return fmt.Errorf("rope scaling type %q is not supported (supported: %v)", s.Type, RopeTypes)
	}
	if s.OriginalMax < 1 {
		return fmt.Errorf("rope scaling %s: original_max_position_embeddings %d, want positive", s.Type, s.OriginalMax)
	}
	if s.AttentionFactor < 0 || math.IsInf(s.AttentionFactor, 1) || math.IsNaN(s.AttentionFactor) {
		return fmt.Errorf("rope scaling %s: attention_factor %g, want positive and finite", s.Type, s.AttentionFactor)
	}
	return nil
}

// Rope is a rope node's attributes and, when its frequencies depend on
// the sequence length (dynamic, longrope), the frequency table that is its
// third input (ir's rope op documents how a call picks the row).
type Rope struct {
	Attrs ir.Attrs
	Table *Computed // nil: the attributes say everything
}

// Rope returns the rope of a rotation of dims dims per head (of headDim)
// with base theta and pair style, scaled by s, for a KV cache of maxSeq
// positions. The table, if any, is named name.
func (s RopeScaling) Rope(name string, theta float64, style string, headDim, dims, maxSeq int) Rope {
	a := ir.Attrs{"theta": ir.FloatAttr(theta), "style": ir.StringAttr(style)}
	if dims != headDim {
		a["dims"] = ir.IntAttr(int64(dims))
	}
	pairs := dims / 2
	var table [][]float32
	switch s.Type {
	case "linear":
		a["freq_factors"] = ir.FloatsAttr(repeat(s.Factor, pairs)...)
	case "llama3":
		a["freq_factors"] = ir.FloatsAttr(s.llama3Factors(theta, dims)...)
	case "yarn":
		a["freq_factors"] = ir.FloatsAttr(s.yarnFactors(theta, dims)...)
	case "longrope":
		table = [][]float32{
			ir.RopeFreqs(float32(theta), dims, s.ShortFactors),
			ir.RopeFreqs(float32(theta), dims, s.LongFactors),
		}
	case "dynamic":
		// Row j is the frequencies of length OriginalMax + j: row 0 those
		// of the unscaled base, for every length up to OriginalMax.
		for l := s.OriginalMax; l <= max(maxSeq, s.OriginalMax); l++ {
			table = append(table, ir.RopeFreqs(float32(s.dynamicTheta(theta, dims, l)), dims, nil))
		}
	}
	if m := s.attentionFactor(); m != 1 {
		a["attention_factor"] = ir.FloatAttr(m)
	}
	r := Rope{Attrs: a}
	if table != nil {
		a["original_max"] = ir.IntAttr(int64(s.OriginalMax))
		data := make([]float32, 0, len(table)*pairs)
		for _, row := range table {
			data = append(data, row...)
		}
		r.Table = &Computed{Name: name, Shape: []int{len(table), pairs}, Data: data}
	}
	return r
}

func repeat(v float64, n int) []float64 {
	out := make([]float64, n)
	for i := range out {
		out[i] = v
	}
	return out
}

// attentionFactor is the factor that multiplies cos and sin: YaRN's
// 0.1·ln(factor)+1 (or the ratio of two such with mscale and
// mscale_all_dim), LongRoPE's sqrt(1 + ln(factor)/ln(original)), unless
// the checkpoint gives one.
func (s RopeScaling) attentionFactor() float64 {
	if s.AttentionFactor > 0 {
		return s.AttentionFactor
	}
	mscale := func(scale, m float64) float64 {
		if scale <= 1 {
			return 1
		}
		return 0.1*m*math.Log(scale) + 1
	}
	switch s.Type {
	case "yarn":
		if s.Mscale != 0 && s.MscaleAllDim != 0 {
			return mscale(s.Factor, s.Mscale) / mscale(s.Factor, s.MscaleAllDim)
		}
		return mscale(s.Factor, 1)
	case "longrope":
		if s.Factor <= 1 {
			return 1
		}
		return math.Sqrt(1 + math.Log(s.Factor)/math.Log(float64(s.OriginalMax)))
	}
	return 1
}

// dynamicTheta is dynamic NTK's base for a sequence of length l: theta ·
// (factor·l/original − (factor−1))^(dims/(dims−2)) past the original
// context, theta within it.
func (s RopeScaling) dynamicTheta(theta float64, dims, l int) float64 {
	if l <= s.OriginalMax {
		return theta
	}
	r := s.Factor*float64(l)/float64(s.OriginalMax) - (s.Factor - 1)
	return theta * math.Pow(r, float64(dims)/float64(dims-2))
}

// llama3Factors are Llama 3.1's per-pair divisors: the factor for
// wavelengths beyond original/low_freq_factor, 1 below
// original/high_freq_factor, and a smooth blend between.
func (s RopeScaling) llama3Factors(theta float64, dims int) []float64 {
	base := ir.RopeFreqs(float32(theta), dims, nil)
	out := make([]float64, len(base))
	orig := float64(s.OriginalMax)
	for i, f := range base {
		wavelen := 2 * math.Pi / float64(f)
		switch {
		case wavelen > orig/s.LowFreqFactor:
			out[i] = s.Factor
		case wavelen < orig/s.HighFreqFactor:
			out[i] = 1
		default:
			smooth := (orig/wavelen - s.LowFreqFactor) / (s.HighFreqFactor - s.LowFreqFactor)
			out[i] = 1 / ((1-smooth)/s.Factor + smooth)
		}
	}
	return out
}

// yarnFactors are YaRN's per-pair divisors: pair i's frequency blends the
// interpolated one (divided by the factor) and the original by a ramp over
// the pairs between the ones that turn beta_fast and beta_slow times in the
// original context.
func (s RopeScaling) yarnFactors(theta float64, dims int) []float64 {
	fast, slow := s.BetaFast, s.BetaSlow
	if fast == 0 {
		fast = 32
	}
	if slow == 0 {
		slow = 1
	}
	// The pair index that turns n times over the original context.
	dim := func(n float64) float64 {
		return float64(dims) * math.Log(float64(s.OriginalMax)/(n*2*math.Pi)) / (2 * math.Log(theta))
	}
	lo, hi := dim(fast), dim(slow)
	if s.Truncate {
		lo, hi = math.Floor(lo), math.Ceil(hi)
	}
	lo, hi = max(lo, 0), min(hi, float64(dims-1))
	if lo == hi {
		hi += 0.001 // as transformers: no division by zero
	}
	out := make([]float64, dims/2)
	for i := range out {
		ramp := min(max((float64(i)-lo)/(hi-lo), 0), 1)
		extrapolate := 1 - ramp
		out[i] = 1 / ((1-extrapolate)/s.Factor + extrapolate)
	}
	return out
}
