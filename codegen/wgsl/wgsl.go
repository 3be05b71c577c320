// Package wgsl generates WGSL compute kernels for the nodes of tapml's IR.
//
// Generate turns one node, with the concrete types of its inputs and
// outputs, into a codegen.Kernel: WGSL source specialised on those shapes
// (sizes are baked in as `const`), its bindings (@group(0), inputs then
// outputs, ascending), the workgroup size and the grid to dispatch. Values
// that change between calls of the same shapes (the position of a decode
// step) are read from their buffers, never baked in.
//
// The kernels are written in tapml's WGSL dialect (codegen/wgslfront, whose
// front end the SPIR-V and MSL translators share). By default they use the
// subset the wgpu v0.19-era naga accepts: no `enable f16`, no subgroup
// operations, no `override`, no `diagnostic`; Options.Features lets a
// target that has them (through translation) take f16 and subgroup
// operations. Arithmetic is f32; ids, positions and argmax results are
// i32. Tensors of other dtypes are rejected with an error.
//
// Every kernel reads its inputs as `var<storage, read>` runtime-sized arrays
// and writes its outputs as `var<storage, read_write>` arrays, so the
// buffers bound may be larger than the tensors (a runtime may pool them by
// size class). kv_write is the one in-place kernel: its cache is a single
// read_write binding that carries both input 0 and output 0.
//
// Options.Fault injects a deliberate bug into the kernel (for tests of the
// carving and migration tools); codegen/fault has the table of faults.
package wgsl

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/tapml/tapml/codegen"
	"github.com/tapml/tapml/codegen/fault"
	"github.com/tapml/tapml/codegen/wgslfront"
	"github.com/tapml/tapml/ir"
)

// Limits are the device limits a kernel must respect. A zero field takes
// the WebGPU default (DefaultLimits).
type Limits struct {
	MaxInvocationsPerWorkgroup      int // maxComputeInvocationsPerWorkgroup
	MaxWorkgroupSizeX               int // maxComputeWorkgroupSizeX
	MaxWorkgroupSizeY               int // maxComputeWorkgroupSizeY
	MaxWorkgroupSizeZ               int // maxComputeWorkgroupSizeZ
	MaxWorkgroupStorageSize         int // maxComputeWorkgroupStorageSize, bytes
	MaxWorkgroupsPerDimension       int // maxComputeWorkgroupsPerDimension
	MaxStorageBuffersPerShaderStage int // maxStorageBuffersPerShaderStage
}

// DefaultLimits are WebGPU's default limits, which every adapter supports.
func DefaultLimits() Limits {
	return Limits{
		MaxInvocationsPerWorkgroup: 256, MaxWorkgroupSizeX: 256, MaxWorkgroupSizeY: 256, MaxWorkgroupSizeZ: 64,
		MaxWorkgroupStorageSize: 16384, MaxWorkgroupsPerDimension: 65535, MaxStorageBuffersPerShaderStage: 8,
	}
}

func (l Limits) withDefaults() Limits {
	d := DefaultLimits()
	set := func(v *int, def int) {
		if *v <= 0 {
			*v = def
		}
	}
	set(&l.MaxInvocationsPerWorkgroup, d.MaxInvocationsPerWorkgroup)
	set(&l.MaxWorkgroupSizeX, d.MaxWorkgroupSizeX)
	set(&l.MaxWorkgroupSizeY, d.MaxWorkgroupSizeY)
	set(&l.MaxWorkgroupSizeZ, d.MaxWorkgroupSizeZ)
	set(&l.MaxWorkgroupStorageSize, d.MaxWorkgroupStorageSize)
	set(&l.MaxWorkgroupsPerDimension, d.MaxWorkgroupsPerDimension)
	set(&l.MaxStorageBuffersPerShaderStage, d.MaxStorageBuffersPerShaderStage)
	return l
}

// Tuning holds performance knobs; zero values choose automatically. They
// never change results beyond f32 rounding.
type Tuning struct {
	// GEMVLanes is the number of invocations that share one output of the
	// M = 1, transpose_b matmul and the fused norms' GEMVs (a power of two
	// up to 64; 1 means one invocation per output and no workgroup
	// reduction). With subgroup operations a subgroup takes each row,
	// whatever its size, and GEMVLanes sets the rows of a workgroup
	// instead: 256/GEMVLanes.
	GEMVLanes int
	// GEMVMinGroups, when > 0 and GEMVLanes is automatic, doubles the
	// lanes per output (up to 64, and while each lane keeps at least 16
	// elements of K), or with subgroups halves the rows a workgroup, until
	// the grid has at least this many workgroups: short GEMVs (N = 2048)
	// then still fill a large GPU.
	GEMVMinGroups int
	// GEMVUnroll is the number of independent partial sums each lane of
	// that GEMV keeps (1, 2 or 4; 0 means 1): more loads in flight.
	GEMVUnroll int
	// The next knobs are variants of that GEMV that bench/gpu's gemv
	// command measures; zero values keep the automatic choice.
	//
	// GEMVRowLanes, with subgroup operations, is the lanes of a row (a
	// power of two, 2 to 32): a subgroup takes several rows at once and
	// sums each segment by subgroupShuffleXor (0: a whole subgroup a row).
	GEMVRowLanes int
	// GEMVRows, with subgroup operations, is the rows of a workgroup (a
	// power of two up to 256), replacing the automatic choice.
	GEMVRows int
	// GEMVThreads, with subgroup operations and whole-subgroup rows, is
	// the workgroup size (a power of two, e.g. 64, 128, 256): its
	// subgroups take the workgroup's rows in turn. (With GEMVRowLanes the
	// size is GEMVRows·GEMVRowLanes.)
	GEMVThreads int
	// GEMVChunk multiplies the elements a lane takes per step of K (2 or
	// 4: two or four vec4 of f32, 16 or 32 f16, runs of twice or four
	// times the Q blocks) where K allows.
	GEMVChunk int
	// GEMVStageA stages the activation row in workgroup memory in the
	// plain matmul too (the fused norms always stage g·x when it fits).
	GEMVStageA bool
	// GEMVNoStage makes the fused norms read g and x for each chunk
	// rather than stage g·x in workgroup memory (one barrier fewer).
	GEMVNoStage bool
	// GEMVBatch, with subgroup operations, is the most rows a subgroup
	// takes at once in GEMVs over block formats that a lane reads under 64
	// bytes of a step (2, 4 or 8): each lane has that many rows' loads in
	// flight, and a workgroup has that many times the rows. A Q4_0 row is
	// 9 words a lane at K = 2048: one at a time left the lanes waiting on
	// memory. Such GEMVs are not unrolled (GEMVUnroll).
	GEMVBatch int
	// GEMVBatchMinGroups halves GEMVBatch (and GEMVTreeBatch) for a GEMV
	// while its grid would have fewer workgroups than this.
	GEMVBatchMinGroups int
	// GEMVBatchBytes is the bytes of a weight a lane reads a step under
	// which GEMVBatch and GEMVTreeBatch apply (0: 64, which takes Q4_0's
	// 36 in, Q8_0's 68 out; with subgroups runs of 64 bytes or more take
	// at most 2 rows at once, gemvBatch).
	GEMVBatchBytes int
	// GEMVTreeBatch is GEMVBatch without subgroup operations (the webgpu
	// target): the rows a row's lanes take at once, by the same rule, the
	// batch's rows then summed in one tree of workgroup memory. On the
	// H200 8 took webgpu's Llama-3.2-1B Q4_0 decode step from 1,651 to
	// 1,200 µs of GPU time (the classifier 321 → 110 µs; 2 gave 1,336,
	// 4 1,229: benchgpu profile -target vulkan/webgpu -gemv ...).
	GEMVTreeBatch int
	// Matmul selects the tiled kernel of M > 1 products. "" (or "scalar")
	// is the original kernel: a 64x64 tile, 4x4 f32 per invocation. A
	// blocking "BMxBNxBK/TMxTN", optionally followed by "+p" (the next
	// tile's global loads are issued before the current tile's arithmetic)
	// or "+d" (that, and two workgroup buffers, one barrier per step),
	// selects the vec4 kernel: vec4 loads of a and b, TMxTN outputs per
	// invocation as vec4 rows. "+t" after those makes each invocation
	// load 4 rows' vec4 and store them to workgroup memory as 4 vec4
	// (transposed in registers) rather than one vec4 as 4 scalars. A
	// final "*S" (S a power of two) splits K
	// among S slices of the workgroup's invocations, whose sums are added
	// at the end. A comma-separated list of blockings, largest first,
	// takes the first whose grid has at least MatmulMinGroups workgroups
	// (a slice counting as one), else the last that fits (a large tile on
	// a small product leaves most of a big GPU idle). Shapes no blocking can take (K or N
	// not a multiple of 4, M <= 16, limits) use the original kernel.
	Matmul          string
	MatmulMinGroups int
	// MatmulMMA, with f16 compute on a device with Features.SubgroupMatrix,
	// selects the subgroup-matrix kernel (mma.go) for M > 16 products of a
	// transposed b: a comma-separated list of blockings
	// "BMxBNxBK/WMxWN[+d][*S]" (multiples of 16; WMxWN is one subgroup's
	// part of the BMxBN block; +d two sets of tiles, *S slices of K),
	// chosen as Matmul's by MatmulMMAMinGroups. "" keeps the vec4 kernels.
	MatmulMMA string
	// MatmulMMAMinGroups is MatmulMinGroups for the MatmulMMA list (0:
	// MatmulMinGroups): its blockings do more per workgroup.
	MatmulMMAMinGroups int
	// MatmulMMABlocks lets the subgroup-matrix kernel take block-format
	// (and bf16) weights too, split into two f16 parts (mma.go).
	MatmulMMABlocks bool
	// MatmulMMAF32 is MatmulMMA's list at f32 compute, where products
	// over f16 weights take the subgroup-matrix kernel too, on a device
	// with subgroups besides ("" keeps them on the vec4 kernel): each row
	// of a is split into two f16 parts (scaled by a power of two into f16's
	// range where it falls outside), every term of the sums within 2^-22 of
	// its f32 product (mma.go). A list of its own: every workgroup splits
	// its rows of a there, two products a step, so the best blockings need
	// not be f16 compute's. On the H200 Llama-3.2-1B's f32-compute prefill
	// over F16 weights went from 8,522 tok/s without it to 10,421 and
	// 10,083 with it, in three runs of one evening
	// (bench/results/2026-12-03-h200-mma-f32-two-pass.md).
	MatmulMMAF32 string
	// MatmulMMAF32Blocks lets MatmulMMAF32 take the block formats that
	// are split, and bf16 (with MatmulMMABlocks), too. Off by default: on
	// the H200 their three products a step ran slower than the vec4 kernel
	// (TinyLlama's Q4_0 prefill 6,397 tok/s split, 7,626 and 7,551 on
	// vec4). The scaled formats (MatmulMMAScaled) take MatmulMMAF32
	// without it: two products a step, faster than vec4 there.
	MatmulMMAF32Blocks bool
	// MatmulMMAF32BlocksMinWorkgroups keeps block-format products at f32
	// compute on the vec4 kernel where the subgroup-matrix blocking chosen
	// leaves fewer workgroups than this (slices not counted; 0: none). On
	// the H200 (100 in DiscreteTuning) TinyLlama's Q4_0 k and v products (32
	// workgroups of 32x32 blocks in 4 slices) went from 38.3 to 27.5 µs a
	// call so, Llama-3.2-1B's Q8_0 ones (64) from 38.9 to 37.9
	// (bench/results/2026-12-04-h200-scaled-fold.md).
	MatmulMMAF32BlocksMinWorkgroups int
	// MatmulMMAScaled changes how the subgroup-matrix kernel takes the
	// block formats whose values are an integer times their block's scale
	// (Q4_0, Q5_0, Q8_0: dequant.Scaled), where it takes them
	// (MatmulMMABlocks; at f32 compute MatmulMMAF32Blocks too): as those
	// integers, exact in f16, one product a step (two at f32 compute)
	// where a split takes two (three), each block's partial products
	// divided by the inverse of its column's scale, element by element
	// (mma.go). On the H200 Llama-3.2-1B's prefill products at f16
	// compute ran 1.4-1.8x faster so (Q4_0 and Q8_0,
	// bench/results/2026-12-04-h200-reps.md). At f32 compute they take
	// MatmulMMAF32 so without MatmulMMAF32Blocks: Llama-3.2-1B's Q4_0
	// prefill went from 15.57 to 13.15 ms of GPU time against the vec4
	// kernel (Q8_0 15.75 to 13.85; bench/results/2026-12-04-h200-f32-scaled.md).
	MatmulMMAScaled bool
}

// DiscreteTuning is the tuning the webgpu device uses on GPUs that are not
// CPU drivers, chosen from measurements on an NVIDIA H200 (bench/gpu).
// Products too small for 264 workgroups of 32x64 (prefill's 128 rows by
// 2048 or 256 columns) split K among slices (not yet measured: until then
// on the reasoning that the unsliced 32x32 tile left the H200's 132 SMs
// about four warps each). Prefill's widest products (gate and up: 128
// rows by 8192 or 5632 columns) take 64x64 tiles in 2 slices: on the H200
// Llama-3.2-1B's gate and up went from 197 to 174 µs a call over F16
// weights and 246 to 190 over Q4_0 against 32x64 tiles
// (bench/results/2026-12-03-h200-mma-f32.md). Under f16 compute on a device with subgroup
// matrices (the vulkan target on NVIDIA GPUs) products with 128 or more
// 64x64 blocks take those (prefill's gate and up), the others 32x32
// blocks in 4 slices of K (bench/results/2026-12-03-h200-mma.md), block
// formats included; under f32 compute products over f16 weights take
// them too (MatmulMMAF32), those of fewer than 160 64x64 blocks 32x64
// blocks in 4 slices first: on the H200 Llama-3.2-1B's products of 2048
// columns went from 55-56 to 44-45 µs a call (K = 2048) and from 201 to
// 147 (K = 8192) over F16 weights against 32x32 blocks, its prefill's GPU
// time from 11.75 to 10.51 ms (bench/results/2026-12-04-h200-reps.md).
// Q4_0, Q5_0 and Q8_0 weights take them at f32 compute too, as integers
// (MatmulMMAScaled), but for products of fewer than 100 workgroups
// (MatmulMMAF32BlocksMinWorkgroups: k and v). Decode GEMVs over the 32-element block formats
// (Q4_0 .. Q8_0) take up to 8 rows a subgroup (2 of Q8_0) or, without
// subgroups, a row's lanes at once while the grid keeps 200 workgroups
// (bench/results/2026-12-03-h200-gemv-batch.md, 2026-12-04-h200-f32-scaled.md).
func DiscreteTuning() Tuning {
	return Tuning{Matmul: "128x128x8/8x8+p,64x64x16/4x4+p,64x64x16/4x4+p*2,32x64x16/4x4+p,32x32x16/4x4+p*4,16x16x16/4x4+p*8", MatmulMinGroups: 264,
		MatmulMMA: "64x64x32/32x32,32x32x32/16x16*4", MatmulMMAMinGroups: 160, MatmulMMABlocks: true, MatmulMMAScaled: true,
		MatmulMMAF32: "64x64x32/32x32,32x64x32/16x32*4,32x32x32/16x16*4", MatmulMMAF32BlocksMinWorkgroups: 100, GEMVUnroll: 2, GEMVMinGroups: 400, GEMVBatch: 8, GEMVBatchMinGroups: 200,
		GEMVBatchBytes: 72, GEMVTreeBatch: 8}
}

// Options control code generation.
type Options struct {
	Limits Limits
	Tuning Tuning
	// Features are the dialect's extensions the target's kernels may use;
	// none by default, as on the webgpu target (naga rejects them).
	Features Features
	// Fault, when set, injects a deliberate bug into the kernel. It is for
	// tests only; codegen/fault has the names and what each does.
	Fault string
	// Compute is the dtype float tensors are stored in: f32 (ir.F32, or
	// zero) or f16 (ir.F16, which needs Features.F16): every float buffer
	// is then f16 and kernels convert on load and store, computing in f32
	// (half.go).
	Compute ir.DType
	// Accumulate is the dtype of the accumulators that kernels honouring
	// it keep (attention's scores and softmax sum): f32 (zero) by default;
	// f16 (needs Features.F16) is what a careless f16 port does, and
	// overflows where scores pass 65504.
	Accumulate ir.DType
}

// checkPrecision checks Compute and Accumulate against the features.
func (o Options) checkPrecision() error {
	for _, p := range []struct {
		what string
		dt   ir.DType
	}{{"compute", o.Compute}, {"accumulate", o.Accumulate}} {
		switch p.dt {
		case ir.Invalid, ir.F32:
		case ir.F16:
			if !o.Features.F16 {
				return fmt.Errorf("%s dtype f16 needs the f16 feature, which the target lacks", p.what)
			}
		default:
			return fmt.Errorf("%s dtype %s: only f32 and f16 are supported", p.what, p.dt)
		}
	}
	return nil
}

// Features are the extensions of tapml's WGSL dialect beyond what naga
// takes: the SPIR-V and MSL translations have them, the webgpu target does
// not. A kernel declares each one it uses with `enable NAME;`, which the
// front end requires; Generate refuses a kernel that enables one the
// options do not allow, so that webgpu kernels never contain them.
type Features struct {
	F16       bool // `enable f16;`: the f16 type and its arithmetic
	Subgroups bool // `enable subgroups;`: subgroup operations and builtins
	// SubgroupMatrix is `enable chromium_experimental_subgroup_matrix;`
	// (Dawn's name; Vulkan's cooperative matrices): subgroup_matrix_left,
	// _right and _result types and subgroupMatrixLoad, Store and
	// MultiplyAccumulate. A device sets it only where 16x16x16 products of
	// f16 fragments into f32 run on subgroups of 32 invocations (the shape
	// the matmul kernel uses); it needs F16.
	SubgroupMatrix bool
}

// SubgroupMatrixExt is the name a kernel enables subgroup matrices by.
const SubgroupMatrixExt = wgslfront.SubgroupMatrixExt

// check returns an error when src enables an extension f lacks.
func (f Features) check(src string) error {
	allowed := map[string]bool{"f16": f.F16, "subgroups": f.Subgroups, SubgroupMatrixExt: f.SubgroupMatrix}
	for _, line := range strings.Split(src, "\n") {
		name, ok := strings.CutPrefix(strings.TrimSpace(line), "enable ")
		if !ok {
			continue
		}
		for _, ext := range strings.Split(strings.TrimSuffix(strings.TrimSpace(name), ";"), ",") {
			if ext = strings.TrimSpace(ext); !allowed[ext] {
				return fmt.Errorf("the kernel enables %s, which the target's features (%+v) do not include", ext, f)
			}
		}
	}
	return nil
}

// Entry is the entry point of every generated kernel.
const Entry = "main"

// Generate returns the WGSL kernel of node n for the concrete input types in
// and output types out (every shape static).
func Generate(n *ir.Node, in, out []ir.Type, opts Options) (*codegen.Kernel, error) {
	if n == nil {
		return nil, fmt.Errorf("wgsl: nil node")
	}
	fail := func(err error) (*codegen.Kernel, error) {
		return nil, fmt.Errorf("wgsl: node %s: %w", n, err)
	}
	def := ir.LookupOp(n.Op)
	if def == nil {
		return fail(fmt.Errorf("unknown op %q", n.Op))
	}
	genFn := generators[n.Op]
	if genFn == nil {
		return fail(fmt.Errorf("no WGSL kernel for op %s", n.Op))
	}
	if opts.Fault != "" {
		if err := fault.Check(fault.WGSL, opts.Fault); err != nil {
			return fail(err)
		}
	}
	if err := opts.checkPrecision(); err != nil {
		return fail(err)
	}
	if n.Inputs != nil && len(in) != len(n.Inputs) {
		return fail(fmt.Errorf("%d input types for %d inputs", len(in), len(n.Inputs)))
	}
	for i, t := range in {
		if !t.Shape.IsStatic() {
			return fail(fmt.Errorf("input %d has a symbolic shape %s; kernels need concrete shapes", i, t.Shape))
		}
	}
	// The output types follow from the inputs; computing them here checks
	// the caller's and fills them in when none are given.
	want, attrs, err := ir.InferTypes(n.Op, in, n.BoundAttrs(in, out))
	if err != nil {
		return fail(err)
	}
	if out == nil {
		out = want
	}
	if len(out) != len(want) {
		return fail(fmt.Errorf("%d output types, op %s has %d outputs", len(out), n.Op, len(want)))
	}
	for i := range out {
		if !out[i].Shape.IsStatic() || !out[i].Equal(want[i]) {
			return fail(fmt.Errorf("output %d is given as %s, the inputs give %s", i, out[i], want[i]))
		}
	}
	st := def.Storage.Of(ir.Call{In: in, Attrs: attrs})
	for i, t := range append(append([]ir.Type{}, in...), out...) {
		what := fmt.Sprintf("input %d", i)
		if i >= len(in) {
			what = fmt.Sprintf("output %d", i-len(in))
		}
		if t.DType != ir.F32 && t.DType != ir.I32 && !(i < len(in) && st.Accepts(i, t.DType)) {
			return fail(fmt.Errorf("%s is %s; WGSL kernels support f32 and i32 tensors, and the storage dtypes an op reads (%s)", what, t, st))
		}
		if t.Shape.NumElements() > math.MaxUint32 {
			return fail(fmt.Errorf("%s has more than 2^32-1 elements (kernels index with u32)", what))
		}
	}
	g := &gen{node: n, op: n.Op, attrs: attrs, in: in, out: out, lim: opts.Limits.withDefaults(), tune: opts.Tuning, fault: opts.Fault,
		half: opts.Compute == ir.F16, accumulate: opts.Accumulate, feat: opts.Features}
	k, err := genFn(g)
	if err != nil {
		return fail(err)
	}
	if len(g.halfs) > 0 {
		src, err := halfStorage(string(k.Source), g.halfs)
		if err != nil {
			return fail(err)
		}
		k.Source = []byte(src)
	}
	if g.fault != "" && !g.faultApplied {
		return fail(fmt.Errorf("fault %q does not apply to op %s", g.fault, n.Op))
	}
	if err := opts.Features.check(string(k.Source)); err != nil {
		return fail(err)
	}
	if nb := len(k.Bindings); nb > g.lim.MaxStorageBuffersPerShaderStage {
		return fail(fmt.Errorf("kernel needs %d storage buffers, the device allows %d", nb, g.lim.MaxStorageBuffersPerShaderStage))
	}
	for i, c := range k.Grid {
		if c > g.lim.MaxWorkgroupsPerDimension {
			return fail(fmt.Errorf("grid %v exceeds %d workgroups in dimension %d", k.Grid, g.lim.MaxWorkgroupsPerDimension, i))
		}
	}
	k.Language = "wgsl"
	k.Op = n.Op
	k.NodeID = n.ID
	k.Entry = Entry
	return k, nil
}

// Supports reports whether op has a WGSL kernel.
func Supports(op ir.Op) bool { return generators[op] != nil }

type generator func(g *gen) (*codegen.Kernel, error)

var generators = map[ir.Op]generator{}

func init() {
	for _, op := range ir.UnaryOps {
		generators[op] = genElementwise
	}
	for _, op := range ir.BinaryOps {
		generators[op] = genElementwise
	}
	for op, fn := range map[ir.Op]generator{
		ir.OpFusedElementwise: genElementwise,
		ir.OpConstant:         genConstant,
		ir.OpCast:             genCast,
		ir.OpGather:           genGather,
		ir.OpDequantize:       genDequantize,
		ir.OpMatmul:           genMatmul,
		ir.OpRMSNorm:          genNorm,
		ir.OpRMSNormMatmul:    genRMSNormMatmul,
		ir.OpRMSNormQKV:       genNormProducts,
		ir.OpRMSNormSwiGLU:    genNormProducts,
		ir.OpLayerNorm:        genNorm,
		ir.OpSoftmax:          genSoftmax,
		ir.OpArgmax:           genArgmax,
		ir.OpRope:             genRope,
		ir.OpRopeKVWrite:      genRopeKVWrite,
		ir.OpKVWrite:          genKVWrite,
		ir.OpAttention:        genAttention,
		ir.OpReshape:          genCopy,
		ir.OpProbe:            genCopy,
		ir.OpTransfer:         genCopy,
		ir.OpTranspose:        genTranspose,
		ir.OpSlice:            genSlice,
		ir.OpConcat:           genConcat,
		ir.OpTopK:             genTopK,
		ir.OpExpertMatmul:     genExpertMatmul,
		ir.OpTokenShift:       genTokenShift,
		ir.OpCausalConv1D:     genCausalConv1D,
		ir.OpWKV:              genWKV,
		ir.OpSelectiveScan:    genSelectiveScan,
	} {
		generators[op] = fn
	}
}

// gen holds the state of generating one kernel.
type gen struct {
	node  *ir.Node
	op    ir.Op
	attrs ir.Attrs
	in    []ir.Type
	out   []ir.Type
	lim   Limits
	tune  Tuning

	fault        string
	faultApplied bool

	half       bool              // float buffers are f16 (Options.Compute)
	halfs      map[string]string // the buffers declared f16: name to the f32 element type written
	accumulate ir.DType          // Options.Accumulate
	feat       Features          // Options.Features: the extensions kernels may use

	src      strings.Builder
	bindings []codegen.Binding
	helpers  []string // names of helper functions to declare
	locals   int      // names given by fresh
}

// faultIs reports whether the kernel should inject fault f, and records that
// it did.
func (g *gen) faultIs(f string) bool {
	if g.fault == f {
		g.faultApplied = true
		return true
	}
	return false
}

func (g *gen) p(format string, args ...any) {
	fmt.Fprintf(&g.src, format, args...)
	g.src.WriteByte('\n')
}

// wgslType is the WGSL scalar type of a dtype.
func wgslType(dt ir.DType) string {
	if dt == ir.I32 {
		return "i32"
	}
	return "f32"
}

// bind declares a storage binding; elem is the array's element type.
func (g *gen) bind(name string, access codegen.Access, t ir.Type, elem string, input, output int) {
	idx := len(g.bindings)
	mode := "read"
	if access != codegen.Read {
		mode = "read_write"
	}
	if h := halfElem(elem); g.half && h != "" {
		if g.halfs == nil {
			g.halfs = map[string]string{}
		}
		g.halfs[name] = elem
		elem = h
	}
	g.p("@group(0) @binding(%d) var<storage, %s> %s: array<%s>;", idx, mode, name, elem)
	g.bindings = append(g.bindings, codegen.Binding{Index: idx, Name: name, Access: access, Type: t, Input: input, Output: output})
}

// bindAll declares every input as in0.. and every output as out0.., with
// their scalar element types.
func (g *gen) bindAll() {
	for i, t := range g.in {
		g.bind("in"+strconv.Itoa(i), codegen.Read, t, wgslType(t.DType), i, -1)
	}
	for i, t := range g.out {
		g.bind("out"+strconv.Itoa(i), codegen.Write, t, wgslType(t.DType), -1, i)
	}
}

// kernel finishes the kernel with the source written so far.
func (g *gen) kernel(wg [3]int, grid [3]int) *codegen.Kernel {
	for _, h := range g.helpers {
		g.p("%s", helpers[h].src)
	}
	if strings.Contains(g.src.String(), "f32_bits(") {
		g.p("%s", helpers["f32_bits"].src)
	}
	return &codegen.Kernel{Source: []byte(g.src.String()), Bindings: g.bindings, WorkgroupSize: wg, Grid: grid}
}

// fold spreads groups workgroups over a grid whose dimensions stay within
// the device limit (x, then y, then z), returning the grid and the WGSL
// expression of the linear workgroup index, which may exceed groups-1 in
// the slack of the last row: kernels guard it.
func (g *gen) fold(groups int) ([3]int, string) { return g.foldDims(groups, 3) }

// foldDims folds into at most dims grid dimensions (2 leaves wid.z to the
// caller); a grid that does not fit is left oversized for Generate to
// report.
func (g *gen) foldDims(groups, dims int) ([3]int, string) {
	m := g.lim.MaxWorkgroupsPerDimension
	if groups <= m {
		return [3]int{groups, 1, 1}, "wid.x"
	}
	if groups <= m*m || dims < 3 {
		gy := ceilDiv(groups, m)
		gx := ceilDiv(groups, gy)
		return [3]int{gx, gy, 1}, fmt.Sprintf("(wid.x + wid.y * %du)", gx)
	}
	gz := ceilDiv(groups, m*m)
	rest := ceilDiv(groups, gz)
	gy := ceilDiv(rest, m)
	gx := ceilDiv(rest, gy)
	return [3]int{gx, gy, gz}, fmt.Sprintf("(wid.x + wid.y * %du + wid.z * %du)", gx, gx*gy)
}

// threads is the largest power of two <= want that the limits allow for a
// one-dimensional workgroup.
func (g *gen) threads(want int) int {
	lim := min(g.lim.MaxInvocationsPerWorkgroup, g.lim.MaxWorkgroupSizeX)
	want = min(want, lim)
	t := 1
	for t*2 <= want {
		t *= 2
	}
	return t
}

// entry writes the entry point header with the builtins every kernel may
// use: wid (workgroup_id), lid (local_invocation_id) and li
// (local_invocation_index), then any extra parameters.
func (g *gen) entry(wg [3]int, extra ...string) {
	g.p("@compute @workgroup_size(%d, %d, %d)", wg[0], wg[1], wg[2])
	params := append([]string{"@builtin(workgroup_id) wid: vec3<u32>", "@builtin(local_invocation_id) lid: vec3<u32>",
		"@builtin(local_invocation_index) li: u32"}, extra...)
	g.p("fn main(%s) {", strings.Join(params, ", "))
}

// barrier emits a workgroup barrier; the missing_barrier fault drops the
// first one of the kernel (or the one the generator marks with drop).
func (g *gen) barrier(droppable bool) {
	if droppable && g.faultIs(FaultMissingBarrier) {
		g.p("  // fault missing_barrier: workgroupBarrier() dropped here")
		return
	}
	g.p("  workgroupBarrier();")
}

func ceilDiv(a, b int) int { return (a + b - 1) / b }

// f32Lit is a WGSL f32 literal for v (rounded to f32).
func f32Lit(v float64) string {
	f := float32(v)
	switch {
	case math.IsNaN(float64(f)):
		return "f32_bits(0x7fc00000u)"
	case math.IsInf(float64(f), 1):
		return "f32_bits(0x7f800000u)"
	case math.IsInf(float64(f), -1):
		return "f32_bits(0xff800000u)"
	}
	s := strconv.FormatFloat(float64(f), 'e', -1, 32)
	if f < 0 || (f == 0 && math.Signbit(float64(f))) {
		return "(" + s + "f)"
	}
	return s + "f"
}

// i32Lit is a WGSL i32 literal.
func i32Lit(v int64) string {
	if v == math.MinInt32 {
		return "i32(-2147483647 - 1)"
	}
	if v < 0 {
		return "(" + strconv.FormatInt(v, 10) + "i)"
	}
	return strconv.FormatInt(v, 10) + "i"
}

// u is a WGSL u32 literal.
func u(v int) string { return strconv.Itoa(v) + "u" }

// sizes returns the static sizes of a type.
func sizes(t ir.Type) []int { return t.Shape.Sizes() }

func numel(t ir.Type) int { return int(t.Shape.NumElements()) }

// prod multiplies sizes.
func prod(s []int) int {
	n := 1
	for _, d := range s {
		n *= d
	}
	return n
}
