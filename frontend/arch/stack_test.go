package arch_test

import (
	"bytes"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/tapml/tapml/frontend/arch"
	"github.com/tapml/tapml/ir"
)

// tinyStack is a Falcon-like model: one layer, a fused q/k/v projection
// of two query heads and one key/value head, parallel blocks.
func tinyStack() arch.Stack {
	return arch.Stack{
		Arch: "tiny", Config: "tiny", Topology: arch.Parallel,
		Sizes: arch.Sizes{Dim: 8, Hidden: 16, Layers: 2, Heads: 2, KVHeads: 1, HeadDim: 4, Vocab: 10, MaxSeq: 8,
			NormEps: 1e-5, RopeTheta: 1e4, Act: arch.GeluErf},
		Embedding: "emb", LayerPrefix: "layers.", FinalNorm: "norm",
		Norm: arch.Norm{Kind: arch.LayerNorm, Eps: 1e-5}, Norms: []string{"ln"},
		AttentionName: "attn", Attention: arch.Attention{
			Layout: arch.FusedQKV, QKV: "qkv", Q: "q", K: "k", V: "v", Out: "o", QKVBias: true, RopeStyle: "half"},
		MLPName: "mlp", MLP: arch.MLP{Up: "up", Down: "down"},
	}
}

func stackWeights(s arch.Stack) map[string]ir.WeightSource {
	r := rand.New(rand.NewPCG(3, 4))
	return arch.RandomWeights(s.WeightShapes(), func(arch.NamedShape) func() float64 { return arch.Symmetric(r, 0.5) })
}

func TestStackValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*arch.Stack)
		want string // "" valid
	}{
		{"valid", func(*arch.Stack) {}, ""},
		{"two norms in parallel", func(s *arch.Stack) { s.Norms = []string{"ln", "ln2"} }, ""},
		{"one norm before", func(s *arch.Stack) { s.Topology = arch.PreNorm }, "1 norms per layer"},
		{"no topology", func(s *arch.Stack) { s.Topology = 0 }, "block topology 0"},
		{"layers", func(s *arch.Stack) { s.Layers = 0 }, "must be positive"},
		{"kv heads", func(s *arch.Stack) { s.KVHeads = 3 }, "heads 2 is not a multiple of kv heads 3"},
		{"per head with fewer kv heads", func(s *arch.Stack) { s.Attention.Layout = arch.FusedPerHead }, "as many kv heads as heads"},
		{"odd rope dims", func(s *arch.Stack) { s.RopeDims = 3 }, "rope dims 3 must be even"},
		{"rope style", func(s *arch.Stack) { s.Attention.RopeStyle = "neox" }, `rope style "neox"`},
		{"theta", func(s *arch.Stack) { s.RopeTheta = 0 }, "rope theta 0"},
		{"scale", func(s *arch.Stack) { s.Attention.Scale = -1 }, "attention scale -1"},
		{"activation", func(s *arch.Stack) { s.Act = 0 }, "activation 0"},
		{"norm", func(s *arch.Stack) { s.Norm.Eps = 0 }, "norm epsilon 0"},
		{"q/k norm", func(s *arch.Stack) { s.Attention.QKNorm = arch.Norm{Kind: 9, Eps: 1} }, "norm kind 9"},
		{"logit scale", func(s *arch.Stack) { s.LogitScale = 1 / zero }, "must be finite"},
	} {
		s := tinyStack()
		tc.edit(&s)
		err := s.Validate()
		if (err == nil) != (tc.want == "") || err != nil && !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Validate() = %v, want %q", tc.name, err, tc.want)
		}
	}
}

var zero = 0.0

// TestFusedQKVSplitAtLoad: a FusedQKV projection becomes the weights q, k
// and v (weights and biases), views of its rows with its bytes, and the
// fused weight itself is not in the module.
func TestFusedQKVSplitAtLoad(t *testing.T) {
	s := tinyStack()
	ws := stackWeights(s)
	m, err := arch.Build("tiny", s, ws)
	if err != nil {
		t.Fatal(err)
	}
	fused, _ := ws["layers.1.attn.qkv.weight"].Bytes()
	row := 8 * 4 // 8 inputs of 4 bytes
	got := map[string]string{}
	for _, w := range m.Weights {
		if strings.HasPrefix(w.Name, "layers.1.attn.") {
			got[w.Name] = w.Type.String()
		}
	}
	want := map[string]string{
		"layers.1.attn.q.weight": "f32[8, 8]", "layers.1.attn.k.weight": "f32[4, 8]", "layers.1.attn.v.weight": "f32[4, 8]",
		"layers.1.attn.q.bias": "f32[8]", "layers.1.attn.k.bias": "f32[4]", "layers.1.attn.v.bias": "f32[4]",
		"layers.1.attn.o.weight": "f32[8, 8]",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("weights (-want +got):\n%s", diff)
	}
	for name, rows := range map[string][2]int{"q": {0, 8}, "k": {8, 12}, "v": {12, 16}} {
		b, err := m.Weight("layers.1.attn." + name + ".weight").Source.Bytes()
		if err != nil || !bytes.Equal(b, fused[rows[0]*row:rows[1]*row]) {
			t.Errorf("%s: %d bytes (%v), want rows %d..%d of the fused weight", name, len(b), err, rows[0], rows[1]-1)
		}
		if len(b) > 0 && &b[0] != &fused[rows[0]*row] {
			t.Errorf("%s is a copy, not a view of the fused weight", name)
		}
	}
}

// TestParallelBlockNormsOnce: a parallel block with one norm normalises
// once; with two, each part reads its own.
func TestParallelBlockNormsOnce(t *testing.T) {
	for _, norms := range [][]string{{"ln"}, {"ln", "ln2"}} {
		s := tinyStack()
		s.Norms = norms
		m, err := arch.Build("tiny", s, stackWeights(s))
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, node := range m.Func("decode").Nodes {
			if node.Op == ir.OpLayerNorm {
				n++
			}
		}
		if want := s.Layers*len(norms) + 1; n != want {
			t.Errorf("%d norms per layer: %d layer_norm nodes, want %d", len(norms), n, want)
		}
	}
}

func TestPartErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		part arch.Part
		want string
	}{
		{"past the end", arch.Part{Name: "x", Of: "w.0", Lo: 2, Hi: 9}, `part "x": rows 2..8 of "w.0" [4 4]`},
		{"empty", arch.Part{Name: "x", Of: "w.0", Lo: 2, Hi: 2}, `part "x": rows 2..1`},
		{"of nothing", arch.Part{Name: "x", Of: "nope", Lo: 0, Hi: 1}, `of "nope" []`},
	} {
		c := toy{dim: 4, vocab: 6, layers: 1, parts: []arch.Part{tc.part}}
		_, err := arch.Build("toy", c, toyWeights(c))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %q", tc.name, err, tc.want)
		}
	}
}
