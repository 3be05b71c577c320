package passes

import (
	"fmt"
	"slices"
	"strings"

	"github.com/tapml/tapml/ir"
	"github.com/tapml/tapml/tensor"
	"github.com/tapml/tapml/tensor/quant"
)

// Quantization is one choice of `--quantize` (and the quantize pass): the
// storage dtype matrices get. MLC's names are aliases of the nearest ggml
// format; they name a compute precision too, which this choice does not
// set (Compute records it; compute is f32 unless another option says
// otherwise).
type Quantization struct {
	Name    string
	Weights ir.DType // the matrices' storage dtype; ir.Invalid keeps the model's
	Compute string   // the compute precision an alias names ("" for ggml's names)
	Doc     string
}

// Quantizations are the choices, ggml's formats first.
var Quantizations = []Quantization{
	{Name: "Q4_0", Weights: ir.Q4_0, Doc: "ggml Q4_0: 4-bit, an f16 scale per 32 (4.5 bits per weight)"},
	{Name: "Q8_0", Weights: ir.Q8_0, Doc: "ggml Q8_0: 8-bit, an f16 scale per 32 (8.5 bits per weight)"},
	{Name: "Q4_K", Weights: ir.Q4_K, Doc: "ggml Q4_K: 4-bit in super-blocks of 256 with 6-bit scales and minimums per 32 (4.5 bits per weight); dims must be multiples of 256"},
	{Name: "F16", Weights: ir.F16, Doc: "f16 matrices (rounded to nearest even)"},
	{Name: "q4f16_1", Weights: ir.Q4_0, Compute: "f16",
		Doc: "MLC's 4-bit weights in symmetric groups of 32 with an f16 scale: the layout of ggml's Q4_0 (an f16 scale per 32, levels -8..7), its nearest format"},
	{Name: "q4f32_1", Weights: ir.Q4_0, Compute: "f32",
		Doc: "MLC's q4f16_1 with an f32 scale: ggml has no 4-bit format with f32 scales, Q4_0 (f16 scales) is the nearest"},
	{Name: "q0f16", Weights: ir.F16, Compute: "f16", Doc: "MLC's unquantized f16 weights"},
	{Name: "q0f32", Weights: ir.Invalid, Compute: "f32", Doc: "MLC's unquantized f32 weights: the model's own (f16 or bf16 ones compute exactly as their f32 values)"},
}

// QuantizationNames lists the choices for messages.
func QuantizationNames() string { return strings.Join(quantizationEnum(), ", ") }

// ParseQuantization returns the choice named s.
func ParseQuantization(s string) (Quantization, error) {
	for _, q := range Quantizations {
		if q.Name == s {
			return q, nil
		}
	}
	return Quantization{}, fmt.Errorf("unknown quantization %q (known: %s)", s, QuantizationNames())
}

// QuantizeStats says what Quantize changed.
type QuantizeStats struct {
	Weights     int   // weights re-encoded
	Kept        int   // matrices left as they were: a reader that cannot take the dtype, or rows not whole blocks
	BytesBefore int64 // of the re-encoded weights
	BytesAfter  int64
}

// Quantize re-encodes in dtype dt (a block format tensor/quant encodes, or
// f16) every 2-D weight in f32, f16 or bf16 that only op inputs reading dt
// read (the registry's Storage fact: matmul's transposed weights, gather's
// tables) and whose rows are whole blocks, as ggml's quantize_row_*_ref
// does from the weight's f32 values. Norm scales, biases and weights some
// other op reads keep their dtype.
func Quantize(m *ir.Module, dt ir.DType) (QuantizeStats, error) {
	var st QuantizeStats
	if dt != ir.F16 && !slices.Contains(quant.Encodes, dt) {
		return st, fmt.Errorf("quantize: cannot encode %s", dt)
	}
	readers := map[*ir.Weight][]stored{}
	for _, f := range m.Funcs {
		for _, n := range f.Nodes {
			for i, v := range n.Inputs {
				if v.IsWeight() {
					readers[v.Weight] = append(readers[v.Weight], stored{n, i})
				}
			}
		}
	}
	for _, w := range m.Weights {
		from := w.Type.DType
		if w.Type.Shape.Rank() != 2 || from == dt || from != ir.F32 && from != ir.F16 && from != ir.BF16 || len(readers[w]) == 0 {
			continue
		}
		to := ir.T(dt, w.Type.Shape)
		if to.Validate() != nil || !allRead(readers[w], to) {
			st.Kept++
			continue
		}
		if w.Source == nil {
			return st, fmt.Errorf("quantize: weight @%s has no data attached", w.Name)
		}
		raw, err := w.Source.Bytes()
		if err != nil {
			return st, fmt.Errorf("quantize: weight @%s: %w", w.Name, err)
		}
		t, err := tensor.FromBytes(from, w.Type.Shape.Sizes(), raw)
		if err != nil {
			return st, fmt.Errorf("quantize: weight @%s: %w", w.Name, err)
		}
		f32 := t.Convert(ir.F32)
		var data []byte
		if dt == ir.F16 {
			data = f32.Convert(ir.F16).Data
		} else if data, err = quant.Quantize(dt, f32.Float32s()); err != nil {
			return st, fmt.Errorf("quantize: weight @%s: %w", w.Name, err)
		}
		st.Weights++
		st.BytesBefore += int64(len(raw))
		st.BytesAfter += int64(len(data))
		w.Type = to
		w.Value().Type = to
		w.Source = ir.TypedBytes{Type: dt, Data: data}
	}
	return st, nil
}

// stored is one use of a weight: input i of node n.
type stored struct {
	n *ir.Node
	i int
}

// allRead reports whether every use reads a weight of type t as stored
// (dequantize nodes do not count: they read a weight no kernel reads
// stored, a norm's scale).
func allRead(uses []stored, t ir.Type) bool {
	for _, u := range uses {
		if u.n.Op == ir.OpDequantize {
			return false
		}
		in := make([]ir.Type, len(u.n.Inputs))
		for j, v := range u.n.Inputs {
			in[j] = v.Type
		}
		in[u.i] = t
		if !u.n.Def().Storage.Of(ir.Call{In: in, Attrs: u.n.Attrs}).Accepts(u.i, t.DType) {
			return false
		}
	}
	return true
}

// quantizePass is the quantize pass: Quantize with the type option.
func quantizePass(m *ir.Module, o Options) error {
	q, err := ParseQuantization(o.String("type"))
	if err != nil {
		return err
	}
	if q.Weights == ir.Invalid {
		return nil
	}
	_, err = Quantize(m, q.Weights)
	return err
}

func quantizationEnum() []string {
	names := make([]string, len(Quantizations))
	for i, q := range Quantizations {
		names[i] = q.Name
	}
	return names
}
