package llama

import (
	"math"
	"testing"

	"github.com/tapml/tapml/frontend/arch"
	"github.com/tapml/tapml/internal/testenv/llmtest"
	"github.com/tapml/tapml/ir"
	"github.com/tapml/tapml/tensor"
	"github.com/tapml/tapml/tensor/quant"
)

// storedTiny returns Tiny's random weights with some kept in storage
// dtypes (an embedding of dtype emb that the tied classifier reads too, a q4_0 and
// a bf16 projection, f16 feed-forward and norm weights), and the same
// weights decoded to f32.
func storedTiny(t *testing.T, emb ir.DType) (stored, decoded map[string]ir.WeightSource) {
	t.Helper()
	dtypes := map[string]ir.DType{
		"tok_embeddings": emb, "layers.0.attention.wq": ir.Q4_0, "layers.1.attention.wk": ir.BF16,
		"layers.0.feed_forward.w1": ir.F16, "layers.1.feed_forward.w2": ir.F16, "layers.0.ffn_norm": ir.F16, "norm": ir.BF16,
	}
	stored, decoded = map[string]ir.WeightSource{}, map[string]ir.WeightSource{}
	for name, src := range RandomWeights(Tiny, 5) {
		stored[name], decoded[name] = src, src
		dt, ok := dtypes[name]
		if !ok {
			continue
		}
		raw, _ := src.Bytes()
		f, err := tensor.FromBytes(ir.F32, []int{len(raw) / 4}, raw)
		if err != nil {
			t.Fatal(err)
		}
		var data []byte
		if dt.IsBlock() {
			if data, err = quant.Quantize(dt, f.Float32s()); err != nil {
				t.Fatal(err)
			}
		} else {
			data = f.Convert(dt).Data
		}
		st := ir.TypedBytes{Type: dt, Data: data}
		back, _ := tensor.FromBytes(dt, []int{len(raw) / 4}, data)
		stored[name], decoded[name] = st, ir.BytesSource(back.Convert(ir.F32).Data)
	}
	return stored, decoded
}

// TestStoredWeights: Build keeps each weight in its source's dtype; the
// matmuls and the gather read them as they are, the norms through a
// dequantize node each, an f16 table's rows are cast back to f32; and the
// CPU reference computes bit for bit the logits of the model whose weights
// are the decoded f32 tensors.
func TestStoredWeights(t *testing.T) {
	for _, emb := range []ir.DType{ir.Q8_0, ir.F16} {
		t.Run(emb.String(), func(t *testing.T) { testStoredWeights(t, emb) })
	}
}

func testStoredWeights(t *testing.T, emb ir.DType) {
	stored, decoded := storedTiny(t, emb)
	m, err := arch.Build("stored", Tiny, stored)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := arch.Build("decoded", Tiny, decoded)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := m.Weight("tok_embeddings").Type, ir.T(emb, ir.S(259, 64)); !got.Equal(want) {
		t.Errorf("tok_embeddings is %s, want %s", got, want)
	}
	dequantized := map[string]bool{}
	for _, n := range m.Func("decode").Nodes {
		in := make([]ir.Type, len(n.Inputs))
		for i, v := range n.Inputs {
			in[i] = v.Type
		}
		for i, v := range n.Inputs {
			if !v.IsWeight() || v.Type.DType == ir.F32 {
				continue
			}
			if n.Op == ir.OpDequantize {
				dequantized[v.Name] = true
			} else if !n.Def().Storage.Of(ir.Call{In: in, Attrs: n.Attrs}).Accepts(i, v.Type.DType) {
				t.Errorf("%s reads %s without dequantizing it", n, v.Ref())
			}
		}
	}
	if len(dequantized) != 2 || !dequantized["layers.0.ffn_norm"] || !dequantized["norm"] {
		t.Errorf("dequantized %v, want the two stored norm weights", dequantized)
	}
	if err := ir.Verify(m); err != nil {
		t.Fatal(err)
	}
	logits := func(m *ir.Module) []float32 {
		r := llmtest.NewRunner(t, m)
		r.Forward(t, []int{1, 72, 101, 108})
		return r.Forward(t, []int{111})
	}
	got, want := logits(m), logits(ref)
	for i := range want {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			t.Fatalf("logit %d: %v with stored weights, %v with decoded ones", i, got[i], want[i])
		}
	}
}
