// tapml MSL kernel: matmul (node 7), translated from WGSL
#include <metal_stdlib>
using namespace metal;
// vec4 tiled matmul 32x32x16/4x4 prefetch=true double=false slices=1
constant uint M = 64u;
constant uint N = 128u;
constant uint K = 96u;
constant uint NV = 32u; // N / 4
constant uint KV = 24u; // K / 4
constant uint BK = 16u;
constant uint S = 1u; // slices of K
constant uint T = 64u; // invocations per slice
constant uint STEPS = 6u; // steps of BK per slice
constant uint AS = 128u; // vec4 per buffer of As
constant uint BS = 128u; // vec4 per buffer of Bs
kernel void tapml_main(
    device const float4* in0 [[buffer(0)]],
    device const float4* in1 [[buffer(1)]],
    device float4* out0 [[buffer(2)]],
    uint3 wid [[threadgroup_position_in_grid]],
    uint3 lid [[thread_position_in_threadgroup]],
    uint li [[thread_index_in_threadgroup]]) {
  threadgroup float4 tiles[256]; // As [S][buf][BK][BM/4], Bs [S][buf][BK][BN/4]
  uint r_ = wid.z;
  const uint c0 = r_;
  const uint ab = (c0) * 1536u;
  const uint bb = (0u) * 3072u;
  const uint lt = li;
  const uint slice = 0u; // constant: the slice arithmetic folds away
  const uint tx = lt % 8u;
  const uint ty = lt / 8u;
  const uint m0 = wid.y * 32u;
  const uint n0 = wid.x * 32u;
  const uint sa = slice * 128u; // this slice's As
  const uint sb = 128u + slice * 128u; // and Bs
  const uint am0 = (lt + 0u) / 4u;
  const uint ak0 = (lt + 0u) % 4u;
  float4 ra0 = float4(0.0f);
  const uint am1 = (lt + 64u) / 4u;
  const uint ak1 = (lt + 64u) % 4u;
  float4 ra1 = float4(0.0f);
  const uint bk0 = (lt + 0u) / 8u;
  const uint bn0 = (lt + 0u) % 8u;
  float4 rb0 = float4(0.0f);
  const uint bk1 = (lt + 64u) / 8u;
  const uint bn1 = (lt + 64u) % 8u;
  float4 rb1 = float4(0.0f);
  float4 c0_0 = float4(0.0f);
  float4 c1_0 = float4(0.0f);
  float4 c2_0 = float4(0.0f);
  float4 c3_0 = float4(0.0f);
  {
    const uint gm = m0 + am0;
    const uint gk = (slice * BK) / 4u + ak0;
    ra0 = float4(0.0f);
    if (gm < M && gk < KV) {
      ra0 = in0[ab + gm * KV + gk];
    }
  }
  {
    const uint gm = m0 + am1;
    const uint gk = (slice * BK) / 4u + ak1;
    ra1 = float4(0.0f);
    if (gm < M && gk < KV) {
      ra1 = in0[ab + gm * KV + gk];
    }
  }
  {
    const uint gk = (slice * BK) + bk0;
    const uint gn = n0 / 4u + bn0;
    rb0 = float4(0.0f);
    if (gk < K && gn < NV) {
      rb0 = in1[bb + gk * NV + gn];
    }
  }
  {
    const uint gk = (slice * BK) + bk1;
    const uint gn = n0 / 4u + bn1;
    rb1 = float4(0.0f);
    if (gk < K && gn < NV) {
      rb1 = in1[bb + gk * NV + gn];
    }
  }
  for (uint it = 0u; it < STEPS; it++) {
    tiles[sa + 0u * AS + (ak0 * 4u + 0u) * 8u + am0 / 4u][am0 % 4u] = ra0.x;
    tiles[sa + 0u * AS + (ak0 * 4u + 1u) * 8u + am0 / 4u][am0 % 4u] = ra0.y;
    tiles[sa + 0u * AS + (ak0 * 4u + 2u) * 8u + am0 / 4u][am0 % 4u] = ra0.z;
    tiles[sa + 0u * AS + (ak0 * 4u + 3u) * 8u + am0 / 4u][am0 % 4u] = ra0.w;
    tiles[sa + 0u * AS + (ak1 * 4u + 0u) * 8u + am1 / 4u][am1 % 4u] = ra1.x;
    tiles[sa + 0u * AS + (ak1 * 4u + 1u) * 8u + am1 / 4u][am1 % 4u] = ra1.y;
    tiles[sa + 0u * AS + (ak1 * 4u + 2u) * 8u + am1 / 4u][am1 % 4u] = ra1.z;
    tiles[sa + 0u * AS + (ak1 * 4u + 3u) * 8u + am1 / 4u][am1 % 4u] = ra1.w;
    tiles[sb + 0u * BS + bk0 * 8u + bn0] = rb0;
    tiles[sb + 0u * BS + bk1 * 8u + bn1] = rb1;
    threadgroup_barrier(mem_flags::mem_threadgroup);
    if (it + 1u < STEPS) {
      {
        const uint gm = m0 + am0;
        const uint gk = ((it + 1u) * S + slice) * BK / 4u + ak0;
        ra0 = float4(0.0f);
        if (gm < M && gk < KV) {
          ra0 = in0[ab + gm * KV + gk];
        }
      }
      {
        const uint gm = m0 + am1;
        const uint gk = ((it + 1u) * S + slice) * BK / 4u + ak1;
        ra1 = float4(0.0f);
        if (gm < M && gk < KV) {
          ra1 = in0[ab + gm * KV + gk];
        }
      }
      {
        const uint gk = ((it + 1u) * S + slice) * BK + bk0;
        const uint gn = n0 / 4u + bn0;
        rb0 = float4(0.0f);
        if (gk < K && gn < NV) {
          rb0 = in1[bb + gk * NV + gn];
        }
      }
      {
        const uint gk = ((it + 1u) * S + slice) * BK + bk1;
        const uint gn = n0 / 4u + bn1;
        rb1 = float4(0.0f);
        if (gk < K && gn < NV) {
          rb1 = in1[bb + gk * NV + gn];
        }
      }
    }
    const float4 a0_0 = tiles[sa + 0u * AS + 0u + ty];
    const float4 b0_0 = tiles[sb + 0u * BS + 0u + tx];
    c0_0 = fma(float4(a0_0.x), b0_0, c0_0);
    c1_0 = fma(float4(a0_0.y), b0_0, c1_0);
    c2_0 = fma(float4(a0_0.z), b0_0, c2_0);
    c3_0 = fma(float4(a0_0.w), b0_0, c3_0);
    const float4 a1_0 = tiles[sa + 0u * AS + 8u + ty];
    const float4 b1_0 = tiles[sb + 0u * BS + 8u + tx];
    c0_0 = fma(float4(a1_0.x), b1_0, c0_0);
    c1_0 = fma(float4(a1_0.y), b1_0, c1_0);
    c2_0 = fma(float4(a1_0.z), b1_0, c2_0);
    c3_0 = fma(float4(a1_0.w), b1_0, c3_0);
    const float4 a2_0 = tiles[sa + 0u * AS + 16u + ty];
    const float4 b2_0 = tiles[sb + 0u * BS + 16u + tx];
    c0_0 = fma(float4(a2_0.x), b2_0, c0_0);
    c1_0 = fma(float4(a2_0.y), b2_0, c1_0);
    c2_0 = fma(float4(a2_0.z), b2_0, c2_0);
    c3_0 = fma(float4(a2_0.w), b2_0, c3_0);
    const float4 a3_0 = tiles[sa + 0u * AS + 24u + ty];
    const float4 b3_0 = tiles[sb + 0u * BS + 24u + tx];
    c0_0 = fma(float4(a3_0.x), b3_0, c0_0);
    c1_0 = fma(float4(a3_0.y), b3_0, c1_0);
    c2_0 = fma(float4(a3_0.z), b3_0, c2_0);
    c3_0 = fma(float4(a3_0.w), b3_0, c3_0);
    const float4 a4_0 = tiles[sa + 0u * AS + 32u + ty];
    const float4 b4_0 = tiles[sb + 0u * BS + 32u + tx];
    c0_0 = fma(float4(a4_0.x), b4_0, c0_0);
    c1_0 = fma(float4(a4_0.y), b4_0, c1_0);
    c2_0 = fma(float4(a4_0.z), b4_0, c2_0);
    c3_0 = fma(float4(a4_0.w), b4_0, c3_0);
    const float4 a5_0 = tiles[sa + 0u * AS + 40u + ty];
    const float4 b5_0 = tiles[sb + 0u * BS + 40u + tx];
    c0_0 = fma(float4(a5_0.x), b5_0, c0_0);
    c1_0 = fma(float4(a5_0.y), b5_0, c1_0);
    c2_0 = fma(float4(a5_0.z), b5_0, c2_0);
    c3_0 = fma(float4(a5_0.w), b5_0, c3_0);
    const float4 a6_0 = tiles[sa + 0u * AS + 48u + ty];
    const float4 b6_0 = tiles[sb + 0u * BS + 48u + tx];
    c0_0 = fma(float4(a6_0.x), b6_0, c0_0);
    c1_0 = fma(float4(a6_0.y), b6_0, c1_0);
    c2_0 = fma(float4(a6_0.z), b6_0, c2_0);
    c3_0 = fma(float4(a6_0.w), b6_0, c3_0);
    const float4 a7_0 = tiles[sa + 0u * AS + 56u + ty];
    const float4 b7_0 = tiles[sb + 0u * BS + 56u + tx];
    c0_0 = fma(float4(a7_0.x), b7_0, c0_0);
    c1_0 = fma(float4(a7_0.y), b7_0, c1_0);
    c2_0 = fma(float4(a7_0.z), b7_0, c2_0);
    c3_0 = fma(float4(a7_0.w), b7_0, c3_0);
    const float4 a8_0 = tiles[sa + 0u * AS + 64u + ty];
    const float4 b8_0 = tiles[sb + 0u * BS + 64u + tx];
    c0_0 = fma(float4(a8_0.x), b8_0, c0_0);
    c1_0 = fma(float4(a8_0.y), b8_0, c1_0);
    c2_0 = fma(float4(a8_0.z), b8_0, c2_0);
    c3_0 = fma(float4(a8_0.w), b8_0, c3_0);
    const float4 a9_0 = tiles[sa + 0u * AS + 72u + ty];
    const float4 b9_0 = tiles[sb + 0u * BS + 72u + tx];
    c0_0 = fma(float4(a9_0.x), b9_0, c0_0);
    c1_0 = fma(float4(a9_0.y), b9_0, c1_0);
    c2_0 = fma(float4(a9_0.z), b9_0, c2_0);
    c3_0 = fma(float4(a9_0.w), b9_0, c3_0);
    const float4 a10_0 = tiles[sa + 0u * AS + 80u + ty];
    const float4 b10_0 = tiles[sb + 0u * BS + 80u + tx];
    c0_0 = fma(float4(a10_0.x), b10_0, c0_0);
    c1_0 = fma(float4(a10_0.y), b10_0, c1_0);
    c2_0 = fma(float4(a10_0.z), b10_0, c2_0);
    c3_0 = fma(float4(a10_0.w), b10_0, c3_0);
    const float4 a11_0 = tiles[sa + 0u * AS + 88u + ty];
    const float4 b11_0 = tiles[sb + 0u * BS + 88u + tx];
    c0_0 = fma(float4(a11_0.x), b11_0, c0_0);
    c1_0 = fma(float4(a11_0.y), b11_0, c1_0);
    c2_0 = fma(float4(a11_0.z), b11_0, c2_0);
    c3_0 = fma(float4(a11_0.w), b11_0, c3_0);
    const float4 a12_0 = tiles[sa + 0u * AS + 96u + ty];
    const float4 b12_0 = tiles[sb + 0u * BS + 96u + tx];
    c0_0 = fma(float4(a12_0.x), b12_0, c0_0);
    c1_0 = fma(float4(a12_0.y), b12_0, c1_0);
    c2_0 = fma(float4(a12_0.z), b12_0, c2_0);
    c3_0 = fma(float4(a12_0.w), b12_0, c3_0);
    const float4 a13_0 = tiles[sa + 0u * AS + 104u + ty];
    const float4 b13_0 = tiles[sb + 0u * BS + 104u + tx];
    c0_0 = fma(float4(a13_0.x), b13_0, c0_0);
    c1_0 = fma(float4(a13_0.y), b13_0, c1_0);
    c2_0 = fma(float4(a13_0.z), b13_0, c2_0);
    c3_0 = fma(float4(a13_0.w), b13_0, c3_0);
    const float4 a14_0 = tiles[sa + 0u * AS + 112u + ty];
    const float4 b14_0 = tiles[sb + 0u * BS + 112u + tx];
    c0_0 = fma(float4(a14_0.x), b14_0, c0_0);
    c1_0 = fma(float4(a14_0.y), b14_0, c1_0);
    c2_0 = fma(float4(a14_0.z), b14_0, c2_0);
    c3_0 = fma(float4(a14_0.w), b14_0, c3_0);
    const float4 a15_0 = tiles[sa + 0u * AS + 120u + ty];
    const float4 b15_0 = tiles[sb + 0u * BS + 120u + tx];
    c0_0 = fma(float4(a15_0.x), b15_0, c0_0);
    c1_0 = fma(float4(a15_0.y), b15_0, c1_0);
    c2_0 = fma(float4(a15_0.z), b15_0, c2_0);
    c3_0 = fma(float4(a15_0.w), b15_0, c3_0);
    threadgroup_barrier(mem_flags::mem_threadgroup);
  }
  const uint ob = wid.z * M * NV;
  {
    const uint gm = m0 + (0u + ty) * 4u + 0u;
    {
      const uint gn = n0 / 4u + 0u + tx;
      if (gm < M && gn < NV) {
        out0[ob + gm * NV + gn] = c0_0;
      }
    }
  }
  {
    const uint gm = m0 + (0u + ty) * 4u + 1u;
    {
      const uint gn = n0 / 4u + 0u + tx;
      if (gm < M && gn < NV) {
        out0[ob + gm * NV + gn] = c1_0;
      }
    }
  }
  {
    const uint gm = m0 + (0u + ty) * 4u + 2u;
    {
      const uint gn = n0 / 4u + 0u + tx;
      if (gm < M && gn < NV) {
        out0[ob + gm * NV + gn] = c2_0;
      }
    }
  }
  {
    const uint gm = m0 + (0u + ty) * 4u + 3u;
    {
      const uint gn = n0 / 4u + 0u + tx;
      if (gm < M && gn < NV) {
        out0[ob + gm * NV + gn] = c3_0;
      }
    }
  }
}
