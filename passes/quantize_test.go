package passes

import (
	"bytes"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/tapml/tapml/ir"
	"github.com/tapml/tapml/tensor"
	"github.com/tapml/tapml/tensor/quant"
)

// Quantize writes each re-encoded weight as tensor/quant encodes its f32
// values (ggml's own blocks; an f16 weight is decoded first) and reports
// the bytes it saves.
func TestQuantizeWeights(t *testing.T) {
	m, err := ir.Parse("q.tir", `module "q" {
  weight @a : f32[2, 64]
  weight @b : f16[3, 64]
  func @f(%x: f32[1, 64]) -> (%0, %1) {
    %0 = matmul(%x, @a) {transpose_b = true} : f32[1, 2] #1
    %1 = matmul(%x, @b) {transpose_b = true} : f32[1, 3] #2
    return %0, %1
  }
}`)
	if err != nil {
		t.Fatal(err)
	}
	attachRamps(m)
	var want [][]byte
	for _, w := range m.Weights {
		raw, _ := w.Source.Bytes()
		x, _ := tensor.FromBytes(w.Type.DType, w.Type.Shape.Sizes(), raw)
		q, err := quant.Quantize(ir.Q4_0, x.Convert(ir.F32).Float32s())
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, q)
	}
	st, err := Quantize(m, ir.Q4_0)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(QuantizeStats{Weights: 2, BytesBefore: 2*64*4 + 3*64*2, BytesAfter: 5 * 2 * 18}, st); d != "" {
		t.Errorf("stats (-want +got):\n%s", d)
	}
	for i, w := range m.Weights {
		got, _ := w.Source.Bytes()
		if w.Type.DType != ir.Q4_0 || ir.SourceDType(w.Source) != ir.Q4_0 || !bytes.Equal(got, want[i]) {
			t.Errorf("@%s: %s, source %s, bytes differ from quant.Quantize: %v", w.Name, w.Type, ir.SourceDType(w.Source), !bytes.Equal(got, want[i]))
		}
	}
	if err := ir.Verify(m); err != nil {
		t.Fatal(err)
	}
	if _, err := Quantize(m, ir.Q6_K); err == nil || !strings.Contains(err.Error(), "cannot encode q6_k") {
		t.Errorf("Q6_K: %v", err)
	}
	if _, err := ParseQuantization("q3f16_0"); err == nil || !strings.Contains(err.Error(), `unknown quantization "q3f16_0" (known: Q4_0, Q8_0, Q4_K, F16, q4f16_1, q4f32_1, q0f16, q0f32)`) {
		t.Errorf("unknown name: %v", err)
	}
}
