// tapml MSL kernel: matmul (node 7), translated from WGSL
#include <metal_stdlib>
using namespace metal;
// vec4 tiled matmul 16x16x16/4x4 prefetch=true double=false rows4=false slices=8
constant uint M = 64u;
constant uint N = 128u;
constant uint K = 96u;
constant uint NV = 32u; // N / 4
constant uint KV = 24u; // K / 4
constant uint BK = 16u;
constant uint S = 8u; // slices of K
constant uint T = 16u; // invocations per slice
constant uint STEPS = 1u; // steps of BK per slice
constant uint AS = 64u; // vec4 per buffer of As
constant uint BS = 64u; // vec4 per buffer of Bs
kernel void tapml_main(
    device const float4* in0 [[buffer(0)]],
    device const float4* in1 [[buffer(1)]],
    device float4* out0 [[buffer(2)]],
    uint3 wid [[threadgroup_position_in_grid]],
    uint3 lid [[thread_position_in_threadgroup]],
    uint li [[thread_index_in_threadgroup]]) {
  threadgroup float4 tiles[1024]; // As [S][buf][BK][BM/4], Bs [S][buf][BK][BN/4]
  uint r_ = wid.z;
  const uint c0 = r_;
  const uint ab = (c0) * 1536u;
  const uint bb = (0u) * 3072u;
  const uint lt = li % T;
  const uint slice = li / T;
  const uint tx = lt % 4u;
  const uint ty = lt / 4u;
  const uint m0 = wid.y * 16u;
  const uint n0 = wid.x * 16u;
  const uint sa = slice * 64u; // this slice's As
  const uint sb = 512u + slice * 64u; // and Bs
  const uint am0 = (lt + 0u) / 4u;
  const uint ak0 = (lt + 0u) % 4u;
  float4 ra0 = float4(0.0f);
  const uint am1 = (lt + 16u) / 4u;
  const uint ak1 = (lt + 16u) % 4u;
  float4 ra1 = float4(0.0f);
  const uint am2 = (lt + 32u) / 4u;
  const uint ak2 = (lt + 32u) % 4u;
  float4 ra2 = float4(0.0f);
  const uint am3 = (lt + 48u) / 4u;
  const uint ak3 = (lt + 48u) % 4u;
  float4 ra3 = float4(0.0f);
  const uint bk0 = (lt + 0u) / 4u;
  const uint bn0 = (lt + 0u) % 4u;
  float4 rb0 = float4(0.0f);
  const uint bk1 = (lt + 16u) / 4u;
  const uint bn1 = (lt + 16u) % 4u;
  float4 rb1 = float4(0.0f);
  const uint bk2 = (lt + 32u) / 4u;
  const uint bn2 = (lt + 32u) % 4u;
  float4 rb2 = float4(0.0f);
  const uint bk3 = (lt + 48u) / 4u;
  const uint bn3 = (lt + 48u) % 4u;
  float4 rb3 = float4(0.0f);
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
    const uint gm = m0 + am2;
    const uint gk = (slice * BK) / 4u + ak2;
    ra2 = float4(0.0f);
    if (gm < M && gk < KV) {
      ra2 = in0[ab + gm * KV + gk];
    }
  }
  {
    const uint gm = m0 + am3;
    const uint gk = (slice * BK) / 4u + ak3;
    ra3 = float4(0.0f);
    if (gm < M && gk < KV) {
      ra3 = in0[ab + gm * KV + gk];
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
  {
    const uint gk = (slice * BK) + bk2;
    const uint gn = n0 / 4u + bn2;
    rb2 = float4(0.0f);
    if (gk < K && gn < NV) {
      rb2 = in1[bb + gk * NV + gn];
    }
  }
  {
    const uint gk = (slice * BK) + bk3;
    const uint gn = n0 / 4u + bn3;
    rb3 = float4(0.0f);
    if (gk < K && gn < NV) {
      rb3 = in1[bb + gk * NV + gn];
    }
  }
  for (uint it = 0u; it < STEPS; it++) {
    tiles[sa + 0u * AS + (ak0 * 4u + 0u) * 4u + am0 / 4u][am0 % 4u] = ra0.x;
    tiles[sa + 0u * AS + (ak0 * 4u + 1u) * 4u + am0 / 4u][am0 % 4u] = ra0.y;
    tiles[sa + 0u * AS + (ak0 * 4u + 2u) * 4u + am0 / 4u][am0 % 4u] = ra0.z;
    tiles[sa + 0u * AS + (ak0 * 4u + 3u) * 4u + am0 / 4u][am0 % 4u] = ra0.w;
    tiles[sa + 0u * AS + (ak1 * 4u + 0u) * 4u + am1 / 4u][am1 % 4u] = ra1.x;
    tiles[sa + 0u * AS + (ak1 * 4u + 1u) * 4u + am1 / 4u][am1 % 4u] = ra1.y;
    tiles[sa + 0u * AS + (ak1 * 4u + 2u) * 4u + am1 / 4u][am1 % 4u] = ra1.z;
    tiles[sa + 0u * AS + (ak1 * 4u + 3u) * 4u + am1 / 4u][am1 % 4u] = ra1.w;
    tiles[sa + 0u * AS + (ak2 * 4u + 0u) * 4u + am2 / 4u][am2 % 4u] = ra2.x;
    tiles[sa + 0u * AS + (ak2 * 4u + 1u) * 4u + am2 / 4u][am2 % 4u] = ra2.y;
    tiles[sa + 0u * AS + (ak2 * 4u + 2u) * 4u + am2 / 4u][am2 % 4u] = ra2.z;
    tiles[sa + 0u * AS + (ak2 * 4u + 3u) * 4u + am2 / 4u][am2 % 4u] = ra2.w;
    tiles[sa + 0u * AS + (ak3 * 4u + 0u) * 4u + am3 / 4u][am3 % 4u] = ra3.x;
    tiles[sa + 0u * AS + (ak3 * 4u + 1u) * 4u + am3 / 4u][am3 % 4u] = ra3.y;
    tiles[sa + 0u * AS + (ak3 * 4u + 2u) * 4u + am3 / 4u][am3 % 4u] = ra3.z;
    tiles[sa + 0u * AS + (ak3 * 4u + 3u) * 4u + am3 / 4u][am3 % 4u] = ra3.w;
    tiles[sb + 0u * BS + bk0 * 4u + bn0] = rb0;
    tiles[sb + 0u * BS + bk1 * 4u + bn1] = rb1;
    tiles[sb + 0u * BS + bk2 * 4u + bn2] = rb2;
    tiles[sb + 0u * BS + bk3 * 4u + bn3] = rb3;
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
        const uint gm = m0 + am2;
        const uint gk = ((it + 1u) * S + slice) * BK / 4u + ak2;
        ra2 = float4(0.0f);
        if (gm < M && gk < KV) {
          ra2 = in0[ab + gm * KV + gk];
        }
      }
      {
        const uint gm = m0 + am3;
        const uint gk = ((it + 1u) * S + slice) * BK / 4u + ak3;
        ra3 = float4(0.0f);
        if (gm < M && gk < KV) {
          ra3 = in0[ab + gm * KV + gk];
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
      {
        const uint gk = ((it + 1u) * S + slice) * BK + bk2;
        const uint gn = n0 / 4u + bn2;
        rb2 = float4(0.0f);
        if (gk < K && gn < NV) {
          rb2 = in1[bb + gk * NV + gn];
        }
      }
      {
        const uint gk = ((it + 1u) * S + slice) * BK + bk3;
        const uint gn = n0 / 4u + bn3;
        rb3 = float4(0.0f);
        if (gk < K && gn < NV) {
          rb3 = in1[bb + gk * NV + gn];
        }
      }
    }
    const float4 a0_0 = tiles[sa + 0u * AS + 0u + ty];
    const float4 b0_0 = tiles[sb + 0u * BS + 0u + tx];
    c0_0 = fma(float4(a0_0.x), b0_0, c0_0);
    c1_0 = fma(float4(a0_0.y), b0_0, c1_0);
    c2_0 = fma(float4(a0_0.z), b0_0, c2_0);
    c3_0 = fma(float4(a0_0.w), b0_0, c3_0);
    const float4 a1_0 = tiles[sa + 0u * AS + 4u + ty];
    const float4 b1_0 = tiles[sb + 0u * BS + 4u + tx];
    c0_0 = fma(float4(a1_0.x), b1_0, c0_0);
    c1_0 = fma(float4(a1_0.y), b1_0, c1_0);
    c2_0 = fma(float4(a1_0.z), b1_0, c2_0);
    c3_0 = fma(float4(a1_0.w), b1_0, c3_0);
    const float4 a2_0 = tiles[sa + 0u * AS + 8u + ty];
    const float4 b2_0 = tiles[sb + 0u * BS + 8u + tx];
    c0_0 = fma(float4(a2_0.x), b2_0, c0_0);
    c1_0 = fma(float4(a2_0.y), b2_0, c1_0);
    c2_0 = fma(float4(a2_0.z), b2_0, c2_0);
    c3_0 = fma(float4(a2_0.w), b2_0, c3_0);
    const float4 a3_0 = tiles[sa + 0u * AS + 12u + ty];
    const float4 b3_0 = tiles[sb + 0u * BS + 12u + tx];
    c0_0 = fma(float4(a3_0.x), b3_0, c0_0);
    c1_0 = fma(float4(a3_0.y), b3_0, c1_0);
    c2_0 = fma(float4(a3_0.z), b3_0, c2_0);
    c3_0 = fma(float4(a3_0.w), b3_0, c3_0);
    const float4 a4_0 = tiles[sa + 0u * AS + 16u + ty];
    const float4 b4_0 = tiles[sb + 0u * BS + 16u + tx];
    c0_0 = fma(float4(a4_0.x), b4_0, c0_0);
    c1_0 = fma(float4(a4_0.y), b4_0, c1_0);
    c2_0 = fma(float4(a4_0.z), b4_0, c2_0);
    c3_0 = fma(float4(a4_0.w), b4_0, c3_0);
    const float4 a5_0 = tiles[sa + 0u * AS + 20u + ty];
    const float4 b5_0 = tiles[sb + 0u * BS + 20u + tx];
    c0_0 = fma(float4(a5_0.x), b5_0, c0_0);
    c1_0 = fma(float4(a5_0.y), b5_0, c1_0);
    c2_0 = fma(float4(a5_0.z), b5_0, c2_0);
    c3_0 = fma(float4(a5_0.w), b5_0, c3_0);
    const float4 a6_0 = tiles[sa + 0u * AS + 24u + ty];
    const float4 b6_0 = tiles[sb + 0u * BS + 24u + tx];
    c0_0 = fma(float4(a6_0.x), b6_0, c0_0);
    c1_0 = fma(float4(a6_0.y), b6_0, c1_0);
    c2_0 = fma(float4(a6_0.z), b6_0, c2_0);
    c3_0 = fma(float4(a6_0.w), b6_0, c3_0);
    const float4 a7_0 = tiles[sa + 0u * AS + 28u + ty];
    const float4 b7_0 = tiles[sb + 0u * BS + 28u + tx];
    c0_0 = fma(float4(a7_0.x), b7_0, c0_0);
    c1_0 = fma(float4(a7_0.y), b7_0, c1_0);
    c2_0 = fma(float4(a7_0.z), b7_0, c2_0);
    c3_0 = fma(float4(a7_0.w), b7_0, c3_0);
    const float4 a8_0 = tiles[sa + 0u * AS + 32u + ty];
    const float4 b8_0 = tiles[sb + 0u * BS + 32u + tx];
    c0_0 = fma(float4(a8_0.x), b8_0, c0_0);
    c1_0 = fma(float4(a8_0.y), b8_0, c1_0);
    c2_0 = fma(float4(a8_0.z), b8_0, c2_0);
    c3_0 = fma(float4(a8_0.w), b8_0, c3_0);
    const float4 a9_0 = tiles[sa + 0u * AS + 36u + ty];
    const float4 b9_0 = tiles[sb + 0u * BS + 36u + tx];
    c0_0 = fma(float4(a9_0.x), b9_0, c0_0);
    c1_0 = fma(float4(a9_0.y), b9_0, c1_0);
    c2_0 = fma(float4(a9_0.z), b9_0, c2_0);
    c3_0 = fma(float4(a9_0.w), b9_0, c3_0);
    const float4 a10_0 = tiles[sa + 0u * AS + 40u + ty];
    const float4 b10_0 = tiles[sb + 0u * BS + 40u + tx];
    c0_0 = fma(float4(a10_0.x), b10_0, c0_0);
    c1_0 = fma(float4(a10_0.y), b10_0, c1_0);
    c2_0 = fma(float4(a10_0.z), b10_0, c2_0);
    c3_0 = fma(float4(a10_0.w), b10_0, c3_0);
    const float4 a11_0 = tiles[sa + 0u * AS + 44u + ty];
    const float4 b11_0 = tiles[sb + 0u * BS + 44u + tx];
    c0_0 = fma(float4(a11_0.x), b11_0, c0_0);
    c1_0 = fma(float4(a11_0.y), b11_0, c1_0);
    c2_0 = fma(float4(a11_0.z), b11_0, c2_0);
    c3_0 = fma(float4(a11_0.w), b11_0, c3_0);
    const float4 a12_0 = tiles[sa + 0u * AS + 48u + ty];
    const float4 b12_0 = tiles[sb + 0u * BS + 48u + tx];
    c0_0 = fma(float4(a12_0.x), b12_0, c0_0);
    c1_0 = fma(float4(a12_0.y), b12_0, c1_0);
    c2_0 = fma(float4(a12_0.z), b12_0, c2_0);
    c3_0 = fma(float4(a12_0.w), b12_0, c3_0);
    const float4 a13_0 = tiles[sa + 0u * AS + 52u + ty];
    const float4 b13_0 = tiles[sb + 0u * BS + 52u + tx];
    c0_0 = fma(float4(a13_0.x), b13_0, c0_0);
    c1_0 = fma(float4(a13_0.y), b13_0, c1_0);
    c2_0 = fma(float4(a13_0.z), b13_0, c2_0);
    c3_0 = fma(float4(a13_0.w), b13_0, c3_0);
    const float4 a14_0 = tiles[sa + 0u * AS + 56u + ty];
    const float4 b14_0 = tiles[sb + 0u * BS + 56u + tx];
    c0_0 = fma(float4(a14_0.x), b14_0, c0_0);
    c1_0 = fma(float4(a14_0.y), b14_0, c1_0);
    c2_0 = fma(float4(a14_0.z), b14_0, c2_0);
    c3_0 = fma(float4(a14_0.w), b14_0, c3_0);
    const float4 a15_0 = tiles[sa + 0u * AS + 60u + ty];
    const float4 b15_0 = tiles[sb + 0u * BS + 60u + tx];
    c0_0 = fma(float4(a15_0.x), b15_0, c0_0);
    c1_0 = fma(float4(a15_0.y), b15_0, c1_0);
    c2_0 = fma(float4(a15_0.z), b15_0, c2_0);
    c3_0 = fma(float4(a15_0.w), b15_0, c3_0);
    threadgroup_barrier(mem_flags::mem_threadgroup);
  }
  if (slice >= 4u && slice < 8u) {
    tiles[((slice - 4u) * 4u + 0u) * T + lt] = c0_0;
    tiles[((slice - 4u) * 4u + 1u) * T + lt] = c1_0;
    tiles[((slice - 4u) * 4u + 2u) * T + lt] = c2_0;
    tiles[((slice - 4u) * 4u + 3u) * T + lt] = c3_0;
  }
  threadgroup_barrier(mem_flags::mem_threadgroup);
  if (slice < 4u) {
    c0_0 = c0_0 + tiles[(slice * 4u + 0u) * T + lt];
    c1_0 = c1_0 + tiles[(slice * 4u + 1u) * T + lt];
    c2_0 = c2_0 + tiles[(slice * 4u + 2u) * T + lt];
    c3_0 = c3_0 + tiles[(slice * 4u + 3u) * T + lt];
  }
  threadgroup_barrier(mem_flags::mem_threadgroup);
  if (slice >= 2u && slice < 4u) {
    tiles[((slice - 2u) * 4u + 0u) * T + lt] = c0_0;
    tiles[((slice - 2u) * 4u + 1u) * T + lt] = c1_0;
    tiles[((slice - 2u) * 4u + 2u) * T + lt] = c2_0;
    tiles[((slice - 2u) * 4u + 3u) * T + lt] = c3_0;
  }
  threadgroup_barrier(mem_flags::mem_threadgroup);
  if (slice < 2u) {
    c0_0 = c0_0 + tiles[(slice * 4u + 0u) * T + lt];
    c1_0 = c1_0 + tiles[(slice * 4u + 1u) * T + lt];
    c2_0 = c2_0 + tiles[(slice * 4u + 2u) * T + lt];
    c3_0 = c3_0 + tiles[(slice * 4u + 3u) * T + lt];
  }
  threadgroup_barrier(mem_flags::mem_threadgroup);
  if (slice >= 1u && slice < 2u) {
    tiles[((slice - 1u) * 4u + 0u) * T + lt] = c0_0;
    tiles[((slice - 1u) * 4u + 1u) * T + lt] = c1_0;
    tiles[((slice - 1u) * 4u + 2u) * T + lt] = c2_0;
    tiles[((slice - 1u) * 4u + 3u) * T + lt] = c3_0;
  }
  threadgroup_barrier(mem_flags::mem_threadgroup);
  if (slice < 1u) {
    c0_0 = c0_0 + tiles[(slice * 4u + 0u) * T + lt];
    c1_0 = c1_0 + tiles[(slice * 4u + 1u) * T + lt];
    c2_0 = c2_0 + tiles[(slice * 4u + 2u) * T + lt];
    c3_0 = c3_0 + tiles[(slice * 4u + 3u) * T + lt];
  }
  if (slice != 0u) {
    return;
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
