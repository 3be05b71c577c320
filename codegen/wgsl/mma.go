package wgsl

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/tapml/tapml/codegen"
	"github.com/tapml/tapml/ir"
)

// The subgroup-matrix matmul: with f16 compute on a device with
// Features.SubgroupMatrix (Vulkan's cooperative matrices: NVIDIA's tensor
// cores), M > 1 products with a transposed b multiply 16x16 f16 fragments
// into f32 accumulators, and compute what the other kernels do: f16
// compute stores a in f16 already, and b's f16 (and f16-stored f32)
// weights are f16. A b decoded from a block format (or bf16) is not: an
// element of a Q4_0 block, a 4-bit integer times an f16 scale, has up to
// 14 significant bits, Q8_0's 18. So each decoded value w is split into
// f16 parts hi = f16(w) and lo = f16((w - hi)·2^10), each multiplied into
// accumulators of its own, the second's sum scaled by 2^-10 at the end:
// hi + lo·2^-10 is w exactly for Q4_0 and Q8_0 and within 2^-22 of it for
// the K formats' f32 values. The scale keeps lo a normal f16 (w's lowest
// bit is its f16 scale's, at least 2^-24; times 2^10, at least f16's
// smallest normal 2^-14): unscaled, most low parts are subnormal, which
// the H200 flushed to zero (the products were b rounded to f16).

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
// large GPU), their sums added at the end.
type mmaTile struct{ bm, bn, bk, wm, wn, slices int }

// parseMMATile parses "BMxBNxBK/WMxWN[*S]".
func parseMMATile(s string) (mmaTile, error) {
	bad := fmt.Errorf("subgroup-matrix tile %q: want BMxBNxBK/WMxWN[*S], each size a multiple of 16, WM dividing BM and WN dividing BN, S a power of two up to 16", s)
	slices := 1
	if body, sl, ok := strings.Cut(s, "*"); ok {
		n, err := strconv.Atoi(sl)
		if err != nil || n < 1 || n > 16 || n&(n-1) != 0 {
			return mmaTile{}, bad
		}
		s, slices = body, n
	}
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
	t := mmaTile{v[0], v[1], v[2], v[3], v[4], slices}
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
}

// ValidMatmulMMA reports whether s is a value Tuning.MatmulMMA accepts.
func ValidMatmulMMA(s string) error {
	if s == "" {
		return nil
	}
	for _, t := range strings.Split(s, ",") {
		if _, err := parseMMATile(strings.TrimSpace(t)); err != nil {
			return err
		}
	}
	return nil
}

// sliceThreads is the invocations of one slice.
func (t mmaTile) sliceThreads() int { return (t.bm / t.wm) * (t.bn / t.wn) * mmaSubgroup }

func (t mmaTile) threads() int { return t.slices * t.sliceThreads() }

// The workgroup arrays' row strides, in elements: a K step plus 8 halves
// (rows 16 bytes apart from a multiple of 32 spread over the banks, and
// every fragment's start stays 16-byte aligned).
func (t mmaTile) stride() int { return t.bk + 8 }

// shared is the workgroup memory, in bytes: each slice's a and b tiles in
// f16 (b's twice when split into high and low parts) and a 16x16 f32
// fragment per subgroup of a slice for the output.
func (t mmaTile) shared(split bool) int {
	bn := t.bn
	if split {
		bn *= 2
	}
	return t.slices*(t.bm+bn)*t.stride()*2 + t.sliceThreads()/mmaSubgroup*mmaFrag*mmaFrag*4
}

func (t mmaTile) fits(lim Limits, split bool) bool {
	return t.threads() <= min(lim.MaxInvocationsPerWorkgroup, lim.MaxWorkgroupSizeX) && t.shared(split) <= lim.MaxWorkgroupStorageSize
}

// mmaSplit reports whether b is split into high and low f16 parts: a
// weight not stored as f16 (or f32, which f16 compute stores as f16).
func (g *gen) mmaSplit() bool { dt := g.in[1].DType; return dt.IsBlock() || dt == ir.BF16 }

// pickMMA chooses the subgroup-matrix kernel's blocking, if the product
// can take one: the first of Tuning.MatmulMMA whose grid has at least
// MatmulMMAMinGroups workgroups (each slice counting as one), else the
// last that fits.
func (g *gen) pickMMA(s mmShape, nb int) (mmaTile, bool) {
	if g.fault != "" || !g.half || !g.feat.SubgroupMatrix || g.tune.MatmulMMA == "" ||
		!s.transpose || s.m <= 16 || s.n%4 != 0 {
		return mmaTile{}, false
	}
	minGroups := g.tune.MatmulMMAMinGroups
	if minGroups == 0 {
		minGroups = g.tune.MatmulMinGroups
	}
	var last mmaTile
	found := false
	for _, f := range strings.Split(g.tune.MatmulMMA, ",") {
		t, err := parseMMATile(strings.TrimSpace(f))
		if err != nil || s.k%(t.bk*t.slices) != 0 || !t.fits(g.lim, g.mmaSplit()) {
			continue
		}
		if g.mmaBlock(t) < 0 {
			continue
		}
		if ceilDiv(s.n, t.bn)*ceilDiv(s.m, t.bm)*nb*t.slices >= minGroups {
			return t, true
		}
		last, found = t, true
	}
	return last, found
}

// mmaBlock is the number of units (4 elements) of b a block-format b's
// invocations decode together (a run within one block), 1 for other
// dtypes; -1 when the blocking cannot take b's format (a K step not whole
// blocks).
func (g *gen) mmaBlock(t mmaTile) int {
	dt := g.in[1].DType
	if !dt.IsBlock() {
		return 1
	}
	elems, _ := dt.Block()
	if t.bk%elems != 0 && elems%t.bk != 0 {
		return -1
	}
	// The invocations share BN·BK/4 units; each decodes a run of them
	// (a power of two within a block and a row of the step).
	run := 1
	for 2*run*t.sliceThreads() <= t.bn*t.bk/4 && (elems/4)%(2*run) == 0 && (t.bk/4)%(2*run) == 0 {
		run *= 2
	}
	return run
}

// mma is the subgroup-matrix kernel. Per step of BK, a slice's
// invocations copy a's BM x BK and b's BN x BK (decoded, for a stored b)
// to the slice's workgroup memory as f16, row-major along K; each of its
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
	run := g.mmaBlock(t)
	dt := g.in[1].DType
	g.p("enable %s;", SubgroupMatrixExt)
	g.bind("in0", codegen.Read, g.in[0], "vec4<f16>", 0, -1)
	var sb stored
	split := g.mmaSplit()
	if split {
		sb = g.bindStored("in1", 1)
	} else {
		// f16 weights, and f32 ones (stored as f16 under f16 compute).
		g.bind("in1", codegen.Read, g.in[1], "vec4<f16>", 1, -1)
	}
	g.bindAddend("vec4<f32>")
	g.bind("out0", codegen.Write, g.out[0], "vec4<f32>", -1, 0)
	g.p("// subgroup-matrix matmul %dx%dx%d/%dx%d*%d: %d subgroups of %d, %dx%d fragments each", t.bm, t.bn, t.bk, t.wm, t.wn, t.slices, sgs, mmaSubgroup, fm, fn)
	g.p("const M: u32 = %du;", s.m)
	g.p("const N: u32 = %du;", s.n)
	g.p("const NV: u32 = %du; // N / 4", s.n/4)
	g.p("const KV: u32 = %du; // K / 4", s.k/4)
	g.p("const SA: u32 = %du; // row stride of the tiles, in f16", t.stride())
	g.p("const STEPS: u32 = %du; // steps of BK per slice", s.k/(t.bk*t.slices))
	g.p("var<workgroup> ta: array<f16, %d>; // a's rows [S][BM][SA]", t.slices*t.bm*t.stride())
	g.p("var<workgroup> tb: array<f16, %d>; // b's rows [S][BN][SA]", t.slices*t.bn*t.stride())
	if split {
		g.p("var<workgroup> tl: array<f16, %d>; // the low parts of b's decoded values, as tb", t.slices*t.bn*t.stride())
	}
	g.p("var<workgroup> tc: array<f32, %d>; // a 16x16 fragment per subgroup of a slice", sliceT/mmaSubgroup*mmaFrag*mmaFrag)
	g.entry([3]int{t.threads(), 1, 1})
	g.batchOffsets(s, 4)
	g.p("  let slice = li / %du;", sliceT)
	g.p("  let lt = li %% %du; // the invocation in its slice", sliceT)
	g.p("  let sg = lt / %du; // the subgroup in its slice", mmaSubgroup)
	g.p("  let lane = lt %% %du;", mmaSubgroup)
	g.p("  let sa = slice * %du; // the slice's tiles", t.bm*t.stride())
	g.p("  let sb = slice * %du;", t.bn*t.stride())
	g.p("  let m0 = wid.y * %du;", t.bm)
	g.p("  let n0 = wid.x * %du;", t.bn)
	g.p("  let wm = sg / %du * %du; // this subgroup's rows of the block", t.bn/t.wn, t.wm)
	g.p("  let wn = sg %% %du * %du; // and columns", t.bn/t.wn, t.wn)
	for i := 0; i < fm; i++ {
		for j := 0; j < fn; j++ {
			g.p("  var c%d_%d = subgroup_matrix_result<f32, 16, 16>();", i, j)
			if split {
				g.p("  var l%d_%d = subgroup_matrix_result<f32, 16, 16>(); // b's low parts' products, times 2^10", i, j)
			}
		}
	}
	bkv := t.bk / 4
	// Each step's global reads go to registers (ra*, rb*) one step ahead:
	// the next step's are issued before this step's products. a is
	// BM·BK/4 vec4, b BN·BK/4 units in runs of `run`, both in rounds of
	// all the invocations (the last round guarded where it is partial).
	type round struct {
		e     int
		guard int // invocations taking part when partial, else 0
	}
	rounds := func(items, per int) []round {
		var out []round
		for e := 0; e < ceilDiv(items, sliceT*per); e++ {
			r := round{e: e}
			if (e+1)*sliceT*per > items {
				r.guard = (items - e*sliceT*per) / per
			}
			out = append(out, r)
		}
		return out
	}
	aRounds, bRounds := rounds(t.bm*bkv, 1), rounds(t.bn*bkv, run)
	guarded := func(ind string, r round, body func(ind string)) {
		if r.guard == 0 {
			body(ind)
			return
		}
		g.p("%sif (lt < %du) {", ind, r.guard)
		body(ind + "  ")
		g.p("%s}", ind)
	}
	// Per round: the tile row and K offset (vec4) of the invocation's item.
	for _, r := range aRounds {
		g.p("  let ar%d = (lt + %du) / %du; let ak%d = (lt + %du) %% %du;", r.e, r.e*sliceT, bkv, r.e, r.e*sliceT, bkv)
		g.p("  var ra%d = vec4<f16>(0.0h);", r.e)
	}
	bElem := "vec4<f16>(0.0h)"
	if split {
		bElem = "vec4<f32>(0.0f)"
	}
	for _, r := range bRounds {
		g.p("  let br%d = (lt + %du) * %du / %du; let bk%d = (lt + %du) * %du %% %du;", r.e, r.e*sliceT, run, bkv, r.e, r.e*sliceT, run, bkv)
		for u := 0; u < run; u++ {
			g.p("  var rb%d_%d = %s;", r.e, u, bElem)
		}
	}
	// load reads the step at vec4 k0 of K (an expression) into the registers.
	load := func(k0, base string) {
		for _, r := range aRounds {
			guarded(base, r, func(ind string) {
				g.p("%sif (m0 + ar%d < M) { ra%d = in0[ab + (m0 + ar%d) * KV + %s + ak%d]; }", ind, r.e, r.e, r.e, k0, r.e)
			})
		}
		for _, r := range bRounds {
			guarded(base, r, func(ind string) {
				g.p("%sif (n0 + br%d < N) {", ind, r.e)
				in := ind + "  "
				el := fmt.Sprintf("bb * 4u + ((n0 + br%d) * KV + %s + bk%d) * 4u", r.e, k0, r.e)
				switch {
				case !split:
					g.p("%srb%d_0 = in1[bb + (n0 + br%d) * KV + %s + bk%d];", in, r.e, r.e, k0, r.e)
				case dt.IsBlock():
					for u, x := range g.unitRun(sb, el, run, in) {
						g.p("%srb%d_%d = %s;", in, r.e, u, x)
					}
				default:
					g.p("%srb%d_0 = %s;", in, r.e, g.unit4(sb, el, in))
				}
				g.p("%s}", ind)
			})
		}
	}
	// store writes the registers to the tiles as f16.
	store := func(base string) {
		comps := []string{"x", "y", "z", "w"}
		for _, r := range aRounds {
			guarded(base, r, func(ind string) {
				g.p("%s{ let o = sa + ar%d * SA + ak%d * 4u;", ind, r.e, r.e)
				for c, comp := range comps {
					g.p("%s  ta[o + %du] = ra%d.%s;", ind, c, r.e, comp)
				}
				g.p("%s}", ind)
			})
		}
		for _, r := range bRounds {
			guarded(base, r, func(ind string) {
				for u := 0; u < run; u++ {
					g.p("%s{ let o = sb + br%d * SA + (bk%d + %du) * 4u;", ind, r.e, r.e, u)
					for c, comp := range comps {
						x := fmt.Sprintf("rb%d_%d.%s", r.e, u, comp)
						if !split {
							g.p("%s  tb[o + %du] = %s;", ind, c, x)
							continue
						}
						g.p("%s  { let hi = f16(%s); tb[o + %du] = hi; tl[o + %du] = f16((%s - f32(hi)) * 1024.0f); }", ind, x, c, c, x)
					}
					g.p("%s}", ind)
				}
			})
		}
	}
	// Every slice runs STEPS steps (K is whole steps of every slice), as a
	// barrier needs; k0 counts vec4.
	load(fmt.Sprintf("slice * %du", bkv), "  ")
	g.p("  for (var it = 0u; it < STEPS; it++) {")
	store("    ")
	g.p("    workgroupBarrier();")
	g.p("    if (it + 1u < STEPS) {")
	load(fmt.Sprintf("((it + 1u) * %du + slice) * %du", t.slices, bkv), "      ")
	g.p("    }")
	for kk := 0; kk < t.bk/mmaFrag; kk++ {
		for i := 0; i < fm; i++ {
			g.p("    let a%d_%d = subgroupMatrixLoad<subgroup_matrix_left<f16, 16, 16>>(&ta, sa + (wm + %du) * SA + %du, false, SA);", kk, i, i*mmaFrag, kk*mmaFrag)
		}
		// parts: b's fragments (tile, name) and the accumulators they go to.
		parts := [][2]string{{"tb", "c"}}
		if split {
			parts = append(parts, [2]string{"tl", "l"})
		}
		for _, p := range parts {
			for j := 0; j < fn; j++ {
				g.p("    let %s%d_%d = subgroupMatrixLoad<subgroup_matrix_right<f16, 16, 16>>(&%s, sb + (wn + %du) * SA + %du, true, SA);", p[0], kk, j, p[0], j*mmaFrag, kk*mmaFrag)
			}
		}
		for i := 0; i < fm; i++ {
			for j := 0; j < fn; j++ {
				for _, p := range parts {
					g.p("    %s%d_%d = subgroupMatrixMultiplyAccumulate(a%d_%d, %s%d_%d, %s%d_%d);", p[1], i, j, kk, i, p[0], kk, j, p[1], i, j)
				}
			}
		}
	}
	g.p("    workgroupBarrier();")
	g.p("  }")
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
			// Each slice's accumulator, and its low parts' scaled back.
			acc := [][2]string{{"c", ""}}
			if split {
				acc = append(acc, [2]string{"l", " * 0.0009765625f"})
			}
			op := "="
			for sl := 0; sl < t.slices; sl++ {
				for _, a := range acc {
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
			for h := 0; h < 2; h++ {
				g.p("    { let gn = n0 + wn + %du + sc + %du;", j*mmaFrag, 4*h)
				g.p("      if (gm < M && gn < N) { let o = ob + gm * NV + gn / 4u; out0[o] = %s; } }", g.addend(fmt.Sprintf("o%d", h), "o"))
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
