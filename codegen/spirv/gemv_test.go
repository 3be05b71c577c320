package spirv

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/tapml/tapml/codegen/wgsl"
	"github.com/tapml/tapml/ir"
	"github.com/tapml/tapml/tensor"
)

// gemvCases are the decode GEMVs (matmul M = 1 with transpose_b, with and
// without its addend; rms_norm_matmul, rms_norm_swiglu, rms_norm_qkv) over
// weights of dtype dt: rows of k elements, an odd number of outputs,
// several rows of x for the fused ops.
func gemvCases(dt ir.DType, k int64) []testCase {
	w := func(n int64) ir.Type { return ir.T(dt, ir.S(n, k)) }
	tb := ir.Attrs{"transpose_b": ir.BoolAttr(true)}
	return []testCase{
		{op: ir.OpMatmul, in: []ir.Type{f32(1, k), w(19)}, attrs: tb},
		{op: ir.OpMatmul, in: []ir.Type{f32(1, k), w(7), f32(1, 7)}, attrs: tb},
		{op: ir.OpRMSNormMatmul, in: []ir.Type{f32(3, k), f32(k), w(13)}},
		{op: ir.OpRMSNormSwiGLU, in: []ir.Type{f32(2, k), f32(k), w(11), w(11)}},
		{op: ir.OpRMSNormQKV, in: []ir.Type{f32(2, k), f32(k), w(9), w(5), ir.T(ir.F16, ir.S(5, k))}},
	}
}

// gemvTol is the tolerance of a decode GEMV with rows of k elements: the
// matmul's (a k-long dot product in another order than the reference's),
// relative to the largest output, since rms_norm_swiglu multiplies two
// such sums.
func gemvTol(k int64) tol { return tol{Abs: 2e-6 * math.Sqrt(float64(k)) * 4, Rel: 1e-5} }

// TestDeviceGEMV runs the decode GEMVs over every weight dtype on the
// Vulkan device, with the device's subgroup operations (one subgroup a
// row, subgroupAdd) and without them (lanes summed by a tree in workgroup
// memory, the webgpu target's kernels), under the default and the
// discrete GPUs' tuning, against the CPU reference. Rows take every read
// of codegen/wgsl's gemvKinds: runs of whole blocks, eight f16 at a time,
// units of four (K formats, and rows of an odd number of Q4_0 blocks),
// single elements (k not a multiple of 4).
func TestDeviceGEMV(t *testing.T) {
	g := openGPU(t)
	if !g.Features().Subgroups {
		t.Fatalf("%s has no subgroup operations; lavapipe has them", g.Name())
	}
	r := rand.New(rand.NewPCG(11, 12))
	type variant struct {
		feat wgsl.Features
		tune wgsl.Tuning
	}
	// The webgpu target's tests run the kernels without subgroups over
	// every dtype; here the plain variant covers each way of reading.
	plain, sub := variant{wgsl.Features{}, wgsl.Tuning{}}, variant{g.Features(), wgsl.Tuning{}}
	discrete := variant{g.Features(), wgsl.DiscreteTuning()}
	all, subs := []variant{plain, sub, discrete}, []variant{sub}
	for _, s := range []struct {
		dt       ir.DType
		k        int64
		variants []variant
	}{
		{ir.F32, 64, all}, {ir.F32, 37, all},
		{ir.F16, 64, all}, {ir.F16, 36, subs}, {ir.F16, 37, subs}, {ir.BF16, 64, subs},
		{ir.Q4_0, 64, all}, {ir.Q4_0, 96, subs}, // runs of two blocks; an odd number of blocks: units
		{ir.Q8_0, 64, subs}, {ir.Q4_1, 96, subs}, // runs of one block
		{ir.Q5_0, 64, subs}, {ir.Q5_1, 64, subs},
		{ir.Q2_K, 256, subs}, {ir.Q3_K, 256, subs}, {ir.Q4_K, 256, subs}, {ir.Q5_K, 256, subs}, {ir.Q6_K, 256, subs},
	} {
		dt, k := s.dt, s.k
		for _, c := range gemvCases(dt, k) {
			n, outs := c.fullNode(t)
			in := c.inputs(r)
			want, err := reference(n, outs, in)
			if err != nil {
				t.Fatalf("%s %s k=%d: reference: %v", c.op, dt, k, err)
			}
			for _, v := range s.variants {
				name := fmt.Sprintf("%s %s k=%d subgroups=%v tuning=%+v", c.op, dt, k, v.feat.Subgroups, v.tune)
				opts := Options{Limits: kernelLimits(g), Tuning: v.tune, Features: v.feat}
				src, _, got := generateRun(t, g, name, n, c.in, outs, opts, in)
				if sg := strings.Contains(src, "subgroupAdd("); sg != v.feat.Subgroups {
					t.Errorf("%s: the kernel uses subgroupAdd: %v", name, sg)
				}
				for i := range want {
					if err := compare(got[i], want[i], gemvTol(k)); err != nil {
						t.Errorf("%s: output %d: %v", name, i, err)
					}
				}
			}
		}
	}
}

// TestDeviceGEMVWrongIndex checks that wrong_index changes the output of
// the subgroup GEMV for each way it reads a weight.
func TestDeviceGEMVWrongIndex(t *testing.T) {
	g := openGPU(t)
	r := rand.New(rand.NewPCG(13, 14))
	for _, w := range []ir.Type{f32(19, 64), ir.T(ir.F16, ir.S(19, 64)), ir.T(ir.Q4_0, ir.S(19, 64)),
		ir.T(ir.Q8_0, ir.S(19, 64)), ir.T(ir.Q4_0, ir.S(19, 96)), ir.T(ir.Q6_K, ir.S(19, 512))} {
		k := int64(w.Shape.Sizes()[1])
		c := testCase{op: ir.OpMatmul, in: []ir.Type{f32(1, k), w}, attrs: ir.Attrs{"transpose_b": ir.BoolAttr(true)}}
		checkWrongIndex(t, g, r, c, gemvTol(k))
	}
}

// TestDeviceHalfAllValues decodes every f16 bit pattern on the device
// (dequantize, which reads f16 as the GEMVs do, through half_to_f32) and
// wants the reference's bits: subnormals, ±0, infinities and NaNs (as
// NaN) included.
func TestDeviceHalfAllValues(t *testing.T) {
	g := openGPU(t)
	raw := make([]byte, 2*65536)
	for h := range 65536 {
		raw[2*h], raw[2*h+1] = byte(h), byte(h>>8)
	}
	x, err := tensor.FromBytes(ir.F16, []int{65536}, raw)
	if err != nil {
		t.Fatal(err)
	}
	c := testCase{op: ir.OpDequantize, in: []ir.Type{ir.T(ir.F16, ir.S(65536))}}
	n, outs := c.fullNode(t)
	want, err := reference(n, outs, []*tensor.Tensor{x})
	if err != nil {
		t.Fatal(err)
	}
	kern, err := Generate(n, c.in, outs, Options{Limits: kernelLimits(g), Features: g.Features()})
	if err != nil {
		t.Fatal(err)
	}
	got, err := runKernel(g, n, kern, []*tensor.Tensor{x})
	if err != nil {
		t.Fatal(err)
	}
	bad := 0
	for i, w := range want[0].Float32s() {
		v := got[0].Float32s()[i]
		if math.Float32bits(v) != math.Float32bits(w) && !(math.IsNaN(float64(v)) && math.IsNaN(float64(w))) {
			if bad++; bad <= 5 {
				t.Errorf("f16 %#04x: got %g (%#08x), want %g (%#08x)", i, v, math.Float32bits(v), w, math.Float32bits(w))
			}
		}
	}
}

// TestDeviceGEMVVariants runs the decode GEMVs (odd N, the addend,
// swiglu, qkv) under each kind of variant that bench/gpu's gemv command
// measures (wgsl.GEMVVariants' knobs over the discrete GPUs' tuning, with
// the device's subgroups) against the CPU reference, each variant over one
// weight dtype (a kernel on lavapipe takes about 0.3 s to build): rows of
// several subgroup segments, rows in turn, rows a subgroup takes at once, longer chunks (K = 128: two runs
// of Q4_0 blocks a step under GEMVChunk 2), the staged activation row, the
// fused norms without their staged row, f32
// rows of 37 (no vec4), and without subgroups rows a row's lanes take at
// once (GEMVTreeBatch). spirv-val checks each module too.
func TestDeviceGEMVVariants(t *testing.T) {
	g := openGPU(t)
	r := rand.New(rand.NewPCG(15, 16))
	var mods []spv
	for _, s := range []struct {
		dt    ir.DType
		k     int64
		tu    wgsl.Tuning
		plain bool // without subgroups
	}{
		{ir.F32, 128, wgsl.Tuning{GEMVRowLanes: 16, GEMVRows: 8}, false},
		{ir.Q4_0, 128, wgsl.Tuning{GEMVRowLanes: 4, GEMVRows: 32}, false},
		{ir.F16, 128, wgsl.Tuning{GEMVRows: 8, GEMVThreads: 64}, false},
		{ir.F32, 37, wgsl.Tuning{GEMVRowLanes: 8, GEMVRows: 16, GEMVStageA: true}, false},
		{ir.Q4_0, 128, wgsl.Tuning{GEMVChunk: 2}, false},
		{ir.Q8_0, 128, wgsl.Tuning{GEMVChunk: 4, GEMVRows: 1}, false},
		{ir.F16, 128, wgsl.Tuning{GEMVNoStage: true, GEMVRowLanes: 8, GEMVRows: 16}, false},
		{ir.F32, 128, wgsl.Tuning{GEMVStageA: true, GEMVRowLanes: 16, GEMVRows: 8, GEMVChunk: 2}, false},
		// Rows a subgroup takes at once (Q4_0-sized blocks): whole subgroups,
		// segments, unrolled partial sums, rows past R. The workgroup
		// sizes are set so that lavapipe's subgroups of 8 each take
		// several rows. The qkv cases' N0 of 9 rows keeps theirs to one;
		// qkvRows below has products of 16 and 8.
		{ir.Q4_0, 128, wgsl.Tuning{GEMVBatch: 4, GEMVBatchMinGroups: 1, GEMVRows: 8, GEMVThreads: 32}, false},
		{ir.Q5_1, 128, wgsl.Tuning{GEMVBatch: 2, GEMVBatchMinGroups: 1, GEMVRowLanes: 8, GEMVRows: 16}, false},
		{ir.Q4_0, 128, wgsl.Tuning{GEMVBatch: 8, GEMVBatchMinGroups: 1, GEMVRows: 2, GEMVThreads: 32}, false},
		{ir.Q4_0, 512, wgsl.Tuning{GEMVBatch: 2, GEMVBatchMinGroups: 1, GEMVRowLanes: 4, GEMVRows: 8}, false},
		{ir.Q8_0, 128, wgsl.Tuning{GEMVBatch: 8, GEMVBatchMinGroups: 1, GEMVRows: 8, GEMVThreads: 32}, false}, // 2 at once
		// The knobs that change the kernels without subgroups too; rows
		// a row's lanes take at once there (GEMVTreeBatch), their trees
		// summed together, with the norms' staged row and rows past N.
		{ir.Q4_0, 128, wgsl.Tuning{GEMVStageA: true, GEMVChunk: 2}, true},
		{ir.Q4_0, 128, wgsl.Tuning{GEMVTreeBatch: 4, GEMVBatchMinGroups: 1, GEMVLanes: 8}, true},
		{ir.Q5_1, 128, wgsl.Tuning{GEMVTreeBatch: 2, GEMVBatchMinGroups: 1, GEMVLanes: 64}, true},
		{ir.Q4_0, 512, wgsl.Tuning{GEMVTreeBatch: 8, GEMVBatchMinGroups: 1, GEMVLanes: 16}, true},
		{ir.Q8_0, 128, wgsl.Tuning{GEMVTreeBatch: 4, GEMVBatchMinGroups: 1, GEMVLanes: 8}, true},
	} {
		cases := gemvCases(s.dt, s.k)
		if s.tu.GEMVBatch > 0 || s.tu.GEMVTreeBatch > 0 {
			qkvRows := func(n int64) ir.Type { return ir.T(s.dt, ir.S(n, s.k)) }
			cases = append(cases, testCase{op: ir.OpRMSNormQKV, in: []ir.Type{f32(2, s.k), f32(s.k), qkvRows(16), qkvRows(8), qkvRows(8)}})
		}
		for _, c := range cases {
			n, outs := c.fullNode(t)
			in := c.inputs(r)
			want, err := reference(n, outs, in)
			if err != nil {
				t.Fatalf("%s %s k=%d: reference: %v", c.op, s.dt, s.k, err)
			}
			tu := wgsl.DiscreteTuning()
			wgsl.GEMVVariant{Tuning: s.tu}.Apply(&tu)
			name := fmt.Sprintf("%s %s k=%d %s", c.op, s.dt, s.k, wgsl.GEMVString(s.tu))
			opts := Options{Limits: kernelLimits(g), Tuning: tu, Features: g.Features()}
			if s.plain {
				opts.Features, name = wgsl.Features{}, name+" without subgroups"
			}
			src, kern, got := generateRun(t, g, name, n, c.in, outs, opts, in)
			if shuf := strings.Contains(src, "subgroupShuffleXor("); shuf != (tu.GEMVRowLanes > 0) {
				t.Errorf("%s: the kernel sums segments by subgroupShuffleXor: %v", name, shuf)
			}
			// rms_norm_qkv's rows all in one product: the appended case's
			// 16 and 8 take 4 rows a workgroup (64 lanes a row) in 2s.
			wantBatch := s.tu.GEMVTreeBatch > 1
			if c.op == ir.OpRMSNormQKV {
				wantBatch = wantBatch && s.tu.GEMVLanes == 64 && strings.Contains(src, "const N0: u32 = 16u;")
			}
			if batched := strings.Contains(src, "let valid1 = "); s.plain && batched != wantBatch {
				t.Errorf("%s: the kernel takes rows at once: %v, want %v", name, batched, wantBatch)
			}
			mods = append(mods, spv{name, kern.Source})
			for i := range want {
				if err := compare(got[i], want[i], gemvTol(s.k)); err != nil {
					t.Errorf("%s: output %d: %v", name, i, err)
				}
			}
		}
	}
	validateAll(t, mods)
}
