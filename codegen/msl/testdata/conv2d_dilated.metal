// tapml MSL kernel: conv2d (node 7), translated from WGSL
#include <metal_stdlib>
using namespace metal;
constant uint C = 5u;
constant uint H = 11u;
constant uint W = 10u;
constant uint O = 3u;
constant uint HO = 10u;
constant uint WO = 6u;
constant uint KH = 2u;
constant uint KW = 3u;
constant uint CG = 5u;
constant uint OG = 3u;
constant uint OTILES = 1u;
constant uint XTILES = 2u;
constant uint GROUPS = 1u;
constant uint TOTAL = 20u;
constant int SH = 1;
constant int SW = 1;
constant int DH = 2;
constant int DW = 3;
constant int PT = 0;
constant int PL = 2;
kernel void tapml_main(
    device const float* in0 [[buffer(0)]],
    device const float* in1 [[buffer(1)]],
    device const float* in2 [[buffer(2)]],
    device float* out0 [[buffer(3)]],
    uint3 wid [[threadgroup_position_in_grid]],
    uint3 lid [[thread_position_in_threadgroup]],
    uint li [[thread_index_in_threadgroup]]) {
  const uint t = wid.x * 64u + li;
  if (t >= TOTAL) {
    return;
  }
  const uint xt = t % XTILES;
  const uint y = (t / XTILES) % HO;
  const uint otile = (t / (XTILES * HO)) % (GROUPS * OTILES);
  const uint nn = t / (XTILES * HO * GROUPS * OTILES);
  const uint grp = otile / OTILES;
  const uint obase = (otile % OTILES) * 3u;
  const uint x0 = xt * 4u;
  const uint ol0 = min(obase + 0u, OG - 1u);
  float acc0_0 = 0.0f;
  float acc0_1 = 0.0f;
  float acc0_2 = 0.0f;
  float acc0_3 = 0.0f;
  const uint ol1 = min(obase + 1u, OG - 1u);
  float acc1_0 = 0.0f;
  float acc1_1 = 0.0f;
  float acc1_2 = 0.0f;
  float acc1_3 = 0.0f;
  const uint ol2 = min(obase + 2u, OG - 1u);
  float acc2_0 = 0.0f;
  float acc2_1 = 0.0f;
  float acc2_2 = 0.0f;
  float acc2_3 = 0.0f;
  for (uint c = 0u; c < CG; c++) {
    const uint xc = (nn * C + grp * CG + c) * H * W;
    for (uint i = 0u; i < KH; i++) {
      const int iy = int(y * uint(SH) - uint(PT) + i * uint(DH));
      const bool rowok = iy >= 0 && iy < int(H);
      if (!rowok) {
        continue;
      }
      for (uint j = 0u; j < KW; j++) {
        const int ix0 = int((x0 + 0u) * uint(SW) - uint(PL) + j * uint(DW));
        float v0 = 0.0f;
        if (ix0 >= 0 && ix0 < int(W)) {
          v0 = in0[xc + uint(iy) * W + uint(ix0)];
        }
        const int ix1 = int((x0 + 1u) * uint(SW) - uint(PL) + j * uint(DW));
        float v1 = 0.0f;
        if (ix1 >= 0 && ix1 < int(W)) {
          v1 = in0[xc + uint(iy) * W + uint(ix1)];
        }
        const int ix2 = int((x0 + 2u) * uint(SW) - uint(PL) + j * uint(DW));
        float v2 = 0.0f;
        if (ix2 >= 0 && ix2 < int(W)) {
          v2 = in0[xc + uint(iy) * W + uint(ix2)];
        }
        const int ix3 = int((x0 + 3u) * uint(SW) - uint(PL) + j * uint(DW));
        float v3 = 0.0f;
        if (ix3 >= 0 && ix3 < int(W)) {
          v3 = in0[xc + uint(iy) * W + uint(ix3)];
        }
        const float w0 = in1[(((grp * OG + ol0) * CG + c) * KH + i) * KW + j];
        acc0_0 = acc0_0 + v0 * w0;
        acc0_1 = acc0_1 + v1 * w0;
        acc0_2 = acc0_2 + v2 * w0;
        acc0_3 = acc0_3 + v3 * w0;
        const float w1 = in1[(((grp * OG + ol1) * CG + c) * KH + i) * KW + j];
        acc1_0 = acc1_0 + v0 * w1;
        acc1_1 = acc1_1 + v1 * w1;
        acc1_2 = acc1_2 + v2 * w1;
        acc1_3 = acc1_3 + v3 * w1;
        const float w2 = in1[(((grp * OG + ol2) * CG + c) * KH + i) * KW + j];
        acc2_0 = acc2_0 + v0 * w2;
        acc2_1 = acc2_1 + v1 * w2;
        acc2_2 = acc2_2 + v2 * w2;
        acc2_3 = acc2_3 + v3 * w2;
      }
    }
  }
  if (obase + 0u < OG) {
    const uint oc = grp * OG + obase + 0u;
    const uint ob = ((nn * O + oc) * HO + y) * WO + x0;
    if (x0 + 0u < WO) {
      out0[ob + 0u] = acc0_0 + in2[oc];
    }
    if (x0 + 1u < WO) {
      out0[ob + 1u] = acc0_1 + in2[oc];
    }
    if (x0 + 2u < WO) {
      out0[ob + 2u] = acc0_2 + in2[oc];
    }
    if (x0 + 3u < WO) {
      out0[ob + 3u] = acc0_3 + in2[oc];
    }
  }
  if (obase + 1u < OG) {
    const uint oc = grp * OG + obase + 1u;
    const uint ob = ((nn * O + oc) * HO + y) * WO + x0;
    if (x0 + 0u < WO) {
      out0[ob + 0u] = acc1_0 + in2[oc];
    }
    if (x0 + 1u < WO) {
      out0[ob + 1u] = acc1_1 + in2[oc];
    }
    if (x0 + 2u < WO) {
      out0[ob + 2u] = acc1_2 + in2[oc];
    }
    if (x0 + 3u < WO) {
      out0[ob + 3u] = acc1_3 + in2[oc];
    }
  }
  if (obase + 2u < OG) {
    const uint oc = grp * OG + obase + 2u;
    const uint ob = ((nn * O + oc) * HO + y) * WO + x0;
    if (x0 + 0u < WO) {
      out0[ob + 0u] = acc2_0 + in2[oc];
    }
    if (x0 + 1u < WO) {
      out0[ob + 1u] = acc2_1 + in2[oc];
    }
    if (x0 + 2u < WO) {
      out0[ob + 2u] = acc2_2 + in2[oc];
    }
    if (x0 + 3u < WO) {
      out0[ob + 3u] = acc2_3 + in2[oc];
    }
  }
}
