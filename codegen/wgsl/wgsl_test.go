package wgsl

import (
	"flag"
	"maps"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/tapml/tapml/codegen"
	"github.com/tapml/tapml/codegen/fault"
	"github.com/tapml/tapml/codegen/internal/kerneltest"
	"github.com/tapml/tapml/ir"
)

var update = flag.Bool("update", false, "rewrite the golden kernels in testdata/")

var f32, i32 = kerneltest.F32, kerneltest.I32

func generate(t *testing.T, c kerneltest.Case, opts Options) (*codegen.Kernel, error) {
	t.Helper()
	return Generate(c.Node(t), c.In, nil, opts)
}

func TestEveryOpHasGenerator(t *testing.T) {
	for _, d := range ir.Ops() {
		if !Supports(d.Op) {
			t.Errorf("op %s has no WGSL generator", d.Name)
		}
	}
}

// TestKernelsRespectLimits generates every case under the default limits
// and under small ones, and checks the kernel's shape: bindings in
// ascending order (inputs, then outputs), workgroup and grid within the
// limits, only the WGSL subset the wgpu v0.19 naga accepts.
func TestKernelsRespectLimits(t *testing.T) {
	small := Limits{MaxInvocationsPerWorkgroup: 64, MaxWorkgroupSizeX: 64, MaxWorkgroupSizeY: 64, MaxWorkgroupSizeZ: 64,
		MaxWorkgroupStorageSize: 8192, MaxWorkgroupsPerDimension: 7, MaxStorageBuffersPerShaderStage: 8}
	for _, lim := range []Limits{{}, small} {
		l := lim.withDefaults()
		for _, c := range kerneltest.Cases() {
			k, err := generate(t, c, Options{Limits: lim})
			if err != nil {
				if lim == small && strings.Contains(err.Error(), "grid") {
					continue // a grid that cannot fold (matmul batch/tiles) is reported, not emitted
				}
				t.Errorf("%s: %v", c.Name, err)
				continue
			}
			checkKernel(t, c, k, l)
		}
	}
}

func checkKernel(t *testing.T, c kerneltest.Case, k *codegen.Kernel, l Limits) {
	t.Helper()
	src := string(k.Source)
	for _, bad := range []string{"enable ", "override ", "diagnostic", "requires ", "subgroup", "f16"} {
		if strings.Contains(src, bad) {
			t.Errorf("%s: source uses %q, which this naga rejects", c.Name, bad)
		}
	}
	wg := k.WorkgroupSize
	if wg[0]*wg[1]*wg[2] > l.MaxInvocationsPerWorkgroup || wg[0] > l.MaxWorkgroupSizeX || wg[1] > l.MaxWorkgroupSizeY || wg[2] > l.MaxWorkgroupSizeZ {
		t.Errorf("%s: workgroup %v exceeds %+v", c.Name, wg, l)
	}
	for i, g := range k.Grid {
		if g > l.MaxWorkgroupsPerDimension {
			t.Errorf("%s: grid %v exceeds %d in dim %d", c.Name, k.Grid, l.MaxWorkgroupsPerDimension, i)
		}
	}
	if k.Language != "wgsl" || k.Entry != Entry || k.Op != c.Op || k.NodeID != 7 {
		t.Errorf("%s: kernel header %q %q %q %d", c.Name, k.Language, k.Entry, k.Op, k.NodeID)
	}
	for i := range k.Bindings {
		if !strings.Contains(src, "@group(0) @binding("+strconv.Itoa(i)+")") {
			t.Errorf("%s: source does not declare binding %d", c.Name, i)
		}
	}
	kerneltest.CheckBindings(t, c, k)
}

// TestGridFolds checks that an elementwise kernel too big for one grid
// dimension folds into several that together cover every element.
func TestGridFolds(t *testing.T) {
	c := kerneltest.Case{Name: "exp", Op: ir.OpExp, In: []ir.Type{f32(1000, 33)}}
	k, err := generate(t, c, Options{Limits: Limits{MaxWorkgroupsPerDimension: 10}})
	if err != nil {
		t.Fatal(err)
	}
	g := k.Grid
	if g[0] > 10 || g[1] > 10 || g[2] > 10 || g[0]*g[1]*g[2]*k.WorkgroupSize[0] < 33000 {
		t.Errorf("grid %v × workgroup %v does not cover 33000 elements within 10 per dim", g, k.WorkgroupSize)
	}
	if !strings.Contains(string(k.Source), "wid.z") {
		t.Error("folded kernel does not use wid.z")
	}
}

// TestFaults checks which faults apply to which ops: an applicable fault
// changes the source, an inapplicable one is an error.
func TestFaults(t *testing.T) {
	applies := map[string][]string{
		FaultWrongIndex:     {"neg", "add", "fused", "constant", "cast", "gather", "gemv_t", "gemv_n", "tiled", "rms_norm", "layer_norm", "softmax", "argmax", "rope", "rope_kv_write", "kv_write", "attention", "reshape", "transpose", "slice", "concat", "probe", "transfer"},
		FaultWrongConstant:  {"gelu", "fused", "constant", "rms_norm", "layer_norm", "rope", "rope_kv_write", "rope_kv_write_table", "attention"},
		FaultMissingBarrier: {"gemv_t", "tiled", "tiled_small_m", "rms_norm", "layer_norm", "softmax", "argmax", "attention"},
		FaultF16Overflow:    {"exp", "add", "fused", "gemv_t", "gemv_n", "tiled", "rms_norm", "layer_norm", "softmax", "rope", "rope_kv_write", "attention"},
	}
	never := map[string][]string{
		FaultWrongConstant:  {"add", "transpose", "gather", "softmax", "tiled"},
		FaultMissingBarrier: {"add", "exp", "gemv_n", "rope", "rope_kv_write", "kv_write", "gather", "transpose"},
		FaultF16Overflow:    {"gather", "transpose", "kv_write", "argmax", "cast", "concat", "add_i32"},
	}
	for fault, names := range applies {
		for _, name := range names {
			c := kerneltest.ByName(t, name)
			base, err := generate(t, c, Options{})
			if err != nil {
				t.Fatal(err)
			}
			k, err := generate(t, c, Options{Fault: fault})
			if err != nil {
				t.Errorf("%s on %s: %v", fault, name, err)
				continue
			}
			if string(k.Source) == string(base.Source) {
				t.Errorf("%s on %s: source unchanged", fault, name)
			}
		}
	}
	for fault, names := range never {
		for _, name := range names {
			_, err := generate(t, kerneltest.ByName(t, name), Options{Fault: fault})
			if err == nil || !strings.Contains(err.Error(), "does not apply") {
				t.Errorf("%s on %s: got %v, want a does-not-apply error", fault, name, err)
			}
		}
	}
	if _, err := generate(t, kerneltest.ByName(t, "constant_splat"), Options{Fault: FaultWrongIndex}); err == nil {
		t.Error("wrong_index on a one-value constant: no error")
	}
	if _, err := generate(t, kerneltest.ByName(t, "add"), Options{Fault: "cosmic_ray"}); err == nil {
		t.Error("unknown fault accepted")
	}
}

// TestErrors checks that Generate reports bad requests instead of emitting
// kernels.
func TestErrors(t *testing.T) {
	n := &ir.Node{ID: 1, Op: ir.OpAdd, Attrs: ir.Attrs{}}
	if _, err := Generate(n, []ir.Type{ir.T(ir.F16, ir.S(3)), ir.T(ir.F16, ir.S(3))}, nil, Options{}); err == nil {
		t.Error("f16 accepted")
	}
	if _, err := Generate(n, []ir.Type{ir.T(ir.F32, ir.Shape{ir.Sym("seq")}), f32(1)}, nil, Options{}); err == nil {
		t.Error("symbolic shape accepted")
	}
	if _, err := Generate(n, []ir.Type{f32(3), f32(3)}, []ir.Type{f32(4)}, Options{}); err == nil {
		t.Error("wrong output type accepted")
	}
	if _, err := Generate(&ir.Node{ID: 2, Op: ir.OpNone}, nil, nil, Options{}); err == nil {
		t.Error("unknown op accepted")
	}
	if _, err := Generate(nil, nil, nil, Options{}); err == nil {
		t.Error("nil node accepted")
	}
	fused := &ir.Node{ID: 4, Op: ir.OpFusedElementwise, Attrs: ir.Attrs{"expr": ir.StringAttr("add($0, $0)")}}
	if _, err := Generate(fused, []ir.Type{i32(3)}, nil, Options{}); err == nil {
		t.Error("i32 fused_elementwise accepted")
	}
	exp := &ir.Node{ID: 5, Op: ir.OpExp}
	if _, err := Generate(exp, []ir.Type{i32(3)}, nil, Options{}); err == nil || !strings.Contains(err.Error(), "no i32 kernel") {
		t.Errorf("i32 exp: got %v, want a no-i32-kernel error", err)
	}
	cat := &ir.Node{ID: 3, Op: ir.OpConcat, Attrs: ir.Attrs{"axis": ir.IntAttr(0)}}
	many := make([]ir.Type, 9)
	for i := range many {
		many[i] = f32(2)
	}
	if _, err := Generate(cat, many, nil, Options{}); err == nil || !strings.Contains(err.Error(), "storage buffers") {
		t.Errorf("concat of 9 inputs: got %v, want a storage-buffer limit error", err)
	}
}

// TestGolden compares a few kernels with the files in testdata/ (go test
// -update rewrites them), so that changes to generated code show in diffs.
func TestGolden(t *testing.T) {
	for _, name := range []string{"add", "rms_norm", "gemv_t", "tiled", "attention"} {
		k, err := generate(t, kerneltest.ByName(t, name), Options{})
		if err != nil {
			t.Fatal(err)
		}
		kerneltest.Golden(t, filepath.Join("testdata", name+".wgsl"), k.Source, *update)
	}
}

// TestGoldenGEMVSubgroups keeps the decode GEMV of a target with
// subgroups over a Q4_0 weight in testdata/: one subgroup a row, runs of
// two blocks decoded from whole words, the norm's g·x staged.
func TestGoldenGEMVSubgroups(t *testing.T) {
	c := kerneltest.Case{Name: "rms_norm_matmul q4_0", Op: ir.OpRMSNormMatmul,
		In: []ir.Type{f32(1, 64), f32(64), ir.T(ir.Q4_0, ir.S(40, 64))}}
	k, err := generate(t, c, Options{Features: Features{Subgroups: true}})
	if err != nil {
		t.Fatal(err)
	}
	kerneltest.Golden(t, filepath.Join("testdata", "gemv_subgroups_q4_0.wgsl"), k.Source, *update)
}

// TestGEMVGrids pins the grids of TinyLlama's Q4_0 decode GEMVs on a
// target with subgroups under the discrete GPUs' tuning (what the H200
// runs): a subgroup of 32 a row, at least 400 workgroups (GEMVMinGroups),
// the classifier's 32000 rows four to a subgroup, so that 1000
// workgroups, not 4000, stage the normalized row; then each subgroup takes
// up to 8 rows at once (GEMVBatch) while the grid keeps 200 workgroups
// (GEMVBatchMinGroups): 4 for the classifier, 2 for the others.
func TestGEMVGrids(t *testing.T) {
	q := func(d ...int64) ir.Type { return ir.T(ir.Q4_0, ir.S(d...)) }
	tb := ir.Attrs{"transpose_b": ir.BoolAttr(true)}
	for _, c := range []struct {
		c        kerneltest.Case
		grid, wg int
	}{
		{kerneltest.Case{Name: "swiglu", Op: ir.OpRMSNormSwiGLU, In: []ir.Type{f32(1, 2048), f32(2048), q(5632, 2048), q(5632, 2048)}}, 352, 256},
		{kerneltest.Case{Name: "qkv", Op: ir.OpRMSNormQKV, In: []ir.Type{f32(1, 2048), f32(2048), q(2048, 2048), q(256, 2048), q(256, 2048)}}, 320, 128},
		{kerneltest.Case{Name: "o", Op: ir.OpMatmul, Attrs: tb, In: []ir.Type{f32(1, 2048), q(2048, 2048), f32(1, 2048)}}, 256, 128},
		{kerneltest.Case{Name: "down", Op: ir.OpMatmul, Attrs: tb, In: []ir.Type{f32(1, 5632), q(2048, 5632), f32(1, 2048)}}, 256, 128},
		{kerneltest.Case{Name: "classifier", Op: ir.OpRMSNormMatmul, In: []ir.Type{f32(1, 2048), f32(2048), q(32000, 2048)}}, 250, 256},
	} {
		k, err := generate(t, c.c, Options{Features: Features{Subgroups: true}, Tuning: DiscreteTuning()})
		if err != nil {
			t.Fatal(err)
		}
		if k.Grid != [3]int{c.grid, 1, 1} || k.WorkgroupSize != [3]int{c.wg, 1, 1} {
			t.Errorf("%s: grid %v of %v, want %d of %d", c.c.Name, k.Grid, k.WorkgroupSize, c.grid, c.wg)
		}
		if !strings.Contains(string(k.Source), "K in chunks of 64 elements") {
			t.Errorf("%s: the Q4_0 rows are not read as runs of two blocks", c.c.Name)
		}
	}
}

// TestGEMVKnobs pins what each GEMV knob of Tuning does to TinyLlama's
// decode GEMVs on a target with subgroups (over the discrete GPUs'
// tuning): the workgroup size and grid, and the kernel's way of summing
// and reading.
func TestGEMVKnobs(t *testing.T) {
	q := func(dt ir.DType, d ...int64) ir.Type { return ir.T(dt, ir.S(d...)) }
	tb := ir.Attrs{"transpose_b": ir.BoolAttr(true)}
	o := func(dt ir.DType) kerneltest.Case {
		return kerneltest.Case{Name: "o " + dt.String(), Op: ir.OpMatmul, Attrs: tb, In: []ir.Type{f32(1, 2048), q(dt, 2048, 2048), f32(1, 2048)}}
	}
	swiglu := kerneltest.Case{Name: "swiglu", Op: ir.OpRMSNormSwiGLU, In: []ir.Type{f32(1, 2048), f32(2048), q(ir.Q4_0, 5632, 2048), q(ir.Q4_0, 5632, 2048)}}
	qkv := kerneltest.Case{Name: "qkv", Op: ir.OpRMSNormQKV, In: []ir.Type{f32(1, 2048), f32(2048), q(ir.Q4_0, 2048, 2048), q(ir.Q4_0, 256, 2048), q(ir.Q4_0, 256, 2048)}}
	for _, c := range []struct {
		c        kerneltest.Case
		tu       Tuning
		grid, wg int
		has      string
	}{
		{o(ir.Q4_0), Tuning{GEMVRowLanes: 16, GEMVRows: 8}, 256, 128, "subgroupShuffleXor("},
		{o(ir.Q4_0), Tuning{GEMVRowLanes: 4, GEMVRows: 128}, 32, 256, "let L = min(4u, sgs);"},
		{swiglu, Tuning{GEMVRowLanes: 8, GEMVRows: 16}, 352, 128, "subgroupShuffleXor(uacc, o)"},
		{o(ir.Q4_0), Tuning{GEMVRows: 8, GEMVThreads: 64}, 256, 64, "subgroupAdd("},
		{o(ir.Q4_0), Tuning{GEMVChunk: 2}, 512, 128, "K in chunks of 128 elements"}, // 72 bytes a lane: one row at a time
		{o(ir.F16), Tuning{GEMVChunk: 4}, 512, 128, "K in chunks of 32 elements"},
		{o(ir.F32), Tuning{GEMVStageA: true}, 512, 128, "act[j] = in0[ab + j];"},
		{swiglu, Tuning{GEMVNoStage: true}, 352, 256, "(in1[k * 16u] * (inv * in0[ab + k * 16u]))"},
		{swiglu, Tuning{GEMVBatch: 1}, 704, 256, "let n = min(n_, N - 1u);\n  var acc = 0.0f;"},
		{swiglu, Tuning{GEMVBatch: 4}, 352, 256, "let valid1 = r1 < R && wid.x * R + r1 < N;"},
		{swiglu, Tuning{GEMVBatch: 4, GEMVBatchMinGroups: 1}, 176, 256, "let valid3 = r3 < R && wid.x * R + r3 < N;"},
		{o(ir.Q4_0), Tuning{GEMVBatch: 2, GEMVBatchMinGroups: 1, GEMVRowLanes: 16, GEMVRows: 8}, 128, 128, "subgroupShuffleXor(acc_1, o)"},
		{o(ir.Q4_1), Tuning{GEMVBatch: 8, GEMVBatchMinGroups: 1}, 64, 128, "out0[wid.z * N + n7] = acc_7 + in2[wid.z * N + n7];"},
		// Q8_0 rows (68 bytes a lane) at most 2 at once, and one at a time
		// under GEMVBatchBytes 64 as f16 and f32 rows (a lane reads 64 bytes
		// or more); rms_norm_qkv's rows in one of its products.
		{o(ir.Q8_0), Tuning{GEMVBatch: 8, GEMVBatchMinGroups: 1}, 256, 128, "if (valid1 && lane == 0u)"},
		{o(ir.Q8_0), Tuning{GEMVBatch: 8, GEMVBatchMinGroups: 1, GEMVBatchBytes: 64}, 512, 128, "let n = min(n_, N - 1u);\n  var acc = 0.0f;"},
		{o(ir.F32), Tuning{GEMVBatch: 8, GEMVBatchMinGroups: 1}, 512, 128, "let n = min(n_, N - 1u);\n  var acc = 0.0f;"},
		{qkv, Tuning{GEMVBatch: 4, GEMVBatchMinGroups: 1}, 160, 128, "let n3 = min(wid.x * R + r3, s1 - 1u) - s0;"},
	} {
		tu := DiscreteTuning()
		GEMVVariant{c.tu}.Apply(&tu)
		k, err := generate(t, c.c, Options{Features: Features{Subgroups: true}, Tuning: tu})
		if err != nil {
			t.Fatal(err)
		}
		name := c.c.Name + " " + GEMVString(c.tu)
		if k.Grid != [3]int{c.grid, 1, 1} || k.WorkgroupSize != [3]int{c.wg, 1, 1} {
			t.Errorf("%s: grid %v of %v, want %d of %d", name, k.Grid, k.WorkgroupSize, c.grid, c.wg)
		}
		if !strings.Contains(string(k.Source), c.has) {
			t.Errorf("%s: the kernel has no %q", name, c.has)
		}
	}
}

// TestGEMVTreeBatch pins GEMVTreeBatch on TinyLlama's o GEMV without
// subgroup operations (the webgpu target): 32 lanes a Q4_0 row, 8 rows a
// pass of the lanes, 4 passes' rows at once summed in one tree (slots 256
// apart), so a quarter of the workgroups; Q8_0's 68 bytes a lane too,
// unless GEMVBatchBytes is 64 or less; off, the kernel is the plain one.
func TestGEMVTreeBatch(t *testing.T) {
	tb := ir.Attrs{"transpose_b": ir.BoolAttr(true)}
	o := func(dt ir.DType) kerneltest.Case {
		return kerneltest.Case{Name: "o " + dt.String(), Op: ir.OpMatmul, Attrs: tb, In: []ir.Type{f32(1, 2048), ir.T(dt, ir.S(2048, 2048)), f32(1, 2048)}}
	}
	for _, c := range []struct {
		c            kerneltest.Case
		batch, bytes int
		grid, wg     int
		has          string
	}{
		{o(ir.Q4_0), 4, 0, 64, 256, "red[768u + li] = acc_3;"},
		{o(ir.Q4_0), 0, 0, 256, 256, "if (lane < s_) { red[li] = red[li] + red[li + s_]; }"},
		{o(ir.Q8_0), 4, 0, 64, 256, "red[768u + li] = acc_3;"},
		{o(ir.Q8_0), 4, 64, 256, 256, "let n = min(n_, N - 1u);\n  var acc = 0.0f;"},
	} {
		tu := DiscreteTuning()
		tu.GEMVTreeBatch, tu.GEMVBatchMinGroups = c.batch, 1
		if c.bytes > 0 {
			tu.GEMVBatchBytes = c.bytes
		}
		k, err := generate(t, c.c, Options{Tuning: tu})
		if err != nil {
			t.Fatal(err)
		}
		name := c.c.Name + " GEMVTreeBatch " + strconv.Itoa(c.batch)
		if k.Grid != [3]int{c.grid, 1, 1} || k.WorkgroupSize != [3]int{c.wg, 1, 1} {
			t.Errorf("%s: grid %v of %v, want %d of %d", name, k.Grid, k.WorkgroupSize, c.grid, c.wg)
		}
		if !strings.Contains(string(k.Source), c.has) {
			t.Errorf("%s: the kernel has no %q:\n%s", name, c.has, k.Source)
		}
	}
}

// TestFeatures checks the one place that keeps the dialect's extensions
// out of kernels for targets without them: a kernel that enables an
// extension the options do not allow is refused.
func TestFeatures(t *testing.T) {
	src := "enable f16;\nenable subgroups;\n@compute @workgroup_size(1) fn main() {}\n"
	for _, c := range []struct {
		f    Features
		src  string
		want string // "" for no error
	}{
		{Features{}, "@compute @workgroup_size(1) fn main() {}", ""},
		{Features{}, src, "enables f16"},
		{Features{F16: true}, src, "enables subgroups"},
		{Features{F16: true, Subgroups: true}, src, ""},
		{Features{F16: true}, "enable f16, subgroups;\n", "enables subgroups"},
	} {
		err := c.f.check(c.src)
		if (err == nil) != (c.want == "") || err != nil && !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v on %q: got %v, want %q", c.f, c.src, err, c.want)
		}
	}
}

// TestFaultTable: the ops codegen/fault lists for the WGSL generator are
// exactly those whose kernels of the generator cases take each fault, with
// the default tuning or the GPU one.
func TestFaultTable(t *testing.T) {
	for _, f := range fault.Table {
		took := map[ir.Op]bool{}
		for _, tu := range []Tuning{{}, DiscreteTuning()} {
			for _, c := range kerneltest.Cases() {
				if _, err := generate(t, c, Options{Fault: f.Name, Tuning: tu}); err == nil {
					took[c.Op] = true
				} else if !strings.Contains(err.Error(), "does not apply") && !strings.Contains(err.Error(), "needs a constant") {
					t.Errorf("%s on %s: %v", f.Name, c.Name, err)
				}
			}
		}
		got := slices.Sorted(maps.Keys(took))
		if want := f.Reaches(fault.WGSL, HasConstant); !slices.Equal(got, want) {
			t.Errorf("%s applies to %v, the table says %v", f.Name, got, want)
		}
	}
}

// TestParseGEMV reads back every variant's GEMVString and refuses what is
// not a knob.
func TestParseGEMV(t *testing.T) {
	for _, v := range GEMVVariants() {
		got, err := ParseGEMV(v.Name())
		if err != nil || got != v.Tuning {
			t.Errorf("ParseGEMV(%q) = %+v, %v; want %+v", v.Name(), got, err, v.Tuning)
		}
	}
	for _, bad := range []string{"GEMVBatch", "GEMVBatch: x", "GEMVBatch: -1", "Matmul: 4", "GEMVStageA: 2", "GEMVRows: 4,"} {
		if _, err := ParseGEMV(bad); err == nil {
			t.Errorf("ParseGEMV(%q): no error", bad)
		}
	}
}
