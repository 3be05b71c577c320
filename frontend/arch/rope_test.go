package arch

import (
	"math"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/tapml/tapml/ir"
)

func TestRopeScalingValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		s    RopeScaling
		err  string
	}{
		{"none", RopeScaling{}, ""},
		{"linear", RopeScaling{Type: "linear", Factor: 2, OriginalMax: 16}, ""},
		{"linear without factor", RopeScaling{Type: "linear", OriginalMax: 16}, "factor is 0"},
		{"dynamic below 1", RopeScaling{Type: "dynamic", Factor: 0.5, OriginalMax: 16}, "at least 1"},
		{"llama3 band", RopeScaling{Type: "llama3", Factor: 8, LowFreqFactor: 4, HighFreqFactor: 1, OriginalMax: 16}, "must exceed"},
		{"longrope length", RopeScaling{Type: "longrope", ShortFactors: []float64{1}, LongFactors: []float64{1, 2}, OriginalMax: 16}, "1 short_factor for 2"},
		{"no original", RopeScaling{Type: "yarn", Factor: 4}, "original_max_position_embeddings 0"},
		{"unknown", RopeScaling{Type: "ntk", OriginalMax: 16}, `"ntk" is not supported`},
	} {
		err := tc.s.Validate(4)
		if (err == nil) != (tc.err == "") || err != nil && !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%s: Validate() = %v, want %q", tc.name, err, tc.err)
		}
	}
}

// The scalings' factors, attention factors and tables, at values worked
// out by hand from transformers' formulas (head dim 8, theta 10000).
func TestRopeScalingRope(t *testing.T) {
	base := ir.RopeFreqs(10000, 8, nil) // 1, 0.1, 0.01, 0.001
	approx := cmpopts.EquateApprox(1e-6, 0)
	smooth := (16/(2*math.Pi) - 1) / 3
	for _, tc := range []struct {
		name    string
		s       RopeScaling
		factors []float64 // freq_factors; nil: none
		mscale  float64   // attention_factor; 0: none
		rows    int       // table rows; 0: none
	}{
		{"plain", RopeScaling{}, nil, 0, 0},
		{"linear", RopeScaling{Type: "linear", Factor: 2, OriginalMax: 16}, []float64{2, 2, 2, 2}, 0, 0},
		// Wavelengths 2π, 62.8, 628, 6283 against 16/4 and 16/1: the
		// first is medium (smooth = (16/2π - 1)/3), the others low.
		{"llama3", RopeScaling{Type: "llama3", Factor: 8, LowFreqFactor: 1, HighFreqFactor: 4, OriginalMax: 16},
			[]float64{1 / ((1-smooth)/8 + smooth), 8, 8, 8}, 0, 0},
		// Correction range: pairs turning 32 and 1 times in 16 positions
		// are below pair 0 and at 8·ln(16/2π)/(2 ln 10^4) = 0.406 → [0, 1]:
		// pair 0 keeps its frequency, the others are divided by 4.
		{"yarn", RopeScaling{Type: "yarn", Factor: 4, OriginalMax: 16, Truncate: true}, []float64{1, 4, 4, 4}, 0.1*math.Log(4) + 1, 0},
		{"longrope", RopeScaling{Type: "longrope", Factor: 4, OriginalMax: 16, ShortFactors: []float64{1, 1, 1, 1}, LongFactors: []float64{1, 2, 3, 4}},
			nil, math.Sqrt(1 + math.Log(4)/math.Log(16)), 2},
		{"dynamic", RopeScaling{Type: "dynamic", Factor: 2, OriginalMax: 16}, nil, 0, 64 - 16 + 1},
	} {
		r := tc.s.Rope("rope.freqs", 10000, "half", 8, 8, 64)
		if got := r.Attrs.Floats("freq_factors"); !cmp.Equal(got, tc.factors, approx, cmpopts.EquateEmpty()) {
			t.Errorf("%s: freq_factors %v, want %v", tc.name, got, tc.factors)
		}
		if got, ok := r.Attrs["attention_factor"]; ok != (tc.mscale != 0) || ok && math.Abs(got.Float-tc.mscale) > 1e-12 {
			t.Errorf("%s: attention_factor %v, want %g", tc.name, r.Attrs["attention_factor"], tc.mscale)
		}
		if (r.Table != nil) != (tc.rows > 0) || r.Table != nil && (r.Table.Shape[0] != tc.rows || r.Table.Shape[1] != 4 || r.Attrs.Int("original_max") != 16) {
			t.Errorf("%s: table %+v, attrs %v, want %d rows", tc.name, r.Table, r.Attrs, tc.rows)
		}
	}
	// Dynamic NTK: row 0 is the plain base (lengths up to 16); the row of
	// length 32 has the base 10^4·(2·32/16 − 1)^(8/6).
	r := RopeScaling{Type: "dynamic", Factor: 2, OriginalMax: 16}.Rope("t", 10000, "half", 8, 8, 64)
	row := func(j int) []float32 { return r.Table.Data[4*j : 4*j+4] }
	if !cmp.Equal(row(0), base) {
		t.Errorf("dynamic row 0 %v, want %v", row(0), base)
	}
	want := ir.RopeFreqs(float32(10000*math.Pow(3, 8.0/6)), 8, nil)
	if !cmp.Equal(row(32-16), want) {
		t.Errorf("dynamic row of length 32: %v, want %v", row(16), want)
	}
}
