package passes_test

import (
	"math"
	"testing"

	"github.com/tapml/tapml/frontend/arch"
	"github.com/tapml/tapml/frontend/arch/llama"
	"github.com/tapml/tapml/frontend/gguf"
	"github.com/tapml/tapml/frontend/llama2c"
	"github.com/tapml/tapml/internal/testenv"
	"github.com/tapml/tapml/ir"
	"github.com/tapml/tapml/passes"
	"github.com/tapml/tapml/runtime"
	"github.com/tapml/tapml/runtime/cpu"
	"github.com/tapml/tapml/runtime/llm"
)

// propertyModels are the models the property tests run: generated ones and
// the shared files.
func propertyModels(t *testing.T) map[string]func() (*ir.Module, error) {
	ms := map[string]func() (*ir.Module, error){
		"tiny": func() (*ir.Module, error) {
			return arch.Build("tiny", llama.Tiny, llama.RandomWeights(llama.Tiny, 7))
		},
	}
	if !testing.Short() {
		ms["stories15M-shaped"] = func() (*ir.Module, error) {
			return arch.Build("stories15M-shaped", llama.Stories15M, llama.RandomWeights(llama.Stories15M, 7))
		}
	}
	stories := testenv.Model(t, "stories260K.bin")
	ms["stories260K"] = func() (*ir.Module, error) { return llama2c.Load(stories) }
	tinyGGUF := testenv.Model(t, "llama-2-tiny-random.gguf")
	ms["llama-2-tiny-random.gguf"] = func() (*ir.Module, error) {
		m, _, err := gguf.Load(tinyGGUF)
		return m, err
	}
	return ms
}

// run feeds a prompt through prefill and then decodeSteps tokens through
// decode, returning the logits of every call. Tokens are fixed (not
// sampled), so both runs see the same inputs whatever their outputs.
func run(t *testing.T, m *ir.Module, setup func(*runtime.Executor)) [][]float32 {
	t.Helper()
	out, err := runErr(m, setup)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func runErr(m *ir.Module, setup func(*runtime.Executor)) ([][]float32, error) {
	exec := runtime.NewExecutor(m, cpu.New())
	if setup != nil {
		setup(exec)
	}
	defer exec.Close()
	sess, err := llm.NewSession(exec)
	if err != nil {
		return nil, err
	}
	defer sess.Close()
	logits := m.Func("decode").Results[0].Type.Shape // [..., vocab]; the table may be split
	vocab := int(logits[len(logits)-1].Size)
	var out [][]float32
	feed := [][]int{{1, 5 % vocab, 9 % vocab, 13 % vocab}, {2 % vocab}, {7 % vocab}, {11 % vocab}}
	for _, toks := range feed {
		logits, err := sess.Forward(toks)
		if err != nil {
			return nil, err
		}
		out = append(out, append([]float32(nil), logits...))
	}
	return out, nil
}

// nodeCounts are the node counts before and after the default pipeline.
var nodeCounts = map[string][2]int{
	"tiny":                     {96, 64},   // 2 layers
	"stories15M-shaped":        {272, 180}, // 6 layers
	"stories260K":              {228, 151}, // 5 layers
	"llama-2-tiny-random.gguf": {52, 35},   // 1 layer
}

// rtol is the tolerance of the property: |got - want| <= rtol·(1 + |want|)
// elementwise on the logits. Passes may regroup float arithmetic (fusion
// evaluates a chain in one kernel, constant folding evaluates ahead of
// time), which can change a result by an f32 rounding (2^-24 relative) per
// op; through a few layers of matmul and normalisation that can grow to
// some tens of ulps. 1e-5 (about 80 ulps) covers that, while a real change
// of meaning (a wrong op, broadcast or dropped node) moves logits by 1e-3
// or more. Today's CPU reference evaluates a fused expression op by op with
// the same f32 kernels as the unfused graph, so the observed difference is
// 0; it is logged.
const rtol = 1e-5

func compareLogits(t *testing.T, what string, want, got [][]float32, exact bool) {
	t.Helper()
	worst := 0.0
	for step := range want {
		if len(got[step]) != len(want[step]) {
			t.Fatalf("%s: step %d: %d logits, want %d", what, step, len(got[step]), len(want[step]))
		}
		for i, w := range want[step] {
			g := got[step][i]
			d := math.Abs(float64(g) - float64(w))
			if exact && math.Float32bits(g) != math.Float32bits(w) {
				t.Fatalf("%s: step %d logit %d: %v, want exactly %v", what, step, i, g, w)
			}
			if !(d <= rtol*(1+math.Abs(float64(w)))) {
				t.Fatalf("%s: step %d logit %d: %v, want %v (diff %g > rtol %g)", what, step, i, g, w, d, rtol)
			}
			worst = max(worst, d)
		}
	}
	t.Logf("%s: %d calls, max |diff| %g", what, len(want), worst)
}

func defaultPipeline(t *testing.T) *passes.Pipeline {
	t.Helper()
	p, err := passes.Default()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Set("legalize", "supports", cpu.Supports); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestPipelinePreservesOutputs: for every model, the default pipeline does
// not change the CPU logits of prefill and three decode steps beyond rtol;
// a probed build (probe pass added) gives bit-identical logits to the
// plain build and calls OnProbe once per probe per call; a build
// partitioned half onto a second CPU device (real transfers) gives
// bit-identical logits too.
func TestPipelinePreservesOutputs(t *testing.T) {
	for name, load := range propertyModels(t) {
		t.Run(name, func(t *testing.T) {
			m, err := load()
			if err != nil {
				t.Fatal(err)
			}
			want := run(t, m, nil)

			plain := m.Clone()
			rep, err := defaultPipeline(t).Run(plain, passes.RunConfig{})
			if err != nil {
				t.Fatal(err)
			}
			before, after := rep.Steps[0].NodesBefore, rep.Steps[len(rep.Steps)-1].NodesAfter
			t.Logf("nodes %d -> %d", before, after)
			// Fusion merges silu into the gate multiply and fuse_residual
			// both residual adds into their matmuls in every layer of both
			// functions; fuse_norm folds decode's norms (2 a layer and the
			// final one) into their products and fuse_swiglu decode's gate,
			// up and silu·mul into one node a layer, fuse_qkv its q, k and v
			// into one, fuse_rope_kv its two ropes and two kv_writes into
			// one; canonicalize drops decode's last-row slice.
			if want, ok := nodeCounts[name]; ok && (before != want[0] || after != want[1]) {
				t.Errorf("nodes %d -> %d, want %d -> %d", before, after, want[0], want[1])
			}
			got := run(t, plain, nil)
			compareLogits(t, "default pipeline", want, got, false)

			probed := m.Clone()
			pp := defaultPipeline(t)
			if err := pp.Append("probe", nil, "legalize"); err != nil {
				t.Fatal(err)
			}
			if _, err := pp.Run(probed, passes.RunConfig{}); err != nil {
				t.Fatal(err)
			}
			// A probe for every output (rms_norm_qkv has three).
			outputs := 0
			for _, f := range plain.Funcs {
				for _, n := range f.Nodes {
					outputs += len(n.Outputs)
				}
			}
			if nprobes := passes.CountOps(probed)[ir.OpProbe]; nprobes != outputs {
				t.Errorf("%d probes for %d node outputs", nprobes, outputs)
			}
			calls := 0
			gotProbed := run(t, probed, func(e *runtime.Executor) {
				e.OnProbe = func(*ir.Node, *runtime.Buffer) error { calls++; return nil }
			})
			compareLogits(t, "probed vs plain build", got, gotProbed, true)
			if calls == 0 {
				t.Error("OnProbe never called")
			}

			split := plain.Clone()
			layers := "0"
			sp, err := passes.Parse("split.yaml", []byte("passes:\n  - shape_inference\n  - partition: {policy: layers, layers: \""+layers+"\"}\n"))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := sp.Run(split, passes.RunConfig{}); err != nil {
				t.Fatal(err)
			}
			if passes.CountOps(split)[ir.OpTransfer] == 0 {
				t.Fatal("partition inserted no transfers")
			}
			// One device for both placements: transfers are no-ops.
			gotSplit := run(t, split, nil)
			compareLogits(t, "partitioned (one device) vs plain build", got, gotSplit, true)
			// Two devices: transfers copy.
			gotSplit, err = runErr(split, func(e *runtime.Executor) {
				e.SetDevice(passes.Source, cpu.New())
				e.SetDevice(passes.Target, cpu.New())
			})
			if err != nil {
				t.Fatal(err)
			}
			compareLogits(t, "partitioned (two devices) vs plain build", got, gotSplit, true)
		})
	}
}
