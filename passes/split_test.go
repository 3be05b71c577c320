package passes_test

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"unsafe"

	"github.com/google/go-cmp/cmp"
	"github.com/tapml/tapml/frontend/arch"
	"github.com/tapml/tapml/frontend/arch/llama"
	"github.com/tapml/tapml/ir"
	"github.com/tapml/tapml/passes"
	"github.com/tapml/tapml/runtime"
	"github.com/tapml/tapml/runtime/cpu"
	"github.com/tapml/tapml/tensor"
)

// Splitting weights over a byte limit leaves every logit of the CPU
// reference bit for bit as it was: a shard's gather copies the same row,
// and a shard's matmul computes each output element with the same f32 dot
// product over K (the split is along N, never K). Models: the tiny LLaMA
// (tied classifier, whose f32 FFN matrices split too), the same quantized
// to Q4_0 and Q8_0 (shards cut on whole rows of blocks), the same lowered
// by the default pipeline (a build folder split again for a smaller
// device: fuse_norm's rms_norm_matmul and fuse_residual's matmul with an
// addend split too), and the shared model files.
func TestSplitWeightsKeepsLogits(t *testing.T) {
	models := propertyModels(t)
	models["tiny-lowered"] = func() (*ir.Module, error) {
		m, err := arch.Build("tiny", llama.Tiny, llama.RandomWeights(llama.Tiny, 7))
		if err == nil {
			_, err = defaultPipeline(t).Run(m, passes.RunConfig{})
		}
		return m, err
	}
	for _, q := range []ir.DType{ir.Q4_0, ir.Q8_0} {
		models["tiny-"+q.String()] = func() (*ir.Module, error) {
			m, err := arch.Build("tiny", llama.Tiny, llama.RandomWeights(llama.Tiny, 7))
			if err == nil {
				_, err = passes.Quantize(m, q)
			}
			return m, err
		}
	}
	for name, load := range models {
		t.Run(name, func(t *testing.T) {
			m, err := load()
			if err != nil {
				t.Fatal(err)
			}
			want := run(t, m, nil)
			var largest int64
			for _, w := range m.Weights {
				largest = max(largest, w.Type.Bytes())
			}
			before := weightBytes(m)
			limit := largest / 5 // the largest weight becomes 5 or 6 shards
			st, err := passes.SplitWeights(m, limit)
			if err != nil {
				t.Fatal(err)
			}
			if st.Weights == 0 || st.Shards < 5 {
				t.Fatalf("split %+v, want the largest weight in 5 shards or more", st)
			}
			if err := ir.Verify(m); err != nil {
				t.Fatal(err)
			}
			for _, w := range m.Weights {
				if w.Type.Bytes() > limit {
					t.Errorf("@%s is %d bytes after the split, over the limit %d", w.Name, w.Type.Bytes(), limit)
				}
			}
			if after := weightBytes(m); after != before {
				t.Errorf("weights hold %d bytes after the split, %d before", after, before)
			}
			got := run(t, m, nil)
			if d := cmp.Diff(want, got); d != "" {
				t.Errorf("logits changed by the split (-want +got):\n%.2000s", d)
			}
			t.Logf("%+v, limit %d bytes", st, limit)
		})
	}
}

func weightBytes(m *ir.Module) int64 {
	var n int64
	for _, w := range m.Weights {
		n += w.Type.Bytes()
	}
	return n
}

// A tied table read by gather and a transposed matmul, cut into more
// shards than one concat takes (a tree of concats), with ids at every
// shard's edges; shards are views of the weight's bytes, not copies.
func TestSplitWeightsShards(t *testing.T) {
	m := mustParse(t, `module "s" {
  weight @e : f32[20, 4]
  func @f(%ids: i32[6], %x: f32[2, 4]) -> (%0, %1) {
    %0 = gather(@e, %ids) : f32[6, 4] #1 loc("embed")
    %1 = matmul(%x, @e) {transpose_b = true} : f32[2, 20] #2 loc("output")
    return %0, %1
  }
}`)
	table := make([]float32, 80)
	for i := range table {
		table[i] = float32(i)
	}
	raw := unsafe.Slice((*byte)(unsafe.Pointer(&table[0])), 4*len(table))
	m.Weights[0].Source = ir.BytesSource(raw)
	st, err := passes.SplitWeights(m, 32) // 2 rows of 16 bytes per shard: 10 shards
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(passes.SplitStats{Weights: 1, Shards: 10, Readers: 2}, st); d != "" {
		t.Errorf("stats (-want +got):\n%s", d)
	}
	for i, w := range m.Weights {
		b, err := w.Source.Bytes()
		if err != nil {
			t.Fatal(err)
		}
		if len(b) != 32 || &b[0] != &raw[32*i] {
			t.Errorf("shard @%s: %d bytes at %p, want a view of 32 bytes at %p", w.Name, len(b), &b[0], &raw[32*i])
		}
	}
	f := m.Func("f")
	concats := 0
	for _, n := range f.Nodes {
		if n.Prov != "embed" && n.Prov != "output" {
			t.Errorf("node %s lost the provenance of the node it replaces", n)
		}
		if n.Op == ir.OpConcat {
			concats++
			if len(n.Inputs) > 7 {
				t.Errorf("%s joins %d inputs, more than 7", n, len(n.Inputs))
			}
		}
	}
	if concats != 3 || f.Results[0].Def.Op != ir.OpWhere || f.Results[1].Def.Op != ir.OpConcat {
		t.Errorf("%d concats, results defined by %s and %s; want 3 concats, where and concat", concats, f.Results[0].Def, f.Results[1].Def)
	}
	ids := []int32{0, 1, 2, 9, 10, 19}
	x := []float32{1, 0, 0, 0, 0, 0, 0, 1}
	got := callF32(t, m, ids, x)
	var wantG, wantM []float32
	for _, id := range ids {
		wantG = append(wantG, table[4*id:4*id+4]...)
	}
	for r := 0; r < 2; r++ {
		for n := 0; n < 20; n++ {
			wantM = append(wantM, table[4*n]*x[4*r]+table[4*n+3]*x[4*r+3])
		}
	}
	if d := cmp.Diff([][]float32{wantG, wantM}, got); d != "" {
		t.Errorf("outputs (-want +got):\n%s", d)
	}
	if _, err := callErr(m, []int32{20, 0, 0, 0, 0, 0}, x); err == nil || !strings.Contains(err.Error(), "out of range") {
		t.Errorf("id 20 of a 20-row table: %v, want gather's out-of-range error", err)
	}
	if _, err := callErr(m, []int32{-1, 0, 0, 0, 0, 0}, x); err == nil || !strings.Contains(err.Error(), "out of range") {
		t.Errorf("id -1: %v, want gather's out-of-range error", err)
	}
}

func TestSplitWeightsErrors(t *testing.T) {
	for _, tc := range []struct {
		src   string
		limit int64
		want  string
	}{
		{`module "e" {
  weight @w : f32[8, 4]
  func @f(%x: f32[4, 8]) -> (%0) {
    %0 = matmul(%x, @w) : f32[4, 4] #1
    return %0
  }
}`, 64, "node #1 matmul %0 reads it as input 1, which split_weights cannot shard"},
		{`module "e" {
  weight @w : f32[2, 64]
  func @f(%x: f32[1, 64]) -> (%0) {
    %0 = matmul(%x, @w) {transpose_b = true} : f32[1, 2] #1
    return %0
  }
}`, 128, "one row is 256 bytes, more than the device's buffer limit of 128 bytes"},
	} {
		m, err := ir.Parse("e.tir", tc.src)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := passes.SplitWeights(m, tc.limit); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v, want %q", err, tc.want)
		}
	}
}

// callErr runs @f of m on the CPU reference.
func callErr(m *ir.Module, ids []int32, x []float32) ([][]float32, error) {
	dev := cpu.New()
	exec := runtime.NewExecutor(m, dev)
	defer exec.Close()
	a, err := dev.Upload(tensor.FromInt32([]int{len(ids)}, ids))
	if err != nil {
		return nil, err
	}
	b, err := dev.Upload(tensor.FromFloat32([]int{2, 4}, x))
	if err != nil {
		return nil, err
	}
	res, err := exec.Call("f", a, b)
	if err != nil {
		return nil, err
	}
	var out [][]float32
	for _, r := range res {
		t, err := runtime.Download(r)
		if err != nil {
			return nil, err
		}
		out = append(out, t.Float32s())
	}
	return out, nil
}

func callF32(t *testing.T, m *ir.Module, ids []int32, x []float32) [][]float32 {
	t.Helper()
	out, err := callErr(m, ids, x)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// rangeOnly is a source that serves byte ranges and refuses whole reads.
type rangeOnly struct{ data []byte }

func (r rangeOnly) Bytes() ([]byte, error) { return nil, fmt.Errorf("read whole") }
func (r rangeOnly) BytesAt(off, n int64) ([]byte, error) {
	return append([]byte(nil), r.data[off:off+n]...), nil
}

// A shard of a weight whose source reads ranges (a build folder's file)
// reads its own bytes only.
func TestSplitWeightsReadsRanges(t *testing.T) {
	m := mustParse(t, `module "r" {
  weight @e : f32[4, 2]
  func @f(%ids: i32[1]) -> (%0) {
    %0 = gather(@e, %ids) : f32[1, 2] #1
    return %0
  }
}`)
	data := make([]byte, 32)
	for i := range data {
		data[i] = byte(i)
	}
	m.Weights[0].Source = rangeOnly{data}
	if _, err := passes.SplitWeights(m, 16); err != nil {
		t.Fatal(err)
	}
	for i, w := range m.Weights {
		b, err := w.Source.Bytes()
		if err != nil || !bytes.Equal(b, data[16*i:16*i+16]) {
			t.Errorf("shard @%s: %v, %v; want bytes %d..%d", w.Name, b, err, 16*i, 16*i+15)
		}
	}
}

func mustParse(t *testing.T, src string) *ir.Module {
	t.Helper()
	m, err := ir.Parse(t.Name()+".tir", src)
	if err != nil {
		t.Fatal(err)
	}
	return m
}
