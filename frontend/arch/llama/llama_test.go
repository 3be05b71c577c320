package llama

import (
	"github.com/tapml/tapml/frontend/arch"
	"strings"
	"testing"

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
