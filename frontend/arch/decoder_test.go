package arch_test

import (
	"errors"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/tapml/tapml/frontend/arch"
	"github.com/tapml/tapml/ir"
)

// toy is a family written for these tests: no attention, and a recurrent
// state on odd layers only (a running sum of the last position), so that
// Build is seen to carry any per-layer state, not only KV caches.
type toy struct {
	dim, vocab, layers int
	invalid            bool
	extraState         bool // the block returns one state tensor too many
	strayWeight        bool // the block reads a weight the config does not list
	stateless          bool // State is nil
	parts              []arch.Part
}

func (c toy) Validate() error {
	if c.invalid {
		return errors.New("toy: invalid")
	}
	return nil
}

func (c toy) WeightShapes() []arch.NamedShape {
	ws := []arch.NamedShape{arch.Named("emb", c.vocab, c.dim)}
	for l := 0; l < c.layers; l++ {
		ws = append(ws, arch.Named("w."+strconv.Itoa(l), c.dim, c.dim))
	}
	return ws
}

func (c toy) Decoder() arch.Decoder {
	sum := ir.T(ir.F32, ir.S(1, int64(c.dim)))
	d := arch.Decoder{
		Arch: "toy", Config: "dim=" + strconv.Itoa(c.dim), Layers: c.layers, Parts: c.parts,
		State: func(l int) []arch.State {
			if l%2 == 1 {
				return []arch.State{{Name: "sum", Type: sum}}
			}
			return nil
		},
		Embed: func(f *arch.Forward) *ir.Value { return f.At("emb").Gather(f.W("emb"), f.Tokens) },
		Block: func(f *arch.Forward, l int, x *ir.Value, state []*ir.Value) (*ir.Value, []*ir.Value) {
			p := "w." + strconv.Itoa(l)
			w := f.W(p)
			if c.strayWeight {
				w = f.W("nope")
			}
			y := f.At(p).Linear(x, w)
			x = f.At(p+".residual").Add(x, y)
			if len(state) > 0 {
				last := f.At(p+".last").Slice(x, 0, -1, math.MaxInt32)
				state = []*ir.Value{f.At(p+".sum").Add(state[0], last)}
			}
			if c.extraState {
				state = append(state, x)
			}
			return x, state
		},
		Norm:   func(f *arch.Forward, x *ir.Value) *ir.Value { return x },
		Logits: func(f *arch.Forward, x *ir.Value) *ir.Value { return f.At("logits").Linear(x, f.W("emb")) },
	}
	if c.stateless {
		d.State = nil
	}
	return d
}

func toyWeights(c toy) map[string]ir.WeightSource {
	r := rand.New(rand.NewPCG(1, 2))
	return arch.RandomWeights(c.WeightShapes(), func(arch.NamedShape) func() float64 { return arch.Symmetric(r, 1) })
}

// TestRecurrentState: the state of each layer is whatever the family
// declares (none on even layers here), passed in and returned in layer order.
func TestRecurrentState(t *testing.T) {
	c := toy{dim: 4, vocab: 6, layers: 4}
	m, err := arch.Build("toy", c, toyWeights(c))
	if err != nil {
		t.Fatal(err)
	}
	if m.Meta["arch"] != "toy" || m.Meta["config"] != "dim=4" {
		t.Errorf("meta %v", m.Meta)
	}
	for _, fn := range []struct{ name, seq string }{{"prefill", "seq"}, {"decode", "1"}} {
		f := m.Func(fn.name)
		var params, results []string
		for _, p := range f.Params {
			params = append(params, p.Name+": "+p.Type.String())
		}
		for _, r := range f.Results {
			results = append(results, r.Type.String()+" "+r.Def.Prov)
		}
		want := []string{"tokens: i32[" + fn.seq + "]", "pos: i32[]", "sum.1: f32[1, 4]", "sum.3: f32[1, 4]"}
		if diff := cmp.Diff(want, params); diff != "" {
			t.Errorf("%s params (-want +got):\n%s", fn.name, diff)
		}
		want = []string{"f32[1, 6] logits", "f32[1, 4] w.1.sum", "f32[1, 4] w.3.sum"}
		if diff := cmp.Diff(want, results); diff != "" {
			t.Errorf("%s results (-want +got):\n%s", fn.name, diff)
		}
	}
}

// TestStateless: a family whose layers carry nothing has functions of
// tokens and pos to logits only.
func TestStateless(t *testing.T) {
	c := toy{dim: 4, vocab: 6, layers: 1, stateless: true}
	m, err := arch.Build("toy", c, toyWeights(c))
	if err != nil {
		t.Fatal(err)
	}
	if f := m.Func("decode"); len(f.Params) != 2 || len(f.Results) != 1 {
		t.Errorf("decode has %d params and %d results, want 2 and 1", len(f.Params), len(f.Results))
	}
}

func TestBuildErrors(t *testing.T) {
	good := toy{dim: 4, vocab: 6, layers: 2}
	for _, tc := range []struct {
		name    string
		c       toy
		weights map[string]ir.WeightSource
		want    string
	}{
		{"invalid", toy{dim: 4, vocab: 6, layers: 2, invalid: true}, toyWeights(good), "toy: invalid"},
		{"missing weight", good, map[string]ir.WeightSource{}, `missing weight "emb"`},
		{"extra state", toy{dim: 4, vocab: 6, layers: 2, extraState: true}, toyWeights(good), "block 0 returned 1 state tensors for its 0"},
		{"stray weight", toy{dim: 4, vocab: 6, layers: 2, strayWeight: true}, toyWeights(good), "at w.0: matmul input 1 is nil"},
	} {
		_, err := arch.Build("toy", tc.c, tc.weights)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %q", tc.name, err, tc.want)
		}
	}
}

// TestKVCache: a layer's attention state is its k and v caches.
func TestKVCache(t *testing.T) {
	var got []string
	for _, s := range arch.KVCache(16, 2, 8) {
		got = append(got, s.Name+" "+s.Type.String())
	}
	if diff := cmp.Diff([]string{"k_cache f32[16, 2, 8]", "v_cache f32[16, 2, 8]"}, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}
