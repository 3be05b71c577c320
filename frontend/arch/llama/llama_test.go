package llama

import (
	"math"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/tapml/tapml/frontend/arch"
	"github.com/tapml/tapml/ir"
)

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*Config)
		err  string
	}{
		{"tiny", func(*Config) {}, ""},
		{"head size", func(c *Config) { c.HeadSize = 16; c.Heads = 6; c.KVHeads = 3 }, ""},
		{"negative head size", func(c *Config) { c.HeadSize = -2 }, "must not be negative"},
		{"odd head size", func(c *Config) { c.HeadSize = 9 }, "must be even for RoPE"},
		{"odd head, partial rope", func(c *Config) { c.HeadSize = 9; c.RopeDims = 4 }, ""},
		{"odd rope dims", func(c *Config) { c.RopeDims = 3 }, "rope dims 3 must be even"},
		{"rope dims too large", func(c *Config) { c.RopeDims = 10 }, "at most the head dim 8"},
		{"dim not multiple", func(c *Config) { c.Heads = 7 }, "not a multiple of heads"},
	} {
		c := Tiny
		tc.edit(&c)
		err := c.Validate()
		if (err == nil) != (tc.err == "") || err != nil && !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%s: Validate() = %v, want %q", tc.name, err, tc.err)
		}
	}
}

func TestExtensions(t *testing.T) {
	c := Tiny
	c.QKVBias, c.RopeDims, c.HeadSize, c.RopeStyle = true, 4, 12, "half"
	ws := c.WeightShapes()
	shapes := map[string][]int{}
	for _, ns := range ws {
		shapes[ns.Name] = ns.Shape
	}
	for name, want := range map[string][]int{
		"layers.1.attention.bq": {8 * 12}, "layers.1.attention.bk": {4 * 12}, "layers.1.attention.bv": {4 * 12},
		"layers.0.attention.wq": {8 * 12, 64}, "layers.0.attention.wo": {64, 8 * 12},
	} {
		if got := shapes[name]; len(got) != len(want) || got[0] != want[0] {
			t.Errorf("%s: shape %v, want %v", name, got, want)
		}
	}
	w := RandomWeights(c, 3)
	b, _ := w["layers.0.attention.bq"].Bytes()
	n, _ := w["layers.0.attention_norm"].Bytes()
	if string(b[:4]) == string(n[:4]) {
		t.Errorf("biases are not random")
	}
	m, err := arch.Build("ext", c, w)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(m.Meta["config"], "head_dim=12 qkv_bias=true rope_dims=4") {
		t.Errorf("meta %q", m.Meta["config"])
	}
	ropes, adds := 0, 0
	for _, nd := range m.Func("decode").Nodes {
		switch nd.Op {
		case ir.OpRope:
			ropes++
			if nd.Attrs.Int("dims") != 4 || nd.Attrs.String("style") != "half" {
				t.Errorf("%s: attrs %v", nd, nd.Attrs)
			}
		case ir.OpAdd:
			if strings.Contains(nd.Prov, ".attention.b") {
				adds++
				if !nd.Inputs[1].IsWeight() {
					t.Errorf("%s: bias is not a weight", nd)
				}
			}
		}
	}
	if ropes != 2*c.Layers || adds != 3*c.Layers {
		t.Errorf("%d rope nodes, %d bias adds; want %d and %d", ropes, adds, 2*c.Layers, 3*c.Layers)
	}
	// Without the extensions nothing changes: no bias weights, no dims attribute.
	m, err = arch.Build("plain", Tiny, RandomWeights(Tiny, 3))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(ir.Text(m), "dims = 4") || !strings.Contains(ir.Text(m), "dims = 0") || m.Weight("layers.0.attention.bq") != nil {
		t.Errorf("plain Tiny has extension artefacts")
	}
}

// The attention features of Mistral, Qwen3, Phi-3 and Gemma 3: weights,
// and attributes set on the layers they concern.
func TestAttentionFeatures(t *testing.T) {
	c := Tiny
	c.RopeStyle = "half"
	c.FusedQKV, c.FusedGateUp, c.QKNorm = true, true, true
	c.SlidingWindow, c.SlidingLayers, c.LocalRopeTheta = 5, []bool{true, false}, 1000
	c.AttnScale, c.AttnSoftcap = 0.25, 30
	c.RopeScaling = arch.RopeScaling{Type: "longrope", OriginalMax: 16, Factor: 4,
		ShortFactors: []float64{1, 1, 1, 1}, LongFactors: []float64{1, 2, 3, 4}}
	ws := map[string][]int{}
	for _, ns := range c.WeightShapes() {
		ws[ns.Name] = ns.Shape
	}
	for name, want := range map[string][]int{
		"layers.0.attention.wqkv": {(8 + 2*4) * 8, 64}, "layers.1.feed_forward.w13": {2 * 172, 64},
		"layers.0.attention.q_norm": {8}, "layers.1.attention.k_norm": {8},
		"layers.0.attention.wq": nil, "layers.0.feed_forward.w1": nil,
	} {
		if !cmp.Equal(ws[name], want, cmpopts.EquateEmpty()) {
			t.Errorf("%s: shape %v, want %v", name, ws[name], want)
		}
	}
	m, err := arch.Build("features", c, RandomWeights(c, 5))
	if err != nil {
		t.Fatal(err)
	}
	if w := m.Weight("rope.freqs"); w == nil || !w.Type.Equal(ir.T(ir.F32, ir.S(2, 4))) {
		t.Fatalf("longrope table weight: %v", w)
	}
	for _, n := range m.Func("decode").Nodes {
		sliding := strings.HasPrefix(n.Prov, "layers.0.")
		switch n.Op {
		case ir.OpAttention:
			if w := n.Attrs.Int("window"); (w == 5) != sliding || n.Attrs.Float("scale") != 0.25 || n.Attrs.Float("softcap") != 30 {
				t.Errorf("%s: attrs %v", n.Prov, n.Attrs)
			}
		case ir.OpRope:
			// The sliding layer: its own base, unscaled; the other: the
			// longrope table.
			if sliding && (len(n.Inputs) != 2 || n.Attrs.Float("theta") != 1000) ||
				!sliding && (len(n.Inputs) != 3 || n.Attrs.Int("original_max") != 16) {
				t.Errorf("%s: %d inputs, attrs %v", n.Prov, len(n.Inputs), n.Attrs)
			}
		}
	}
	// Without a window, the marked layers still take the local base (a
	// Gemma 3 whose sliding_window is null).
	nw := c
	nw.SlidingWindow, nw.RopeScaling = 0, arch.RopeScaling{}
	m, err = arch.Build("no window", nw, RandomWeights(nw, 5))
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range m.Func("decode").Nodes {
		if n.Op == ir.OpRope && (n.Attrs.Float("theta") == 1000) != strings.HasPrefix(n.Prov, "layers.0.") ||
			n.Op == ir.OpAttention && n.Attrs.Int("window") != 0 {
			t.Errorf("no window: %s: attrs %v", n.Prov, n.Attrs)
		}
	}
	for _, tc := range []struct {
		edit func(*Config)
		err  string
	}{
		{func(c *Config) { c.SlidingLayers = []bool{true} }, "1 layer flags for 2 layers"},
		{func(c *Config) { c.QKVBias = true }, "fused q/k/v projections with biases"},
		{func(c *Config) { c.RopeFreqFactors = []float64{1, 1, 1, 1} }, "exclusive"},
		{func(c *Config) { c.AttnSoftcap = math.Inf(1) }, "softcap"},
		{func(c *Config) {
			c.RopeScaling = arch.RopeScaling{Type: "dynamic", Factor: 2, OriginalMax: 1}
			c.HeadSize, c.Heads, c.KVHeads, c.MaxSeq = 1<<18, 1, 1, 4096
		}, "dynamic NTK needs a table"},
	} {
		e := c
		tc.edit(&e)
		if err := e.Validate(); err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("Validate() = %v, want %q", err, tc.err)
		}
	}
}
