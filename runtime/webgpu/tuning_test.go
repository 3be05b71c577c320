package webgpu

import (
	"fmt"
	"strings"
	"testing"

	"github.com/tapml/tapml/codegen/wgsl"
	"github.com/tapml/tapml/ir"
	"github.com/tapml/tapml/runtime"
)

// TestMatmulTunings runs matmul cases that reach the vec4 tiled kernel and
// the unrolled GEMV under every candidate tuning (wgsl.MatmulTiles, as
// bench/gpu measures them) against the CPU reference, on a second device.
func TestMatmulTunings(t *testing.T) {
	if testing.Short() {
		t.Skip("second device")
	}
	d, err := Open(Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	type mm struct {
		name string
		tb   bool
		a, b []int
		bdt  ir.DType // b's storage dtype; zero for f32
	}
	cases := []mm{
		{"odd M", true, []int{67, 44}, []int{36, 44}, 0},
		{"K not a multiple of BK", true, []int{40, 20}, []int{8, 20}, 0},
		{"not transposed", false, []int{130, 128}, []int{128, 260}, 0},
		{"edges not transposed", false, []int{33, 52}, []int{52, 132}, 0},
		{"two tiles", true, []int{129, 64}, []int{200, 64}, 0},
		{"batched broadcast", false, []int{3, 2, 33, 40}, []int{2, 40, 20}, 0},
		{"batched transposed", true, []int{2, 24, 16}, []int{2, 12, 16}, 0},
		{"small M", true, []int{9, 64}, []int{72, 64}, 0},
		{"odd N falls back", true, []int{20, 16}, []int{13, 16}, 0},
		{"gemv", true, []int{1, 288}, []int{768, 288}, 0},
		{"gemv long", true, []int{1, 2048}, []int{40, 2048}, 0},
		{"gemv odd K", true, []int{1, 37}, []int{19, 37}, 0},
		{"stored q4_0", true, []int{40, 64}, []int{24, 64}, ir.Q4_0},
		{"stored f16", true, []int{33, 72}, []int{12, 72}, ir.F16},
		{"stored q8_0 batched odd M", true, []int{2, 19, 96}, []int{20, 96}, ir.Q8_0},
		// GEMVs over block formats: under treeBatch below their rows are
		// taken several at once, the kernels naga must accept.
		{"gemv q4_0", true, []int{1, 128}, []int{40, 128}, ir.Q4_0},
		{"gemv q8_0", true, []int{1, 128}, []int{24, 128}, ir.Q8_0},
	}
	treeBatch := wgsl.Tuning{GEMVTreeBatch: 4, GEMVBatchMinGroups: 1, GEMVBatchBytes: 72}
	var tunings []wgsl.Tuning
	for _, tile := range append([]string{"scalar"}, wgsl.MatmulTiles...) {
		tunings = append(tunings, wgsl.Tuning{Matmul: tile})
	}
	tunings = append(tunings, wgsl.DiscreteTuning(),
		wgsl.Tuning{GEMVUnroll: 2}, wgsl.Tuning{GEMVUnroll: 4, GEMVLanes: 8}, wgsl.Tuning{GEMVMinGroups: 100000},
		wgsl.Tuning{Matmul: "128x128x8/8x8+d,64x64x16/4x4+p,32x32x16/4x4+p", MatmulMinGroups: 1000},
		wgsl.Tuning{Matmul: "128x128x8/8x8+d, 32x64x16/4x4+p", MatmulMinGroups: 2}, treeBatch)
	for ti, tu := range tunings {
		d.SetTuning(tu)
		for i, c := range cases {
			name := fmt.Sprintf("%s/unroll%d/%s", tu.Matmul, tu.GEMVUnroll, c.name)
			t.Run(name, func(t *testing.T) {
				r := newRand(uint64(100*ti + i + 1))
				x, w := randF32(r, -1, 1, c.a...), randF32(r, -1, 1, c.b...)
				if c.bdt != ir.Invalid {
					w = storedW(c.bdt, c.b...)(r)
				}
				n, outs := mkNode(t, 500+i, ir.OpMatmul, ir.Attrs{"transpose_b": ir.BoolAttr(c.tb)}, x.Type(), w.Type())
				k, err := wgsl.Generate(n, []ir.Type{x.Type(), w.Type()}, outs, wgsl.Options{Limits: d.Limits(), Tuning: tu})
				if err != nil {
					t.Fatal(err)
				}
				vec := strings.Contains(string(k.Source), "vec4 tiled matmul")
				// A single blocking over the device's limits (more
				// invocations than this adapter takes) leaves the
				// scalar kernel.
				fits := strings.Contains(tu.Matmul, ",") || wgsl.MatmulTileFits(tu.Matmul, d.Limits())
				wantVec := tu.Matmul != "scalar" && tu.Matmul != "" && fits && c.a[len(c.a)-2] > 16 && !strings.Contains(c.name, "odd N")
				if vec != wantVec {
					t.Errorf("vec4 kernel used: %v, want %v", vec, wantVec)
				}
				batched := strings.Contains(string(k.Source), "let valid1 = ")
				if wantBatch := tu == treeBatch && strings.HasPrefix(c.name, "gemv q"); batched != wantBatch {
					t.Errorf("GEMV rows taken at once: %v, want %v", batched, wantBatch)
				}
				want := reference(t, n, outs, x, w)
				got, err := run(t, d, n, outs, x, w)
				if err != nil {
					t.Fatal(err)
				}
				compare(t, name, want[0], got[0], mmTol(c.a[len(c.a)-1]))
			})
		}
	}
}

// TestBindGroupCache checks that repeated launches over the same buffers
// reuse their bind group and that the results stay right when buffers
// return to the pool and are reused.
func TestBindGroupCache(t *testing.T) {
	r := newRand(3)
	x := randF32(r, -1, 1, 4, 16)
	n, outs := mkNode(t, 1, ir.OpNeg, nil, x.Type())
	for i := 0; i < 3; i++ {
		got, err := run(t, testDev, n, outs, x)
		if err != nil {
			t.Fatal(err)
		}
		want := reference(t, n, outs, x)
		compare(t, "neg", want[0], got[0], exact)
	}
	testDev.mu.Lock()
	cached := len(testDev.bgs)
	testDev.mu.Unlock()
	if cached == 0 {
		t.Errorf("no bind group cached")
	}
}

// TestBindGroupEvictionInPass empties the bind-group cache while the open
// compute pass still holds dispatches that set its groups (wgpu resolves
// them when the pass ends): the evicted groups must outlive the pass, and
// the results stay right.
func TestBindGroupEvictionInPass(t *testing.T) {
	testDev.mu.Lock()
	testDev.maxBGs = 1 // every new group evicts the one before
	testDev.mu.Unlock()
	t.Cleanup(func() {
		testDev.mu.Lock()
		testDev.maxBGs = maxCachedBindGroups
		testDev.mu.Unlock()
	})
	m, _ := smallModule(t)
	want := referenceSmall(t, m)
	got, err := callSmall(t, runtime.NewExecutor(m, testDev))
	if err != nil {
		t.Fatal(err)
	}
	compare(t, "evicted", want, got, reduction)
}
