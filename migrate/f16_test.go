package migrate

import (
	"bytes"
	"encoding/binary"
	"io"
	"math"
	"strings"
	"testing"

	"github.com/tapml/tapml/frontend/arch"
	"github.com/tapml/tapml/frontend/arch/llama"
	"github.com/tapml/tapml/frontend/tokenizer/sentencepiece"
	"github.com/tapml/tapml/ir"
	"github.com/tapml/tapml/runtime"
	"github.com/tapml/tapml/runtime/target"
)

// overflowModel is the built-in tiny LLaMA whose first layer's attention
// norm scales its rows by normScale, so that its q and k values are in the
// hundreds (well inside f16) while their dot products, the attention
// scores before the scale, pass 65504: an f16 accumulator overflows, an
// f32 one does not. Nothing is injected: the weights and the accumulation
// dtype alone make the bug.
func overflowModel(t *testing.T) *ir.Module {
	t.Helper()
	const normScale = 600
	w := llama.RandomWeights(llama.Tiny, 7)
	norm := make([]byte, 4*llama.Tiny.Dim)
	for i := range llama.Tiny.Dim {
		binary.LittleEndian.PutUint32(norm[4*i:], math.Float32bits(normScale))
	}
	w["layers.0.attention_norm"] = ir.BytesSource(norm)
	m, err := arch.Build("f16-overflow", llama.Tiny, w)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// migrateF16 migrates the overflow model to the vulkan target (lavapipe
// here) under f16 compute with accumulators of dtype acc.
func migrateF16(t *testing.T, acc ir.DType) *Report {
	t.Helper()
	p := runtime.Precision{Compute: ir.F16, Accumulate: acc}
	dev, got, err := target.OpenPrecision("vulkan", "", p, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	if got != p {
		t.Fatalf("vulkan opened at %s, not %s: lavapipe has shaderFloat16", got, p)
	}
	d, err := New(overflowModel(t), sentencepiece.NewBytes(), dev, Options{Prompt: "The cat", Steps: 10, Target: "vulkan", Compute: ir.F16})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	rep, err := d.Run(Incremental)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// TestF16AccumulationOverflow: with attention accumulating in f16 the
// overflow model's scores overflow on the vulkan target; migrate localises
// the first layer's attention and its report says which value left f16's
// range (the scores, beyond 65504, while inputs and the reference outputs
// stay inside) and how many outputs came out NaN or infinite. With f32
// accumulation (the default) the same model migrates with identical
// tokens.
func TestF16AccumulationOverflow(t *testing.T) {
	rep := migrateF16(t, ir.F16)
	if rep.Outcome != OutcomeLocalised || len(rep.Culprits) == 0 {
		t.Fatalf("f16 accumulation: %s", rep.Verdict())
	}
	c := rep.Culprits[0]
	if c.Op != "attention" || c.Prov != "layers.0.attention" {
		t.Errorf("culprit %s %s, want the attention of layers.0: %s", c.Op, c.Prov, rep.Verdict())
	}
	r := c.Range
	if r.ScoreMax <= F16Max || r.InputMax > F16Max || r.OutputMax > F16Max || r.TargetNonFinite == 0 {
		t.Errorf("range %+v: want scores beyond %d, inputs and reference outputs inside, NaN or infinite outputs on the target", r, F16Max)
	}
	var txt bytes.Buffer
	if err := rep.WriteText(&txt); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(txt.String(), "attention scores q·k (accumulated before the scale) max |x|") || !strings.Contains(txt.String(), "(LEFT f16's 65504)") {
		t.Errorf("the text report does not say which value left f16's range:\n%s", txt.String())
	}
	t.Logf("culprit %s: f16 range: %s", c.Prov, r)

	if rep := migrateF16(t, ir.F32); rep.Outcome != OutcomeIdentical {
		t.Errorf("f32 accumulation: %s", rep.Verdict())
	}
}
