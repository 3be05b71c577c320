package wgsl

import (
	"cmp"
	"fmt"
	"strconv"
	"strings"

	"github.com/tapml/tapml/codegen"
	"github.com/tapml/tapml/ir"
)

// matmul kernels. Three variants, chosen by shape:
//
//   - GEMV with transpose_b (M = 1, b is [N, K]: the decode step of every
//     linear layer): L lanes share one output row, each folding a strided
//     part of K (as vec4 when K % 4 == 0; about 16 vec4 per lane, L <= 32),
//     then a tree in workgroup memory sums the lanes; R = 256/L rows per
//     workgroup.
//   - GEMV without transpose_b (M = 1, b is [K, N]): one invocation per four
//     outputs (vec4 when N % 4 == 0), reading b's rows coalesced.
//   - Tiled (M > 1): a workgroup computes a BM×BN block of the output,
//     staging BM×BK of a and BK×BN of b in workgroup memory per step of K;
//     each invocation accumulates a TM×TN register block (4×4 for the large
//     tile, 1×4 for the small-M tile), strided so that global writes and
//     workgroup-memory reads are contiguous across invocations.
//
// Leading (batch) dims broadcast; the batch index is wid.z.

type mmShape struct {
	m, n, k   int
	batch     []int // output batch dims
	aB, bB    []int // input batch dims
	transpose bool
}

func (g *gen) mmShape() mmShape {
	a, b := sizes(g.in[0]), sizes(g.in[1])
	o := sizes(g.out[0])
	s := mmShape{m: a[len(a)-2], k: a[len(a)-1], transpose: g.attrs.Bool("transpose_b")}
	s.n = o[len(o)-1]
	s.batch = o[:len(o)-2]
	s.aB = a[:len(a)-2]
	s.bB = b[:len(b)-2]
	return s
}

// batchOffsets emits ab and bb, the element offsets of batch z in a and b
// (divided by div, for vec4 views).
func (g *gen) batchOffsets(s mmShape, div int) {
	if len(s.batch) == 0 {
		g.p("  let ab = 0u;")
		g.p("  let bb = 0u;")
		return
	}
	c := g.coords(s.batch, "wid.z")
	g.p("  let ab = (%s) * %du;", broadcastOffset(s.batch, s.aB, c), s.m*s.k/div)
	g.p("  let bb = (%s) * %du;", broadcastOffset(s.batch, s.bB, c), s.k*s.n/div)
}

func genMatmul(g *gen) (*codegen.Kernel, error) {
	s := g.mmShape()
	// b may be a weight in a storage dtype (the registry's Storage: with
	// transpose_b), decoded in registers as the kernels read it.
	if g.in[0].DType != ir.F32 || g.in[1].DType != ir.F32 && !(s.transpose && isStored(g.in[1].DType)) {
		return nil, fmt.Errorf("matmul needs f32 inputs (b may be stored with transpose_b), got %s and %s", g.in[0], g.in[1])
	}
	nb := prod(s.batch)
	if s.m == 1 && s.transpose {
		return g.gemvT(s, nb)
	}
	if s.m == 1 {
		return g.gemvN(s, nb)
	}
	return g.tiled(s, nb)
}

// gemvT computes out[z, 0, n] = Σ_k a[z, 0, k]·b[z, n, k].
//
// The lanes of one output row each fold a strided part of K, a chunk of c
// elements per step (gemvKinds: a vec4 of f32, eight f16, a run of whole
// Q4_0..Q8_0 blocks), then sum. With subgroup operations each subgroup
// takes rows in turn (its lanes one row, subgroupAdd sums them), R rows a
// workgroup, whatever the subgroup size (subgroups are taken as runs of
// consecutive local indices, as the dialect's test checks); without them
// L lanes (a constant) share a row and a tree in workgroup memory sums
// them, R = 256/L rows a workgroup (times Tuning.GEMVTreeBatch, the rows
// a row's lanes take at once, whose trees then sum together).
func (g *gen) gemvT(s mmShape, nb int) (*codegen.Kernel, error) {
	// rms_norm_matmul (x, g, w) normalizes a's row first: its weight is
	// input 2, and every invocation takes part in the row's sum of
	// squares. rms_norm_swiglu (x, g, wg, wu) does too and takes two
	// products of the row, gate and up, for silu(gate)·up.
	// rms_norm_qkv (x, g, wq, wk, wv) computes the columns of its three
	// products as one range of N = Nq + Nk + Nv: each row falls in one
	// segment (seg), whose weight it reads and whose output it writes.
	swiglu, qkv := g.op == ir.OpRMSNormSwiGLU, g.op == ir.OpRMSNormQKV
	norm := g.op == ir.OpRMSNormMatmul || swiglu || qkv
	vec := s.k%4 == 0 && s.k > 0
	first := 1
	if norm {
		first = 2
	}
	var ws []gemvWeight
	for i := first; i < len(g.in) && (i == first || swiglu || qkv); i++ {
		w := gemvWeight{name: "in" + strconv.Itoa(i), acc: "acc", in: i}
		if swiglu && len(ws) > 0 {
			w.acc = "uacc"
		}
		ws = append(ws, w)
	}
	c := gemvKinds(ws, g.in, s.k, g.tune.GEMVChunk)
	units := s.k / c
	sub := g.feat.Subgroups
	wg := g.threads(256)
	l, r := 0, 0 // lanes a row (without subgroups), rows a workgroup
	seg := 0     // with subgroups: lanes a row when a subgroup takes several (GEMVRowLanes)
	batch := 1   // rows a subgroup, or a row's L lanes, take at once (Tuning.GEMVBatch, GEMVTreeBatch)
	if sub {
		r, wg, seg = g.gemvSubgroupRows(s, nb, wg, units, c, norm)
		batch = g.gemvBatch(s, nb, r, c, ws, g.tune.GEMVBatch)
	} else {
		l = g.gemvTreeLanes(s, nb, wg, units, c)
		r = wg / l
		batch = g.gemvBatch(s, nb, r, c, ws, g.tune.GEMVTreeBatch)
	}
	r *= batch
	red := wg // the tree's slots: a batch of rows sums at once
	if !sub {
		red *= batch
	}
	grid, gid := g.foldDims(ceilDiv(s.n, r), 2)
	grid[2] = nb
	if s.n == 0 || nb == 0 {
		grid = [3]int{0, 1, 1}
	}
	if sub {
		g.p("enable subgroups;")
	}
	elem := "f32"
	if vec {
		elem = "vec4<f32>"
	}
	g.bind("in0", codegen.Read, g.in[0], elem, 0, -1)
	if norm {
		g.bind("in1", codegen.Read, g.in[1], elem, 1, -1)
	}
	for j := range ws {
		w := &ws[j]
		switch w.kind {
		case gemvF32:
			g.bind(w.name, codegen.Read, g.in[w.in], elem, w.in, -1)
		case gemvHalf8:
			w.sb = g.bindStoredAs(w.name, w.in, "vec4<u32>")
		default:
			w.sb = g.bindStored(w.name, w.in)
		}
	}
	g.bindAddend("f32")
	for j := range g.out {
		g.bind("out"+strconv.Itoa(j), codegen.Write, g.out[j], "f32", -1, j)
	}
	g.f16Helper()
	g.p("const N: u32 = %du;", s.n)
	if qkv {
		g.p("const N0: u32 = %du;", sizes(g.in[2])[0])
		g.p("const N1: u32 = %du;", sizes(g.in[3])[0])
	}
	g.p("const KA: u32 = %du; // K in units of %s", s.k/max(1, min(c, 4)), elem)
	g.p("const KU: u32 = %du; // K in chunks of %d elements", units, c)
	g.p("const R: u32 = %du; // rows per workgroup", r)
	if !sub {
		g.p("const L: u32 = %du; // lanes per row", l)
	}
	if l > 1 && !sub || norm {
		g.p("var<workgroup> red: array<f32, %d>;", red)
	}
	// The norm's rows stage g·x in workgroup memory when it fits: each
	// lane then reads one vec4 of it per four elements, and the sums are
	// scaled by inv once at the end. GEMVStageA stages the plain row too,
	// GEMVNoStage none.
	stage := (norm && !g.tune.GEMVNoStage || !norm && g.tune.GEMVStageA) && vec && (s.k+red)*4 <= g.lim.MaxWorkgroupStorageSize
	if stage {
		g.p("var<workgroup> act: array<vec4<f32>, %d>;", s.k/4)
	}
	if sub {
		g.entry([3]int{wg, 1, 1}, "@builtin(subgroup_size) sgs: u32", "@builtin(subgroup_invocation_id) sgi: u32")
	} else {
		g.entry([3]int{wg, 1, 1})
	}
	div := 1
	if vec {
		div = 4
	}
	g.batchOffsets(s, div)
	a := func(k string) string { return fmt.Sprintf("in0[ab + %s]", k) }
	if norm {
		g.normPrologue(wg, s.k, vec, sub, stage)
		a = func(k string) string { return fmt.Sprintf("(in1[%s] * (inv * in0[ab + %s]))", k, k) }
		if stage {
			a = func(k string) string { return fmt.Sprintf("act[%s]", k) }
		}
	} else if stage {
		g.p("  for (var j = li; j < KA; j += %du) { act[j] = in0[ab + j]; }", wg)
		g.barrier(true)
		a = func(k string) string { return fmt.Sprintf("act[%s]", k) }
	}
	// A subgroup's rows are step apart; under GEMVBatch it takes batch of
	// them at once (rows r, r + step, ...), so that each lane has that
	// many rows' loads in flight.
	step := ""
	switch {
	case sub && seg > 0:
		// Segments of L lanes, each a row; a subgroup smaller than the
		// segment is one (R·L invocations make one pass of the rows
		// otherwise, so every lane of a subgroup loops alike).
		g.p("  let L = min(%du, sgs);", seg)
		g.p("  let lane = sgi %% L;")
		step = fmt.Sprintf("%du / L", wg)
	case sub:
		g.p("  let lane = sgi;")
		g.p("  let L = sgs;")
		step = fmt.Sprintf("max(%du / L, 1u)", wg)
	default:
		g.p("  let lane = li %% L;")
		g.p("  let r = li / L;")
		if batch > 1 {
			g.p("  let step = %du; // the rows of one pass of the lanes", wg/l)
		}
	}
	switch {
	case step != "" && batch > 1:
		g.p("  let step = %s;", step)
		g.p("  for (var r = li / L; r < R; r += %du * step) {", batch)
	case sub && seg > 0:
		g.p("  for (var r = li / L; r < R; r += %s) {", step)
	case sub:
		g.p("  for (var r = li / L; r < R; r += %s) { // a workgroup may be one partial subgroup", step)
	}
	g.p("  let n_ = %s * R + r;", gid)
	g.p("  let valid = n_ < N;")
	if qkv {
		g.p("  let nc = min(n_, N - 1u);")
		g.p("  let seg = select(select(2u, 1u, nc < N0 + N1), 0u, nc < N0);")
		g.p("  let n = nc - select(select(N0 + N1, N0, seg == 1u), 0u, seg == 0u);")
	} else {
		g.p("  let n = min(n_, N - 1u);")
	}
	last := "N - 1u" // the last row a batch row may read
	if qkv && batch > 1 {
		// The workgroup's rows are all in seg (gemvBatch); a row past
		// them is clamped into it, and not stored.
		g.p("  let s0 = nc - n;")
		g.p("  let s1 = select(select(N, N0 + N1, seg == 1u), N0, seg == 0u);")
		last = "s1 - 1u"
	}
	for b := 1; b < batch; b++ {
		// A row past the workgroup's R belongs to the next workgroup.
		g.p("  let r%d = r + %du * step;", b, b)
		g.p("  let valid%[1]d = r%[1]d < R && %[2]s * R + r%[1]d < N;", b, gid)
		if qkv {
			g.p("  let n%[1]d = min(%[2]s * R + r%[1]d, %[3]s) - s0;", b, gid, last)
		} else {
			g.p("  let n%[1]d = min(%[2]s * R + r%[1]d, %[3]s);", b, gid, last)
		}
	}
	for i, w := range ws {
		if i == 0 || w.acc != ws[0].acc { // rms_norm_qkv's weights share one
			for b := range batch {
				g.p("  var %s = 0.0f;", rowAcc(w.acc, b))
			}
		}
	}
	bk := "k"
	if g.faultIs(FaultWrongIndex) {
		bk = "k + 1u"
	}
	term := func(w gemvWeight, row int, k string) string {
		return g.gemvTerm(w, c, vec, a, rowVar("n", row), k, strings.ReplaceAll(bk, "k", k))
	}
	// Rows taken at once are loads in flight enough: their kernels,
	// several rows' decoding long, are not unrolled too.
	unroll := 1
	if g.fault == "" && batch == 1 && (g.tune.GEMVUnroll == 2 || g.tune.GEMVUnroll == 4) {
		unroll = g.tune.GEMVUnroll
	}
	if qkv {
		for j, w := range ws {
			switch j {
			case 0:
				g.p("  if (seg == 0u) {")
			case len(ws) - 1:
				g.p("  } else {")
			default:
				g.p("  } else if (seg == %du) {", j)
			}
			g.gemvSums([]gemvWeight{w}, unroll, batch, term)
		}
		g.p("  }")
	}
	if !qkv {
		g.gemvSums(ws, unroll, batch, term)
	}
	sums := ws
	if qkv {
		sums = ws[:1]
	}
	for _, w := range sums {
		switch {
		case sub && seg > 0:
			for b := range batch {
				g.p("  for (var o = L / 2u; o > 0u; o = o >> 1u) { %[1]s = %[1]s + subgroupShuffleXor(%[1]s, o); }", rowAcc(w.acc, b))
			}
		case sub:
			for b := range batch {
				g.p("  %[1]s = subgroupAdd(%[1]s);", rowAcc(w.acc, b))
			}
		case l > 1 && batch > 1:
			// The batch's rows in one tree, wg slots apart.
			slot := func(b int) string { return fmt.Sprintf("%du + li", b*wg) }
			for b := range batch {
				g.p("  red[%s] = %s;", slot(b), rowAcc(w.acc, b))
			}
			g.barrier(true)
			g.p("  for (var s_ = L / 2u; s_ > 0u; s_ = s_ >> 1u) {")
			g.p("    if (lane < s_) {")
			for b := range batch {
				g.p("      red[%[1]s] = red[%[1]s] + red[%[1]s + s_];", slot(b))
			}
			g.p("    }")
			g.p("    workgroupBarrier();")
			g.p("  }")
			for b := range batch {
				g.p("  %s = red[%s];", rowAcc(w.acc, b), slot(b))
			}
		case l > 1:
			// One tree per product: each invocation reads back only its
			// own slot of red before the next tree writes it.
			g.p("  red[li] = %s;", w.acc)
			g.barrier(true)
			g.p("  for (var s_ = L / 2u; s_ > 0u; s_ = s_ >> 1u) {")
			g.p("    if (lane < s_) { red[li] = red[li] + red[li + s_]; }")
			g.p("    workgroupBarrier();")
			g.p("  }")
			g.p("  %s = red[li];", w.acc)
		}
	}
	if stage && norm {
		for _, w := range sums {
			for b := range batch {
				g.p("  %[1]s = inv * %[1]s;", rowAcc(w.acc, b))
			}
		}
	}
	for b := range batch {
		if batch > 1 {
			g.p("  {") // the epilogue's lets are the row's
		}
		res := g.addend(rowAcc("acc", b), "wid.z * N + "+rowVar("n", b))
		if swiglu {
			// The fused_elementwise mul(silu($0), $1) this op replaces, with
			// the same formulas.
			g.p("  let x = %s;", rowAcc("acc", b))
			g.p("  let a = %s;", formulas[ir.OpSilu].f32)
			g.p("  let b = %s;", rowAcc("uacc", b))
			res = formulas[ir.OpMul].f32
		}
		valid, n := rowVar("valid", b), rowVar("n", b)
		if qkv {
			acc := rowAcc("acc", b)
			g.p("  if (%s && lane == 0u) {", valid)
			g.p("    if (seg == 0u) { out0[wid.z * N0 + %s] = %s; }", n, acc)
			g.p("    else if (seg == 1u) { out1[wid.z * N1 + %s] = %s; }", n, acc)
			g.p("    else { out2[wid.z * (N - N0 - N1) + %s] = %s; }", n, acc)
			g.p("  }")
		} else {
			g.p("  if (%s && lane == 0u) { out0[wid.z * N + %s] = %s; }", valid, n, res)
		}
		if batch > 1 {
			g.p("  }")
		}
	}
	if sub {
		g.p("  }")
	}
	g.p("}")
	return g.kernel([3]int{wg, 1, 1}, grid), nil
}

// gemvBatch is the rows a subgroup (or a row's lanes) take at once
// (knob: GEMVBatch, or GEMVTreeBatch without subgroups; at most 8) in a
// GEMV of r rows a workgroup over ws, read c elements a lane a step:
// halved while the grid would have fewer than GEMVBatchMinGroups
// workgroups, and 1 unless every weight is a run of blocks under
// GEMVBatchBytes (64) a lane (Q4_0's 36 at c = 64; f16's 128 and f32's
// 256 measured slower taken several at once on the H200). With subgroups
// a run of gemvWideRun bytes or more (Q8_0's 68) takes at most 2 rows: on
// the H200 Llama-3.2-1B's Q8_0 decode step took 1,490 µs of GPU time so,
// 1,506-1,750 with 4 or 8, 1,762 with one; without subgroups 8 did best
// (1,438 against 1,480 with 2 and 1,814 with one). rms_norm_qkv takes rows at
// once only where a workgroup's rows all fall in one of its three products
// (N0 and N1 multiples of the rows).
func (g *gen) gemvBatch(s mmShape, nb, r, c int, ws []gemvWeight, knob int) int {
	most := 0 // bytes of the widest weight's run, a lane a step
	for _, w := range ws {
		if w.kind != gemvRun {
			return 1
		}
		elems, bytes := g.in[w.in].DType.Block()
		most = max(most, c*bytes/elems)
	}
	if knob < 2 || most >= cmp.Or(g.tune.GEMVBatchBytes, gemvWideRun) || g.fault != "" {
		return 1
	}
	if most >= gemvWideRun && g.feat.Subgroups {
		knob = min(knob, 2)
	}
	b := pow2Floor(min(knob, 8))
	for b > 1 && ceilDiv(s.n, r*b)*nb < g.tune.GEMVBatchMinGroups {
		b /= 2
	}
	if g.op == ir.OpRMSNormQKV {
		n0, n1 := sizes(g.in[2])[0], sizes(g.in[3])[0]
		for b > 1 && (n0%(r*b) != 0 || n1%(r*b) != 0) {
			b /= 2
		}
	}
	return b
}

// gemvWideRun is the bytes a lane reads of a weight a step from which a
// GEMV takes rows at once only with Tuning.GEMVBatchBytes above it, and
// with subgroups at most 2 (gemvBatch).
const gemvWideRun = 64

// rowVar is the WGSL variable v of a GEMV's row b of those a subgroup
// takes at once (valid, valid1, ...).
func rowVar(v string, b int) string {
	if b == 0 {
		return v
	}
	return v + strconv.Itoa(b)
}

// rowAcc is the accumulator acc of that row b (acc, acc_1, ...: acc1 is
// acc's second partial sum under GEMVUnroll).
func rowAcc(acc string, b int) string {
	if b == 0 {
		return acc
	}
	return acc + "_" + strconv.Itoa(b)
}

// gemvLanes is the number of lanes that share a row of the transposed
// GEMV, for rows of units chunks of c elements: GEMVLanes (a power of two
// up to 64), else about 64 elements a lane, up to 32. Measured on the
// H200 with vec4 chunks: 32 lanes for K = 4096 (1.0 TFLOP/s, 2 TB/s of
// weights), 4 for K = 288.
func (g *gen) gemvLanes(units, c int) int {
	l := 1
	if g.tune.GEMVLanes > 0 {
		for l*2 <= min(g.tune.GEMVLanes, 64) {
			l *= 2
		}
		return l
	}
	for l*2 <= 32 && l*2*max(1, 64/c) <= units {
		l *= 2
	}
	return l
}

// gemvTreeLanes is the number of lanes L that share a row without subgroup
// operations (a workgroup of wg has wg/L rows): gemvLanes, doubled (up to
// 64, while each lane keeps at least 16 elements) while the grid has fewer
// than GEMVMinGroups workgroups, so that short GEMVs still fill a large
// GPU.
func (g *gen) gemvTreeLanes(s mmShape, nb, wg, units, c int) int {
	l := g.gemvLanes(units, c)
	if mg := g.tune.GEMVMinGroups; mg > 0 && g.tune.GEMVLanes == 0 {
		for l*2 <= min(64, wg) && l*2*max(1, 16/c) <= units && ceilDiv(s.n, wg/l)*nb < mg {
			l *= 2
		}
	}
	return min(l, wg)
}

// gemvSubgroupRows returns the rows R a workgroup, the workgroup size and
// the lanes of a row (0: a subgroup, whatever its size) with subgroup
// operations. By default a subgroup takes a row at a time: wg/gemvLanes
// rows, halved (down to one) while the grid has fewer than GEMVMinGroups
// workgroups, and 32 invocations a row (one subgroup of the usual size)
// up to wg. A fused norm's workgroups each stage the row (2·4·K bytes
// read): past stagedGroups workgroups (the 32000-row classifier) they
// take more rows, up to 64. GEMVRows, GEMVThreads and GEMVRowLanes
// replace those choices.
func (g *gen) gemvSubgroupRows(s mmShape, nb, wg, units, c int, norm bool) (r, threads, seg int) {
	const stagedGroups = 1024
	r = wg / min(g.gemvLanes(units, c), wg)
	if g.tune.GEMVLanes == 0 {
		for mg := g.tune.GEMVMinGroups; r > 1 && ceilDiv(s.n, r)*nb < mg; {
			r /= 2
		}
		for norm && r < 64 && ceilDiv(s.n, r)*nb > stagedGroups {
			r *= 2
		}
	}
	if g.tune.GEMVRows > 0 {
		r = pow2Floor(min(g.tune.GEMVRows, 256))
	}
	if g.tune.GEMVRowLanes >= 2 {
		seg = pow2Floor(min(g.tune.GEMVRowLanes, 32))
		r = min(r, wg/seg)
		return r, r * seg, seg
	}
	if g.tune.GEMVThreads > 0 {
		return r, g.threads(g.tune.GEMVThreads), 0
	}
	return r, min(wg, 32*r), 0
}

// pow2Floor is the largest power of two <= n (n >= 1).
func pow2Floor(n int) int {
	p := 1
	for p*2 <= n {
		p *= 2
	}
	return p
}

// gemvTerm is the WGSL of what chunk k (weights' chunk kb: k, or the next
// under wrong_index) of K adds to w's sum: the dot products of a's elements
// (a(j) is a's unit j: a vec4 of f32, or an f32 when K is not a multiple
// of 4) with w's row n (a WGSL variable), decoded. A stored weight's
// chunk is clamped into the tensor when kb is not k (a read past its end
// is undefined in SPIR-V).
func (g *gen) gemvTerm(w gemvWeight, c int, vec bool, a func(string) string, n, k, kb string) string {
	const ind = "    "
	if w.kind == gemvF32 && !vec {
		return fmt.Sprintf("%s * %s[bb + %s * KU + %s]", a(k), w.name, n, kb)
	}
	// The chunk's index in the tensor's chunks (bb counts f32 or vec4).
	ci := fmt.Sprintf("bb + %s * KU + %s", n, kb)
	if vec && c != 4 {
		ci = fmt.Sprintf("bb * 4u / %du + %s * KU + %s", c, n, kb)
	}
	if kb != k {
		ci = fmt.Sprintf("min(%s, %du)", ci, numel(g.in[w.in])/c-1)
	}
	ci = "(" + ci + ")"
	if !vec {
		return fmt.Sprintf("%s * %s", a(k), g.elem(w.sb, ci, ind))
	}
	var parts []string
	dots := func(first int, vs []string) {
		for j, v := range vs {
			parts = append(parts, fmt.Sprintf("dot(%s, %s)", a(scaled(k, c/4, first+j)), v))
		}
	}
	switch w.kind {
	case gemvF32:
		for j := range c / 4 {
			dots(j, []string{fmt.Sprintf("%s[bb + %s]", w.name, scaled("("+n+" * KU + "+kb+")", c/4, j))})
		}
	case gemvUnit:
		for j := range c / 4 {
			dots(j, []string{g.unit4(w.sb, scaled(ci, c, 4*j), ind)})
		}
	case gemvHalf8:
		for j := range c / 8 {
			v := g.fresh("h")
			g.p("%slet %s = %s[%s];", ind, v, w.name, scaled(ci, c/8, j))
			dots(2*j, w.sb.halfRun(g, v))
		}
	case gemvRun:
		p := runBlocks(w.sb.dt)
		elems, bytes := w.sb.dt.Block()
		run := p * elems
		for j := range c / run {
			wb := g.fresh("wb")
			g.p("%slet %s = (%s) * %du;", ind, wb, scaled(ci, c/run, j), p*bytes/4)
			for i, b := range g.blockRun(w.sb, wb, p, ind) {
				first := len(parts)
				dots(j*run/4+i*elems/4, b.units)
				if b.scale != "" {
					parts = append(parts[:first], fmt.Sprintf("%s * (%s)", b.scale, strings.Join(parts[first:], " + ")))
				}
			}
		}
	}
	return strings.Join(parts, " + ")
}

// scaled is the WGSL of x·m + j (x an expression, m and j constants).
func scaled(x string, m, j int) string {
	if m != 1 {
		x = fmt.Sprintf("%s * %du", x, m)
	}
	if j != 0 {
		x = fmt.Sprintf("%s + %du", x, j)
	}
	return x
}

// gemvKind is how a transposed GEMV reads a weight.
type gemvKind int

const (
	gemvF32   gemvKind = iota // f32: vec4 (or f32) loads
	gemvUnit                  // stored: a unit of 4 (or an element) at a time (stored.go's unit4, elem)
	gemvHalf8                 // f16, bf16: eight elements in a vec4<u32>
	gemvRun                   // Q4_0..Q8_0: a run of whole blocks (stored.go's blockRun)
)

// gemvKinds sets the kind of each weight for rows of k elements and
// returns the chunk c, the elements of K a lane takes per step: 1 when k
// is not a multiple of 4, else the largest of the weights' reads (all
// powers of two that divide k), which each weight then reads c/its own,
// times mult (Tuning.GEMVChunk: 2 or 4) while that divides k.
func gemvKinds(ws []gemvWeight, in []ir.Type, k, mult int) int {
	c := gemvReads(ws, in, k)
	for m := min(mult, 4); c >= 4 && m >= 2 && k%(2*c) == 0; m /= 2 {
		c *= 2
	}
	return c
}

// gemvReads is gemvKinds' chunk before the multiplier.
func gemvReads(ws []gemvWeight, in []ir.Type, k int) int {
	c := 1
	if k%4 == 0 && k > 0 {
		c = 4
	}
	for i := range ws {
		w := &ws[i]
		dt := in[w.in].DType
		w.stored = isStored(dt)
		w.kind = gemvF32
		if w.stored {
			w.kind = gemvUnit
		}
		if c == 1 {
			continue
		}
		elems, _ := dt.Block()
		switch {
		case (dt == ir.F16 || dt == ir.BF16) && k%8 == 0:
			w.kind, c = gemvHalf8, max(c, 8)
		case dt.IsBlock() && elems == 32 && k%(runBlocks(dt)*elems) == 0:
			// The K formats (256 elements a block) keep to units: a run
			// a lane would leave most lanes of a row idle.
			w.kind, c = gemvRun, max(c, runBlocks(dt)*elems)
		}
	}
	return c
}

// gemvN computes out[z, 0, n] = Σ_k a[z, 0, k]·b[z, k, n].
func (g *gen) gemvN(s mmShape, nb int) (*codegen.Kernel, error) {
	vec := s.n%4 == 0 && g.fault != FaultF16Overflow
	w := 1
	elem := "f32"
	if vec {
		w, elem = 4, "vec4<f32>"
	}
	nu := s.n / w
	wg := g.threads(min(256, max(nu, 64)))
	grid, gid := g.foldDims(ceilDiv(nu, wg), 2)
	grid[2] = nb
	if s.n == 0 || nb == 0 {
		grid = [3]int{0, 1, 1}
	}
	g.bind("in0", codegen.Read, g.in[0], "f32", 0, -1)
	g.bind("in1", codegen.Read, g.in[1], elem, 1, -1)
	g.bindAddend(elem)
	g.bind("out0", codegen.Write, g.out[0], elem, -1, 0)
	g.f16Helper()
	g.p("const NU: u32 = %du; // N in units of %s", nu, elem)
	g.p("const K: u32 = %du;", s.k)
	g.entry([3]int{wg, 1, 1})
	g.p("  let n = %s * %du + li;", gid, wg)
	g.p("  if (n >= NU) { return; }")
	g.batchOffsets(s, 1)
	g.p("  let bu = bb / %du;", w)
	row := "k"
	if g.faultIs(FaultWrongIndex) {
		row = "k + 1u"
	}
	g.p("  var acc = %s(0.0f);", elem)
	g.p("  for (var k = 0u; k < K; k++) {")
	g.p("    acc = %s;", g.ov(fmt.Sprintf("acc + in0[ab + k] * in1[bu + (%s) * NU + n]", row)))
	g.p("  }")
	g.p("  out0[wid.z * NU + n] = %s;", g.addend("acc", "wid.z * NU + n"))
	g.p("}")
	return g.kernel([3]int{wg, 1, 1}, grid), nil
}

// normPrologue emits inv, the reciprocal RMS of the workgroup's row of x
// (in0 at ab, k elements, KA units), as rms_norm computes it: every
// invocation sums the squares of a strided part, then a tree in red (or,
// with subgroups, subgroupAdd and one slot of red per subgroup) combines
// them. red is free again after it. With stage, the same pass stores g·x
// (in1·in0) in act, which the reduction's barrier publishes.
func (g *gen) normPrologue(wg, k int, vec, sub, stage bool) {
	eps := g.attrs.Float("eps")
	g.p("  var ss = 0.0f;")
	switch {
	case stage:
		g.p("  for (var j = li; j < KA; j += %du) { let v = in0[ab + j]; ss = ss + dot(v, v); act[j] = in1[j] * v; }", wg)
	case vec:
		g.p("  for (var j = li; j < KA; j += %du) { let v = in0[ab + j]; ss = ss + dot(v, v); }", wg)
	default:
		g.p("  for (var j = li; j < KA; j += %du) { let v = in0[ab + j]; ss = ss + v * v; }", wg)
	}
	total := "red[0]"
	if sub {
		g.p("  ss = subgroupAdd(ss);")
		g.p("  if (sgi == 0u) { red[li / sgs] = ss; }")
		g.barrier(true)
		g.p("  var tot = 0.0f;")
		g.p("  for (var j = 0u; j < (%du + sgs - 1u) / sgs; j++) { tot = tot + red[j]; }", wg)
		total = "tot"
	} else {
		g.p("  red[li] = ss;")
		g.treeReduce(wg, sum)
	}
	g.p("  let inv = 1.0f / sqrt(%s / %s + %s);", total, f32Lit(float64(k)), f32Lit(eps))
	if !sub {
		g.p("  workgroupBarrier();")
	}
}

// genRMSNormMatmul generates rms_norm_matmul: matmul's GEMV with
// transpose_b, one row of x per wid.z, each workgroup normalizing its row
// first. The pass that makes the op (passes/norm.go) fuses only rows that
// are one token (a decode step), where the products are GEMVs anyway.
func genRMSNormMatmul(g *gen) (*codegen.Kernel, error) {
	if g.in[0].DType != ir.F32 || g.in[1].DType != ir.F32 || g.in[2].DType != ir.F32 && !isStored(g.in[2].DType) {
		return nil, fmt.Errorf("rms_norm_matmul needs f32 x and g (w may be stored), got %s, %s and %s", g.in[0], g.in[1], g.in[2])
	}
	x, w := sizes(g.in[0]), sizes(g.in[2])
	rows := prod(x[:len(x)-1])
	s := mmShape{m: 1, k: x[len(x)-1], n: w[0], batch: []int{rows}, aB: []int{rows}, transpose: true}
	return g.gemvT(s, rows)
}

// gemvSums emits the k loop of a transposed GEMV: each lane adds its
// units' terms (term(w, b, k): row b of the batch rows) of every weight in
// ws to the weight's accumulators, with unroll independent partial sums
// when unroll > 1.
func (g *gen) gemvSums(ws []gemvWeight, unroll, batch int, term func(gemvWeight, int, string) string) {
	add := func(w gemvWeight, part int, k string) {
		for b := range batch {
			acc := rowAcc(w.acc, b)
			if part > 0 {
				acc += strconv.Itoa(part)
			}
			g.p("    %s = %s;", acc, g.ov(acc+" + "+term(w, b, k)))
		}
	}
	if unroll > 1 {
		// Independent partial sums: unroll loads in flight per lane.
		for _, w := range ws {
			for b := range batch {
				for j := 1; j < unroll; j++ {
					g.p("  var %s%d = 0.0f;", rowAcc(w.acc, b), j)
				}
			}
		}
		g.p("  var k = lane;")
		g.p("  for (; k + %du * L < KU; k += %du * L) {", unroll-1, unroll)
		for _, w := range ws {
			add(w, 0, "k")
			for j := 1; j < unroll; j++ {
				add(w, j, fmt.Sprintf("(k + %du * L)", j))
			}
		}
		g.p("  }")
		g.p("  for (; k < KU; k += L) {")
		for _, w := range ws {
			add(w, 0, "k")
		}
		g.p("  }")
		for _, w := range ws {
			for b := range batch {
				if unroll == 2 {
					g.p("  %[1]s = %[1]s + %[1]s1;", rowAcc(w.acc, b))
				} else {
					g.p("  %[1]s = (%[1]s + %[1]s1) + (%[1]s2 + %[1]s3);", rowAcc(w.acc, b))
				}
			}
		}
	} else {
		g.p("  for (var k = lane; k < KU; k += L) {")
		for _, w := range ws {
			add(w, 0, "k")
		}
		g.p("  }")
	}
}

// genNormProducts generates rms_norm_swiglu (rms_norm_matmul's GEMV with
// two weights, gate and up, whose products meet in silu(gate)·up) and
// rms_norm_qkv (the GEMV over its three weights' columns in turn).
func genNormProducts(g *gen) (*codegen.Kernel, error) {
	n := 0
	for _, w := range g.in[2:] {
		if g.in[0].DType != ir.F32 || g.in[1].DType != ir.F32 || w.DType != ir.F32 && !isStored(w.DType) {
			return nil, fmt.Errorf("%s needs f32 x and g (the weights may be stored), got %s, %s and %s", g.op, g.in[0], g.in[1], w)
		}
		n += sizes(w)[0]
	}
	if g.op == ir.OpRMSNormSwiGLU {
		n = sizes(g.in[2])[0]
	}
	x := sizes(g.in[0])
	rows := prod(x[:len(x)-1])
	s := mmShape{m: 1, k: x[len(x)-1], n: n, batch: []int{rows}, aB: []int{rows}, transpose: true}
	return g.gemvT(s, rows)
}

// gemvWeight is one weight a GEMV multiplies its row by: its binding's
// name, how it is stored, and the WGSL variable its sums go to.
type gemvWeight struct {
	name, acc string
	in        int // the node's input
	stored    bool
	kind      gemvKind
	sb        stored
}

// bindAddend binds matmul's optional third input c (a residual add fused
// into the product, passes/residual.go) as an array of elem, laid out as
// the output.
func (g *gen) bindAddend(elem string) {
	if g.hasAddend() {
		g.bind("in2", codegen.Read, g.in[2], elem, 2, -1)
	}
}

// hasAddend reports whether the node is a matmul with the addend c.
func (g *gen) hasAddend() bool { return g.op == ir.OpMatmul && len(g.in) > 2 }

// addend returns v plus element idx of matmul's third input when it has
// one (the output's element idx), else v.
func (g *gen) addend(v, idx string) string {
	if g.hasAddend() {
		return fmt.Sprintf("%s + in2[%s]", v, idx)
	}
	return v
}

// tile is the blocking of the tiled matmul.
type tile struct{ bm, bn, bk, tm, tn int }

func (g *gen) pickTile(m int) tile {
	t := tile{64, 64, 16, 4, 4}
	if m <= 16 {
		t = tile{16, 64, 16, 1, 4}
	}
	if (t.bm/t.tm)*(t.bn/t.tn) > min(g.lim.MaxInvocationsPerWorkgroup, g.lim.MaxWorkgroupSizeX) {
		t = tile{32, 32, 16, 4, 4} // 64 invocations: every device allows it
	}
	return t
}

// tiled computes out[z] = a[z] × b[z] (b transposed when s.transpose).
func (g *gen) tiled(s mmShape, nb int) (*codegen.Kernel, error) {
	if t, ok := g.pickMMA(s, nb); ok {
		return g.mma(s, nb, t)
	}
	if v, ok := g.pickVec(s, nb); ok {
		return g.tiledVec(s, nb, v)
	}
	t := g.pickTile(s.m)
	wgx, wgy := t.bn/t.tn, t.bm/t.tm
	wg := wgx * wgy
	grid := [3]int{ceilDiv(s.n, t.bn), ceilDiv(s.m, t.bm), nb}
	if s.n == 0 || s.m == 0 || nb == 0 {
		grid = [3]int{0, 1, 1}
	}
	sb, isStoredB, hw := stored{}, isStored(g.in[1].DType), g.hwHalf(1)
	if isStoredB {
		if hw {
			g.enableF16()
		}
		g.bind("in0", codegen.Read, g.in[0], "f32", 0, -1)
		if hw {
			g.bind("in1", codegen.Read, g.in[1], "f16", 1, -1)
		} else {
			sb = g.bindStored("in1", 1)
		}
		g.bindAddend("f32")
		g.bind("out0", codegen.Write, g.out[0], "f32", -1, 0)
	} else {
		g.bindAll()
	}
	g.f16Helper()
	g.p("const M: u32 = %du;", s.m)
	g.p("const N: u32 = %du;", s.n)
	g.p("const K: u32 = %du;", s.k)
	g.p("const BM: u32 = %du;", t.bm)
	g.p("const BN: u32 = %du;", t.bn)
	g.p("const BK: u32 = %du;", t.bk)
	g.p("var<workgroup> As: array<f32, %d>; // [BK][BM]", t.bk*t.bm)
	g.p("var<workgroup> Bs: array<f32, %d>; // [BK][BN]", t.bk*t.bn)
	g.entry([3]int{wg, 1, 1})
	g.batchOffsets(s, 1)
	g.p("  let tx = li %% %du;", wgx)
	g.p("  let ty = li / %du;", wgx)
	g.p("  let m0 = wid.y * BM;")
	g.p("  let n0 = wid.x * BN;")
	for i := 0; i < t.tm; i++ {
		for j := 0; j < t.tn; j++ {
			g.p("  var acc%d_%d = 0.0f;", i, j)
		}
	}
	bk := ""
	if g.faultIs(FaultWrongIndex) {
		bk = " + 1u"
	}
	g.p("  for (var k0 = 0u; k0 < K; k0 += BK) {")
	g.p("    for (var e = li; e < BM * BK; e += %du) {", wg)
	g.p("      let mm = e / BK; let kk = e %% BK; let gm = m0 + mm; let gk = k0 + kk;")
	g.p("      var v = 0.0f;")
	g.p("      if (gm < M && gk < K) { v = in0[ab + gm * K + gk]; }")
	g.p("      As[kk * BM + mm] = v;")
	g.p("    }")
	g.p("    for (var e = li; e < BN * BK; e += %du) {", wg)
	if s.transpose {
		g.p("      let nn = e / BK; let kk = e %% BK; let gn = n0 + nn; let gk = k0 + kk;")
		g.p("      var v = 0.0f;")
		if isStoredB {
			g.p("      if (gn < N && gk < K) {")
			idx := fmt.Sprintf("bb + gn * K + min(gk%s, K - 1u)", bk)
			if hw {
				g.p("        v = %s;", g.loadHalf("in1", idx, "f32", "        "))
			} else {
				g.p("        v = %s;", g.elem(sb, idx, "        "))
			}
			g.p("      }")
		} else {
			g.p("      if (gn < N && gk < K) { v = in1[bb + gn * K + gk%s]; }", bk)
		}
	} else {
		g.p("      let kk = e / BN; let nn = e %% BN; let gn = n0 + nn; let gk = k0 + kk;")
		g.p("      var v = 0.0f;")
		g.p("      if (gn < N && gk < K) { v = in1[bb + (gk%s) * N + gn]; }", bk)
	}
	g.p("      Bs[kk * BN + nn] = v;")
	g.p("    }")
	g.barrier(true)
	g.p("  for (var kk = 0u; kk < BK; kk++) {")
	for i := 0; i < t.tm; i++ {
		g.p("    let a%d = As[kk * BM + ty + %du];", i, i*wgy)
	}
	for j := 0; j < t.tn; j++ {
		g.p("    let b%d = Bs[kk * BN + tx + %du];", j, j*wgx)
	}
	for i := 0; i < t.tm; i++ {
		for j := 0; j < t.tn; j++ {
			g.p("    acc%d_%d = %s;", i, j, g.ov(fmt.Sprintf("acc%d_%d + a%d * b%d", i, j, i, j)))
		}
	}
	g.p("  }")
	g.p("    workgroupBarrier();")
	g.p("  }")
	g.p("  let ob = wid.z * M * N;")
	for i := 0; i < t.tm; i++ {
		g.p("  let gm%d = m0 + ty + %du;", i, i*wgy)
		for j := 0; j < t.tn; j++ {
			idx := fmt.Sprintf("ob + gm%d * N + n0 + tx + %du", i, j*wgx)
			g.p("  if (gm%d < M && n0 + tx + %du < N) { out0[%s] = %s; }", i, j*wgx, idx, g.addend(fmt.Sprintf("acc%d_%d", i, j), idx))
		}
	}
	g.p("}")
	return g.kernel([3]int{wg, 1, 1}, grid), nil
}

// vecTile is a blocking of the vec4 tiled kernel (Tuning.Matmul).
type vecTile struct {
	bm, bn, bk, tm, tn int
	prefetch, double   bool
	// rows4: an invocation loads a vec4 along K of 4 consecutive rows
	// and stores them transposed, 4 vec4 (else one vec4, stored as 4
	// scalars).
	rows4 bool
	// slices is the number of parts of K the workgroup's invocations
	// split among them (1: no split): a power of two.
	slices int
}

// parseVecTile parses "BMxBNxBK/TMxTN[+p|+d][+t][*S]".
func parseVecTile(s string) (vecTile, error) {
	v := vecTile{slices: 1}
	bad := fmt.Errorf("matmul tile %q: want BMxBNxBK/TMxTN[+p|+d][+t][*S]", s)
	body := s
	if b, sl, ok := strings.Cut(s, "*"); ok {
		n, err := strconv.Atoi(sl)
		if err != nil || n < 1 || n > 64 || n&(n-1) != 0 {
			return v, fmt.Errorf("matmul tile %q: the K slices S must be a power of two up to 64", s)
		}
		body, v.slices = b, n
	}
	if b, ok := strings.CutSuffix(body, "+t"); ok {
		body, v.rows4 = b, true
	}
	if b, ok := strings.CutSuffix(body, "+p"); ok {
		body, v.prefetch = b, true
	} else if b, ok := strings.CutSuffix(body, "+d"); ok {
		body, v.prefetch, v.double = b, true, true
	}
	blk, thr, ok := strings.Cut(body, "/")
	if !ok {
		return v, bad
	}
	nums := func(s string, n int) ([]int, bool) {
		f := strings.Split(s, "x")
		if len(f) != n {
			return nil, false
		}
		out := make([]int, n)
		for i, x := range f {
			v, err := strconv.Atoi(x)
			if err != nil || v <= 0 {
				return nil, false
			}
			out[i] = v
		}
		return out, true
	}
	b, ok1 := nums(blk, 3)
	t, ok2 := nums(thr, 2)
	if !ok1 || !ok2 {
		return v, bad
	}
	v.bm, v.bn, v.bk, v.tm, v.tn = b[0], b[1], b[2], t[0], t[1]
	if v.tm%4 != 0 || v.tn%4 != 0 || v.bk%4 != 0 || v.bm%v.tm != 0 || v.bn%v.tn != 0 {
		return v, fmt.Errorf("matmul tile %q: TM, TN and BK must be multiples of 4 dividing the block", s)
	}
	return v, nil
}

// MatmulTiles are the candidate blockings of Tuning.Matmul and
// Tuning.MatmulMedium that bench/gpu measures (and the tests check).
// Those with K slices (*S) are for products whose output is too small to
// fill a large GPU with one invocation per register block (prefill's
// M = 128 rows); +t trades scalar stores into workgroup memory for
// vec4 ones.
var MatmulTiles = []string{
	"32x32x16/4x4+p", "32x64x16/4x4+p",
	"64x64x16/4x4", "64x64x16/4x4+p", "64x64x16/4x4+d",
	"128x64x16/8x4+p", "128x64x16/8x4+d",
	"128x128x8/8x8", "128x128x8/8x8+p", "128x128x8/8x8+d",
	"128x128x16/8x8+p", "128x128x16/8x8+d",
	"128x128x8/8x8+p+t",
	"32x32x16/4x4+p*4", "32x32x16/4x4+p+t*4", "32x32x16/4x4+d*4", "32x32x8/4x4+p*8",
	"32x64x16/4x4+p*2", "64x64x16/4x4+p*2", "32x64x8/8x8+p*8", "64x64x16/8x8+p*4", "128x32x8/8x4+p*4",
	"128x16x8/8x4+p*8", "16x16x16/4x4+p*8", "16x16x16/4x4+p+t*8", "16x16x16/4x4+p*16",
}

// ValidMatmulTile reports whether s is a value Tuning.Matmul accepts.
func ValidMatmulTile(s string) error {
	if s == "scalar" {
		return nil
	}
	return validBlockings(s, parseVecTile)
}

// validBlockings reports whether list, "" or blockings separated by
// commas, parses.
func validBlockings[T any](list string, parse func(string) (T, error)) error {
	if list == "" {
		return nil
	}
	for _, b := range strings.Split(list, ",") {
		if _, err := parse(strings.TrimSpace(b)); err != nil {
			return err
		}
	}
	return nil
}

// pickBlocking chooses a blocking from list (blockings separated by
// commas): the first that fits whose grid has at least minGroups
// workgroups (groups counts each K slice as one), else the last that fits.
func pickBlocking[T any](list string, parse func(string) (T, error), fits func(T) bool, groups func(T) int, minGroups int) (T, bool) {
	var last T
	found := false
	for _, b := range strings.Split(list, ",") {
		t, err := parse(strings.TrimSpace(b))
		if err != nil || !fits(t) {
			continue
		}
		if groups(t) >= minGroups {
			return t, true
		}
		last, found = t, true
	}
	return last, found
}

// sliceThreads is the number of invocations of one K slice.
func (v vecTile) sliceThreads() int { return (v.bm / v.tm) * (v.bn / v.tn) }

func (v vecTile) threads() int { return v.slices * v.sliceThreads() }

func (v vecTile) groups(s mmShape, nb int) int {
	return ceilDiv(s.n, v.bn) * ceilDiv(s.m, v.bm) * nb
}

// tileWords is the size, in vec4, of the kernel's workgroup array: every
// slice's tiles of a and b (two of each when double buffered), or the
// partial sums of half the slices, whichever is larger.
func (v vecTile) tileWords() int {
	bufs := 1
	if v.double {
		bufs = 2
	}
	return max(v.slices*bufs*(v.bm+v.bn)*v.bk/4, v.slices/2*v.bm*v.bn/4)
}

// fits reports whether the vec4 kernel of blocking v can run shape s.
func (g *gen) fits(s mmShape, v vecTile) bool {
	return s.k > 0 && s.k%4 == 0 && s.n%4 == 0 && s.m > 16 && v.fitsLimits(g.lim)
}

// fitsLimits reports whether the kernel of blocking v is within the
// device limits lim (with defaults).
func (v vecTile) fitsLimits(lim Limits) bool {
	return v.threads() <= min(lim.MaxInvocationsPerWorkgroup, lim.MaxWorkgroupSizeX) &&
		v.tileWords()*16 <= lim.MaxWorkgroupStorageSize
}

// MatmulTileFits reports whether the blocking tile (one of a Tuning.Matmul
// list) can run on a device of limits lim: where it cannot, products take
// the next one of the list, or the scalar kernel.
func MatmulTileFits(tile string, lim Limits) bool {
	v, err := parseVecTile(tile)
	return err == nil && v.fitsLimits(lim.withDefaults())
}

// pickVec chooses the vec4 kernel's blocking from the tuning, if any fits:
// the first of the list whose grid is large enough (each K slice counting
// as a workgroup), else the last that fits.
func (g *gen) pickVec(s mmShape, nb int) (vecTile, bool) {
	if g.fault != "" || g.tune.Matmul == "" || g.tune.Matmul == "scalar" {
		return vecTile{}, false
	}
	return pickBlocking(g.tune.Matmul, parseVecTile, func(v vecTile) bool { return g.fits(s, v) },
		func(v vecTile) int { return v.groups(s, nb) * v.slices }, g.tune.MatmulMinGroups)
}

// tiledVec is the vec4 tiled kernel. A workgroup computes a BM×BN block of
// the output; its invocations form S slices of T = (BM/TM)·(BN/TN), slice
// s taking the steps s, s+S, s+2S, ... of BK along K. Per step, the
// invocations of a slice load the step's BM·BK/4 vec4 of a (along K) and
// as many of b into registers (a stored b is decoded there, once per
// workgroup), and store them into the slice's part of workgroup memory
// K-major (As[k][m], Bs[k][n], as vec4 of 4 consecutive m or n). Invocation
// (tx, ty) of a slice owns rows 4·(r·WY + ty) + 0..3 and columns
// 4·(c·WX + tx) + 0..3 for r < TM/4, c < TN/4: its reads of workgroup
// memory are vec4, broadcast along a and consecutive along b. With
// prefetch, the next step's global loads are issued before the arithmetic
// of this one; with double, the stores go to the other of two buffers,
// leaving one barrier per step. Slices multiply the invocations working on
// a small output (a GPU hides latency with many of them); at the end a
// tree in workgroup memory adds their sums, always in the same order.
func (g *gen) tiledVec(s mmShape, nb int, v vecTile) (*codegen.Kernel, error) {
	t, ts := v.threads(), v.sliceThreads()
	wx, wy := v.bn/v.tn, v.bm/v.tm
	// Each step, a slice loads na items of a and nbv of b (an item: a
	// vec4 along K of each of rows consecutive rows; for b not
	// transposed, one vec4 along N): la and lb per invocation, the last
	// of them only by the first invocations where T does not divide the
	// count.
	rows := 1
	if v.rows4 {
		rows = 4
	}
	na, nbv := v.bm/rows*v.bk/4, v.bn*v.bk/4
	if s.transpose {
		nbv = v.bn / rows * v.bk / 4
	}
	la, lb := ceilDiv(na, ts), ceilDiv(nbv, ts)
	// reg is the register of row q of item e of operand x (a or b).
	reg := func(x string, e, q int) string {
		if rows == 1 {
			return fmt.Sprintf("r%s%d", x, e)
		}
		return fmt.Sprintf("r%s%d_%d", x, e, q)
	}
	guard := func(e, count int, body func()) {
		if (e+1)*ts <= count {
			body()
			return
		}
		g.p("    if (lt < %du) {", count-e*ts)
		body()
		g.p("    }")
	}
	bkv := v.bk / 4
	grid := [3]int{ceilDiv(s.n, v.bn), ceilDiv(s.m, v.bm), nb}
	if s.n == 0 || s.m == 0 || nb == 0 {
		grid = [3]int{0, 1, 1}
	}
	bufs := 1
	if v.double {
		bufs = 2
	}
	sb, isStoredB, hw := stored{}, isStored(g.in[1].DType), g.hwHalf(1)
	if hw {
		g.enableF16()
	}
	g.bind("in0", codegen.Read, g.in[0], "vec4<f32>", 0, -1)
	switch {
	case hw:
		g.bind("in1", codegen.Read, g.in[1], "vec4<f16>", 1, -1)
	case isStoredB:
		sb = g.bindStored("in1", 1)
	default:
		g.bind("in1", codegen.Read, g.in[1], "vec4<f32>", 1, -1)
	}
	g.bindAddend("vec4<f32>")
	g.bind("out0", codegen.Write, g.out[0], "vec4<f32>", -1, 0)
	g.p("// vec4 tiled matmul %dx%dx%d/%dx%d prefetch=%v double=%v rows4=%v slices=%d", v.bm, v.bn, v.bk, v.tm, v.tn, v.prefetch, v.double, v.rows4, v.slices)
	g.p("const M: u32 = %du;", s.m)
	g.p("const N: u32 = %du;", s.n)
	g.p("const K: u32 = %du;", s.k)
	g.p("const NV: u32 = %du; // N / 4", s.n/4)
	g.p("const KV: u32 = %du; // K / 4", s.k/4)
	g.p("const BK: u32 = %du;", v.bk)
	g.p("const S: u32 = %du; // slices of K", v.slices)
	g.p("const T: u32 = %du; // invocations per slice", ts)
	g.p("const STEPS: u32 = %du; // steps of BK per slice", ceilDiv(ceilDiv(s.k, v.bk), v.slices))
	g.p("const AS: u32 = %du; // vec4 per buffer of As", v.bk*v.bm/4)
	g.p("const BS: u32 = %du; // vec4 per buffer of Bs", v.bk*v.bn/4)
	// As and Bs of every slice, then the partial sums, share one array.
	g.p("var<workgroup> tiles: array<vec4<f32>, %d>; // As [S][buf][BK][BM/4], Bs [S][buf][BK][BN/4]", v.tileWords())
	g.entry([3]int{t, 1, 1})
	g.batchOffsets(s, 4)
	if v.slices > 1 {
		g.p("  let lt = li %% T;")
		g.p("  let slice = li / T;")
	} else {
		g.p("  let lt = li;")
		g.p("  let slice = 0u; // constant: the slice arithmetic folds away")
	}
	g.p("  let tx = lt %% %du;", wx)
	g.p("  let ty = lt / %du;", wx)
	g.p("  let m0 = wid.y * %du;", v.bm)
	g.p("  let n0 = wid.x * %du;", v.bn)
	g.p("  let sa = slice * %du; // this slice's As", bufs*v.bk*v.bm/4)
	g.p("  let sb = %du + slice * %du; // and Bs", v.slices*bufs*v.bk*v.bm/4, bufs*v.bk*v.bn/4)
	// Per-invocation load coordinates, fixed over the K loop: am, bn
	// count items (of b's columns when not transposed, vec4).
	for e := 0; e < la; e++ {
		g.p("  let am%d = (lt + %du) / %du; let ak%d = (lt + %du) %% %du;", e, e*ts, bkv, e, e*ts, bkv)
		for q := 0; q < rows; q++ {
			g.p("  var %s = vec4<f32>(0.0f);", reg("a", e, q))
		}
	}
	// A block-format b whose lb items per invocation can be lb
	// consecutive units of one row (of one block) is read that way, the
	// units decoded together (unitRun).
	run := isStoredB && sb.dt.IsBlock() && s.transpose && rows == 1 && lb > 1 && lb*ts == nbv && bkv%lb == 0
	if run {
		elems, _ := sb.dt.Block()
		run = elems%(4*lb) == 0
	}
	if run {
		g.p("  // b is read as runs of %d units of a block", lb)
	}
	for e := 0; e < lb; e++ {
		if run {
			g.p("  let bn%d = lt / %du; let bk%d = lt %% %du * %du + %du;", e, bkv/lb, e, bkv/lb, lb, e)
			g.p("  var rb%d = vec4<f32>(0.0f);", e)
			continue
		}
		if s.transpose {
			g.p("  let bn%d = (lt + %du) / %du; let bk%d = (lt + %du) %% %du;", e, e*ts, bkv, e, e*ts, bkv)
			for q := 0; q < rows; q++ {
				g.p("  var %s = vec4<f32>(0.0f);", reg("b", e, q))
			}
		} else {
			g.p("  let bk%d = (lt + %du) / %du; let bn%d = (lt + %du) %% %du;", e, e*ts, v.bn/4, e, e*ts, v.bn/4)
			g.p("  var rb%d = vec4<f32>(0.0f);", e)
		}
	}
	var accs []string
	for i := 0; i < v.tm; i++ {
		for c := 0; c < v.tn/4; c++ {
			accs = append(accs, fmt.Sprintf("c%d_%d", i, c))
			g.p("  var c%d_%d = vec4<f32>(0.0f);", i, c)
		}
	}
	// row is the tile row of row q of the item whose index is idx.
	row := func(idx string, q int) string {
		if rows == 1 {
			return idx
		}
		return fmt.Sprintf("%s * 4u + %du", idx, q)
	}
	// loadB reads the invocation's e-th item of b's step at element k0 of K.
	loadB := func(e int, k0 string) {
		if !s.transpose {
			g.p("    { let gk = %s + bk%d; let gn = n0 / 4u + bn%d;", k0, e, e)
			g.p("      rb%d = vec4<f32>(0.0f); if (gk < K && gn < NV) { rb%d = in1[bb + gk * NV + gn]; } }", e, e)
			return
		}
		for q := 0; q < rows; q++ {
			r := reg("b", e, q)
			g.p("    { let gn = n0 + %s; let gk = %s / 4u + bk%d;", row(fmt.Sprintf("bn%d", e), q), k0, e)
			g.p("      %s = vec4<f32>(0.0f);", r)
			switch {
			case hw:
				g.p("      if (gn < N && gk < KV) {")
				g.p("        %s = %s;", r, g.loadHalf("in1", "bb + gn * KV + gk", "vec4<f32>", "        "))
				g.p("      }")
			case isStoredB:
				g.p("      if (gn < N && gk < KV) {")
				g.p("        %s = %s;", r, g.unit4(sb, "bb * 4u + (gn * KV + gk) * 4u", "        "))
				g.p("      }")
			default:
				g.p("      if (gn < N && gk < KV) { %s = in1[bb + gn * KV + gk]; }", r)
			}
			g.p("    }")
		}
	}
	// loadRun reads the invocation's lb units of a row of b (all in K or
	// all past it: K is whole blocks).
	loadRun := func(k0 string) {
		g.p("    { let gn = n0 + bn0; let gk = %s / 4u + bk0;", k0)
		for e := 0; e < lb; e++ {
			g.p("      rb%d = vec4<f32>(0.0f);", e)
		}
		g.p("      if (gn < N && gk < KV) {")
		for e, u := range g.unitRun(sb, "bb * 4u + (gn * KV + gk) * 4u", lb, "        ") {
			g.p("        rb%d = %s;", e, u)
		}
		g.p("      }")
		g.p("    }")
	}
	// load reads the step at element k0 of K (k0 past K loads zeros).
	load := func(k0 string) {
		for e := 0; e < la; e++ {
			guard(e, na, func() {
				for q := 0; q < rows; q++ {
					r := reg("a", e, q)
					g.p("    { let gm = m0 + %s; let gk = %s / 4u + ak%d;", row(fmt.Sprintf("am%d", e), q), k0, e)
					g.p("      %s = vec4<f32>(0.0f); if (gm < M && gk < KV) { %s = in0[ab + gm * KV + gk]; } }", r, r)
				}
			})
		}
		if run {
			loadRun(k0)
			return
		}
		for e := 0; e < lb; e++ {
			guard(e, nbv, func() { loadB(e, k0) })
		}
	}
	comps := []string{"x", "y", "z", "w"}
	// storeT stores item e of operand x (at base, with row stride, of
	// item row index idx and K chunk kc): component c of each row goes to
	// row 4·kc + c of the tile, as one vec4 of 4 rows' elements, or as
	// scalars.
	storeT := func(x string, e int, base, idx, kc string, stride int) {
		for c := 0; c < 4; c++ {
			if rows == 4 {
				g.p("    tiles[%s + (%s * 4u + %du) * %du + %s] = vec4<f32>(%s.%s, %s.%s, %s.%s, %s.%s);", base, kc, c, stride, idx,
					reg(x, e, 0), comps[c], reg(x, e, 1), comps[c], reg(x, e, 2), comps[c], reg(x, e, 3), comps[c])
			} else {
				g.p("    tiles[%s + (%s * 4u + %du) * %du + %s / 4u][%s %% 4u] = %s.%s;", base, kc, c, stride, idx, idx, reg(x, e, 0), comps[c])
			}
		}
	}
	store := func(buf string) {
		for e := 0; e < la; e++ {
			guard(e, na, func() {
				storeT("a", e, "sa + "+buf+" * AS", fmt.Sprintf("am%d", e), fmt.Sprintf("ak%d", e), v.bm/4)
			})
		}
		for e := 0; e < lb; e++ {
			guard(e, nbv, func() {
				if s.transpose {
					storeT("b", e, "sb + "+buf+" * BS", fmt.Sprintf("bn%d", e), fmt.Sprintf("bk%d", e), v.bn/4)
				} else {
					g.p("    tiles[sb + %s * BS + bk%d * %du + bn%d] = rb%d;", buf, e, v.bn/4, e, e)
				}
			})
		}
	}
	compute := func(buf string) {
		for kk := 0; kk < v.bk; kk++ {
			for r := 0; r < v.tm/4; r++ {
				g.p("    let a%d_%d = tiles[sa + %s * AS + %du + ty];", kk, r, buf, kk*v.bm/4+r*wy)
			}
			for c := 0; c < v.tn/4; c++ {
				g.p("    let b%d_%d = tiles[sb + %s * BS + %du + tx];", kk, c, buf, kk*v.bn/4+c*wx)
			}
			for i := 0; i < v.tm; i++ {
				for c := 0; c < v.tn/4; c++ {
					g.p("    c%d_%d = fma(vec4<f32>(a%d_%d.%s), b%d_%d, c%d_%d);", i, c, kk, i/4, comps[i%4], kk, c, i, c)
				}
			}
		}
	}
	// The loops run STEPS times in every slice (a barrier needs uniform
	// control flow); a slice's step past K loads zeros.
	const first, next = "(slice * BK)", "((it + 1u) * S + slice) * BK"
	switch {
	case v.double:
		load(first)
		store("0u")
		g.p("  workgroupBarrier();")
		g.p("  var cur = 0u;")
		g.p("  for (var it = 0u; it < STEPS; it++) {")
		g.p("    let more = it + 1u < STEPS;")
		g.p("    if (more) {")
		load(next)
		g.p("    }")
		compute("cur")
		g.p("    if (more) {")
		store("(1u - cur)")
		g.p("    }")
		g.p("    workgroupBarrier();")
		g.p("    cur = 1u - cur;")
		g.p("  }")
	case v.prefetch:
		load(first)
		g.p("  for (var it = 0u; it < STEPS; it++) {")
		store("0u")
		g.p("    workgroupBarrier();")
		g.p("    if (it + 1u < STEPS) {")
		load(next)
		g.p("    }")
		compute("0u")
		g.p("    workgroupBarrier();")
		g.p("  }")
	default:
		g.p("  for (var it = 0u; it < STEPS; it++) {")
		load("((it * S + slice) * BK)")
		store("0u")
		g.p("    workgroupBarrier();")
		compute("0u")
		g.p("    workgroupBarrier();")
		g.p("  }")
	}
	// The tree over slices: the upper half of the live slices writes its
	// sums (after the loop's last barrier, tiles is free), the lower half
	// adds them.
	for h := v.slices / 2; h >= 1; h /= 2 {
		g.p("  if (slice >= %du && slice < %du) {", h, 2*h)
		for i, c := range accs {
			g.p("    tiles[((slice - %du) * %du + %du) * T + lt] = %s;", h, len(accs), i, c)
		}
		g.p("  }")
		g.p("  workgroupBarrier();")
		g.p("  if (slice < %du) {", h)
		for i, c := range accs {
			g.p("    %s = %s + tiles[(slice * %du + %du) * T + lt];", c, c, len(accs), i)
		}
		g.p("  }")
		if h > 1 {
			g.p("  workgroupBarrier();")
		}
	}
	if v.slices > 1 {
		g.p("  if (slice != 0u) { return; }")
	}
	g.p("  let ob = wid.z * M * NV;")
	for r := 0; r < v.tm/4; r++ {
		for q := 0; q < 4; q++ {
			i := r*4 + q
			g.p("  { let gm = m0 + (%du + ty) * 4u + %du;", r*wy, q)
			for c := 0; c < v.tn/4; c++ {
				g.p("    { let gn = n0 / 4u + %du + tx; if (gm < M && gn < NV) { out0[ob + gm * NV + gn] = %s; } }", c*wx, g.addend(fmt.Sprintf("c%d_%d", i, c), "ob + gm * NV + gn"))
			}
			g.p("  }")
		}
	}
	g.p("}")
	return g.kernel([3]int{t, 1, 1}, grid), nil
}
