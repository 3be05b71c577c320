package msl

import (
	"fmt"

	"github.com/tapml/tapml/codegen"
	"github.com/tapml/tapml/ir"
)

// matmul kernels, the three variants of codegen/wgsl, chosen by shape:
//
//   - GEMV with transpose_b (M = 1, b is [N, K]: the decode step of every
//     linear layer): L lanes share one output row, each folding a strided
//     part of K (as float4 when K % 4 == 0; about 16 units per lane, L <=
//     32), then a tree in threadgroup memory sums the lanes; R = 256/L rows
//     per threadgroup.
//   - GEMV without transpose_b (M = 1, b is [K, N]): one thread per four
//     outputs (float4 when N % 4 == 0), reading b's rows coalesced.
//   - Tiled (M > 1): a threadgroup computes a BM×BN block of the output,
//     staging BM×BK of a and BK×BN of b in threadgroup memory per step of
//     K; each thread accumulates a TM×TN register block.
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

// batchOffsets emits ab and bb, the element offsets of batch wid.z in a
// and b (divided by div, for float4 views).
func (g *gen) batchOffsets(s mmShape, div int) {
	if len(s.batch) == 0 {
		g.p("  const uint ab = 0u;")
		g.p("  const uint bb = 0u;")
		return
	}
	c := g.coords(s.batch, "wid.z")
	g.p("  const uint ab = (%s) * %du;", broadcastOffset(s.batch, s.aB, c), s.m*s.k/div)
	g.p("  const uint bb = (%s) * %du;", broadcastOffset(s.batch, s.bB, c), s.k*s.n/div)
}

func genMatmul(g *gen) (*codegen.Kernel, error) {
	s := g.mmShape()
	if g.in[0].DType != ir.F32 || g.in[1].DType != ir.F32 {
		return nil, fmt.Errorf("matmul needs f32 inputs, got %s and %s", g.in[0], g.in[1])
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
func (g *gen) gemvT(s mmShape, nb int) (*codegen.Kernel, error) {
	vec := s.k%4 == 0 && s.k > 0
	units := s.k
	if vec {
		units = s.k / 4
	}
	l := 1
	for l*2 <= 32 && l*2*16 <= units { // about 16 units per lane (wgsl's tuning)
		l *= 2
	}
	wg := g.threads(256)
	l = min(l, wg)
	r := wg / l
	grid, gid := g.foldDims(ceilDiv(s.n, r), 2)
	grid[2] = nb
	if s.n == 0 || nb == 0 {
		grid = [3]int{0, 1, 1}
	}
	elem, div := "float", 1
	if vec {
		elem, div = "float4", 4
	}
	g.bind("in0", codegen.Read, g.in[0], elem, 0, -1)
	g.bind("in1", codegen.Read, g.in[1], elem, 1, -1)
	g.bind("out0", codegen.Write, g.out[0], "float", -1, 0)
	g.f16Helper()
	g.p("constant uint N = %du;", s.n)
	g.p("constant uint KU = %du; // K in units of %s", units, elem)
	g.p("constant uint L = %du; // lanes per output", l)
	if l > 1 {
		g.share("float", "red", wg)
	}
	g.entry()
	g.batchOffsets(s, div)
	g.p("  const uint lane = li %% L;")
	g.p("  const uint n_ = %s * %du + li / L;", gid, r)
	g.p("  const bool valid = n_ < N;")
	g.p("  const uint n = min(n_, N - 1u);")
	g.p("  float acc = 0.0f;")
	bk := "k"
	if g.faultIs(FaultWrongIndex) {
		bk = "k + 1u"
	}
	g.p("  for (uint k = lane; k < KU; k += L) {")
	if vec {
		g.p("    acc = %s;", g.ov(fmt.Sprintf("acc + dot(in0[ab + k], in1[bb + n * KU + %s])", bk)))
	} else {
		g.p("    acc = %s;", g.ov(fmt.Sprintf("acc + in0[ab + k] * in1[bb + n * KU + %s]", bk)))
	}
	g.p("  }")
	if l > 1 {
		g.p("  red[li] = acc;")
		g.barrier(true)
		g.p("  for (uint s_ = L / 2u; s_ > 0u; s_ >>= 1u) {")
		g.p("    if (lane < s_) { red[li] = red[li] + red[li + s_]; }")
		g.p("    threadgroup_barrier(mem_flags::mem_threadgroup);")
		g.p("  }")
		g.p("  acc = red[li];")
	}
	g.p("  if (valid && lane == 0u) { out0[wid.z * N + n] = acc; }")
	g.p("}")
	return g.kernel([3]int{wg, 1, 1}, grid), nil
}

// gemvN computes out[z, 0, n] = Σ_k a[z, 0, k]·b[z, k, n].
func (g *gen) gemvN(s mmShape, nb int) (*codegen.Kernel, error) {
	vec := s.n%4 == 0 && g.fault != FaultF16Overflow
	w, elem := 1, "float"
	if vec {
		w, elem = 4, "float4"
	}
	nu := s.n / w
	wg := g.threads(min(256, max(nu, 64)))
	grid, gid := g.foldDims(ceilDiv(nu, wg), 2)
	grid[2] = nb
	if s.n == 0 || nb == 0 {
		grid = [3]int{0, 1, 1}
	}
	g.bind("in0", codegen.Read, g.in[0], "float", 0, -1)
	g.bind("in1", codegen.Read, g.in[1], elem, 1, -1)
	g.bind("out0", codegen.Write, g.out[0], elem, -1, 0)
	g.f16Helper()
	g.p("constant uint NU = %du; // N in units of %s", nu, elem)
	g.p("constant uint K = %du;", s.k)
	g.entry()
	g.p("  const uint n = %s * %du + li;", gid, wg)
	g.p("  if (n >= NU) { return; }")
	g.batchOffsets(s, 1)
	g.p("  const uint bu = bb / %du;", w)
	row := "k"
	if g.faultIs(FaultWrongIndex) {
		row = "k + 1u"
	}
	g.p("  %s acc = %s(0.0f);", elem, elem)
	g.p("  for (uint k = 0u; k < K; k++) {")
	g.p("    acc = %s;", g.ov(fmt.Sprintf("acc + in0[ab + k] * in1[bu + (%s) * NU + n]", row)))
	g.p("  }")
	g.p("  out0[wid.z * NU + n] = acc;")
	g.p("}")
	return g.kernel([3]int{wg, 1, 1}, grid), nil
}

// tile is the blocking of the tiled matmul.
type tile struct{ bm, bn, bk, tm, tn int }

func (g *gen) pickTile(m int) tile {
	t := tile{64, 64, 16, 4, 4}
	if m <= 16 {
		t = tile{16, 64, 16, 1, 4}
	}
	if (t.bm/t.tm)*(t.bn/t.tn) > g.lim.MaxThreadsPerThreadgroup {
		t = tile{32, 32, 16, 4, 4} // 64 threads: every device allows it
	}
	return t
}

// tiled computes out[z] = a[z] × b[z] (b transposed when s.transpose).
func (g *gen) tiled(s mmShape, nb int) (*codegen.Kernel, error) {
	t := g.pickTile(s.m)
	wgx, wgy := t.bn/t.tn, t.bm/t.tm
	wg := wgx * wgy
	grid := [3]int{ceilDiv(s.n, t.bn), ceilDiv(s.m, t.bm), nb}
	if s.n == 0 || s.m == 0 || nb == 0 {
		grid = [3]int{0, 1, 1}
	}
	g.bindAll()
	g.f16Helper()
	g.p("constant uint M = %du;", s.m)
	g.p("constant uint N = %du;", s.n)
	g.p("constant uint K = %du;", s.k)
	g.p("constant uint BM = %du;", t.bm)
	g.p("constant uint BN = %du;", t.bn)
	g.p("constant uint BK = %du;", t.bk)
	g.share("float", "As", t.bk*t.bm) // [BK][BM]
	g.share("float", "Bs", t.bk*t.bn) // [BK][BN]
	g.entry()
	g.batchOffsets(s, 1)
	g.p("  const uint tx = li %% %du;", wgx)
	g.p("  const uint ty = li / %du;", wgx)
	g.p("  const uint m0 = wid.y * BM;")
	g.p("  const uint n0 = wid.x * BN;")
	for i := 0; i < t.tm; i++ {
		for j := 0; j < t.tn; j++ {
			g.p("  float acc%d_%d = 0.0f;", i, j)
		}
	}
	bk := ""
	if g.faultIs(FaultWrongIndex) {
		bk = " + 1u"
	}
	g.p("  for (uint k0 = 0u; k0 < K; k0 += BK) {")
	g.p("    for (uint e = li; e < BM * BK; e += %du) {", wg)
	g.p("      const uint mm = e / BK; const uint kk = e %% BK; const uint gm = m0 + mm; const uint gk = k0 + kk;")
	g.p("      float v = 0.0f;")
	g.p("      if (gm < M && gk < K) { v = in0[ab + gm * K + gk]; }")
	g.p("      As[kk * BM + mm] = v;")
	g.p("    }")
	g.p("    for (uint e = li; e < BN * BK; e += %du) {", wg)
	if s.transpose {
		g.p("      const uint nn = e / BK; const uint kk = e %% BK; const uint gn = n0 + nn; const uint gk = k0 + kk;")
		g.p("      float v = 0.0f;")
		g.p("      if (gn < N && gk < K) { v = in1[bb + gn * K + gk%s]; }", bk)
	} else {
		g.p("      const uint kk = e / BN; const uint nn = e %% BN; const uint gn = n0 + nn; const uint gk = k0 + kk;")
		g.p("      float v = 0.0f;")
		g.p("      if (gn < N && gk < K) { v = in1[bb + (gk%s) * N + gn]; }", bk)
	}
	g.p("      Bs[kk * BN + nn] = v;")
	g.p("    }")
	g.barrierIndent("    ", true)
	g.p("    for (uint kk = 0u; kk < BK; kk++) {")
	for i := 0; i < t.tm; i++ {
		g.p("      const float a%d = As[kk * BM + ty + %du];", i, i*wgy)
	}
	for j := 0; j < t.tn; j++ {
		g.p("      const float b%d = Bs[kk * BN + tx + %du];", j, j*wgx)
	}
	for i := 0; i < t.tm; i++ {
		for j := 0; j < t.tn; j++ {
			g.p("      acc%d_%d = %s;", i, j, g.ov(fmt.Sprintf("acc%d_%d + a%d * b%d", i, j, i, j)))
		}
	}
	g.p("    }")
	g.p("    threadgroup_barrier(mem_flags::mem_threadgroup);")
	g.p("  }")
	g.p("  const uint ob = wid.z * M * N;")
	for i := 0; i < t.tm; i++ {
		g.p("  const uint gm%d = m0 + ty + %du;", i, i*wgy)
		for j := 0; j < t.tn; j++ {
			g.p("  if (gm%d < M && n0 + tx + %du < N) { out0[ob + gm%d * N + n0 + tx + %du] = acc%d_%d; }", i, j*wgx, i, j*wgx, i, j)
		}
	}
	g.p("}")
	return g.kernel([3]int{wg, 1, 1}, grid), nil
}
