package wgsl

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/tapml/tapml/codegen"
	"github.com/tapml/tapml/codegen/dequant"
	"github.com/tapml/tapml/ir"
)

// The subgroup-matrix matmul: with f16 compute on a device with
// Features.SubgroupMatrix (Vulkan's cooperative matrices: NVIDIA's tensor
// cores), M > 1 products with a transposed b multiply 16x16 f16 fragments
// into f32 accumulators, computing what the other kernels do: f16 compute
// stores a in f16, and b's f16 (and f16-stored f32) weights are f16.
//
// A b decoded from a block format (or bf16) is not f16: an element of a
// Q4_0 block, a 4-bit integer times an f16 scale, has up to 14 significant
// bits, Q8_0's 18. Rounding b to f16 here is what TestDeviceF16 caught on
// the H200 (about two f16 ulps of the sums), and a split into hi = f16(w)
// and lo = f16(w - f32(hi)) did not help there: lo came out zero, as if
// the driver folded f32(f16(w)) to w. With Tuning.MatmulMMABlocks such a
// b is split by its bits instead: h is w with all but its top 11
// significant bits cleared (0 below f16's normals), stored as f16(h),
// exact; lo = f16((w - h)·2^10) goes to accumulators of its own, scaled
// back by 2^-10 at the end. h + lo·2^-10 is w exactly for Q4_0 and Q8_0
// (w - h has at most 3 or 7 significant bits, the lowest at or above its
// f16 scale's lowest, 2^-24, so lo is a normal f16) and within 2^-21 of it
// for the K formats' f32 values. On the H200, TestDeviceMMA's block
// formats match the CPU reference exactly with it (2026-12-03).
//
// At f32 compute (Tuning.MatmulMMAF32) a is f32, and split too: each a·s
// (s a power of two per row) is rounded to its top 11 significant bits, h
// (0 below f16's normals), and lo = f16((a·s - h)·2^10) holds the rest.
// The products h·b go to the first accumulators, lo·b (and with a split b,
// h·bl) to the second; a split b's lo·bl, under 2^-20 of a term, is left
// out. The sums are f32, and the output is divided by s again. A first
// pass takes s = 1, which keeps every term within 2^-22·max|a| of its f32
// product (f32 itself rounds each to 2^-24 of it) while the row's largest
// |a| is in [2^-4, 2^15): below, elements under 2^-14 keep only f16's
// bits; above, h overflows f16. The invocations note each row's largest
// |a| as they stage it; where a row of the block falls outside, the block
// runs again with each row's own s, which takes its largest |a| into
// [2^14, 2^15). A separate scan of the rows before the products, the first
// version, had cost more than the products (Llama-3.2-1B's prefill 15.7
// ms against 11.0 without it on the H200). At f32 compute the split block
// formats and bf16 take it only with Tuning.MatmulMMAF32Blocks (three
// products a step); the scaled ones below take it by default (two).
//
// With Tuning.MatmulMMAScaled, the formats whose values are an integer q
// times their block's f16 scale d (Q4_0, Q5_0, Q8_0) are not split: b's
// tile holds q, exact in f16, and a step takes one product (two at f32
// compute, a being split). Each span of K that one scale covers (a block,
// or the step where a step is part of one) is taken a fragment at a time:
// its products chained onto zero, p (at f32 compute with a's low parts'
// products folded in, p + pl·2^-10, one more f32 rounding of the span's
// sum: one division, no low accumulators), then added to c divided by 1/d
// element by element: the invocation staging the first run of a column's
// span stores 1/d there, and each row of the divisor matrix repeats those
// values (a load with stride 0). On the H200 this form took Llama-3.2-1B's
// Q8_0 prefill at f32 compute from 13.51 to 12.92 ms of GPU time (Q4_0
// 13.03 to 12.39) against accumulators p and pl per fragment for the
// step, each divided on its own
// (bench/results/2026-12-04-h200-scaled-fold.md). SPIR-V's NV cooperative
// matrices divide element by element but do not multiply so (a matrix
// times a scalar they do); Vulkan's division is within 2.5 ulps for
// divisors in [2^-126, 2^126], which 1/d always is (f16's d is at least
// 2^-24). A block whose d is 0 stores its q as 0 and 1 as its
// divisor. On the H200 TestDeviceMMA's Q4_0, Q5_0 and Q8_0 products
// match the CPU reference with it, at both computes (2026-12-04).

// mmaFrag is the fragment size: 16x16x16, the one shape the devices that
// set Features.SubgroupMatrix run (f16 operands, f32 result).
const mmaFrag = 16

// mmaSubgroup is the subgroup size the kernel assumes: the devices that
// set the feature run it on subgroups of 32 consecutive invocations.
const mmaSubgroup = 32

// mmaTile is a blocking of the subgroup-matrix kernel (Tuning.MatmulMMA):
// a workgroup computes BM x BN of the output in steps of BK along K, each
// of its subgroups a WM x WN part of it (whole fragments); with S slices
// the workgroup has S such sets of subgroups, slice s taking the steps s,
// s+S, ... of K (a product whose output is a few blocks still fills a
// large GPU), their sums added at the end. With double, each slice has
// two sets of tiles: a step's operands are stored into one while the
// products read the other, one barrier a step instead of two.
type mmaTile struct {
	bm, bn, bk, wm, wn, slices int
	double                     bool
}

// parseMMATile parses "BMxBNxBK/WMxWN[+d][*S]".
func parseMMATile(s string) (mmaTile, error) {
	bad := fmt.Errorf("subgroup-matrix tile %q: want BMxBNxBK/WMxWN[+d][*S], each size a multiple of 16, WM dividing BM and WN dividing BN, S a power of two up to 16", s)
	slices := 1
	if body, sl, ok := strings.Cut(s, "*"); ok {
		n, err := strconv.Atoi(sl)
		if err != nil || n < 1 || n > 16 || n&(n-1) != 0 {
			return mmaTile{}, bad
		}
		s, slices = body, n
	}
	s, double := strings.CutSuffix(s, "+d")
	blk, sub, ok := strings.Cut(s, "/")
	if !ok {
		return mmaTile{}, bad
	}
	var v []int
	for _, f := range append(strings.Split(blk, "x"), strings.Split(sub, "x")...) {
		n, err := strconv.Atoi(f)
		if err != nil || n <= 0 || n%mmaFrag != 0 || n > 512 {
			return mmaTile{}, bad
		}
		v = append(v, n)
	}
	if len(v) != 5 {
		return mmaTile{}, bad
	}
	t := mmaTile{v[0], v[1], v[2], v[3], v[4], slices, double}
	if t.bm%t.wm != 0 || t.bn%t.wn != 0 {
		return mmaTile{}, bad
	}
	return t, nil
}

// MatmulMMATiles are the blockings bench/gpu's profile command compares
// (and the tests check).
var MatmulMMATiles = []string{
	"128x128x32/64x64", "128x128x32/32x64", "64x128x32/32x64", "128x64x32/64x32",
	"64x64x32/32x32", "64x64x16/32x32", "64x64x64/32x32", "32x64x32/16x32", "32x32x32/16x16",
	"64x64x32/32x32*2", "64x64x16/32x32*4", "32x64x32/16x32*4", "32x32x32/16x16*4", "32x32x16/16x16*8",
	"128x64x32/64x32*2", "128x64x16/64x32*4", "128x32x16/32x32*4",
	"64x64x32/32x32+d", "32x32x32/16x16+d*4", "64x64x64/32x32+d",
}

// ValidMatmulMMA reports whether s is a value Tuning.MatmulMMA accepts.
func ValidMatmulMMA(s string) error { return validBlockings(s, parseMMATile) }

// sliceThreads is the invocations of one slice.
func (t mmaTile) sliceThreads() int { return (t.bm / t.wm) * (t.bn / t.wn) * mmaSubgroup }

func (t mmaTile) threads() int { return t.slices * t.sliceThreads() }

// The workgroup arrays' row strides, in elements: a K step plus 8 halves
// (rows 16 bytes apart from a multiple of 32 spread over the banks, and
// every fragment's start stays 16-byte aligned). The f16 tiles are arrays
// of vec4<f16>, staged a vector per store, so their offsets count vectors:
// on the H200 a store per half had Llama-3.2-1B's prefill at f32 compute
// take 10.64 ms of GPU time over F16 weights against 8.92, 12.49 against
// 11.65 over Q4_0 (bench/results/2026-12-04-h200-scaled-fold.md).
func (t mmaTile) stride() int { return t.bk + 8 }

// bufs is the number of sets of tiles a slice has.
func (t mmaTile) bufs() int {
	if t.double {
		return 2
	}
	return 1
}

// shared is the workgroup memory, in bytes: each slice's a and b tiles in
// f16 (each twice when split, all twice when double buffered; a split a's
// row exponents and each slice's row maxima besides), a 16x16 f32
// fragment per subgroup of a slice for the output, and scales f32 (the
// block scales of a scaled b).
func (t mmaTile) shared(splitA, splitB bool, scales int) int {
	bm, bn, rows := t.bm, t.bn, 0
	if splitA {
		bm, rows = 2*bm, (1+t.slices)*t.bm*4+16
	}
	if splitB {
		bn *= 2
	}
	return t.slices*t.bufs()*(bm+bn)*t.stride()*2 + rows + t.sliceThreads()/mmaSubgroup*mmaFrag*mmaFrag*4 + scales*4
}

func (t mmaTile) fits(lim Limits, splitA, splitB bool, scales int) bool {
	return t.threads() <= min(lim.MaxInvocationsPerWorkgroup, lim.MaxWorkgroupSizeX) && t.shared(splitA, splitB, scales) <= lim.MaxWorkgroupStorageSize
}

// scaleBlocks is the number of blocks of elems elements whose scales a
// step of the blocking holds per column: its K step's blocks, or the one
// block the step is part of.
func (t mmaTile) scaleBlocks(elems int) int { return max(t.bk/elems, 1) }

// scales is the f32 scales a scaled b of blocks of elems keeps in
// workgroup memory: each slice's (and set's) scaleBlocks per column.
func (t mmaTile) scales(elems int) int { return t.slices * t.bufs() * t.scaleBlocks(elems) * t.bn }

// mmaSplit reports whether b is decoded and split into two f16 parts (a
// block format or bf16, unless scaled).
func (g *gen) mmaSplit() bool {
	dt := g.in[1].DType
	return (dt.IsBlock() || dt == ir.BF16) && !g.mmaScaled()
}

// mmaScaled reports whether b is decoded as integers, exact in f16, with
// each block's scale applied to its partial products rather than split
// (Tuning.MatmulMMAScaled, the formats dequant.Scaled splits).
func (g *gen) mmaScaled() bool {
	_, _, ok := dequant.Scaled(g.in[1].DType)
	return ok && g.tune.MatmulMMAScaled
}

// mmaScaleFloats is the f32 scales a blocking keeps (0 unless scaled).
func (g *gen) mmaScaleFloats(t mmaTile) int {
	if !g.mmaScaled() {
		return 0
	}
	elems, _ := g.in[1].DType.Block()
	return t.scales(elems)
}

// mmaRun is the number of units (4 elements) of a decoded b (split or
// scaled) an invocation decodes together, a run within one block and one
// row of the step (1 for bf16); 0 when the blocking's K step is not whole
// blocks nor a part of one.
func (g *gen) mmaRun(t mmaTile) int {
	dt := g.in[1].DType
	if !dt.IsBlock() {
		return 1
	}
	elems, _ := dt.Block()
	if t.bk%elems != 0 && elems%t.bk != 0 {
		return 0
	}
	run := 1
	for 2*run*t.sliceThreads() <= t.bn*t.bk/4 && (elems/4)%(2*run) == 0 && (t.bk/4)%(2*run) == 0 {
		run *= 2
	}
	return run
}

// pickMMA chooses the subgroup-matrix kernel's blocking, if the product
// can take one: the first of Tuning.MatmulMMA (MatmulMMAF32 at f32
// compute) whose grid has at least MatmulMMAMinGroups workgroups (each
// slice counting as one), else the last that fits. At f32 compute f32
// weights keep the vec4 kernel: they would need splitting too; so do
// the split block formats and bf16 unless MatmulMMAF32Blocks (the scaled
// ones, two products a step, take it), and block formats whose blocking
// leaves fewer workgroups than MatmulMMAF32BlocksMinWorkgroups.
func (g *gen) pickMMA(s mmShape, nb int) (mmaTile, bool) {
	dt := g.in[1].DType
	weights := dt == ir.F16 || (dt.IsBlock() || dt == ir.BF16) && g.tune.MatmulMMABlocks
	list := g.tune.MatmulMMA
	if g.half {
		weights = weights || dt == ir.F32
	} else {
		weights = (dt == ir.F16 || weights && (g.tune.MatmulMMAF32Blocks || g.mmaScaled())) && g.feat.Subgroups
		list = g.tune.MatmulMMAF32
	}
	if g.fault != "" || !g.feat.SubgroupMatrix || list == "" || !s.transpose || s.m <= 16 || s.n%4 != 0 || !weights {
		return mmaTile{}, false
	}
	minGroups := g.tune.MatmulMMAMinGroups
	if minGroups == 0 {
		minGroups = g.tune.MatmulMinGroups
	}
	fits := func(t mmaTile) bool {
		// A split a's row maxima are reduced by shuffles among the
		// invocations of a row, all in whole rounds.
		rows := g.half || t.bk <= 4*mmaSubgroup && t.bm*t.bk/4%t.sliceThreads() == 0
		return s.k%(t.bk*t.slices) == 0 && t.fits(g.lim, !g.half, g.mmaSplit(), g.mmaScaleFloats(t)) && g.mmaRun(t) > 0 && rows
	}
	groups := func(t mmaTile) int { return ceilDiv(s.n, t.bn) * ceilDiv(s.m, t.bm) * nb * t.slices }
	t, ok := pickBlocking(list, parseMMATile, fits, groups, minGroups)
	if ok && !g.half && dt.IsBlock() && groups(t)/t.slices < g.tune.MatmulMMAF32BlocksMinWorkgroups {
		return mmaTile{}, false
	}
	return t, ok
}

// mma is the subgroup-matrix kernel. Per step of BK, a slice's
// invocations copy a's BM x BK and b's BN x BK to the slice's workgroup
// memory as f16, row-major along K; each of its
// subgroups then multiplies its WM/16 fragments of a by its WN/16 of b
// (b's rows loaded column-major: b is transposed) into WM/16 x WN/16 f32
// accumulators. At the end, an accumulator at a time, the slices in turn
// store theirs to a 16x16 f32 scratch per subgroup, the first slice's
// invocations adding them up (in slice order), and write the sum out
// (adding the addend), bounds-checked: rows past M and columns past N were
// read as zeros and are not written.
func (g *gen) mma(s mmShape, nb int, t mmaTile) (*codegen.Kernel, error) {
	sliceT, sgs := t.sliceThreads(), t.threads()/mmaSubgroup
	fm, fn := t.wm/mmaFrag, t.wn/mmaFrag
	split, scaledB, run := g.mmaSplit(), g.mmaScaled(), g.mmaRun(t)
	wide := !g.half // a is f32, split by rows (f32 compute)
	// A scaled b: its integers in tb, and 1 / each column's block scale
	// in ts, applied to the partial products of each span of K that one
	// scale covers (a block, or the step where a step is part of one).
	var qs, scale *dequant.Expr
	elems, span := 0, 0
	if scaledB {
		qs, scale, _ = dequant.Scaled(g.in[1].DType)
		elems, _ = g.in[1].DType.Block()
		span = min(t.bk, elems)
	}
	aElem := "vec4<f16>"
	if wide {
		g.p("enable f16;")
		g.p("enable subgroups;")
		aElem = "vec4<f32>"
	}
	g.p("enable %s;", SubgroupMatrixExt)
	// Under f16 compute a is f16 in memory, and so is b unless split (its
	// f32 too): bound as vec4<f16>, outside the f16 rewrite.
	g.bind("in0", codegen.Read, g.in[0], aElem, 0, -1)
	var sb stored
	if split || scaledB {
		sb = g.bindStored("in1", 1)
	} else {
		g.bind("in1", codegen.Read, g.in[1], "vec4<f16>", 1, -1)
	}
	g.bindAddend("vec4<f32>")
	g.bind("out0", codegen.Write, g.out[0], "vec4<f32>", -1, 0)
	g.p("// subgroup-matrix matmul %dx%dx%d/%dx%d*%d: %d subgroups of %d, %dx%d fragments each", t.bm, t.bn, t.bk, t.wm, t.wn, t.slices, sgs, mmaSubgroup, fm, fn)
	g.p("const M: u32 = %du;", s.m)
	g.p("const N: u32 = %du;", s.n)
	g.p("const NV: u32 = %du; // N / 4", s.n/4)
	g.p("const KV: u32 = %du; // K / 4", s.k/4)
	g.p("const SA: u32 = %du; // row stride of the tiles, in vec4<f16>", t.stride()/4)
	g.p("const STEPS: u32 = %du; // steps of BK per slice", s.k/(t.bk*t.slices))
	bufs, dims := t.bufs(), ""
	if t.double {
		g.p("const ABUF: u32 = %du; // vec4<f16> per set of a's tiles", t.bm*t.stride()/4)
		g.p("const BBUF: u32 = %du; // and of b's", t.bn*t.stride()/4)
		dims = "[2]"
	}
	g.p("var<workgroup> ta: array<vec4<f16>, %d>; // a's rows [S]%s[BM][SA]", t.slices*bufs*t.bm*t.stride()/4, dims)
	if wide {
		g.p("var<workgroup> tal: array<vec4<f16>, %d>; // the low parts of a, times 2^10, as ta", t.slices*bufs*t.bm*t.stride()/4)
	}
	g.p("var<workgroup> tb: array<vec4<f16>, %d>; // b's rows [S]%s[BN][SA]", t.slices*bufs*t.bn*t.stride()/4, dims)
	if split {
		g.p("var<workgroup> tl: array<vec4<f16>, %d>; // the low parts of b, times 2^10, as tb", t.slices*bufs*t.bn*t.stride()/4)
	}
	g.p("var<workgroup> tc: array<f32, %d>; // a 16x16 fragment per subgroup of a slice", sliceT/mmaSubgroup*mmaFrag*mmaFrag)
	if scaledB {
		if t.double {
			g.p("const SBUF: u32 = %du; // f32 per set of scales", t.scaleBlocks(elems)*t.bn)
		}
		g.p("var<workgroup> ts: array<f32, %d>; // 1 / the block scale of each column [S]%s[blocks of a step][BN]", t.scales(elems), dims)
	}
	if wide {
		// After the matrices' arrays, and whole multiples of 16 bytes (BM
		// is): the H200 computed garbage from matrix loads behind a
		// 4-byte array (2026-12-03), as if the driver packed them unaligned.
		g.p("var<workgroup> re: array<u32, %d>; // the biased exponent of each row's largest |a|", t.bm)
		g.p("var<workgroup> rm: array<f32, %d>; // each slice's largest |a| of each row [S][BM]", t.slices*t.bm)
		g.p("var<workgroup> redo: array<u32, 4>; // [0]: a row's largest |a| is outside [2^-4, 2^15)")
	}
	g.entry([3]int{t.threads(), 1, 1})
	g.batchOffsets(s, 4)
	g.p("  let slice = li / %du;", sliceT)
	g.p("  let lt = li %% %du; // the invocation in its slice", sliceT)
	g.p("  let sg = lt / %du; // the subgroup in its slice", mmaSubgroup)
	g.p("  let lane = lt %% %du;", mmaSubgroup)
	g.p("  let sa = slice * %du; // the slice's tiles", bufs*t.bm*t.stride()/4)
	g.p("  let sb = slice * %du;", bufs*t.bn*t.stride()/4)
	if scaledB {
		g.p("  let ss = slice * %du; // the slice's scales", bufs*t.scaleBlocks(elems)*t.bn)
	}
	g.p("  let m0 = wid.y * %du;", t.bm)
	g.p("  let n0 = wid.x * %du;", t.bn)
	g.p("  let wm = sg / %du * %du; // this subgroup's rows of the block", t.bn/t.wn, t.wm)
	g.p("  let wn = sg %% %du * %du; // and columns", t.bn/t.wn, t.wn)
	// Accumulators of the low parts' products: a scaled b folds a's into
	// the high ones.
	lows := split || wide && !scaledB
	for i := 0; i < fm; i++ {
		for j := 0; j < fn; j++ {
			g.p("  var c%d_%d = subgroup_matrix_result<f32, 16, 16>();", i, j)
			if lows {
				g.p("  var l%d_%d = subgroup_matrix_result<f32, 16, 16>(); // the products with a low part", i, j)
			}
		}
	}
	if wide {
		g.p("  if (li == 0u) { redo[0] = 0u; }")
	}
	// The operands' tiles: each step a slice's invocations read BM·BK/4
	// vec4 of a and BN·BK/4 of b (a split b: BN·BK/4 units decoded in runs),
	// in rounds of all of them (the last round guarded where it is
	// partial), into registers one step ahead (the next step's reads are
	// issued before this step's products).
	bkv := t.bk / 4
	type operand struct {
		x, tile, in, batch, rows, bound string // names: register prefix (its tiles' offset is "s" + x), tile, binding, batch offset, block origin, its limit
		items, run                      int    // reads of a step, units per read
		decode                          bool   // a split b: read as f32 units, stored as two parts
		wide                            bool   // a split a: read as f32 vec4, scaled, stored as two parts
	}
	bRun := 1
	if split || scaledB {
		bRun = run
	}
	ops := []operand{{"a", "ta", "in0", "ab", "m0", "M", t.bm * bkv, 1, false, wide}, {"b", "tb", "in1", "bb", "n0", "N", t.bn * bkv / bRun, bRun, split || scaledB, false}}
	type round struct{ e, guard int } // guard: the invocations taking part when partial, else 0
	rounds := func(items int) []round {
		var out []round
		for e := 0; e < ceilDiv(items, sliceT); e++ {
			r := round{e: e}
			if (e+1)*sliceT > items {
				r.guard = items - e*sliceT
			}
			out = append(out, r)
		}
		return out
	}
	each := func(ind string, body func(o operand, r round, ind string)) {
		for _, o := range ops {
			for _, r := range rounds(o.items) {
				if r.guard == 0 {
					body(o, r, ind)
					continue
				}
				g.p("%sif (lt < %du) {", ind, r.guard)
				body(o, r, ind+"  ")
				g.p("%s}", ind)
			}
		}
	}
	each("  ", func(o operand, r round, ind string) {
		item := fmt.Sprintf("(lt + %du)", r.e*sliceT) // the invocation's read (in units: its first)
		if o.run > 1 {
			item += fmt.Sprintf(" * %du", o.run)
		}
		g.p("%slet %sr%d = %s / %du; let %sk%d = %s %% %du;", ind, o.x, r.e, item, bkv, o.x, r.e, item, bkv)
		if o.wide {
			g.p("%svar am%d = 0.0f; // the largest |a| of the row this invocation staged", ind, r.e)
		}
		if o.decode && scaledB {
			g.p("%svar rs%d = 0.0f; // the block's scale", ind, r.e)
		}
		for u := 0; u < o.run; u++ {
			if o.decode || o.wide {
				g.p("%svar r%s%d_%d = vec4<f32>(0.0f);", ind, o.x, r.e, u)
			} else {
				g.p("%svar r%s%d_%d = vec4<f16>(0.0h);", ind, o.x, r.e, u)
			}
		}
	})
	// load reads the step at vec4 k0 of K (an expression) into the registers.
	load := func(k0, ind string) {
		each(ind, func(o operand, r round, ind string) {
			if !o.decode {
				g.p("%sif (%s + %sr%d < %s) { r%s%d_0 = %s[%s + (%s + %sr%d) * KV + %s + %sk%d]; }",
					ind, o.rows, o.x, r.e, o.bound, o.x, r.e, o.in, o.batch, o.rows, o.x, r.e, k0, o.x, r.e)
				return
			}
			g.p("%sif (n0 + br%d < N) {", ind, r.e)
			el := fmt.Sprintf("bb * 4u + ((n0 + br%d) * KV + %s + bk%d) * 4u", r.e, k0, r.e)
			if scaledB {
				for u, x := range g.unitRunOf(sb, qs, el, o.run, ind+"  ") {
					g.p("%s  rb%d_%d = %s;", ind, r.e, u, x)
				}
				g.p("%s  rs%d = %s.x;", ind, r.e, g.unitRunOf(sb, scale, el, 1, ind+"  ")[0])
			} else if sb.dt.IsBlock() {
				for u, x := range g.unitRun(sb, el, o.run, ind+"  ") {
					g.p("%s  rb%d_%d = %s;", ind, r.e, u, x)
				}
			} else {
				g.p("%s  rb%d_0 = %s;", ind, r.e, g.unit4(sb, el, ind+"  "))
			}
			g.p("%s}", ind)
		})
	}
	// tiles is the offset of a slice's tiles of operand x ("a" or "b") in
	// the set buf (an expression; "" for the first).
	tiles := func(x, buf string) string {
		if buf == "" {
			return "s" + x
		}
		return fmt.Sprintf("s%s + %s * %sBUF", x, buf, strings.ToUpper(x))
	}
	// scalesAt is the offset of a slice's scales in the set buf.
	scalesAt := func(buf string) string {
		if buf == "" {
			return "ss"
		}
		return fmt.Sprintf("ss + %s * SBUF", buf)
	}
	// store writes the registers to the tiles of set buf, a split b's as
	// its parts; a split a's scaled by their row's as (1 in the first pass)
	// and their largest |a| noted.
	store := func(ind string, buf string) {
		each(ind, func(o operand, r round, ind string) {
			for u := 0; u < o.run; u++ {
				g.p("%s{ let o = %s + %sr%d * SA + %sk%d + %du;", ind, tiles(o.x, buf), o.x, r.e, o.x, r.e, u)
				reg := fmt.Sprintf("r%s%d_%d", o.x, r.e, u)
				if !o.decode && !o.wide {
					g.p("%s  %s[o] = %s;", ind, o.tile, reg)
					g.p("%s}", ind)
					continue
				}
				// hi and lo: each lane's f16 values (lo: none).
				var hi, lo []string
				for _, comp := range []string{"x", "y", "z", "w"} {
					v := reg + "." + comp
					switch {
					case o.wide:
						g.p("%s  let v%s = %s * as%d; am%d = max(am%d, abs(v%s));", ind, comp, v, r.e, r.e, r.e, comp)
						g.p("%s  let h%s = select(bitcast<f32>((bitcast<u32>(v%s) + 0x1000u) & 0xffffe000u), 0.0f, abs(v%s) < 6.103515625e-05f);", ind, comp, comp, comp)
						hi, lo = append(hi, "f16(h"+comp+")"), append(lo, fmt.Sprintf("f16((v%s - h%s) * 1024.0f)", comp, comp))
					case scaledB:
						// Integers, exact in f16; none in a block scaled by
						// 0 (whose scale is stored as 1), so that its
						// products are 0 without dividing by infinity.
						hi = append(hi, fmt.Sprintf("f16(select(%s, 0.0f, rs%d == 0.0f))", v, r.e))
					default:
						g.p("%s  let h%s = select(bitcast<f32>(bitcast<u32>(%s) & 0xffffe000u), 0.0f, abs(%s) < 6.103515625e-05f);", ind, comp, v, v)
						hi, lo = append(hi, "f16(h"+comp+")"), append(lo, fmt.Sprintf("f16((%s - h%s) * 1024.0f)", v, comp))
					}
				}
				g.p("%s  %s[o] = vec4<f16>(%s);", ind, o.tile, strings.Join(hi, ", "))
				if lo != nil {
					g.p("%s  %s[o] = vec4<f16>(%s);", ind, map[string]string{"ta": "tal", "tb": "tl"}[o.tile], strings.Join(lo, ", "))
				}
				g.p("%s}", ind)
			}
			if o.decode && scaledB {
				// The invocation staging the first run of a span of K
				// that one scale covers stores the scale's inverse.
				g.p("%sif ((bk%d * 4u) %% %du == 0u) { ts[%s + bk%d * 4u / %du * %du + br%d] = select(1.0f / rs%d, 1.0f, rs%d == 0.0f); }",
					ind, r.e, span, scalesAt(buf), r.e, elems, t.bn, r.e, r.e, r.e)
			}
		})
	}
	// fragsA loads step kk's fragments of a's part x ("a", or "al" from
	// tal) in the tiles of set buf, as lets xKK_I; fragsB b's ("b", or "bl"
	// from tl), as lets xKK_J.
	fragsA := func(ind, buf, x string, kk int) {
		for i := 0; i < fm; i++ {
			g.p("%slet %s%d_%d = subgroupMatrixLoad<subgroup_matrix_left<f16, 16, 16>>(&t%s, %s + (wm + %du) * SA + %du, false, SA);", ind, x, kk, i, x, tiles("a", buf), i*mmaFrag, kk*mmaFrag/4)
		}
	}
	fragsB := func(ind, buf, x string, kk int) {
		tile := map[string]string{"b": "tb", "bl": "tl"}[x]
		for j := 0; j < fn; j++ {
			g.p("%slet %s%d_%d = subgroupMatrixLoad<subgroup_matrix_right<f16, 16, 16>>(&%s, %s + (wn + %du) * SA + %du, true, SA);", ind, x, kk, j, tile, tiles("b", buf), j*mmaFrag, kk*mmaFrag/4)
		}
	}
	// spanProducts is products for a scaled b, a fragment at a time: per
	// span of K that one scale covers, the span's fragments loaded, then
	// each accumulator's products of the span chained onto zero (at f32
	// compute a's low parts' too, folded in times 2^-10) and divided by
	// the scales' inverses (matrices divide element by element: each row
	// of sd repeats the columns' values, a load with stride 0).
	spanProducts := func(ind, buf string) {
		for s0 := 0; s0 < t.bk/mmaFrag; s0 += span / mmaFrag {
			kks := span / mmaFrag
			for kk := s0; kk < s0+kks; kk++ {
				fragsA(ind, buf, "a", kk)
				if wide {
					fragsA(ind, buf, "al", kk)
				}
				fragsB(ind, buf, "b", kk)
			}
			blk := s0 * mmaFrag / elems
			for j := 0; j < fn; j++ {
				g.p("%slet sd%d_%d = subgroupMatrixLoad<subgroup_matrix_result<f32, 16, 16>>(&ts, %s + %du + wn + %du, false, 0u);", ind, s0, j, scalesAt(buf), blk*t.bn, j*mmaFrag)
				for i := 0; i < fm; i++ {
					// chain is the span's products of a's part x with
					// fragment (i, j) of b, onto zero: lets named
					// pI_J_KK (pl for a's low parts).
					chain := func(x, name string) string {
						acc := "subgroup_matrix_result<f32, 16, 16>()"
						for kk := s0; kk < s0+kks; kk++ {
							v := fmt.Sprintf("%s%d_%d_%d", name, i, j, kk)
							g.p("%slet %s = subgroupMatrixMultiplyAccumulate(%s%d_%d, b%d_%d, %s);", ind, v, x, kk, i, kk, j, acc)
							acc = v
						}
						return acc
					}
					p := chain("a", "p")
					if wide {
						p = fmt.Sprintf("(%s + %s * 0.0009765625f)", p, chain("al", "pl"))
					}
					g.p("%sc%d_%d = c%d_%d + %s / sd%d_%d;", ind, i, j, i, j, p, s0, j)
				}
			}
		}
	}
	// products multiplies the fragments of the tiles of set buf into the
	// accumulators.
	products := func(ind, buf string) {
		if scaledB {
			spanProducts(ind, buf)
			return
		}
		for kk := 0; kk < t.bk/mmaFrag; kk++ {
			// The products: a's fragment, b's and the accumulator.
			prods := [][3]string{{"a", "b", "c"}}
			fragsA(ind, buf, "a", kk)
			if wide {
				fragsA(ind, buf, "al", kk)
				prods = append(prods, [3]string{"al", "b", "l"})
			}
			fragsB(ind, buf, "b", kk)
			if split {
				fragsB(ind, buf, "bl", kk)
				prods = append(prods, [3]string{"a", "bl", "l"})
			}
			for i := 0; i < fm; i++ {
				for j := 0; j < fn; j++ {
					for _, p := range prods {
						g.p("%s%s%d_%d = subgroupMatrixMultiplyAccumulate(%s%d_%d, %s%d_%d, %s%d_%d);", ind, p[2], i, j, p[0], kk, i, p[1], kk, j, p[2], i, j)
					}
				}
			}
		}
	}
	// steps runs the K loop: every slice runs STEPS steps (K is whole
	// steps of every slice), as a barrier needs; k0 counts vec4. Double
	// buffered, a step's products read the set cur while the next step's
	// operands are stored into the other.
	steps := func(ind string) {
		first := fmt.Sprintf("slice * %du", bkv)
		next := fmt.Sprintf("((it + 1u) * %du + slice) * %du", t.slices, bkv)
		load(first, ind)
		if t.double {
			store(ind, "")
			g.p("%sworkgroupBarrier();", ind)
			g.p("%scur = 0u;", ind)
			g.p("%sfor (var it = 0u; it < STEPS; it++) {", ind)
			g.p("%s  let more = it + 1u < STEPS;", ind)
			g.p("%s  if (more) {", ind)
			load(next, ind+"    ")
			g.p("%s  }", ind)
			products(ind+"  ", "cur")
			g.p("%s  if (more) {", ind)
			store(ind+"    ", "(1u - cur)")
			g.p("%s  }", ind)
			g.p("%s  workgroupBarrier();", ind)
			g.p("%s  cur = 1u - cur;", ind)
			g.p("%s}", ind)
			return
		}
		g.p("%sfor (var it = 0u; it < STEPS; it++) {", ind)
		store(ind+"  ", "")
		g.p("%s  workgroupBarrier();", ind)
		g.p("%s  if (it + 1u < STEPS) {", ind)
		load(next, ind+"    ")
		g.p("%s  }", ind)
		products(ind+"  ", "")
		g.p("%s  workgroupBarrier();", ind)
		g.p("%s}", ind)
	}
	if t.double {
		g.p("  var cur = 0u; // the set of tiles the products read")
	}
	if wide {
		// Two passes of one loop, not the K loop printed twice: on the
		// H200 Llama-3.2-1B Q4_0's kernels took 3.7-4.4 s to make so,
		// 2.5-2.6 s as one loop. The second pass's condition is uniform
		// across the workgroup.
		aRounds := ops[0].items / sliceT
		for e := range aRounds {
			g.p("  var as%d = 1.0f; // the scale of the row this invocation stages", e)
		}
		g.p("  for (var pass = 0u; pass < 2u; pass++) {")
		g.p("    if (pass == 1u) {")
		g.redo(t, aRounds, fm, fn, lows, "      ")
		g.p("    }")
		steps("    ")
		g.p("  }")
	} else {
		steps("  ")
	}
	// Out: each accumulator through the scratch, slice by slice; lane l of
	// a first-slice subgroup sums row l/2, columns 8·(l%%2) .. +7 as two
	// vec4, and writes them.
	g.p("  let ob = wid.z * M * NV;")
	g.p("  let sr = lane / 2u;")
	g.p("  let sc = lane %% 2u * 8u;")
	g.p("  let x = sg * 256u + sr * 16u + sc;")
	g.p("  var o0 = vec4<f32>(0.0f);")
	g.p("  var o1 = vec4<f32>(0.0f);")
	for i := 0; i < fm; i++ {
		for j := 0; j < fn; j++ {
			// Each slice's accumulators; the low parts' scaled back.
			accs := [][2]string{{"c", ""}}
			if lows {
				accs = append(accs, [2]string{"l", " * 0.0009765625f"})
			}
			op := "="
			for sl := 0; sl < t.slices; sl++ {
				for _, a := range accs {
					store := fmt.Sprintf("subgroupMatrixStore(&tc, sg * 256u, %s%d_%d, false, 16u);", a[0], i, j)
					if t.slices == 1 {
						g.p("  %s", store)
					} else {
						g.p("  if (slice == %du) { %s }", sl, store)
					}
					g.p("  workgroupBarrier();")
					g.p("  if (slice == 0u) { o0 %s vec4<f32>(tc[x], tc[x + 1u], tc[x + 2u], tc[x + 3u])%s; o1 %s vec4<f32>(tc[x + 4u], tc[x + 5u], tc[x + 6u], tc[x + 7u])%s; }", op, a[1], op, a[1])
					g.p("  workgroupBarrier();")
					op = "+="
				}
			}
			g.p("  if (slice == 0u) {")
			g.p("    let gm = m0 + wm + %du + sr;", i*mmaFrag)
			if wide {
				g.p("    let inv = select(1.0f, bitcast<f32>((re[wm + %du + sr] - 14u) << 23u), redo[0] != 0u); // 1 / as", i*mmaFrag)
			}
			for h := 0; h < 2; h++ {
				v := fmt.Sprintf("o%d", h)
				if wide {
					v = fmt.Sprintf("(o%d * inv)", h)
				}
				g.p("    { let gn = n0 + wn + %du + sc + %du;", j*mmaFrag, 4*h)
				g.p("      if (gm < M && gn < N) { let o = ob + gm * NV + gn / 4u; out0[o] = %s; } }", g.addend(v, "o"))
			}
			g.p("  }")
		}
	}
	g.p("}")
	grid := [3]int{ceilDiv(s.n, t.bn), ceilDiv(s.m, t.bm), nb}
	if s.n == 0 || s.m == 0 || nb == 0 {
		grid = [3]int{0, 1, 1}
	}
	return g.kernel([3]int{t.threads(), 1, 1}, grid), nil
}

// redo ends the first pass of the f32-compute kernel (a split by rows)
// and opens the second, at the top of the passes' loop: the rows' largest
// |a|, reduced over the invocations that staged each row (bkv
// consecutive lanes, by shuffles, then over the slices), decide whether a
// second pass with each row's own scale is needed; if not the loop ends,
// else each invocation's rows take their scales (as) and the accumulators
// start again. Every invocation reads the decision after a barrier, so
// the second pass's barriers stay in uniform control flow. rounds is the
// number of a's rows an invocation stages a step.
func (g *gen) redo(t mmaTile, rounds, fm, fn int, lows bool, ind string) {
	bkv := t.bk / 4
	for e := range rounds {
		for x := 1; x < bkv; x *= 2 {
			g.p("%sam%d = max(am%d, subgroupShuffleXor(am%d, %du));", ind, e, e, e, x)
		}
		g.p("%sif (ak%d == 0u) { rm[slice * %du + ar%d] = am%d; }", ind, e, t.bm, e, e)
	}
	g.p("%sworkgroupBarrier();", ind)
	g.p("%sif (li < %du) {", ind, t.bm)
	g.p("%s  var mx = rm[li];", ind)
	for sl := 1; sl < t.slices; sl++ {
		g.p("%s  mx = max(mx, rm[%du + li]);", ind, sl*t.bm)
	}
	g.p("%s  re[li] = clamp(bitcast<u32>(mx) >> 23u, 15u, 254u);", ind)
	g.p("%s  if (m0 + li < M && (mx >= 32768.0f || (mx < 0.0625f && mx > 0.0f))) { redo[0] = 1u; }", ind)
	g.p("%s}", ind)
	g.p("%sworkgroupBarrier();", ind)
	g.p("%sif (redo[0] == 0u) { break; }", ind)
	for e := range rounds {
		g.p("%sas%d = bitcast<f32>((268u - re[ar%d]) << 23u); // 2^(141 - E): the row's largest |a| into [2^14, 2^15)", ind, e, e)
	}
	for i := 0; i < fm; i++ {
		for j := 0; j < fn; j++ {
			g.p("%sc%d_%d = subgroup_matrix_result<f32, 16, 16>();", ind, i, j)
			if lows {
				g.p("%sl%d_%d = subgroup_matrix_result<f32, 16, 16>();", ind, i, j)
			}
		}
	}
}
