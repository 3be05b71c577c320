// tapml MSL kernel: matmul (node 7), translated from WGSL
#include <metal_stdlib>
using namespace metal;
constant uint M = 67u;
constant uint N = 33u;
constant uint K = 45u;
constant uint BM = 64u;
constant uint BN = 64u;
constant uint BK = 16u;
kernel void tapml_main(
    device const float* in0 [[buffer(0)]],
    device const float* in1 [[buffer(1)]],
    device float* out0 [[buffer(2)]],
    uint3 wid [[threadgroup_position_in_grid]],
    uint3 lid [[thread_position_in_threadgroup]],
    uint li [[thread_index_in_threadgroup]]) {
  threadgroup float As[1024]; // [BK][BM]
  threadgroup float Bs[1024]; // [BK][BN]
  uint r_ = wid.z;
  const uint c0 = r_;
  const uint ab = (c0) * 3015u;
  const uint bb = (0u) * 1485u;
  const uint tx = li % 16u;
  const uint ty = li / 16u;
  const uint m0 = wid.y * BM;
  const uint n0 = wid.x * BN;
  float acc0_0 = 0.0f;
  float acc0_1 = 0.0f;
  float acc0_2 = 0.0f;
  float acc0_3 = 0.0f;
  float acc1_0 = 0.0f;
  float acc1_1 = 0.0f;
  float acc1_2 = 0.0f;
  float acc1_3 = 0.0f;
  float acc2_0 = 0.0f;
  float acc2_1 = 0.0f;
  float acc2_2 = 0.0f;
  float acc2_3 = 0.0f;
  float acc3_0 = 0.0f;
  float acc3_1 = 0.0f;
  float acc3_2 = 0.0f;
  float acc3_3 = 0.0f;
  for (uint k0 = 0u; k0 < K; k0 += BK) {
    for (uint e = li; e < BM * BK; e += 256u) {
      const uint mm = e / BK;
      const uint kk = e % BK;
      const uint gm = m0 + mm;
      const uint gk = k0 + kk;
      float v = 0.0f;
      if (gm < M && gk < K) {
        v = in0[ab + gm * K + gk];
      }
      As[kk * BM + mm] = v;
    }
    for (uint e = li; e < BN * BK; e += 256u) {
      const uint nn = e / BK;
      const uint kk = e % BK;
      const uint gn = n0 + nn;
      const uint gk = k0 + kk;
      float v = 0.0f;
      if (gn < N && gk < K) {
        v = in1[bb + gn * K + gk];
      }
      Bs[kk * BN + nn] = v;
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    for (uint kk = 0u; kk < BK; kk++) {
      const float a0 = As[kk * BM + ty + 0u];
      const float a1 = As[kk * BM + ty + 16u];
      const float a2 = As[kk * BM + ty + 32u];
      const float a3 = As[kk * BM + ty + 48u];
      const float b0 = Bs[kk * BN + tx + 0u];
      const float b1 = Bs[kk * BN + tx + 16u];
      const float b2 = Bs[kk * BN + tx + 32u];
      const float b3 = Bs[kk * BN + tx + 48u];
      acc0_0 = acc0_0 + a0 * b0;
      acc0_1 = acc0_1 + a0 * b1;
      acc0_2 = acc0_2 + a0 * b2;
      acc0_3 = acc0_3 + a0 * b3;
      acc1_0 = acc1_0 + a1 * b0;
      acc1_1 = acc1_1 + a1 * b1;
      acc1_2 = acc1_2 + a1 * b2;
      acc1_3 = acc1_3 + a1 * b3;
      acc2_0 = acc2_0 + a2 * b0;
      acc2_1 = acc2_1 + a2 * b1;
      acc2_2 = acc2_2 + a2 * b2;
      acc2_3 = acc2_3 + a2 * b3;
      acc3_0 = acc3_0 + a3 * b0;
      acc3_1 = acc3_1 + a3 * b1;
      acc3_2 = acc3_2 + a3 * b2;
      acc3_3 = acc3_3 + a3 * b3;
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
  }
  const uint ob = wid.z * M * N;
  const uint gm0 = m0 + ty + 0u;
  if (gm0 < M && n0 + tx + 0u < N) {
    out0[ob + gm0 * N + n0 + tx + 0u] = acc0_0;
  }
  if (gm0 < M && n0 + tx + 16u < N) {
    out0[ob + gm0 * N + n0 + tx + 16u] = acc0_1;
  }
  if (gm0 < M && n0 + tx + 32u < N) {
    out0[ob + gm0 * N + n0 + tx + 32u] = acc0_2;
  }
  if (gm0 < M && n0 + tx + 48u < N) {
    out0[ob + gm0 * N + n0 + tx + 48u] = acc0_3;
  }
  const uint gm1 = m0 + ty + 16u;
  if (gm1 < M && n0 + tx + 0u < N) {
    out0[ob + gm1 * N + n0 + tx + 0u] = acc1_0;
  }
  if (gm1 < M && n0 + tx + 16u < N) {
    out0[ob + gm1 * N + n0 + tx + 16u] = acc1_1;
  }
  if (gm1 < M && n0 + tx + 32u < N) {
    out0[ob + gm1 * N + n0 + tx + 32u] = acc1_2;
  }
  if (gm1 < M && n0 + tx + 48u < N) {
    out0[ob + gm1 * N + n0 + tx + 48u] = acc1_3;
  }
  const uint gm2 = m0 + ty + 32u;
  if (gm2 < M && n0 + tx + 0u < N) {
    out0[ob + gm2 * N + n0 + tx + 0u] = acc2_0;
  }
  if (gm2 < M && n0 + tx + 16u < N) {
    out0[ob + gm2 * N + n0 + tx + 16u] = acc2_1;
  }
  if (gm2 < M && n0 + tx + 32u < N) {
    out0[ob + gm2 * N + n0 + tx + 32u] = acc2_2;
  }
  if (gm2 < M && n0 + tx + 48u < N) {
    out0[ob + gm2 * N + n0 + tx + 48u] = acc2_3;
  }
  const uint gm3 = m0 + ty + 48u;
  if (gm3 < M && n0 + tx + 0u < N) {
    out0[ob + gm3 * N + n0 + tx + 0u] = acc3_0;
  }
  if (gm3 < M && n0 + tx + 16u < N) {
    out0[ob + gm3 * N + n0 + tx + 16u] = acc3_1;
  }
  if (gm3 < M && n0 + tx + 32u < N) {
    out0[ob + gm3 * N + n0 + tx + 32u] = acc3_2;
  }
  if (gm3 < M && n0 + tx + 48u < N) {
    out0[ob + gm3 * N + n0 + tx + 48u] = acc3_3;
  }
}
